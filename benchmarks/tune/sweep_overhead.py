"""Overhead of ``sweep.run`` over training the same members in-process.

(a) ``sweep.train_block`` per structural config, all seeds in one block, in a fresh process
    (JAX start and compilation included), using every core;
(b) ``sweep.run`` on a fresh local Ray in a fresh process: Ray start, planning, trials
    (``--cpus-per-trial`` each, blocks of ``--seeds-per-trial``), checkpoints every report,
    aggregation, Ray's shutdown at exit. Target: (b)/(a) <= 1.15 for a ~1 minute workload on
    2 cores. The default is the documented CPU layout: one trial with every core.

Each side is timed twice: the whole process, and until the call returned (the same minus
interpreter exit, which for (b) includes stopping the local Ray). ``--repeats N`` alternates
(a) and (b) N times and prints the median ratios (the machine is noisy).

    python -m benchmarks.tune.sweep_overhead            # ~1 minute per side on 2 cores
    python -m benchmarks.tune.sweep_overhead --cpus-per-trial 1 --seeds-per-trial 8   # 2 trials at once
    python -m benchmarks.tune.sweep_overhead --quick    # seconds: checks that it runs
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile

from benchmarks._shared.repo import run_until_returned
from benchmarks._shared.workload import add_options, make_quick, spec_from_options

CHILD = """
import json, sys, time
import sweep
spec = sweep.SweepSpec.from_dict(json.loads(sys.argv[2]))
if sys.argv[1] == "inprocess":
    sweep.configure()  # what sweep.run and every trial do
    for config, hsets in spec.expand():
        model, history = sweep.train_block(config, spec.seed_list, hsets)
else:
    sweep.run(spec, storage=sys.argv[3])
print("RETURNED", time.time())
"""


def make_spec(args) -> dict:
    return spec_from_options(
        args, name="overhead", seeds=args.seeds, seeds_per_trial=args.seeds_per_trial, cpus=args.cpus_per_trial
    ).to_dict()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=16)
    parser.add_argument("--seeds-per-trial", type=int, default=None, help="default: all seeds in one trial")
    parser.add_argument("--cpus-per-trial", type=float, default=os.cpu_count())
    parser.add_argument("--repeats", type=int, default=1)
    add_options(parser, epochs=300, report_every=25)
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.seeds_per_trial = 4, 2
        make_quick(args, epochs=4)
    args.seeds_per_trial = args.seeds_per_trial or args.seeds
    spec = make_spec(args)
    member_epochs = args.seeds * args.epochs
    print(
        f"workload: {args.seeds} seeds x {args.epochs} epochs, ConvNet hidden {args.hidden} depth {args.depth}, "
        f"heat1d {args.points} points {args.samples} samples; trials of {args.seeds_per_trial} seeds, "
        f"{args.cpus_per_trial:g} CPU each; {os.cpu_count()} CPUs"
    )
    ratios, ratios_returned = [], []
    for _ in range(args.repeats):
        a, a_ret, load = run_until_returned(CHILD, "inprocess", json.dumps(spec), "")
        print(
            f"(a) in-process train_block: {a:8.2f} s  {member_epochs / a:8.2f} member-epochs/s  (returned at {a_ret:.2f} s;"
            f" {load})"
        )
        with tempfile.TemporaryDirectory(prefix="sweep-overhead-") as storage:
            b, b_ret, load = run_until_returned(CHILD, "tune", json.dumps(spec), storage)
        print(
            f"(b) sweep.run:         {b:8.2f} s  {member_epochs / b:8.2f} member-epochs/s  (returned at {b_ret:.2f} s;"
            f" {load})"
        )
        ratios.append(b / a)
        ratios_returned.append(b_ret / a_ret)
        print(
            f"ratio (b)/(a): {b / a:.3f} whole process, {b_ret / a_ret:.3f} until the call returned  "
            f"(overhead {b - a:.1f} s; target <= 1.15 for a ~1 minute workload)"
        )
    if args.repeats > 1:
        print(
            f"median of {args.repeats}: {statistics.median(ratios):.3f} whole process, "
            f"{statistics.median(ratios_returned):.3f} until the call returned"
        )


if __name__ == "__main__":
    main()
