"""Streamed inference over many members of one structural config.

Members are evaluated ``chunk_size`` at a time by one compiled program. On CPU (the trainer's
``"map"`` layout) the chunk is split over the host devices with ``shard_map``; each device
runs groups of :data:`GROUP` members (``vmap``) one after another (``lax.map``) over tiles of
the batch small enough to stay in cache, with the model's fast batched forward
(:func:`sweep.models.batched_forward` with ``conv="shifted"`` for 1D conv nets: channels-first,
one matmul per layer over every point of the tile and no im2col copy; measured 1.6x faster than
the trainer's im2col forward on 2 cores). Elsewhere (GPU) the chunk is simply ``vmap``-ed with
the trainer's forward.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P
from jaxtyping import Array, Float, PyTree

from .._caches import cached
from ..models import batched_forward
from ..training import layout_devices, members_mesh, pad_members

GROUP = 2  # members vmapped together on one CPU device (2-4 measured alike; 1 is slower)
TILE_POINTS = 1024  # batch tile (samples x spatial points) per group on CPU


def _tiles(batch: int, points: int, tile_points: int) -> tuple[int, int]:
    """``(number of tiles, tile size)`` covering ``batch`` with little padding."""
    count = math.ceil(batch / max(1, tile_points // max(1, points)))
    return count, math.ceil(batch / count)


@cached()
def _program(num_devices: int, group: int, tile_points: int):
    """The compiled ``(params, static, x) -> outputs`` of one layout (cleared by ``sweep.clear_caches``)."""
    return eqx.filter_jit(lambda params, static, x: _forward_chunk(params, static, x, num_devices, group, tile_points))


def _forward_chunk(
    params: PyTree, static: PyTree, x: Float[Array, "batch ..."], num_devices: int, group: int, tile_points: int
) -> Array:
    """``[chunk]`` members' outputs on ``x``; ``chunk`` is a multiple of ``num_devices * group``."""
    template = eqx.combine(jax.tree_util.tree_map(lambda a: a[0], params), static)
    if num_devices == 0:  # vmap layout
        forward = batched_forward(template)
        return jax.vmap(lambda p: forward(eqx.combine(p, static), x))(params)
    forward = batched_forward(template, conv="shifted")
    count, tile = _tiles(x.shape[0], math.prod(x.shape[2:]), tile_points)
    xs = jnp.concatenate([x, jnp.repeat(x[:1], count * tile - x.shape[0], axis=0)]).reshape(count, tile, *x.shape[1:])

    def run_group(p, xs):  # ``group`` members over every batch tile
        y = jax.lax.map(lambda xt: jax.vmap(lambda q: forward(eqx.combine(q, static), xt))(p), xs)
        return jnp.swapaxes(y, 0, 1).reshape(group, count * tile, *y.shape[3:])[:, : x.shape[0]]

    def device(p, xs):
        grouped = jax.tree_util.tree_map(lambda a: a.reshape(-1, group, *a.shape[1:]), p)
        y = jax.lax.map(lambda g: run_group(g, xs), grouped)
        return y.reshape(-1, *y.shape[2:])

    return jax.shard_map(
        device, mesh=members_mesh(num_devices), in_specs=(P("m"), P()), out_specs=P("m"), check_vma=False
    )(params, xs)


def run_together(num_devices: int, group: int) -> int:
    """Members one call of the layout runs together: ``group`` per host device, or 1 with ``vmap``."""
    return max(1, num_devices) * (group if num_devices else 1)


def forward(
    chunks: Iterator[PyTree], static: PyTree, x: np.ndarray | Array, group: int = GROUP, tile_points: int = TILE_POINTS
) -> Iterator[np.ndarray]:
    """Outputs ``[n, batch, ...]`` of each chunk of stacked parameters (NumPy leaves) on ``x``."""
    num_devices = layout_devices()
    x = jnp.asarray(x)
    program = _program(num_devices, group, tile_points)
    for params in chunks:
        params, n = pad_members(params, run_together(num_devices, group))
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
