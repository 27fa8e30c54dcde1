"""User data: ``.npz`` files, Parquet files, or a function given by import path.

Files are read without pickle; every way a file can be unreadable is a :class:`SpecError`
naming ``problem.path``. Data without a validation split get one carved from their training
samples (``val_fraction``, ``data_seed``; see :func:`as_dataset`).
"""

from __future__ import annotations

import inspect
import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .._errors import SpecError, did_you_mean, warn
from .._fs import looked_for
from .._import_path import import_object
from ._dataset import EXPECTED, SPLITS, Dataset, as_dataset, described

KEYS = ("train_x", "train_y", "test_x", "test_y")
VAL_KEYS = ("val_x", "val_y")
TRAJ_KEYS = tuple(f"{split}_traj" for split in SPLITS)  # [samples, steps + 1, channels, *spatial]
SPLIT_OPTIONS = ("val_fraction", "data_seed")  # how a validation split is carved (every problem kind)


def load_arrays(
    path: str,
    shape: tuple[int, ...] | None = None,
    *,
    target_shape: tuple[int, ...] | None = None,
    val_fraction: float | None = None,
    data_seed: int = 0,
    pairs: bool = True,
) -> Dataset:
    """Load ``.npz`` (keys train_x, train_y, test_x, test_y, optionally val_x, val_y) or a Parquet file.

    An ``.npz`` may also hold trajectories ``train_traj``, ``val_traj``, ``test_traj``
    (``[samples, steps + 1, channels, *spatial]``, each optional), or *only* trajectories
    (``train_traj`` and ``test_traj`` at least): its one-step pairs are then derived from them
    (:func:`sweep.problems.as_dataset`), as they are beside pairs where ``pairs`` is False (the
    pairs are not used: ``history`` > 1 derives every split's pairs from the trajectories).

    A Parquet file has list columns ``x`` and ``y`` (one row per sample, flattened) and a
    string column ``split`` (``"train"`` / ``"val"`` / ``"test"``; no ``"val"`` rows: none
    given); ``shape`` is the per-sample ``(channels, *spatial)`` shape of x, and ``target_shape``
    the per-sample shape of y (any shape, ``[]`` for one number per sample; default: y's channels
    on x's spatial grid). Integer lists in y are class labels (int32). Without a validation split one is carved from the training rows
    (``val_fraction`` of all samples, drawn with ``data_seed``).
    """
    p = Path(path)
    if not p.is_file():
        raise SpecError(
            f"`problem.path`: {path!r} does not exist or is not a file{'' if p.exists() else looked_for(path)}"
        )
    trajectories = None
    if p.suffix == ".npz":
        given = [name for name, v in (("shape", shape), ("target_shape", target_shape)) if v is not None]
        if given:  # an archive's arrays carry their shapes: a shape given here would go unused
            raise SpecError(
                f"`problem.{given[0]}`: set for the .npz archive {path!r}, whose arrays have their shapes already; "
                f"leave it out (it is for Parquet rows), or reshape the arrays before numpy.savez"
            )
        splits, trajectories = _read_npz(p)
        if not pairs and {"train", "test"} <= set(trajectories):
            if splits and "val" in splits and "val" not in trajectories:
                raise SpecError(
                    f"`problem.history`: {str(p)!r} gives validation pairs (val_x, val_y) but no val_traj, and "
                    f"history > 1 derives every split's pairs from its trajectories; give val_traj too (or history=1)"
                )
            splits = None
    elif p.suffix in (".parquet", ".pq"):
        splits = _read_parquet(p, shape, target_shape)
    else:
        raise SpecError(f"`problem.path`: {path!r} has suffix {p.suffix!r}; use a .npz or .parquet file")
    return as_dataset(
        splits, f"`problem.path` {str(p)!r}", val_fraction=val_fraction, data_seed=data_seed, trajectories=trajectories
    )


