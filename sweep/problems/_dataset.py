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


def checked_arrays(data: Dataset, source: str) -> Dataset:
    """Every array of ``data`` (each field, so arrays added to :class:`Dataset` are checked too) as
    float32 NumPy: real numbers of shape ``(samples, channels, *spatial)``, no NaN or infinity.
    Errors name ``source`` and the field."""
    out = []
    for field, a in zip(data._fields, data):
        a = np.asarray(a)
        if a.ndim < 2:
            raise SpecError(f"{source}: `{field}` has shape {a.shape}; need (samples, channels, *spatial)")
        if not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating) or a.dtype == bool):
            raise SpecError(f"{source}: `{field}` has dtype {a.dtype}; need real numbers (integers or floats)")
        with np.errstate(over="ignore", invalid="ignore"):
            a = a.astype(np.float32)
        if not np.isfinite(a.sum(dtype=np.float64)):  # a float64 sum of finite float32 values is finite
            bad = ~np.isfinite(a)
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            raise SpecError(f"{source}: `{field}` holds {int(bad.sum())} NaN or infinite value(s) as float32 (first at "
                            f"index {at}: {a[at]}); every input and target must be a finite number")
        out.append(a)
    return type(data)(*out)


def as_dataset(arrays, source: str) -> Dataset:
    """Validate four arrays (train_x, train_y, test_x, test_y); errors name ``source``."""
    if not isinstance(arrays, (tuple, list)) or len(arrays) != len(Dataset._fields):
        got = (f"an array of shape {np.shape(arrays)}" if hasattr(arrays, "shape")
               else f"{len(arrays)} values" if isinstance(arrays, (tuple, list)) else type(arrays).__name__)
        raise SpecError(f"{source}: expected four arrays (train_x, train_y, test_x, test_y) as a tuple, got {got}")
    data = checked_arrays(Dataset(*arrays), source)
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
