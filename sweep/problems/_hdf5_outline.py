"""What the driver of a sweep reads of an ``"hdf5"`` problem: its outline, not its arrays.

:func:`hdf5_outline` reads the files' metadata, makes the driver's pass over them (the
normalisation statistics of the training split and every split checked to be finite:
:func:`~._hdf5_scan.scan_files`, unless an earlier pass over the same files is given) and reads
the few trajectories a sweep keeps for its figures and scores (the first of the validation and
test splits, and one of the training split), and returns two :class:`~sweep.problems.Dataset`\\ s:

- ``shapes``: every split and trajectory array at its full shape and dtype, each a read-only
  zero-copy view (``np.broadcast_to``) of its first row, so that what is checked and sized on
  shapes (the batch size, the model, the streaming windows, the block size) sees the problem
  as it is without holding it; its values are not the data's.
- ``kept``: the trajectories read, split, normalised and stacked as :func:`~._hdf5.hdf5_problem`
  does it, so that the first rows of each of its splits are those of the problem, bit for bit.

The trials then read the files themselves (:meth:`sweep.problems.ProblemData.load`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow.fs as pafs

from ._dataset import SPLITS, Dataset, Split, as_dataset
from ._hdf5 import read_picks, resolved, split_trajectories
from ._hdf5_scan import Scan, scan_files
from ._history import with_history
from ._normalize import normalized


def _first(picks, count: int):
    """The first ``count`` trajectories of ``picks``."""
    out = []
    for location, indices in picks:
        if count <= 0:
            break
        out.append((location, indices[:count]))
        count -= len(indices[:count])
    return out


def _full(a: np.ndarray, rows: int) -> np.ndarray:
    """``a`` with ``rows`` rows: itself where it has them, else its first row repeated (no copy)."""
    if len(a) == rows:
        return a
    return np.broadcast_to(a[:1], (rows, *a.shape[1:]))


def hdf5_outline(
    path: str,
    *,
    samples: int,
    trajectories: int,
    filesystem: pafs.FileSystem | None = None,
    scan: Scan | None = None,
    origin: str | None = None,
    **options: Any,
) -> tuple[Dataset, Dataset, Scan]:
    """``(shapes, kept, scan)`` of ``Problem("hdf5", path=path, **options)`` (module docstring):
    ``kept`` holds at least the first ``samples`` pairs and ``trajectories`` trajectories of the
    validation and test splits (those the splits have); ``scan`` is the driver's pass, ``scan``
    itself where that was made of the same files as they are now. ``filesystem``: the sweep's
    (an ``s3://`` path is read through it where it is an ``S3FileSystem``); ``origin``: the
    folder a relative local path is taken from (None: the current directory).

    Raises:
        SpecError: Whatever :func:`~._hdf5.hdf5_info` and the driver's pass refuse.

    Examples:
        ```python
        shapes, kept, scan = hdf5_outline("1D_Advection_Sols_beta0.1.hdf5", samples=16, trajectories=4)
        shapes.train.x.shape        # the training pairs' shape; kept.test.x[:16]: the first test pairs
        ```
    """
    options = {"path": path, **options}
    info, files, described, channels = resolved(options, filesystem, origin)
    scan = scan_files(files, described, channels, options, scan)  # before any array is kept: bad data first
    picks = split_trajectories(files, described, options)
    ts, ss, history = options.get("time_stride", 1), options.get("space_stride", 1), options.get("history", 1)
    per = info.steps - history  # pairs per trajectory
    wanted = {"train": 1, "val": max(trajectories, math.ceil(samples / per)), "test": 0}
    wanted["test"] = wanted["val"]
    read = {
        split: np.stack([states for _, states in read_picks(_first(p, wanted[split]), described, channels, ts, ss)])
        for split, p in picks.items()
        if any(indices for _, indices in p)
    }
    source = f"`problem.path` {path!r}"
    # the validation split given as drawn from the whole (val_fraction: refused beside a valid/ folder, as there)
    kept = as_dataset(
        None,
        source,
        val_fraction=options.get("val_fraction") if "val" in files or "val" not in picks else None,
        data_seed=options.get("data_seed", 0),
        trajectories=read,
    )
    if scan.normalization is not None:
        kept = normalized(kept, scan.normalization, source)
    kept = with_history(kept, history, source)
    counts = {split: sum(len(indices) for _, indices in picks.get(split, ())) for split in SPLITS}
    traj = {split: kept.trajectories(split) for split in SPLITS}
    full_traj = {f"{split}_traj": None if a is None else _full(a, counts[split]) for split, a in traj.items()}
    shapes = kept._replace(
        **{
            split: Split(*(_full(a, counts[split] * per) for a in getattr(kept, split)))
            for split in SPLITS
            if counts[split]
        },
        **full_traj,
    )
    return shapes, kept, scan
