"""APEBench side of ``apebench_table.py``: run in the APEBench venv (from the repository root, as
a module of this package); never imports ``sweep``.

For every ``(scenario, dims)`` of ``--cases`` (JSON), builds APEBench's scenario at ``--points``
per axis and writes into ``--out``: ``<scenario>_<dims>d.npz`` with ``test_traj`` (two test
trajectories of one step, after the scenario's warm-up: states APEBench's reference stepper
made) and ``config.json`` with each scenario's fields.

    <apebench-venv>/bin/python -m benchmarks.trainer._apebench_table_side --cases '[["phy_adv", 2]]' \
        --points '{"1": 64, "2": 32, "3": 16}' --out /tmp/ape-table
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import apebench
import numpy as np

from benchmarks.trainer._apebench_side import _config


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--cases", required=True, help="JSON list of [scenario key, num_spatial_dims]")
    p.add_argument("--points", required=True, help='JSON {"dims": num_points}')
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    points = {int(k): v for k, v in json.loads(args.points).items()}
    configs = {}
    for key, dims in json.loads(args.cases):
        scenario = apebench.scenarios.scenario_dict[key](
            num_spatial_dims=dims, num_points=points[dims], num_test_samples=2, test_temporal_horizon=1
        )
        np.savez(args.out / f"{key}_{dims}d.npz", test_traj=np.asarray(scenario.get_test_data(), np.float32))
        default = apebench.scenarios.scenario_dict[key](num_spatial_dims=dims)
        configs[f"{key}_{dims}d"] = _config(default)
        print(f"{key}_{dims}d", flush=True)
    (args.out / "config.json").write_text(json.dumps(configs, default=str))


if __name__ == "__main__":
    main()
