"""The race of adaptive seeds (:class:`sweep.Adaptive`) as pure functions: no Ray, no files.

A *configuration* is one grid point: a structural config and one set of vmapped
hyperparameters, named by its :data:`Key` ``(config_id, hparams_key)``. The race is a sequence of
:class:`Evaluation` records, one per round: the interval of every configuration still in it and
what was decided. Given the records and how many rounds of seeds each configuration has trained,
:func:`next_step` says what comes next (evaluate, train the next round, or stop), so a resumed
race takes the same steps as an uninterrupted one::

    race = Race()
    while (step := next_step(adaptive, race, keys, trained)).over is None:
        if step.train:      # {key: round}: train these rounds, then count them in `trained`
            ...
        else:               # every configuration due has its round: evaluate it
            race = race.add(evaluate(adaptive, race, keys, step.evaluate, values, sweep_seeds))

:func:`simulate` runs a whole race on values known in advance (tests, the benchmark).

The statistics (docs: How-to guides > Adaptive seeds) follow one of two :data:`RULES`, recorded
in every :class:`Evaluation` so that a stored race goes on under the rule it started with
(:func:`rule_of`):

* ``"rank"`` (races without ``precision``): each racing configuration is tested against the best
  (by mean) with an exact one-sided Wilcoxon-Mann-Whitney rank test (:mod:`sweep.racing._rank_test`) and
  eliminated when its p-value is at most the round's level (:func:`rank_levels`). The levels split
  ``1 - confidence`` over the ``K (K - 1)`` ordered pairs of configurations and spend it over the
  rounds that can decide, most on the first: if the seeds of each configuration are independent
  draws, every configuration whose values are stochastically no worse than any other's (all of
  them, when the configurations are equal) is kept with probability at least ``confidence``, for
  any distribution of the values. A race decides from the first round whose seeds can give a
  p-value that small (:func:`first_decision`: 6 seeds for 3 configurations at 0.95 with ``start=3,
  step=3``).
* ``"interval"`` (races with ``precision``, and races stored before the rank rule): each interval
  is a percentile bootstrap interval of the mean over the configuration's seeds so far
  (``scipy.stats.bootstrap``), its level corrected by the union bound over ``K`` configurations
  and the ``R`` rounds that can give a bounded interval (:func:`interval_level`). Without
  ``precision``, the race reads one end of each interval: each end misses with probability ``(1 -
  confidence) / (K * R)``, and with probability at least ``confidence`` a configuration with the
  best mean is never eliminated. With ``precision``, a decided configuration's whole interval is
  a claim: each interval is at ``1 - (1 - confidence) / (K * R)``, and every interval the race
  computes covers its configuration's mean together with probability at least ``confidence``.
  Each interval's resampling is seeded from (``sweep_seed``, round, configuration), so it is the
  same number wherever and whenever it is computed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from .._canonical import digest
from ..spec import Adaptive
from ._mean_interval import Interval, mean_interval, min_seeds
from ._rank_test import round_levels, worse_p

Key = tuple[str, str]  # (config_id, hparams_key text): one configuration
STATUSES = ("racing", "eliminated", "decided")
RULES = ("rank", "interval")  # how a race decides: rank tests against the best, or intervals of the means
ENDS = {  # why a race ended
    "one_left": "one configuration left",
    "none_racing": "every configuration decided or eliminated",
    "max_reached": "every configuration still racing has max seeds",
}


def _json_number(x: float) -> float | str | None:
    """A float as strict JSON holds it: NaN as null, infinities as ``"inf"`` / ``"-inf"``."""
    return x if math.isfinite(x) else None if math.isnan(x) else str(x)


@dataclasses.dataclass(frozen=True)
class Standing:
    """One configuration at one evaluation: the round of seeds behind its interval and its status
    after the evaluation (``racing``, ``eliminated`` or ``decided``)."""

    config_id: str
    hparams: str  # sweep.planning.hparams_key text
    round: int
    seeds: int  # seeds of rounds 1..round
    interval: Interval
    status: str
    p: float | None = None  # rule "rank": the p-value of its test against the best (None: not tested)

    @property
    def key(self) -> Key:
        return (self.config_id, self.hparams)

    def to_dict(self) -> dict[str, Any]:
        return {
            "config_id": self.config_id,
            "hparams": self.hparams,
            "round": self.round,
            "seeds": self.seeds,
            **{f: _json_number(getattr(self.interval, f)) for f in ("mean", "low", "high")},
            "used": self.interval.used,
            "status": self.status,
            "p": self.p,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Standing:
        mean, low, high = (math.nan if data[f] is None else float(data[f]) for f in ("mean", "low", "high"))
        interval = Interval(mean, low, high, int(data["used"]))
        if data["status"] not in STATUSES:
            raise ValueError(f"status {data['status']!r} is not one of {', '.join(STATUSES)}")
        return cls(
            str(data["config_id"]),
            str(data["hparams"]),
            int(data["round"]),
            int(data["seeds"]),
            interval,
            data["status"],
            None if data.get("p") is None else float(data["p"]),
        )


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """One round of the race: the standing of every configuration not eliminated before it, the
    best one (by mean), the rule that decided (a key of :data:`RULES`) and its level: of the
    intervals (rule ``"interval"``), of the tests of the latest round (rule ``"rank"``)."""

    number: int  # 1-based
    level: float
    standings: tuple[Standing, ...]
    best: Key | None
    rule: str = "interval"  # what races recorded before the rank rule decided by

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "rule": self.rule,
            "level": self.level,
            "best": None if self.best is None else list(self.best),
            "standings": [s.to_dict() for s in self.standings],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Evaluation:
        best = data.get("best")
        rule = data.get("rule", "interval")
        if rule not in RULES:
            raise ValueError(f"rule {rule!r} is not one of {', '.join(RULES)}")
        return cls(
            int(data["number"]),
            float(data["level"]),
            tuple(Standing.from_dict(s) for s in data["standings"]),
            None if best is None else (str(best[0]), str(best[1])),
            rule,
        )


@dataclasses.dataclass(frozen=True)
class Race:
    """Every evaluation of a race so far (``plan.json`` keeps it: ``Plan.race``)."""

    evaluations: tuple[Evaluation, ...] = ()

    def add(self, evaluation: Evaluation) -> Race:
        return Race((*self.evaluations, evaluation))

    def latest(self) -> dict[Key, Standing]:
        """The last standing of every configuration evaluated so far."""
        return {s.key: s for e in self.evaluations for s in e.standings}

    def decisions(self) -> dict[Key, Standing]:
        """The standing at which each eliminated or decided configuration left the race."""
        out: dict[Key, Standing] = {}
        for e in self.evaluations:
            for s in e.standings:
                if s.status != "racing" and s.key not in out:
                    out[s.key] = s
        return out

    @property
    def best(self) -> Key | None:
        """The best configuration of the latest evaluation."""
        return self.evaluations[-1].best if self.evaluations else None

    def to_dict(self) -> dict[str, Any]:
        return {"evaluations": [e.to_dict() for e in self.evaluations]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Race:
        return cls(tuple(Evaluation.from_dict(e) for e in data["evaluations"]))


# -- statistics -----------------------------------------------------------------------------------
def interval_level(adaptive: Adaptive, num_configs: int) -> float:
    """The level of each interval: ``1 - m * (1 - confidence) / (num_configs * R)``, where ``R``
    is the number of rounds whose seeds are enough for an interval at that level
    (:func:`min_seeds`) and ``m`` is 2 without ``precision`` (one tail of each interval counts),
    1 with it (both tails count; :func:`guarantee`).

    Without ``precision`` the race decides on one end of each interval: it eliminates a
    configuration when the end of its interval towards the best lies beyond the best's end towards
    it. A configuration ``b`` with the best mean is eliminated only if its own end misses (lies
    beyond its mean) or the end of the configuration that beat it misses (lies short of that
    one's mean, which is no better than ``b``'s): ``K`` ends per round can make that mistake, each
    missing with probability ``(1 - confidence) / (K * R)`` (one tail of the interval), so by the
    union bound ``b`` stays with probability at least ``confidence``. With ``precision``, a
    decided configuration's interval claims its mean on both sides: each interval then misses
    with probability at most ``(1 - confidence) / (K * R)``, both tails together.

    Before a configuration has the seeds an interval needs, its interval is unbounded: it misses
    nothing and spends nothing of the error budget, so the union bound counts only the rounds that
    can give a bounded interval. ``R`` is the smallest count that holds at its own level (for 8
    configurations, ``start=4, step=4, max=64`` and 0.95: without ``precision`` 14 of the 16
    rounds, level 0.99911, first bounded interval from 12 seeds; with it 13 rounds, level
    0.99952, from 16 seeds).
    """
    counted_tails = 1 if adaptive.precision is None else 2  # of each interval, against the budget
    budget, rounds = 2 / counted_tails * (1.0 - adaptive.confidence) / max(1, num_configs), adaptive.rounds
    for looks in range(1, rounds):
        level = 1.0 - budget / looks
        bounded = sum(adaptive.seeds_through(r) >= min_seeds(level) for r in range(1, rounds + 1))
        if bounded <= looks:
            return level
    return 1.0 - budget / rounds


def rule_of(adaptive: Adaptive, race: Race) -> str:
    """The rule the race's next evaluation decides by (a key of :data:`RULES`): ``"interval"``
    with ``precision`` (a decided configuration's interval is a claim) and for a race that began
    under it (every race stored before the rank rule), else ``"rank"``."""
    if adaptive.precision is not None or (race.evaluations and race.evaluations[0].rule == "interval"):
        return "interval"
    return "rank"


def rank_levels(adaptive: Adaptive, num_configs: int) -> tuple[float, ...]:
    """Rule ``"rank"``: the level of the tests at rounds ``1..rounds`` (``0.0`` at a round whose
    seeds cannot give a p-value that small: ``n`` against ``n`` give at least ``1 / C(2n, n)``).

    ``1 - confidence`` is divided among the ``K (K - 1)`` ordered pairs of configurations; of a
    pair's share, the ``k``-th round that can decide spends ``1 / (k (k + 1))``, the last one what
    is left. A configuration ``b`` whose values are stochastically no worse than every other's is
    eliminated only if its test against the configuration that is best at some round rejects; if
    its seeds are independent draws, each of its ``K - 1`` pairs rejects at a round with
    probability at most the level, whatever the distribution (worse values of the other only raise
    the p-value). Over all such ``b`` (at most ``K``) and all rounds, by the union bound, every one
    of them stays with probability at least ``confidence``: with equal configurations, all of
    them. For 3 configurations, ``start=3, step=3, max=9`` and 0.95: ``(0, 0.0042, 0.0042)``, so 6
    seeds all worse than the best's 6 (p ``1 / 924``) are eliminated.
    """
    seeds = [adaptive.seeds_through(r) for r in range(1, adaptive.rounds + 1)]
    return round_levels(seeds, adaptive.confidence, num_configs)


def first_decision(adaptive: Adaptive, num_configs: int, rule: str = "rank") -> int | None:
    """The seeds of the first round at which a configuration can be eliminated under ``rule``
    (None: the budget lets the race decide nothing). Rule ``"rank"``: the first round whose level
    a p-value from that many seeds can reach (``1 / C(2n, n)``); rule ``"interval"``: the first
    with :func:`min_seeds` of :func:`interval_level`."""
    if rule == "rank":
        levels = rank_levels(adaptive, num_configs)
        decisive = (r for r, level in enumerate(levels, 1) if level > 0)
    else:
        needed = min_seeds(interval_level(adaptive, num_configs))
        decisive = (r for r in range(1, adaptive.rounds + 1) if adaptive.seeds_through(r) >= needed)
    first = next(decisive, None)
    return None if first is None or num_configs < 2 else adaptive.seeds_through(first)


def guarantee(confidence: float, precision: float | None) -> str:
    """What a race's ``confidence`` holds, in words (the live display, ``sweep show``, the store):
    without ``precision`` the best is kept, with it every interval covers (:func:`interval_level`)."""
    if precision is None:
        return f"a best configuration kept at {confidence:g}"
    return f"intervals simultaneous at {confidence:g}"


def decides(adaptive: Adaptive, race: Race, num_configs: int) -> str:
    """How the race decides and from when: ``rank tests against the best, first decision after 6
    seeds``, or what keeps it from deciding anything."""
    rule = rule_of(adaptive, race)
    how = (
        "rank tests against the best"
        if rule == "rank"
        else f"each interval at {interval_level(adaptive, num_configs):.4g}"
    )
    first = first_decision(adaptive, num_configs, rule)
    if num_configs < 2:
        return f"{how}; one configuration: nothing to compare"
    if first is None:
        return (
            f"{how}; no configuration can be eliminated within max={adaptive.max} seeds at confidence "
            f"{adaptive.confidence:g}: raise max or lower confidence"
        )
    return f"{how}, first decision after {first} seeds"


def interval_seed(sweep_seed: int, round: int, key: Key) -> int:
    """The resampling seed of a configuration's interval at ``round``."""
    return int(digest([sweep_seed, round, list(key)], 16), 16)


# -- the race -------------------------------------------------------------------------------------
class Step(NamedTuple):
    """What the race does next: train rounds (``{key: round}``), evaluate (``{key: round}`` of
    every configuration not eliminated), or nothing because it is ``over`` (a key of :data:`ENDS`)."""

    train: dict[Key, int]
    evaluate: dict[Key, int]
    over: str | None


def over(adaptive: Adaptive, race: Race, keys: Sequence[Key]) -> str | None:
    """Why the race over ``keys`` has ended (a key of :data:`ENDS`), or None while it goes on.

    A configuration never evaluated (one just added to the grid) is racing at round 0.
    """
    latest = race.latest()
    status = {k: latest[k].status if k in latest else "racing" for k in keys}
    racing = [k for k in keys if status[k] == "racing"]
    if not racing:
        return "none_racing"
    if any(k not in latest for k in keys):
        return None
    alive = [k for k in keys if status[k] != "eliminated"]
    if len(alive) == 1 and adaptive.precision is None:
        return "one_left"
    if all(latest[k].round >= adaptive.rounds for k in racing):
        return "max_reached"
    return None


def next_step(adaptive: Adaptive, race: Race, keys: Sequence[Key], trained: Mapping[Key, int]) -> Step:
    """The race's next step, given the rounds of seeds each configuration has trained.

    The configurations *due* are the racing ones furthest behind (fewest rounds evaluated, below
    ``rounds``): in a race that started together, every racing configuration; configurations added
    to the grid later catch up from round 1. Those due train their next round; once every one has
    it, the race evaluates (due ones at their new round, the rest where they are).
    """
    ended = over(adaptive, race, keys)
    if ended is not None:
        return Step({}, {}, ended)
    latest = race.latest()
    evaluated = {k: latest[k].round if k in latest else 0 for k in keys}
    movable = [k for k in keys if (k not in latest or latest[k].status == "racing") and evaluated[k] < adaptive.rounds]
    low = min(evaluated[k] for k in movable)
    due = [k for k in movable if evaluated[k] == low]
    short = {k: low + 1 for k in due if trained.get(k, 0) < low + 1}
    if short:
        return Step(short, {}, None)
    alive = [k for k in keys if k not in latest or latest[k].status != "eliminated"]
    return Step({}, {k: low + 1 if k in due else evaluated[k] for k in alive}, None)


def evaluate(
    adaptive: Adaptive,
    race: Race,
    keys: Sequence[Key],
    rounds: Mapping[Key, int],
    values: Callable[[Key, int], np.ndarray],
    sweep_seeds: Mapping[Key, int],
) -> Evaluation:
    """The next evaluation: every configuration in ``rounds`` from ``values(key, n)`` (its metric
    over seeds ``0..n-1``, diverged members as NaN, left out), the best one, and who leaves.

    The best is the configuration with the best mean among those not eliminated (the first in
    ``keys`` on a tie); one with no finite value is eliminated. Rule ``"rank"``: a racing
    configuration whose rank test against the best gives a p-value at most its round's level
    (:func:`rank_levels`) is eliminated. Rule ``"interval"``: one whose interval lies wholly on
    the worse side of the best's is eliminated; with ``precision``, a racing one left whose
    interval is narrower than ``precision * |mean|`` is decided. Earlier decisions stand.
    """
    rule = rule_of(adaptive, race)
    ranks = rule == "rank"
    levels = rank_levels(adaptive, len(keys)) if ranks else ()
    level = levels[max(rounds.values()) - 1] if ranks else interval_level(adaptive, len(keys))
    sign = 1.0 if adaptive.mode == "min" else -1.0
    latest = race.latest()
    found = {}
    for k in (k for k in keys if k in rounds):
        n = adaptive.seeds_through(rounds[k])
        v = np.asarray(values(k, n), np.float64)
        if ranks:
            finite = sign * v[np.isfinite(v)]
            mean = float(sign * finite.mean()) if finite.size else math.nan
            found[k] = (n, Interval(mean, math.nan, math.nan, int(finite.size)), finite)
        else:
            found[k] = (n, mean_interval(v, level, interval_seed(sweep_seeds[k], rounds[k], k)), v)
    ranked = sorted((sign * iv.mean, i) for i, (k, (_, iv, _)) in enumerate(found.items()) if math.isfinite(iv.mean))
    best = list(found)[ranked[0][1]] if ranked else None
    # rule "interval": the best's end on the side that eliminates: its upper end (mode "min"), its lower end ("max")
    bound = math.inf if best is None else sign * (found[best][1].high if sign > 0 else found[best][1].low)
    standings = []
    for k, (n, iv, v) in found.items():
        status, p = latest[k].status if k in latest else "racing", None
        if status == "racing" and k != best:
            if ranks and best is not None and v.size:
                p = float(worse_p(v, found[best][2]))  # both signed: larger is worse
                worse = p <= levels[rounds[k] - 1]
            else:
                worse = sign * (iv.low if sign > 0 else iv.high) > bound  # its end nearest the best
            if not math.isfinite(iv.mean) or worse:
                status = "eliminated"
        if status == "racing" and adaptive.precision is not None and iv.used > 1 and iv.mean != 0:
            if (iv.high - iv.low) <= adaptive.precision * abs(iv.mean):
                status = "decided"
        standings.append(Standing(k[0], k[1], rounds[k], n, iv, status, p))
    return Evaluation(len(race.evaluations) + 1, level, tuple(standings), best, rule)


def simulate(
    adaptive: Adaptive,
    values: Mapping[Key, np.ndarray],
    sweep_seeds: Mapping[Key, int] | int = 0,
    race: Race | None = None,
) -> Race:
    """The race over ``values`` (per configuration, its metric at seeds ``0..max-1``), continued
    from ``race``: as :func:`sweep.run` would run it on members with these values."""
    keys = list(values)
    seeds = sweep_seeds if isinstance(sweep_seeds, Mapping) else dict.fromkeys(keys, sweep_seeds)
    race = race or Race()
    trained: dict[Key, int] = {}
    while (step := next_step(adaptive, race, keys, trained)).over is None:
        if step.train:
            trained.update(step.train)
            continue
        race = race.add(evaluate(adaptive, race, keys, step.evaluate, lambda k, n: np.asarray(values[k])[:n], seeds))
    return race


def members_trained(adaptive: Adaptive, race: Race, keys: Iterable[Key]) -> dict[Key, int]:
    """Seeds each configuration has had trained, by the race's records (its latest round)."""
    latest = race.latest()
    return {k: adaptive.seeds_through(latest[k].round) if k in latest else 0 for k in keys}
