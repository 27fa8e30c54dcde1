"""User data: ``.npz`` files, Parquet files, or a function given by import path."""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np

from .._errors import SpecError
from .._import_path import import_object
from ._dataset import SPLITS, Dataset, as_dataset

KEYS = ("train_x", "train_y", "test_x", "test_y")
VAL_KEYS = ("val_x", "val_y")
SPLIT_OPTIONS = ("val_fraction", "data_seed")  # how a validation split is carved (every problem kind)


def load_arrays(path: str, shape: tuple[int, ...] | None = None, *, val_fraction: float | None = None,
                data_seed: int = 0) -> Dataset:
    """Load ``.npz`` (keys train_x, train_y, test_x, test_y, optionally val_x, val_y) or a Parquet file.

    A Parquet file has list columns ``x`` and ``y`` (one row per sample, flattened) and a
    string column ``split`` (``"train"`` / ``"val"`` / ``"test"``; no ``"val"`` rows: none
    given); ``shape`` is the per-sample ``(channels, *spatial)`` shape of x, and y shares its
    spatial shape. Without a validation split one is carved from the training rows
    (``val_fraction`` of all samples, drawn with ``data_seed``).
    """
    p = Path(path)
    if not p.exists():
        raise SpecError(f"`problem.path`: {path!r} does not exist")
    source = f"`problem.path` {path!r}"
    if p.suffix == ".npz":
        with np.load(p, allow_pickle=False) as f:
            missing = [k for k in KEYS if k not in f.files]
            if missing:
                raise SpecError(f"`problem.path`: {path!r} lacks array(s) {missing}; need {list(KEYS)}")
            given = [k for k in VAL_KEYS if k in f.files]
            if len(given) == 1:
                raise SpecError(f"`problem.path`: {path!r} has {given[0]} but not {set(VAL_KEYS) - set(given)}; "
                                f"give both val_x and val_y, or neither")
            splits = {s: (f[f"{s}_x"], f[f"{s}_y"]) for s in SPLITS if f"{s}_x" in f.files}
    elif p.suffix in (".parquet", ".pq"):
        splits = _read_parquet(p, shape)
    else:
        raise SpecError(f"`problem.path`: {path!r} has suffix {p.suffix!r}; use a .npz or .parquet file")
    return as_dataset(splits, source, val_fraction=val_fraction, data_seed=data_seed)


def _read_parquet(p: Path, shape: tuple[int, ...] | None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    import pyarrow.parquet as pq

    table = pq.read_table(p)
    missing = {"x", "y", "split"} - set(table.column_names)
    if missing:
        raise SpecError(f"`problem.path`: {str(p)!r} lacks column(s) {sorted(missing)}; need x, y, split")
    if shape is None:
        raise SpecError("`problem.shape`: required for Parquet data; give the per-sample (channels, *spatial) shape of x")
    split = np.asarray(table.column("split").to_pylist())
    unknown = sorted(set(split.tolist()) - set(SPLITS))
    if unknown:
        raise SpecError(f"`problem.path`: {str(p)!r} has split value(s) {unknown[:5]}; allowed: {', '.join(SPLITS)}")
    x = np.asarray(table.column("x").to_pylist(), dtype=np.float32)
    y = np.asarray(table.column("y").to_pylist(), dtype=np.float32)
    spatial = tuple(shape[1:])
    size = int(np.prod(spatial))
    if x.shape[1] != int(np.prod(shape)) or y.shape[1] % size:
        raise SpecError(f"`problem.shape`: {list(shape)} does not fit rows of {x.shape[1]} inputs and {y.shape[1]} targets")
    x = x.reshape(len(x), *shape)
    y = y.reshape(len(y), y.shape[1] // size, *spatial)
    return {s: (x[split == s], y[split == s]) for s in SPLITS if s != "val" or (split == s).any()}


def load_function(path: str, kwargs: dict) -> Dataset:
    """Call the user's ``package.module:function(**kwargs)`` -> ``(train_x, train_y, test_x, test_y)``
    or ``{"train": (x, y), "val": (x, y), "test": (x, y)}`` ("val" optional).

    ``val_fraction`` is seed-sweep's own option (never passed on); ``data_seed`` carves the
    validation split and is passed on too if the function takes it.
    """
    fn = import_object(path, "problem.name")
    val_fraction = kwargs.pop("val_fraction", None)
    data_seed = kwargs.get("data_seed", 0)
    params = inspect.signature(fn).parameters.values()
    if "data_seed" in kwargs and not any(p.name == "data_seed" or p.kind is p.VAR_KEYWORD for p in params):
        kwargs.pop("data_seed")
    return as_dataset(fn(**kwargs), f"`problem.name` {path!r}", val_fraction=val_fraction, data_seed=data_seed)
