"""How a race decides: the levels of each rule (:data:`~._records.RULES`), which rule a race
follows, and its first possible decision."""

from __future__ import annotations

from .._canonical import digest
from ..spec import Adaptive
from ._mean_interval import min_seeds
from ._rank_test import round_levels
from ._records import Key, Race


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


def interval_seed(sweep_seed: int, round: int, key: Key) -> int:
    """The resampling seed of a configuration's interval at ``round``."""
    return int(digest([sweep_seed, round, list(key)], 16), 16)
