"""APEBench side of ``apebench_table.py``: run in the APEBench venv (from the repository root, as
a module of this package); never imports ``sweep``.

For every ``(scenario, dims, points)`` of ``--cases`` (JSON), builds APEBench's scenario at
``points`` per axis and writes into ``--out``: ``<scenario>_<dims>d.npz`` with ``test_traj`` (two test
trajectories of one step, after the scenario's warm-up: states APEBench's reference stepper
made) and ``post_dealiased`` (APEBench's reference stepper applied to the first state of each with
exponax 0.1's nonlinear terms dealiased after evaluation too, as exponax 0.2 does: see
:func:`_post_dealiasing`), and ``config.json`` with each scenario's fields.

    <apebench-venv>/bin/python -m benchmarks.trainer._apebench_table_side --cases '[["phy_adv", 2, 32]]' \
        --out /tmp/ape-table
"""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path

import apebench
import exponax
import jax
import numpy as np

from benchmarks.trainer._apebench_side import _config


@contextlib.contextmanager
def _post_dealiasing():
    """exponax 0.1's ``BaseNonlinearFun.fft`` with the dealiasing mask applied to its result, as
    exponax 0.2's is (0.2's ``ifft`` masks its input, which 0.1's nonlinear terms already do
    themselves): the one change to the nonlinear terms between the two versions."""
    base = exponax.nonlin_fun.BaseNonlinearFun
    plain = base.fft

    def fft(self, u):
        u_hat = plain(self, u)
        return u_hat if self.dealiasing_mask is None else self.dealiasing_mask * u_hat

    base.fft = fft
    try:
        yield
    finally:
        base.fft = plain


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--cases", required=True, help="JSON list of [scenario key, num_spatial_dims, num_points]")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    configs = {}
    for key, dims, points in json.loads(args.cases):
        scenario = apebench.scenarios.scenario_dict[key](
            num_spatial_dims=dims, num_points=points, num_test_samples=2, test_temporal_horizon=1
        )
        test_traj = np.asarray(scenario.get_test_data(), np.float32)
        with _post_dealiasing():
            post_dealiased = np.asarray(jax.vmap(scenario.get_ref_stepper())(test_traj[:, 0]), np.float32)
        np.savez(args.out / f"{key}_{dims}d.npz", test_traj=test_traj, post_dealiased=post_dealiased)
        default = apebench.scenarios.scenario_dict[key](num_spatial_dims=dims)
        configs[f"{key}_{dims}d"] = _config(default)
        print(f"{key}_{dims}d", flush=True)
    (args.out / "config.json").write_text(json.dumps(configs, default=str))


if __name__ == "__main__":
    main()
