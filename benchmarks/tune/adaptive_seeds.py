"""Adaptive seeds against the full sweep: the same answer for fewer member-epochs?

Eight configurations of heat1d (4 learning rates x 2 depths of a ConvNet with 4 hidden channels,
20 epochs). For each of 5 sweep seeds ``s``:

* the **reference**: every configuration with 64 seeds (``seeds=64, sweep_seed=s``); its answer
  is the configuration with the lowest mean validation loss, and *tied* with it are the
  configurations whose 95% bootstrap interval of the difference of means to it (64 against 64
  seeds, as ``Ensemble.compare``) contains 0: the full sweep cannot separate them;
* the **race**: ``seeds=sweep.Adaptive(start=4, step=4, max=64), sweep_seed=s`` through
  ``sweep.run``; it gives the *same answer* when the configuration it ends with as best is the
  reference's best or tied with it.

Why the reference has the race's ``sweep_seed``: a member is a function of (``sweep_seed``,
seed) alone, so the race's members are, bit for bit, members of its reference (checked below):
the race is the full sweep stopped early where it could be, and the question it must answer is
whether stopping early changed the full sweep's answer. A reference of another ``sweep_seed``
would mix that question with the noise between two independent 64-seed estimates. Beside it, each
race is also checked against the pooled references of the four *other* sweep seeds (256
independent seeds per configuration). The race's decisions are checked against
``sweep.racing.simulate`` on the reference's values (the same race, computed from the stored
members).

Cost: member-epochs of the race over those of the full sweep (8 x max x epochs): every member
trains every epoch.

``--simulated`` runs only the references and computes each race with ``sweep.racing.simulate`` on
their values (the decisions ``sweep.run``'s race takes, as the full mode checks; no race walls).
``--reference-seeds 64 --max 16`` compares races of 16 seeds against the full sweep's first 16
seeds (the same members as a 16-seed sweep: a member is a function of its seed), reusing the
64-seed references. Walls are printed with the load the other processes put on the machine. With Tune,
the rounds share one experiment and its trial processes (a round costs ~0.07 s between its last
trial and the next round's first); what is left of the race's extra wall on this small workload
is Tune's wait, as the experiment ends, for a trial process it started and then did not need (~1.3-2 s) and the aggregation's score
programs, compiled once per distinct number of members (~1 s).

    python -m benchmarks.tune.adaptive_seeds                       # ~6 minutes on 2 cores
    python -m benchmarks.tune.adaptive_seeds --sweep-seeds 0 1     # a part: --dir keeps what is done
    python -m benchmarks.tune.adaptive_seeds --quick               # ~1 minute: checks that it runs
    python -m benchmarks.tune.adaptive_seeds --simulated --reference-seeds 64 --max 16
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from benchmarks._shared.machine import OtherLoad
from benchmarks._shared.ray_local import local_ray
from benchmarks._shared.workload import add_options, make_quick, spec_from_options


def specs(args, sweep_seed: int):
    """(reference, race) specs of one sweep seed."""
    import sweep

    seeds = args.reference_seeds or args.max
    base = spec_from_options(args, name="heat", seeds=seeds, seeds_per_trial=16, cpus=1).to_dict()
    grid = {"model.depth": args.depths, "optimizer.learning_rate": args.lrs}
    base |= {"sweep_seed": sweep_seed, "grid": grid, "vmap": None}  # learning rates vmapped in a block
    reference = sweep.SweepSpec.from_dict({**base, "name": f"full-s{sweep_seed}"})
    adaptive = sweep.Adaptive(start=args.start, step=args.step, max=args.max, confidence=args.confidence)
    race = sweep.SweepSpec.from_dict(
        {**base, "name": f"race-s{sweep_seed}-max{args.max}", "seeds": {"adaptive": adaptive.to_dict()}}
    )
    return reference, race


def values_of(path) -> dict[tuple, np.ndarray]:
    """Validation losses by (depth, learning rate), in seed order."""
    import sweep

    rows = sweep.load(path).table.select(["depth", "learning_rate", "seed", "val_loss"]).to_pylist()
    out: dict[tuple, list] = {}
    for r in sorted(rows, key=lambda r: r["seed"]):
        out.setdefault((r["depth"], r["learning_rate"]), []).append(r["val_loss"])
    return {k: np.asarray(v, np.float64) for k, v in out.items()}


def answer(values: dict[tuple, np.ndarray]) -> tuple[tuple, set[tuple]]:
    """The configuration with the lowest mean, and those whose 95% bootstrap interval of the
    difference of means to it contains 0 (it included)."""
    from scipy import stats

    best = min(values, key=lambda k: values[k].mean())
    tied = {best}
    for k, v in values.items():
        if k != best:
            low, high = stats.bootstrap(
                (v, values[best]),
                lambda a, b, axis: a.mean(axis) - b.mean(axis),
                n_resamples=2000,
                method="percentile",
                rng=np.random.default_rng(0),
            ).confidence_interval
            if low <= 0 <= high:
                tied.add(k)
    return best, tied


def race_outcome(path, spec) -> dict:
    """The race's best, its members, rounds and decisions, and the race recomputed from ``values``."""
    import sweep

    ens = sweep.load(path)
    table = ens.race()
    assert table is not None
    rows = table.to_pylist()
    best = next(r for r in rows if r["best"])
    plan = json.loads((Path(path) / "plan.json").read_text())
    return {
        "best": (best["depth"], best["learning_rate"]),
        "members": len(ens),
        "rounds": len(plan["race"]["evaluations"]),
        "eliminated": {(r["depth"], r["learning_rate"]): r["round"] for r in rows if r["status"] == "eliminated"},
        "race": sweep.racing.Race.from_dict(plan["race"]),
        "ended": table.schema.metadata[b"title"].decode(),
    }


