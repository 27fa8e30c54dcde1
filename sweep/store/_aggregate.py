"""Aggregate a sweep's block checkpoints into global ensembles, one per structural config.

Each trial's checkpoint holds a stacked *block*; the aggregator unstacks every block and
restacks the members of all trials of a structural config into one global ensemble, whose
member order is stable: by the vmapped hyperparameter values (sorted by name), then by seed.

The work is planned from the checkpoints' ``block.json`` files alone: config by config, which
members (of which blocks) go into which leaves file (one per config, or one per shard of
``shard_bytes`` past that size). Each file is a :class:`~._shards.ShardTask`, run by
``map_tasks`` (the built-in ``map``: one after another here; :class:`sweep.tune.RayTasks`
runs them as Ray tasks in parallel); a task holds one output file and one block at a time and
returns the file's checksum and its members' rows. This process writes ``members.parquet``
from those rows in member order (one row group per leaves file, so a row group never holds two
configs), then ``configs.parquet`` and the manifest, and commits. Results are deterministic
and the same whichever way the tasks ran (byte-identical files; adding seeds adds members and
leaves the others bit-identical), and the new store replaces the previous one atomically (see
:mod:`._generations`). The test samples figures draw from are copied from the sweep directory
(``sweep.run`` wrote them), with the trajectories: the aggregator never loads data, so it never
runs a problem's code.

```python
path = sweep.aggregate("runs/heat")   # -> "runs/heat/ensembles"
ens = sweep.load(path)
```
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial
from typing import Any

import jax
import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
from tqdm.auto import tqdm

from .._canonical import canonical_json
from .._errors import StoreError, warn
from .._fs import filesystem_path
from .._layout import CONFIGS, ENSEMBLE_SCORES, MEMBERS, PLAN, SAMPLES
from ..planning import Plan, TrialPlan
from ..problems import Dataset
from ..spec import Adaptive
from ..training import BlockRef, Shapes
from . import _members
from ._generations import storage_folder, sweeps_inside
from ._members import Column, Source
from ._race import race_manifest
from ._reader import Store
from ._samples import sample_tables, write_store_samples
from ._schema import CONFIGS_SCHEMA, FORMAT, leaves_files, members_schema, statistics_columns
from ._shards import ShardResult, ShardTask, build_shard
from ._sweepdir import SweepDir
from ._writer import StoreWriter

# 16 MiB of parameters per leaves file: ~39,000 members of a 100-parameter net, ~870 of the
# reference ConvNet. A shard is the unit of parallel aggregation and what member() reads (and
# hashes) to return one member: 0.05 s from a local disk, ~0.35 s from S3 at 47 MB/s.
DEFAULT_SHARD_BYTES = 16 * 2**20
_SWEEP_ONLY = ("seeds", "seeds_per_trial", "resources", "grid", "vmap")  # not part of a config
MapTasks = Callable[[Callable[[ShardTask], ShardResult], Iterable[ShardTask]], Iterable[ShardResult]]
Scores = Callable[[Store], "pa.Table | None"]  # the ensemble scores of a written, uncommitted store


def aggregated_blocks(where: SweepDir, only_complete: bool = False) -> list[BlockRef]:
    """The checkpoints a store of ``where`` is made of, by trial key: the newest at a report of
    every trial (no weights past their history); ``only_complete``: of those that reached their
    planned epochs, or that a scheduler stopped."""
    refs = sorted(where.blocks(reported=True).values(), key=lambda r: r.trial_key)
    if not only_complete:
        return refs
    plan = where.plan()
    stopped = plan.stopped_trials if plan else frozenset()
    return [r for r in refs if r.epoch >= r.spec.training.epochs or r.trial_key in stopped]


def made_of(store: Store, refs: Iterable[BlockRef]) -> bool:
    """Whether ``store`` holds the members of the checkpoints ``refs`` (every member of each, at
    its epochs) and no other: whether aggregating them again would write the same members."""
    table = store.members(columns=["trial_id", "epochs"])
    held = Counter(zip(table["trial_id"].to_pylist(), table["epochs"].to_pylist(), strict=True))
    return held == Counter({(r.trial_key, r.epoch): len(r.seeds) * len(r.hparams) for r in refs})


def sweep_sources(where: SweepDir, only_complete: bool = False) -> list[Source]:
    """The newest checkpoint of every trial of the sweep directory ``where``, as the sources of
    :func:`write_store` (read from each ``block.json`` alone). ``only_complete``: leave out blocks
    that have not reached their planned epochs (unless a scheduler stopped them). Warns when the
    sweep has no ``plan.json`` (planned members without a checkpoint cannot be listed) or no
    ``samples.parquet`` (figures then draw no predictions); raises :class:`StoreError` when it has
    no checkpoint."""
    fs, root = where.filesystem, where.path
    plan = where.plan()
    if plan is None:
        inside = sweeps_inside(fs, root)
        if inside:  # not a sweep: its checkpoints would be those of every sweep below it
            raise storage_folder(fs, root, inside, "a sweep directory")
        warn(f"{root + '/' + PLAN!r} not found: planned members without a checkpoint cannot be listed")
    refs = aggregated_blocks(where, only_complete)
    for path, why in where.passed_over.items():
        warn(f"checkpoint {path!r} passed over: {why}; its trial's older checkpoint stands, if it has one")
    sources = [Source(r.trial_key, r.spec, r.seeds, r.hparams, r.shapes, partial(_read_block, fs, r)) for r in refs]
    if not sources:
        raise StoreError(f"{where.shown!r}: no block checkpoints (block.json) found; nothing to aggregate")
    if SAMPLES not in where.samples():
        warn(
            f"{root + '/' + SAMPLES!r} not found: the store holds no test samples, so `sweep plot` draws no "
            f"predictions (sweep.run writes the file; run the sweep again to add it)"
        )
    return sources


def aggregate_blocks(
    store_dir: str | os.PathLike[str],
    blocks: Iterable[Any],
    plan: Plan | None = None,
    filesystem: pafs.FileSystem | None = None,
    progress: bool = False,
    *,
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    datasets: dict[str, Dataset] | None = None,
    scores: Scores | None = None,
) -> str:
    """Aggregate in-memory blocks (``SavedBlock``-like: spec, seeds, hparams, shapes, state,
    history, trial_id) into a store at ``store_dir``; ``plan`` names the grid columns and the
    planned members (without it, columns are the keys whose values differ between blocks);
    ``datasets`` (by ``spec.problem_id``) gives the test samples the store keeps for figures;
    ``scores`` as in :func:`aggregate`.
    """
    fs, path = filesystem_path(store_dir, filesystem)
    sources = [
        Source(b.trial_id, b.spec, tuple(b.seeds), tuple(map(dict, b.hparams)), tuple(b.shapes), partial(_in_memory, b))
        for b in blocks
    ]
    if not sources:
        raise StoreError("`blocks`: empty; give at least one block to aggregate")
    samples = {} if datasets is None else sample_tables(datasets)
    sources = sorted(sources, key=lambda s: s.trial_id)
    write_store(fs, path, sources, plan, samples, progress=progress, shard_bytes=shard_bytes, scores=scores)
    return str(store_dir)


def _read_block(fs: pafs.FileSystem, ref: BlockRef) -> tuple[Any, Any]:
    return ref.read_params(fs), ref.history


def _in_memory(block: Any) -> tuple[Any, Any]:
    return jax.tree_util.tree_map(np.asarray, block.state.params), block.history


# -- the store ------------------------------------------------------------------------------------
def write_store(
    fs: pafs.FileSystem,
    store_path: str,
    sources: list[Source],
    plan: Plan | None,
    samples: Mapping[str, pa.Table],
    *,
    progress: bool = False,
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    map_tasks: MapTasks = map,
    scores: Scores | None = None,
) -> None:
    """Write ``sources`` (in trial order) as a new generation of the store at ``store_path`` and
    commit it. ``plan`` names the grid columns and the planned members (None: columns are the keys
    whose values differ between blocks); ``samples``: the sample tables to keep, by file name.
    ``shard_bytes``: parameter bytes past which a config's leaves are split into shards.
    ``map_tasks(build_shard, tasks)`` runs the leaves files' tasks and yields their results in order
    (``map``: in this process; :class:`sweep.tune.RayTasks`: as Ray tasks). ``scores(store)``: the
    ``ensemble_scores.parquet`` table of the written generation before it is committed (None: no
    such file)."""
    if shard_bytes < 1:
        raise StoreError(f"`shard_bytes`: got {shard_bytes}; must be >= 1")
    metrics = _members.metric_names(sources)
    columns, names = _members.grid_value_columns(sources, plan, metrics), _members.hparam_names(sources, plan)
    types = _members.column_types(columns, sources, [s.spec.to_dict() for s in sources], names)
    schema = members_schema(columns, {name: t for name, (t, _) in types.items()}, metrics)
    trials: dict[str, list[TrialPlan]] = {}
    for t in plan.trials if plan else ():
        trials.setdefault(t.config_id, []).append(t)
    by_config: dict[str, list[tuple[int, Source]]] = {}
    for i, src in enumerate(sources):
        by_config.setdefault(src.spec.config_id, []).append((i, src))
    bar = tqdm(total=len(sources), desc="aggregating trials", unit="trial", disable=not progress or len(sources) < 16)
    configs: list[dict] = []
    missing: dict[str, dict] = {}
    with StoreWriter(fs, store_path) as writer:
        adaptive = plan.spec.adaptive if plan else None
        tasks = _tasks(
            writer.root, fs, by_config, names, columns, types, schema, metrics, shard_bytes, configs, trials, missing,
            adaptive,
        )  # fmt: skip
        writer.write_table(
            MEMBERS,
            schema,
            _collect(writer, map_tasks(build_shard, tasks), bar),
            sorting=("config_id", "member_id"),
            statistics=statistics_columns(columns),
        )
        bar.close()
        writer.write_table(CONFIGS, CONFIGS_SCHEMA, [pa.Table.from_pylist(configs, CONFIGS_SCHEMA)])
        write_store_samples(writer, samples, {s.spec.config_id: s.spec.problem_id for s in sources})
        for cid in set(trials) - set(by_config):  # planned configs without any checkpoint
            missing |= {m["trial_id"]: m for m in _members.missing(trials[cid], set(), names.get(cid, ()), columns)}
        missing_list = [missing[t.trial_key] for t in plan.trials if t.trial_key in missing] if plan else []
        num_members, num_missing = sum(c["num_members"] for c in configs), sum(len(m["members"]) for m in missing_list)
        manifest = {
            "num_members": num_members,
            "num_configs": len(configs),
            "num_trials": len(sources),
            "num_missing": num_missing,
            "missing": missing_list,
            "columns": [c._asdict() for c in columns],
            "metrics": metrics,
            **race_manifest(plan, columns, names),
        }
        if scores is not None:  # read the generation as it stands, through the store's own checks
            table = scores(
                Store.at(fs, writer.root, {**manifest, "format": FORMAT, "files": dict(writer.files)}, trust_code=True)
            )  # the aggregator built every model already, to read its checkpoints
            if table is not None:
                writer.write_table(ENSEMBLE_SCORES, table.schema, [table])
        writer.commit(manifest)
    if missing_list:
        warn(
            f"{num_missing} planned member(s) of {len(missing_list)} trial(s) have no checkpoint (first: trial "
            f"{missing_list[0]['trial_id']!r}); the store has {num_members} members and lists the missing "
            f"ones under 'missing' in its manifest.json"
        )


def _collect(writer: StoreWriter, results: Iterable[ShardResult], bar) -> Iterator[pa.Table]:
    """Each shard's rows in order, its leaves file recorded in the manifest as it comes."""
    seen: set[str] = set()
    for result in results:
        writer.add_file(result.file, result.record)
        bar.update(len(set(result.trials) - seen))
        seen.update(result.trials)
        yield result.rows


