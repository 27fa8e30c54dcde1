"""The sweep directory on any pyarrow filesystem: plan.json, Tune experiments, what is done.

Layout (``<storage>/<spec.name>/``)::

    plan.json                    every trial ever planned (union over runs) + scheduler-stopped ones
    tune-0001/                   one Ray Tune experiment per ``sweep.run`` call
        <trial_key>/checkpoint_000001/{block.json,state.eqx}
        experiment_state-*.json, tuner.pkl, ...   (Tune's own files)
    tune-0002/ ...               a later run (more seeds: only the new members)
    ensembles/                   the aggregator's store (sweep.aggregate)
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from typing import Any

import pyarrow.fs as pafs

from .._storage import BlockRef, find_blocks, read_text, resolve, write_text_atomic
from ..spec import SweepSpec
from ._plan import PLAN_FILE, Plan, hparams_key

EXPERIMENT_PREFIX = "tune-"
_EXPERIMENT = re.compile(rf"^{EXPERIMENT_PREFIX}(\d+)$")


def locate(spec: SweepSpec, storage: str | os.PathLike, filesystem: pafs.FileSystem | None
           ) -> tuple[pafs.FileSystem, str, str]:
    """``(filesystem, sweep path inside it, sweep dir as the user will see it)``.

    The shown form keeps the user's spelling for remote storage (``s3://bucket/x/name`` or the
    path inside ``filesystem``) and is absolute for local paths.
    """
    fs, root = resolve(storage, filesystem)
    path = f"{root.rstrip('/')}/{spec.name}"
    if isinstance(fs, pafs.LocalFileSystem):
        return fs, path, path
    return fs, path, f"{str(storage).rstrip('/')}/{spec.name}"


def read_plan(fs: pafs.FileSystem, path: str) -> dict[str, Any] | None:
    info = fs.get_file_info(f"{path}/{PLAN_FILE}")
    if info.type == pafs.FileType.NotFound:
        return None
    return json.loads(read_text(fs, f"{path}/{PLAN_FILE}"))


def write_plan(fs: pafs.FileSystem, path: str, plan: Plan, stopped: Iterable[str] = ()) -> None:
    """``plan.json``: :meth:`Plan.to_dict` plus ``stopped_trials`` (stopped by a scheduler)."""
    data = plan.to_dict()
    data["stopped_trials"] = sorted(set(stopped))
    write_text_atomic(fs, f"{path}/{PLAN_FILE}", json.dumps(data, indent=1))


def experiments(fs: pafs.FileSystem, path: str) -> list[str]:
    """Names of the Tune experiments of this sweep, oldest first."""
    infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    found = [(int(m.group(1)), i.base_name) for i in infos
             if i.type == pafs.FileType.Directory and (m := _EXPERIMENT.match(i.base_name))]
    return [name for _, name in sorted(found)]


def next_experiment(fs: pafs.FileSystem, path: str) -> str:
    names = experiments(fs, path)
    last = int(_EXPERIMENT.match(names[-1]).group(1)) if names else 0
    return f"{EXPERIMENT_PREFIX}{last + 1:04d}"


def done_members(spec: SweepSpec, fs: pafs.FileSystem, path: str, stored_plan: dict[str, Any] | None
                 ) -> tuple[set[tuple[int | str, ...]], dict[str, BlockRef]]:
    """Members not to train again, as ``(config_id, seed, hparams_key)``, and every trial's
    newest checkpoint.

    A member is done when a complete checkpoint (its config's planned epochs) covers it, or when
    its trial was stopped early by a scheduler (``stopped_trials`` in ``plan.json``).
    """
    planned_epochs = {config.config_id: config.training.epochs for config, _ in spec.expand()}
    blocks = find_blocks(path, fs)
    done: set[tuple[int | str, ...]] = set()
    for ref in blocks.values():
        epochs = planned_epochs.get(ref.config_id)
        if epochs is None or ref.epoch < epochs:
            continue
        hparams = getattr(ref, "hparams", None) or json.loads(read_text(fs, f"{ref.path}/block.json"))["hparams"]
        for h in hparams:
            done.update((ref.config_id, s, hparams_key(h)) for s in ref.seeds)
    if stored_plan:
        stopped = set(stored_plan.get("stopped_trials", ()))
        for t in stored_plan["trials"]:
            if t["trial_key"] in stopped:
                for h in t["hparams"]:
                    done.update((t["config_id"], s, hparams_key(h)) for s in t["seeds"])
    return done, blocks
