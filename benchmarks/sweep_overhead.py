"""Overhead of ``sweep.tune.run`` over training the same members in-process.

(a) ``sweep.train_block`` per structural config, all seeds in one block, in a fresh process
    (JAX start and compilation included), using every core;
(b) ``sweep.tune.run`` on a fresh local Ray in a fresh process: Ray start, planning, trials
    (``--cpus-per-trial`` each, blocks of ``--seeds-per-trial``), checkpoints every report,
    aggregation, Ray's shutdown at exit. Target: (b)/(a) <= 1.15 for a ~1 minute workload on
    2 cores. The default is the documented CPU layout: one trial with every core.

    python benchmarks/sweep_overhead.py            # ~1 minute per side on 2 cores
    python benchmarks/sweep_overhead.py --cpus-per-trial 1 --seeds-per-trial 8   # 2 trials at once
    python benchmarks/sweep_overhead.py --quick    # seconds: checks that it runs
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from _workload import add_options, heat_spec, make_quick

CHILD = """
import json, sys
import sweep
spec = sweep.SweepSpec.from_dict(json.loads(sys.argv[2]))
if sys.argv[1] == "inprocess":
    for config, hsets in spec.expand():
        model, history = sweep.train_block(config, spec.seed_list, hsets)
else:
    import sweep.tune
    sweep.tune.run(spec, storage=sys.argv[3])
"""


def make_spec(args) -> dict:
    return heat_spec(args, name="overhead", seeds=args.seeds, seeds_per_trial=args.seeds_per_trial,
                     cpus=args.cpus_per_trial).to_dict()


def wall(mode: str, spec: dict, storage: str = "") -> float:
    """Seconds of a whole fresh process (interpreter, imports, Ray, compilation included)."""
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, mode, json.dumps(spec), storage],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{mode} failed:\n{out.stderr[-4000:]}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=16)
    parser.add_argument("--seeds-per-trial", type=int, default=None, help="default: all seeds in one trial")
    parser.add_argument("--cpus-per-trial", type=float, default=os.cpu_count())
    add_options(parser, epochs=300, report_every=25)
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.seeds_per_trial = 4, 2
        make_quick(args, epochs=4)
    args.seeds_per_trial = args.seeds_per_trial or args.seeds
    spec = make_spec(args)
    member_epochs = args.seeds * args.epochs
    print(f"workload: {args.seeds} seeds x {args.epochs} epochs, ConvNet hidden {args.hidden} depth {args.depth}, "
          f"heat1d {args.points} points {args.samples} samples; trials of {args.seeds_per_trial} seeds, "
          f"{args.cpus_per_trial:g} CPU each; {os.cpu_count()} CPUs")
    a = wall("inprocess", spec)
    print(f"(a) in-process train_block: {a:8.2f} s  {member_epochs / a:8.2f} member-epochs/s")
    with tempfile.TemporaryDirectory(prefix="sweep-overhead-") as storage:
        b = wall("tune", spec, storage)
    print(f"(b) sweep.tune.run:         {b:8.2f} s  {member_epochs / b:8.2f} member-epochs/s")
    print(f"ratio (b)/(a): {b / a:.3f}  (target <= 1.15 for a ~1 minute workload)")


if __name__ == "__main__":
    main()