def _member_like(src: Source) -> tuple[tuple[tuple[int, ...], str], ...]:
    """(shape, dtype) of each parameter leaf of one member of ``src``'s config, from its block (the
    one block this process reads per config; in-memory blocks build no model for it)."""
    params, _ = src.load()
    return tuple((tuple(x.shape[1:]), str(x.dtype)) for x in jax.tree_util.tree_leaves(params))


def _tasks(
    root: str,
    fs: pafs.FileSystem,
    by_config: dict[str, list[tuple[int, Source]]],
    names: dict[str, tuple[str, ...]],
    columns: list[Column],
    types: dict,
    schema: pa.Schema,
    metrics: list[str],
    shard_bytes: int,
    configs: list[dict],
    trials: dict[str, list[TrialPlan]],
    missing: dict[str, dict],
    adaptive: Adaptive | None,
) -> Iterator[ShardTask]:
    """Every leaves file's task, configs in id order, planned from the block.json files alone;
    fills ``configs`` (rows of configs.parquet) and ``missing`` (planned members without a
    checkpoint) config by config. Only one config's member list is held at a time."""
    first_member = 0
    for cid, sources in sorted(by_config.items()):
        members = _members.ordered(sources, names.get(cid, ()))
        by_index = dict(sources)
        first = by_index[members[0].source]
        like = _member_like(first)
        per_member = sum(int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize for shape, dtype in like)
        n = len(members)
        per_shard = n if n * per_member <= shard_bytes else max(1, shard_bytes // per_member)
        files = leaves_files(cid, n, per_shard)
        for start, file in zip(range(0, n, per_shard), files):
            chunk = members[start : start + per_shard]
            used = {i: by_index[i] for i in dict.fromkeys(m.source for m in chunk)}
            yield ShardTask(
                fs,
                root,
                file,
                cid,
                first_member + start,
                chunk,
                used,
                like,
                tuple(columns),
                types,
                schema,
                tuple(metrics),
                adaptive,
            )
        spec_dict = {k: v for k, v in first.spec.to_dict().items() if k not in _SWEEP_ONLY}
        sample_shape, target_shape, num_train = Shapes.of(first.shapes)[:3]
        configs.append(
            {
                "config_id": cid,
                "spec": canonical_json(spec_dict),
                "num_members": n,
                "first_member": first_member,
                "members_per_shard": per_shard,
                "files": files,
                "sample_shape": list(sample_shape),
                "target_shape": list(target_shape),
                "num_train": num_train,
            }
        )
        first_member += n
        found = {m.key for m in members}
        missing |= {m["trial_id"]: m for m in _members.missing(trials.get(cid, []), found, names.get(cid, ()), columns)}
