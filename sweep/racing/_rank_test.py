"""The race's rank test (rule ``"rank"`` of :mod:`sweep.racing`): an exact one-sided
Wilcoxon-Mann-Whitney test of a configuration against the best, and the level of each round.

``U`` counts the pairs ``(i, j)`` in which the configuration's value ``x_i`` is worse than the
best's ``y_j`` (mode ``min``: larger). When the ``n + m`` values are exchangeable (the two
configurations' seeds are independent draws from one distribution), every order of them is equally
likely and the law of ``U`` is known exactly, whatever the distribution: the test is
distribution-free. A tie counts as *not* worse, so ties only lower ``U`` and the p-value stays
valid (conservative) for any values.

Examples:
    >>> import numpy as np
    >>> from sweep.racing import worse_p
    >>> float(worse_p(np.arange(6.0) + 10, np.arange(6.0)))  # all 6 worse than all 6: 1 / C(12, 6)
    0.0010822510822510823
"""

from __future__ import annotations

import functools
import math

import numpy as np

EXACT_PAIRS = 64 * 64  # n * m up to which U's law is exact; beyond, its normal approximation (heavier tails)


@functools.lru_cache(maxsize=64)
def _upper_tail(n: int, m: int) -> np.ndarray:
    """``P(U >= u)`` for ``u = 0 .. n * m`` when all orders of ``n`` and ``m`` values are equally likely.

    The largest of ``a + b`` values is one of the ``a`` (probability ``a / (a + b)``; it is worse
    than all ``b`` others) or one of the ``b``: ``P_ab(u) = a/(a+b) P_(a-1)b(u - b) + b/(a+b)
    P_a(b-1)(u)``, in probabilities (no overflow), row by row over ``a``.
    """
    size = n * m + 1
    row = [np.eye(1, size)[0] for _ in range(m + 1)]  # a = 0: U = 0
    for a in range(1, n + 1):
        new = [row[0]]
        for b in range(1, m + 1):
            shifted = np.zeros(size)
            shifted[b:] = row[b][: size - b]
            new.append(a / (a + b) * shifted + b / (a + b) * new[b - 1])
        row = new
    pmf = row[m]
    tail = np.minimum(np.cumsum(pmf[::-1])[::-1], 1.0)  # summed from the small end: exact tails
    tail[0] = 1.0
    tail.flags.writeable = False
    return tail


def tail_p(u: np.ndarray, n: int, m: int) -> np.ndarray:
    """``P(U >= u)`` under exchangeability: exact while ``n * m <= EXACT_PAIRS``, else the normal
    approximation with continuity correction, whose tails are heavier than ``U``'s (``U`` is
    bounded): below 0.01 it gives 1.01 to 50 times the exact p-value at 64 x 64, 32 x 128 and
    100 x 100 values, so it decides no more than the exact test would."""
    u = np.asarray(u)
    if n * m <= EXACT_PAIRS:
        return _upper_tail(n, m)[np.clip(u, 0, n * m)]
    from scipy.special import ndtr

    sd = math.sqrt(n * m * (n + m + 1) / 12.0)
    return ndtr(-(u - 0.5 - n * m / 2.0) / sd)


def worse_p(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The one-sided p-value that ``x`` is worse (larger) than ``y``, over the last axis of each
    (leading axes are independent tests): ``P(U >= u)`` with ``u`` the pairs in which ``x`` is
    strictly larger."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    u = (x[..., :, None] > y[..., None, :]).sum(axis=(-2, -1))
    return tail_p(u, x.shape[-1], y.shape[-1])


def min_p(n: int, m: int) -> float:
    """The smallest p-value ``n`` values against ``m`` can give (all worse): ``1 / C(n + m, n)``
    where the test is exact, else its normal approximation's (at most 2**24 seeds: no overflow)."""
    if n * m <= EXACT_PAIRS:
        return 1.0 / math.comb(n + m, n)
    return float(tail_p(np.asarray(n * m), n, m))


def round_levels(seeds: list[int], confidence: float, num_configs: int) -> tuple[float, ...]:
    """The level of the tests at each round, given the seeds through each round (``0.0``: a
    round whose tests cannot reject at their level, which spends nothing).

    The error ``1 - confidence`` is divided among the ``K (K - 1)`` ordered pairs of
    configurations, and spent over the rounds that can decide: the ``k``-th such round gets the
    share ``1 / (k (k + 1))``, the last one what is left (``1 / k``), so the shares sum to at most
    1 and the first decisive rounds, where a clearly worse configuration is caught, get most.
    """
    if num_configs < 2:
        return (0.0,) * len(seeds)
    budget = (1.0 - confidence) / (num_configs * (num_configs - 1))
    levels, k = [], 1
    for r, n in enumerate(seeds):
        level = budget / (k if r == len(seeds) - 1 else k * (k + 1))
        if min_p(n, n) <= level:
            levels.append(level)
            k += 1
        else:
            levels.append(0.0)
    return tuple(levels)
