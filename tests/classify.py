"""A small synthetic classification problem and metrics, found by import path ("classify:...")."""

import jax.numpy as jnp
import numpy as np


def three_levels(num_samples: int = 200, num_points: int = 8, data_seed: int = 0):
    """Each point of a random signal labelled 0, 1 or 2 by its level (below -0.5, between, above 0.5):
    inputs [n, 1, points], integer targets [n, 1, points]; a mapping with train and test splits."""
    rng = np.random.default_rng(data_seed)
    x = rng.normal(size=(num_samples, 1, num_points)).astype(np.float32)
    y = (x > -0.5).astype(np.float32) + (x > 0.5)
    cut = num_samples * 4 // 5
    return {"train": (x[:cut], y[:cut]), "test": (x[cut:], y[cut:])}


def accuracy(pred, target):
    """Fraction of points whose largest logit is the target class (one sample)."""
    return jnp.mean(jnp.argmax(pred, axis=0) == target[0])


def per_point_error(pred, target):
    """Not a metric: one value per point instead of one per sample."""
    return jnp.abs(pred - target)


def needs_three_args(pred, target, weight):
    return jnp.mean(pred - target) * weight


def sample_levels(num_samples: int = 240, num_points: int = 8, data_seed: int = 0):
    """One label per sample, ``[n]`` integers 0, 1 or 2: the level of a random signal's mean
    (below -0.3, between, above 0.3); inputs [n, 1, points] (the signal plus noise)."""
    rng = np.random.default_rng(data_seed)
    level = rng.integers(0, 3, num_samples)
    x = ((level[:, None, None] - 1) * 0.6 + rng.normal(scale=0.5, size=(num_samples, 1, num_points))).astype(np.float32)
    cut = num_samples * 4 // 5
    return {"train": (x[:cut], level[:cut]), "test": (x[cut:], level[cut:])}
