"""``sweep.aggregate``, the one aggregation: a sweep directory's block checkpoints into its store,
with every configuration's ensemble scores (``ensemble_scores.parquet``) written into the same
generation before it is committed. The leaves files are built by ``map_tasks``: ``map`` in this
process, or :class:`sweep.tune.RayTasks` as Ray tasks in parallel (the same store, byte for byte)."""

from __future__ import annotations

import os

import pyarrow.fs as pafs

from .._layout import STORE_NAME
from ..store import DEFAULT_SHARD_BYTES, MapTasks, SweepDir, sweep_sources, write_store
from ._stored_scores import store_scores


def aggregate(
    sweep_dir: str | os.PathLike[str] | SweepDir,
    filesystem: pafs.FileSystem | None = None,
    progress: bool = True,
    *,
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    only_complete: bool = False,
    map_tasks: MapTasks = map,
) -> str:
    """Aggregate the newest checkpoint of every trial under ``sweep_dir`` into ``<sweep_dir>/ensembles``.

    Members of each structural config are restacked into one global ensemble, config by config and
    shard by shard, and committed as a new generation of the store (a crash leaves the previous one
    readable), with every configuration's ensemble scores on the samples and trajectories the store
    keeps (``ensemble_scores.parquet``, see :meth:`Ensemble.scores`). Planned members
    (``plan.json``) without a checkpoint are listed under ``missing`` in the manifest and reported
    in a warning; so is a sweep without test samples (``samples.parquet``, written by
    ``sweep.run``), whose figures then show no predictions.

    Args:
        sweep_dir: The sweep directory (local path or URI), or a :class:`sweep.store.SweepDir`,
            whose plan and checkpoints already read are used as they are (``sweep.run`` passes its
            own, so that ``plan.json`` and the checkpoints' ``block.json`` files are not read again).
        filesystem: A ``pyarrow.fs.FileSystem`` for ``sweep_dir``.
        progress: Show a progress bar for large aggregations.
        shard_bytes: Parameter bytes past which a config's leaves are split into shards.
        only_complete: Leave out blocks that have not reached their planned epochs (unless a
            scheduler stopped them), as after an interrupted run.
        map_tasks: How the leaves files' tasks run: ``map`` (default: one after another in this
            process), or ``sweep.tune.RayTasks()`` (as Ray tasks, in parallel, on the Ray this
            process has initialised, else a new local one or the cluster at its ``address``; small
            work stays in this process). Every task must reach ``sweep_dir``.

    Returns:
        The store's path.

    Raises:
        StoreError: A checkpoint is unreadable or inconsistent, or writing fails (the previous
            store stays committed).

    Examples:
        ```python
        path = sweep.aggregate("runs/heat")    # -> "runs/heat/ensembles"
        sweep.load(path).stored_scores()       # one row per configuration, split, kind and step
        sweep.aggregate("s3://bucket/heat", map_tasks=sweep.tune.RayTasks(address="auto"))
        ```
    """
    where = sweep_dir if isinstance(sweep_dir, SweepDir) else SweepDir.at(sweep_dir, filesystem)
    sources = sweep_sources(where, only_complete)
    write_store(
        where.filesystem,
        f"{where.path}/{STORE_NAME}",
        sources,
        where.plan(),
        where.samples(),
        progress=progress,
        shard_bytes=shard_bytes,
        map_tasks=map_tasks,
        scores=store_scores,
    )
    return f"{where.shown if isinstance(sweep_dir, SweepDir) else str(sweep_dir).rstrip('/')}/{STORE_NAME}"
