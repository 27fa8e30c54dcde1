"""The multivariate and event scores of :mod:`._field_scores` summed over blocks of samples, for the
scores table (:mod:`._scoring`) beside the per-point scores of :mod:`._scores`.

Columns, for members ``[M, ...]`` and truth at each point or field (estimators as the table's
``crps``: the fair ones, NaN with one member):

- ``crps_skill``, ``crps_spread``: the fair CRPS split, ``crps = crps_skill - crps_spread``,
  averaged over points (:func:`~._field_scores.crps_terms`);
- ``energy_score`` (``estimator="fair"``) and ``variogram_score`` (order :data:`VARIOGRAM_P`)
  of each sample's field (channels x space; a state of a trajectory for rollout rows), averaged
  over samples (``fields=False``: left out, since they cost ``M^2 D`` and ``M D^2`` per field
  of ``D`` values);
- per threshold ``t`` (:func:`threshold_columns`): ``twcrps_<t>`` (fair) and ``brier_<t>`` of
  exceeding ``t``, averaged over points.

Blocks hold every member at a few samples, as the per-point scores' blocks do, so memory stays
bounded by the block; each block's samples carry a weight (0: padding).

```python
totals = Extras(thresholds=(0.5,)).totals()
totals.add(values, truth, np.ones(samples))    # values [M, G, S, ...], truth [G, S, ...]
totals.finish()["energy_score"]                # [G]
```
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._errors import QueryError
from ._field_scores import brier_score, crps_terms, energy_score, twcrps, variogram_score

VARIOGRAM_P = 0.5
TERM_COLUMNS = ("crps_skill", "crps_spread")
FIELD_COLUMNS = ("energy_score", "variogram_score")


def checked_thresholds(thresholds: Any, what: str) -> tuple[float, ...]:
    """``thresholds`` (a number or numbers, distinct; None: none) as a tuple of floats, or a
    :class:`QueryError` naming them."""
    if thresholds is None:
        return ()
    items = [thresholds] if np.ndim(thresholds) == 0 else list(thresholds)
    numbers = all(isinstance(t, (int, float, np.integer, np.floating)) and not isinstance(t, bool) for t in items)
    out = tuple(float(t) for t in items) if numbers else ()
    if not numbers or not all(math.isfinite(t) for t in out) or len(set(out)) != len(out):
        raise QueryError(
            f"{what}(thresholds={thresholds!r}): give distinct finite numbers, e.g. thresholds=[0.5, 1.0] "
            f"(the twCRPS and Brier score of exceeding each)"
        )
    return out


def threshold_columns(thresholds: Sequence[float]) -> list[str]:
    """``twcrps_<t>`` and ``brier_<t>`` per threshold (``t`` as Python writes the float)."""
    return [f"{name}_{t!r}" for t in thresholds for name in ("twcrps", "brier")]


def columns(thresholds: Sequence[float], fields: bool) -> list[str]:
    """Every column :meth:`FieldTotals.finish` returns, in table order."""
    return [*TERM_COLUMNS, *(FIELD_COLUMNS if fields else ()), *threshold_columns(thresholds)]


class FieldTotals:
    """Float64 sums per group of blocks of samples: what :meth:`finish` turns into the columns."""

    def __init__(self, thresholds: Sequence[float], fields: bool):
        self.thresholds, self.fields = tuple(thresholds), fields
        self.sums: dict[str, np.ndarray] = {}
        self.samples = 0.0

    def add(self, values: np.ndarray, truth: np.ndarray, weights: np.ndarray) -> None:
        """Add a block: ``values`` ``[M, G, S, ...]``, ``truth`` ``[G, S, ...]``, ``weights``
        ``[S]`` (how much each sample counts; 0 for padding)."""
        m, groups, samples = values.shape[:3]
        x, y = values.reshape(m, groups * samples, -1), truth.reshape(groups * samples, -1)
        w = np.tile(np.asarray(weights, np.float64), groups)
        fair = m > 1
        per_point: dict[str, np.ndarray] = {}
        per_sample: dict[str, np.ndarray] = {}
        nan = np.full(y.shape, np.nan)
        per_point |= dict(zip(TERM_COLUMNS, crps_terms(x, y) if fair else (nan, nan), strict=True))
        if self.fields:
            per_sample["energy_score"] = energy_score(x, y, "fair") if fair else nan[:, 0]
            per_sample["variogram_score"] = variogram_score(x, y, VARIOGRAM_P)
        for t in self.thresholds:
            tw, brier = threshold_columns([t])
            per_point[tw] = twcrps(x, y, t, "fair") if fair else nan
            per_point[brier] = brier_score(x, y, t)
        sums = {k: (v.mean(-1) * w).reshape(groups, samples).sum(-1) for k, v in per_point.items()}
        sums |= {k: (v * w).reshape(groups, samples).sum(-1) for k, v in per_sample.items()}
        self.sums = {k: self.sums.get(k, 0.0) + v for k, v in sums.items()}
        self.samples += float(w[:samples].sum())

    def finish(self) -> dict[str, np.ndarray]:
        """The columns (:func:`columns`), float64 ``[G]`` each: means over the samples added
        (per-point scores: over their points, every sample having as many)."""
        if not self.samples:
            raise ValueError("FieldTotals.finish(): no sample was added")
        return {k: v / self.samples for k, v in self.sums.items()}


@dataclass(frozen=True)
class Extras:
    """Which of these columns a scores table gets: every term column, the field columns with
    ``fields``, and the threshold columns of each of ``thresholds``."""

    thresholds: tuple[float, ...] = ()
    fields: bool = False

    @classmethod
    def checked(cls, thresholds: Any, fields: Any, what: str) -> Extras:
        """From a call's arguments, or a :class:`QueryError` naming the one that is wrong."""
        if not isinstance(fields, bool):
            raise QueryError(f"{what}(fields={fields!r}): give True or False")
        return cls(checked_thresholds(thresholds, what), fields)

    def columns(self) -> list[str]:
        return columns(self.thresholds, self.fields)

    def totals(self) -> FieldTotals:
        return FieldTotals(self.thresholds, self.fields)
