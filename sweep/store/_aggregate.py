"""Aggregate a sweep's block checkpoints into global ensembles, one per structural config.

Each trial's checkpoint holds a stacked *block*; the aggregator unstacks every block and
restacks the members of all trials of a structural config into one global ensemble, whose
member order is stable: by the vmapped hyperparameter values (sorted by name), then by seed.
It streams config by config and, past ``shard_bytes``, shard by shard, holding one output
file and one block at a time. Results are deterministic (aggregating twice gives
byte-identical files; adding seeds adds members and leaves the others bit-identical), and the
new store replaces the previous one atomically (see :mod:`._generations`). The test samples and
trajectories figures draw from are copied from the sweep directory (``sweep.run`` wrote them): the
aggregator never loads data, so it never runs a problem's code.

```python
path = sweep.aggregate("runs/heat")   # -> "runs/heat/ensembles"
ens = sweep.load(path)
```
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Iterator
from functools import partial
from typing import Any, NamedTuple

import jax
import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
from tqdm.auto import tqdm

from .._canonical import canonical_json
from .._errors import StoreError
from .._fs import filesystem_path, local_copy
from ..planning import PLAN_FILE, Plan, TrialPlan, read_plan
from ..problems import Dataset
from ..training import BlockRef, find_blocks
from . import _members
from ._members import Column, Member, Source
from ._samples import read_samples, sample_tables, write_store_samples
from ._schema import (CONFIGS, CONFIGS_SCHEMA, HISTORY_EPOCHS, MEMBERS, SAMPLES, STATUSES, STORE_NAME,
                      curves_by_column, history_column, leaves_files, members_schema, rollout_columns,
                      rollout_curves_by_column, value_columns)
from ._writer import StoreWriter

DEFAULT_SHARD_BYTES = 256 * 2**20
_SWEEP_ONLY = ("seeds", "seeds_per_trial", "resources", "grid", "vmap")  # not part of a config


def aggregate(sweep_dir: str | os.PathLike, filesystem: pafs.FileSystem | None = None, progress: bool = True,
              *, shard_bytes: int = DEFAULT_SHARD_BYTES, only_complete: bool = False) -> str:
    """Aggregate the newest checkpoint of every trial under ``sweep_dir`` into ``<sweep_dir>/ensembles``.

    Planned members (``plan.json``) without a checkpoint are listed under ``missing`` in the
    manifest and reported in a warning; so is a sweep without test samples (``samples.parquet``,
    written by ``sweep.run``), whose figures then show no predictions. ``only_complete``: leave
    out blocks that have not reached their planned epochs (unless a scheduler stopped them), as
    after an interrupted run. Returns the store path.
    """
    fs, root = filesystem_path(sweep_dir, filesystem)
    plan = read_plan(fs, root)
    if plan is None:
        warnings.warn(f"{root + '/' + PLAN_FILE!r} not found: planned members without a checkpoint cannot be listed",
                      stacklevel=2)
    refs = sorted(find_blocks(root, fs).values(), key=lambda r: r.trial_key)
    if only_complete:
        stopped = plan.stopped_trials if plan else frozenset()
        refs = [r for r in refs if r.epoch >= r.spec.training.epochs or r.trial_key in stopped]
    sources = [Source(r.trial_key, r.spec, r.seeds, r.hparams, partial(_load_ref, fs, r)) for r in refs]
    if not sources:
        raise StoreError(f"{str(sweep_dir)!r}: no block checkpoints (block.json) found; nothing to aggregate")
    samples = read_samples(fs, root)
    if SAMPLES not in samples:
        warnings.warn(f"{root + '/' + SAMPLES!r} not found: the store holds no test samples, so `sweep plot` draws no "
                      f"predictions (sweep.run writes the file; run the sweep again to add it)", stacklevel=2)
    _aggregate(fs, f"{root}/{STORE_NAME}", sources, plan, progress, shard_bytes, samples)
    return f"{str(sweep_dir).rstrip('/')}/{STORE_NAME}"


def aggregate_blocks(store_dir: str | os.PathLike, blocks: Iterable[Any], plan: Plan | None = None,
                     filesystem: pafs.FileSystem | None = None, progress: bool = False,
                     *, shard_bytes: int = DEFAULT_SHARD_BYTES, datasets: dict[str, Dataset] | None = None) -> str:
    """Aggregate in-memory blocks (``SavedBlock``-like: spec, seeds, hparams, shapes, state,
    history, trial_id) into a store at ``store_dir``; ``plan`` names the grid columns and the
    planned members (without it, columns are the keys whose values differ between blocks);
    ``datasets`` (by ``spec.problem_id``) gives the test samples the store keeps for figures.
    """
    fs, path = filesystem_path(store_dir, filesystem)
    sources = [Source(b.trial_id, b.spec, tuple(b.seeds), tuple(map(dict, b.hparams)), partial(lambda b: b, b))
               for b in blocks]
    if not sources:
        raise StoreError("`blocks`: empty; give at least one block to aggregate")
    samples = {} if datasets is None else sample_tables(datasets)
    _aggregate(fs, path, sorted(sources, key=lambda s: s.trial_id), plan, progress, shard_bytes, samples)
    return str(store_dir)


def _load_ref(fs: pafs.FileSystem, ref: BlockRef):
    with local_copy(fs, ref.path) as directory:
        return ref.load(directory)


# -- the store ------------------------------------------------------------------------------------
class _Job(NamedTuple):
    """What every step of one aggregation shares."""

    sources: list[Source]
    specs: list[dict]  # each source's spec as a dict
    columns: list[Column]
    types: dict
    schema: pa.Schema
    metrics: list[str]  # stored metric names (columns val_<m>, test_<m>)
    names: dict[str, tuple[str, ...]]  # vmapped hyperparameter names per config
    trials: dict[str, list[TrialPlan]]  # planned trials per config


def _aggregate(fs: pafs.FileSystem, store_path: str, sources: list[Source], plan: Plan | None,
               progress: bool, shard_bytes: int, samples: dict[str, pa.Table]) -> None:
    if shard_bytes < 1:
        raise StoreError(f"`shard_bytes`: got {shard_bytes}; must be >= 1")
    metrics = _members.metric_names(sources)
    columns, names = _members.grid_value_columns(sources, plan, metrics), _members.hparam_names(sources, plan)
    specs = [s.spec.to_dict() for s in sources]
    types = _members.column_types(columns, sources, specs, names)
    trials: dict[str, list[TrialPlan]] = {}
    for t in plan.trials if plan else ():
        trials.setdefault(t.config_id, []).append(t)
    schema = members_schema(columns, {name: t for name, (t, _) in types.items()}, metrics)
    job = _Job(sources, specs, columns, types, schema, metrics, names, trials)
    by_config: dict[str, list[tuple[int, Source]]] = {}
    for i, src in enumerate(sources):
        by_config.setdefault(src.spec.config_id, []).append((i, src))
    bar = tqdm(total=len(sources), desc="aggregating trials", unit="trial", disable=not progress or len(sources) < 16)
    configs: list[dict] = []
    missing: dict[str, dict] = {}
    with StoreWriter(fs, store_path) as writer:
        tables = _tables(job, by_config, writer, _Loader(sources, bar), shard_bytes, configs, missing)
        writer.write_table(MEMBERS, job.schema, tables, sorting=("config_id", "member_id"))
        bar.close()
        writer.write_table(CONFIGS, CONFIGS_SCHEMA, [pa.Table.from_pylist(configs, CONFIGS_SCHEMA)])
        write_store_samples(writer, samples, {s.spec.config_id: s.spec.problem_id for s in sources})
        for cid in set(trials) - set(by_config):  # planned configs without any checkpoint
            missing |= {m["trial_id"]: m for m in _members.missing(trials[cid], set(), names.get(cid, ()), columns)}
        missing_list = [missing[t.trial_key] for t in plan.trials if t.trial_key in missing] if plan else []
        num_members, num_missing = sum(c["num_members"] for c in configs), sum(len(m["members"]) for m in missing_list)
        writer.commit({
            "num_members": num_members, "num_configs": len(configs), "num_trials": len(sources),
            "num_missing": num_missing, "missing": missing_list, "columns": [c._asdict() for c in columns],
            "metrics": metrics,
        })
    if missing_list:
        warnings.warn(
            f"{num_missing} planned member(s) of {len(missing_list)} trial(s) have no checkpoint (first: trial "
            f"{missing_list[0]['trial_id']!r}); the store has {num_members} members and lists the missing "
            f"ones under 'missing' in its manifest.json", stacklevel=3,
        )


class _Loader:
    """Loads blocks on demand, holding only the last one (as NumPy leaves)."""

    def __init__(self, sources: list[Source], bar):
        self.sources, self.bar, self.seen = sources, bar, set()
        self.last: tuple[int, Any, list[np.ndarray], Any] | None = None

    def __call__(self, i: int) -> tuple[Any, list[np.ndarray], Any]:
        if self.last is None or self.last[0] != i:
            self.last = None
            src = self.sources[i]
            block = src.load()
            if tuple(block.seeds) != src.seeds or tuple(map(dict, block.hparams)) != src.hparams:
                raise StoreError(f"trial {src.trial_id!r}: its checkpoint changed while aggregating; aggregate again")
            leaves, treedef = jax.tree_util.tree_flatten(jax.tree_util.tree_map(np.asarray, block.state.params))
            self.last = (i, block, leaves, treedef)
            if i not in self.seen:
                self.seen.add(i)
                self.bar.update()
        return self.last[1:]


def _tables(job: _Job, by_config: dict[str, list[tuple[int, Source]]], writer: StoreWriter, loader: _Loader,
            shard_bytes: int, configs: list[dict], missing: dict[str, dict]) -> Iterator[pa.Table]:
    """Write every config's leaves file(s) (configs in id order), yielding the members' rows as they
    are gathered; fill ``configs`` (rows of configs.parquet) and ``missing`` (planned members
    without a checkpoint). Only one config's member list is held at a time."""
    first_member = 0
    for cid, sources in sorted(by_config.items()):
        members = _members.ordered(sources, job.names.get(cid, ()))
        block, leaves, _ = loader(members[0].source)
        per_member = sum(leaf[0].nbytes for leaf in leaves)
        n = len(members)
        per_shard = n if n * per_member <= shard_bytes else max(1, shard_bytes // per_member)
        files = leaves_files(cid, n, per_shard)
        for start, file in zip(range(0, n, per_shard), files):
            chunk = members[start:start + per_shard]
            tree, rows = _gather(chunk, job, loader, cid)
            writer.write_leaves(file, tree)
            rows["member_id"] = np.arange(first_member + start, first_member + start + len(chunk))
            yield _table(job, rows, chunk)
        spec_dict = {k: v for k, v in job.specs[members[0].source].items() if k not in _SWEEP_ONLY}
        sample_shape, out_channels, num_train = block.shapes
        configs.append({
            "config_id": cid, "spec": canonical_json(spec_dict), "num_members": n,
            "first_member": first_member, "members_per_shard": per_shard, "files": files,
            "sample_shape": list(sample_shape), "out_channels": out_channels, "num_train": num_train,
        })
        first_member += n
        found = {m.key for m in members}
        missing |= {m["trial_id"]: m for m in _members.missing(job.trials.get(cid, []), found, job.names.get(cid, ()), job.columns)}


def _gather(chunk: list[Member], job: _Job, loader: _Loader, cid: str) -> tuple[Any, dict]:
    """Stacked parameters and per-member results of ``chunk``, loading each block once."""
    sources, n = job.sources, len(chunk)
    out: list[np.ndarray] | None = None
    structure = None
    rows = {"epochs": np.zeros(n, np.int32), "diverged": np.zeros(n, bool), "stopped": np.zeros(n, bool),
            HISTORY_EPOCHS: [None] * n, "curves": {c: [None] * n for c in value_columns(job.metrics)},
            "rollouts": {c: [None] * n for c in rollout_columns(job.metrics)}}
    by_source: dict[int, list[int]] = {}
    for p, m in enumerate(chunk):
        by_source.setdefault(m.source, []).append(p)
    for i, positions in by_source.items():
        block, leaves, treedef = loader(i)
        if out is None:
            out = [np.empty((n, *leaf.shape[1:]), leaf.dtype) for leaf in leaves]
            structure = (treedef, [(o.shape[1:], o.dtype) for o in out])
        if (treedef, [(leaf.shape[1:], leaf.dtype) for leaf in leaves]) != structure:
            raise StoreError(f"trial {sources[i].trial_id!r}: its parameters differ in structure from the other trials of config {cid}")
        pos = np.asarray(positions)
        idx = np.asarray([chunk[p].index for p in positions])
        for o, leaf in zip(out, leaves):
            o[pos] = leaf[idx]
        h = block.history
        epochs = int(h.epoch[-1]) if len(h.epoch) else 0
        rows["epochs"][pos] = epochs
        rows["stopped"][pos] = epochs < sources[i].spec.training.epochs
        rows["diverged"][pos] = np.asarray(h.diverged)[idx]
        curves, rollouts = curves_by_column(h), rollout_curves_by_column(h)
        for p, j in zip(positions, idx):
            for column, curve in curves.items():
                rows["curves"][column][p] = np.asarray(curve[j], job.schema.field(column).type.to_pandas_dtype())
            for column, curve in rollouts.items():
                rows["rollouts"][column][p] = np.asarray(curve[j], np.float64)
            rows[HISTORY_EPOCHS][p] = np.asarray(h.epoch, np.int32)
    return jax.tree_util.tree_unflatten(structure[0], out), rows


def _table(job: _Job, rows: dict, chunk: list[Member]) -> pa.Table:
    sources = job.sources
    data = {
        "member_id": rows["member_id"],
        "config_id": [sources[m.source].spec.config_id for m in chunk],
        "seed": [m.key[1] for m in chunk],
        "trial_id": [sources[m.source].trial_id for m in chunk],
        "status": np.where(rows["diverged"], STATUSES[1], np.where(rows["stopped"], STATUSES[2], STATUSES[0])).tolist(),
        "epochs": rows["epochs"],
        HISTORY_EPOCHS: _lists(rows[HISTORY_EPOCHS], pa.int32()),
    }
    for column, curves in rows["curves"].items():  # null where a block has no such curve (no validation set)
        data[column] = [None if c is None else c[-1] if len(c) else np.nan for c in curves]
        data[history_column(column)] = _lists(curves, job.schema.field(column).type)
    for column, curves in rows["rollouts"].items():  # null where a block has no such trajectories
        data[column] = _lists(curves, pa.float64())
    for c in job.columns:
        encode = job.types[c.name][1]
        data[c.name] = [encode(_members.value(c, job.specs[m.source], m.hparams)) for m in chunk]
    return pa.table({name: data[name] for name in job.schema.names}, schema=job.schema)


def _lists(arrays: list[np.ndarray | None], dtype: pa.DataType) -> pa.Array:
    """A list column of ``arrays`` (``None``: a null list)."""
    null = np.asarray([a is None for a in arrays])
    lengths = [0 if a is None else len(a) for a in arrays]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    values = np.concatenate([np.zeros(0, dtype.to_pandas_dtype())] + [a for a in arrays if a is not None])
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, dtype), mask=pa.array(null) if null.any() else None)
