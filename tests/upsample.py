"""A grid-changing problem and a 2x upsampling model, found by import path ("upsample:...")."""

import equinox as eqx
import jax
import numpy as np


def coarse_to_fine(num_coarse: int = 8, num_samples: int = 120, data_seed: int = 0):
    """Smooth random signals (two Fourier modes) sampled on ``num_coarse`` points in, the same
    signals on ``2 * num_coarse`` points out: ``[n, 1, coarse]`` -> ``[n, 1, 2 * coarse]``."""
    rng = np.random.default_rng(data_seed)
    a, b = rng.normal(size=(2, num_samples, 1))

    def signal(points):
        t = (np.arange(points) + 0.5) / points
        return (a * np.sin(2 * np.pi * t) + 0.5 * b * np.cos(4 * np.pi * t)).astype(np.float32)[:, None, :]

    x, y = signal(num_coarse), signal(2 * num_coarse)
    cut = num_samples * 4 // 5
    return {"train": (x[:cut], y[:cut]), "test": (x[cut:], y[cut:])}


class Upsample2x(eqx.Module):
    """A 1-D convolution to twice the channels, interleaved into a grid of twice the points."""

    conv: eqx.nn.Conv1d
    out: eqx.nn.Conv1d

    def __init__(self, channels: int = 1, hidden: int = 8, *, key):
        k1, k2 = jax.random.split(key)
        self.conv = eqx.nn.Conv1d(channels, 2 * hidden, 3, padding=1, key=k1)
        self.out = eqx.nn.Conv1d(hidden, channels, 3, padding=1, key=k2)

    def __call__(self, x):
        h = jax.nn.tanh(self.conv(x))  # [2 * hidden, n]
        fine = h.reshape(2, -1, x.shape[-1]).transpose(1, 2, 0).reshape(-1, 2 * x.shape[-1])  # [hidden, 2n]
        return self.out(fine)


def upsample2x(hidden: int = 8, *, key):
    """The factory a spec names: ``model = Model("upsample:upsample2x", hidden=8)``."""
    return Upsample2x(1, hidden, key=key)


def same_grid(*, key):
    """A model that keeps the grid: refused for the grid-changing problem."""
    return eqx.nn.Conv1d(1, 1, 3, padding=1, key=key)
