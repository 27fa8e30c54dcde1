"""A convolution as a matmul, in 1, 2 or 3 spatial dimensions, for the fast batched forward.

Two forms of the same convolution of an ``eqx.nn.Conv``-like module ``m`` (``weight`` of shape
``(out, in, *kernel)``, ``bias``, ``stride``, ``dilation``, ``padding``, ``padding_mode``),
reading its parameters straight from ``m`` so that gradients reach the module's own leaves:

- :func:`conv_im2col`: channels-last ``x`` ``(B, *spatial, C)``; the padded input's shifted
  slices, one per kernel tap, side by side (im2col), then one matmul. Fastest to train on XLA:CPU.
- :func:`conv_shifted`: channels-first ``x`` ``(C, B, *spatial)``; one matmul of every tap's
  weights with every point, then the shifted outputs summed. Fastest forward alone on XLA:CPU.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import jax.numpy as jnp
from jax import lax
from jaxtyping import Array

__all__ = ["PAD_MODES", "conv_im2col", "conv_shifted"]

# padding_mode (pdequinox lower-case / equinox upper-case) -> jnp.pad mode
PAD_MODES = {
    "zeros": "constant",
    "circular": "wrap",
    "reflect": "reflect",
    "replicate": "edge",
}


def _geometry(m: Any, spatial: tuple[int, ...]) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """``(pads, spans, out)`` of ``m`` over ``spatial`` points: per axis the ``(low, high)``
    padding, the dilated kernel's span and the number of output points."""
    kernel = m.weight.shape[2:]
    spans = [d * (k - 1) + 1 for k, d in zip(kernel, m.dilation)]
    padding = m.padding
    if isinstance(padding, str):
        padding = lax.padtype_to_pads(spatial, spans, m.stride, padding)
    pads = [(lo, hi) for lo, hi in padding]
    out = [(n + lo + hi - span) // s + 1 for n, (lo, hi), span, s in zip(spatial, pads, spans, m.stride)]
    return pads, spans, out


def _taps(m: Any) -> list[tuple[int, ...]]:
    """The kernel's taps, in the order of its flattened spatial axes."""
    return list(itertools.product(*(range(k) for k in m.weight.shape[2:])))


def _window(tap: tuple[int, ...], m: Any, out: list[int]) -> tuple[slice, ...]:
    """Per spatial axis, the points of the padded input that ``tap`` multiplies."""
    return tuple(slice(i * d, i * d + (n - 1) * s + 1, s) for i, d, s, n in zip(tap, m.dilation, m.stride, out))


def conv_im2col(m: Any, x: Array) -> Array:
    """``m`` on channels-last ``x`` (B, *spatial, C): padded, shifted copies side by side (im2col),
    then one matmul."""
    weight = m.weight  # (O, C, *K)
    out_ch, in_ch = weight.shape[:2]
    taps = _taps(m)
    pads, _, out = _geometry(m, x.shape[1:-1])
    if any(lo or hi for lo, hi in pads):
        x = jnp.pad(x, ((0, 0), *pads, (0, 0)), mode=PAD_MODES[m.padding_mode.lower()])
    b, rows, width = x.shape[0], math.prod(out), len(taps) * in_ch
    cols = [x[(slice(None), *_window(tap, m, out), slice(None))] for tap in taps]
    patches = cols[0] if len(cols) == 1 else jnp.concatenate(cols, axis=-1)  # (B, *out, taps*C)
    # A 2D (B*N', K*C) x (O, K*C)^T matmul is markedly faster on XLA:CPU (fwd and bwd)
    # than a 3D dot_general with the weight pre-transposed to (K*C, O).
    w = jnp.moveaxis(weight, 1, -1).reshape(out_ch, width)
    y = lax.dot_general(patches.reshape(b * rows, width), w, (((1,), (1,)), ((), ())))
    if m.use_bias:
        y = y + m.bias.reshape(out_ch)
    return y.reshape(b, *out, out_ch)


def conv_shifted(m: Any, x: Array) -> Array:
    """``m`` on channels-first ``x`` (C, B, *spatial): one matmul of all taps' weights with every
    point, ``z = [W_0; ..; W_T-1] @ x`` of shape (T*O, B, *spatial), then ``y = sum_t z_t`` each
    shifted by its tap, over ``z`` padded like ``x`` (``z`` is pointwise in position, so padding
    it equals padding ``x`` first). The long side of the matmul and no im2col copy make it the
    fastest forward on XLA:CPU in 1D (for inference: it is slower to differentiate)."""
    weight = m.weight  # (O, C, *K)
    out_ch, in_ch = weight.shape[:2]
    taps = _taps(m)
    spatial = x.shape[2:]
    pads, _, out = _geometry(m, spatial)
    dims = len(spatial)
    w = jnp.transpose(weight, (*range(2, 2 + dims), 0, 1)).reshape(len(taps) * out_ch, in_ch)
    z = lax.dot_general(w, x, (((1,), (0,)), ((), ()))).reshape(len(taps), out_ch, *x.shape[1:])
    mode = PAD_MODES[m.padding_mode.lower()]
    y = None
    for t, tap in enumerate(taps):
        if mode == "constant" and all(s == 1 for s in m.stride):  # shift and zero fill in one op
            lows = [lo - i * d for (lo, _), i, d in zip(pads, tap, m.dilation)]
            config = [(low, o - n - low, 0) for low, o, n in zip(lows, out, spatial)]
            shifted = lax.pad(z[t], jnp.zeros((), z.dtype), ((0, 0, 0), (0, 0, 0), *config))
        else:
            padded = jnp.pad(z[t], ((0, 0), (0, 0), *pads), mode=mode) if any(lo or hi for lo, hi in pads) else z[t]
            shifted = padded[(slice(None), slice(None), *_window(tap, m, out))]
        y = shifted if y is None else y + shifted
    assert y is not None  # a kernel has at least one tap
    if m.use_bias:
        y = y + m.bias.reshape(out_ch, *(1,) * (1 + dims))
    return y
