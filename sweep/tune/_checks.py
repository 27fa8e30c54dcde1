"""Checks that run on the driver before any trial starts, and the outlines of the data they check.

Each raises :class:`SpecError` naming the field, the value and what is allowed.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow.fs as pafs

from .._errors import SpecError, warn
from .._fs import exists
from .._import_path import import_object, is_import_path
from .._layout import PLAN
from ..planning import MemberId
from ..problems import Outline, Scan, outline_problem
from ..spec import SweepSpec
from ..store import SAMPLE_COUNT, TRAJECTORY_COUNT, SweepDir
from ..training import BlockRef, check_data


def check_resources(resources: Mapping[str, float], nodes: Sequence[Mapping[str, float]]) -> None:
    """A trial's CPUs and GPUs must fit on one node of the cluster (as it is now).

    ``nodes``: the ``Resources`` of every alive Ray node.
    """
    for field, name in (("gpu", "GPU"), ("cpu", "CPU")):
        want = float(resources.get(field, 0))
        if want <= 0:
            continue
        per_node = [float(n.get(name, 0)) for n in nodes] or [0.0]
        if want > max(per_node):
            total = sum(per_node)
            raise SpecError(
                f"`resources.{field}`: got {want:g}; the Ray cluster has {total:g} {name}(s) "
                f"(at most {max(per_node):g} on one node), and a trial's {name}s must be on one node"
            )


def check_not_inside_a_sweep(sweep_dir: SweepDir) -> None:
    """Refuse a new sweep whose ``storage`` is itself a sweep's directory (``--storage runs/tiny``
    for ``runs``): it would be made inside the other, unseen by ``sweep show runs``."""
    storage = sweep_dir.path.rsplit("/", 1)[0]
    if sweep_dir.plan() is None and exists(sweep_dir.filesystem, f"{storage}/{PLAN}"):
        parent = storage.rsplit("/", 1)[0] if "/" in storage else "."
        raise SpecError(
            f"`storage`: {storage!r} is a sweep's directory (it holds {PLAN}); give the folder that holds sweeps, "
            f"such as {parent!r}, and this sweep's directory is made beside it"
        )


def check_writable(filesystem: pafs.FileSystem, path: str, shown: str) -> None:
    """Create ``path`` and write, then delete, a probe file in it."""
    probe = f"{path}/.write-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        filesystem.create_dir(path, recursive=True)
        with filesystem.open_output_stream(probe) as f:
            f.write(b"ok")
        filesystem.delete_file(probe)
    except Exception as e:  # pyarrow raises OSError, FileNotFoundError, PermissionError, ...
        raise SpecError(
            f"`storage`: {shown!r} is not writable ({type(e).__name__}: {e}); "
            f"give a directory or bucket this process can write to"
        ) from None


def outline_datasets(
    spec: SweepSpec, filesystem: pafs.FileSystem | None = None, scans: Mapping[str, Scan] | None = None
) -> dict[str, Outline]:
    """Every structural config's problem by ``problem_id``, outlined once per distinct problem
    (:func:`sweep.problems.outline_problem`: a problem that reads files is not loaded here, only
    its metadata, the driver's pass (statistics, every split checked finite; from ``scans``, by
    problem id, where the files have not changed) and the rows a sweep keeps, through
    ``filesystem``, the sweep's; any other is loaded, its arrays checked), and every config
    checked against its shapes (batch size, and its model built with ``eqx.filter_eval_shape``):
    :func:`sweep.training.check_data`; a race needs a validation set (:func:`check_validated`)."""
    outlines: dict[str, Outline] = {}
    scans = scans or {}
    for config, _ in spec.expand():
        key = config.problem_id
        if key not in outlines:
            options = dict(config.problem.options)
            try:
                outlines[key] = outline_problem(
                    config.problem.name, options, SAMPLE_COUNT, TRAJECTORY_COUNT, filesystem, scans.get(key)
                )
            except SpecError as e:
                raise _from_the_grid(e, spec, options) from None
        check_data(config, outlines[key].shapes)
    check_validated(spec, all(outline.shapes.val.size for outline in outlines.values()))
    return outlines


def _from_the_grid(error: SpecError, spec: SweepSpec, options: Mapping[str, Any]) -> SpecError:
    """``error`` about a problem's field (```problem.fields`: ...``) named as the grid value it
    came from, where the grid sets that field (the spec file has no other line of it)."""
    field, _, rest = str(error).removeprefix("`").partition("`: ")
    name = field.removeprefix("problem.")
    if not str(error).startswith("`problem.") or not rest or field not in spec.grid or name not in options:
        return error
    return SpecError(f"`grid.{field}` = {json.dumps(options[name])}: {rest}")


def trained_configs(done: Iterable[MemberId], blocks: Mapping[str, BlockRef]) -> set[str]:
    """The configurations a sweep directory has trained members of (``SweepDir.done``'s): a
    checkpoint, whole or not, or a trial stopped early."""
    return {m.config_id for m in done} | {ref.config_id for ref in blocks.values()}


def check_same_data(
    spec: SweepSpec, before: Mapping[str, Scan], outlines: Mapping[str, Outline], trained_ids: set[str]
) -> None:
    """A problem that reads files (``"hdf5"``, ``"arrays"``) whose files changed (other files,
    sizes or statistics: :meth:`Scan.change_from`) since members of configurations
    ``trained_ids`` (:func:`trained_configs`) were trained on them is refused: a resumed trial
    would go on, and the members a run adds would be trained, on other data than the old ones,
    and the store would turn every member's outputs into physical units with the new statistics."""
    trained = {c.problem_id: c for c, _ in spec.expand() if c.config_id in trained_ids}  # a problem once
    for key, config in trained.items():
        then, now = before.get(key), outlines[key].scan if key in outlines else None
        if then is None or now is None:
            continue
        change = now.change_from(then)
        if change is not None:
            raise SpecError(
                f"`problem.path` = {config.problem.options.get('path')!r}: the data changed since members of this "
                f"sweep were trained on it ({change}); members trained from now on (resumed or added) would see other "
                f"data, and the store would map the old members' outputs with the new statistics. Train on the changed data in a "
                f"new sweep (another `name`, or another --storage), or put the original files back"
            )


def check_validated(spec: SweepSpec, validated: bool) -> None:
    """A race compares validation values: the data must have a validation set."""
    adaptive = spec.adaptive
    if adaptive is not None and not validated:
        raise SpecError(
            f"`seeds.adaptive.metric`: {adaptive.metric!r} needs a validation set, and the problem has none "
            f"(problem.val_fraction=0); give it one, e.g. val_fraction=0.1"
        )


def import_paths(spec: SweepSpec) -> dict[str, str]:
    """Every ``"module:attribute"`` the spec names (models, problems, losses, metrics), by the
    field that names it (``model.name``, ``training.metrics[1]``, ...)."""
    found: dict[str, str] = {}

    def walk(value, field: str) -> None:
        if isinstance(value, str) and is_import_path(value):
            found.setdefault(field, value)
        elif isinstance(value, Mapping):
            for key, item in value.items():
                walk(item, f"{field}.{key}" if field else str(key))
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                walk(item, f"{field}[{i}]")

    for config, _ in spec.expand():
        walk(config.to_dict(), "")
    return found


def _import_all(paths: dict[str, str]) -> list[str]:
    """On a worker: the error of every import path that does not import there (none: [])."""
    errors = []
    for field, path in paths.items():
        try:
            import_object(path, field)
        except SpecError as e:
            errors.append(str(e))
    return errors


def check_main_paths(spec: SweepSpec, in_process: bool) -> None:
    """Code the spec names in the running script (``"__main__:net"``): refused where trials run
    in other processes (Ray's workers: their ``__main__`` is not this script); in this process, a
    warning that only this script can load the store it makes."""
    found = {field: path for field, path in import_paths(spec).items() if path.partition(":")[0] == "__main__"}
    if not found:
        return
    field, path = next(iter(found.items()))
    module = f"'my_models:{path.partition(':')[2]}'"
    if not in_process:
        raise SpecError(
            f"`{field}`: {path!r} names the script being run, and trials run in Ray's worker processes, whose "
            f"__main__ is not this script: put it in a module (e.g. my_models.py beside the script or the spec) and "
            f"name it {module}, or train in this process (RunOptions(executor='local'), --executor local)"
        )
    warn(
        f"`{field}`: {path!r} names the script being run: the store names it too, and only this script can load "
        f"it (another process's __main__ is not this script); to share the store, put it in a module and name it "
        f"{module}"
    )


def check_worker_imports(spec: SweepSpec) -> None:
    """Import every import path of ``spec`` in a Ray task with a trial's resources (where trials
    run), so that a module the cluster's workers cannot import is named before any trial starts."""
    import ray

    paths = import_paths(spec)
    if not paths:
        return
    res = spec.resources
    task = ray.remote(num_cpus=res["cpu"], num_gpus=res["gpu"], max_calls=1)(_import_all)
    errors = ray.get(task.remote(paths))
    if errors:
        raise SpecError(
            f"{errors[0]}, on the Ray cluster's workers (this process imports it); install it on every node, "
            f"or send it with Ray's runtime_env, e.g. ray.init(runtime_env={{'py_modules': [...]}}) or "
            f"{{'working_dir': '.'}} before sweep.run"
        )
