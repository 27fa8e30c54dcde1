"""Two 1-CPU trials at once against one trial with 2 CPUs, same members, on a local Ray.

Each trial reports a time per report; steady-state throughput is taken between a trial's first
and last report (start-up and compilation left out), in member-epochs per second, summed over
the trials that run at once. Whole-run walls are printed too.

    python -m benchmarks.tune.concurrency            # ~1 minute per layout on 2 cores
    python -m benchmarks.tune.concurrency --quick    # seconds: checks that it runs
"""

from __future__ import annotations

import argparse
import glob
import json
import tempfile
import time
from pathlib import Path

from benchmarks._shared.machine import OtherLoad
from benchmarks._shared.ray_local import local_ray
from benchmarks._shared.workload import add_options, make_quick, spec_from_options


def spec_for(args, cpus: int, seeds_per_trial: int):
    return spec_from_options(
        args, name=f"concurrency-{cpus}cpu", seeds=2 * args.seeds_per_trial, seeds_per_trial=seeds_per_trial, cpus=cpus
    )


def measure(spec, storage: str) -> dict:
    import sweep

    start = time.perf_counter()
    path = sweep.run(spec, storage=storage)
    wall = time.perf_counter() - start
    trials = []
    for f in glob.glob(f"{path}/tune-*/*/result.json"):
        reports = [json.loads(line) for line in Path(f).read_text().splitlines() if line.strip()]
        first, last = reports[0], reports[-1]
        member_epochs = last["members"] * (last["epoch"] - first["epoch"])
        trials.append(
            {
                "rate": member_epochs / max(last["report_time"] - first["report_time"], 1e-9),
                "start": first["report_time"],
                "end": last["report_time"],
            }
        )
    overlap = max(0.0, min(t["end"] for t in trials) - max(t["start"] for t in trials))
    span = max(t["end"] for t in trials) - min(t["start"] for t in trials)
    return {
        "wall": wall,
        "rate": sum(t["rate"] for t in trials),
        "trials": len(trials),
        "overlap": overlap / span if span > 0 else 1.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds-per-trial", type=int, default=8, help="seeds of each 1-CPU trial")
    add_options(parser, epochs=100, report_every=10)
    args = parser.parse_args()
    if args.quick:
        args.seeds_per_trial = 2
        make_quick(args, epochs=6)

    local_ray(2)
    b = args.seeds_per_trial
    print(
        f"workload: {2 * b} seeds x {args.epochs} epochs (report every {args.report_every}), ConvNet hidden "
        f"{args.hidden} depth {args.depth}, heat1d {args.points} points {args.samples} samples; Ray with 2 CPUs"
    )
    with tempfile.TemporaryDirectory(prefix="sweep-concurrency-") as storage, OtherLoad() as load:
        two = measure(spec_for(args, 1, b), storage)
        one = measure(spec_for(args, 2, 2 * b), storage)
    print(
        f"2 trials x 1 CPU ({b} seeds each): {two['rate']:9.2f} member-epochs/s steady, "
        f"wall {two['wall']:.2f} s, trials overlapped {100 * two['overlap']:.0f}% of their span"
    )
    print(f"1 trial  x 2 CPU ({2 * b} seeds):      {one['rate']:9.2f} member-epochs/s steady, wall {one['wall']:.2f} s")
    print(f"ratio (2x1 CPU)/(1x2 CPU): {two['rate'] / one['rate']:.3f}; while it ran, {load}")


if __name__ == "__main__":
    main()
