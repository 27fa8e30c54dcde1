"""A weighted ensemble across structural configurations: what greedy selection
(:mod:`._greedy`) gives.

A :class:`Blend` holds distinct members of one store, possibly of several structural configs
(architectures), each with a count: how many times the greedy selection chose it (its weight is
``count / sum(counts)``). It answers what an :class:`~sweep.ensemble.Ensemble` of one config
answers, as the *multiset* of its members (each member repeated ``count`` times) would:

- ``predict`` and ``rollout``: every distinct member's output, in the blend's order (the members
  of one structural config run together, one compiled program per config, as ``Ensemble`` runs
  them);
- ``mean_std`` and ``rollout_mean_std``: the weighted mean and weighted population std;
- ``recalibrate``, ``mean_std(calibrated=True)``, ``predict_interval``, ``calibration_scores``
  and ``export``: as for one config, fitted and scored on the multiset (a calibration names
  each member as many times as it counts);
- ``scores(split)``: the scores of :meth:`~sweep.ensemble.Ensemble.scores` of the multiset
  (one row per kind and step, no ensemble-size rows).

Every member is compared on the same samples: the configs must be of one problem (greedy
selection checks that their stored samples agree).

```python
blend = sweep.load("runs/heat").select_greedy(8, metric="crps", split="val")
blend.weights                                   # per distinct member, summing to 1
states = blend.rollout(x0, 20)                  # [members, 21, batch, ...]
cal = blend.recalibrate("val")                  # then mean_std(x, calibrated=True), export(...)
```
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from .._batches import pieces
from .._errors import QueryError
from ._array_args import checked_out, checked_pair
from ._calibrated import Calibrated
from ._field_totals import Extras
from ._predictions import DEFAULT_CHUNK, Predictions
from ._scoring import check_split, multiset_rows


def _weighted(y: np.ndarray, weights: np.ndarray, axis: int, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """Weighted mean and population std over ``axis`` of ``y`` (float64 sums), as ``dtype``."""
    y = y.astype(np.float64)
    w = weights.reshape((1,) * axis + (-1,) + (1,) * (y.ndim - axis - 1))
    mean = (w * y).sum(axis)
    std = np.sqrt((w * np.square(y - np.expand_dims(mean, axis))).sum(axis))
    return mean.astype(dtype), std.astype(dtype)


class Blended(Predictions):
    """What the members of several structural configs compute together (part of :class:`Blend`):
    ``parts`` holds one selection per config, ``counts`` each distinct member's multiplicity."""

    parts: list[Calibrated]
    counts: np.ndarray

    @property
    def weights(self) -> np.ndarray:
        """``[members]`` float64, ``counts / sum(counts)``, in the order of :attr:`index`."""
        return self.counts / self.counts.sum()

    def predict(
        self, x: Any, chunk_size: int = DEFAULT_CHUNK, *, batch_size: int | None = None, out: Any = None
    ) -> Any:
        """Every member's output on ``x``, ``[members, batch, ...]`` in the blend's order (each
        structural config's members computed together); ``x``, ``batch_size`` and ``out`` as
        :meth:`Predictions.predict <sweep.ensemble._predictions.Predictions.predict>`."""
        x, size, shape, dtype = self._streamed(x, chunk_size, batch_size, "predict")
        out = checked_out(out, (len(self), x.shape[0], *shape), dtype, "predict", "out")
        if out is None and size == x.shape[0]:
            return np.concatenate([p.predict(x, chunk_size) for p in self.parts])
        result = np.empty((len(self), x.shape[0], *shape), dtype) if out is None else out
        for samples in pieces(x.shape[0], size):
            xb = np.asarray(x[samples])
            values = np.concatenate([p.predict(xb, chunk_size) for p in self.parts])
            if isinstance(result, np.ndarray):
                result[:, samples] = values
            else:
                for row, v in enumerate(values):
                    result[row, samples] = v
        return result

    def mean_std(
        self, x: Any, chunk_size: int = DEFAULT_CHUNK, *, batch_size: int | None = None, out: Any = None
    ) -> tuple[Any, Any]:
        """The weighted mean and weighted population std over members of :meth:`predict` (``x``,
        ``batch_size`` and ``out=(mean, std)`` as :meth:`predict`)."""
        x, size, shape, dtype = self._streamed(x, chunk_size, batch_size, "mean_std")
        dtype = np.result_type(x.dtype, np.float32)
        mean, std = checked_pair(out, (x.shape[0], *shape), dtype)
        if mean is None and std is None and size == x.shape[0]:
            return _weighted(self.predict(x, chunk_size), self.weights, 0, dtype)
        mean = np.empty((x.shape[0], *shape), dtype) if mean is None else mean
        std = np.empty((x.shape[0], *shape), dtype) if std is None else std
        for samples in pieces(x.shape[0], size):
            mean[samples], std[samples] = _weighted(
                self.predict(np.asarray(x[samples]), chunk_size), self.weights, 0, dtype
            )
        return mean, std

    def _streamed(
        self, x: Any, chunk_size: int, batch_size: int | None, what: str
    ) -> tuple[Any, int, tuple[int, ...], np.dtype]:
        """``(x unread, samples per batch, output shape, output dtype)``, checked by every part."""
        checked = [p.checked_stream(x, chunk_size, batch_size, what) for p in self.parts]
        shape, dtype = self.parts[0].output_of(checked[0][0])
        return checked[0][1], min(c[2] for c in checked), shape, dtype

    def rollout(self, x0: Any, steps: int, chunk_size: int = DEFAULT_CHUNK) -> np.ndarray:
        """Every member's rollout from ``x0``, ``[members, steps + 1, batch, ...]`` in the blend's
        order (each structural config's members run together)."""
        return np.concatenate([p.rollout(x0, steps, chunk_size) for p in self.parts])

    def rollout_mean_std(self, x0: Any, steps: int, chunk_size: int = DEFAULT_CHUNK) -> tuple[np.ndarray, np.ndarray]:
        """The weighted mean and population std over members of :meth:`rollout` at every step,
        ``[steps + 1, batch, ...]`` each (step 0: ``x0`` and zeros)."""
        return _weighted(self.rollout(x0, steps, chunk_size), self.weights, 0, _dtype(x0))


