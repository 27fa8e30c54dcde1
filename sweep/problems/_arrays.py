"""User data: ``.npz`` files, Parquet files, or a function given by import path.

Files are read without pickle; every way a file can be unreadable is a :class:`SpecError`
naming ``problem.path``.
"""

from __future__ import annotations

import zipfile
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
    if not p.is_file():
        raise SpecError(f"`problem.path`: {path!r} does not exist or is not a file")
    if p.suffix == ".npz":
        return _load_npz(p)
    if p.suffix in (".parquet", ".pq"):
        return _load_parquet(p, shape)
    raise SpecError(f"`problem.path`: {path!r} has suffix {p.suffix!r}; use a .npz or .parquet file")


def _load_npz(p: Path) -> Dataset:
    try:
        f = np.load(p, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        raise SpecError(f"`problem.path`: {str(p)!r} is not a NumPy .npz archive ({type(e).__name__}: {e}); "
                        f"write it with numpy.savez") from None
    if not isinstance(f, np.lib.npyio.NpzFile):
        raise SpecError(f"`problem.path`: {str(p)!r} holds one array, not an .npz archive of {', '.join(KEYS)}")
    with f:
        missing = [k for k in KEYS if k not in f.files]
        if missing:
            raise SpecError(f"`problem.path`: {str(p)!r} lacks array(s) {missing}; need {list(KEYS)}")
        arrays = []
        for key in KEYS:
            try:
                arrays.append(f[key])
            except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
                kind = "holds Python objects" if "pickle" in str(e) else f"cannot be read ({type(e).__name__}: {e})"
                raise SpecError(f"`problem.path`: array {key!r} of {str(p)!r} {kind}; seed-sweep never unpickles "
                                f"data, save numeric arrays (numpy.savez of float or integer arrays)") from None
        return as_dataset(arrays, f"`problem.path` {str(p)!r}")


def _load_parquet(p: Path, shape: tuple[int, ...] | None) -> Dataset:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(p)
    except (pa.ArrowException, OSError) as e:
        raise SpecError(f"`problem.path`: {str(p)!r} is not a readable Parquet file ({e})") from None
    missing = {"x", "y", "split"} - set(table.column_names)
    if missing:
        raise SpecError(f"`problem.path`: {str(p)!r} lacks column(s) {sorted(missing)}; need x, y, split")
    if shape is None:
        raise SpecError("`problem.shape`: required for Parquet data; give the per-sample (channels, *spatial) shape of x")
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in shape) or len(shape) < 2:
        raise SpecError(f"`problem.shape`: got {list(shape)}; give the per-sample [channels, *spatial] as integers >= 1")
    try:
        split = np.asarray(table.column("split").to_pylist())
        x = np.asarray(table.column("x").to_pylist(), dtype=np.float32)
        y = np.asarray(table.column("y").to_pylist(), dtype=np.float32)
    except (ValueError, TypeError) as e:
        raise SpecError(f"`problem.path`: columns x and y of {str(p)!r} must hold lists of numbers of one length "
                        f"per column ({type(e).__name__}: {e})") from None
    spatial = tuple(shape[1:])
    size = int(np.prod(spatial))
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != int(np.prod(shape)) or y.shape[1] % size:
        raise SpecError(f"`problem.shape`: {list(shape)} does not fit rows of {x.shape[1:]} inputs and {y.shape[1:]} targets")
    x = x.reshape(len(x), *shape)
    y = y.reshape(len(y), y.shape[1] // size, *spatial)
    train, test = split == "train", split == "test"
    return as_dataset((x[train], y[train], x[test], y[test]), f"`problem.path` {str(p)!r}")


def load_function(path: str, kwargs: dict) -> Dataset:
    """Call the user's ``package.module:function(**kwargs)`` -> (train_x, train_y, test_x, test_y)."""
    fn = import_object(path, "problem.name")
    try:
        arrays = fn(**kwargs)
    except Exception as e:  # the user's code may raise anything
        raise SpecError(f"`problem.name`: {path!r} raised {type(e).__name__} when called with {kwargs}: {e}") from None
    return as_dataset(arrays, f"`problem.name` {path!r}")
