"""Score a selection's members on the samples and trajectories a store holds (or on a whole
split given to ``Ensemble.scores(samples=..., trajectories=...)``: array-likes read a block at a
time), configuration by configuration, and build the ``ensemble_scores.parquet`` table (its
columns: :func:`sweep.store._schema.scores_schema`).

Members run ``chunk_size`` at a time through the streamed inference and rollout programs
(:mod:`._inference`, :mod:`._rollout`); their outputs on a block of samples (one-step) or of
trajectories (every step) are gathered for *all* members, because the scores sort the members at
every point (:mod:`._scores`), and the block is as many samples or trajectories as keep
``members x values`` under :data:`BLOCK_BYTES` (at least one). Memory is therefore bounded by the
block, whatever the number of members (10,000 members of 1,024 values: 41 MB), and the scores are
exact, not streamed approximations; the price is one pass over the members' parameters per block.
The blocks are padded to one shape (padded points weigh zero), so each shape compiles once.

The functions take the members as a :class:`~._predictions.Predictions` (the selection and
streamed inference an ``Ensemble`` builds on), never an ``Ensemble``: ``Ensemble.scores``,
``stored_scores`` and ``summary(scores=True)`` call them, so imports point one way.

Losses and metrics (for the ensemble gain) are evaluated where they are built-ins; one given by
import path is code the store names, which reading a store never runs: its columns stay null.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, NamedTuple

import equinox as eqx
import jax
import numpy as np
import pyarrow as pa

from .._batches import padded, pieces
from .._errors import QueryError, SweepError, warn
from .._layout import SPLIT_FILES
from .._words import counted
from ..metrics import BUILTINS, LOSS, Metric, metric_name, rollout_gmean
from ..store import SCORE_COLUMNS, Store, gain_column, scores_schema
from ._array_args import array_like
from ._field_totals import Extras
from ._predictions import Predictions
from ._scores import Totals, block_sums, metric_sums

BLOCK_BYTES = 64 * 2**20  # float32 member values gathered at once (the sort works in float64 beside them)
SIZE_GROUPS = 8  # subsets of members averaged per point of an ensemble-size curve (:func:`_subsets`)


def check_split(split: Any, what: str) -> str:
    if split not in SPLIT_FILES:
        raise QueryError(f'{what}(split={split!r}): choose "val" or "test"')
    return split


def configurations(ens: Predictions) -> list[tuple[dict[str, Any], Predictions]]:
    """``(key, members)`` of every configuration (config_id and grid values) of a selection, in store order."""
    keys = ["config_id", *ens.grid_columns]
    index = ens.index
    rows: dict[tuple, list[int]] = {}
    for i, key in enumerate(zip(*(index[k].to_pylist() for k in keys), strict=True)):
        rows.setdefault(key, []).append(i)
    out = [(dict(zip(keys, key, strict=True)), type(ens)(ens.store, index.take(r))) for key, r in rows.items()]
    return out


def _real_targets(ens: Predictions, y: np.ndarray, what: str) -> None:
    """A :class:`QueryError` unless the members predict real values of the targets' shape."""
    config = ens.one_config(what)
    training = config.spec.training
    classes = [e for e in (training.loss, *training.metrics) if e in BUILTINS and BUILTINS[e].integer_targets]
    integer = np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.bool_)
    shapes, static = ens.store.template(config.config_id)
    sample = jax.ShapeDtypeStruct(tuple(config.sample_shape), np.float32)
    out = tuple(jax.eval_shape(lambda p, x: eqx.combine(p, static)(x), shapes, sample).shape)  # traced, not run
    if classes or integer or tuple(y.shape[1:]) != out:
        why = (
            f"it is trained with {classes[0]!r} on class labels"
            if classes
            else f"its targets are {y.dtype} class labels"
            if integer
            else f"its outputs {out} are not of its targets' shape {tuple(y.shape[1:])}"
        )
        raise QueryError(
            f"{what}: config {config.config_id} cannot be scored: {why}. Ensemble scores (CRPS, spread-skill, "
            f"coverage) compare real-valued predictions with real-valued targets of the same shape"
        )


