"""The field metrics of the PDE benchmarks, per sample ``(channels, *spatial)``: The Well's
VRMSE, the Pearson correlation over a rollout (the "valid rollout time" it gives), APEBench's
own nRMSE and correlation, and Fourier-space errors binned by PDEBench's wavenumber bands.
Built-ins by name in :data:`sweep.metrics.BUILTINS`.

```python
import jax.numpy as jnp
vrmse(jnp.zeros((1, 8, 8)), jnp.ones((1, 8, 8)))         # large: a constant target has no variance
correlation(jnp.arange(8.0)[None], 2 * jnp.arange(8.0)[None])   # 1.0
```
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Float

VRMSE_EPS = 1e-7  # The Well's: sqrt(mse / (var + eps))
# PDEBench's fRMSE bands, first and last radial wavenumber: its bins [:iLow], [iLow:iHigh], [iHigh:]
# with iLow=4, iHigh=12 (pdebench/models/metrics.py, metric_func)
BANDS = {"low": (0, 3), "mid": (4, 11), "high": (12, None)}


def _check(name: str, pred: Array, target: Array) -> None:
    if pred.shape != target.shape or pred.ndim < 2:
        raise ValueError(
            f"{name} needs a prediction and a target of one shape (channels, *spatial); got {pred.shape} and "
            f"{target.shape}"
        )


def _spatial(x: Array) -> tuple[int, ...]:
    return tuple(range(1, x.ndim))


def vrmse(pred: Float[Array, "c *s"], target: Float[Array, "c *s"]) -> Float[Array, ""]:
    """The Well's variance-scaled RMSE: per channel ``sqrt(mean((pred - target)**2) /
    (mean((target - mean(target))**2) + 1e-7))`` over the points, averaged over the channels.
    1.0 is the error of predicting the target's mean; lower is better."""
    _check("vrmse", pred, target)
    axes = _spatial(target)
    mse = jnp.mean(jnp.square(pred - target), axis=axes)
    var = jnp.mean(jnp.square(target - jnp.mean(target, axis=axes, keepdims=True)), axis=axes)
    return jnp.mean(jnp.sqrt(mse / (var + VRMSE_EPS)))


def correlation(pred: Float[Array, "c *s"], target: Float[Array, "c *s"]) -> Float[Array, ""]:
    """Pearson correlation of prediction and target over the points (each centred on its mean), per
    channel, averaged over the channels (APEBench's, :func:`apebench_correlation`, is not centred:
    the two agree for fields of mean zero). 1.0 is perfect; higher is better (a constant field has
    no correlation: NaN)."""
    _check("correlation", pred, target)
    axes = _spatial(target)
    p = pred - jnp.mean(pred, axis=axes, keepdims=True)
    t = target - jnp.mean(target, axis=axes, keepdims=True)
    cov = jnp.sum(p * t, axis=axes)
    return jnp.mean(cov / jnp.sqrt(jnp.sum(jnp.square(p), axis=axes) * jnp.sum(jnp.square(t), axis=axes)))


def apebench_nrmse(pred: Float[Array, "c *s"], target: Float[Array, "c *s"]) -> Float[Array, ""]:
    """APEBench's nRMSE of one sample (``exponax.metrics.nRMSE``; its ``mean_nRMSE`` is the mean over
    samples): per channel ``norm(pred - target) / norm(target)`` over the points, summed over the
    channels. With one channel it equals ``nrmse``; lower is better."""
    _check("apebench_nrmse", pred, target)
    axes = _spatial(target)
    return jnp.sum(jnp.sqrt(jnp.sum(jnp.square(pred - target), axis=axes) / jnp.sum(jnp.square(target), axis=axes)))


def apebench_correlation(pred: Float[Array, "c *s"], target: Float[Array, "c *s"]) -> Float[Array, ""]:
    """APEBench's correlation of one sample (``exponax.metrics.correlation``; its
    ``mean_correlation`` is the mean over samples): per channel ``sum(pred * target) /
    (norm(pred) * norm(target))`` over the points, not centred on the means, averaged over the
    channels. Equal to ``correlation`` (Pearson's) for fields of mean zero; higher is better."""
    _check("apebench_correlation", pred, target)
    axes = _spatial(target)
    dot = jnp.sum(pred * target, axis=axes)
    return jnp.mean(dot / jnp.sqrt(jnp.sum(jnp.square(pred), axis=axes) * jnp.sum(jnp.square(target), axis=axes)))


def _wavenumbers(shape: tuple[int, ...]) -> Array:
    """The radial integer wavenumber ``floor(|k|)`` of every Fourier coefficient of a grid."""
    ks = jnp.meshgrid(*[jnp.fft.fftfreq(n, 1.0 / n) for n in shape], indexing="ij")
    return jnp.floor(jnp.sqrt(sum(jnp.square(k) for k in ks)))


def spectral_error(band: str):
    """The RMS difference of the Fourier coefficients (``fftn`` over the spatial axes,
    ``norm="forward"``: each the mean amplitude of its mode) of prediction and target whose radial
    wavenumber ``floor(|k|)`` lies in ``band`` of :data:`BANDS` (PDEBench's: low 0-3, mid 4-11,
    high 12 and up), over the channels and those coefficients. A grid without such modes gives 0."""
    low, high = BANDS[band]

    def fn(pred: Float[Array, "c *s"], target: Float[Array, "c *s"]) -> Float[Array, ""]:
        _check(f"spectral_{band}", pred, target)
        axes = _spatial(target)
        diff = jnp.fft.fftn(pred - target, axes=axes, norm="forward")
        k = _wavenumbers(target.shape[1:])
        inside = (k >= low) & (k <= (jnp.inf if high is None else high))
        count = jnp.maximum(1, jnp.sum(inside) * target.shape[0])
        return jnp.sqrt(jnp.sum(jnp.where(inside, jnp.square(jnp.abs(diff)), 0.0)) / count)

    fn.__name__ = f"spectral_{band}"
    return fn
