"""Data for a sweep: built-in generators (``heat1d``, ``exponax:<Stepper>``, ``apebench:<scenario>_<N>d``),
HDF5 files (``hdf5``) and user data loaders."""

from __future__ import annotations

import inspect
import os
import typing
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import pyarrow.fs as pafs

from .._errors import SpecError, did_you_mean
from .._fs import from_origin
from .._import_path import is_import_path
from ._arrays import SPLIT_OPTIONS, load_arrays, load_function
from ._dataset import EVALUATED as EVALUATED
from ._dataset import SPLITS as SPLITS
from ._dataset import Dataset as Dataset
from ._dataset import Split as Split
from ._dataset import as_dataset as as_dataset
from ._dataset import check_val_fraction
from ._exponax import check_exponax_problem, exponax_coordinates, exponax_stepper
from ._exponax import exponax_problem as exponax_problem
from ._hdf5 import HDF5Info as HDF5Info
from ._hdf5 import check_hdf5_options, hdf5_problem
from ._hdf5 import hdf5_info as hdf5_info
from ._hdf5_files import through
from ._hdf5_outline import hdf5_outline
from ._hdf5_reader import check_as_read, hdf5_trial_data
from ._hdf5_reader import hdf5_reader as hdf5_reader
from ._hdf5_reader import outlined as outlined
from ._hdf5_scan import Scan as Scan
from ._hdf5_scan import hdf5_statistics as hdf5_statistics
from ._hdf5_scan import loaded_scan
from ._hdf5_split import HDF5Split as HDF5Split
from ._hdf5_split import hdf5_split as hdf5_split
from ._heat1d import heat1d as heat1d
from ._heat1d import heat1d_coordinates
from ._history import OPTION as HISTORY
from ._history import check_history, with_history
from ._normalize import OPTION as NORMALIZE
from ._normalize import Normalization as Normalization
from ._normalize import channel_statistics as channel_statistics
from ._normalize import check_method, normalized, statistics
from ._normalize import normalizations_json as normalizations_json
from ._scenarios import APEBENCH, COMMON, EXPONAX, resolve_alias
from ._scenarios import STEPPERS as STEPPERS

GENERATORS = {"heat1d": heat1d}
COORDINATES = {"heat1d": heat1d_coordinates}  # generators whose points have known physical positions
OWN = (NORMALIZE, HISTORY)  # options of every kind that seed-sweep applies to the data a problem gives
PDE_PREFIXES = (EXPONAX, APEBENCH)  # the problems with an exponax stepper (pde_stepper)
PROBLEMS = (*GENERATORS, "arrays", "hdf5", f"{EXPONAX}<Stepper>", f"{APEBENCH}<scenario>_<N>d")