class Blend(Calibrated, Blended):
    """Distinct members of one store with counts, possibly of several structural configurations:
    what :meth:`~sweep.ensemble.Ensemble.select_greedy` returns (see :mod:`sweep.ensemble._blend`).

    Args:
        parts: One selection per structural config (an ``Ensemble``, or a ``HeldEnsemble`` for a
            service), in the blend's order.
        counts: ``[members]`` integers >= 1, each member's multiplicity, in the parts' order.

    Attributes:
        parts: The selections, one per structural config.
        counts: ``[members]`` int64.
        weights: ``counts / sum(counts)``.

    Examples:
        ```python
        blend = ens.select_greedy(8)
        mean, std = blend.recalibrate("val").mean_std(x, calibrated=True)
        blend.export("blend-8")
        ```
    """

    def __init__(self, parts: Sequence[Calibrated], counts: Any):
        counts = np.asarray(counts, np.int64)
        if not parts or len(counts) != sum(len(p) for p in parts) or (counts < 1).any():
            raise QueryError(
                f"Blend(counts={counts.tolist()}): give one count >= 1 per member of the parts "
                f"({sum(len(p) for p in parts)} members)"
            )
        stores = {p._store.manifest_sha256 or p._store.root: p._store.root for p in parts}  # one store by digest
        if len(stores) > 1:
            raise QueryError(
                f"Blend(parts): the parts come from {len(stores)} stores ({', '.join(sorted(stores.values()))}); a "
                f"blend holds members of one store"
            )
        index = pa.concat_tables([p.index for p in parts], promote_options="default")
        ids = index["member_id"].to_pylist()
        if len(set(ids)) != len(ids):
            raise QueryError(
                "Blend(parts): a member is in two parts; give each member once, with its count in `counts`"
            )
        super().__init__(parts[0]._store, index)
        self.parts, self.counts = list(parts), counts

    def __repr__(self) -> str:
        configs = ", ".join(f"{p._config_key('Blend')} ({len(p)})" for p in self.parts)
        return f"Blend of {len(self)} members (counts {self.counts.tolist()}) of {len(self.parts)} config(s): {configs}"

    @classmethod
    def of(cls, ens: Calibrated, counts: Any) -> Blend:
        """The blend of the members of ``ens`` (any selection) with ``counts`` (one per member, in
        its order; a count of 0 leaves the member out), grouped by structural config in the order
        of each config's first member.

        Examples:
            ```python
            blend = Blend.of(ens.best(4), [2, 1, 1, 0])
            ```
        """
        counts = np.asarray(counts, np.int64)
        if len(counts) != len(ens) or (counts < 0).any() or not counts.sum():
            raise QueryError(
                f"Blend.of(counts={counts.tolist()}): give one count >= 0 per member ({len(ens)}), not all 0"
            )
        configs = ens.index["config_id"].to_pylist()
        parts, kept = [], []
        for config in dict.fromkeys(configs):
            rows = [i for i, c in enumerate(configs) if c == config and counts[i]]
            if rows:
                parts.append(type(ens)(ens._store, ens.index.take(pa.array(rows))))
                kept += rows
        return cls(parts, counts[kept])

    def predict_mean_std(self, x: Any, members: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """``(mean, std, every member's output or None)`` on ``x``: what a service answers (see
        :meth:`sweep.ensemble.HeldEnsemble.predict_mean_std`), weighted."""
        y = self.predict(x)
        mean, std = _weighted(y, self.weights, 0, _dtype(x))
        return mean, std, y if members else None

    def scores(
        self, split: str = "test", chunk_size: int = DEFAULT_CHUNK, thresholds: Any = None, fields: bool = False
    ) -> pa.Table:
        """Ensemble scores of the blend (its members repeated by count) on the stored ``split``
        samples (``one_step``) and trajectories (``rollout`` per step): the score columns of
        :meth:`~sweep.ensemble.Ensemble.scores` (``kind``, ``step``, ``members``, ``points``, CRPS,
        MAE, RMSE, spread, spread-skill, coverage, rank histogram, then ``crps_skill``,
        ``crps_spread``, with ``fields`` ``energy_score`` and ``variogram_score``, and
        ``twcrps_<t>``, ``brier_<t>`` per threshold). Every member's outputs on the split are held
        at once (a blend is a few members)."""
        split = check_split(split, "scores")
        extras = Extras.checked(thresholds, fields, "scores")
        x, y = self.split_samples(split, "scores")
        rows = multiset_rows(self._multiset(self.predict(x, chunk_size))[:, None], y[None], "one_step", 0, extras)
        reference = self._rollout_reference(split, "scores")
        if reference is not None:
            start, traj = reference  # with history: from the first h states
            states = self._multiset(self.rollout(start, traj.shape[1] - 1, chunk_size))[:, 1:]
            rows += multiset_rows(states, np.swapaxes(traj, 0, 1)[1:], "rollout", 1, extras)
        return pa.Table.from_pylist(rows)

    def _multiset(self, values: np.ndarray) -> np.ndarray:
        return np.repeat(values, self.counts, axis=0)

    def split_samples(self, split: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
        return self.parts[0].split_samples(split, what)

    def _rollout_reference(self, split: str, what: str) -> tuple[np.ndarray, np.ndarray] | None:
        return self.parts[0]._rollout_reference(split, what)

    def _config_key(self, what: str) -> str:
        return "+".join(p._config_key(what) for p in self.parts)

    def _weighted_parts(self) -> tuple[list[Predictions], np.ndarray | None]:
        return list(self.parts), self.weights


def _dtype(x: Any) -> np.dtype:
    return np.result_type(np.asarray(x).dtype, np.float32)
