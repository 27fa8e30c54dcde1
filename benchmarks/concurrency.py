"""Two 1-CPU trials at once against one trial with 2 CPUs, same members, on a local Ray.

Each trial reports a time per report; steady-state throughput is taken between a trial's first
and last report (start-up and compilation left out), in member-epochs per second, summed over
the trials that run at once. Whole-run walls are printed too.

    python benchmarks/concurrency.py            # ~1 minute per layout on 2 cores
    python benchmarks/concurrency.py --quick    # seconds: checks that it runs
"""

from __future__ import annotations

import argparse
import glob
import json
import tempfile
import time
from pathlib import Path


def spec_for(args, cpus: int, seeds_per_trial: int):
    import sweep

    return sweep.SweepSpec(
        name=f"concurrency-{cpus}cpu",
        problem=sweep.Problem("heat1d", num_points=args.points, num_samples=args.samples, data_seed=0),
        model=sweep.Model("ConvNet", hidden_channels=args.hidden, depth=args.depth, activation="relu",
                          boundary_mode="dirichlet"),
        optimizer=sweep.Optimizer("adam", learning_rate=3e-4),
        training=sweep.Training(epochs=args.epochs, batch_size=32, report_every=args.report_every),
        seeds=2 * args.seeds_per_trial,
        seeds_per_trial=seeds_per_trial,
        resources={"cpu": cpus, "gpu": 0},
    )


def measure(spec, storage: str) -> dict:
    import sweep.tune

    start = time.perf_counter()
    path = sweep.tune.run(spec, storage=storage)
    wall = time.perf_counter() - start
    trials = []
    for f in glob.glob(f"{path}/tune-*/*/result.json"):
        reports = [json.loads(line) for line in Path(f).read_text().splitlines() if line.strip()]
        first, last = reports[0], reports[-1]
        member_epochs = last["members"] * (last["epoch"] - first["epoch"])
        trials.append({"rate": member_epochs / max(last["report_time"] - first["report_time"], 1e-9),
                       "start": first["report_time"], "end": last["report_time"]})
    overlap = max(0.0, min(t["end"] for t in trials) - max(t["start"] for t in trials))
    span = max(t["end"] for t in trials) - min(t["start"] for t in trials)
    return {"wall": wall, "rate": sum(t["rate"] for t in trials), "trials": len(trials),
            "overlap": overlap / span if span > 0 else 1.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds-per-trial", type=int, default=8, help="seeds of each 1-CPU trial")
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--report-every", type=int, default=10)
    parser.add_argument("--points", type=int, default=48)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--quick", action="store_true", help="tiny workload: checks the script runs")
    args = parser.parse_args()
    if args.quick:
        args.seeds_per_trial, args.epochs, args.report_every = 2, 6, 2
        args.points, args.samples, args.hidden, args.depth = 16, 60, 4, 2

    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    b = args.seeds_per_trial
    print(f"workload: {2 * b} seeds x {args.epochs} epochs (report every {args.report_every}), ConvNet hidden "
          f"{args.hidden} depth {args.depth}, heat1d {args.points} points {args.samples} samples; Ray with 2 CPUs")
    with tempfile.TemporaryDirectory(prefix="sweep-concurrency-") as storage:
        two = measure(spec_for(args, 1, b), storage)
        one = measure(spec_for(args, 2, 2 * b), storage)
    print(f"2 trials x 1 CPU ({b} seeds each): {two['rate']:9.2f} member-epochs/s steady, "
          f"wall {two['wall']:.2f} s, trials overlapped {100 * two['overlap']:.0f}% of their span")
    print(f"1 trial  x 2 CPU ({2 * b} seeds):      {one['rate']:9.2f} member-epochs/s steady, wall {one['wall']:.2f} s")
    print(f"ratio (2x1 CPU)/(1x2 CPU): {two['rate'] / one['rate']:.3f}")


if __name__ == "__main__":
    main()
