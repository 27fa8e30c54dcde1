"""What an HDF5 file holds, as PDEBench and The Well write them: :func:`describe_file` and :func:`read_states`.

PDEBench (one file per PDE and parameter set, no splits) has three layouts:

- ``tensor``: one dataset ``tensor`` ``(samples, time, *spatial)`` (1D PDEs: advection, Burgers,
  diffusion-sorption, ...), with ``x-coordinate`` and ``t-coordinate``; one channel ``tensor``;
- ``variables``: one dataset per variable, ``density``, ``pressure``, ``Vx``, ``Vy``, ``Vz``, each
  ``(samples, time, *spatial)`` (compressible Navier-Stokes); one channel per variable;
- ``samples``: one group per sample, ``0000/data`` ``(time, *spatial, channels)`` with
  ``0000/grid/x`` and ``0000/grid/t`` (2D reaction-diffusion, shallow water); channels
  ``data_0``, ``data_1``, ...

The Well (one file per parameter set, in ``train/``, ``valid/``, ``test/``) keeps fields in
groups ``t0_fields`` (scalars, ``(trajectories, time, *spatial)``), ``t1_fields`` (vectors,
``(..., *spatial, D)``) and ``t2_fields`` (tensors, ``(..., *spatial, D, D)``), each dataset with
attributes ``time_varying``, ``sample_varying`` (no trajectory axis when false) and
``dim_varying``; ``dimensions.attrs["spatial_dims"]`` names the axes. Each component is a
channel: ``pressure``, ``velocity_x``, ``velocity_y``, ``stress_xy``, ...

Only metadata are read by :func:`describe_file`; :func:`read_states` reads the arrays.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._errors import SpecError
from ._hdf5_safety import checked_dataset, h5py_module

LAYOUTS = ("auto", "pdebench", "the_well")
VARIABLES = ("density", "pressure", "Vx", "Vy", "Vz")  # PDEBench's compressible-flow variables, in order
WELL_GROUPS = ("t0_fields", "t1_fields", "t2_fields")
CHUNK_BYTES = 1 << 27  # the most read at once from one dataset (128 MiB): a read's transient memory


@dataclasses.dataclass(frozen=True)
class Channel:
    """One channel: component ``component`` (``()`` for a scalar) of ``dataset`` (in the
    ``samples`` form, the path below each sample's group); ``shared``: the dataset has no
    trajectory axis (a The Well field equal for every trajectory)."""

    name: str
    dataset: str
    component: tuple[int, ...] = ()
    shared: bool = False


@dataclasses.dataclass(frozen=True)
class FileLayout:
    """What one file holds: ``trajectories`` of ``steps`` states on a ``spatial`` grid.

    ``channels`` are the time-varying channels (the default selection), ``fixed`` the names of
    fields that do not vary in time or along every axis (listed in errors, never selectable).
    """

    layout: str  # "pdebench" or "the_well"
    form: str  # "tensor", "variables", "samples" or "fields"
    trajectories: int
    steps: int
    spatial: tuple[int, ...]
    channels: tuple[Channel, ...]
    groups: tuple[str, ...] = ()  # the per-sample groups of the "samples" form, in order
    fixed: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.channels)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def detect(file: Any) -> str:
    """``"pdebench"`` or ``"the_well"`` from what ``file`` holds, or a :class:`SpecError` listing it."""
    keys = list(file.keys())
    if any(k in keys for k in WELL_GROUPS):
        return "the_well"
    if "tensor" in keys or any(k in keys for k in VARIABLES) or (keys and _sample_groups(file)):
        return "pdebench"  # (whatever attributes it has: a PDEBench file may carry n_spatial_dims too)
    if "n_spatial_dims" in file.attrs:
        return "the_well"
    attrs = sorted(file.attrs)
    raise SpecError(
        f"`problem.layout`: {file.filename!r} is neither a PDEBench nor a The Well file: it holds {keys[:12]} "
        f"(attributes {attrs[:12]}); PDEBench files hold `tensor`, {', '.join(VARIABLES)} or groups "
        f"`0000/data`, The Well files {', '.join(WELL_GROUPS)}. Load other files' states yourself: "
        f"Problem('arrays', path=...) or a data function (the Data guide)"
    )


def describe_file(file: Any, layout: str) -> FileLayout:
    """The :class:`FileLayout` of the open ``file`` as ``layout`` (``"pdebench"``/``"the_well"``)."""
    found = detect(file)
    if found != layout:
        raise SpecError(
            f"`problem.layout`: got {layout!r}, but {file.filename!r} is laid out as {found!r} "
            f"(it holds {list(file.keys())[:12]}); give layout={found!r} or 'auto'"
        )
    return _pdebench(file) if layout == "pdebench" else _the_well(file)


def _sample_groups(file: Any) -> list[str]:
    h5py = h5py_module()
    groups = {k: file.get(k) for k in file}  # get: a dangling soft link is None, not an error
    return [k for k, g in groups.items() if isinstance(g, h5py.Group) and isinstance(g.get("data"), h5py.Dataset)]


def _grid(shape: tuple[int, ...], where: str, extra: int = 0) -> tuple[int, int, tuple[int, ...]]:
    """``(trajectories, steps, spatial)`` of a ``(trajectories, time, *spatial, *extra)`` shape."""
    spatial = shape[2 : len(shape) - extra]
    if not 1 <= len(spatial) <= 3:
        raise SpecError(
            f"`problem.path`: {where} has shape {shape}; need (samples, time, *spatial{', *components' * bool(extra)}) "
            f"with 1 to 3 spatial axes"
        )
    return shape[0], shape[1], tuple(spatial)


def _same_grid(shapes: dict[str, tuple[int, ...]], file: Any) -> tuple[int, ...]:
    """The one shape of every ``{dataset: shape}``, or an error naming two that differ."""
    first, *rest = shapes.items()
    for name, shape in rest:
        if shape != first[1]:
            raise SpecError(
                f"`problem.path`: {file.filename!r}: /{first[0]} and /{name} have different shapes {first[1]} "
                f"and {shape}; every field and sample must share one grid and one number of states"
            )
    return first[1]


def _pdebench(file: Any) -> FileLayout:
    if "tensor" in file:
        dataset = checked_dataset(file, "tensor")
        n, t, s = _grid(dataset.shape, f"{file.filename!r}:/tensor")
        return FileLayout("pdebench", "tensor", n, t, s, (Channel("tensor", "tensor"),))
    variables = [v for v in VARIABLES if v in file]
    if variables:
        shape = _same_grid({v: checked_dataset(file, v).shape for v in variables}, file)
        n, t, s = _grid(shape, f"{file.filename!r}:/{variables[0]}")
        return FileLayout("pdebench", "variables", n, t, s, tuple(Channel(v, v) for v in variables))
    groups = sorted(_sample_groups(file))
    shapes = {f"{g}/data": checked_dataset(file, f"{g}/data").shape for g in groups}
    shape = _same_grid(shapes, file)
    if not 3 <= len(shape) <= 5:
        raise SpecError(
            f"`problem.path`: {file.filename!r}:/{groups[0]}/data has shape {shape}; need (time, *spatial, channels) "
            f"with 1 to 3 spatial axes"
        )
    channels = tuple(Channel(f"data_{k}", "data", (k,)) for k in range(shape[-1]))
    return FileLayout("pdebench", "samples", len(groups), shape[0], tuple(shape[1:-1]), channels, tuple(groups))


def _the_well(file: Any) -> FileLayout:
    h5py = h5py_module()
    dims_group = file.get("dimensions")
    dims = [_text(d) for d in dims_group.attrs.get("spatial_dims", ())] if isinstance(dims_group, h5py.Group) else []
    declared = file.attrs.get("n_spatial_dims")
    if not dims or (declared is not None and int(declared) != len(dims)):
        raise SpecError(
            f"`problem.path`: {file.filename!r}: /dimensions@spatial_dims is {dims} and @n_spatial_dims "
            f"{declared}; a The Well file names its 1 to 3 spatial axes in /dimensions@spatial_dims"
        )
    channels, fixed, shapes = [], [], {}
    for order, group_name in enumerate(WELL_GROUPS):
        group = file.get(group_name)
        if not isinstance(group, h5py.Group):
            continue
        names = [_text(n) for n in group.attrs.get("field_names", list(group.keys()))]
        for name in names:
            path = f"{group_name}/{name}"
            dataset = checked_dataset(file, path)
            a = dataset.attrs
            shared = not bool(a.get("sample_varying", True))
            if not bool(a.get("time_varying", True)) or not all(bool(v) for v in a.get("dim_varying", [True])):
                fixed.append(name)
                continue
            shape = ((int(file.attrs.get("n_trajectories", 1)),) if shared else ()) + tuple(dataset.shape)
            comps = [dims] * order
            n, t, s = _grid(shape, f"{file.filename!r}:/{path}", extra=order)
            if len(s) != len(dims) or shape[len(shape) - order :] != (len(dims),) * order:
                raise SpecError(
                    f"`problem.path`: {file.filename!r}:/{path} has shape {dataset.shape}; a rank-{order} field on "
                    f"the {len(dims)} axes {dims} needs ({'' if shared else 'trajectories, '}time, "
                    f"*{len(dims)} spatial{', ' + ', '.join([str(len(dims))] * order) if order else ''})"
                )
            shapes[path] = (n, t, *s)
            for index in np.ndindex(*(len(d) for d in comps)):
                suffix = "".join(dims[i] for i in index)
                channels.append(Channel(f"{name}_{suffix}" if order else name, path, tuple(index), shared))
    if not channels:
        raise SpecError(
            f"`problem.path`: {file.filename!r} has no time-varying field in {', '.join(WELL_GROUPS)} "
            f"(fields constant in time: {fixed})"
        )
    n, t, *s = _same_grid(shapes, file)
    return FileLayout("the_well", "fields", n, t, tuple(s), tuple(channels), fixed=tuple(fixed))


def strided(size: int, stride: int) -> int:
    """How many of ``size`` points a ``stride`` keeps (the first and every ``stride``-th after it)."""
    return math.ceil(size / stride)


def read_states(
    file: Any,
    layout: FileLayout,
    channels: Sequence[Channel],
    trajectories: range,
    time_stride: int = 1,
    space_stride: int = 1,
    first_states: int | None = None,
) -> np.ndarray:
    """float32 ``(trajectories, steps, channels, *spatial)`` of ``file``: the given trajectories
    (a step-1 range), every ``time_stride``-th state and ``space_stride``-th point of each axis
    (``first_states``: only the first that many of those states, read as such).

    Datasets are read a chunk of trajectories at a time (at most :data:`CHUNK_BYTES` each) and
    checked for NaN and infinity, which are errors naming the file, the dataset, the trajectory
    and the time index in the file.
    """
    steps = strided(layout.steps, time_stride)
    steps = steps if first_states is None else min(steps, first_states)
    spatial = tuple(strided(n, space_stride) for n in layout.spatial)
    out = np.empty((len(trajectories), steps, len(channels), *spatial), np.float32)
    grid = (slice(0, steps * time_stride, time_stride), *(slice(None, None, space_stride) for _ in spatial))
    if layout.form == "samples":
        for i, sample in enumerate(trajectories):
            path = f"{layout.groups[sample]}/data"
            block = _read(checked_dataset(file, path), grid, file, path, f"sample {sample}")[None]
            _fill(out, i, block, channels, path, file, sample, time_stride)
        return out
    per_state = math.prod(layout.spatial) * 4 * max(1, len(channels))
    chunk = max(1, CHUNK_BYTES // max(1, per_state * layout.steps))
    for path in dict.fromkeys(c.dataset for c in channels):
        dataset = checked_dataset(file, path)
        mine = [c for c in channels if c.dataset == path]
        for start in range(0, len(trajectories), chunk):
            rows = trajectories[start : start + chunk]
            if mine[0].shared:
                states = _read(dataset, grid, file, path, "its states")
                block = np.broadcast_to(states, (len(rows), *states.shape))
            else:
                where = f"trajectory {rows.start}" if len(rows) == 1 else f"trajectories {rows.start}..{rows.stop - 1}"
                block = _read(dataset, (slice(rows.start, rows.stop), *grid), file, path, where)
            _fill(out, start, block, [c if c in mine else None for c in channels], path, file, rows.start, time_stride)
    return out


def _read(dataset: Any, index: Any, file: Any, path: str, where: str) -> np.ndarray:
    """``dataset[index]``, or a :class:`SpecError` naming the file, the dataset and ``where`` when
    HDF5 cannot read it (a damaged file: a chunk its filter cannot decode, a truncated file)."""
    try:
        return dataset[index]
    except OSError as e:
        raise SpecError(
            f"`problem.path`: {file.filename!r}:/{path} cannot be read ({where}: {e}); the file is damaged: "
            f"copy it again"
        ) from None


def _fill(
    out: np.ndarray,
    start: int,
    block: np.ndarray,
    channels: Sequence[Channel | None],
    path: str,
    file: Any,
    first: int,
    time_stride: int,
) -> None:
    """Copy the components of ``block`` ``(n, time, *spatial, *components)`` into ``out[start:start + n]``."""
    for k, channel in enumerate(channels):
        if channel is None:
            continue
        raw = block[(Ellipsis, *channel.component)]
        with np.errstate(over="ignore"):  # a value beyond float32's range: named below
            values = np.asarray(raw, dtype=np.float32)
        bad = None if np.isfinite(values.sum()) else ~np.isfinite(values)  # a float32 sum: inf also on overflow
        if bad is not None and bad.any():
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            n, t = at[:2]
            source = np.asarray(raw[at])
            what = (
                f"{source.item()!r}, beyond float32's range (|value| <= {float(np.finfo(np.float32).max):.4g})"
                if np.isfinite(source)
                else "NaN or infinity"
            )
            raise SpecError(
                f"`problem.path`: {file.filename!r}:/{path} holds {what} (channel {channel.name!r}, "
                f"trajectory {first + n}, time index {t * time_stride}); every selected value must be finite"
            )
        out[start : start + len(values), :, k] = values
