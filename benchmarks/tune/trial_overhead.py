"""Fixed cost of a Ray Tune trial: marginal wall seconds per extra tiny trial through ``sweep.run``.

Sweeps of N1 and N2 tiny trials (1 seed per trial, 1 CPU per trial, 4 epochs of a small
ConvNet, a local Ray of 2 CPUs, so two trial slots) each run as a whole fresh process; the
difference of the walls over N2 - N1 is the marginal wall time of one more trial. Beside it, the
same members in-process (``sweep.train_block``), also as whole fresh processes at N1 and N2:

- ``loop``: one ``train_block`` per member on one core with one host device (what a trial
  computes; its marginal cost / 2 is what two slots would take per trial with no overhead);
- ``block``: all members in one ``train_block`` on every core (the CPU default).

``--timeline`` also records, for the N2 sweep, Tune's callback events on the driver and the
trials' own timestamps (``start_time``, ``report_time``, ``pid``), and prints where a trial's
time goes: slot freed -> next trial's actor started -> trial function entered -> first report ->
trial complete. ``--tune-option KEY=JSON`` passes Tune options through ``sweep.run``; since
issue 14 ``sweep.run`` reuses trial workers (``reuse_actors=True``), so
``--tune-option reuse_actors=false`` measures the old cost (a new process per trial).
``--ray sweep`` lets ``sweep.run`` start its own local Ray (every core, the driver's import path
for its workers) instead of the benchmark's (:func:`benchmarks._shared.ray_local.local_ray`).

    python -m benchmarks.tune.trial_overhead                     # N1=4, N2=16, 2 repeats
    python -m benchmarks.tune.trial_overhead --n 4 16 --repeats 3 --timeline
    python -m benchmarks.tune.trial_overhead --tune-option reuse_actors=false
    python -m benchmarks.tune.trial_overhead --tune-option reuse_actors=false --ray sweep --skip-inprocess
    python -m benchmarks.tune.trial_overhead --quick              # checks that it runs
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import tempfile
from pathlib import Path

from benchmarks._shared.machine import OtherLoad
from benchmarks._shared.ray_local import add_tune_option, tune_options
from benchmarks._shared.repo import run_until_returned
from benchmarks._shared.workload import TINY_TRIAL, add_options, spec_from_options

CHILD = r"""
import json, sys, time
import sweep
sweep.configure()  # what sweep.run and every trial do
mode, spec_json, storage, options_json, events_path, ray_of = sys.argv[1:7]
spec = sweep.SweepSpec.from_dict(json.loads(spec_json))
if mode == "block":
    for config, hsets in spec.expand():
        sweep.train_block(config, spec.seed_list, hsets)
elif mode == "loop":
    for config, hsets in spec.expand():
        for seed in spec.seed_list:
            sweep.train_block(config, [seed], hsets)
else:
    from ray import tune

    from benchmarks._shared.ray_local import local_ray, tune_configs

    if ray_of == "benchmark":
        local_ray(2)
    events = []

    class Timeline(tune.Callback):
        def setup(self, **info):
            events.append(("fit", "", time.time(), {}))

        def on_trial_start(self, iteration, trials, trial, **info):
            events.append(("start", trial.config["trial_key"], time.time(), {}))

        def on_trial_result(self, iteration, trials, trial, result, **info):
            keep = {k: result.get(k) for k in ("pid", "start_time", "report_time", "epoch", "timestamp",
                                              "time_this_iter_s", "env_before_jax", "worker_reused")}
            events.append(("result", trial.config["trial_key"], time.time(), keep))

        def on_trial_complete(self, iteration, trials, trial, **info):
            events.append(("complete", trial.config["trial_key"], time.time(), {}))

        def on_experiment_end(self, trials, **info):
            events.append(("end", "", time.time(), {}))

    options = json.loads(options_json)
    sweep.run(spec, storage=storage, **tune_configs(options, [Timeline()]))
    events.append(("returned", "", time.time(), {}))
    if events_path:
        with open(events_path, "w") as f:
            json.dump(events, f)