def simulated(spec, values: dict[tuple, np.ndarray]):
    """The race ``sweep.racing.simulate`` runs on the reference's values (keys as sweep.run's)."""
    import sweep
    from sweep.planning import hparams_key

    keyed = {}
    for config, hsets in spec.expand():
        for h in hsets:
            keyed[(config.config_id, hparams_key(h))] = values[(config.model.options["depth"], h["learning_rate"])]
    return sweep.racing.simulate(spec.adaptive, keyed, spec.sweep_seed)


def simulated_outcome(spec, values: dict[tuple, np.ndarray]) -> dict:
    """What ``race_outcome`` reads from a race's store, from the race ``simulate`` runs on ``values``."""
    import sweep

    race = simulated(spec, values)
    label = {}
    for config, hsets in spec.expand():
        for h in hsets:
            label[(config.config_id, sweep.planning.hparams_key(h))] = (
                config.model.options["depth"],
                h["learning_rate"],
            )
    assert race.best is not None
    trained = sweep.racing.members_trained(spec.adaptive, race, label)
    ended = sweep.racing.over(spec.adaptive, race, list(label))
    return {
        "best": label[race.best],
        "members": sum(trained.values()),
        "rounds": len(race.evaluations),
        "eliminated": {label[k]: s.round for k, s in race.decisions().items() if s.status == "eliminated"},
        "race": race,
        "ended": f"simulated: {sweep.racing.ENDS[ended] if ended else 'not over'}",
    }


def bound_members(adaptive, values: dict[tuple, np.ndarray], level: float) -> int:
    """Members of a race whose every rank test against the best is at ``level``, with no
    correction over rounds: what the targets ask of a rule, against what a guarantee allows."""
    import sweep

    alive, trained = set(values), {}
    for r in range(1, adaptive.rounds + 1):
        n = adaptive.seeds_through(r)
        trained |= dict.fromkeys(alive, n)
        best = min(sorted(alive), key=lambda k: values[k][:n].mean())
        alive -= {k for k in alive if k != best and sweep.racing.worse_p(values[k][:n], values[best][:n]) <= level}
        if len(alive) == 1:
            break
    return sum(trained.values())