def _read_npz(p: Path) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]] | None, dict[str, np.ndarray]]:
    """``(pairs by split or None: derive them, trajectories by split)``."""
    try:
        f = np.load(p, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        raise SpecError(
            f"`problem.path`: {str(p)!r} is not a NumPy .npz archive ({type(e).__name__}: {e}); "
            f"write it with numpy.savez"
        ) from None
    if not isinstance(f, np.lib.npyio.NpzFile):
        raise SpecError(f"`problem.path`: {str(p)!r} holds one array, not an .npz archive of {', '.join(KEYS)}")
    with f:
        trajectories = [k for k in TRAJ_KEYS if k in f.files]
        only_trajectories = not set(KEYS + VAL_KEYS) & set(f.files) and {"train_traj", "test_traj"} <= set(trajectories)
        missing = [k for k in KEYS if k not in f.files]
        known = (*KEYS, *VAL_KEYS, *TRAJ_KEYS)
        lacking = [k for k in known if k not in f.files]  # an array named close to one of these: misspelt
        typos = ", ".join(
            f"{k!r}{hint}" for k in sorted(f.files) if k not in known and (hint := did_you_mean(k, lacking))
        )
        if missing and not only_trajectories:
            raise SpecError(
                f"`problem.path`: {str(p)!r} lacks array(s) {missing}{f'; it holds {typos}' if typos else ''}; "
                f"need {list(KEYS)} (or only trajectories: train_traj and test_traj, optionally val_traj)"
            )
        if typos:
            warn(f"`problem.path`: {str(p)!r}: array {typos} left out; the arrays read are {', '.join(known)}")
        given = [k for k in VAL_KEYS if k in f.files]
        if len(given) == 1:
            raise SpecError(
                f"`problem.path`: {str(p)!r} has {given[0]} but not {set(VAL_KEYS) - set(given)}; "
                f"give both val_x and val_y, or neither"
            )
        arrays = {}
        for key in (*(() if only_trajectories else KEYS), *given, *trajectories):
            try:
                arrays[key] = f[key]
            except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
                kind = "holds Python objects" if "pickle" in str(e) else f"cannot be read ({type(e).__name__}: {e})"
                raise SpecError(
                    f"`problem.path`: array {key!r} of {str(p)!r} {kind}; seed-sweep never unpickles "
                    f"data, save numeric arrays (numpy.savez of float or integer arrays)"
                ) from None
    pairs = (
        None if only_trajectories else {s: (arrays[f"{s}_x"], arrays[f"{s}_y"]) for s in SPLITS if f"{s}_x" in arrays}
    )
    return pairs, {key.removesuffix("_traj"): arrays[key] for key in trajectories}


def _read_parquet(
    p: Path, shape: tuple[int, ...] | None, target_shape: tuple[int, ...] | None
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
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
        raise SpecError(
            "`problem.shape`: required for Parquet data; give the per-sample (channels, *spatial) shape of x"
        )
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in shape) or len(shape) < 2:
        raise SpecError(
            f"`problem.shape`: got {list(shape)}; give the per-sample [channels, *spatial] as integers >= 1"
        )
    split = np.asarray(table.column("split").to_pylist())
    unknown = sorted(set(split.tolist()) - set(SPLITS), key=str)
    if unknown:
        raise SpecError(f"`problem.path`: {str(p)!r} has split value(s) {unknown[:5]}; allowed: {', '.join(SPLITS)}")
    if target_shape is not None and not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in target_shape
    ):
        raise SpecError(
            f"`problem.target_shape`: got {list(target_shape)}; give the per-sample shape of y as integers >= 1"
        )
    y_type = table.schema.field("y").type
    for column in ("x", "y"):
        kind = table.schema.field(column).type
        if not (pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)):
            raise SpecError(
                f"`problem.path`: column {column} of {str(p)!r} holds {kind} values, not lists; give each row's "
                f"{'input' if column == 'x' else 'target'} as a list of numbers (one number too: [v])"
            )
    labels = pa.types.is_integer(y_type.value_type)
    try:
        x = np.asarray(table.column("x").to_pylist(), dtype=np.float32)
        y = np.asarray(table.column("y").to_pylist(), dtype=np.int64 if labels else np.float32)
    except (ValueError, TypeError) as e:
        raise SpecError(
            f"`problem.path`: columns x and y of {str(p)!r} must hold lists of numbers of one length "
            f"per column ({type(e).__name__}: {e})"
        ) from None
    spatial = tuple(shape[1:])
    size = int(np.prod(spatial))
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != int(np.prod(shape)):
        raise SpecError(
            f"`problem.shape`: {list(shape)} does not fit rows of {x.shape[1:]} inputs and {y.shape[1:]} targets"
        )
    if target_shape is not None and y.shape[1] != int(np.prod(target_shape)):
        raise SpecError(f"`problem.target_shape`: {list(target_shape)} does not fit rows of {y.shape[1]} target values")
    if target_shape is None and y.shape[1] % size:
        raise SpecError(
            f"`problem.shape`: {list(shape)} does not fit rows of {y.shape[1]} target values (without "
            f"target_shape, y holds channels on the inputs' grid of {size} points); give target_shape"
        )
    x = x.reshape(len(x), *shape)
    y = y.reshape(len(y), *(target_shape if target_shape is not None else (y.shape[1] // size, *spatial)))
    return {s: (x[split == s], y[split == s]) for s in SPLITS if s != "val" or (split == s).any()}


def load_function(path: str, kwargs: dict) -> Dataset:
    """Call the user's ``package.module:function(**kwargs)`` -> ``(train_x, train_y, test_x, test_y)``
    or ``{"train": (x, y), "val": (x, y), "test": (x, y)}`` ("val" optional); inputs ``(samples,
    channels, *spatial)``, targets ``(samples, *target_shape)`` of any shape (integers: class labels).
    Anything else it returns (None, one array, a mapping of other splits) is a :class:`SpecError`
    saying what it returned and what is expected.

    ``val_fraction`` is seed-sweep's own option (never passed on); ``data_seed`` carves the
    validation split and is passed on too if the function takes it.
    """
    fn = import_object(path, "problem.name")
    val_fraction = kwargs.pop("val_fraction", None)
    data_seed = kwargs.get("data_seed", 0)
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a builtin): pass everything on
        params = [inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD)]
    if "data_seed" in kwargs and not any(p.name == "data_seed" or p.kind is p.VAR_KEYWORD for p in params):
        kwargs.pop("data_seed")
    try:
        arrays = fn(**kwargs)
    except Exception as e:  # the user's code may raise anything
        raise SpecError(f"`problem.name`: {path!r} raised {type(e).__name__} when called with {kwargs}: {e}") from None
    if not isinstance(arrays, (tuple, list, Mapping)):
        raise SpecError(
            f"`problem.name`: {path!r} returned {described(arrays)}; a data function must return {EXPECTED}"
        )
    return as_dataset(arrays, f"`problem.name` {path!r}", val_fraction=val_fraction, data_seed=data_seed)
