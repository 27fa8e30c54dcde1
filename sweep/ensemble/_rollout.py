"""Autoregressive rollouts of many members of one structural config, streamed over members and steps.

A rollout of a model ``m`` from ``x0`` ``[batch, c, *s]`` for ``steps`` steps is
``[steps + 1, batch, c, *s]``: index 0 is ``x0``, index ``t`` is ``m`` applied ``t`` times to each
sample. Members go in chunks through the layouts of :mod:`._inference` (on CPU: the chunk split
over the host devices, groups of members vmapped, the batch in cache-sized tiles, the fast
batched forward; elsewhere: ``vmap``). One compiled program advances every member of a chunk by
up to ``length`` steps with a ``lax.fori_loop`` whose trip count is an *input* of the program, so
a rollout of any number of steps calls the same program ``ceil(steps / length)`` times, carrying
each member's states from call to call on the device, and never compiles again for another
``steps``. ``length`` depends on the shapes only (one call's states stay within
:data:`STATES_BYTES`, at most :data:`MAX_LENGTH` steps). On CPU each batch tile takes all its
steps before the next tile starts, so its states stay in cache.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from jaxtyping import Array, Float, Int, PyTree

from .._caches import cached
from .._errors import QueryError
from ..models import batched_forward
from ..training import layout_devices, members_mesh, pad_members
from ._inference import GROUP, TILE_POINTS, _tiles, run_together

STATES_BYTES = 256 * 2**20  # states one call returns for a chunk of members (at least one step)
MAX_LENGTH = 64  # steps per call, at most


def steps_per_call(members: int, x0_bytes: int) -> int:
    """Steps one program call takes for ``members`` members from a batch of ``x0_bytes``: as many as
    fit :data:`STATES_BYTES`, between 1 and :data:`MAX_LENGTH` (a function of the shapes alone)."""
    return int(np.clip(STATES_BYTES // max(1, members * x0_bytes), 1, MAX_LENGTH))


def check_steps(steps: object, what: str) -> int:
    """``steps`` as an int, or a :class:`QueryError` unless it is an integer >= 1."""
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise QueryError(f"{what}(steps={steps!r}): the number of steps must be an integer >= 1")
    return int(steps)


def check_fed_back(template: tuple[PyTree, PyTree], x0: np.ndarray, model: str) -> None:
    """A :class:`QueryError` unless the model (``template``: leaf shapes, static part) maps a sample of
    ``x0`` to the same shape, so that its outputs can be fed back in (traced abstractly, nothing runs)."""
    shapes, static = template
    sample = tuple(x0.shape[1:])
    out = tuple(
        jax.eval_shape(lambda p, x: eqx.combine(p, static)(x), shapes, jax.ShapeDtypeStruct(sample, x0.dtype)).shape
    )
    if out != sample:
        channels = f" ({out[0]} output channels for {sample[0]} input channels)" if out[1:] == sample[1:] else ""
        raise QueryError(
            f"{model} maps a sample of shape {sample} to {out}{channels}; a rollout feeds each output "
            f"back in as the next input, so only a model whose outputs have the shape of its inputs can "
            f"be rolled out (predict gives one step)"
        )


@cached()
def _program(num_devices: int, group: int, tile_points: int, length: int):
    """The compiled ``(params, static, states, n) -> (last states, n states)`` of one layout and
    ``length`` (cleared by ``sweep.clear_caches``)."""
    return eqx.filter_jit(
        lambda params, static, x, n: _advance(params, static, x, n, num_devices, group, tile_points, length)
    )


def _steps(step, x: Array, n: Int[Array, ""], length: int) -> tuple[Array, Array]:
    """``step`` applied ``n`` (<= ``length``) times from ``x``: ``(the last state, [length, *x.shape]
    the states after 1..n steps, zeros past n)``."""

    def body(i, carry):
        state, states = carry
        state = step(state)
        return state, jax.lax.dynamic_update_index_in_dim(states, state, i, 0)

    return jax.lax.fori_loop(0, n, body, (x, jnp.zeros((length, *x.shape), x.dtype)))


def _advance(
    params: PyTree,
    static: PyTree,
    x: Float[Array, "chunk batch ..."],
    n: Int[Array, ""],
    num_devices: int,
    group: int,
    tile_points: int,
    length: int,
) -> tuple[Array, Array]:
    """Each member's states ``x`` advanced ``n`` steps: ``(last states [chunk, batch, ...], states
    [chunk, length, batch, ...])``; ``chunk`` is a multiple of ``num_devices * group``."""
    template = eqx.combine(jax.tree_util.tree_map(lambda a: a[0], params), static)
    if num_devices == 0:  # vmap layout
        forward = batched_forward(template)
        return jax.vmap(lambda p, s: _steps(lambda s: forward(eqx.combine(p, static), s), s, n, length))(params, x)
    forward = batched_forward(template, conv="shifted")
    batch = x.shape[1]
    count, tile = _tiles(batch, math.prod(x.shape[3:]), tile_points)
    x = jnp.concatenate([x, jnp.repeat(x[:, :1], count * tile - batch, axis=1)], axis=1)
    x = x.reshape(x.shape[0], count, tile, *x.shape[2:])

    def run_group(p, xs):  # ``group`` members [group, count, tile, ...], one batch tile after another
        def tile_steps(xt):
            return jax.vmap(lambda q, s: _steps(lambda s: forward(eqx.combine(q, static), s), s, n, length))(p, xt)

        last, states = jax.lax.map(tile_steps, jnp.swapaxes(xs, 0, 1))  # [count, group, (length,) tile, ...]
        last = jnp.swapaxes(last, 0, 1).reshape(group, count * tile, *last.shape[3:])[:, :batch]
        states = jnp.moveaxis(states, 0, 2).reshape(group, length, count * tile, *states.shape[4:])[:, :, :batch]
        return last, states

    def device(p, xs):
        grouped = jax.tree_util.tree_map(lambda a: a.reshape(-1, group, *a.shape[1:]), (p, xs))
        last, states = jax.lax.map(lambda g: run_group(*g), grouped)
        return last.reshape(-1, *last.shape[2:]), states.reshape(-1, *states.shape[2:])

    specs = (P("m"), P("m"))
    return jax.shard_map(device, mesh=members_mesh(num_devices), in_specs=specs, out_specs=specs, check_vma=False)(
        params, x
    )


def rollout(
    chunks: Iterator[PyTree],
    static: PyTree,
    x0: np.ndarray,
    steps: int,
    group: int = GROUP,
    tile_points: int = TILE_POINTS,
) -> Iterator[tuple[int, int, np.ndarray]]:
    """``(chunk number, t, states)`` for each chunk of stacked parameters (NumPy leaves) in turn,
    and within it each run of steps in order: ``states`` ``[n, k, *x0.shape]`` are the chunk's ``n``
    members' states after ``t``, ..., ``t + k - 1`` steps from ``x0`` (``t`` from 1 to ``steps``)."""
    num_devices = layout_devices()
    sharding = NamedSharding(members_mesh(num_devices), P("m")) if num_devices else None
    for i, params in enumerate(chunks):
        params, n = pad_members(params, run_together(num_devices, group))
        members = jax.tree_util.tree_leaves(params)[0].shape[0]
        length = steps_per_call(members, x0.nbytes)
        program = _program(num_devices, group, tile_points, length)
        params, x = jax.device_put((params, np.broadcast_to(x0, (members, *x0.shape))), sharding)
        for t in range(1, steps + 1, length):
            k = min(length, steps + 1 - t)
            x, states = program(params, static, x, np.asarray(k, np.int32))
            yield i, t, np.asarray(states)[:n, :k]
