"""``ConvEncoder``: a field in, a vector (or class logits, or one number) out.

For inverse problems (a PDE's state in, its coefficients out) and per-sample classification:
a lifting convolution, ``depth`` strided convolutions that halve the grid (pdequinox's
``PhysicsConv`` and ``LinearConvDownBlock``, with the problem's boundary mode), the mean over
every remaining point (``pool="mean"``; or, ``pool="flatten"``, every remaining point's features,
which keeps where things are: for targets on another small grid), and a dense head
(``equinox.nn.MLP``) to ``prod(out_shape)`` numbers, reshaped to ``out_shape``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import pdequinox as pdeqx
from jaxtyping import Array, Float, PRNGKeyArray


class ConvEncoder(eqx.Module):
    """Map one input ``(in_channels, *spatial)`` to ``out_shape`` (``()``: one number).

    Args:
        num_spatial_dims: 1, 2 or 3.
        in_channels: the inputs' channels.
        out_shape: the shape of one output, e.g. ``(3,)`` for three coefficients, ``(10,)`` for
            the logits of 10 classes, ``()`` for one number.
        hidden_channels: channels of every convolution.
        depth: strided convolutions, each halving the grid (down to one point).
        kernel_size: of every convolution.
        head_width: width of the dense head's hidden layers.
        head_depth: hidden layers of the dense head.
        pool: ``"mean"`` (the mean over the remaining points: any grid) or ``"flatten"`` (every
            remaining point's features: the grid ``grid``).
        grid: the inputs' spatial shape (needed by ``pool="flatten"``; seed-sweep passes it).
        activation: after every convolution and hidden layer.
        boundary_mode: how convolutions pad the grid (``"periodic"``, ``"dirichlet"``, ``"neumann"``).
        key: initialisation key.

    ```python
    net = ConvEncoder(1, 1, (2,), key=jax.random.key(0))
    net(jnp.zeros((1, 32))).shape     # (2,)
    ```
    """

    lifting: pdeqx.conv.PhysicsConv
    down: tuple[pdeqx.blocks.LinearConvDownBlock, ...]
    head: eqx.nn.MLP
    out_shape: tuple[int, ...] = eqx.field(static=True)
    activation: Callable = eqx.field(static=True)
    pool: str = eqx.field(static=True)

    def __init__(
        self,
        num_spatial_dims: int,
        in_channels: int,
        out_shape: tuple[int, ...],
        *,
        hidden_channels: int = 16,
        depth: int = 3,
        kernel_size: int = 3,
        head_width: int = 32,
        head_depth: int = 1,
        pool: Literal["mean", "flatten"] = "mean",
        grid: tuple[int, ...] | None = None,
        activation: Callable = jax.nn.relu,
        boundary_mode: Literal["periodic", "dirichlet", "neumann"] = "periodic",
        key: PRNGKeyArray,
    ):
        k_lift, k_head, *k_down = jax.random.split(key, depth + 2)
        self.lifting = pdeqx.conv.PhysicsConv(
            num_spatial_dims, in_channels, hidden_channels, kernel_size, boundary_mode=boundary_mode, key=k_lift
        )
        self.down = tuple(
            pdeqx.blocks.LinearConvDownBlock(
                num_spatial_dims,
                hidden_channels,
                hidden_channels,
                kernel_size=kernel_size,
                boundary_mode=boundary_mode,
                key=k,
            )
            for k in k_down
        )
        self.out_shape, self.activation, self.pool = tuple(out_shape), activation, pool
        features = hidden_channels
        if pool == "flatten":
            if grid is None:
                raise ValueError('ConvEncoder(pool="flatten") needs the inputs\' grid (grid=...)')
            sample = jax.ShapeDtypeStruct((in_channels, *grid), jnp.float32)
            lifting, down = self.lifting, self.down
            features = math.prod(jax.eval_shape(lambda x: _encode(lifting, down, activation, x), sample).shape)
        self.head = eqx.nn.MLP(
            features, math.prod(self.out_shape), head_width, head_depth, activation=activation, key=k_head
        )

    def __call__(self, x: Float[Array, "c ..."]) -> Float[Array, "..."]:
        h = _encode(self.lifting, self.down, self.activation, x)
        pooled = h.ravel() if self.pool == "flatten" else jnp.mean(h.reshape(h.shape[0], -1), axis=1)
        return self.head(pooled).reshape(self.out_shape)


def _encode(lifting: Callable, down: tuple, activation: Callable, x: Float[Array, "c ..."]) -> Float[Array, "h ..."]:
    """The convolutional features of one input: lifted, then halved ``len(down)`` times."""
    h = activation(lifting(x))
    for block in down:
        h = activation(block(h))
    return h
