"""What a trial reads of an ``"hdf5"`` problem: every split from the files, a part at a time.

:func:`hdf5_trial_data` is the :class:`~sweep.problems.Dataset` a trial holds
(:meth:`sweep.problems.ProblemData.load`): every split (its pairs and its trajectories) as
zero-copy views of its first row at its full shape, marked :class:`InFiles`, as in the driver's
outline (:func:`~._hdf5_outline.hdf5_outline`). The trainer then reads what it needs with
:func:`hdf5_reader`: the items ``[start, stop)`` of a split (pairs, or trajectories), read in
contiguous slabs of each file (strides taken by h5py, the file opened by the thread that
reads), normalised and cut into pairs with ``history`` as :func:`~._hdf5.hdf5_problem` does, so
that every item is the problem's, bit for bit: a split at once where it fits the trial's data
budget, a window (training) or an evaluation part (validation, test) at a time where it does not.

```python
data = hdf5_trial_data("1D_Advection_Sols_beta0.1.hdf5")   # no split is held
read = hdf5_reader({"path": "1D_Advection_Sols_beta0.1.hdf5"}, data.normalization, unrolled=False)
x, y = read(0, 64)                                          # the first 64 training pairs
test = hdf5_reader({"path": "1D_Advection_Sols_beta0.1.hdf5"}, data.normalization, True, "test")
traj = test(0, 4)                                           # the first 4 test trajectories
```
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np
import pyarrow.fs as pafs

from .._errors import SpecError
from ._dataset import SPLITS, Dataset, Split
from ._hdf5 import resolved, split_trajectories
from ._hdf5_files import Location
from ._hdf5_layouts import read_states
from ._hdf5_outline import hdf5_outline
from ._hdf5_safety import open_hdf5
from ._hdf5_scan import Scan
from ._history import windows
from ._normalize import Normalization


class InFiles(np.ndarray):
    """A split left in the files (a trial's, :func:`hdf5_trial_data`): its outline (the first row
    repeated without a copy, at the split's full shape), marked for the trainer to read the rows
    from the files with :func:`hdf5_reader`. The driver's outline is not marked: what is sized or
    measured on it reads no file."""


def outlined(a: np.ndarray | None) -> bool:
    """Whether ``a`` is a split left in the files (:class:`InFiles`)."""
    return isinstance(a, InFiles)


def hdf5_trial_data(path: str, *, scan: Scan | None = None, origin: str | None = None, **options: Any) -> Dataset:
    """What a trial holds of ``Problem("hdf5", path=path, **options)`` (module docstring); with the
    driver's pass ``scan`` (its statistics; :mod:`~._hdf5_scan`) where the files are as it saw them,
    else that pass made here; a relative local ``path`` taken from ``origin``, the folder the sweep
    was started in (None: the current directory).

    Raises:
        SpecError: The files differ from those of the driver's pass (another copy on this node, or
            files changed since the sweep began): the trial would train on other data than the
            driver checked, with other statistics than the store records.
    """
    shapes, _, now = hdf5_outline(path, samples=0, trajectories=1, scan=scan, origin=origin, **options)
    check_as_read(path, scan, now)

    def marked(a: np.ndarray) -> np.ndarray:
        return a.view(InFiles) if len(a) else a  # an empty split has nothing to read

    def traj(split: str) -> np.ndarray | None:
        a = shapes.trajectories(split)
        return None if a is None else marked(a)

    return shapes._replace(
        **{split: Split(*map(marked, getattr(shapes, split))) for split in SPLITS},
        **{f"{split}_traj": traj(split) for split in SPLITS},
        origin=origin,
    )


def check_as_read(path: str, scan: Scan | None, now: Scan) -> None:
    """Raise :class:`SpecError` where a trial's pass ``now`` over the files differs from the
    driver's ``scan`` (:meth:`Scan.change_from`): other files, sizes, statistics or states."""
    change = None if scan is None else now.change_from(scan)
    if change is not None:
        raise SpecError(
            f"`problem.path` = {path!r}: this trial's files differ from those the sweep's driver read ({change}); "
            f"every node must see the same files, unchanged while the sweep runs: put the original files back (or "
            f"copy them to this node) and resume"
        )


