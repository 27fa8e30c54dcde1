"""The sweep directory on any pyarrow filesystem: where it is, its Tune experiments, what is done.

Layout (``<storage>/<spec.name>/``)::

    plan.json                    every trial ever planned (union over runs) + scheduler-stopped ones
    tune-0001/                   one Ray Tune experiment per ``sweep.run`` call
        <trial_key>/checkpoint_000001/{block.json,state.eqx}
        experiment_state-*.json, tuner.pkl, ...   (Tune's own files)
    tune-0002/ ...               a later run (more seeds: only the new members)
    ensembles/                   the store (``sweep.aggregate``)
"""

from __future__ import annotations

import os
import re

import pyarrow.fs as pafs

from .._fs import filesystem_path, is_local
from ..planning import Plan, hparams_key
from ..spec import SweepSpec
from ..training import BlockRef, find_blocks

EXPERIMENT_PREFIX = "tune-"
_EXPERIMENT = re.compile(rf"^{EXPERIMENT_PREFIX}(\d+)$")

Member = tuple[str, int, str]  # (config_id, seed, hparams_key)


def sweep_location(
    spec: SweepSpec, storage: str | os.PathLike[str], filesystem: pafs.FileSystem | None
) -> tuple[pafs.FileSystem, str, str]:
    """``(filesystem, sweep path inside it, sweep dir as the user will see it)``.

    The shown form keeps the user's spelling for remote storage (``s3://bucket/x/name`` or the
    path inside ``filesystem``) and is absolute for local paths.
    """
    fs, root = filesystem_path(storage, filesystem)
    path = f"{root.rstrip('/')}/{spec.name}"
    if is_local(fs):
        return fs, path, path
    return fs, path, f"{str(storage).rstrip('/')}/{spec.name}"


def experiments(fs: pafs.FileSystem, path: str) -> list[str]:
    """Names of the Tune experiments of this sweep, oldest first."""
    infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    found = [
        (int(m.group(1)), i.base_name)
        for i in infos
        if i.type == pafs.FileType.Directory and (m := _EXPERIMENT.match(i.base_name))
    ]
    return [name for _, name in sorted(found)]


def next_experiment(fs: pafs.FileSystem, path: str) -> str:
    names = experiments(fs, path)
    last = int(names[-1].removeprefix(EXPERIMENT_PREFIX)) if names else 0  # names match _EXPERIMENT
    return f"{EXPERIMENT_PREFIX}{last + 1:04d}"


def done_members(
    spec: SweepSpec, fs: pafs.FileSystem, path: str, stored: Plan | None
) -> tuple[set[Member], dict[str, BlockRef]]:
    """Members not to train again and every trial's newest checkpoint.

    A member is done when a complete checkpoint (its config's planned epochs) covers it, or when
    its trial was stopped early by a scheduler (``stopped_trials`` in ``plan.json``).
    """
    planned_epochs = {config.config_id: config.training.epochs for config, _ in spec.expand()}
    blocks = find_blocks(path, fs)
    done: set[Member] = set()
    for ref in blocks.values():
        epochs = planned_epochs.get(ref.config_id)
        if epochs is not None and ref.epoch >= epochs:
            done.update((ref.config_id, s, hparams_key(h)) for h in ref.hparams for s in ref.seeds)
    if stored is not None:
        for t in stored.trials:
            if t.trial_key in stored.stopped_trials:
                done.update((t.config_id, s, hparams_key(h)) for h in t.hparams for s in t.seeds)
    return done, blocks
