"""Statistics over seeds: per-configuration summaries and comparisons of two selections.

Every interval is the percentile bootstrap of :mod:`sweep._over_seeds` (where :func:`describe`
is). Comparisons report P(a beats b) (ties count half) and the difference of means, each with a
two-sample bootstrap interval, and the counts behind them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa
from jaxtyping import Float

from .._over_seeds import SUMMARY_STATS, bootstrap, describe, scipy_stats
from ._rows import cell, html_table

BESIDE_STATS = {"mean": "mean", "ci_low": "mean_ci_low", "ci_high": "mean_ci_high"}  # of a column beside
MODES = ("min", "max")  # whether lower or higher values of the metric are better


class Comparison(NamedTuple):
    """``a`` against ``b`` on one metric, over the members of each.

    ``probability``: the chance that a random member of ``a`` beats (is better than) one of ``b``;
    ties count half, diverged members lose. ``difference``: mean of ``a`` minus mean of ``b`` over
    the members that did not diverge, in the metric's units (negative: ``a`` lower). Intervals:
    95% two-sample percentile bootstrap. ``n_a``, ``n_b``: members compared; ``used_a``,
    ``used_b``: members in the difference.
    """

    probability: float
    ci_low: float
    ci_high: float
    n_a: int
    n_b: int
    difference: float
    difference_ci_low: float
    difference_ci_high: float
    used_a: int
    used_b: int
    metric: str
    mode: str

    def __repr__(self) -> str:
        better = "lower" if self.mode == "min" else "higher"
        return (
            f"Comparison on {self.metric} ({better} is better): a beats b with probability "
            f"{self.probability:.2f} (95% interval {self.ci_low:.2f}..{self.ci_high:.2f}; "
            f"{self.n_a} vs {self.n_b} members)\n"
            f"  mean difference a - b: {self.difference:.4g} (95% interval {self.difference_ci_low:.4g}.."
            f"{self.difference_ci_high:.4g}; {self.used_a} vs {self.used_b} members that did not diverge)"
        )

    def _repr_html_(self) -> str:
        """The sentence of ``repr()`` above a table of the fields (what a notebook shows)."""
        rows = pa.table({"field": list(self._fields), "value": [cell(v) for v in self]})
        return html_table(rows, len(rows), repr(self).splitlines()[0])


def _beats(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    """P(A < B) + P(A == B) / 2 from ranks (the Mann-Whitney U statistic over n_a * n_b)."""
    a, b = np.moveaxis(a, axis, -1), np.moveaxis(b, axis, -1)
    ranks = scipy_stats().rankdata(np.concatenate([a, b], axis=-1), axis=-1)
    n_a, n_b = a.shape[-1], b.shape[-1]
    u_a = ranks[..., :n_a].sum(-1) - n_a * (n_a + 1) / 2  # pairs where a > b (ties: half)
    return 1.0 - u_a / (n_a * n_b)


def _mean_difference(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(a, axis=axis) - np.mean(b, axis=axis)


def _interval(samples: tuple[np.ndarray, ...], statistic) -> tuple[float, float]:
    """A bootstrap interval, or NaN where a sample has fewer than two values."""
    if min(len(s) for s in samples) < 2:
        return float("nan"), float("nan")
    low, high = bootstrap(samples, statistic)
    return float(low), float(high)


def compare(
    a: Float[np.ndarray, " n"],
    b: Float[np.ndarray, " m"],
    diverged_a: np.ndarray | None = None,
    diverged_b: np.ndarray | None = None,
    metric: str = "",
    mode: str = "min",
) -> Comparison:
    """:class:`Comparison` of the values ``a`` and ``b`` of ``metric`` (``mode="min"``: lower is
    better), one value per seed; a diverged member (``diverged_a`` / ``diverged_b``, default none)
    or a non-finite value counts as the worst.

    ```python
    import numpy as np
    from sweep.ensemble import compare

    c = compare(np.array([0.10, 0.12, 0.11]), np.array([0.20, 0.18, 0.25]), metric="val_loss")
    c.probability  # 1.0: every seed of a beats every seed of b
    c.difference  # -0.1: the difference of the means (0.11 - 0.21)
    ```

    :meth:`Ensemble.compare <sweep.ensemble.Ensemble.compare>` compares two selections of a store.
    """
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    diverged_a = np.zeros(len(a), bool) if diverged_a is None else diverged_a
    diverged_b = np.zeros(len(b), bool) if diverged_b is None else diverged_b
    sign = 1.0 if mode == "min" else -1.0
    score_a = np.where(np.asarray(diverged_a) | ~np.isfinite(a), np.inf, sign * a)
    score_b = np.where(np.asarray(diverged_b) | ~np.isfinite(b), np.inf, sign * b)
    p = float(_beats(score_a, score_b))
    low, high = _interval((score_a, score_b), _beats)
    used_a, used_b = a[np.isfinite(score_a)], b[np.isfinite(score_b)]
    difference = float(used_a.mean() - used_b.mean()) if len(used_a) and len(used_b) else float("nan")
    d_low, d_high = _interval((used_a, used_b), _mean_difference)
    return Comparison(p, low, high, len(a), len(b), difference, d_low, d_high, len(used_a), len(used_b), metric, mode)


def summary(index: pa.Table, keys: list[str], metric: str, beside: list[str], mode: str = "min") -> pa.Table:
    """One row per distinct ``keys``, best first (by the mean of ``metric``; no mean: last):
    member counts and :func:`describe` of ``metric`` over the members that did not diverge (non-finite
    values and nulls left out), and for each ``beside`` column its mean with its interval over the
    same kind of members (``<column>_mean``, ``<column>_ci_low``, ``<column>_ci_high``)."""
    columns = dict.fromkeys([metric, *beside])
    groups = index.group_by(keys, use_threads=False).aggregate([(c, "list") for c in columns] + [("status", "list")])
    rows = []
    for row in groups.to_pylist():
        status = np.asarray(row["status_list"])
        ok = status != "diverged"

        def used(column: str, row: dict = row, ok: np.ndarray = ok) -> np.ndarray:
            values = np.asarray([np.nan if v is None else v for v in row[f"{column}_list"]], np.float64)
            return values[ok & np.isfinite(values)]

        values = used(metric)
        out = {
            **{k: row[k] for k in keys},
            "count": len(status),
            "diverged": int((~ok).sum()),
            "stopped_early": int((status == "stopped_early").sum()),
            "n": len(values),
            **describe(values),
        }
        for column in beside:
            stats = describe(used(column))
            out |= {f"{column}_{s}": stats[key] for s, key in BESIDE_STATS.items()}
        rows.append(out)
    sign = 1.0 if mode == "min" else -1.0
    rows.sort(key=lambda r: (not np.isfinite(r["mean"]), sign * r["mean"] if np.isfinite(r["mean"]) else 0.0))
    schema = pa.schema(
        [index.schema.field(k) for k in keys]
        + [(c, pa.int64()) for c in ("count", "diverged", "stopped_early", "n")]
        + [(s, pa.float64()) for s in SUMMARY_STATS]
        + [(f"{c}_{s}", pa.float64()) for c in beside for s in BESIDE_STATS]
    )
    return pa.Table.from_pylist(rows, schema=schema)


def seeds_needed(summary: pa.Table, keys: list[str], width: float) -> pa.Table:
    """Per row of a :func:`summary`: the relative width of the 95% interval of the mean over the
    ``n`` seeds used, and the seeds that bring it to ``width`` if it narrows as 1 / sqrt(seeds)
    (null where the interval is undefined: fewer than two values, or a mean of 0)."""
    rows = []
    for row in summary.to_pylist():
        n, mean = row["n"], row["mean"]
        spread = row["mean_ci_high"] - row["mean_ci_low"]
        relative = spread / abs(mean) if n > 1 and mean and np.isfinite(spread) else None
        needed = None if relative is None else max(2, int(np.ceil(n * (relative / width) ** 2)))
        rows.append(
            {**{k: row[k] for k in keys}, "n": n, "mean": mean, "relative_width": relative, "seeds_needed": needed}
        )
    schema = pa.schema(
        [summary.schema.field(k) for k in keys]
        + [("n", pa.int64()), ("mean", pa.float64()), ("relative_width", pa.float64()), ("seeds_needed", pa.int64())]
    )
    return pa.Table.from_pylist(rows, schema=schema)
