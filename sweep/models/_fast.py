"""Fast batched forward for pdequinox conv architectures in 1, 2 and 3 spatial dimensions.

XLA:CPU runs convolutions inside ``lax.scan``/``while`` bodies through a slow generic
loop (jax#12868), and ``jax.vmap`` over per-member weights turns convs into grouped
convs. Here every convolution is instead expressed as a matmul (``_conv_matmul``): im2col
(channels-last, concatenated shifted slices, then one matmul; fastest to train) or "shifted"
(channels-first, one matmul with all taps' weights over every point, then shifted outputs
summed; fastest for inference). Parameters are read straight from the pdequinox module, so
gradients flow to the very same pytree leaves.

Supported: ``pdequinox.arch.ConvNet``, ``ClassicResNet``, ``DilatedResNet``
(any ``Sequential`` made of the blocks below), ``ClassicResBlock``, ``DilatedResBlock``,
``PhysicsConv``/``MorePaddingConv``, ``eqx.nn.Conv`` (incl. ``PointwiseLinearConv``),
``eqx.nn.GroupNorm`` and ``eqx.nn.Identity``, all convolutions of one number of spatial
dimensions. Anything else falls back to ``jax.vmap``, and so do 2D and 3D states where
``lax.conv`` is the faster (see :func:`_matmul_wins`).
"""

from __future__ import annotations

import functools as ft
import math
from collections.abc import Callable
from typing import Any, cast

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array
from pdequinox._sequential import Sequential
from pdequinox.arch import ConvNet
from pdequinox.blocks import ClassicResBlock, DilatedResBlock
from pdequinox.conv._conv import MorePaddingConv

from ._conv_matmul import PAD_MODES, conv_im2col, conv_shifted

__all__ = ["batched_forward"]

_DIMS = (1, 2, 3)  # the convolutions' numbers of spatial dimensions the matmul path handles
# 2D and 3D on CPU: the largest states (points) up to which the matmul forms were measured to be
# faster than lax.conv (im2col to train, shifted to predict; docs/trainer-variants.md)
_MATMUL_POINTS = {2: 96 * 96, 3: 16 * 16 * 16}


def _elementwise_fns() -> tuple[Callable, ...]:
    names = (
        "relu",
        "relu6",
        "gelu",
        "silu",
        "swish",
        "sigmoid",
        "tanh",
        "elu",
        "selu",
        "celu",
        "leaky_relu",
        "softplus",
        "soft_sign",
        "hard_tanh",
        "mish",
        "log_sigmoid",
        "hard_sigmoid",
        "hard_silu",
        "hard_swish",
        "squareplus",
        "sparse_plus",
        "identity",
    )
    fns = [getattr(jax.nn, n) for n in names if hasattr(jax.nn, n)]
    fns += [jnp.tanh, jnp.sin, jnp.cos, jnp.abs, jnp.exp, jnp.square, lax.tanh]
    try:  # the default ``final_activation`` of ConvNet
        from pdequinox.arch._conv_net import _identity

        fns.append(_identity)
    except ImportError:  # pragma: no cover
        pass
    return tuple(fns)


_ELEMENTWISE = _elementwise_fns()


def _is_elementwise(fn: Any) -> bool:
    """Whether ``fn`` is known to act elementwise (so layout does not matter)."""
    if isinstance(fn, ft.partial) and not fn.args:
        fn = fn.func
    return isinstance(fn, eqx.nn.Identity) or any(fn is f for f in _ELEMENTWISE)


def _activate(fn: Callable, x: Array, channels_first: bool) -> Array:
    """Apply ``fn`` to ``x`` (B, *spatial, C), or (C, B, *spatial) if ``channels_first``, exactly
    as the per-sample model would."""
    if _is_elementwise(fn):
        return fn(x)
    # Unknown callable: call it on per-sample (C, *spatial) views, like the model.
    if channels_first:
        return jax.vmap(fn, in_axes=1, out_axes=1)(x)
    return jnp.moveaxis(jax.vmap(fn)(jnp.moveaxis(x, -1, 1)), 1, -1)


def _same_call(m: Any, cls: type) -> bool:
    return isinstance(m, cls) and type(m).__call__ is cls.__call__


