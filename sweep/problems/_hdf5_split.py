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
from ._hdf5 import resolved, split_trajectories
from ._hdf5_files import Location
from ._hdf5_layouts import read_states
from ._hdf5_safety import open_hdf5
from ._history import windows


class _Reader:
    """The trajectories ``[start, stop)`` of one split of an ``"hdf5"`` problem, read from the files
    in contiguous runs of each; the last read kept, so that ``x`` and ``y`` of the same rows read once."""

    def __init__(self, options: Mapping[str, Any], split: str, filesystem: pafs.FileSystem | None):
        info, files, described, channels = resolved(options, filesystem)
        picks = split_trajectories(files, described, options)
        if split not in picks:
            raise SpecError(
                f"hdf5_split(split={split!r}): {options['path']!r} has no {split} split (val_fraction=0 and no "
                f"valid/ folder); choose one of {', '.join(sorted(picks))}"
            )
        self.order = [(location, k) for location, indices in picks[split] for k in indices]
        self.described, self.channels = described, channels
        self.strides = options.get("time_stride", 1), options.get("space_stride", 1)
        self.shape = (len(self.order), info.steps, len(channels), *info.spatial)
        self._last: tuple[tuple[int, int], np.ndarray] | None = None

    def __call__(self, start: int, stop: int) -> np.ndarray:
        if self._last is not None and self._last[0] == (start, stop):
            return self._last[1]
        runs: list[tuple[Location, range]] = []
        for location, k in self.order[start:stop]:
            if runs and runs[-1][0] is location and runs[-1][1].stop == k:
                runs[-1] = (location, range(runs[-1][1].start, k + 1))
            else:
                runs.append((location, range(k, k + 1)))
        parts = []
        for location, run in runs:
            with open_hdf5(location) as f:
                parts.append(read_states(f, self.described[location.name], self.channels, run, *self.strides))
        states = np.concatenate(parts) if len(parts) > 1 else parts[0]
        self._last = ((start, stop), states)
        return states


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
        if stop <= start:
            return np.empty((0, *self.shape[1:]), self.dtype)[(slice(None), *rest)]
        if self._part is None:  # trajectories
            items = self._reader(start, stop)
        else:
            low, high = start // self._per, -(-stop // self._per)
            items = windows(self._reader(low, high), self._history)[self._part]
            items = items[start - low * self._per : stop - low * self._per]
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
            the ``path`` of the files.
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
