"""Checks that run on the driver before any trial starts, and the datasets they load.

Each raises :class:`SpecError` naming the field, the value and what is allowed.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence

import pyarrow.fs as pafs

from .._errors import SpecError
from ..problems import Dataset, load_problem
from ..spec import SweepSpec
from ..training import check_data


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


def load_datasets(spec: SweepSpec) -> dict[str, Dataset]:
    """Every structural config's dataset by ``problem_id``, loaded once per distinct problem (its
    arrays checked), and every config checked against it (batch size, and its model built with
    ``eqx.filter_eval_shape`` for the data's shapes): :func:`sweep.training.check_data`."""
    datasets: dict[str, Dataset] = {}
    for config, _ in spec.expand():
        if config.problem_id not in datasets:
            datasets[config.problem_id] = load_problem(config.problem.name, dict(config.problem.options))
        check_data(config, datasets[config.problem_id])
    return datasets
