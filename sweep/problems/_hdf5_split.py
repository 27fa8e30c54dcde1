"""A split of an ``"hdf5"`` problem left in its files, to query an ensemble on all of it:
:func:`hdf5_split` gives its one-step pairs and its trajectories as array-likes (``.shape``,
``.dtype``, slicing along the first axis) that read only the trajectories a slice needs, in
physical units (the files' values, not normalised: the units ``Ensemble.predict`` and
``Ensemble.scores`` take and return), with ``history`` states per input as the problem makes
them. Items are those of :func:`~._hdf5.hdf5_problem` with ``normalize="none"``, in its order,
bit for bit.

```python
test = sweep.problems.hdf5_split(ens.spec.problem, "test")    # the files and options the sweep trained on
table = ens.scores("test", samples=(test.x, test.y), trajectories=test.trajectories)
mean, std = ens.mean_std(test.x)                                        # read a batch at a time
```
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import pyarrow.fs as pafs

from .._errors import SpecError
from ._hdf5_reader import pairs_of, split_states


class _Reader:
    """:func:`~._hdf5_reader.split_states` of one split with the last read kept, so that ``x`` and
    ``y`` of the same rows read the files once."""

    def __init__(self, options: Mapping[str, Any], split: str, filesystem: pafs.FileSystem | None):
        self.shape, self._read = split_states(options, split, filesystem)
        self._last: tuple[tuple[int, int], np.ndarray] | None = None

    def __call__(self, start: int, stop: int) -> np.ndarray:
        if self._last is None or self._last[0] != (start, stop):
            self._last = ((start, stop), self._read(start, stop))
        return self._last[1]


class _View:
    """Items ``[n, ...]`` of a split read on demand: ``view[i:j]`` (any step; then any index of
    the other axes) reads only the trajectories those items come from."""

    dtype = np.dtype(np.float32)

    def __init__(self, reader: _Reader, shape: tuple[int, ...], per: int, history: int, part: int | None):
        self._reader, self.shape, self._per, self._history, self._part = reader, shape, per, history, part
        self.ndim = len(shape)

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"<hdf5 split view {self.shape} float32>"

    def __getitem__(self, index: Any) -> np.ndarray:
        first, rest = (index[0], index[1:]) if isinstance(index, tuple) else (index, ())
        if isinstance(first, (int, np.integer)):
            i = range(self.shape[0])[first]
            return self[i : i + 1][(0, *rest)]
        if not isinstance(first, slice):
            raise TypeError(f"an hdf5 split view is read by slices of its first axis, not {first!r}")
        start, stop, step = first.indices(self.shape[0])
        if step < 0:
            raise TypeError(f"an hdf5 split view is read by slices with a positive step, not {first!r}")
        if stop <= start:
            return np.empty((0, *self.shape[1:]), self.dtype)[(slice(None), *rest)]
        if self._part is None:  # trajectories
            items = self._reader(start, stop)
        else:
            items = pairs_of(self._reader, self._per, self._history, start, stop)[self._part]
        return items[(slice(None, None, step), *rest)]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self[:]
        return out if dtype is None else out.astype(dtype)


class HDF5Split(NamedTuple):
    """A split of an ``"hdf5"`` problem as array-likes read on demand (:func:`hdf5_split`).

    Attributes:
        x: Inputs ``[pairs, history * channels, *spatial]``, trajectory by trajectory.
        y: Targets ``[pairs, channels, *spatial]``: the state after each input.
        trajectories: ``[trajectories, steps, channels, *spatial]``.
    """

    x: Any
    y: Any
    trajectories: Any


def hdf5_split(
    problem: Any, split: str = "test", filesystem: pafs.FileSystem | None = None, **options: Any
) -> HDF5Split:
    """The ``split`` (``"train"``, ``"val"``, ``"test"``) of an ``"hdf5"`` problem as array-likes
    that read the files on demand, in physical units (module docstring): what ``Ensemble.predict``,
    ``Ensemble.mean_std`` and ``Ensemble.scores`` take for a split larger than memory. Only
    metadata are read here; ``normalize`` is ignored (the queries take physical units),
    ``history`` makes the inputs as in training.

    Args:
        problem: A ``sweep.Problem("hdf5", ...)`` (e.g. ``ens.spec.problem``: the sweep's), or
            the ``path`` of the files (a relative one taken from the current directory).
        split: Which split.
        filesystem: An ``S3FileSystem`` to read an ``s3://`` path with (as :func:`hdf5_info`).
        **options: The problem's options (added to, or overriding, those of ``problem``).

    Raises:
        SpecError: As :func:`~sweep.problems.hdf5_info`; a split the data do not have, or a
            problem not of kind ``"hdf5"``.

    Examples:
        ```python
        test = sweep.problems.hdf5_split(ens.spec.problem, "test")  # the files the sweep trained on
        test.x.shape, test.trajectories.shape  # (pairs, channels, *spatial), (n, steps, channels, *spatial)
        y = ens.predict(test.x, batch_size=512)  # reads 512 pairs at a time
        ```
    """
    if isinstance(problem, (str, os.PathLike)):
        options = {"path": os.fspath(problem), **options}
    elif getattr(problem, "name", None) == "hdf5" and isinstance(getattr(problem, "options", None), Mapping):
        options = {**problem.options, **options}
    else:
        raise SpecError(f'hdf5_split(problem={problem!r}): give a Problem("hdf5", path=...) or the path of its files')
    if split not in ("train", "val", "test"):
        raise SpecError(f'hdf5_split(split={split!r}): choose "train", "val" or "test"')
    reader = _Reader(options, split, filesystem)
    n, steps, channels, *spatial = reader.shape
    h = options.get("history", 1)
    per = steps - h  # pairs per trajectory
    return HDF5Split(
        _View(reader, (n * per, h * channels, *spatial), per, h, 0),
        _View(reader, (n * per, channels, *spatial), per, h, 1),
        _View(reader, reader.shape, 1, h, None),
    )
