"""A trained (or half-trained) block on disk: Equinox leaves of its state plus a small JSON.

Layout of a block directory (written aside and renamed into place, never pickled)::

    block.json   format, structural spec, seeds, hyperparameter sets, shapes, history, trial id
    state.eqx    eqx.tree_serialise_leaves(TrainState) of the block (leading member axis)

Trials write one per report (Ray Tune uploads it as a ``tune.Checkpoint``); the aggregator
and a restarted trial read it back with :func:`load_block`.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import equinox as eqx
import numpy as np

from ._errors import StoreError
from .spec import SweepSpec
from .trainer import History, TrainState, state_skeleton

FORMAT = 1
STATE_FILE = "state.eqx"
META_FILE = "block.json"


class SavedBlock(NamedTuple):
    spec: SweepSpec
    seeds: tuple[int, ...]
    hparams: tuple[dict[str, float], ...]
    shapes: tuple
    state: TrainState
    history: History
    trial_id: str
    stopped_early: bool


def _history_json(history: History) -> dict[str, Any]:
    return {
        "epoch": history.epoch.tolist(),
        "train_loss": np.asarray(history.train_loss, np.float64).tolist(),
        "test_loss": np.asarray(history.test_loss, np.float64).tolist(),
        "diverged": np.asarray(history.diverged).tolist(),
    }


def save_block(directory: str | os.PathLike, *, spec: SweepSpec, state: TrainState, history: History,
               shapes: tuple, trial_id: str = "", stopped_early: bool = False) -> Path:
    """Write a block directory atomically (a sibling temp dir renamed over ``directory``)."""
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    meta = {
        "format": FORMAT,
        "spec": spec.to_dict(),
        "config_id": spec.config_id,
        "seeds": list(history.seeds),
        "hparams": [dict(h) for h in history.hparams],
        "hparam_names": sorted(state.hparams),
        "shapes": [list(shapes[0]), shapes[1], shapes[2]],
        "history": _history_json(history),
        "trial_id": trial_id,
        "stopped_early": stopped_early,
    }
    eqx.tree_serialise_leaves(tmp / STATE_FILE, state)
    (tmp / META_FILE).write_text(json.dumps(meta))
    old = None
    if directory.exists():
        old = directory.with_name(f".{directory.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        directory.rename(old)
    tmp.rename(directory)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return directory


def load_block(directory: str | os.PathLike) -> SavedBlock:
    """Read a block directory written by :func:`save_block` (no pickle)."""
    directory = Path(directory)
    meta_path = directory / META_FILE
    try:
        meta = json.loads(meta_path.read_text())
    except FileNotFoundError:
        raise StoreError(f"{str(meta_path)!r}: missing; {str(directory)!r} is not a block checkpoint") from None
    except json.JSONDecodeError as e:
        raise StoreError(f"{str(meta_path)!r}: not valid JSON ({e})") from None
    if meta.get("format", 0) > FORMAT:
        raise StoreError(f"{str(meta_path)!r}: format {meta['format']} is newer than this seed-sweep reads ({FORMAT}); upgrade seed-sweep")
    spec = SweepSpec.from_dict(meta["spec"])
    seeds = tuple(meta["seeds"])
    hparams = tuple(meta["hparams"])
    shapes = (tuple(meta["shapes"][0]), meta["shapes"][1], meta["shapes"][2])
    skeleton = state_skeleton(spec, len(seeds) * len(hparams), meta["hparam_names"], shapes)
    try:
        state = eqx.tree_deserialise_leaves(directory / STATE_FILE, skeleton)
    except Exception as e:  # truncated or of another structure
        raise StoreError(f"{str(directory / STATE_FILE)!r}: cannot be read as this block's state ({e})") from None
    h = meta["history"]
    m = len(seeds) * len(hparams)
    history = History(
        seeds=seeds,
        hparams=hparams,
        epoch=np.asarray(h["epoch"], np.int32),
        train_loss=np.asarray(h["train_loss"], np.float32).reshape(m, -1),
        test_loss=np.asarray(h["test_loss"], np.float32).reshape(m, -1),
        diverged=np.asarray(h["diverged"], bool),
    )
    return SavedBlock(spec, seeds, hparams, shapes, state, history, meta["trial_id"], meta["stopped_early"])
