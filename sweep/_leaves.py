"""Leaves files read strictly, without JAX and without pickle.

A leaves file is what ``eqx.tree_serialise_leaves`` writes: one ``.npy`` record per array leaf,
in tree order. :func:`read_arrays` reads records back as NumPy arrays, each checked against
the shape and dtype it must have; block checkpoints (``state.eqx``) and the store's ensembles
(``<config_id>.eqx``) are read through it. Reading NumPy directly costs no JAX dispatch per
leaf (``eqx.tree_deserialise_leaves`` converts every leaf with one), and a reader that needs
only the first leaves (a block's parameters come before its optimizer state) stops there.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._errors import StoreError


def read_arrays(f: Any, like: Sequence[Any], path: str, what: str, size: int | None = None) -> list[np.ndarray]:
    """The next ``len(like)`` records of the binary file object ``f``, as NumPy arrays shaped like
    ``like`` (objects with ``shape`` and ``dtype``, e.g. ``jax.ShapeDtypeStruct``).

    Raises :class:`StoreError` naming ``path`` if a record cannot be read (truncated, corrupt,
    pickled) or does not have its leaf's shape and dtype (``what`` says whose leaves were
    expected), or holds more bytes than the file's ``size`` (where known): its header is checked
    before any memory is set aside for its data.
    """
    out = []
    for i, leaf in enumerate(like):
        try:
            shape, fortran, dtype = _header(f)
        except Exception as e:  # noqa: BLE001  (numpy's header parser raises ValueError, SyntaxError, TokenError, ...)
            raise StoreError(f"{path!r}: leaf {i} cannot be read ({e}); the file is truncated or corrupt") from None
        if shape != tuple(leaf.shape) or dtype != leaf.dtype:
            raise StoreError(
                f"{path!r}: leaf {i} is {dtype}{list(shape)}, {what} needs "
                f"{np.dtype(leaf.dtype)}{list(leaf.shape)}; the leaves file does not match its config"
            )
        if size is not None and math.prod(shape) * dtype.itemsize > size:
            raise StoreError(
                f"{path!r}: leaf {i} is {dtype}{list(shape)}, more than the file's {size} bytes hold; the file is "
                f"truncated, or {what} is not what it holds"
            )
        out.append(_data(f, shape, fortran, dtype, f"{path!r}: leaf {i}"))
    return out


def _data(f: Any, shape: tuple[int, ...], fortran: bool, dtype: np.dtype, what: str) -> np.ndarray:
    """The data of a ``.npy`` record whose header was read: straight from a file on disk (as numpy
    reads one), else in pieces of :data:`CHUNK_BYTES`."""
    count = math.prod(shape)
    if isinstance(f, (io.FileIO, io.BufferedReader)):
        flat = np.fromfile(f, dtype, count)
    else:
        flat = np.empty(count, dtype)
        raw = flat.view(np.uint8)
        for start in range(0, raw.size, CHUNK_BYTES):
            data = f.read(min(CHUNK_BYTES, raw.size - start))
            raw[start : start + len(data)] = np.frombuffer(data, np.uint8)
            if len(data) < min(CHUNK_BYTES, raw.size - start):
                flat = flat[: (start + len(data)) // dtype.itemsize]
                break
    if flat.size != count:
        raise StoreError(f"{what} ends early ({flat.size} of {count} values); the file is truncated or corrupt")
    return flat.reshape(shape, order="F" if fortran else "C")


CHUNK_BYTES = 1 << 22  # read a leaf's data in pieces of this size


def _header(f: Any) -> tuple[tuple[int, ...], bool, np.dtype]:
    """``(shape, fortran order, dtype)`` of the ``.npy`` record at ``f``'s position, its data not read."""
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(f)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(f)
    raise ValueError(f".npy format version {version}, not 1.0 or 2.0")