def run_seed(args, sweep_seed: int, timings: dict) -> dict:
    import sweep

    reference, race = specs(args, sweep_seed)
    out = {}
    runs = (("reference", reference),) if args.simulated else (("reference", reference), ("race", race))
    for name, spec in runs:
        with OtherLoad() as load:
            start = time.perf_counter()
            options = sweep.RunOptions(executor=args.executor, progress="off")
            path = sweep.run(spec, storage=args.dir, options=options)
            wall = time.perf_counter() - start
        key = f"{name}-s{sweep_seed}" + (f"-max{args.max}" if name == "race" else "")
        if key not in timings or wall > 5:  # a rerun that trained nothing keeps the first wall
            timings[key] = {"wall": wall, "load": str(load)}
        out[name] = path
    ref_values = {k: v[: args.max] for k, v in values_of(out["reference"]).items()}
    best, tied = answer(ref_values)
    if args.simulated:
        outcome = simulated_outcome(race, ref_values)
        alpha, k = 1.0 - args.confidence, len(ref_values)
        outcome["bounds"] = [bound_members(race.adaptive, ref_values, level) for level in (alpha, alpha / (k - 1))]
        return {"sweep_seed": sweep_seed, "reference": best, "tied": tied, "values": ref_values, **outcome}
    race_values = values_of(out["race"])
    for k, v in race_values.items():  # the race's members are members of the full sweep, bit for bit
        assert np.array_equal(v, ref_values[k][: len(v)]), k
    outcome = race_outcome(out["race"], race)
    assert simulated(race, ref_values) == outcome["race"], "the race differs from simulate() on the reference"
    return {"sweep_seed": sweep_seed, "reference": best, "tied": tied, "values": ref_values, **outcome}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_options(parser, epochs=20, report_every=20)
    parser.set_defaults(points=32, samples=300, hidden=4)
    parser.add_argument("--sweep-seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--lrs", type=float, nargs="+", default=[3e-4, 1e-3, 3e-3, 1e-2])
    parser.add_argument("--depths", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--start", type=int, default=4)
    parser.add_argument("--step", type=int, default=4)
    parser.add_argument("--max", type=int, default=64)
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--reference-seeds", type=int, default=None, help="seeds of the full sweeps (default: --max)")
    parser.add_argument("--simulated", action="store_true", help="races by sweep.racing.simulate on the references")
    parser.add_argument("--dir", default="/tmp/sweep-bench-adaptive", help="storage; kept, so a rerun reuses it")
    parser.add_argument("--executor", choices=("tune", "local"), default="tune", help="sweep.RunOptions.executor")
    args = parser.parse_args()
    if args.quick:
        make_quick(args, epochs=4)
        args.sweep_seeds, args.lrs, args.depths, args.max, args.step, args.confidence = (
            [0, 1],
            [1e-2, 1e-5],
            [1, 2],
            8,
            2,
            0.5,
        )
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    if args.executor == "tune":
        local_ray(2)
    timing_file = Path(args.dir) / "timings.json"
    timings = json.loads(timing_file.read_text()) if timing_file.exists() else {}
    results = []
    for s in args.sweep_seeds:
        results.append(run_seed(args, s, timings))
        timing_file.write_text(json.dumps(timings, indent=1))
    configs = len(args.lrs) * len(args.depths)
    full = configs * args.max
    print(
        f"adaptive seeds: {configs} configurations (learning rates {args.lrs} x depths {args.depths}), heat1d "
        f"{args.points} points, {args.samples} samples, ConvNet hidden {args.hidden}, {args.epochs} epochs; "
        f"race start {args.start}, step {args.step}, max {args.max}, confidence {args.confidence}"
    )
    print(
        " seed  reference best (tied)              race best           same  rounds  members  of full  walls ref / race"
    )
    same = 0
    for r in results:
        ok = r["best"] in r["tied"]
        same += ok
        t_ref = timings[f"reference-s{r['sweep_seed']}"]
        t_race = timings.get(f"race-s{r['sweep_seed']}-max{args.max}", {"wall": math.nan})
        print(
            f"{r['sweep_seed']:5d}  {str(r['reference']):22s} ({len(r['tied'])})  {str(r['best']):18s}  "
            f"{'yes' if ok else 'NO ':4s}  {r['rounds']:6d}  {r['members']:7d}  {r['members'] / full:7.1%}  "
            f"{t_ref['wall']:.0f} s / {t_race['wall']:.0f} s"
        )
    fraction = sum(r["members"] for r in results) / (full * len(results))
    print(f"same answer as the full sweep of the same sweep seed: {same} of {len(results)} races")
    print(
        f"member-epochs of the races / of the full sweeps: {fraction:.1%} (each race: every member trains every epoch)"
    )
    if args.simulated:
        bounds = np.sum([r["bounds"] for r in results], axis=0) / (full * len(results))
        print(
            f"races whose every rank test is at 1 - confidence (no correction at all, no guarantee): "
            f"{bounds[0]:.1%} of the member-epochs; at (1 - confidence) / (K - 1) (Bonferroni over the K - 1 "
            f"rivals of one best, none over rounds or bests): {bounds[1]:.1%}"
        )
    for r in results:  # against 256 independent seeds: the references of the other sweep seeds, pooled
        others = [o["values"] for o in results if o is not r]
        if others:
            pooled = {k: np.concatenate([o[k] for o in others]) for k in r["values"]}
            best, tied = answer(pooled)
            print(
                f"sweep seed {r['sweep_seed']}: pooled other references ({len(others) * args.max} seeds) pick {best}, "
                f"tied {sorted(tied)}; the race's {r['best']} {'is' if r['best'] in tied else 'is NOT'} among them"
            )
        print(f"  race {r['sweep_seed']}: {r['ended']}; eliminated (round): {r['eliminated']}")
    for key, t in timings.items():
        print(f"wall {key}: {t['wall']:.1f} s ({t['load']})")


if __name__ == "__main__":
    main()
