"""The one rollout engine: a model's outputs fed back in as its next inputs.

:func:`rollout_steps` is what every autoregressive loop of seed-sweep advances with: the
trainer's unrolled loss (:func:`~._member.windows_loss`: ``K`` steps written into the program,
each scored against the window, differentiated), its rollout metrics
(:func:`~._member.rollout_metrics`: every validation and test trajectory rolled out inside the
compiled chunk, each state scored against the reference) and the ensemble's rollouts
(:meth:`sweep.Ensemble.rollout`, :meth:`sweep.Ensemble.rollout_mean_std`: the states themselves,
streamed over members and runs of steps, the number of steps an input of the program).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, Int, PyTree


def window_step(step: Callable[[Array], Array], history: int) -> Callable[[Array], Array]:
    """``step`` (a model's batched forward) as a step of windows ``[batch, history * c, *s]`` (the
    ``history`` latest states, oldest first: ``Problem(..., history=h)``): the oldest state dropped,
    the model's output appended. ``history=1``: ``step`` itself."""
    if history == 1:
        return step

    def advance(window: Array) -> Array:
        out = step(window)
        return jnp.concatenate([window[:, out.shape[1] :], out], axis=1)

    return advance


def rollout_steps(
    step: Callable[[PyTree], PyTree],
    x: PyTree,
    n: int | Int[Array, ""],
    length: int,
    record: Callable[[PyTree, Any], PyTree] | None = None,
    unroll: bool = False,
) -> tuple[Array, PyTree]:
    """``step`` applied ``n`` (<= ``length``) times from ``x``: ``(the last state, the records)``.

    The records are ``[length, ...]`` leaves: entry ``t`` is ``record(state after t + 1 steps, t)``
    (the state itself by default), zeros past ``n``. With ``n == length`` (Python ints) the steps
    are a ``lax.scan`` stacking the records; ``unroll=True`` then writes every step into the
    program, so that XLA fuses across steps (the trainer's unrolled loss, a few steps long).
    Otherwise ``n`` may be a traced integer (a ``lax.fori_loop`` trip count writing into the
    records): one compiled program then takes any number of steps up to ``length``.

    ```python
    last, states = rollout_steps(lambda s: model(s), x0, 5, 5)                   # [5, *x0.shape]
    _, errors = rollout_steps(model, x0, 5, 5, lambda s, t: jnp.mean((s - ref[t]) ** 2))  # [5]
    ```
    """
    record = record or (lambda state, t: state)
    if isinstance(n, int) and n == length:  # every step: a scan, its records stacked as it goes

        def scan_body(state, t):
            state = step(state)
            return state, record(state, t)

        return jax.lax.scan(scan_body, x, jnp.arange(length), unroll=unroll)
    shapes = jax.eval_shape(record, x, 0)
    records = jax.tree_util.tree_map(lambda s: jnp.zeros((length, *s.shape), s.dtype), shapes)

    def body(t, carry):
        state, records = carry
        state = step(state)
        new = record(state, t)
        return state, jax.tree_util.tree_map(lambda r, v: jax.lax.dynamic_update_index_in_dim(r, v, t, 0), records, new)

    return jax.lax.fori_loop(0, n, body, (x, records))