class States(NamedTuple):
    """The trajectories of one split of an ``"hdf5"`` problem in its files: their ``shape``
    (``[trajectories, steps, channels, *spatial]``) and ``read(start, stop, first_states=None)``,
    the states of trajectories ``[start, stop)`` as the files hold them (strided, not normalised;
    ``first_states``: only the first that many of each)."""

    shape: tuple[int, ...]
    read: Callable[..., np.ndarray]


def split_states(
    options: Mapping[str, Any], split: str, filesystem: pafs.FileSystem | None = None, origin: str | None = None
) -> States:
    """The :class:`States` of ``split`` of the ``"hdf5"`` problem of ``options``, read in
    contiguous runs of each file (``filesystem``: as :func:`~._hdf5.hdf5_info`'s; ``origin``: the
    folder a relative local path is taken from, None: the current directory).

    Raises:
        SpecError: The data have no such split.
    """
    info, files, described, channels = resolved(options, filesystem, origin)
    picks = split_trajectories(files, described, options)
    if split not in picks:
        raise SpecError(
            f"`split`: got {split!r}; {options['path']!r} has no {split} split (val_fraction=0 and no "
            f"valid/ folder); choose one of {', '.join(sorted(picks))}"
        )
    order = [(location, k) for location, indices in picks[split] for k in indices]
    ts, ss = options.get("time_stride", 1), options.get("space_stride", 1)

    def read(start: int, stop: int, first_states: int | None = None) -> np.ndarray:
        parts = []
        for location, run in _runs(order[start:stop]):
            with open_hdf5(location) as f:
                parts.append(read_states(f, described[location.name], channels, run, ts, ss, first_states))
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    return States((len(order), info.steps, len(channels), *info.spatial), read)


def pairs_of(trajectories: Callable[[int, int], np.ndarray], per: int, history: int, start: int, stop: int):
    """``(x, y)``: the one-step pairs ``[start, stop)`` of trajectories of ``per`` pairs each
    (``history`` states per input), from the trajectories they come from (``trajectories(a, b)``)."""
    first = start // per
    x, y = windows(trajectories(first, -(-stop // per)), history)
    skip = start - first * per
    return x[skip : skip + stop - start], y[skip : skip + stop - start]


def _runs(order: list[tuple[Location, int]]) -> list[tuple[Location, range]]:
    """``order`` (trajectories by file and index) as contiguous runs of one file each."""
    runs: list[tuple[Location, range]] = []
    for location, k in order:
        if runs and runs[-1][0] is location and runs[-1][1].stop == k:
            runs[-1] = (location, range(runs[-1][1].start, k + 1))
        else:
            runs.append((location, range(k, k + 1)))
    return runs


def hdf5_reader(
    options: Mapping[str, Any],
    normalization: Normalization | None,
    unrolled: bool,
    split: str = "train",
    origin: str | None = None,
) -> Callable[..., Any]:
    """``read(start, stop)``: the items ``[start, stop)`` of ``split`` (``"train"``, ``"val"``,
    ``"test"``) of the ``"hdf5"`` problem of ``options`` (module docstring): pairs ``(x, y)``, or
    with ``unrolled`` trajectories (``read(start, stop, first_states)``: only the first that many
    states of each, as the rollouts of an evaluation read them), normalised by ``normalization``
    (``None``: as read); a relative local path taken from ``origin`` (:func:`hdf5_trial_data`)."""
    states = split_states(options, split, origin=origin)
    history = options.get("history", 1)
    per, spatial = states.shape[1] - history, len(states.shape) - 3  # pairs per trajectory

    def trajectories(start: int, stop: int, first_states: int | None = None) -> np.ndarray:
        read = states.read(start, stop, first_states)
        return read if normalization is None else normalization.apply(read, spatial).astype(np.float32)

    def read(start: int, stop: int, first_states: int | None = None) -> Any:
        if unrolled:
            return trajectories(start, stop, first_states)
        return pairs_of(trajectories, per, history, start, stop)

    return read
