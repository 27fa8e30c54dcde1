"""Fast batched forward for 1D pdequinox conv architectures.

XLA:CPU runs convolutions inside ``lax.scan``/``while`` bodies through a slow generic
loop (jax#12868), and ``jax.vmap`` over per-member weights turns convs into grouped
convs. Here every 1D convolution is instead expressed as im2col (concatenated shifted
slices, channels-last) followed by one matmul. Parameters are read straight from the
pdequinox module, so gradients flow to the very same pytree leaves.

Supported (1D only): ``pdequinox.arch.ConvNet``, ``ClassicResNet``, ``DilatedResNet``
(any ``Sequential`` made of the blocks below), ``ClassicResBlock``, ``DilatedResBlock``,
``PhysicsConv``/``MorePaddingConv``, ``eqx.nn.Conv`` (incl. ``PointwiseLinearConv``),
``eqx.nn.GroupNorm`` and ``eqx.nn.Identity``. Anything else falls back to ``jax.vmap``.
"""

from __future__ import annotations

import functools as ft
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array
from pdequinox._sequential import Sequential
from pdequinox.arch import ConvNet
from pdequinox.blocks import ClassicResBlock, DilatedResBlock
from pdequinox.conv._conv import MorePaddingConv

__all__ = ["batched_forward"]

# padding_mode (pdequinox lower-case / equinox upper-case) -> jnp.pad mode
_PAD_MODES = {
    "zeros": "constant",
    "circular": "wrap",
    "reflect": "reflect",
    "replicate": "edge",
}


def _elementwise_fns() -> tuple[Callable, ...]:
    names = (
        "relu", "relu6", "gelu", "silu", "swish", "sigmoid", "tanh", "elu", "selu",
        "celu", "leaky_relu", "softplus", "soft_sign", "hard_tanh", "mish",
        "log_sigmoid", "hard_sigmoid", "hard_silu", "hard_swish", "squareplus",
        "sparse_plus", "identity",
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


def _activate(fn: Callable, x: Array) -> Array:
    """Apply ``fn`` to channels-last ``x`` exactly as the per-sample model would."""
    if _is_elementwise(fn):
        return fn(x)
    # Unknown callable: call it on per-sample channels-first views, like the model.
    return jnp.swapaxes(jax.vmap(fn)(jnp.swapaxes(x, 1, 2)), 1, 2)


def _same_call(m: Any, cls: type) -> bool:
    return isinstance(m, cls) and type(m).__call__ is cls.__call__


def _kind(m: Any) -> str | None:
    """Classify a module by the forward it runs (None = unsupported)."""
    if _same_call(m, MorePaddingConv) or _same_call(m, eqx.nn.Conv):
        ok = (
            m.num_spatial_dims == 1
            and m.groups == 1
            and m.padding_mode.lower() in _PAD_MODES
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


def _supported(m: Any) -> bool:
    kind = _kind(m)
    if kind is None:
        return False
    if kind == "convnet" and len(m.layers) == 0:
        return False
    return all(_supported(c) for c in _children(m, kind))


def _conv(m: Any, x: Array) -> Array:
    """1D conv of channels-last ``x`` (B, N, C) via im2col + matmul."""
    weight = m.weight  # (O, C, K)
    out_ch, in_ch, k = weight.shape
    (s,), (d,) = m.stride, m.dilation
    span = d * (k - 1) + 1
    padding = m.padding
    if isinstance(padding, str):
        padding = lax.padtype_to_pads((x.shape[1],), (span,), (s,), padding)
    ((lo, hi),) = padding
    if lo or hi:
        x = jnp.pad(x, ((0, 0), (lo, hi), (0, 0)), mode=_PAD_MODES[m.padding_mode.lower()])
    b, n_out = x.shape[0], (x.shape[1] - span) // s + 1
    cols = [x[:, i * d : i * d + (n_out - 1) * s + 1 : s, :] for i in range(k)]
    patches = cols[0] if k == 1 else jnp.concatenate(cols, axis=-1)  # (B, N', K*C)
    # A 2D (B*N', K*C) x (O, K*C)^T matmul is markedly faster on XLA:CPU (fwd and bwd)
    # than a 3D dot_general with the weight pre-transposed to (K*C, O).
    w = jnp.transpose(weight, (0, 2, 1)).reshape(out_ch, k * in_ch)
    y = lax.dot_general(patches.reshape(b * n_out, k * in_ch), w, (((1,), (1,)), ((), ())))
    if m.use_bias:
        y = y + m.bias.reshape(out_ch)
    return y.reshape(b, n_out, out_ch)


def _group_norm(m: eqx.nn.GroupNorm, x: Array) -> Array:
    b, n, c = x.shape
    orig_dtype = x.dtype
    dtype = jnp.result_type(x.dtype, jnp.float32)
    y = x.astype(dtype).reshape(b, n, m.groups, c // m.groups)
    mean = jnp.mean(y, axis=(1, 3), keepdims=True)
    var = jnp.maximum(0.0, jnp.var(y, axis=(1, 3), keepdims=True))
    out = ((y - mean) * lax.rsqrt(var + m.eps)).reshape(b, n, c)
    if m.channelwise_affine:
        out = m.weight.astype(dtype) * out + m.bias.astype(dtype)
    return out.astype(orig_dtype)


def _apply(m: Any, x: Array) -> Array:
    """Channels-last forward of a supported module on a batch ``x`` (B, N, C)."""
    kind = _kind(m)
    if kind == "conv":
        return _conv(m, x)
    if kind == "identity":
        return x
    if kind == "groupnorm":
        return _group_norm(m, x)
    if kind == "convnet":
        for layer in m.layers[:-1]:
            x = _activate(m.activation, _apply(layer, x))
        return _activate(m.final_activation, _apply(m.layers[-1], x))
    if kind == "sequential":
        x = _apply(m.lifting, x)
        for block in m.blocks:
            x = _apply(block, x)
        return _apply(m.projection, x)
    if kind == "classic_res":
        h = _activate(m.activation, _apply(m.norm_1, _apply(m.conv_1, x)))
        h = _apply(m.norm_2, _apply(m.conv_2, h))
        return _activate(m.activation, h + _apply(m.bypass_norm, _apply(m.bypass_conv, x)))
    if kind == "dilated_res":
        h = x
        for norm, conv in zip(m.norm_layers, m.conv_layers):
            h = _activate(m.activation, _apply(conv, _apply(norm, h)))
        return h + _apply(m.bypass_conv, _apply(m.bypass_norm, x))
    raise TypeError(f"unsupported module for the fast path: {type(m).__name__}")


def _vmap_forward(m: eqx.Module, xb: Array) -> Array:
    return jax.vmap(m)(xb)


def _fast_forward(m: eqx.Module, xb: Array) -> Array:
    if xb.ndim != 3:  # not (batch, channels, N): let the model raise/handle it
        return jax.vmap(m)(xb)
    y = _apply(m, jnp.swapaxes(xb, 1, 2))
    return jnp.swapaxes(y, 1, 2)


def batched_forward(model: eqx.Module) -> Callable[[eqx.Module, Array], Array]:
    """Return f(model, xb) computing jax.vmap(model)(xb) for xb of shape (batch, channels, *spatial).
    Uses a fast im2col/matmul path when every layer of `model` is supported, else falls back to
    `lambda m, xb: jax.vmap(m)(xb)`. The decision is made from the model's structure (static), once."""
    return _fast_forward if _supported(model) else _vmap_forward
