"""Autoregressive rollouts of many members of one structural config, streamed over members and steps.

A rollout of a model ``m`` from ``x0`` ``[batch, c, *s]`` for ``steps`` steps is
``[steps + 1, batch, c, *s]``: index 0 is ``x0``, index ``t`` is ``m`` applied ``t`` times to each
sample. Members go in chunks through the layouts of :mod:`._inference` (on CPU: the chunk split
over the host devices, groups of members vmapped, the batch in cache-sized tiles, the fast
batched forward; elsewhere: ``vmap``). One compiled program advances every member of a chunk by
up to ``length`` steps with the one rollout engine, :func:`sweep.training.rollout_steps` (the
trainer's rollout metrics use it too): a ``lax.fori_loop`` whose trip count is an *input* of the program, so
a rollout of any number of steps calls the same program ``ceil(steps / length)`` times, carrying
each member's states from call to call on the device, and never compiles again for another
``steps``. ``length`` depends on the shapes only (one call's states stay within
:data:`STATES_BYTES`, at most :data:`MAX_LENGTH` steps). On CPU each batch tile takes all its
steps before the next tile starts, so its states stay in cache.
"""

from __future__ import annotations

from collections.abc import Iterator

import equinox as eqx
import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from jaxtyping import PyTree

from .._caches import cached
from .._errors import QueryError
from ..training import layout_devices, members_mesh, rollout_steps, window_step
from ._inference import GROUP, TILE_POINTS, Layout, over_members, padded_chunks

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


def check_fed_back(template: tuple[PyTree, PyTree], x0: np.ndarray, model: str, history: int = 1) -> None:
    """A :class:`QueryError` unless the model (``template``: leaf shapes, static part) maps a sample of
    ``x0`` to the same shape (with ``history=h``: to one of the ``h`` states it stacks), so that its
    outputs can be fed back in (traced abstractly, nothing runs)."""
    shapes, static = template
    sample = tuple(x0.shape[1:])
    out = tuple(
        jax.eval_shape(lambda p, x: eqx.combine(p, static)(x), shapes, jax.ShapeDtypeStruct(sample, x0.dtype)).shape
    )
    if out != (sample[0] // history, *sample[1:]):
        channels = f" ({out[0]} output channels for {sample[0]} input channels)" if out[1:] == sample[1:] else ""
        raise QueryError(
            f"{model} maps a sample of shape {sample} to {out}{channels}; a rollout feeds each output "
            f"back in as the next input, so only a model whose outputs have the shape of its inputs can "
            f"be rolled out (predict gives one step)"
        )


@cached()
def _program(num_devices: int, group: int, tile_points: int, length: int, history: int = 1):
    """The compiled ``(params, static, states, n) -> (last states, n states)`` of one layout and
    ``length`` (cleared by ``sweep.clear_caches``): each member's states ``[chunk, batch, ...]``
    advanced ``n`` (<= ``length``) steps by :func:`sweep.training.rollout_steps`, giving ``(last
    states [chunk, batch, ...], states [chunk, length, batch, ...])``."""

    def advance(params, static, x, n):
        def member(forward, model, states):  # states: windows of `history` states (one state: 1)
            channels = states.shape[1] // history
            step = window_step(lambda s: forward(model, s), history)
            return rollout_steps(step, states, n, length, lambda s, t: s[:, s.shape[1] - channels :])

        layout = Layout(num_devices, group, tile_points)
        return over_members(member, params, static, x, layout, per_member=True, batch_axes=(0, 1))

    return eqx.filter_jit(advance)


def rollout(
    chunks: Iterator[PyTree],
    static: PyTree,
    x0: np.ndarray,
    steps: int,
    history: int = 1,
    group: int = GROUP,
    tile_points: int = TILE_POINTS,
) -> Iterator[tuple[int, int, np.ndarray]]:
    """``(chunk number, t, states)`` for each chunk of stacked parameters (NumPy leaves) in turn,
    and within it each run of steps in order: ``states`` ``[n, k, *x0.shape]`` are the chunk's ``n``
    members' states after ``t``, ..., ``t + k - 1`` steps from ``x0`` (``t`` from 1 to ``steps``).
    ``history=h``: ``x0`` are windows of ``h`` states stacked as channels, and the states one of them."""
    layout = Layout(layout_devices(), group, tile_points)
    sharding = NamedSharding(members_mesh(layout.num_devices), P("m")) if layout.num_devices else None
    for i, (params, n) in enumerate(padded_chunks(chunks, layout)):
        members = jax.tree_util.tree_leaves(params)[0].shape[0]
        length = steps_per_call(members, x0.nbytes)
        program = _program(*layout, length, history)
        params, x = jax.device_put((params, np.broadcast_to(x0, (members, *x0.shape))), sharding)
        for t in range(1, steps + 1, length):
            k = min(length, steps + 1 - t)
            x, states = program(params, static, x, np.asarray(k, np.int32))
            yield i, t, np.asarray(states)[:n, :k]
