"""Where a race's wall goes with the Tune executor: one race of ``benchmarks.tune.adaptive_seeds``
(or its full sweep, ``--full``), timed round by round.

For each round: when the loop planned it (the driver), when its first trial started and its last
reported (the trials' ``start_time`` / ``report_time`` in Tune's ``result.json``), and the
processes that ran it; then how long Tune took to end the experiment after the last trial
(``TuneController._cleanup_trials``, which waits for the trial processes still held) and the rest
of ``sweep.run`` (the aggregation). Instruments Tune's controller and the executor's round feed by
wrapping them in this process, so it reads private names of both; it changes no behaviour.

    python -m benchmarks.tune.race_timeline --sweep-seed 3          # the race
    python -m benchmarks.tune.race_timeline --sweep-seed 3 --full   # its full sweep
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from benchmarks._shared.ray_local import local_ray
from benchmarks._shared.workload import add_options


def timed(owner, name: str, spans: list) -> None:
    """Wrap ``owner.name`` so that every call appends ``(name, start, end)`` to ``spans``."""
    inner = getattr(owner, name)

    def wrapper(*args, **kwargs):
        start = time.time()
        try:
            return inner(*args, **kwargs)
        finally:
            spans.append((name, start, time.time()))

    setattr(owner, name, wrapper)


def main() -> None:
    from ray.tune.execution import tune_controller

    import sweep
    from benchmarks.tune.adaptive_seeds import specs
    from sweep.tune import _round_searcher, _tune_executor

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_options(parser, epochs=20, report_every=20)
    parser.set_defaults(points=32, samples=300, hidden=4)
    parser.add_argument("--sweep-seed", type=int, default=3)
    parser.add_argument("--full", action="store_true", help="time the full sweep instead of the race")
    parser.add_argument("--dir", default=None, help="storage (default: a fresh temporary directory)")
    args = parser.parse_args()
    args.lrs, args.depths, args.start, args.step, args.max = [3e-4, 1e-3, 3e-3, 1e-2], [1, 4], 4, 4, 64
    args.confidence, args.reference_seeds = 0.95, None
    full, race = specs(args, args.sweep_seed)
    spec = full if args.full else race

    rounds: list[float] = []  # when the loop handed each round to the executor (the last: the end)
    spans: list[tuple[str, float, float]] = []
    start_round = _round_searcher.LiveRounds._start

    def marked(live, round):
        rounds.append(time.time())
        return start_round(live, round)

    _round_searcher.LiveRounds._start = marked
    timed(_tune_executor.TuneExecutor, "train", spans)
    timed(tune_controller.TuneController, "_cleanup_trials", spans)

    local_ray(2)
    storage = args.dir or tempfile.mkdtemp(prefix="race-timeline-")
    t0 = time.time()
    path = Path(sweep.run(spec, storage=storage, options=sweep.RunOptions(progress="off")))
    t1 = time.time()
    trials = []
    for f in path.glob("tune-*/*/result.json"):
        lines = [json.loads(line) for line in f.read_text().splitlines()]
        trials.append((lines[0]["start_time"], lines[-1]["report_time"], lines[0]["pid"]))
    print(f"{spec.name}: wall {t1 - t0:.2f} s, {len(rounds) - 1} rounds, {len(trials)} trials")
    for i, (begin, end) in enumerate(zip(rounds, rounds[1:]), 1):
        mine = [t for t in trials if begin <= t[0] < end]
        if not mine:
            continue
        first, last = min(t[0] for t in mine), max(t[1] for t in mine)
        print(
            f"round {i:2d} at +{begin - t0:5.2f} s: {len(mine)} trials, first starts {first - begin:.2f} s "
            f"after, training {last - first:.2f} s, {end - last:.2f} s to the next round; "
            f"processes {sorted({t[2] for t in mine})}"
        )
    for name, a, b in spans:
        print(f"{name}: +{a - t0:.2f} s .. +{b - t0:.2f} s ({b - a:.2f} s)")
    train_end = max(b for name, _, b in spans if name == "train")
    print(f"after the executor (aggregation, the result): {t1 - train_end:.2f} s")


if __name__ == "__main__":
    main()