print("RETURNED", time.time())
"""

TRIAL_ENV = {"SWEEP_CPU_DEVICES": "1", "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"}


def make_spec(args, seeds: int) -> dict:
    return spec_from_options(args, name="overhead", seeds=seeds, seeds_per_trial=1, cpus=1).to_dict()


def wall(
    mode: str,
    spec: dict,
    storage: str = "",
    options: dict | None = None,
    events: str = "",
    env: dict | None = None,
    ray_of: str = "benchmark",
) -> tuple[float, float, OtherLoad]:
    """Seconds of a whole fresh process of ``mode``, from its start until the work returned, and
    the load of other processes meanwhile; ``ray_of``: whose local Ray the sweep runs on."""
    args = (mode, json.dumps(spec), storage, json.dumps(options or {}), events, ray_of)
    return run_until_returned(CHILD, *args, env=env)


def marginal(times: dict[int, float], n1: int, n2: int) -> float:
    return (times[n2] - times[n1]) / (n2 - n1)


def timeline(events: list, slots: int = 2) -> list[str]:
    """Where the trials' time went, from the driver's callback events and the trials' own stamps."""
    fit = next(t for e, _, t, _ in events if e == "fit")
    end = next(t for e, _, t, _ in events if e == "end")
    returned = next(t for e, _, t, _ in events if e == "returned")
    started = {k: t for e, k, t, _ in events if e == "start"}
    completed = {k: t for e, k, t, _ in events if e == "complete"}
    results: dict[str, list] = {}
    for e, k, t, r in events:
        if e == "result":
            results.setdefault(k, []).append((t, r))
    keys = sorted(started, key=started.get)
    frees = sorted(completed.values())
    seg = {
        name: []
        for name in (
            "slot freed -> actor started",
            "actor started -> function entered",
            "function entered -> first report",
            "report -> driver has result",
            "between reports",
            "last result -> complete",
            "actor started -> complete",
        )
    }
    pids = []
    for i, k in enumerate(keys):
        rows = results[k]
        first = rows[0][1]
        pids.append(first["pid"])
        if i >= slots:
            seg["slot freed -> actor started"].append(started[k] - frees[i - slots])
        seg["actor started -> function entered"].append(first["start_time"] - started[k])
        seg["function entered -> first report"].append(first["report_time"] - first["start_time"])
        seg["report -> driver has result"] += [t - r["report_time"] for t, r in rows]
        seg["between reports"] += [b[1]["report_time"] - a[1]["report_time"] for a, b in itertools.pairwise(rows)]
        seg["last result -> complete"].append(completed[k] - rows[-1][0])
        seg["actor started -> complete"].append(completed[k] - started[k])
    n = len(keys)
    lines = [
        (
            f"timeline of {n} trials ({slots} slots): Tuner.fit start -> first trial start "
            f"{started[keys[0]] - fit:.2f} s; last complete -> experiment end {end - max(completed.values()):.2f} s; "
            f"experiment end -> sweep.run returned (aggregation) {returned - end:.2f} s; "
            f"fit wall {end - fit:.2f} s = {(end - fit) / n:.3f} s per trial"
        ),
        f"worker processes: {len(set(pids))} distinct pids for {n} trials; reused workers in "
        f"{sum(bool(results[k][0][1].get('worker_reused')) for k in keys)} trials",
    ]
    for name, values in seg.items():
        if values:
            lines.append(
                f"  {name:<36} mean {statistics.mean(values):6.3f} s  median {statistics.median(values):6.3f} s"
                f"  min {min(values):6.3f}  max {max(values):6.3f}  (n={len(values)})"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, nargs=2, default=[4, 16], metavar=("N1", "N2"), help="trials per sweep")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--timeline", action="store_true", help="print where the N2 sweep's trial time went")
    add_tune_option(parser)
    parser.add_argument("--skip-inprocess", action="store_true")
    parser.add_argument(
        "--ray",
        choices=("benchmark", "sweep"),
        default="benchmark",
        help="whose local Ray: the benchmark's (2 CPUs) or the one sweep.run starts itself",
    )
    add_options(parser, epochs=4, report_every=2)
    parser.set_defaults(**TINY_TRIAL)
    args = parser.parse_args()
    if args.quick:
        args.n, args.repeats, args.points, args.samples, args.hidden, args.depth = [2, 4], 1, 16, 60, 4, 2
    n1, n2 = args.n
    options = tune_options(args)
    ray_named = "the benchmark's local Ray of 2 CPUs" if args.ray == "benchmark" else "the local Ray sweep.run starts"
    print(
        f"workload: trials of 1 seed x {args.epochs} epochs (report every {args.report_every}), ConvNet hidden "
        f"{args.hidden} depth {args.depth}, heat1d {args.points} points {args.samples} samples; 1 CPU per trial, "
        f"{ray_named}; sweeps of {n1} and {n2} trials; tune options {options or 'none'}; "
        f"{os.cpu_count()} CPUs"
    )
    rows = {m: [] for m in ("sweep", "sweep_returned", "loop", "block")}
    timeline_lines: list[str] = []
    for repeat in range(args.repeats):
        times = {m: {} for m in rows}
        loads = []
        for n in (n1, n2):
            spec = make_spec(args, n)
            with tempfile.TemporaryDirectory(prefix="sweep-trials-") as storage:
                events = str(Path(storage) / "events.json") if args.timeline and n == n2 else ""
                times["sweep"][n], times["sweep_returned"][n], load = wall(
                    "sweep", spec, storage, options, events, ray_of=args.ray
                )
                loads.append(load.cores)
                if events:
                    timeline_lines = timeline(json.loads(Path(events).read_text()))
            if not args.skip_inprocess:
                times["loop"][n], _, _ = wall("loop", spec, env=TRIAL_ENV)
                times["block"][n], _, _ = wall("block", spec)
            line = "  ".join(f"{m} {times[m][n]:6.2f} s" for m in rows if n in times[m])
            print(f"repeat {repeat + 1}, {n:>4} trials: {line}  (during the sweep: {load})", flush=True)
        for m, values in rows.items():
            if times[m]:
                values.append(marginal(times[m], n1, n2))
        print(
            f"repeat {repeat + 1}: marginal per extra trial/member: "
            + "  ".join(f"{m} {rows[m][-1]:.3f} s" for m in rows if rows[m])
            + f"  (other processes during the sweeps: {max(loads):.2f} cores at most)",
            flush=True,
        )
    med = {m: statistics.median(v) for m, v in rows.items() if v}
    print(
        f"median of {args.repeats}: sweep.run {med['sweep']:.3f} s per extra trial (whole process; "
        f"{med['sweep_returned']:.3f} s until sweep.run returned), i.e. {2 * med['sweep']:.3f} slot-seconds per trial "
        f"with 2 slots; target <= 0.3 s per extra trial"
    )
    if "loop" in med:
        print(
            f"in-process, same members: one train_block per member on 1 core {med['loop']:.3f} s per member "
            f"(two slots with no overhead: {med['loop'] / 2:.3f} s per trial); one block on every core "
            f"{med['block']:.4f} s per member"
        )
        print(
            f"ratio sweep.run / one-core loop (per trial / per member): {med['sweep'] / med['loop']:.1f}x; "
            f"fixed cost per trial with 2 slots ~ {2 * med['sweep'] - med['loop']:.3f} slot-seconds"
        )
    for line in timeline_lines:
        print(line)


if __name__ == "__main__":
    main()
