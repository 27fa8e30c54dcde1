"""User data: ``.npz`` files, Parquet files, or a function given by import path."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .._errors import SpecError
from .._import_path import import_object
from ._dataset import Dataset, as_dataset

KEYS = ("train_x", "train_y", "test_x", "test_y")


def load_arrays(path: str, shape: tuple[int, ...] | None = None) -> Dataset:
    """Load ``.npz`` (keys train_x, train_y, test_x, test_y) or a Parquet file.

    A Parquet file has list columns ``x`` and ``y`` (one row per sample, flattened) and a
    string column ``split`` (``"train"`` / ``"test"``); ``shape`` is the per-sample
    ``(channels, *spatial)`` shape of x, and y shares its spatial shape.
    """
    p = Path(path)
    if not p.exists():
        raise SpecError(f"`problem.path`: {path!r} does not exist")
    if p.suffix == ".npz":
        with np.load(p, allow_pickle=False) as f:
            missing = [k for k in KEYS if k not in f.files]
            if missing:
                raise SpecError(f"`problem.path`: {path!r} lacks array(s) {missing}; need {list(KEYS)}")
            return as_dataset([f[k] for k in KEYS], f"`problem.path` {path!r}")
    if p.suffix in (".parquet", ".pq"):
        return _load_parquet(p, shape)
    raise SpecError(f"`problem.path`: {path!r} has suffix {p.suffix!r}; use a .npz or .parquet file")


def _load_parquet(p: Path, shape: tuple[int, ...] | None) -> Dataset:
    import pyarrow.parquet as pq

    table = pq.read_table(p)
    missing = {"x", "y", "split"} - set(table.column_names)
    if missing:
        raise SpecError(f"`problem.path`: {str(p)!r} lacks column(s) {sorted(missing)}; need x, y, split")
    if shape is None:
        raise SpecError("`problem.shape`: required for Parquet data; give the per-sample (channels, *spatial) shape of x")
    split = np.asarray(table.column("split").to_pylist())
    x = np.asarray(table.column("x").to_pylist(), dtype=np.float32)
    y = np.asarray(table.column("y").to_pylist(), dtype=np.float32)
    spatial = tuple(shape[1:])
    size = int(np.prod(spatial))
    if x.shape[1] != int(np.prod(shape)) or y.shape[1] % size:
        raise SpecError(f"`problem.shape`: {list(shape)} does not fit rows of {x.shape[1]} inputs and {y.shape[1]} targets")
    x = x.reshape(len(x), *shape)
    y = y.reshape(len(y), y.shape[1] // size, *spatial)
    train, test = split == "train", split == "test"
    return as_dataset((x[train], y[train], x[test], y[test]), f"`problem.path` {str(p)!r}")


def load_function(path: str, kwargs: dict) -> Dataset:
    """Call the user's ``package.module:function(**kwargs)`` -> (train_x, train_y, test_x, test_y)."""
    fn = import_object(path, "problem.name")
    return as_dataset(fn(**kwargs), f"`problem.name` {path!r}")
