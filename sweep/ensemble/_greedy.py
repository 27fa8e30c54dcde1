"""Ensembles across configurations: Caruana et al.'s (2004) greedy selection with replacement on a
validation score, giving the weighted :class:`~sweep.ensemble.Blend` of :mod:`._blend`, whose
members may be of different structures (architectures).

Greedy selection: start from no member; ``k`` times, add the member (any member of the pool,
again if it was chosen before) whose addition gives the best validation score of the members
chosen so far, counted with their multiplicity; ties go to the earlier member of the pool. A
member chosen ``n`` times weighs ``n / k``. The score of a weighted ensemble:

- ``"crps"``: the CRPS of the weighted members' distribution, ``sum_i w_i |x_i - y| - 1/2
  sum_ij w_i w_j |x_i - x_j|`` per point, averaged (with equal weights, the CRPS of the members
  themselves, ``crps_ensemble`` of the scores);
- ``"rmse"``: of the weighted mean.

```python
blend = sweep.load("runs/heat").select_greedy(8, metric="crps", split="val")
blend.weights                      # per distinct member, summing to 1
mean, std = blend.mean_std(x)      # weighted, members of each structure run together
```
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from .._errors import QueryError
from ._blend import Blend
from ._calibrated import Calibrated

METRICS = ("crps", "rmse")


def weighted_score(values: np.ndarray, truth: np.ndarray, weights: np.ndarray, metric: str) -> float:
    """The ``metric`` of members ``values`` ``[M, P]`` weighing ``weights`` ``[M]`` (summing to 1)
    against ``truth`` ``[P]``, averaged over the points."""
    w = weights[:, None]
    if metric == "rmse":
        return float(np.sqrt(np.mean(np.square((w * values).sum(0) - truth))))
    skill = (w * np.abs(values - truth)).sum(0)
    order = np.argsort(values, axis=0)
    x, ws = np.take_along_axis(values, order, 0), np.take_along_axis(np.broadcast_to(w, values.shape), order, 0)
    below = np.cumsum(ws, 0) - ws  # weight of the members below each one
    pairs = (2 * ws * x * (below - (1 - below - ws))).sum(0)  # sum_ij w_i w_j |x_i - x_j|
    return float(np.mean(skill - pairs / 2))


def greedy(values: np.ndarray, truth: np.ndarray, k: int, metric: str) -> np.ndarray:
    """How many times each member of ``values`` ``[M, P]`` is chosen by ``k`` greedy steps with
    replacement (``[M]`` int64 summing to ``k``)."""
    counts = np.zeros(len(values), np.int64)
    for step in range(1, k + 1):
        trials = [
            weighted_score(values, truth, (counts + np.eye(len(values), dtype=np.int64)[i]) / step, metric)
            for i in range(len(values))
        ]
        counts[int(np.argmin(trials))] += 1
    return counts


def select_greedy(parts: Sequence[Calibrated], k: int, metric: str, split: str, chunk_size: int) -> Blend:
    """See :meth:`~sweep.ensemble.Ensemble.select_greedy`; ``parts``: the pool's members, one
    selection per structural config, in pool order."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise QueryError(f"select_greedy(k={k!r}): give the number of greedy steps, an integer >= 1")
    if metric not in METRICS:
        raise QueryError(f"select_greedy(metric={metric!r}): choose one of {', '.join(map(repr, METRICS))}")
    configs = [p.index["config_id"][0].as_py() for p in parts]
    samples = [p.split_samples(split, "select_greedy") for p in parts]
    x, y = samples[0]
    for c, (xc, yc) in zip(configs[1:], samples[1:], strict=True):
        if xc.shape != x.shape or yc.shape != y.shape or not (np.array_equal(xc, x) and np.array_equal(yc, y)):
            raise QueryError(
                f"select_greedy(split={split!r}): config {c} holds other {split} samples than config {configs[0]}; "
                f"members are compared on the same samples: select configurations of one problem"
            )
    pool = np.concatenate([p.predict(x, chunk_size) for p in parts])
    pool = pool.reshape(sum(map(len, parts)), -1).astype(np.float64)
    counts = greedy(pool, y.reshape(-1).astype(np.float64), int(k), metric)
    chosen, start = [], 0
    for p in parts:
        picked = np.flatnonzero(counts[start : start + len(p)])
        if len(picked):
            chosen.append((type(p)(p.store, p.index.take(pa.array(picked))), counts[start + picked]))
        start += len(p)
    return Blend([e for e, _ in chosen], np.concatenate([c for _, c in chosen]))
