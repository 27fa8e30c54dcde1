"""Benchmark: aggregation throughput (members/s) and peak memory against the number of trials.

Builds fake sweep directories of T trials x 16 seeds (one structural config: ConvNet hidden 16,
depth 6 on 48 points; blocks initialised, not trained, saved as real block checkpoints with a
plan.json), then aggregates each in a fresh process and reports wall time, members/s and that
process's peak RSS, next to a process that only imports seed-sweep. The peak should stay flat
as trials grow when shards are small (``--shard-mib``): memory ~ one shard + one block.

    python benchmarks/aggregate_throughput.py [--trials 8 32] [--shard-mib 1 256]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _spec(seeds: int):
    import sweep

    return sweep.SweepSpec(
        name="bench",
        problem=sweep.Problem("heat1d", num_points=48, num_samples=250),
        model=sweep.Model("ConvNet", hidden_channels=16, depth=6, activation="relu", boundary_mode="dirichlet"),
        optimizer=sweep.Optimizer("adam", learning_rate=3e-4),
        training=sweep.Training(epochs=1, report_every=1),
        seeds=seeds,
        seeds_per_trial=16,
    )


def _build(root: Path, trials: int) -> None:
    import sweep
    from sweep.planning import make_plan
    from sweep.training import History, data_shapes, save_block

    plan = make_plan(_spec(16 * trials))
    root.mkdir(parents=True)
    (root / "plan.json").write_text(json.dumps(plan.to_dict()))
    data = sweep.load_data(plan.trials[0].spec)
    for i, trial in enumerate(plan.trials):
        block, state = sweep.init_block(trial.spec, trial.seeds, trial.hparams, data)
        m = len(trial.seeds) * len(block.hparams)
        curve = np.zeros((m, 1), np.float32)
        history = History(
            block.seeds,
            block.hparams,
            np.array([1], np.int32),
            curve,
            {"loss": curve},
            {"loss": curve},
            np.zeros(m, bool),
        )
        save_block(
            root / "run" / f"trial_{i:05d}" / "checkpoint_000000",
            spec=trial.spec,
            state=state,
            history=history,
            shapes=data_shapes(data),
            trial_id=trial.trial_key,
        )


def _child(root: str, shard_mib: float) -> None:
    """Run in a fresh process: aggregate ``root`` (or only import, when root is empty)."""
    from sweep.store import aggregate

    seconds = 0.0
    if root:
        start = time.perf_counter()
        aggregate(root, progress=False, shard_bytes=int(shard_mib * 2**20))
        seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10}))


def _run(root: str, shard_mib: float) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", root, "--shard-mib", str(shard_mib)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--shard-mib", type=float, nargs="+", default=[1.0, 256.0])
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        return _child(args.child, args.shard_mib[0])
    baseline = _run("", 1.0)
    print(
        f"aggregate benchmark: trials x 16 seeds of one config (ConvNet hidden 16 depth 6, 48 points); "
        f"a process that only imports seed-sweep peaks at {baseline['peak_rss_mib']:.0f} MiB"
    )
    print(f"{'trials':>7}{'members':>9}{'shard MiB':>11}{'seconds':>9}{'members/s':>11}{'peak RSS MiB':>14}")
    with tempfile.TemporaryDirectory() as tmp:
        for trials in args.trials:
            root = Path(tmp) / f"sweep-{trials}"
            _build(root, trials)
            for shard in args.shard_mib:
                r = _run(str(root), shard)
                members = 16 * trials
                print(
                    f"{trials:>7}{members:>9}{shard:>11g}{r['seconds']:>9.2f}{members / r['seconds']:>11.0f}"
                    f"{r['peak_rss_mib']:>14.0f}"
                )


if __name__ == "__main__":
    main()
