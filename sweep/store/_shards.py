"""One leaves file of a global ensemble and its members' rows: the unit of aggregation.

The aggregator (:mod:`._aggregate`) plans, without reading any leaves, which members of which
blocks go into which leaves file (one per structural config, or one per shard past the shard
size) and describes each as a :class:`ShardTask`. :func:`build_shard` does one: it reads the
parameters of the blocks it needs (NumPy, nothing else of their state), stacks its members in
store order, writes the leaves file into the uncommitted generation and returns the file's
checksum record with its members' rows as a small Arrow table. Tasks are independent, so they
run one after another in the aggregating process or as Ray tasks in parallel
(:class:`sweep.tune.RayTasks`) with the same result, byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs

from .._errors import StoreError
from . import _members, _writer
from ._files import Record
from ._members import Column, Member, Source
from ._schema import (
    HISTORY_EPOCHS,
    ROUND,
    STATUSES,
    curves_by_column,
    history_column,
    rollout_columns,
    rollout_curves_by_column,
    value_columns,
)


class ShardTask(NamedTuple):
    """What one task needs: every field picklable (a Ray task gets it by value)."""

    fs: pafs.FileSystem
    root: str  # the generation directory being written
    file: str  # the leaves file, relative to ``root``
    config_id: str
    first_member: int  # member_id of the shard's first member
    members: list[Member]  # in store order; ``source`` is a key of ``sources``
    sources: dict[int, Source]  # the blocks this shard reads, and nothing else
    like: tuple[tuple[tuple[int, ...], str], ...]  # (shape, dtype) of one member's parameter leaves
    columns: tuple[Column, ...]
    types: dict[str, tuple[pa.DataType, Callable[[Any], Any]]]
    schema: pa.Schema
    metrics: tuple[str, ...]  # stored metric names (columns val_<m>, test_<m>)
    adaptive: Any = None  # the sweep's sweep.Adaptive seeds (the round column), or None


class ShardResult(NamedTuple):
    file: str
    record: Record
    rows: pa.Table  # the shard's rows of members.parquet, in store order
    trials: tuple[str, ...]  # the trials whose blocks it read


def build_shard(task: ShardTask) -> ShardResult:
    """Stack the shard's members, write its leaves file, return its record and rows."""
    tree, rows = _gather(task)
    record = _writer.write_leaves_file(task.fs, task.root, task.file, tree)
    rows["member_id"] = np.arange(task.first_member, task.first_member + len(task.members))
    return ShardResult(task.file, record, _table(task, rows), tuple(s.trial_id for s in task.sources.values()))


def _gather(task: ShardTask) -> tuple[Any, dict]:
    """Stacked parameters and per-member results of the shard, reading each block once."""
    chunk, sources, n = task.members, task.sources, len(task.members)
    out = [np.empty((n, *shape), dtype) for shape, dtype in task.like]
    treedef = None
    rows = {
        "epochs": np.zeros(n, np.int32),
        "diverged": np.zeros(n, bool),
        "stopped": np.zeros(n, bool),
        HISTORY_EPOCHS: [None] * n,
        "curves": {c: [None] * n for c in value_columns(task.metrics)},
        "rollouts": {c: [None] * n for c in rollout_columns(task.metrics)},
    }
    by_source: dict[int, list[int]] = {}
    for p, m in enumerate(chunk):
        by_source.setdefault(m.source, []).append(p)
    for i, positions in by_source.items():
        params, h = sources[i].load()
        leaves, structure = jax.tree_util.tree_flatten(params)
        if (treedef is not None and treedef != structure) or [
            (leaf.shape[1:], str(leaf.dtype)) for leaf in leaves
        ] != list(task.like):
            raise StoreError(
                f"trial {sources[i].trial_id!r}: its parameters differ in structure from the other trials "
                f"of config {task.config_id}"
            )
        treedef = structure
        pos = np.asarray(positions)
        idx = np.asarray([chunk[p].index for p in positions])
        for o, leaf in zip(out, leaves):
            o[pos] = leaf[idx]
        epochs = int(h.epoch[-1]) if len(h.epoch) else 0
        rows["epochs"][pos] = epochs
        rows["stopped"][pos] = epochs < sources[i].spec.training.epochs
        rows["diverged"][pos] = np.asarray(h.diverged)[idx]
        curves, rollouts = curves_by_column(h), rollout_curves_by_column(h)
        for p, j in zip(positions, idx):
            for column, curve in curves.items():
                rows["curves"][column][p] = np.asarray(curve[j], task.schema.field(column).type.to_pandas_dtype())
            for column, curve in rollouts.items():
                rows["rollouts"][column][p] = np.asarray(curve[j], np.float64)
            rows[HISTORY_EPOCHS][p] = np.asarray(h.epoch, np.int32)
    return jax.tree_util.tree_unflatten(treedef, out), rows


def _table(task: ShardTask, rows: dict) -> pa.Table:
    sources, chunk = task.sources, task.members
    specs = {i: s.spec.to_dict() for i, s in sources.items()}
    data = {
        "member_id": rows["member_id"],
        "config_id": [task.config_id] * len(chunk),
        "seed": [m.key[1] for m in chunk],
        "trial_id": [sources[m.source].trial_id for m in chunk],
        ROUND: [None if task.adaptive is None else task.adaptive.round_of(m.key[1]) for m in chunk],
        "status": np.where(rows["diverged"], STATUSES[1], np.where(rows["stopped"], STATUSES[2], STATUSES[0])).tolist(),
        "epochs": rows["epochs"],
        HISTORY_EPOCHS: _lists(rows[HISTORY_EPOCHS], pa.int32()),
    }
    for column, curves in rows["curves"].items():  # null where a block has no such curve (no validation set)
        data[column] = [None if c is None else c[-1] if len(c) else np.nan for c in curves]
        data[history_column(column)] = _lists(curves, task.schema.field(column).type)
    for column, curves in rows["rollouts"].items():  # null where a block has no such trajectories
        data[column] = _lists(curves, pa.float64())
    for c in task.columns:
        encode = task.types[c.name][1]
        data[c.name] = [encode(_members.value(c, specs[m.source], m.hparams)) for m in chunk]
    return pa.table({name: data[name] for name in task.schema.names}, schema=task.schema)


def _lists(arrays: list[np.ndarray | None], dtype: pa.DataType) -> pa.Array:
    """A list column of ``arrays`` (``None``: a null list)."""
    null = np.asarray([a is None for a in arrays])
    lengths = [0 if a is None else len(a) for a in arrays]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    values = np.concatenate([np.zeros(0, dtype.to_pandas_dtype())] + [a for a in arrays if a is not None])
    return pa.ListArray.from_arrays(
        pa.array(offsets), pa.array(values, dtype), mask=pa.array(null) if null.any() else None
    )
