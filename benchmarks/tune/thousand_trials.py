"""A sweep of many tiny trials through ``sweep.run``: wall time, seconds per trial, driver memory.

N trials of one seed and one epoch each (ConvNet hidden 8, depth 2 on heat1d 48 points, 250
samples; 1 CPU per trial) on a new local Ray of 2 CPUs, this script being the driver. A Tune
callback on the driver prints the driver's RSS every ``--mark-every`` finished trials (default:
at 25, 50, 75 and 100%); at the end: total wall time, seconds per trial, the RSS curve and its
growth from the first mark to the last, the driver's peak RSS and the store's member count (it
must be N). Targets: N = 1,000 in under 10 minutes, driver memory flat in the number of finished
trials; N = 10,000 in under 10 minutes, the driver growing by less than 100 MiB from 1,000 to
10,000 finished trials (``sweep.run`` trains a plan of more than 1,000 trials in waves of Tune
experiments; ``--wave-trials 0`` runs it as one experiment, to compare).

    python -m benchmarks.tune.thousand_trials                 # 1,000 trials
    python -m benchmarks.tune.thousand_trials --trials 10000 --mark-every 1000
    python -m benchmarks.tune.thousand_trials --trials 3000 --mark-every 500 --wave-trials 0   # one experiment
    python -m benchmarks.tune.thousand_trials --trials 100
    python -m benchmarks.tune.thousand_trials --trials 100 --tune-option reuse_actors=false   # Tune's default
    python -m benchmarks.tune.thousand_trials --trials 400 --tracemalloc    # where the driver's memory grows

``sweep.run`` reuses trial workers by default (``reuse_actors=True``). ``--tracemalloc`` traces the
driver's Python allocations and prints the 12 sites that grew most between the first and the
last mark (tracing slows the driver several times); ``--object-counts`` counts the driver's
objects by type at each mark (cheap) and prints the types that grew most.
"""

from __future__ import annotations

import argparse
import collections
import gc
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
    parser.add_argument(
        "--mark-every", type=int, default=None, help="print the driver's RSS every N finished trials (default: N/4)"
    )
    parser.add_argument(
        "--wave-trials",
        type=int,
        default=None,
        help="trials per wave of Tune experiments (default: sweep.run's); 0: the whole plan in one experiment",
    )
    parser.add_argument(
        "--object-counts",
        action="store_true",
        help="print the object types whose count in the driver grew most from the second mark to the last (cheap)",
    )
    parser.add_argument("--tracemalloc", action="store_true", help="print where the driver's Python memory grew")
    parser.add_argument("--frames", type=int, default=8, help="with --tracemalloc: frames kept per allocation")
    add_tune_option(parser)
    args = parser.parse_args()
    options = tune_options(args)

    from ray import tune

    import sweep
    from sweep.tune import _waves

    if args.wave_trials is not None:
        _waves.WAVE_TRIALS = args.wave_trials or 10**9
    sweep.configure()
    started = time.time()
    local_ray(2)
    ray_init_s = time.time() - started
    n = args.trials
    spec = heat_spec(
        name="thousand", epochs=1, seeds=n, seeds_per_trial=1, resources={"cpu": 1, "gpu": 0}, data_seed=0, **TINY_TRIAL
    )
    every = args.mark_every or max(1, round(n / 4))
    marks = sorted({*range(every, n + 1, every), n})
    start = time.time()

    class Memory(tune.Callback):
        def __init__(self):
            self.done, self.snapshots, self.curve, self.counts = 0, [], {}, []

        def on_trial_complete(self, iteration, trials, trial, **info):
            self.done += 1
            if self.done in marks:
                self.curve[self.done] = rss_mib()
                if args.object_counts:
                    self.counts.append(collections.Counter(type(o).__qualname__ for o in gc.get_objects()))
                traced = (
                    f"; Python heap (traced) {tracemalloc.get_traced_memory()[0] / 2**20:7.1f} MiB"
                    if args.tracemalloc
                    else ""
                )
                print(
                    f"  {self.done:>5}/{n} trials finished at {time.time() - start:7.1f} s: driver RSS "
                    f"{self.curve[self.done]:7.1f} MiB (peak so far {peak_rss_mib():7.1f} MiB){traced}",
                    flush=True,
                )
                if args.tracemalloc:
                    self.snapshots.append(tracemalloc.take_snapshot())

    if args.tracemalloc:
        tracemalloc.start(args.frames)
    memory = Memory()

    print(
        f"thousand_trials: {n} trials x 1 seed x 1 epoch (ConvNet hidden 8 depth 2, heat1d 48 points 250 samples), "
        f"1 CPU per trial, local Ray of 2 CPUs; waves of up to {_waves.wave_size(2)} trials; tune options "
        f"{options or 'none'}; driver RSS before sweep.run "
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
        print("driver RSS by finished trials: " + ", ".join(f"{k}: {v:.0f}" for k, v in memory.curve.items()) + " MiB")
        if len(memory.curve) >= 2:
            (k0, v0), (k1, v1) = next(iter(memory.curve.items())), list(memory.curve.items())[-1]
            print(
                f"driver RSS from {k0} to {k1} finished trials: {v1 - v0:+.1f} MiB "
                f"({(v1 - v0) / max(k1 - k0, 1):+.4f} MiB per trial)"
            )
        if len(memory.counts) >= 3:
            grown = memory.counts[-1] - memory.counts[1]
            print(f"objects whose count grew most from trial {marks[1]} to trial {marks[-1]} (gc-tracked, by type):")
            print("  " + ", ".join(f"{name} +{n}" for name, n in grown.most_common(15)))
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
