"""Trajectories from HDF5 files as PDEBench and The Well write them: ``Problem("hdf5", path=...)``.

``path`` is one file, a folder of files (one split of The Well, or several files of one
layout), or a The Well dataset directory holding ``train/``, ``valid/`` and ``test/`` (directly
or under ``data/``), local or at a URI pyarrow opens (``s3://...``, through the sweep's filesystem:
:mod:`sweep.problems._hdf5_files`). :func:`hdf5_info` reads only metadata and says what the problem will be
(which layout ``"auto"`` chose, the channels, the trajectories per split);
:func:`hdf5_problem` reads the arrays. The layouts: :mod:`sweep.problems._hdf5_layouts`; what
is refused in a file (external links, virtual datasets of other files, external storage, filter
plugins): :mod:`sweep.problems._hdf5_safety`.

Splits: The Well's folders are its splits (``valid/`` optional: without it a validation split
is carved from the training trajectories, ``val_fraction`` with ``data_seed``). Data without
splits (PDEBench) are split as PDEBench's loaders split them: the last ``test_fraction``
(default 0.1) of the trajectories, in file order, are the test split, and the validation split
is carved from the rest.

```python
problem = sweep.Problem("hdf5", path="2D_CFD_Rand_M0.1_Eta0.01_Zeta0.01_periodic_128_Train.hdf5",
                        fields=["density", "Vx", "Vy"], time_stride=2, space_stride=4)
```
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow.fs as pafs

from .._errors import SpecError, did_you_mean
from ._dataset import DEFAULT_VAL_FRACTION, Dataset, as_dataset, held_out, val_count
from ._hdf5_files import Location, dataset_files
from ._hdf5_layouts import LAYOUTS, Channel, FileLayout, describe_file, detect, read_states, strided
from ._hdf5_safety import open_hdf5
from ._history import check_history, with_history
from ._normalize import check_method, normalized, statistics

DEFAULT_TEST_FRACTION = 0.1  # PDEBench's test_ratio
# the options of "hdf5" and their defaults (path: required); and val_fraction, data_seed as every kind
DEFAULTS = {
    "path": None,
    "layout": "auto",
    "fields": None,
    "time_stride": 1,
    "space_stride": 1,
    "test_fraction": DEFAULT_TEST_FRACTION,
    "normalize": "zscore",  # file data come in physical units of any size (sweep.problems._normalize)
    "history": 1,  # states per input (sweep.problems._history)
}
OPTIONS = (*DEFAULTS, "val_fraction", "data_seed")
_log = logging.getLogger("sweep.problems")


def _count(options: Mapping[str, Any], key: str) -> None:
    value = options.get(key, 1)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        every = "every state" if key == "time_stride" else "every point"
        raise SpecError(f"`problem.{key}`: got {value!r}; must be an integer >= 1 (1: {every})")


def check_hdf5_options(options: Mapping[str, Any]) -> None:
    """Raise :class:`SpecError` unless ``options`` are options of ``"hdf5"`` of the right types
    (cheap: no file is opened; :func:`hdf5_info` checks the files)."""
    unknown = [k for k in options if k not in OPTIONS]
    if unknown:
        raise SpecError(
            f"`problem.{unknown[0]}`: not an option of hdf5{did_you_mean(unknown[0], OPTIONS)}; "
            f"allowed: {', '.join(OPTIONS)}"
        )
    if not isinstance(options.get("path"), str) or not options["path"]:
        raise SpecError(f"`problem.path`: got {options.get('path')!r}; give the HDF5 file or dataset directory")
    if options.get("layout", "auto") not in LAYOUTS:
        raise SpecError(f"`problem.layout`: got {options['layout']!r}; choose one of {', '.join(LAYOUTS)}")
    fields = options.get("fields")
    if fields is not None and (
        not isinstance(fields, (list, tuple))
        or not fields
        or not all(isinstance(f, str) for f in fields)
        or len(set(fields)) != len(fields)
    ):
        raise SpecError(f"`problem.fields`: got {fields!r}; give a list of distinct field names, or leave it out (all)")
    _count(options, "time_stride")
    _count(options, "space_stride")
    check_method(options.get("normalize", DEFAULTS["normalize"]))
    check_history(options.get("history", 1))
    fraction = options.get("test_fraction", DEFAULT_TEST_FRACTION)
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction < 1:
        raise SpecError(f"`problem.test_fraction`: got {fraction!r}; must be a number in (0, 1)")


@dataclasses.dataclass(frozen=True)
class HDF5Info:
    """What ``Problem("hdf5", ...)`` will train on, from the files' metadata only.

    Attributes:
        path: The file or directory given.
        layout: ``"pdebench"`` or ``"the_well"`` (what ``layout="auto"`` chose).
        form: PDEBench's ``"tensor"``, ``"variables"`` or ``"samples"``; ``"fields"`` for The Well.
        files: The files of each split (``"train"``, ``"val"``, ``"test"``), or of ``"all"``
            where the data have no splits.
        channels: The selected channels, in order.
        trajectories: How many trajectories each entry of ``files`` holds.
        steps: States per trajectory after ``time_stride``.
        spatial: The grid after ``space_stride``.
        fixed: Fields constant in time (not selectable).
    """

    path: str
    layout: str
    form: str
    files: dict[str, tuple[str, ...]]
    channels: tuple[str, ...]
    trajectories: dict[str, int]
    steps: int
    spatial: tuple[int, ...]
    fixed: tuple[str, ...]

    def __str__(self) -> str:
        splits = ", ".join(f"{s} {n}" for s, n in self.trajectories.items())
        if "all" in self.trajectories:
            splits = (
                f"{self.trajectories['all']}, no splits (test: the last test_fraction; val: val_fraction of the rest)"
            )
        elif "val" not in self.trajectories:
            splits += " (no validation split: val is val_fraction of train)"
        return (
            f"{self.path}: {self.layout} ({self.form}), {sum(map(len, self.files.values()))} file(s)\n"
            f"  channels   {', '.join(self.channels)}\n"
            f"  grid       {self.steps} states x {' x '.join(map(str, self.spatial))} points\n"
            f"  trajectories {splits}"
            + (f"\n  constant   {', '.join(self.fixed)} (not selectable)" if self.fixed else "")
        )


def _layout(files: dict[str, tuple[Location, ...]], layout: str) -> tuple[dict[str, FileLayout], str]:
    """Every file's layout by name (the first file's, detected, for ``"auto"``), checked to be of one layout."""
    described: dict[str, FileLayout] = {}
    given = layout
    for group in files.values():
        for location in group:
            with open_hdf5(location) as f:
                found = detect(f) if given == "auto" else layout
                if layout == "auto":
                    layout = found
                elif found != layout:  # auto: the first file decided, and this one is of the other layout
                    raise SpecError(
                        f"`problem.path`: the files mix layouts: {next(iter(described))!r} is laid out as "
                        f"{layout!r}, {location.name!r} as {found!r}; a problem reads files of one layout"
                    )
                described[location.name] = describe_file(f, layout)
    return described, layout


def _agree(described: dict[str, FileLayout], channels: list[Channel], every_field: bool) -> None:
    """Every file holds ``channels`` on the first file's grid (the first file's fields, all of
    them, when ``every_field``: the selection that ``fields`` left unset)."""
    (first, ref), *rest = described.items()
    for p, other in rest:
        lacks = [c.name for c in channels if c not in other.channels]
        fields = other.names != ref.names if every_field else bool(lacks)
        if fields or (other.form, other.steps, other.spatial) != (ref.form, ref.steps, ref.spatial):
            hint = f" (it lacks {', '.join(lacks)})" if lacks else ""
            choose = "; or name in `problem.fields` the fields every file holds" if fields and every_field else ""
            raise SpecError(
                f"`problem.path`: {p!r} holds channels {list(other.names)} of {other.steps} states on "
                f"{other.spatial}{hint}, but {first!r} holds {list(ref.names)} of {ref.steps} on {ref.spatial}; "
                f"every file must hold the fields read on the same grid{choose}"
            )


def _selected(ref: FileLayout, fields: Sequence[str] | None, where: str) -> list[Channel]:
    """The channels ``fields`` names (a vector or tensor field by its name: all its components), in
    the file ``where`` (``ref``'s: the first of the problem's files, which the others must agree with)."""
    if fields is None:
        return list(ref.channels)
    chosen: list[Channel] = []
    for name in fields:
        match = [c for c in ref.channels if c.name == name or c.dataset.split("/")[-1] == name and c.component]
        if not match:
            verb = "is" if len(ref.fixed) == 1 else "are"
            fixed = f"; {', '.join(ref.fixed)} {verb} constant in time" if ref.fixed else ""
            raise SpecError(
                f"`problem.fields`: {name!r} is not a time-varying field of {where}"
                f"{did_you_mean(name, ref.names)}; it has {', '.join(ref.names)}{fixed}"
            )
        again = [c.name for c in match if c in chosen]
        if again:
            raise SpecError(
                f"`problem.fields`: {name!r} names {', '.join(again)}, named already by another of {list(fields)} "
                f"(a vector or tensor field's name takes all its components); name each channel once"
            )
        chosen += match
    return chosen


def _strides(ref: FileLayout, time_stride: int, space_stride: int, where: str) -> None:
    if ref.steps < 2:
        raise SpecError(
            f"`problem.path`: {where} holds one state per sample (a steady problem, such as PDEBench's Darcy "
            f"flow); an hdf5 problem learns a state's next state and needs trajectories of at least 2 states"
        )
    if strided(ref.steps, time_stride) < 2:
        raise SpecError(
            f"`problem.time_stride`: got {time_stride}; {where} has {ref.steps} states per trajectory, and a "
            f"stride must leave at least 2 (use at most {max(1, ref.steps - 1)})"
        )
    if space_stride > min(ref.spatial):
        raise SpecError(
            f"`problem.space_stride`: got {space_stride}; {where} has a grid of {ref.spatial} points, and "
            f"the stride must be at most the smallest axis ({min(ref.spatial)})"
        )


def resolved(
    options: Mapping[str, Any], filesystem: pafs.FileSystem | None = None, origin: str | None = None
) -> tuple[HDF5Info, dict[str, tuple[Location, ...]], dict[str, FileLayout], list[Channel]]:
    """``(info, files by split, every file's layout by name, the selected channels)`` of the
    options of ``"hdf5"`` (``path`` among them), checked, from the files' metadata; an ``s3://``
    path read through ``filesystem``, the sweep's, where that is an ``S3FileSystem``; a relative
    local path taken from ``origin`` (None: the current directory; :func:`~._hdf5_files.locate`)."""
    check_hdf5_options(options)
    path, layout = options["path"], options.get("layout", "auto")
    files = dataset_files(path, filesystem, origin)
    described, chosen = _layout(files, layout)
    ref = next(iter(described.values()))
    time_stride, space_stride = options.get("time_stride", 1), options.get("space_stride", 1)
    _strides(ref, time_stride, space_stride, repr(next(iter(described))))
    history, steps = options.get("history", 1), strided(ref.steps, time_stride)
    if history >= steps:
        raise SpecError(
            f"`problem.history`: got {history}; {next(iter(described))!r} has {steps} states per trajectory (after "
            f"time_stride {time_stride}), and an input of {history} states needs a next state (use at most {steps - 1})"
        )
    first = next(iter(described))
    where = repr(first) if len(described) == 1 else f"{first!r} (the first of the {len(described)} files read)"
    channels = _selected(ref, options.get("fields"), where)
    _agree(described, channels, options.get("fields") is None)
    if "all" not in files and "test_fraction" in options:
        raise SpecError(
            f"`problem.test_fraction`: got {options['test_fraction']!r}, but {path!r} has its own test split "
            f"(test/); remove test_fraction"
        )
    info = HDF5Info(
        path,
        chosen,
        ref.form,
        {s: tuple(location.name for location in group) for s, group in files.items()},
        tuple(c.name for c in channels),
        {s: sum(described[location.name].trajectories for location in group) for s, group in files.items()},
        strided(ref.steps, time_stride),
        tuple(strided(n, space_stride) for n in ref.spatial),
        ref.fixed,
    )
    if layout == "auto":
        _log.info("problem.layout 'auto': %s is laid out as %r (%s)", path, chosen, ref.form)
    return info, files, described, channels


def hdf5_info(path: str, filesystem: pafs.FileSystem | None = None, **options: Any) -> HDF5Info:
    """What ``Problem("hdf5", path=path, **options)`` will train on, from metadata only
    (``filesystem``: an ``S3FileSystem`` to read an ``s3://`` path with, as ``sweep.run``'s
    ``storage_filesystem``).

    Raises:
        SpecError: A missing or non-HDF5 file, an empty folder, an unknown layout, a field not in
            the file, shapes that differ between files or fields, a stride larger than an axis,
            or a file that reads outside itself; the message names the file and the dataset.

    Examples:
        ```python
        print(sweep.problems.hdf5_info("1D_Advection_Sols_beta0.1.hdf5", time_stride=5))
        # 1D_Advection_Sols_beta0.1.hdf5: pdebench (tensor), 1 file(s)
        #   channels   tensor
        #   ...
        ```
    """
    return resolved({"path": path, **options}, filesystem)[0]


def _read(
    files: Sequence[Location], described: dict[str, FileLayout], channels: list[Channel], ts: int, ss: int
) -> np.ndarray:
    parts = []
    for location in files:
        layout = described[location.name]
        with open_hdf5(location) as f:
            parts.append(read_states(f, layout, channels, range(layout.trajectories), ts, ss))
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def hdf5_problem(path: str, filesystem: pafs.FileSystem | None = None, **options: Any) -> Dataset:
    """The :class:`Dataset` of ``Problem("hdf5", path=path, **options)``: the files' trajectories,
    split (module docstring), and the one-step pairs derived from them (``filesystem``: as
    :func:`hdf5_info`'s)."""
    options = {"path": path, **options}
    _, files, described, channels = resolved(options, filesystem)
    ts, ss = options.get("time_stride", 1), options.get("space_stride", 1)
    trajectories = {s: _read(group, described, channels, ts, ss) for s, group in files.items()}
    if "all" in trajectories:
        states = trajectories.pop("all")
        cut = _test_cut(len(states), options)  # PDEBench: the last test_ratio of the samples are the test split
        trajectories = {"train": states[:cut], "test": states[cut:]}
    source = f"`problem.path` {path!r}"
    data = as_dataset(
        None,
        source,
        val_fraction=options.get("val_fraction"),
        data_seed=options.get("data_seed", 0),
        trajectories=trajectories,
    )
    method = options.get("normalize", DEFAULTS["normalize"])
    if method != "none":
        data = normalized(data, statistics(data, method, [c.name for c in channels], source), source)
    return with_history(data, options.get("history", 1), source)


def _test_cut(count: int, options: Mapping[str, Any]) -> int:
    """How many of the ``count`` trajectories of data without splits train (PDEBench: the last
    ``test_fraction`` of them, in file order, are the test split)."""
    fraction = options.get("test_fraction", DEFAULT_TEST_FRACTION)
    cut = int(count * (1 - fraction))
    if not 0 < cut < count:
        raise SpecError(
            f"`problem.test_fraction`: got {fraction!r}; with {count} trajectories in {options['path']!r} it leaves "
            f"{cut} for training and {count - cut} for testing; both need at least one"
        )
    return cut


Picks = list[tuple[Location, list[int]]]  # trajectories by file: which of each file's, in order


def split_trajectories(
    files: dict[str, tuple[Location, ...]], described: dict[str, FileLayout], options: Mapping[str, Any]
) -> dict[str, Picks]:
    """Which trajectories of which file each split (``"train"``, ``"val"``, ``"test"``) holds, in
    the order :func:`hdf5_problem` holds them (the test cut and the validation draw as it makes
    them), from the metadata alone; no ``"val"`` where the data have no validation split."""

    def picks(group: tuple[Location, ...], wanted: np.ndarray) -> Picks:
        out, start = [], 0
        for location in group:
            n = described[location.name].trajectories
            out.append((location, [int(i) for i in np.flatnonzero(wanted[start : start + n])]))
            start += n
        return out

    def every(group: tuple[Location, ...]) -> Picks:
        return [(location, list(range(described[location.name].trajectories))) for location in group]

    group = files["train"] if "train" in files else files["all"]
    count = sum(described[location.name].trajectories for location in group)
    if "all" in files:
        cut = _test_cut(count, options)
        test, tested = picks(group, np.arange(count) >= cut), count - cut
    else:
        cut, test = count, every(files.get("test", ()))
        tested = sum(len(indices) for _, indices in test)
    out = {"test": test}
    kept = np.arange(count) < cut
    fraction = options.get("val_fraction")
    if "val" in files:
        out["val"] = every(files["val"])
    elif fraction != 0:
        fraction = DEFAULT_VAL_FRACTION if fraction is None else fraction
        source = f"`problem.path` {options['path']!r}"
        held = held_out(cut, val_count(fraction, cut, tested, "trajectories", source), options.get("data_seed", 0))
        out["val"] = picks(group, np.concatenate([held, np.zeros(count - cut, bool)]))
        kept[:cut] &= ~held
    return {"train": picks(group, kept), **out}


def read_picks(picks: Picks, described: dict[str, FileLayout], channels: list[Channel], ts: int, ss: int):
    """``(where, states [steps, c, *s])`` of every trajectory ``picks`` names, one at a time."""
    i = 0
    for location, indices in picks:
        layout = described[location.name]
        with open_hdf5(location) as f:
            for k in indices:
                yield f"trajectory {i}", read_states(f, layout, channels, range(k, k + 1), ts, ss)[0]
                i += 1
