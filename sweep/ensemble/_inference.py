"""Streamed inference over many members of one structural config.

Members are evaluated ``chunk_size`` at a time by one compiled program, laid out by
:func:`over_members` (the one member layout of inference, which the rollouts of
:mod:`._rollout` run in too; :class:`Layout` holds its settings). On CPU (the trainer's
``"map"`` layout) the chunk is split over the host devices with ``shard_map``; each device
runs groups of :data:`GROUP` members (``vmap``) one after another (``lax.map``) over tiles of
the batch small enough to stay in cache (:func:`sweep._batches.equal_parts`), with the model's
fast batched forward (:func:`sweep.models.batched_forward` with ``conv="shifted"`` for 1D conv
nets: channels-first,
one matmul per layer over every point of the tile and no im2col copy; measured 1.6x faster than
the trainer's im2col forward on 2 cores). Elsewhere (GPU) the chunk is simply ``vmap``-ed with
the trainer's forward.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P
from jaxtyping import Array, PyTree

from .._batches import equal_parts, in_parts, joined
from .._caches import cached
from ..models import batched_forward
from ..training import layout_devices, members_mesh, pad_members

GROUP = 2  # members vmapped together on one CPU device (2-4 measured alike; 1 is slower)
TILE_POINTS = 1024  # batch tile (samples x spatial points) per group on CPU


@cached()
def _program(num_devices: int, group: int, tile_points: int):
    """The compiled ``(params, static, x) -> outputs`` of one layout (cleared by ``sweep.clear_caches``)."""

    def outputs(params, static, x):
        return over_members(
            lambda forward, model, x: forward(model, x), params, static, x, Layout(num_devices, group, tile_points)
        )

    return eqx.filter_jit(outputs)


class Layout(NamedTuple):
    """How a chunk of members runs: ``num_devices`` host devices (0: ``vmap`` on one device), each
    running groups of ``group`` members over tiles of the batch of about ``tile_points`` points."""

    num_devices: int
    group: int = GROUP
    tile_points: int = TILE_POINTS

    @property
    def together(self) -> int:
        """Members one call runs together: ``group`` per host device, or 1 with ``vmap``
        (a chunk is padded to a multiple of it)."""
        return max(1, self.num_devices) * (self.group if self.num_devices else 1)


def over_members(
    member: Callable[[Callable, PyTree, Array], PyTree],
    params: PyTree,
    static: PyTree,
    x: Array,
    layout: Layout,
    per_member: bool = False,
    batch_axes: tuple[int, ...] | int = 0,
) -> PyTree:
    """``member(forward, model, x)`` for every member of ``params`` (a leading member axis, a
    multiple of ``layout.together`` long), laid out as the module docstring says; ``forward`` is
    the layout's batched forward of the model.

    ``x``: ``[batch, ...]`` for every member, or with ``per_member`` ``[members, batch, ...]``.
    Each leaf ``member`` returns has the batch at ``batch_axes`` (one per leaf, or one for all);
    the result has the member axis first.
    """
    template = eqx.combine(jax.tree_util.tree_map(lambda a: a[0], params), static)
    x_axis = 0 if per_member else None
    if not layout.num_devices:  # vmap layout
        forward = batched_forward(template)
        return jax.vmap(lambda p, xs: member(forward, eqx.combine(p, static), xs), in_axes=(0, x_axis))(params, x)
    forward, group = batched_forward(template, conv="shifted"), layout.group
    batch_axis = 1 if per_member else 0
    batch = x.shape[batch_axis]
    count, tile = equal_parts(batch, max(1, layout.tile_points // max(1, math.prod(x.shape[batch_axis + 2 :]))))
    tiles = in_parts(x, count, tile, batch_axis, fill="first")  # [(members,) count, tile, ...]

    def run_group(p, xs):  # ``group`` members over every batch tile, one tile after another
        def on_tile(xt):
            return jax.vmap(lambda q, xq: member(forward, eqx.combine(q, static), xq), in_axes=(0, x_axis))(p, xt)

        out = jax.lax.map(on_tile, jnp.swapaxes(xs, 0, 1) if per_member else xs)  # [count, group, ...]
        axes = batch_axes if isinstance(batch_axes, tuple) else (batch_axes,) * len(jax.tree_util.tree_leaves(out))
        leaves, tree = jax.tree_util.tree_flatten(out)
        return tree.unflatten([joined(jnp.moveaxis(y, 0, a + 1), batch, a + 1) for y, a in zip(leaves, axes)])

    def device(p, xs):
        grouped = jax.tree_util.tree_map(lambda a: a.reshape(-1, group, *a.shape[1:]), (p, xs) if per_member else p)
        out = jax.lax.map(lambda g: run_group(*g) if per_member else run_group(g, xs), grouped)
        return jax.tree_util.tree_map(lambda a: a.reshape(-1, *a.shape[2:]), out)

    specs = (P("m"), P("m") if per_member else P())
    mesh = members_mesh(layout.num_devices)
    return jax.shard_map(device, mesh=mesh, in_specs=specs, out_specs=P("m"), check_vma=False)(params, tiles)


def padded_chunks(chunks: Iterable[PyTree], layout: Layout) -> Iterator[tuple[PyTree, int]]:
    """Each chunk of stacked parameters (NumPy leaves) padded to a multiple of what the layout runs
    together (:func:`sweep.training.pad_members`), and its number of members."""
    for params in chunks:
        yield pad_members(params, layout.together)


def forward(
    chunks: Iterable[PyTree], static: PyTree, x: np.ndarray | Array, group: int = GROUP, tile_points: int = TILE_POINTS
) -> Iterator[np.ndarray]:
    """Outputs ``[n, batch, ...]`` of each chunk of stacked parameters (NumPy leaves) on ``x``."""
    layout = Layout(layout_devices(), group, tile_points)
    x = jnp.asarray(x)
    program = _program(*layout)
    for params, n in padded_chunks(chunks, layout):
        yield np.asarray(program(params, static, x))[:n]


class Moments:
    """Mean and population std (ddof=0) over members, from chunks ``[n, ...]`` of them, in float64
    (Chan et al.'s parallel update): what :meth:`Ensemble.mean_std` and
    :meth:`Ensemble.rollout_mean_std` stream through, holding no ``[members, ...]`` array."""

    def __init__(self):
        self.count, self.mean, self.m2 = 0, 0.0, 0.0

    def add(self, y: np.ndarray) -> None:
        y = y.astype(np.float64)
        n, y_mean = len(y), y.mean(0)
        delta = y_mean - self.mean
        self.mean = self.mean + delta * n / (self.count + n)
        self.m2 = self.m2 + ((y - y_mean) ** 2).sum(0) + delta**2 * self.count * n / (self.count + n)
        self.count += n

    def result(self, dtype) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(self.mean, dtype), np.sqrt(self.m2 / self.count).astype(dtype)
