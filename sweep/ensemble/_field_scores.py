"""Multivariate and event scores of ensemble predictions: energy and variogram scores over a field,
threshold-weighted CRPS and the Brier score of exceeding a threshold, and the fair CRPS split into
its skill and spread terms.

Every function takes arrays, not an :class:`~sweep.ensemble.Ensemble`: ``values`` ``[M, N, ...]``
(``M`` members' predictions of ``N`` samples, e.g. what ``Ensemble.predict`` returns) and
``truth`` ``[N, ...]``. The field of a sample is every value after the sample axis (channels x
space), flattened to ``D`` variables. Sums are in float64. The formulas, for members
``x_1..x_M`` and truth ``y``:

- energy score (Gneiting et al. 2008), ``||.||`` the Euclidean norm over the field:
  ``1/M sum_m ||x_m - y|| - 1/(2 M^2) sum_mj ||x_m - x_j||`` (``estimator="nrg"``), or with
  ``1/(2 M (M - 1))`` (``"fair"``, unbiased for the distribution the members are drawn from);
- variogram score of order ``p`` (Scheuerer and Hamill 2015), over every pair ``(i, j)`` of the
  ``D`` variables: ``sum_ij (1/M sum_m |x_mi - x_mj|^p - |y_i - y_j|^p)^2``: it sees whether the
  members vary *together* across the field as the truth does, which per-point scores cannot;
- threshold-weighted CRPS for exceeding ``t`` (Gneiting and Ranjan 2011; Allen et al. 2023):
  the CRPS of ``v(x) = max(x, t)`` (everything below ``t`` is one outcome), per point;
- Brier score of the event ``y > t``: ``(P - 1{y > t})^2`` with ``P`` the fraction of members
  above ``t``, per point;
- fair CRPS = skill - spread with skill ``1/M sum_m |x_m - y|`` and spread
  ``1/(2 M (M - 1)) sum_mj |x_m - x_j|``, per point: a CRPS that falls because the spread grew
  is told apart from one that falls because the members came closer to the truth.

These agree with ``scoringrules`` (``energy_score``, ``variogram_score``, ``twcrps_ensemble``,
``brier_score``, ``crps_ensemble(estimator="fair")``), which the tests check.

```python
values = ens.predict(x)                          # [M, N, channels, *spatial]
es = energy_score(values, y).mean()              # one number per sample, averaged
bs = brier_score(values, y, threshold=1.0).mean()
```
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._errors import QueryError

ESTIMATORS = ("nrg", "fair")
PAIR_BYTES = 64 * 2**20  # float64 pairwise differences held at once by the variogram score


def _checked(values: Any, truth: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
    """``values`` ``[M, N, ...]`` and ``truth`` ``[N, ...]`` as float64, or a :class:`QueryError`."""
    x, y = np.asarray(values, np.float64), np.asarray(truth, np.float64)
    if x.ndim < 2 or x.shape[1:] != y.shape:
        raise QueryError(
            f"{what}: values have shape {x.shape} and truth {y.shape}; give values [members, samples, ...] "
            f"and truth [samples, ...] of the same sample shape"
        )
    return x, y


def _estimator(estimator: Any, members: int, what: str) -> float:
    """The divisor of the pairwise term: ``2 M^2`` (``"nrg"``) or ``2 M (M - 1)`` (``"fair"``)."""
    if estimator not in ESTIMATORS:
        raise QueryError(f'{what}(estimator={estimator!r}): choose "nrg" or "fair"')
    if estimator == "fair" and members < 2:
        raise QueryError(f'{what}(estimator="fair"): needs at least 2 members, got {members}')
    return 2.0 * members * (members if estimator == "nrg" else members - 1)


def pair_sum(x: np.ndarray) -> np.ndarray:
    """``sum_ij |x_i - x_j|`` over the first axis (members), from one sort: ``2 sum_i (2i - M - 1)
    x_(i)`` for the sorted values ``x_(1) <= ... <= x_(M)``."""
    m = len(x)
    ranks = (2.0 * np.arange(1, m + 1) - m - 1).reshape(-1, *([1] * (x.ndim - 1)))
    return 2.0 * (ranks * np.sort(x, axis=0)).sum(0)


def energy_score(values: Any, truth: Any, estimator: str = "nrg") -> np.ndarray:
    """The energy score of each sample's field (lower is better).

    Args:
        values: Members' predictions ``[M, N, ...]``.
        truth: ``[N, ...]``.
        estimator: ``"nrg"`` (``1/(2 M^2)`` pairwise term, scoringrules' default) or ``"fair"``.

    Returns:
        ``[N]`` float64.

    Examples:
        ```python
        energy_score(ens.predict(x), y).mean()
        ```
    """
    x, y = _checked(values, truth, "energy_score")
    m, n = x.shape[:2]
    divisor = _estimator(estimator, m, "energy_score")
    x, y = x.reshape(m, n, -1), y.reshape(n, -1)
    skill = np.linalg.norm(x - y, axis=-1).mean(0)
    return skill - pair_norms(x) / divisor


def pair_norms(x: np.ndarray) -> np.ndarray:
    """``sum_ij ||x_i - x_j||`` over members ``i, j`` of ``x`` ``[M, N, D]``, per ``N``: from the
    Gram matrix of the members centred on their mean (``||a - b||^2 = |a|^2 + |b|^2 - 2 a.b``,
    one matrix product; centring keeps the cancellation relative to the spread, and identical
    members give 0 exactly), :data:`PAIR_BYTES` of ``M x M`` matrices at a time."""
    m, n = x.shape[:2]
    fields = np.moveaxis(x, 1, 0)  # [N, M, D]
    out = np.zeros(n)
    step = max(1, PAIR_BYTES // (8 * m * m))
    for start in range(0, n, step):
        c = fields[start : start + step]
        c = c - c.mean(1, keepdims=True)
        gram = c @ np.swapaxes(c, 1, 2)  # [n, M, M]
        sq = np.einsum("nii->ni", gram)
        out[start : start + step] = np.sqrt(np.maximum(sq[:, :, None] + sq[:, None, :] - 2 * gram, 0.0)).sum((1, 2))
    return out


def variogram_score(values: Any, truth: Any, p: float = 0.5, weights: Any = None) -> np.ndarray:
    """The variogram score of order ``p`` of each sample's field (lower is better): ``D^2`` pairs
    of variables, computed a block of rows at a time (:data:`PAIR_BYTES` of differences).

    Args:
        values: Members' predictions ``[M, N, ...]``.
        truth: ``[N, ...]``.
        p: The order, > 0 (0.5 and 1 are usual).
        weights: ``[D, D]`` non-negative weights of the pairs (default all 1), ``D`` the values
            per sample.

    Returns:
        ``[N]`` float64.

    Examples:
        ```python
        variogram_score(ens.predict(x), y, p=0.5).mean()
        ```
    """
    x, y = _checked(values, truth, "variogram_score")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p < np.inf:
        raise QueryError(f"variogram_score(p={p!r}): give the order as a number > 0 (0.5 or 1 are usual)")
    m, n = x.shape[:2]
    x, y = x.reshape(m, n, -1), y.reshape(n, -1)
    d = y.shape[-1]
    w = np.ones((d, d)) if weights is None else np.asarray(weights, np.float64)
    if w.shape != (d, d) or not (w >= 0).all():
        raise QueryError(
            f"variogram_score(weights=...): shape {w.shape}; give non-negative weights of shape ({d}, {d})"
        )
    rows = max(1, PAIR_BYTES // (8 * (m + 1) * n * d))
    out = np.zeros(n)
    for start in range(0, d, rows):
        block = slice(start, start + rows)
        members = _power(np.abs(x[:, :, block, None] - x[:, :, None, :]), p).mean(0)  # [N, rows, D]
        observed = _power(np.abs(y[:, block, None] - y[:, None, :]), p)
        out += (w[block] * (members - observed) ** 2).sum((1, 2))
    return out


def _power(a: np.ndarray, p: float) -> np.ndarray:
    """``a ** p`` (``np.sqrt`` for 0.5 and ``a`` itself for 1: the usual orders, several times faster)."""
    return np.sqrt(a) if p == 0.5 else a if p == 1 else a**p


def crps_terms(values: Any, truth: Any) -> tuple[np.ndarray, np.ndarray]:
    """The fair CRPS split into ``(skill, spread)`` per point: ``crps = skill - spread``.

    Args:
        values: Members' predictions ``[M, N, ...]``, ``M >= 2``.
        truth: ``[N, ...]``.

    Returns:
        ``(skill, spread)``, each float64 of ``truth``'s shape.

    Examples:
        ```python
        skill, spread = crps_terms(ens.predict(x), y)
        crps = (skill - spread).mean()
        ```
    """
    x, y = _checked(values, truth, "crps_terms")
    divisor = _estimator("fair", len(x), "crps_terms")
    return np.abs(x - y).mean(0), pair_sum(x) / divisor


def twcrps(values: Any, truth: Any, threshold: Any, estimator: str = "nrg") -> np.ndarray:
    """The threshold-weighted CRPS of exceeding ``threshold`` per point: the CRPS of
    ``max(x, threshold)``, which scores only how the members and the truth lie above it.

    Args:
        values: Members' predictions ``[M, N, ...]``.
        truth: ``[N, ...]``.
        threshold: A number, or an array broadcasting against ``truth`` (e.g. one per channel:
            shape ``[channels, 1]`` for a 1D field).
        estimator: ``"nrg"`` (scoringrules' default) or ``"fair"``.

    Returns:
        Float64 of ``truth``'s shape.

    Examples:
        ```python
        twcrps(ens.predict(x), y, threshold=1.0).mean()
        ```
    """
    x, y = _checked(values, truth, "twcrps")
    t = _threshold(threshold, y, "twcrps")
    divisor = _estimator(estimator, len(x), "twcrps")
    v = np.maximum(x, t)
    return np.abs(v - np.maximum(y, t)).mean(0) - pair_sum(v) / divisor


def brier_score(values: Any, truth: Any, threshold: Any) -> np.ndarray:
    """The Brier score of the event ``truth > threshold`` per point, forecast as the fraction of
    members above ``threshold``.

    Args:
        values: Members' predictions ``[M, N, ...]``.
        truth: ``[N, ...]``.
        threshold: A number, or an array broadcasting against ``truth``.

    Returns:
        Float64 of ``truth``'s shape, in ``[0, 1]``.

    Examples:
        ```python
        brier_score(ens.predict(x), y, threshold=1.0).mean()
        ```
    """
    x, y = _checked(values, truth, "brier_score")
    t = _threshold(threshold, y, "brier_score")
    return np.square((x > t).mean(0) - (y > t))


def _threshold(threshold: Any, truth: np.ndarray, what: str) -> np.ndarray:
    """``threshold`` as float64 broadcasting against ``truth``, or a :class:`QueryError`."""
    try:
        t = np.asarray(threshold, np.float64)
        fits = not isinstance(threshold, bool) and np.broadcast_shapes(t.shape, truth.shape) == truth.shape
    except (TypeError, ValueError):
        fits = False
    if not fits or not np.isfinite(t).all():
        raise QueryError(
            f"{what}(threshold={threshold!r}): give a finite number, or an array of them broadcasting against "
            f"the truth's shape {truth.shape}"
        )
    return t
