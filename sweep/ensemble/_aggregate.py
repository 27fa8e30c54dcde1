"""``sweep.aggregate``, the one aggregation: a sweep directory's block checkpoints into its store,
with every configuration's ensemble scores (``ensemble_scores.parquet``) written into the same
generation before it is committed. The leaves files are built by ``map_tasks``: ``map`` in this
process, or :class:`sweep.tune.RayTasks` as Ray tasks in parallel (the same store, byte for byte)."""

from __future__ import annotations

import os
from collections.abc import Collection
from functools import partial

import pyarrow.fs as pafs

from .._errors import SpecError, StoreError, warn
from .._fs import local_path
from .._import_path import import_object, is_import_path, refuse_inside, trusted, with_import_hint
from .._layout import STORE_NAME
from ..store import DEFAULT_SHARD_BYTES, MapTasks, SweepDir, live_driver, sweep_sources, write_store
from ._stored_scores import store_scores


def aggregate(
    sweep_dir: str | os.PathLike[str] | SweepDir,
    filesystem: pafs.FileSystem | None = None,
    progress: bool = True,
    *,
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    only_complete: bool = False,
    map_tasks: MapTasks = map,
    trust_code: bool | Collection[str] = False,
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
        trust_code: Aggregate checkpoints of models built by a factory the sweep names by import
            path (``model.name = "package.module:factory"``, your own model): reading them builds
            the model, which runs that factory, so a sweep directory naming one is refused unless
            you trust it: True (any factory it names), or the import paths you trust (``sweep.run``
            trusts those its spec names). The factory is imported from your environment only,
            never from the sweep directory. Built-in architectures need no trust.

    Returns:
        The store's path.

    Raises:
        StoreError: A checkpoint is unreadable or inconsistent, or writing fails (the previous
            store stays committed); a model factory the sweep names, without ``trust_code``.

    Examples:
        ```python
        path = sweep.aggregate("runs/heat")    # -> "runs/heat/ensembles"
        sweep.load(path).stored_scores()       # one row per configuration, split, kind and step
        sweep.aggregate("s3://bucket/heat", map_tasks=sweep.tune.RayTasks(address="auto"))
        ```
    """
    where = sweep_dir if isinstance(sweep_dir, SweepDir) else SweepDir.at(sweep_dir, filesystem)
    if (driver := live_driver(where)) is not None:
        warn(
            f"{where.shown}: a run drives it now ({driver.described()}) and aggregates it when its trials end; "
            f"this store holds the members finished so far"
        )
    sources = sweep_sources(where, only_complete)
    _check_factories(
        where, sorted({s.spec.model.name for s in sources if is_import_path(s.spec.model.name)}), trust_code
    )
    write_store(
        where.filesystem,
        f"{where.path}/{STORE_NAME}",
        sources,
        where.plan(),
        where.samples(),
        progress=progress,
        shard_bytes=shard_bytes,
        map_tasks=map_tasks,
        scores=partial(store_scores, trust=trust_code),  # the factories it trusted to read checkpoints
    )
    return f"{where.shown if isinstance(sweep_dir, SweepDir) else str(sweep_dir).rstrip('/')}/{STORE_NAME}"


def _check_factories(where: SweepDir, factories: list[str], trust_code: bool | Collection[str]) -> None:
    """Refuse the model ``factories`` a sweep directory names, unless trusted, and any module
    that would be imported from inside the directory, trusted or not."""
    untrusted = [f for f in factories if not trusted(f, trust_code)]
    if untrusted:
        raise StoreError(
            f"{where.shown!r}: its models are built by {', '.join(map(repr, untrusted))}, code the sweep directory "
            f"names, which aggregating runs to read the checkpoints; aggregate only a sweep directory you trust: "
            f"sweep.aggregate(path, trust_code=True) (on the command line: --trust-code), with that factory installed"
        )
    local = local_path(where.filesystem, where.path)
    if local is not None:  # (object storage holds no module Python imports)
        for name in factories:
            refuse_inside(name, local, "`model.name`")
    for name in factories:  # trusted, and imported before any work
        try:
            import_object(name, "model.name")
        except SpecError as e:
            raise StoreError(f"{where.shown!r}: its models cannot be built ({with_import_hint(e)})") from None
