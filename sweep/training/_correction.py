"""Correction learning: a member's step is a coarse exponax stepper's step corrected by its
network (APEBench's ``correct;<mode>``, its ``CorrectedStepper``; ``Training(correct=...)``)."""

from __future__ import annotations

from collections.abc import Callable

import jax


def corrected(forward: Callable, coarse: Callable, mode: str) -> Callable:
    """``forward(model, states)`` of the corrected stepper: ``coarse`` (one state to the next)
    applied to each state of a batch, the network's ``forward`` around it as ``mode`` says.

    ``"sequential"``: ``net(coarse(x))``; ``"parallel"``: ``coarse(x) + net(x)``;
    ``"sequential_with_bypass"``: ``coarse(x) + net(coarse(x))``. The coarse stepper has no
    trained parameters; gradients flow through it to the state (as in APEBench).

    ```python
    step = corrected(lambda model, x: model(x), lambda s: 0.5 * s, "parallel")
    step(lambda x: x, jnp.ones((2, 1, 4)))   # 1.5 everywhere
    ```
    """
    batched = jax.vmap(coarse)

    def sequential(model, x):
        return forward(model, batched(x))

    def parallel(model, x):
        return batched(x) + forward(model, x)

    def sequential_with_bypass(model, x):
        c = batched(x)
        return c + forward(model, c)

    return {"sequential": sequential, "parallel": parallel, "sequential_with_bypass": sequential_with_bypass}[mode]
