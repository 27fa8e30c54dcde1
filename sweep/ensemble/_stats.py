"""Statistics over seeds: per-configuration summaries and probability of improvement.

Interval estimates follow rliable (Agarwal et al., 2021): the interquartile mean (IQM) with a
percentile bootstrap interval, and P(X_a < Y_b) (lower loss is better, ties count half) with a
two-sample bootstrap interval; both use :func:`scipy.stats.bootstrap` with a fixed seed so that
results are reproducible.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa
from jaxtyping import Float

CONFIDENCE = 0.95
RESAMPLES = 2000
SUMMARY_STATS = ("mean", "std", "median", "min", "max", "mean_ci_low", "mean_ci_high", "iqm", "iqm_ci_low", "iqm_ci_high")


class Comparison(NamedTuple):
    """P(a beats b): the chance a random member of ``a`` has a lower metric than one of ``b``."""

    probability: float
    ci_low: float
    ci_high: float
    n_a: int
    n_b: int


def _scipy_stats():
    """``scipy.stats``, imported on first use (it takes ~0.7 s, which every trial worker would pay)."""
    from scipy import stats

    return stats


def _iqm(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return _scipy_stats().trim_mean(x, 0.25, axis=axis)


def describe(values: Float[np.ndarray, " n"]) -> dict[str, float]:
    """Mean, std (ddof=1), median, min, max, t-interval of the mean, IQM and its bootstrap interval.

    ```python
    describe(np.array([0.1, 0.2, 0.4]))["iqm"]  # 0.2333...
    ```
    """
    v = np.asarray(values, np.float64)
    n = len(v)
    if n == 0:
        return dict.fromkeys(SUMMARY_STATS, float("nan"))
    out = {"mean": v.mean(), "median": np.median(v), "min": v.min(), "max": v.max(), "iqm": _iqm(v)}
    out["std"] = v.std(ddof=1) if n > 1 else np.nan
    if n > 1 and np.ptp(v) > 0:
        stats = _scipy_stats()
        low, high = stats.t.interval(CONFIDENCE, n - 1, loc=v.mean(), scale=stats.sem(v))
        boot = stats.bootstrap((v,), _iqm, n_resamples=RESAMPLES, confidence_level=CONFIDENCE,
                               method="percentile", vectorized=True, rng=np.random.default_rng(0))
        iqm_low, iqm_high = boot.confidence_interval
    else:  # one value, or all equal: the intervals collapse (or are undefined)
        low = high = iqm_low = iqm_high = v[0] if n > 1 else np.nan
    out |= {"mean_ci_low": low, "mean_ci_high": high, "iqm_ci_low": iqm_low, "iqm_ci_high": iqm_high}
    return {k: float(out[k]) for k in SUMMARY_STATS}


def _beats(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    """P(A < B) + P(A == B) / 2 from ranks (the Mann-Whitney U statistic over n_a * n_b)."""
    a, b = np.moveaxis(a, axis, -1), np.moveaxis(b, axis, -1)
    ranks = _scipy_stats().rankdata(np.concatenate([a, b], axis=-1), axis=-1)
    n_a, n_b = a.shape[-1], b.shape[-1]
    u_a = ranks[..., :n_a].sum(-1) - n_a * (n_a + 1) / 2  # pairs where a > b (ties: half)
    return 1.0 - u_a / (n_a * n_b)


def compare(a: Float[np.ndarray, " n"], b: Float[np.ndarray, " m"]) -> Comparison:
    """P(a < b) over all pairs with a percentile bootstrap interval (each side resampled)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    p = float(_beats(a, b))
    if min(len(a), len(b)) < 2:
        return Comparison(p, float("nan"), float("nan"), len(a), len(b))
    boot = _scipy_stats().bootstrap((a, b), _beats, n_resamples=RESAMPLES, confidence_level=CONFIDENCE, method="percentile",
                           vectorized=True, rng=np.random.default_rng(0))
    low, high = boot.confidence_interval
    return Comparison(p, float(low), float(high), len(a), len(b))


def summary(index: pa.Table, keys: list[str], metric: str) -> pa.Table:
    """One row per distinct ``keys``: member counts and :func:`describe` of ``metric`` over the
    members that did not diverge (non-finite values are left out too)."""
    groups = index.group_by(keys, use_threads=False).aggregate([(metric, "list"), ("status", "list")])
    rows = []
    for row in groups.to_pylist():
        values = np.asarray([np.nan if v is None else v for v in row[f"{metric}_list"]], np.float64)
        status = np.asarray(row["status_list"])
        used = values[(status != "diverged") & np.isfinite(values)]
        rows.append({**{k: row[k] for k in keys}, "count": len(values), "diverged": int((status == "diverged").sum()),
                     "stopped_early": int((status == "stopped_early").sum()), "n": len(used), **describe(used)})
    schema = pa.schema([index.schema.field(k) for k in keys]
                       + [(c, pa.int64()) for c in ("count", "diverged", "stopped_early", "n")]
                       + [(s, pa.float64()) for s in SUMMARY_STATS])
    return pa.Table.from_pylist(rows, schema=schema)
