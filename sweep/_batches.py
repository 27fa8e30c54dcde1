"""Batches of a compiled size: the one way seed-sweep cuts an axis of samples, trajectories or
members into parts.

A compiled program has one shape per input, so every part is padded to a size the program was
compiled for and what the padding computes is dropped (or masked out of a mean):

- inside a program (the trainer's evaluation, the batch tiles of ensemble inference):
  :func:`equal_parts` of at most ``most`` items, all of one size, the last padded (300 items
  in parts of at most 128: three parts of 100, no padding at all), laid out with :func:`in_parts`
  and put back with :func:`joined`;
- on the host, feeding a program compiled for given sizes (ensemble scores in blocks of points,
  the service's batch sizes): consecutive :func:`pieces` of at most ``size`` items, each
  :func:`padded` to a compiled size.

Padding is zeros, or copies of the first item (``fill="first"``) where only real values may be
computed on (members' parameters: :func:`sweep.training.pad_members`). Works on NumPy arrays
and on JAX arrays, traced or not. Public as ``sweep.training.equal_parts`` and its siblings.
"""

from __future__ import annotations

from typing import Literal, TypeVar, cast

import jax
import jax.numpy as jnp
import numpy as np

A = TypeVar("A", np.ndarray, jax.Array)
Fill = Literal["zeros", "first"]


def equal_parts(n: int, most: int) -> tuple[int, int]:
    """``(count, size)``: the fewest parts of at most ``most`` items that cover ``n``, all of one
    size (``count * size - n < count`` items of padding).

    ```python
    from sweep.training import equal_parts

    equal_parts(300, 128)  # (3, 100)
    equal_parts(50, 128)   # (1, 50)
    ```
    """
    count = max(1, -(-n // max(1, most)))
    return count, -(-n // count)


def pieces(n: int, size: int) -> list[slice]:
    """Consecutive slices of at most ``size`` of ``n`` items (each then :func:`padded` to a compiled size).

    ```python
    from sweep.training import pieces

    pieces(10, 4)  # [slice(0, 4), slice(4, 8), slice(8, 10)]
    ```
    """
    return [slice(start, min(start + size, n)) for start in range(0, n, max(1, size))]


def padded(a: A, size: int, axis: int = 0, fill: Fill = "zeros") -> A:
    """``a`` with its ``axis`` padded to ``size`` items: zeros, or copies of its first item
    (``a`` itself when it has ``size`` items or more).

    ```python
    import numpy as np
    from sweep.training import padded

    padded(np.arange(1, 4), 5)  # array([1, 2, 3, 0, 0])
    padded(np.arange(1, 4), 5, fill="first")  # array([1, 2, 3, 1, 1])
    ```
    """
    pad = size - a.shape[axis]
    if pad <= 0:
        return a
    xp = jnp if isinstance(a, jax.Array) else np
    if fill == "first":
        extra = xp.repeat(a[_upto(axis, 1)], pad, axis=axis)
    else:
        extra = xp.zeros((*a.shape[:axis], pad, *a.shape[axis + 1 :]), a.dtype)
    return cast(A, xp.concatenate([a, extra], axis=axis))


def in_parts(a: A, count: int, size: int, axis: int = 0, fill: Fill = "zeros") -> A:
    """``a``'s ``axis`` padded to ``count * size`` and cut into ``[..., count, size, ...]``.

    ```python
    import numpy as np
    from sweep.training import equal_parts, in_parts, joined

    x = np.arange(7)
    parts = in_parts(x, *equal_parts(7, 3))  # shape (3, 3): [[0 1 2] [3 4 5] [6 0 0]]
    joined(parts, 7)  # array([0, 1, 2, 3, 4, 5, 6])
    ```
    """
    a = padded(a, count * size, axis, fill)
    return a.reshape(*a.shape[:axis], count, size, *a.shape[axis + 1 :])


def joined(a: A, n: int, axis: int = 0) -> A:
    """The inverse of :func:`in_parts`: the ``count`` and ``size`` axes at ``axis`` and ``axis + 1``
    merged into one, cut to its first ``n`` items (example: :func:`in_parts`)."""
    merged = a.reshape(*a.shape[:axis], a.shape[axis] * a.shape[axis + 1], *a.shape[axis + 2 :])
    return merged[_upto(axis, n)]


def _upto(axis: int, n: int) -> tuple[slice, ...]:
    """The index of the first ``n`` items along ``axis``."""
    return (*(slice(None),) * axis, slice(0, n))
