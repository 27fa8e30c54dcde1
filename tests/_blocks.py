"""Trained tiny blocks and fake sweep directories, shared by the store / aggregate / ensemble tests."""

from __future__ import annotations

import functools
import itertools
import json
from pathlib import Path

import pyarrow.fs as pafs
from helpers import tiny_spec

import sweep
from sweep.planning import Plan, TrialPlan, make_plan
from sweep.store import write_samples
from sweep.training import SavedBlock, data_shapes, save_block

# The plan of the store the store-format tests corrupt (``original`` / ``store`` in conftest.py).
STORE_PLAN = make_plan(tiny_spec(grid={"model.depth": [1, 2], "optimizer.learning_rate": [1e-3, 3e-3]}))
# A problem with reference test trajectories (kept with the samples and in the store).
TRAJ = make_plan(
    tiny_spec(
        problem=sweep.Problem("heat1d", num_points=16, num_samples=60, trajectory_steps=5),
        seeds=2,
        grid={"model.depth": [1, 2]},
    )
)


@functools.cache
def _trained(trial_json: str, num_chunks: int | None) -> SavedBlock:
    trial = TrialPlan.from_dict(json.loads(trial_json))
    data = sweep.load_data(trial.spec)
    block, state = sweep.init_block(trial.spec, trial.seeds, trial.hparams, data)
    state, history = list(itertools.islice(sweep.fit(block, state), num_chunks))[-1]
    return SavedBlock(
        trial.spec,
        block.seeds,
        block.hparams,
        data_shapes(data),
        state,
        history,
        trial.trial_key,
        num_chunks is not None,
    )


def train_trial(trial: TrialPlan, num_chunks: int | None = None) -> SavedBlock:
    """The trial's block trained in-process (cached); ``num_chunks`` stops it early."""
    return _trained(json.dumps(trial.to_dict(), sort_keys=True), num_chunks)


def trained_blocks(plan: Plan) -> list[SavedBlock]:
    return [train_trial(t) for t in plan.trials]


def datasets_of(plan: Plan) -> dict[str, sweep.Dataset]:
    """Every problem's dataset of a plan, by problem id (as ``sweep.run`` loads them)."""
    return {t.spec.problem_id: _data(json.dumps(t.spec.problem.to_dict(), sort_keys=True)) for t in plan.trials}


@functools.cache
def _data(problem_json: str) -> sweep.Dataset:
    from sweep.problems import load_problem

    problem = json.loads(problem_json)
    return load_problem(problem.pop("name"), problem)


def write_sweep(root: Path, plan: Plan, blocks: list[SavedBlock], samples: bool = True) -> Path:
    """A sweep directory as the orchestration layer leaves it: plan.json, the problems' test
    samples (unless ``samples=False``) and Ray Tune checkpoints."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "plan.json").write_text(json.dumps(plan.to_dict()))
    if samples:
        write_samples(pafs.LocalFileSystem(), str(root), datasets_of(plan))
    for b in blocks:
        save_block(
            root / "run" / f"trial_{b.trial_id}" / "checkpoint_000001",
            spec=b.spec,
            state=b.state,
            history=b.history,
            shapes=b.shapes,
            trial_id=b.trial_id,
            stopped_early=b.stopped_early,
        )
    return root


def plan_of(spec: sweep.SweepSpec) -> Plan:
    return make_plan(spec)
