"""Benchmark: aggregation throughput (members/s) and peak memory against the number of trials.

Builds fake sweep directories of T trials x 16 seeds (one structural config: ConvNet hidden 16,
depth 6 on 48 points; blocks initialised, not trained, saved as real block checkpoints with a
plan.json), then aggregates each in a fresh process and reports wall time, members/s and that
process's peak RSS, next to a process that only imports seed-sweep. The peak should stay flat
as trials grow when shards are small (``--shard-mib``): memory ~ one shard + one block.

    python -m benchmarks.store.aggregate_throughput [--trials 8 32] [--shard-mib 1 256]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from benchmarks._shared.machine import OtherLoad, peak_rss_mib
from benchmarks._shared.members import untrained_sweep
from benchmarks._shared.repo import run_json
from benchmarks._shared.workload import heat_spec

SEEDS_PER_TRIAL = 16


def _child(root: str, shard_mib: float) -> None:
    """Run in a fresh process: aggregate ``root`` (or only import, when root is empty)."""
    from sweep.store import SweepDir, sweep_sources, write_store

    seconds = 0.0
    if root:
        start = time.perf_counter()
        where = SweepDir.at(root)  # sweep.aggregate without the ensemble scores: the aggregation alone
        write_store(
            where.filesystem,
            f"{where.path}/ensembles",
            sweep_sources(where),
            where.plan(),
            where.samples(),
            shard_bytes=int(shard_mib * 2**20),
        )
        seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "peak_rss_mib": peak_rss_mib()}))


def _run(root: str, shard_mib: float) -> dict:
    return run_json(__spec__.name, "--child", root, "--shard-mib", str(shard_mib))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--shard-mib", type=float, nargs="+", default=[1.0, 256.0])
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        return _child(args.child, args.shard_mib[0])
    import sweep

    sweep.configure()  # one JAX CPU device per core, as sweep.run (the blocks are built in this process)
    baseline = _run("", 1.0)
    print(
        f"aggregate benchmark: trials x 16 seeds of one config (ConvNet hidden 16 depth 6, 48 points); "
        f"a process that only imports seed-sweep peaks at {baseline['peak_rss_mib']:.0f} MiB"
    )
    print(f"{'trials':>7}{'members':>9}{'shard MiB':>11}{'seconds':>9}{'members/s':>11}{'peak RSS MiB':>14}")
    with tempfile.TemporaryDirectory() as tmp, OtherLoad() as load:
        for trials in args.trials:
            root = Path(tmp) / f"sweep-{trials}"
            members = SEEDS_PER_TRIAL * trials
            untrained_sweep(root, heat_spec(samples=250, seeds=members, seeds_per_trial=SEEDS_PER_TRIAL))
            for shard in args.shard_mib:
                r = _run(str(root), shard)
                print(
                    f"{trials:>7}{members:>9}{shard:>11g}{r['seconds']:>9.2f}{members / r['seconds']:>11.0f}"
                    f"{r['peak_rss_mib']:>14.0f}"
                )
    print(f"while it ran, {load}")


if __name__ == "__main__":
    main()
