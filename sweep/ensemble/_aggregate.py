"""``sweep.aggregate``: the store's aggregation, with every configuration's ensemble scores
(``ensemble_scores.parquet``) written into the same generation before it is committed."""

from __future__ import annotations

import os
from typing import Unpack

import pyarrow.fs as pafs

from .. import store
from ..store import AggregateOptions, SweepDir
from ._scoring import store_scores


def aggregate(
    sweep_dir: str | os.PathLike[str] | SweepDir,
    filesystem: pafs.FileSystem | None = None,
    progress: bool = True,
    **options: Unpack[AggregateOptions],
) -> str:
    """Aggregate the newest checkpoint of every trial under ``sweep_dir`` into ``<sweep_dir>/ensembles``
    (:func:`sweep.store.aggregate`, whose arguments these are: ``shard_bytes=``, ``only_complete=``
    and ``map_tasks=`` among ``options``), and score every configuration's ensemble on the samples
    and trajectories the store keeps (``ensemble_scores.parquet``, see :meth:`Ensemble.scores`), in
    the same generation. Returns the store path.

    ```python
    path = sweep.aggregate("runs/heat")    # -> "runs/heat/ensembles"
    sweep.load(path).stored_scores()       # one row per configuration, split, kind and step
    ```
    """
    return store.aggregate(sweep_dir, filesystem, progress, scores=store_scores, **options)
