"""Statistics over seeds: :func:`describe` (a summary of one value per seed, with 95%
percentile bootstrap intervals) and the bootstrap every interval of the store's summaries and
comparisons comes from (:func:`scipy.stats.bootstrap`, 2000 resamples, a fixed seed so that
results are reproducible), as in rliable (Agarwal et al., 2021). A percentile interval of a mean
or an interquartile mean (IQM) lies within the range of the values, so the interval of a
non-negative metric (a loss, an error) never goes below zero, unlike a t-interval on a few seeds.
"""

from __future__ import annotations

import numpy as np
from jaxtyping import Float

CONFIDENCE = 0.95
RESAMPLES = 2000
SUMMARY_STATS = (
    "mean",
    "std",
    "median",
    "min",
    "max",
    "mean_ci_low",
    "mean_ci_high",
    "iqm",
    "iqm_ci_low",
    "iqm_ci_high",
)


def scipy_stats():
    """``scipy.stats``, imported on first use (it takes ~0.7 s, which every trial worker would pay)."""
    from scipy import stats

    return stats


def _iqm(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return scipy_stats().trim_mean(x, 0.25, axis=axis)


def _mean_and_iqm(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.stack([np.mean(x, axis=axis), _iqm(x, axis=axis)])


def bootstrap(samples: tuple[np.ndarray, ...], statistic) -> tuple[np.ndarray, np.ndarray]:
    """The percentile bootstrap interval of ``statistic(*samples, axis)`` (each sample resampled)."""
    result = scipy_stats().bootstrap(
        samples,
        statistic,
        n_resamples=RESAMPLES,
        confidence_level=CONFIDENCE,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(0),
    )
    return result.confidence_interval


def describe(values: Float[np.ndarray, " n"]) -> dict[str, float]:
    """Mean, std (ddof=1), median, min, max, the mean's 95% percentile bootstrap interval, the
    IQM and its 95% percentile bootstrap interval. One value: no interval (NaN); all equal: the
    interval is that value.

    ```python
    import numpy as np
    from sweep.ensemble import describe

    stats = describe(np.array([0.1, 0.2, 0.4, 0.3]))  # e.g. one final loss per seed
    stats["iqm"]  # 0.25: the mean of the middle half
    stats["mean_ci_low"], stats["mean_ci_high"]  # within [0.1, 0.4]
    ```

    :meth:`Ensemble.summary <sweep.ensemble.Ensemble.summary>` gives these per configuration of a store.
    """
    v = np.asarray(values, np.float64)
    n = len(v)
    if n == 0:
        return dict.fromkeys(SUMMARY_STATS, float("nan"))
    out = {"mean": v.mean(), "median": np.median(v), "min": v.min(), "max": v.max(), "iqm": _iqm(v)}
    out["std"] = v.std(ddof=1) if n > 1 else np.nan
    if n > 1 and np.ptp(v) > 0:
        (mean_low, iqm_low), (mean_high, iqm_high) = bootstrap((v,), _mean_and_iqm)
    else:  # one value (no interval), or all equal (the interval collapses)
        mean_low = mean_high = iqm_low = iqm_high = v[0] if n > 1 else np.nan
    out |= {"mean_ci_low": mean_low, "mean_ci_high": mean_high, "iqm_ci_low": iqm_low, "iqm_ci_high": iqm_high}
    return {k: float(out[k]) for k in SUMMARY_STATS}
