"""The array arguments of a query: inputs read as they are where they are array-likes larger than
memory (an ``h5py.Dataset``, a ``np.memmap``), and the ``out=`` array-likes ``predict`` and
``mean_std`` write into, checked before any member runs; and how to get the inputs of a problem
that reads files (:func:`files_hint`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._errors import QueryError


def array_like(x: Any) -> Any:
    """``x`` itself where it reads like an array without being one in memory (``.shape``,
    ``.dtype`` that NumPy knows, ``__getitem__``: an ``h5py.Dataset``, a ``np.memmap``), else
    ``np.asarray(x)``."""
    if hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "__getitem__"):
        try:
            np.dtype(x.dtype)
            return x
        except TypeError:
            pass
    return np.asarray(x)


def checked_pair(out: Any, shape: tuple[int, ...], dtype: np.dtype) -> tuple[Any, Any]:
    """``out`` of ``mean_std`` (None, or a tuple ``(mean, std)``, each checked as :func:`checked_out`)
    as ``(mean, std)``."""
    if out is not None and (not isinstance(out, tuple) or len(out) != 2):
        raise QueryError(
            f"mean_std(out={type(out).__name__}): give a tuple (mean, std) of two array-likes of shape {shape}, or None"
        )
    given = (None, None) if out is None else out
    mean, std = (checked_out(a, shape, dtype, "mean_std", name) for a, name in zip(given, ("out[0]", "out[1]")))
    return mean, std


def checked_out(out: Any, shape: tuple[int, ...], dtype: np.dtype, what: str, name: str) -> Any:
    """``out`` (argument ``name`` of query ``what``), or a :class:`QueryError` unless it is None or
    an array-like of ``shape`` whose dtype holds ``dtype`` (the same, or a wider float) and which
    takes slice assignment."""
    if out is None:
        return None
    try:
        out_dtype = np.dtype(out.dtype)
        out_shape = tuple(out.shape)
    except (AttributeError, TypeError):
        out_dtype, out_shape = None, None
    if (
        out_shape != shape
        or out_dtype is None
        or not np.issubdtype(out_dtype, np.floating)
        or not np.can_cast(dtype, out_dtype, "safe")
        or not hasattr(out, "__setitem__")
    ):
        got = type(out).__name__ if out_shape is None else f"shape {out_shape} ({out_dtype})"
        raise QueryError(
            f"{what}: {name} has {got}; give an array-like that takes slice assignment (a NumPy array, an "
            f"h5py.Dataset, a np.memmap) of shape {shape} and dtype {dtype} (or a wider float), or None"
        )
    if isinstance(out, np.ndarray) and not out.flags.writeable:
        raise QueryError(f"{what}: {name} is a read-only array; give a writeable one, or None")
    return out


def files_hint(problem: Any) -> str:
    """How to get the inputs of a problem that reads files, as its models take them (strided,
    channels first, states stacked): the arrays of the files themselves are rarely those."""
    if problem.name != "hdf5":
        return ""
    o = dict(problem.options)
    read = ", ".join(f"{k}={o[k]}" for k in ("time_stride", "space_stride", "history", "fields") if k in o)
    return (
        f"; the sweep read its files{f' with {read}' if read else ''}, channels first: "
        f"sweep.problems.hdf5_split(ens.spec.problem, 'test').x gives inputs as its models take them"
    )