def _pde(name: str, options: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """``(stepper, options)`` of an ``exponax:<Stepper>`` problem or of an APEBench alias
    ``apebench:<scenario>_<N>d`` (``num_spatial_dims`` then set by the name); None for any other.
    The options seed-sweep applies itself (``normalize``, ``history``) are not the stepper's."""
    options = {k: v for k, v in options.items() if k not in OWN}
    if name.startswith(EXPONAX):
        return name.removeprefix(EXPONAX), options
    if not name.startswith(APEBENCH):
        return None
    stepper, dims = resolve_alias(name)
    if "num_spatial_dims" in options:
        raise SpecError(
            f"`problem.num_spatial_dims`: {name!r} says the dimensions ({dims}); remove the option, or name "
            f"another alias (apebench:<scenario>_<N>d)"
        )
    return stepper, {**options, "num_spatial_dims": dims}


def check_problem(name: str, options: Mapping[str, Any]) -> None:
    """Raise :class:`SpecError` unless ``name`` with ``options`` describes loadable data.

    Every kind takes ``val_fraction`` (a number in [0, 1)) and ``data_seed`` (an integer >= 0),
    which say how a validation split is carved from the training samples, ``normalize``
    (``"none"``, ``"zscore"``, ``"rms"``: :mod:`sweep.problems._normalize`) and ``history`` (an
    integer >= 1, for problems with trajectories: :mod:`sweep.problems._history`).
    """
    if NORMALIZE in options:
        check_method(options[NORMALIZE])
    if HISTORY in options:
        check_history(options[HISTORY])
    if name != "hdf5":  # hdf5 takes them among its own options
        options = {k: v for k, v in options.items() if k not in OWN}
    if "val_fraction" in options:
        check_val_fraction(options["val_fraction"])
    seed = options.get("data_seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise SpecError(f"`problem.data_seed`: got {seed!r}; must be a non-negative integer")
    pde = _pde(name, options) if isinstance(name, str) else None
    if pde is not None:  # before import paths, which it looks like
        check_exponax_problem(*pde)
        return
    if is_import_path(name):
        return
    if name == "hdf5":
        check_hdf5_options(options)
        return
    if name == "arrays":
        allowed = ["path", "shape", "target_shape", *SPLIT_OPTIONS]
        unknown = sorted(set(options) - set(allowed))
        if "path" not in options or unknown:
            raise SpecError(
                f'`problem`: "arrays" takes path= (and shape= and target_shape= for Parquet, val_fraction=, '
                f"data_seed=); got {sorted(options)}" + "".join(did_you_mean(u, allowed) for u in unknown)
            )
        return
    if name not in GENERATORS:
        raise SpecError(
            f"`problem.name`: unknown problem {name!r}{did_you_mean(name, PROBLEMS)}; "
            f"choose one of {', '.join(PROBLEMS)} "
            f'or give a function as "package.module:function"'
        )
    params = inspect.signature(GENERATORS[name]).parameters
    hints = typing.get_type_hints(GENERATORS[name])
    for key, value in options.items():
        if key in SPLIT_OPTIONS:
            continue  # checked above
        if key not in params:
            raise SpecError(
                f"`problem.{key}`: not an option of {name}{did_you_mean(key, params)}; allowed: {', '.join(params)}"
            )
        default = params[key].default
        choices = typing.get_args(hints.get(key)) if typing.get_origin(hints.get(key)) is typing.Literal else None
        if choices is not None and value not in choices:
            raise SpecError(
                f"`problem.{key}`: got {value!r}{did_you_mean(str(value), choices)}; choose one of "
                f"{', '.join(map(repr, choices))}"
            )
        if isinstance(default, int) and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise SpecError(f"`problem.{key}`: got {value!r}; must be a non-negative integer")
        if isinstance(default, float) and (
            isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0
        ):
            raise SpecError(f"`problem.{key}`: got {value!r}; must be a positive number")
    if "test_fraction" in options and not 0 < options["test_fraction"] < 1:
        raise SpecError(f"`problem.test_fraction`: got {options['test_fraction']!r}; must be in (0, 1)")
    fractions = {k: options.get(k, params[k].default) for k in ("test_fraction", "val_fraction") if k in params}
    if len(fractions) == 2 and sum(fractions.values()) >= 1:
        raise SpecError(
            f"`problem.val_fraction`: got {fractions['val_fraction']!r} with test_fraction "
            f"{fractions['test_fraction']!r}; together they must leave training samples (sum < 1)"
        )
    for key in ("num_points", "num_samples"):
        if key in options and options[key] < 2:
            raise SpecError(f"`problem.{key}`: got {options[key]!r}; must be >= 2")


def load_problem(name: str, options: Mapping[str, Any], filesystem: pafs.FileSystem | None = None) -> Dataset:
    """Generate or load the data of a problem, validated and split by :func:`as_dataset` (which
    every generator and loader returns through), normalised as ``normalize`` says (statistics
    of the training split: :mod:`sweep.problems._normalize`), then with ``history`` states per
    input (:mod:`sweep.problems._history`); ``"hdf5"`` does both itself, knowing its channels'
    names, and reads an ``s3://`` path through ``filesystem`` (the sweep's) where that is an
    ``S3FileSystem``."""
    if name == "hdf5":
        return hdf5_problem(filesystem=filesystem, **options)
    method, source = options.get(NORMALIZE, "none"), f"problem {name!r}"
    history = options.get(HISTORY, 1)  # > 1: every split's pairs derived from its trajectories (given ones unused)
    data = _loaded(name, {k: v for k, v in options.items() if k not in OWN}, pairs=history == 1)
    if method != "none":
        data = normalized(data, statistics(data, method, source=source), source)
    return with_history(data, history, source)


class ProblemData(NamedTuple):
    """A problem's data as trials get them: its arrays (``arrays``: a problem generated or loaded
    where the sweep runs), or none, for a problem that reads files (``"hdf5"``), whose trials read
    them from its ``options``' path themselves, with the driver's pass (``scan``: the statistics,
    not computed again): every split left in the files, to the trainer, which reads each at once
    where it fits the trial's data budget, else in windows (training) or parts (validation, test;
    :mod:`sweep.problems._hdf5_reader`). An ``s3://`` path is read through ``filesystem`` (the
    sweep's: its endpoint and credentials) where that is an ``S3FileSystem``; the trainer does not
    reach that filesystem, so such a trial holds its splits whole (read through it). A
    relative local path is taken from ``origin``, the folder the sweep was started in (the
    driver's current directory, :func:`outline_problem`), wherever a trial runs and whatever its
    working directory (Tune gives each trial its own); ``None``: the current directory.

    Examples:
        >>> data = ProblemData("heat1d", {"num_points": 16, "num_samples": 10}).load()
        >>> data.train.x.shape
        (7, 1, 16)
    """

    name: str
    options: dict[str, Any]
    arrays: Dataset | None = None
    filesystem: pafs.FileSystem | None = None
    scan: Scan | None = None
    origin: str | None = None

    def load(self) -> Dataset:
        """The arrays given, else the problem loaded here (:func:`load_problem`; for ``"hdf5"``
        without its training split: :func:`~._hdf5_reader.hdf5_trial_data`, unless the files are
        read through the sweep's ``S3FileSystem``)."""
        if self.arrays is not None:
            return self.arrays
        if self.name == "hdf5" and not through(str(self.options["path"]), self.filesystem):
            return hdf5_trial_data(scan=self.scan, origin=self.origin, **self.options)
        data = load_problem(self.name, self.options, self.filesystem)
        if self.name == "hdf5" and self.scan is not None:  # its statistics as the driver's (no digest made here)
            check_as_read(str(self.options["path"]), self.scan, Scan(self.scan.files, data.normalization, ""))
        return data


class Outline(NamedTuple):
    """What the driver of a sweep holds of a problem (:func:`outline_problem`).

    Attributes:
        shapes: The problem's :class:`Dataset` at its full shapes, to check and size on; where the
            trials read files (``"hdf5"``) its arrays are zero-copy views of their first rows.
        kept: A :class:`Dataset` whose first rows are the problem's: what a sweep keeps of its
            validation and test splits (``samples.parquet``, ``trajectories.parquet``) and its
            normalisation statistics.
        data: How the trials get the data (:class:`ProblemData`).
        scan: The driver's pass over the files of a problem that reads them (``"hdf5"``: the
            statistics, every split checked finite, the files' sizes and times, a digest of the
            states; ``"arrays"``: its file's, with a digest of its arrays), which a sweep keeps
            for its later runs; None for any other problem.
    """

    shapes: Dataset
    kept: Dataset
    data: ProblemData
    scan: Scan | None = None


def outline_problem(
    name: str,
    options: Mapping[str, Any],
    samples: int,
    trajectories: int,
    filesystem: pafs.FileSystem | None = None,
    scan: Scan | None = None,
) -> Outline:
    """The :class:`Outline` of a problem: for ``"hdf5"`` from the files' metadata, the driver's
    pass (statistics, every split checked finite; taken from ``scan`` where that was made of the
    same files as they are now) and the first ``samples`` pairs and ``trajectories`` trajectories
    of the validation and test splits (:func:`~._hdf5_outline.hdf5_outline`), an ``s3://`` path
    read through ``filesystem`` (the sweep's) where that is an ``S3FileSystem``, a relative local
    path from the current directory, which the trials get as the problem's ``origin``
    (:class:`ProblemData`: the one place a sweep's relative paths are taken from); any other
    problem is loaded here."""
    if name == "hdf5":
        shapes, kept, scan = hdf5_outline(
            samples=samples, trajectories=trajectories, filesystem=filesystem, scan=scan, **options
        )
        return Outline(shapes, kept, ProblemData(name, dict(options), None, filesystem, scan, os.getcwd()), scan)
    data = load_problem(name, options)
    path = options.get("path")
    scan = loaded_scan(str(path), from_origin(path), data) if name == "arrays" and path else None  # a user's file
    return Outline(data, data, ProblemData(name, dict(options), data), scan)


def _loaded(name: str, options: Mapping[str, Any], pairs: bool = True) -> Dataset:
    if name in GENERATORS:
        return GENERATORS[name](**options)
    pde = _pde(name, options)
    if pde is not None:
        return exponax_problem(pde[0], **pde[1])
    if name == "arrays":
        shape, target_shape = options.get("shape"), options.get("target_shape")
        split = {k: options[k] for k in SPLIT_OPTIONS if k in options}
        target = None if target_shape is None else tuple(target_shape)
        return load_arrays(options["path"], tuple(shape) if shape else None, target_shape=target, pairs=pairs, **split)
    return load_function(name, dict(options))


def pde_stepper(name: str, options: Mapping[str, Any], time_scale: float = 1.0):
    """The exponax stepper of an ``exponax:<Stepper>`` or ``apebench:<scenario>_<N>d`` problem
    (:func:`~._exponax.exponax_stepper`; ``time_scale``: a fraction of its ``dt``), or a
    :class:`SpecError` for any other problem."""
    pde = _pde(name, options)
    if pde is None:
        raise SpecError(
            f"`problem.name`: got {name!r}; a reference or coarse stepper needs a PDE problem, "
            f'"exponax:<Stepper>" or "apebench:<scenario>_<N>d"'
        )
    return exponax_stepper(pde[0], time_scale, **pde[1])


def pde_steps_checked(spec: Any) -> Any:
    """``spec`` (a :class:`sweep.SweepSpec`, with no grid), or its ``training.unroll`` or
    ``rollout_steps`` longer than its ``exponax:`` or ``apebench:`` problem's trajectories
    (validation's are test's) refused from the options before they are solved (minutes at
    APEBench's sizes), as ``load_data`` refuses it; options their own checks refuse are left to them."""
    name, options = spec.problem.name, spec.problem.options
    unroll, rollout = spec.training.unroll, spec.training.rollout_steps
    if unroll <= 1 and not rollout:
        return spec
    try:
        pde = _pde(name, options)
    except SpecError:
        return spec
    if pde is None:
        return spec
    train, test = (pde[1].get(k, COMMON[k]) for k in ("train_steps", "test_steps"))
    history = options.get(HISTORY, 1)
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (train, test, history)):
        return spec
    if unroll > train:
        raise SpecError(
            f"`training.unroll`: got {unroll}; the training trajectories of {name!r} have {train} steps "
            f"(problem.train_steps); unroll must be <= that"
        )
    if rollout > (after := test + 1 - history):
        more = f" after the first {history} states (history)" if history > 1 else ""
        raise SpecError(
            f"`training.rollout_steps`: got {rollout}; the validation and test trajectories of {name!r} "
            f"have {after} steps{more} (problem.test_steps); rollout_steps must be <= that"
        )
    return spec


def coordinates(name: str, options: Mapping[str, Any]) -> np.ndarray | None:
    """The physical positions of a sample's points (a 1-D array), or None where the problem does not know them."""
    options = {k: v for k, v in options.items() if k not in OWN}
    pde = _pde(name, options)
    if pde is not None:
        return exponax_coordinates(pde[0], **pde[1])
    return COORDINATES[name](**options) if name in COORDINATES else None