def _kind(m: Any) -> str | None:
    """Classify a module by the forward it runs (None = unsupported)."""
    if _same_call(m, MorePaddingConv) or _same_call(m, eqx.nn.Conv):
        ok = (
            m.num_spatial_dims in _DIMS
            and m.groups == 1
            and m.padding_mode.lower() in PAD_MODES
            and (isinstance(m.padding, (str, tuple)))
        )
        return "conv" if ok else None
    if _same_call(m, eqx.nn.Identity):
        return "identity"
    if _same_call(m, eqx.nn.GroupNorm):
        return "groupnorm"
    for name, cls in (
        ("convnet", ConvNet),
        ("sequential", Sequential),
        ("classic_res", ClassicResBlock),
        ("dilated_res", DilatedResBlock),
    ):
        if _same_call(m, cls):
            return name
    return None


def _children(m: Any, kind: str) -> tuple[Any, ...]:
    if kind == "convnet":
        return tuple(m.layers)
    if kind == "sequential":
        return (m.lifting, *m.blocks, m.projection)
    if kind == "classic_res":
        return (m.conv_1, m.norm_1, m.conv_2, m.norm_2, m.bypass_conv, m.bypass_norm)
    if kind == "dilated_res":
        return (*m.norm_layers, *m.conv_layers, m.bypass_conv, m.bypass_norm)
    return ()


def _conv_dims(m: Any) -> set[int] | None:
    """The numbers of spatial dimensions of the convolutions in ``m``, or None if a part of it
    is not supported."""
    kind = _kind(m)
    if kind is None or (kind == "convnet" and len(m.layers) == 0):
        return None
    dims = {m.num_spatial_dims} if kind == "conv" else set()
    for child in _children(m, kind):
        inner = _conv_dims(child)
        if inner is None:
            return None
        dims |= inner
    return dims


