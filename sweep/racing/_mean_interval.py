"""The mean of a configuration's seeds and its percentile bootstrap interval (rule ``"interval"``
of :mod:`sweep.racing`, the one races with ``precision`` decide by).

Examples:
    >>> import numpy as np
    >>> from sweep.racing import mean_interval, min_seeds
    >>> min_seeds(0.99)  # the range of 8 values misses the median with probability 2**-7 < 0.01
    8
    >>> mean_interval(np.arange(5.0), 0.99, seed=0)  # too few values: unbounded
    Interval(mean=2.0, low=-inf, high=inf, used=5)
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

MIN_RESAMPLES = 2000  # as every interval of sweep.ensemble: the level's tails get at least TAIL_RESAMPLES
TAIL_RESAMPLES = 20
MAX_RESAMPLES = 200_000


class Interval(NamedTuple):
    """The mean of a configuration's values over ``used`` seeds and its interval, in the metric's units."""

    mean: float
    low: float
    high: float
    used: int


def resamples(level: float) -> int:
    """Bootstrap resamples for an interval at ``level``: 2000, or enough that each tail holds
    :data:`TAIL_RESAMPLES` of them (at most :data:`MAX_RESAMPLES`)."""
    return int(min(MAX_RESAMPLES, max(MIN_RESAMPLES, math.ceil(TAIL_RESAMPLES / ((1.0 - level) / 2)))))


def min_seeds(level: float) -> int:
    """The fewest values a percentile bootstrap interval at ``level`` needs: ``ceil(log2(2 / (1 -
    level)))``. Such an interval never reaches beyond the values, and the range of ``n`` values
    misses the median of their distribution with probability ``2**(1 - n)``; from fewer values it
    would claim more confidence than it can have."""
    return max(2, math.ceil(math.log2(2.0 / (1.0 - level)) - 1e-9))


def mean_interval(values: np.ndarray, level: float, seed: int) -> Interval:
    """The mean of the finite ``values`` and its percentile bootstrap interval at ``level``.

    No finite value: mean and interval are NaN (the configuration can be neither best nor kept);
    fewer than :func:`min_seeds` values: the interval is unbounded (nothing can be decided on
    them); all equal: the interval is that value.
    """
    v = np.asarray(values, np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    mean = float(v.mean())
    if v.size < min_seeds(level):
        return Interval(mean, -math.inf, math.inf, int(v.size))
    if np.ptp(v) == 0:
        return Interval(mean, float(v[0]), float(v[0]), int(v.size))
    from scipy import stats

    b = resamples(level)
    result = stats.bootstrap(
        (v,),
        np.mean,
        n_resamples=b,
        batch=max(1, 2**22 // v.size),
        confidence_level=level,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    low, high = result.confidence_interval
    return Interval(mean, float(low), float(high), int(v.size))
