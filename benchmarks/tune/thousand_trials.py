"""A sweep of many tiny trials through ``sweep.run``: wall time, seconds per trial, driver memory.

N trials of one seed and one epoch each (ConvNet hidden 8, depth 2 on heat1d 48 points, 250
samples; 1 CPU per trial) on a new local Ray of 2 CPUs, this script being the driver. A Tune
callback on the driver prints the driver's RSS when 25, 50, 75 and 100% of the trials have
finished; at the end: total wall time, seconds per trial, the driver's peak RSS and the store's
member count (it must be N). Target (issue 14): N = 1,000 in under 10 minutes, driver memory flat
in the number of finished trials.

    python -m benchmarks.tune.thousand_trials                 # 1,000 trials
    python -m benchmarks.tune.thousand_trials --trials 100
    python -m benchmarks.tune.thousand_trials --trials 100 --tune-option reuse_actors=false   # Tune's default
    python -m benchmarks.tune.thousand_trials --trials 400 --tracemalloc    # where the driver's memory grows

``sweep.run`` reuses trial workers by default (``reuse_actors=True``). ``--tracemalloc`` traces the
driver's Python allocations and prints the 12 sites that grew most between the first and the
last mark (tracing slows the driver).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from benchmarks._shared.machine import OtherLoad, peak_rss_mib, rss_mib
from benchmarks._shared.ray_local import add_tune_option, local_ray, tune_configs, tune_options
from benchmarks._shared.workload import TINY_TRIAL, heat_spec

PROCESS_START = time.time()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--storage", default=None, help="default: a temporary directory, removed at the end")
    parser.add_argument("--tracemalloc", action="store_true", help="print where the driver's Python memory grew")
    parser.add_argument("--frames", type=int, default=8, help="with --tracemalloc: frames kept per allocation")
    add_tune_option(parser)
    args = parser.parse_args()
    options = tune_options(args)

    from ray import tune

    import sweep

    sweep.configure()
    started = time.time()
    local_ray(2)
    ray_init_s = time.time() - started
    n = args.trials
    spec = heat_spec(
        name="thousand", epochs=1, seeds=n, seeds_per_trial=1, resources={"cpu": 1, "gpu": 0}, data_seed=0, **TINY_TRIAL
    )
    marks = sorted({max(1, round(n * f)) for f in (0.25, 0.5, 0.75, 1.0)})
    start = time.time()

    class Memory(tune.Callback):
        def __init__(self):
            self.done, self.snapshots = 0, []

        def on_trial_complete(self, iteration, trials, trial, **info):
            self.done += 1
            if self.done in marks:
                traced = (
                    f"; Python heap (traced) {tracemalloc.get_traced_memory()[0] / 2**20:7.1f} MiB"
                    if args.tracemalloc
                    else ""
                )
                print(
                    f"  {self.done:>5}/{n} trials finished at {time.time() - start:7.1f} s: driver RSS "
                    f"{rss_mib():7.1f} MiB (peak so far {peak_rss_mib():7.1f} MiB){traced}",
                    flush=True,
                )
                if args.tracemalloc:
                    self.snapshots.append(tracemalloc.take_snapshot())

    if args.tracemalloc:
        tracemalloc.start(args.frames)
    memory = Memory()

    print(
        f"thousand_trials: {n} trials x 1 seed x 1 epoch (ConvNet hidden 8 depth 2, heat1d 48 points 250 samples), "
        f"1 CPU per trial, local Ray of 2 CPUs; tune options {options or 'none'}; driver RSS before sweep.run "
        f"{rss_mib():.1f} MiB",
        flush=True,
    )
    storage = args.storage or tempfile.mkdtemp(prefix="sweep-thousand-")
    try:
        with OtherLoad() as load:
            path = sweep.run(spec, storage=storage, **tune_configs(options, [memory]))
        ran = time.time() - start
        after = rss_mib()
        members = len(sweep.load(path))
        total = time.time() - PROCESS_START
        print(
            f"sweep.run: {ran:.1f} s for {n} trials = {ran / n:.3f} s per trial ({2 * ran / n:.3f} slot-seconds); "
            f"process start -> store loaded {total:.1f} s (ray.init {ray_init_s:.1f} s); during sweep.run {load}"
        )
        print(
            f"driver RSS after sweep.run {after:.1f} MiB, peak {peak_rss_mib():.1f} MiB; store members {members} "
            f"(expected {n}){'' if members == n else '  MISMATCH'}"
        )
        if len(memory.snapshots) >= 2:
            first, last = memory.snapshots[0], memory.snapshots[-1]
            print(f"Python allocations that grew most from trial {marks[0]} to trial {marks[-1]} (tracemalloc):")
            stats = last.compare_to(first, "traceback")
            print(f"  in all {sum(s.size_diff for s in stats) / 2**20:+.2f} MiB")
            for stat in stats[:12]:
                frames = [f"{Path(f.filename).name}:{f.lineno}" for f in stat.traceback][-4:]
                print(
                    f"  {stat.size_diff / 2**20:+8.2f} MiB {stat.count_diff:+8d} blocks  {' <- '.join(reversed(frames))}"
                )
    finally:
        if not args.storage:
            import shutil

            shutil.rmtree(storage, ignore_errors=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
