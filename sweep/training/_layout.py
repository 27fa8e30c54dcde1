"""How a block's members are laid out on the devices: one home for training and inference.

- ``"map"`` (CPU): members split into equal contiguous parts over the host devices (a mesh with
  one axis ``"m"``), each device running its part one member after another; the member axis is
  padded to a multiple of what runs together by repeating member 0. A member's arithmetic is
  then the same whatever block it is in: results are bit-identical on CPU.
- ``"vmap"`` (GPU): members vectorised with ``vmap`` on one device.

The data every member reads (held, a streamed window, an evaluation part) goes to the devices
through :func:`on_devices`: XLA:CPU's devices keep separate buffers, so an array put on ``N`` of
them is held ``N`` times, unless it is a C-contiguous host array aligned to
:data:`HOST_ALIGN` bytes, which every CPU device then uses where it is (JAX does not copy it).
"""

from __future__ import annotations

import math
import os
import time
import weakref
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh
from jaxtyping import PyTree

from .._batches import padded
from .._errors import SpecError, warn

LAYOUTS = ("map", "vmap")
HOST_ALIGN = 64  # bytes: a host array aligned so is used in place by XLA:CPU's devices (zero-copy)
LET_GO_WAIT_S = 2.0  # seconds let_go waits for jaxlib to let go of host arrays (they go in a millisecond)


def default_layout() -> str:
    """``SWEEP_LAYOUT`` if set, else ``"map"`` on CPU and ``"vmap"`` on accelerators."""
    layout = os.environ.get("SWEEP_LAYOUT") or ("map" if jax.default_backend() == "cpu" else "vmap")
    if layout not in LAYOUTS:
        raise SpecError(f"SWEEP_LAYOUT: got {layout!r}; choose one of {', '.join(LAYOUTS)}")
    return layout


def layout_devices() -> int:
    """Host devices the ``"map"`` layout splits members over; 0 for the ``"vmap"`` layout."""
    return len(jax.devices("cpu")) if default_layout() == "map" else 0


def members_mesh(num_devices: int) -> Mesh:
    """The ``"map"`` layout's mesh: members split over ``num_devices`` host devices (axis ``"m"``)."""
    return Mesh(np.asarray(jax.devices("cpu")[:num_devices]), ("m",))


def pad_members(tree: PyTree, multiple: int) -> tuple[PyTree, int]:
    """``(tree, n)``: the leading member axis of NumPy leaves padded to a multiple of ``multiple``
    by repeating member 0 (``n``: the members there were), so that every count of members
    compiles to the same few programs."""
    n = jax.tree_util.tree_leaves(tree)[0].shape[0]
    size = n + -n % max(1, multiple)
    return jax.tree_util.tree_map(lambda a: padded(np.asarray(a), size, fill="first"), tree), n


def host_empty(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An uninitialised C-contiguous array aligned to :data:`HOST_ALIGN` bytes (NumPy aligns to 16)."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    raw = np.empty(nbytes + HOST_ALIGN, np.uint8)
    start = -raw.ctypes.data % HOST_ALIGN
    return raw[start : start + nbytes].view(dtype).reshape(shape)


def on_devices(tree: PyTree, place: Any) -> PyTree:
    """``jax.device_put(tree, place)``, where ``place`` on CPU devices takes each NumPy leaf as an
    aligned host array (copied into one once, unless it is one already), which the devices share:
    one copy in host memory whatever the number of devices, where each would hold its own. The
    leaves must not change while the devices read them (until a computation on them returned).
    Deleted, such an array's host memory goes when jaxlib lets go of it (:func:`let_go`)."""
    if _on_cpu(place):
        tree = host_aligned(tree)
    return jax.device_put(tree, place)


def let_go(place: Any, owners: Sequence[weakref.ref]) -> None:
    """Free the host arrays of the CPU buffers deleted so far, and wait (at most
    :data:`LET_GO_WAIT_S`) until the arrays behind ``owners`` (weak references to the NumPy arrays
    owning the memory) are gone; nothing where ``place`` is not on CPU devices (their data were
    copied to the device, not read in place).

    jaxlib drops its references to the NumPy arrays that :func:`on_devices` put on the devices
    in place lazily, at a later transfer (measured with jaxlib 0.10.2: a deleted 300 MB array
    stayed until the next ``device_put``, for seconds, and through a cached ``jit`` call), and a
    buffer a computation has just read is let go of on XLA's thread, after the computation's
    results are ready; so a streamed chunk's windows would otherwise stay through its evaluation."""
    if not _on_cpu(place):
        return
    deadline = time.monotonic() + LET_GO_WAIT_S
    while True:
        jax.device_put(np.zeros(0, np.float32), next(iter(_devices(place)))).block_until_ready()
        if all(owner() is None for owner in owners):
            return
        if time.monotonic() > deadline:
            warn(
                f"host arrays put on the CPU devices were still held {LET_GO_WAIT_S} s after they were deleted; "
                "a streamed block's windows stay in memory through its evaluation",
                RuntimeWarning,
            )
            return
        time.sleep(0.001)


def _devices(place: Any) -> set:
    return place.device_set if isinstance(place, jax.sharding.Sharding) else {place}


def _on_cpu(place: Any) -> bool:
    return all(d.platform == "cpu" for d in _devices(place))


def host_aligned(tree: PyTree) -> PyTree:
    """``tree`` with each NumPy leaf an aligned host array (copied into one, unless it is one
    already): what :func:`on_devices` puts on CPU devices in place, so that an array kept both
    as read and as placed is one copy in host memory, not two."""
    return jax.tree_util.tree_map(_aligned, tree)


def _aligned(leaf: Any) -> Any:
    if not isinstance(leaf, np.ndarray) or (leaf.flags.c_contiguous and leaf.ctypes.data % HOST_ALIGN == 0):
        return leaf
    out = host_empty(leaf.shape, leaf.dtype)
    out[...] = leaf
    return out