def _group_norm(m: eqx.nn.GroupNorm, x: Array, channels_first: bool) -> Array:
    """``m`` on ``x`` (B, *spatial, C), or (C, B, *spatial) if ``channels_first``."""
    orig_dtype = x.dtype
    dtype = jnp.result_type(x.dtype, jnp.float32)
    dims = x.ndim - 2
    if channels_first:
        c, b, *spatial = x.shape
        y = x.astype(dtype).reshape(m.groups, c // m.groups, b, *spatial)
        axes = (1, *range(3, 3 + dims))  # a group's channels and the points
        affine = (c, *(1,) * (1 + dims))
    else:
        *lead, c = x.shape
        y = x.astype(dtype).reshape(*lead, m.groups, c // m.groups)
        axes = (*range(1, 1 + dims), 2 + dims)
        affine = (c,)
    mean = jnp.mean(y, axis=axes, keepdims=True)
    var = jnp.maximum(0.0, jnp.var(y, axis=axes, keepdims=True))
    out = ((y - mean) * lax.rsqrt(var + m.eps)).reshape(x.shape)
    if m.channelwise_affine:
        assert m.weight is not None and m.bias is not None  # GroupNorm keeps both when channelwise_affine
        out = m.weight.astype(dtype).reshape(affine) * out + m.bias.astype(dtype).reshape(affine)
    return out.astype(orig_dtype)


def _apply(m: Any, x: Array, channels_first: bool) -> Array:
    """Forward of a supported module on a batch ``x``: channels-last (B, *spatial, C) with im2col
    convolutions, or channels-first (C, B, *spatial) with shifted-matmul convolutions."""
    kind = _kind(m)
    apply = ft.partial(_apply, channels_first=channels_first)
    activate = ft.partial(_activate, channels_first=channels_first)
    if kind == "conv":
        return conv_shifted(m, x) if channels_first else conv_im2col(m, x)
    if kind == "identity":
        return x
    if kind == "groupnorm":
        return _group_norm(m, x, channels_first)
    if kind == "convnet":
        for layer in m.layers[:-1]:
            x = activate(m.activation, apply(layer, x))
        return activate(m.final_activation, apply(m.layers[-1], x))
    if kind == "sequential":
        x = apply(m.lifting, x)
        for block in m.blocks:
            x = apply(block, x)
        return apply(m.projection, x)
    if kind == "classic_res":
        h = activate(m.activation, apply(m.norm_1, apply(m.conv_1, x)))
        h = apply(m.norm_2, apply(m.conv_2, h))
        return activate(m.activation, h + apply(m.bypass_norm, apply(m.bypass_conv, x)))
    if kind == "dilated_res":
        h = x
        for norm, layer in zip(m.norm_layers, m.conv_layers):
            h = activate(m.activation, apply(layer, apply(norm, h)))
        return h + apply(m.bypass_conv, apply(m.bypass_norm, x))
    raise TypeError(f"unsupported module for the fast path: {type(m).__name__}")


def _vmap_forward(m: eqx.Module, xb: Array) -> Array:
    return jax.vmap(cast(Callable[[Array], Array], m))(xb)  # the models are callable modules


def _matmul_wins(spatial: tuple[int, ...]) -> bool:
    """Whether the matmul forms are the faster forwards, on the default backend, for states
    of ``spatial`` points (as measured: docs/trainer-variants.md). In 1D they are, everywhere; in 2D
    and 3D on CPU up to the largest states measured; elsewhere (GPUs: not measured) ``lax.conv``."""
    if len(spatial) == 1:
        return True
    limit = _MATMUL_POINTS.get(len(spatial), 0)
    return jax.default_backend() == "cpu" and math.prod(spatial) <= limit


def _fast_forward(m: eqx.Module, xb: Array, conv: str = "im2col") -> Array:
    """The matmul path on ``xb`` (batch, channels, *spatial)."""
    if conv == "shifted":
        return jnp.swapaxes(_apply(m, jnp.swapaxes(xb, 0, 1), channels_first=True), 0, 1)
    return jnp.moveaxis(_apply(m, jnp.moveaxis(xb, 1, -1), channels_first=False), -1, 1)


def _chosen_forward(m: eqx.Module, xb: Array, conv: str, dims: int, matmul: bool | None) -> Array:
    if xb.ndim != dims + 2 or matmul is None and not _matmul_wins(xb.shape[2:]):
        # not (batch, channels, *spatial) (let the model raise), or lax.conv is faster here
        return _vmap_forward(m, xb)
    return _fast_forward(m, xb, conv)


_CONVS = ("im2col", "shifted")


def batched_forward(
    model: eqx.Module, conv: str = "im2col", matmul: bool | None = None
) -> Callable[[eqx.Module, Array], Array]:
    """Return f(model, xb) computing jax.vmap(model)(xb) for xb of shape (batch, channels, *spatial).

    Uses a fast matmul path when every layer of `model` is supported, else falls back to
    `lambda m, xb: jax.vmap(m)(xb)`. The decision is made from the model's structure (static), once,
    and from the backend and the states' size (static) when `f` is traced: in 2D and 3D the matmul
    path runs only where it was measured to be faster than `lax.conv` (docs/trainer-variants.md).
    ``conv`` picks how a convolution becomes a matmul: ``"im2col"`` (channels-last patches, one
    matmul per layer: fastest to train on XLA:CPU) or ``"shifted"`` (channels-first, all taps in
    one matmul over every point, shifted outputs summed: fastest forward alone on XLA:CPU in 1D,
    for inference; slower to train). ``matmul`` overrides the choice: ``True`` takes the matmul
    path at every size and backend (a `ValueError` if a layer of `model` has none), ``False``
    never takes it (``jax.vmap(model)``), ``None`` (default) takes it where it was measured faster.

    Examples:
        ```python
        import jax
        import numpy as np
        import pdequinox as pdeq

        from sweep.models import batched_forward

        net = pdeq.arch.ConvNet(1, 1, 1, hidden_channels=4, depth=1, key=jax.random.key(0))
        xb = jax.random.normal(jax.random.key(1), (8, 1, 32))  # (batch, channels, points)
        forward = batched_forward(net, matmul=True)
        np.testing.assert_allclose(forward(net, xb), jax.vmap(net)(xb), rtol=1e-5, atol=1e-6)
        ```
    """
    if conv not in _CONVS:
        raise ValueError(f"`conv`: got {conv!r}; expected one of {list(_CONVS)}")
    if matmul is not None and not isinstance(matmul, bool):
        raise ValueError(f"`matmul`: got {matmul!r}; expected True, False or None")
    dims = _conv_dims(model) if matmul is not False else None
    if matmul and (dims is None or len(dims) != 1):
        raise ValueError(
            f"`matmul=True`: {type(model).__name__} has a layer without a matmul form (supported: eqx.nn.Conv and "
            "pdequinox's padded convolutions of one number of spatial dimensions, GroupNorm, Identity, ConvNet, "
            "Sequential, ClassicResBlock, DilatedResBlock); pass matmul=None to fall back to jax.vmap(model)"
        )
    if dims is None or len(dims) != 1:
        return _vmap_forward
    return ft.partial(_chosen_forward, conv=conv, dims=dims.pop(), matmul=matmul)
