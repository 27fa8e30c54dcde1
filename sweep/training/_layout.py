"""How a block's members are laid out on the devices: one home for training and inference.

- ``"map"`` (CPU): members split into equal contiguous parts over the host devices (a mesh with
  one axis ``"m"``), each device running its part one member after another; the member axis is
  padded to a multiple of what runs together by repeating member 0. A member's arithmetic is
  then the same whatever block it is in: results are bit-identical on CPU.
- ``"vmap"`` (GPU): members vectorised with ``vmap`` on one device.
"""

from __future__ import annotations

import os

import jax
import numpy as np
from jax.sharding import Mesh
from jaxtyping import PyTree

from .._batches import padded
from .._errors import SpecError

LAYOUTS = ("map", "vmap")


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
