"""The arrays a sweep trains on, validated once."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from jaxtyping import Float

from .._errors import SpecError


class Dataset(NamedTuple):
    """Inputs and targets, ``(samples, channels, *spatial)`` each, float32."""

    train_x: Float[np.ndarray, "n c *s"]
    train_y: Float[np.ndarray, "n o *s"]
    test_x: Float[np.ndarray, "m c *s"]
    test_y: Float[np.ndarray, "m o *s"]

    @property
    def sample_shape(self) -> tuple[int, ...]:
        return tuple(self.train_x.shape[1:])

    @property
    def out_channels(self) -> int:
        return int(self.train_y.shape[1])

    @property
    def num_train(self) -> int:
        return int(self.train_x.shape[0])


def as_dataset(arrays, source: str) -> Dataset:
    """Validate four arrays (train_x, train_y, test_x, test_y); errors name ``source``."""
    try:
        train_x, train_y, test_x, test_y = arrays
    except (TypeError, ValueError):
        raise SpecError(f"{source}: expected four arrays (train_x, train_y, test_x, test_y)") from None
    out = []
    for field, a in zip(Dataset._fields, (train_x, train_y, test_x, test_y)):
        a = np.asarray(a)
        if a.ndim < 2:
            raise SpecError(f"{source}: `{field}` has shape {a.shape}; need (samples, channels, *spatial)")
        if not np.issubdtype(a.dtype, np.number):
            raise SpecError(f"{source}: `{field}` has dtype {a.dtype}; need numbers")
        out.append(a.astype(np.float32))
    data = Dataset(*out)
    if data.train_x.shape[0] != data.train_y.shape[0] or data.test_x.shape[0] != data.test_y.shape[0]:
        raise SpecError(
            f"{source}: inputs and targets have different sample counts "
            f"(train {data.train_x.shape[0]} vs {data.train_y.shape[0]}, test {data.test_x.shape[0]} vs {data.test_y.shape[0]})"
        )
    if data.train_x.shape[1:] != data.test_x.shape[1:] or data.train_y.shape[1:] != data.test_y.shape[1:]:
        raise SpecError(
            f"{source}: train and test shapes differ (x {data.train_x.shape[1:]} vs {data.test_x.shape[1:]}, "
            f"y {data.train_y.shape[1:]} vs {data.test_y.shape[1:]})"
        )
    if data.train_x.shape[2:] != data.train_y.shape[2:]:
        raise SpecError(f"{source}: inputs {data.train_x.shape[1:]} and targets {data.train_y.shape[1:]} differ in spatial shape")
    if data.train_x.shape[0] == 0 or data.test_x.shape[0] == 0:
        raise SpecError(f"{source}: needs at least one training and one test sample")
    return data