def _block(count: int, members: int, values_per_item: int, block_bytes: int | None) -> int:
    """Items (samples, trajectories) per block: as many as keep ``members`` x their values in
    ``block_bytes`` (None: :data:`BLOCK_BYTES`, read when called)."""
    block_bytes = BLOCK_BYTES if block_bytes is None else block_bytes
    return int(np.clip(block_bytes // max(1, 4 * members * values_per_item), 1, count))


def _sizes(members: int) -> list[int]:
    """Ensemble sizes of the size curve: 2, 4, 8, ... below ``members``, then ``members``."""
    return [2**i for i in range(1, max(1, math.ceil(math.log2(members))))] + [members] if members > 1 else []


def _subsets(members: int, k: int) -> list[np.ndarray]:
    """The subsets of ``k`` of ``members`` (indices) whose scores are averaged at size ``k`` of the
    size curve: every one where there are at most :data:`SIZE_GROUPS` (averaged over all of them,
    the fair CRPS is the whole ensemble's, exactly: 6 pairs of 4 members, not 2), else
    :data:`SIZE_GROUPS` distinct ones: the disjoint groups of the members in order, then those of
    fixed shuffles (seeded: the same subsets at every aggregation), each subset drawn alike.

    ```python
    [s.tolist() for s in _subsets(4, 2)]   # [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]]
    ```
    """
    if math.comb(members, k) <= SIZE_GROUPS:
        return [np.array(c) for c in itertools.combinations(range(members), k)]
    rng, order, found = np.random.default_rng(0), np.arange(members), {}
    while len(found) < SIZE_GROUPS:
        for g in range(members // k):  # (a subset drawn again is left out: each one once)
            found.setdefault(tuple(sorted(order[g * k : (g + 1) * k].tolist())), None)
        order = rng.permutation(members)
    return [np.array(c) for c in list(found)[:SIZE_GROUPS]]


def one_step(
    ens: Predictions,
    x: np.ndarray,
    y: np.ndarray,
    chunk_size: int,
    metrics: list,
    block_bytes: int | None = None,
    extras: Extras | None = None,
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, dict[int, list[dict[str, np.ndarray]]]]:
    """Scores of the members' predictions of ``x`` against ``y`` (with the columns of ``extras``),
    the summed metrics of the ensemble mean and of the members (``metrics``: per-sample
    functions), and the scores of the subsets of each size of :func:`_sizes` (below all members):
    :func:`_subsets`."""
    config, x = ens.checked_lazy(x, chunk_size, "scores")
    dtype = ens.dtype_of(config)
    m, per_sample = len(ens), math.prod(y.shape[1:])
    size = _block(x.shape[0], m, per_sample, block_bytes)
    totals, extra = Totals(m), extras and extras.totals()
    subsets = {k: [(chosen, Totals(k)) for chosen in _subsets(m, k)] for k in _sizes(m)[:-1]}
    of_mean, of_members = np.zeros(len(metrics)), np.zeros(len(metrics))
    held = ens.held_chunks(config, chunk_size) if x.shape[0] > size else None
    for rows in pieces(x.shape[0], size):
        count = rows.stop - rows.start
        xb, yb = padded(np.asarray(x[rows]).astype(dtype), size), padded(np.asarray(y[rows]), size)
        values = np.empty((m, *yb.shape), np.float32)
        for rows, out in ens.outputs(config, xb, chunk_size, held):
            values[rows] = out
        sample_weights = (np.arange(size) < count).astype(np.float32)
        flat, truth, weights = values.reshape(m, 1, -1), yb.reshape(1, -1), np.repeat(sample_weights, per_sample)
        totals.add(*block_sums(flat, truth, weights))
        if extra:
            extra.add(values[:, None], yb[None], sample_weights)
        for groups in subsets.values():
            for chosen, t in groups:
                t.add(*block_sums(flat[chosen], truth, weights))
        a, b = metric_sums(values, yb, sample_weights, metrics)
        of_mean, of_members = of_mean + a, of_members + b
    sizes = {k: [t.finish() for _, t in groups] for k, groups in subsets.items()}
    scores = totals.finish() | (extra.finish() if extra else {})
    return scores, of_mean / x.shape[0], of_members / x.shape[0], sizes


def rollout(
    ens: Predictions, traj: Any, chunk_size: int, block_bytes: int | None = None, extras: Extras | None = None
) -> dict[str, np.ndarray]:
    """Scores per step ``1..T`` of the members' rollouts from the first states of ``traj``
    ``[trajectories, T + 1, ...]`` against the trajectories (with the columns of ``extras``: a
    field is a state). ``traj`` may be an array-like larger than memory (an ``h5py.Dataset``):
    it is read a block of trajectories at a time."""
    config = ens.one_config("scores")
    first = np.asarray(traj[:1])  # checked on one trajectory, before any work
    start, reference = ens.rollout_start(config, first)  # with history: the first h states
    _, _, steps = ens.checked_rollout_inputs(start, reference.shape[1] - 1, chunk_size, "scores")
    m, per_state = len(ens), math.prod(traj.shape[2:])
    size = _block(traj.shape[0], m, steps * per_state, block_bytes)
    totals, extra = Totals(m), extras and extras.totals()
    for rows in pieces(traj.shape[0], size):
        count = rows.stop - rows.start
        start, reference = ens.rollout_start(config, np.asarray(traj[rows]))
        _, x0, _ = ens.checked_rollout_inputs(start, steps, chunk_size, "scores")
        x0b, truth = padded(x0, size), padded(reference[:, 1:], size)
        values = np.empty((m, steps, size, *traj.shape[2:]), np.float32)
        for rows, t, states in ens.rollout_states(config, x0b, steps, chunk_size):
            values[rows, t - 1 : t - 1 + states.shape[1]] = states
        sample_weights = (np.arange(size) < count).astype(np.float32)
        weights = np.repeat(sample_weights, per_state)
        truth = np.swapaxes(truth, 0, 1)  # [steps, size, ...]
        totals.add(*block_sums(values.reshape(m, steps, -1), truth.reshape(steps, -1), weights))
        if extra:
            extra.add(values, truth, sample_weights)
    return totals.finish() | (extra.finish() if extra else {})


def _gain_metrics(ens: Predictions, names: list[str]) -> tuple[list[str], list[Metric]]:
    """The loss and those of ``names`` (stored metric names) this config evaluates with a built-in:
    ``(names, metrics)``."""
    training = ens.spec.training
    entries = {LOSS: training.loss} | {metric_name(e): e for e in training.metrics}
    used = [n for n in (LOSS, *names) if entries.get(n) in BUILTINS]
    return used, [BUILTINS[entries[n]] for n in used]


def _gain(metric: Metric, of_mean: float, of_members: float) -> float:
    """How much better the ensemble mean is than the mean member: above 1, better (an error's
    ``members / ensemble``; a score's, such as ``correlation``, ``ensemble / members``)."""
    better, worse = (of_mean, of_members) if metric.higher_is_better else (of_members, of_mean)
    return better / worse if worse else float("nan")


def configuration_rows(
    ens: Predictions,
    key: dict[str, Any],
    split: str,
    chunk_size: int,
    block_bytes: int | None = None,
    extras: Extras | None = None,
    data: Data | None = None,
) -> list[dict[str, Any]]:
    """Every row of the scores table of one configuration (``ens``: its members) on one split
    (the columns of ``extras`` on one-step, rollout and rollout_gmean rows): on the samples and
    trajectories the store keeps of it, or on ``data`` where given (rows only for what it holds)."""
    config = ens.one_config("scores")
    store: Store = ens.store
    found = store.samples(config.config_id, split) if data is None else data.samples
    if found is None and data is None:
        raise QueryError(
            f"scores(split={split!r}): the store holds no {split} samples for config {config.config_id} (its "
            f"sweep directory had no {SPLIT_FILES[split][0]} when it was aggregated: sweep.run writes it"
            + (", for problems with a validation set" if split == "val" else "")
            + "); nothing is regenerated"
        )
    base = {**key, "split": split, "members": len(ens)}
    rows = [] if found is None else _one_step_rows(ens, found, base, chunk_size, block_bytes, extras)
    traj = store.trajectories(config.config_id, split) if data is None else data.trajectories
    if data is not None and traj is not None:
        _check_trajectories(ens, traj)
    if traj is not None:
        per_step = rollout(ens, traj, chunk_size, block_bytes, extras)
        rows += [
            {**base, "kind": "rollout", "step": t + 1, **_row(per_step, t)} for t in range(len(per_step["points"]))
        ]
        means = {c: float(rollout_gmean(per_step[c])) for c in (*SCORE_COLUMNS, *_extra_columns(per_step))}
        rows.append({**base, "kind": "rollout_gmean", "step": None, "points": int(per_step["points"].sum()), **means})
    return rows


def _one_step_rows(
    ens: Predictions,
    found: tuple[Any, Any],
    base: dict[str, Any],
    chunk_size: int,
    block_bytes: int | None,
    extras: Extras | None,
) -> list[dict[str, Any]]:
    """The one-step and ensemble-size rows of one configuration on samples ``found`` ``(x, y)``."""
    x, y = found
    _real_targets(ens, y, "scores")
    names, metrics = _gain_metrics(ens, ens.store.metrics)
    fns = [m.per_sample for m in metrics]
    scores, of_mean, of_members, sizes = one_step(ens, x, y, chunk_size, fns, block_bytes, extras)
    gains = {}
    for name, metric, e, mm in zip(names, metrics, of_mean, of_members, strict=True):
        gains |= {gain_column(name, "ensemble"): e, gain_column(name, "members"): mm}
        gains[gain_column(name, "gain")] = _gain(metric, e, mm)
    rows = [{**base, "kind": "one_step", "step": 0, **_row(scores, 0), **gains}]
    for k, groups in sizes.items():
        averaged = {c: float(np.mean([g[c][0] for g in groups])) for c in SCORE_COLUMNS}
        rows.append({**base, "kind": "ensemble_size", "step": 0, "members": k, "points": int(scores["points"][0])})
        rows[-1] |= averaged
    if len(ens) > 1:
        rows.append({**base, "kind": "ensemble_size", "step": 0, **_row(scores, 0), "rank_histogram": None})
    return rows


class Data(NamedTuple):
    """A split given to :meth:`Ensemble.scores <sweep.ensemble.Ensemble.scores>` instead of what
    the store keeps of it: ``samples`` ``(x, y)`` and ``trajectories`` ``[n, T + 1, ...]``
    (either None), array-likes read a block at a time (:func:`checked_data`)."""

    samples: tuple[Any, Any] | None
    trajectories: Any


def checked_data(samples: Any, trajectories: Any) -> Data | None:
    """``Data`` of the ``samples`` and ``trajectories`` given to ``scores`` (None where neither
    is), the inputs and targets checked against each other, each left unread where it is an
    array-like (:func:`~._array_args.array_like`); the configurations' shapes are checked when
    each is scored, before its work."""
    if samples is None and trajectories is None:
        return None
    if samples is not None:
        if not isinstance(samples, (tuple, list)) or len(samples) != 2:
            raise QueryError(
                f"scores(samples={type(samples).__name__}): give a pair (x, y) of inputs [n, *sample_shape] and "
                f"targets [n, *target_shape] (arrays, or array-likes such as h5py datasets), or None"
            )
        x, y = (array_like(a) for a in samples)
        if not len(y.shape) or y.shape[0] != x.shape[0] or not np.issubdtype(y.dtype, np.number):
            raise QueryError(
                f"scores(samples=(x, y)): x has shape {tuple(x.shape)} but y has shape {tuple(y.shape)} "
                f"({y.dtype}); give one numeric target per input, y of shape ({x.shape[0] if x.shape else 0}, ...)"
            )
        samples = (x, y)
    return Data(samples, None if trajectories is None else array_like(trajectories))


def _check_trajectories(ens: Predictions, traj: Any) -> None:
    """A :class:`QueryError` unless ``traj`` holds trajectories of ``ens``'s states, long enough to roll out."""
    config = ens.one_config("scores")
    h, sample = ens.history_of(config), tuple(config.sample_shape)
    state = (sample[0] // h, *sample[1:])
    shape = tuple(traj.shape)
    if len(shape) != len(state) + 2 or shape[2:] != state or not shape[0] or shape[1] < h + 1:
        raise QueryError(
            f"scores(trajectories=...): shape {shape}; config {config.config_id} rolls out states of shape {state}"
            f"{f' from {h} of them' if h > 1 else ''}: give an array of shape (trajectories >= 1, states >= {h + 1}, "
            f"{', '.join(map(str, state))})"
        )


def _row(scores: dict[str, np.ndarray], i: int) -> dict[str, Any]:
    return {
        "points": int(scores["points"][i]),
        **{c: float(scores[c][i]) for c in SCORE_COLUMNS},
        "rank_histogram": scores["rank_histogram"][i].tolist(),
        **{c: float(scores[c][i]) for c in _extra_columns(scores)},
    }


def _extra_columns(scores: dict[str, np.ndarray]) -> list[str]:
    """The columns of :class:`~._field_totals.Extras` in ``scores``, in its order."""
    return [c for c in scores if c not in (*SCORE_COLUMNS, "points", "rank_histogram")]


def schema_of(store: Store, extras: Extras | None = None) -> pa.Schema:
    """The stored table's schema (:func:`~sweep.store._schema.scores_schema`), then float64 columns of ``extras``."""
    schema = store.index_schema
    out = scores_schema([schema.field(c) for c in ("config_id", *store.grid_columns)], store.metrics)
    for c in extras.columns() if extras else ():
        out = out.append(pa.field(c, pa.float64()))
    return out


def scores_table(
    ens: Predictions,
    splits: tuple[str, ...],
    chunk_size: int,
    block_bytes: int | None = None,
    skip: bool = False,
    extras: Extras | None = None,
    data: Data | None = None,
) -> pa.Table:
    """The scores table of every configuration of ``ens`` on each split, with the columns of
    ``extras`` (computed at query time; the stored table has none). ``skip``: a configuration
    that cannot be scored on a split (no samples, class labels, a model built by code the store
    names) is left out with a warning instead of raising."""
    rows = []
    left_out: dict[str, dict[str, set[str]]] = {}  # why (naming neither) -> config -> splits
    for key, members in configurations(ens):
        for split in splits:
            try:
                rows += configuration_rows(members, key, split, chunk_size, block_bytes, extras, data)
            except SweepError as e:
                if not skip:
                    raise
                why = str(e).replace(f"config {key['config_id']}", "each config").replace(f"(split={split!r})", "")
                left_out.setdefault(why, {}).setdefault(key["config_id"], set()).add(split)
    for why, configs in left_out.items():  # one warning per reason, not per configuration and split
        on = sorted(set().union(*configs.values()), key=splits.index)
        ids = ", ".join(list(configs)[:5]) + (", ..." if len(configs) > 5 else "")
        warn(f"ensemble scores of {counted(len(configs), 'config')} ({ids}) on {', '.join(on)} left out: {why}")
    return pa.Table.from_pylist(rows, schema_of(ens.store, extras))


def multiset_rows(
    values: np.ndarray, truth: np.ndarray, kind: str, first_step: int, extras: Extras | None = None
) -> list[dict[str, Any]]:
    """Rows of the scores of members' values ``[M, G, S, ...]`` against ``truth`` ``[G, S, ...]``
    (``S`` samples), one per group ``g`` (``step`` ``first_step + g``): the score columns of the
    scores table and those of ``extras``, every point held at once."""
    m, groups = len(values), truth.shape[0]
    totals = Totals(m)
    flat = values.reshape(m, groups, -1)
    totals.add(*block_sums(flat, truth.reshape(groups, -1), np.ones(flat.shape[-1], np.float32)))
    scores = totals.finish()
    if extras:
        extra = extras.totals()
        extra.add(values, truth, np.ones(truth.shape[1]))
        scores |= extra.finish()
    return [{"kind": kind, "step": first_step + g, "members": m, **_row(scores, g)} for g in range(groups)]
