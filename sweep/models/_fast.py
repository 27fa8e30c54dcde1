"""Fast batched forward for 1D pdequinox conv architectures.

XLA:CPU runs convolutions inside ``lax.scan``/``while`` bodies through a slow generic
loop (jax#12868), and ``jax.vmap`` over per-member weights turns convs into grouped
convs. Here every 1D convolution is instead expressed as a matmul: im2col (channels-last,
concatenated shifted slices, then one matmul; fastest to train) or "shifted" (channels-first,
one matmul with all taps' weights over every point, then shifted outputs summed; fastest for
inference). Parameters are read straight from the pdequinox module, so gradients flow to the
very same pytree leaves.

Supported (1D only): ``pdequinox.arch.ConvNet``, ``ClassicResNet``, ``DilatedResNet``
(any ``Sequential`` made of the blocks below), ``ClassicResBlock``, ``DilatedResBlock``,
``PhysicsConv``/``MorePaddingConv``, ``eqx.nn.Conv`` (incl. ``PointwiseLinearConv``),
``eqx.nn.GroupNorm`` and ``eqx.nn.Identity``. Anything else falls back to ``jax.vmap``.
"""

from __future__ import annotations

import functools as ft
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
    """Apply ``fn`` to ``x`` (B, N, C), or (C, B, N) if ``channels_first``, exactly as the
    per-sample model would."""
    if _is_elementwise(fn):
        return fn(x)
    # Unknown callable: call it on per-sample (C, N) views, like the model.
    if channels_first:
        return jax.vmap(fn, in_axes=1, out_axes=1)(x)
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


def _pads(m: Any, n: int) -> tuple[int, int, int]:
    """``(low, high, span)`` of a 1D conv over ``n`` points."""
    k = m.weight.shape[-1]
    (s,), (d,) = m.stride, m.dilation
    span = d * (k - 1) + 1
    padding = m.padding
    if isinstance(padding, str):
        padding = lax.padtype_to_pads((n,), (span,), (s,), padding)
    ((lo, hi),) = padding
    return lo, hi, span


def _conv_im2col(m: Any, x: Array) -> Array:
    """1D conv of channels-last ``x`` (B, N, C): padded, shifted copies side by side (im2col),
    then one matmul."""
    weight = m.weight  # (O, C, K)
    out_ch, in_ch, k = weight.shape
    (s,), (d,) = m.stride, m.dilation
    lo, hi, span = _pads(m, x.shape[1])
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


def _conv_shifted(m: Any, x: Array) -> Array:
    """1D conv of channels-first ``x`` (C, B, N): one matmul of all K taps' weights with every
    point, ``z = [W_0; ..; W_K-1] @ x`` of shape (K*O, B*N), then ``y[:, j] = sum_i z_i[:, j*s + i*d]``
    over ``z`` padded like ``x`` (``z`` is pointwise in position, so padding it equals padding
    ``x`` first). The long B*N side of the matmul and no im2col copy make it the fastest
    forward on XLA:CPU (for inference: it is slower to differentiate)."""
    weight = m.weight  # (O, C, K)
    out_ch, in_ch, k = weight.shape
    (s,), (d,) = m.stride, m.dilation
    lo, hi, span = _pads(m, x.shape[-1])
    _, b, n = x.shape
    n_out = (n + lo + hi - span) // s + 1
    w = jnp.transpose(weight, (2, 0, 1)).reshape(k * out_ch, in_ch)
    z = lax.dot_general(w, x, (((1,), (0,)), ((), ()))).reshape(k, out_ch, b, n)
    mode = _PAD_MODES[m.padding_mode.lower()]
    y = None
    for i in range(k):
        if mode == "constant" and s == 1:  # shift with zero fill in one op (XLA fuses it with the sum)
            low = lo - i * d
            tap = lax.pad(z[i], jnp.zeros((), z.dtype), ((0, 0, 0), (0, 0, 0), (low, n_out - n - low, 0)))
        else:
            padded = jnp.pad(z[i], ((0, 0), (0, 0), (lo, hi)), mode=mode) if lo or hi else z[i]
            tap = padded[:, :, i * d : i * d + (n_out - 1) * s + 1 : s]
        y = tap if y is None else y + tap
    assert y is not None  # a kernel has at least one tap
    if m.use_bias:
        y = y + m.bias.reshape(out_ch, 1, 1)
    return y


def _group_norm(m: eqx.nn.GroupNorm, x: Array, channels_first: bool) -> Array:
    """``m`` on ``x`` (B, N, C), or (C, B, N) if ``channels_first``."""
    orig_dtype = x.dtype
    dtype = jnp.result_type(x.dtype, jnp.float32)
    if channels_first:
        c, b, n = x.shape
        y = x.astype(dtype).reshape(m.groups, c // m.groups, b, n)  # statistics over axes 1, 3
        affine = (c, 1, 1)
    else:
        b, n, c = x.shape
        y = x.astype(dtype).reshape(b, n, m.groups, c // m.groups)
        affine = (c,)
    mean = jnp.mean(y, axis=(1, 3), keepdims=True)
    var = jnp.maximum(0.0, jnp.var(y, axis=(1, 3), keepdims=True))
    out = ((y - mean) * lax.rsqrt(var + m.eps)).reshape(x.shape)
    if m.channelwise_affine:
        assert m.weight is not None and m.bias is not None  # GroupNorm keeps both when channelwise_affine
        out = m.weight.astype(dtype).reshape(affine) * out + m.bias.astype(dtype).reshape(affine)
    return out.astype(orig_dtype)


def _apply(m: Any, x: Array, channels_first: bool) -> Array:
    """Forward of a supported module on a batch ``x``: channels-last (B, N, C) with im2col
    convolutions, or channels-first (C, B, N) with shifted-matmul convolutions."""
    kind = _kind(m)
    apply = ft.partial(_apply, channels_first=channels_first)
    activate = ft.partial(_activate, channels_first=channels_first)
    if kind == "conv":
        return _conv_shifted(m, x) if channels_first else _conv_im2col(m, x)
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


def _fast_forward(m: eqx.Module, xb: Array, conv: str = "im2col") -> Array:
    if xb.ndim != 3:  # not (batch, channels, N): let the model raise/handle it
        return jax.vmap(cast(Callable[[Array], Array], m))(xb)
    if conv == "shifted":
        return jnp.swapaxes(_apply(m, jnp.swapaxes(xb, 0, 1), channels_first=True), 0, 1)
    return jnp.swapaxes(_apply(m, jnp.swapaxes(xb, 1, 2), channels_first=False), 1, 2)


_CONVS = ("im2col", "shifted")


def batched_forward(model: eqx.Module, conv: str = "im2col") -> Callable[[eqx.Module, Array], Array]:
    """Return f(model, xb) computing jax.vmap(model)(xb) for xb of shape (batch, channels, *spatial).

    Uses a fast matmul path when every layer of `model` is supported, else falls back to
    `lambda m, xb: jax.vmap(m)(xb)`. The decision is made from the model's structure (static), once.
    ``conv`` picks how a convolution becomes a matmul: ``"im2col"`` (channels-last patches, one
    matmul per layer: fastest to train on XLA:CPU) or ``"shifted"`` (channels-first, all taps in
    one matmul over every point, shifted outputs summed: fastest forward alone on XLA:CPU, for
    inference; slower to train).
    """
    if conv not in _CONVS:
        raise ValueError(f"`conv`: got {conv!r}; expected one of {list(_CONVS)}")
    if not _supported(model):
        return _vmap_forward
    return _fast_forward if conv == "im2col" else ft.partial(_fast_forward, conv=conv)
