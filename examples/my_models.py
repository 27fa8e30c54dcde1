"""A user's own Equinox model factory, referenced from a spec as ``"my_models:shift_net"``.

seed-sweep calls the factory with the spec's ``model`` options and ``key=`` (one member's init
key), and expects a module that maps one sample ``[channels, points]`` to ``[channels, points]``.
"""

from __future__ import annotations

import equinox as eqx
import jax
from jaxtyping import Array, Float, PRNGKeyArray


class ShiftNet(eqx.Module):
    """Two periodic 1D convolutions with a nonlinearity in between."""

    lift: eqx.nn.Conv1d
    project: eqx.nn.Conv1d

    def __init__(self, channels: int, hidden: int, kernel_size: int, *, key: PRNGKeyArray):
        k1, k2 = jax.random.split(key)
        pad = kernel_size // 2
        self.lift = eqx.nn.Conv1d(channels, hidden, kernel_size, padding=pad, padding_mode="CIRCULAR", key=k1)
        self.project = eqx.nn.Conv1d(hidden, channels, kernel_size, padding=pad, padding_mode="CIRCULAR", key=k2)

    def __call__(self, x: Float[Array, "c n"]) -> Float[Array, "c n"]:
        return self.project(jax.nn.gelu(self.lift(x)))


def shift_net(hidden: int = 8, kernel_size: int = 5, channels: int = 1, *, key: PRNGKeyArray) -> ShiftNet:
    """The factory a spec names: ``Model("my_models:shift_net", hidden=8)``."""
    return ShiftNet(channels, hidden, kernel_size, key=key)
