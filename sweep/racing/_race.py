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

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

import numpy as np

from ..spec import Adaptive
from ._mean_interval import Interval, mean_interval
from ._rank_test import worse_p
from ._records import Evaluation, Key, Race, Standing
from ._rules import interval_level, interval_seed, rank_levels, rule_of


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
    sign = 1.0 if adaptive.direction == "min" else -1.0
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
