"""Leaves files read strictly, without JAX and without pickle.

A leaves file is what ``eqx.tree_serialise_leaves`` writes: one ``.npy`` record per array leaf,
in tree order. :func:`read_arrays` reads records back as NumPy arrays, each checked against
the shape and dtype it must have; block checkpoints (``state.eqx``) and the store's ensembles
(``<config_id>.eqx``) are read through it. Reading NumPy directly costs no JAX dispatch per
leaf (``eqx.tree_deserialise_leaves`` converts every leaf with one), and a reader that needs
only the first leaves (a block's parameters come before its optimizer state) stops there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ._errors import StoreError


def read_arrays(f: Any, like: Sequence[Any], path: str, what: str) -> list[np.ndarray]:
    """The next ``len(like)`` records of the binary file object ``f``, as NumPy arrays shaped like
    ``like`` (objects with ``shape`` and ``dtype``, e.g. ``jax.ShapeDtypeStruct``).

    Raises :class:`StoreError` naming ``path`` if a record cannot be read (truncated, corrupt,
    pickled) or does not have its leaf's shape and dtype (``what`` says whose leaves were expected).
    """
    out = []
    for i, leaf in enumerate(like):
        try:
            array = np.lib.format.read_array(f, allow_pickle=False)
        except (ValueError, EOFError, OSError) as e:
            raise StoreError(f"{path!r}: leaf {i} cannot be read ({e}); the file is truncated or corrupt") from None
        if array.shape != tuple(leaf.shape) or array.dtype != leaf.dtype:
            raise StoreError(
                f"{path!r}: leaf {i} is {array.dtype}{list(array.shape)}, {what} needs "
                f"{np.dtype(leaf.dtype)}{list(leaf.shape)}; the leaves file does not match its config"
            )
        out.append(array)
    return out
