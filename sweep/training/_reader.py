"""The reader of a streamed training split: where its items come from (:class:`Source`), the
host buffers its windows are read into (:class:`WindowBuffers`), and one window read
(:func:`read_window`, in the reader thread of :func:`~._stream.streamed_chunk`)."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

from ._heap import heap_trim
from ._layout import host_empty, on_devices
from ._windows import WindowPlan


class Source(NamedTuple):
    """Where the windows are read from: ``read(start, stop)`` gives the training items
    ``[start, stop)`` as host arrays (pairs ``(x, y)``, or trajectories)."""

    items: int
    item_bytes: int
    per_item: int  # training samples of one item: 1 (a pair), or the windows of states of a trajectory
    read: Callable[[int, int], Any]
    unit: int = 1  # items a read takes together: a file's pairs come a trajectory's at a time


READ_BYTES = 8 * 2**20  # the most bytes of items read at once into a window (a read's copies on the way)


class WindowBuffers:
    """The host arrays a chunk reads its windows into: two sets, taken in turn (the window
    training, the next arriving), each as large as the largest window. A set is written again
    two windows later, once the devices are done with the window it held (its pass returned), so
    the host holds two windows whatever the moment jaxlib drops its references to the arrays put
    on the devices in place (it does so lazily: allocated afresh, a third window was read while
    the one before still stood, +351 MiB on a 1 GiB budget)."""

    def __init__(self, plan: WindowPlan):
        self._items = plan.window_items
        self._sets: list[Any] = [None, None]

    def take(self, turn: int, like: Any, items: int) -> Any:
        """The first ``items`` rows of set ``turn % 2``, shaped as the leaves of ``like`` (a shard)."""
        if self._sets[turn % 2] is None:
            self._sets[turn % 2] = jax.tree_util.tree_map(
                lambda p: host_empty((self._items, *p.shape[1:]), p.dtype), like
            )
        return jax.tree_util.tree_map(lambda a: a[:items], self._sets[turn % 2])

    def owners(self) -> list[weakref.ref]:
        """Weak references to the arrays owning the sets' memory (:func:`~._layout.let_go`)."""
        return [weakref.ref(a.base) for taken in self._sets for a in jax.tree_util.tree_leaves(taken)]


def read_window(source: Source, plan: WindowPlan, place: Any, shards: np.ndarray, into: Callable[[Any, int], Any]):
    """The items of ``shards``, read and put on their way to the devices (in the reader thread):
    read at most :data:`READ_BYTES` (or a trajectory's pairs) at a time into the window's arrays (``into(items read,
    items)``: a set of :class:`WindowBuffers`), so that the host holds the window and the copies
    of one read, not the window twice; the heap's free pages (the reads gone) handed back first."""
    total = plan.items_of(shards)
    heap_trim(total * source.item_bytes)
    unit = source.unit
    step = max(1, READ_BYTES // (source.item_bytes * unit)) * unit  # whole trajectories of a file
    arrays, at = None, 0
    for start, stop in _reads([plan.shard(int(s)) for s in shards], step):
        part = source.read(start, stop)
        if arrays is None:
            arrays = into(part, total)
        for whole, piece in zip(jax.tree_util.tree_leaves(arrays), jax.tree_util.tree_leaves(part)):
            whole[at : at + stop - start] = piece
        at += stop - start
    return on_devices(arrays, place)


def _reads(bounds: list[tuple[int, int]], step: int):
    """``(start, stop)`` of each read of the shards ``bounds``: cut at the multiples of ``step``
    (a multiple of the source's unit, so that no trajectory of a file is read twice in a shard)."""
    for first, last in bounds:
        cuts = [first, *range((first // step + 1) * step, last, step), last]
        yield from zip(cuts, cuts[1:])
