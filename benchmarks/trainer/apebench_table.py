"""The STEPPERS table (``sweep/problems/_scenarios.py``) against APEBench's own scenario definitions.

APEBench pins ``exponax==0.1.0`` and so runs in its own venv (``--ape-python``) through
``_apebench_table_side.py``, which builds each scenario of the table in each of its dimensions
and saves two of its test states and the next state its reference stepper made, with the
scenario's defaults. Here, for each: the stepper ``Problem("apebench:<scenario>_<N>d")`` solves
(:func:`sweep.problems.pde_stepper`, exponax 0.2) applied to APEBench's first state, the largest
difference to APEBench's next state relative to its largest value ("vs APEBench"), the same to
APEBench's stepper run with exponax 0.2's dealiasing of the nonlinear term ("vs 0.2's
dealiasing": what is left once the one solver change between the versions is taken out), and the
defaults compared field by field (time step, domain, warm-up, trajectory counts and lengths,
resolution). ``NaN (APEBench)``: APEBench's own state is not finite (its scenario blew up at
that grid). ``--points 2=64``: another grid per dimension (finer grids: the versions converge).

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
# Kuramoto-Sivashinsky on [0, 60)^d blows up on coarser grids (both versions; 32 and 64 in 3D)
FINER = {("phy_ks", 2): 64, ("phy_ks", 3): 96}
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
    from sweep.problems._scenarios import COMMON, resolution

    merged = COMMON | STEPPERS[stepper].options
    return merged | {"num_points": resolution(stepper, dims)}


def _relative(pred: np.ndarray, true: np.ndarray) -> str:
    if not np.isfinite(true).all():
        return "NaN (APEBench)"
    if not np.isfinite(pred).all():
        return "NaN (ours)"
    return f"{float(np.abs(pred - true).max() / np.abs(true).max()):.2e}"


def _points(text: list[str]) -> dict[int, int]:
    try:
        return {int(d): int(n) for d, _, n in (t.partition("=") for t in text)}
    except ValueError:
        raise SystemExit(f"--points: got {text!r}; give dims=points, e.g. 2=64 3=32") from None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ape-python", required=True)
    p.add_argument("--only", nargs="*", help="APEBench scenario keys (default: every row)")
    p.add_argument("--points", nargs="*", default=[], help="dims=points per axis, e.g. 2=64 (default: POINTS, FINER)")
    args = p.parse_args()
    given = _points(args.points)

    import jax

    import sweep
    from sweep.problems import STEPPERS, pde_stepper

    sweep.configure()
    cases = [
        (row.apebench, d, stepper, given.get(d, FINER.get((row.apebench, d), POINTS[d])))
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
                json.dumps([[k, d, n] for k, d, _, n in cases]),
                "--out",
                tmp,
            ],
            cwd=ROOT,
            check=True,
        )
        configs = json.loads((Path(tmp) / "config.json").read_text())
        print("max |ours - APEBench| / max |APEBench| after one step from APEBench's test states")
        print(f"{'alias':<26} {'grid':>9} {'vs APEBench':>15} {'vs 0.2 dealias':>15}  defaults differing")
        for key, dims, stepper, n in cases:
            saved = np.load(Path(tmp) / f"{key}_{dims}d.npz")
            traj = saved["test_traj"]
            step = pde_stepper(f"apebench:{key}_{dims}d", {"num_points": n})
            pred = np.asarray(jax.vmap(step)(traj[:, 0]))
            config, mine = configs[f"{key}_{dims}d"], ours(stepper, dims)
            differing = [
                f"{a}: {config[a]} vs {mine[b]}"
                for a, b in FIELDS.items()
                if a in config and not np.isclose(float(config[a]), float(mine[b]))
            ]
            grid = "x".join([str(n)] * dims)
            errors = f"{_relative(pred, traj[:, 1]):>15} {_relative(pred, saved['post_dealiased']):>15}"
            print(f"apebench:{key}_{dims}d".ljust(26), f"{grid:>9} {errors}  {'; '.join(differing) or '-'}")


if __name__ == "__main__":
    main()
