"""The STEPPERS table (``sweep/problems/_scenarios.py``) against APEBench's own scenario definitions.

APEBench pins ``exponax==0.1.0`` and so runs in its own venv (``--ape-python``) through
``_apebench_table_side.py``, which builds each scenario of the table in each of its dimensions
and saves two of its test states and the next state its reference stepper made, with the
scenario's defaults. Here, for each: the stepper ``Problem("apebench:<scenario>_<N>d")`` solves
(:func:`sweep.problems.pde_stepper`, exponax 0.2) applied to APEBench's first state, the largest
difference to APEBench's next state relative to its largest value, and the defaults compared
field by field (time step, domain, warm-up, trajectory counts and lengths, resolution).

    python -m benchmarks.trainer.apebench_table --ape-python <apebench-venv>/bin/python
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from benchmarks._shared.repo import ROOT

POINTS = {1: 64, 2: 32, 3: 16}  # per axis for the stepper check (the defaults are checked as given)
# APEBench's field -> seed-sweep's resolved option
FIELDS = {
    "dt": "dt",
    "domain_extent": "domain_extent",
    "num_warmup_steps": "warmup_steps",
    "num_train_samples": "num_train",
    "train_temporal_horizon": "train_steps",
    "num_test_samples": "num_test",
    "test_temporal_horizon": "test_steps",
    "num_points": "num_points",
}


def ours(stepper: str, dims: int) -> dict:
    from sweep.problems import STEPPERS
    from sweep.problems._scenarios import COMMON, RESOLUTION

    merged = COMMON | STEPPERS[stepper].options
    return merged | {"num_points": RESOLUTION[dims]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ape-python", required=True)
    p.add_argument("--only", nargs="*", help="APEBench scenario keys (default: every row)")
    args = p.parse_args()

    import jax

    import sweep
    from sweep.problems import STEPPERS, pde_stepper

    sweep.configure()
    cases = [
        (row.apebench, d, stepper)
        for stepper, row in STEPPERS.items()
        for d in row.dims
        if not args.only or row.apebench in args.only
    ]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                args.ape_python,
                "-m",
                "benchmarks.trainer._apebench_table_side",
                "--cases",
                json.dumps([[k, d] for k, d, _ in cases]),
                "--points",
                json.dumps(POINTS),
                "--out",
                tmp,
            ],
            cwd=ROOT,
            check=True,
        )
        configs = json.loads((Path(tmp) / "config.json").read_text())
        print(f"{'alias':<26} {'grid':>8} {'max |ours - APEBench| / max |APEBench|':>40}  defaults differing")
        for key, dims, stepper in cases:
            traj = np.load(Path(tmp) / f"{key}_{dims}d.npz")["test_traj"]
            step = pde_stepper(f"apebench:{key}_{dims}d", {"num_points": POINTS[dims]})
            pred = np.asarray(jax.vmap(step)(traj[:, 0]))
            error = float(np.abs(pred - traj[:, 1]).max() / np.abs(traj[:, 1]).max())
            config, mine = configs[f"{key}_{dims}d"], ours(stepper, dims)
            differing = [
                f"{a}: {config[a]} vs {mine[b]}"
                for a, b in FIELDS.items()
                if a in config and not np.isclose(float(config[a]), float(mine[b]))
            ]
            grid = "x".join([str(POINTS[dims])] * dims)
            print(f"apebench:{key}_{dims}d".ljust(26), f"{grid:>8} {error:40.2e}  {'; '.join(differing) or '-'}")


if __name__ == "__main__":
    main()
