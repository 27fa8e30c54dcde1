"""Trained tiny blocks and fake sweep directories, shared by the store / aggregate / ensemble tests."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np

import sweep
from sweep.checkpoint import SavedBlock, save_block
from sweep.trainer import History, chunks, data_shapes, load_data
from sweep.tune._plan import Plan, TrialPlan, make_plan


@functools.lru_cache(maxsize=None)
def _trained(trial_json: str, num_chunks: int | None) -> SavedBlock:
    trial = TrialPlan.from_dict(json.loads(trial_json))
    data = load_data(trial.spec)
    block, state = sweep.init_block(trial.spec, trial.seeds, trial.hparams, data)
    epochs, train, test = [], [], []
    for n in chunks(trial.spec.training)[:num_chunks]:
        state, (tr, te) = sweep.run_chunk(block, state, n)
        epochs.append(int(state.epoch[0]))
        train.append(np.asarray(tr))
        test.append(np.asarray(te))
    history = History(block.seeds, block.hparams, np.asarray(epochs, np.int32), np.stack(train, 1),
                      np.stack(test, 1), np.asarray(state.diverged))
    return SavedBlock(trial.spec, block.seeds, block.hparams, data_shapes(data), state, history,
                      trial.trial_key, num_chunks is not None)


def train_trial(trial: TrialPlan, num_chunks: int | None = None) -> SavedBlock:
    """The trial's block trained in-process (cached); ``num_chunks`` stops it early."""
    return _trained(json.dumps(trial.to_dict(), sort_keys=True), num_chunks)


def trained_blocks(plan: Plan) -> list[SavedBlock]:
    return [train_trial(t) for t in plan.trials]


def write_sweep(root: Path, plan: Plan, blocks: list[SavedBlock]) -> Path:
    """A sweep directory as the orchestration layer leaves it: plan.json plus Ray Tune checkpoints."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "plan.json").write_text(json.dumps(plan.to_dict()))
    for b in blocks:
        save_block(root / "run" / f"trial_{b.trial_id}" / "checkpoint_000001", spec=b.spec, state=b.state,
                   history=b.history, shapes=b.shapes, trial_id=b.trial_id, stopped_early=b.stopped_early)
    return root


def plan_of(spec: sweep.SweepSpec) -> Plan:
    return make_plan(spec)
