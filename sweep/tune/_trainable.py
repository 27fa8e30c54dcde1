"""The Ray Tune function trainable: one trial trains one block and checkpoints every report.

A trial (1) confines JAX to its resources before JAX starts (:mod:`._env`), (2) takes its
dataset from the object store, (3) resumes from ``tune.get_checkpoint()`` or from a partial
checkpoint of the same trial key left by an earlier run, then (4) runs one compiled chunk of
``report_every`` epochs per report, saving the block with :func:`sweep.checkpoint.save_block`
and reporting it with ``tune.report(metrics, checkpoint=...)``.

Test hooks (read on the driver from ``SWEEP_TEST_*`` variables and passed in ``hooks``):
``SWEEP_TEST_BARRIER="dir:n:timeout_s"`` waits at start until n trials have started;
``SWEEP_TEST_KILL_ONCE=marker`` SIGKILLs the first trial process to report after checkpoint 1
(once per marker file); ``SWEEP_TEST_SLEEP_AFTER_REPORT=s`` sleeps after every report.
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .._storage import local_copy
from .._errors import StoreError
from ..checkpoint import SavedBlock, load_block, save_block
from ..trainer import History, chunks, data_shapes, init_block, run_chunk
from . import _env
from ._auto import problem_key
from ._plan import TrialPlan

HOOK_PREFIX = "SWEEP_TEST_"


def hooks_from_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(HOOK_PREFIX)}


def block_metrics(history, planned_epochs: int) -> dict[str, Any]:
    """Block statistics of the latest report (diverged members left out of the statistics)."""
    ok = ~np.asarray(history.diverged)
    out: dict[str, Any] = {}
    for name, losses in (("test_loss", history.test_loss), ("train_loss", history.train_loss)):
        latest = np.asarray(losses[:, -1], np.float64)
        good = latest[ok & np.isfinite(latest)]
        out[f"{name}_mean"] = float(good.mean()) if good.size else float("inf")
        out[f"{name}_min"] = float(good.min()) if good.size else float("inf")
        out[f"{name}_max"] = float(good.max()) if good.size else float("inf")
        out[f"{name}_std"] = float(good.std()) if good.size else float("nan")
        out[f"member_{name}"] = latest.tolist()
    epoch = int(history.epoch[-1]) if len(history.epoch) else 0
    members = int(ok.size)
    out.update(
        diverged=int((~ok).sum()), members=members, epoch=epoch,
        members_done=members if epoch >= planned_epochs else 0,
        member_seeds=[s for _ in history.hparams for s in history.seeds],
    )
    return out


def _barrier(spec: str, name: str) -> bool:
    directory, n, timeout = spec.rsplit(":", 2)
    Path(directory).mkdir(parents=True, exist_ok=True)
    (Path(directory) / f"{name}-{os.getpid()}").touch()
    deadline = time.monotonic() + float(timeout)
    while time.monotonic() < deadline:
        if len(list(Path(directory).iterdir())) >= int(n):
            return True
        time.sleep(0.1)
    return False


def _kill_once(marker: str) -> None:
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.close(fd)
    os.kill(os.getpid(), signal.SIGKILL)


def _saved_block(trial: TrialPlan, resume_from: Mapping[str, str], filesystem) -> SavedBlock | None:
    """The trial's Tune checkpoint (a restarted trial), else a partial checkpoint of the same
    trial key left by an earlier run, else None."""
    from ray import tune

    checkpoint = tune.get_checkpoint()
    saved = None
    if checkpoint is not None:
        with checkpoint.as_directory() as d:
            saved = load_block(d)
    elif trial.trial_key in resume_from:
        with local_copy(filesystem, resume_from[trial.trial_key]) as d:
            saved = load_block(d)
    if saved is not None and (saved.seeds != trial.seeds or saved.trial_id != trial.trial_key):
        raise StoreError(f"checkpoint of trial {saved.trial_id!r} (seeds {saved.seeds}) does not belong to "
                         f"trial {trial.trial_key!r} (seeds {trial.seeds}); it cannot be resumed")
    return saved


def _remaining_chunks(training, done_epochs: int) -> list[int]:
    out, total = [], 0
    for n in chunks(training):
        total += n
        if total > done_epochs:
            out.append(n)
    return out


def train_trial(config: Mapping[str, Any], *, trials: Mapping[str, dict], data: Mapping[str, Any],
                hooks: Mapping[str, str], resume_from: Mapping[str, str], filesystem=None) -> None:
    """Train the block of trial ``config["trial_key"]`` (a Tune function trainable)."""
    start_time = time.time()
    planned = trials[config["trial_key"]]
    env_info = _env.apply(planned["spec"]["resources"])  # before anything can start JAX

    import ray
    from ray import tune

    barrier_met = _barrier(hooks["SWEEP_TEST_BARRIER"], config["trial_key"]) if "SWEEP_TEST_BARRIER" in hooks else None
    trial = TrialPlan.from_dict(planned)
    dataset = ray.get(data[problem_key(trial.spec)])
    block, state = init_block(trial.spec, trial.seeds, trial.hparams, dataset)
    epochs: list[int] = []
    train_hist: list[np.ndarray] = []
    test_hist: list[np.ndarray] = []
    saved = _saved_block(trial, resume_from, filesystem)
    if saved is not None:
        state = saved.state
        epochs = [int(e) for e in saved.history.epoch]
        train_hist = list(np.asarray(saved.history.train_loss).T)
        test_hist = list(np.asarray(saved.history.test_loss).T)
    resumed_from = epochs[-1] if epochs else 0

    info = {
        "trial_key": trial.trial_key, "config_id": trial.config_id,
        "node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid(),
        "start_time": start_time, "resumed_from_epoch": resumed_from, **env_info,
    }
    if barrier_met is not None:
        info["barrier_met"] = barrier_met
    planned_epochs = trial.spec.training.epochs
    shapes = data_shapes(dataset)

    def history() -> History:
        return History(trial.seeds, trial.hparams, np.asarray(epochs, np.int32),
                       np.stack(train_hist, axis=1), np.stack(test_hist, axis=1), np.asarray(state.diverged))

    todo = _remaining_chunks(trial.spec.training, resumed_from)
    if not todo and epochs:  # already complete: report where it stands
        tune.report({**block_metrics(history(), planned_epochs), **info, "report_time": time.time()})
        return
    for n in todo:
        state, (train, test) = run_chunk(block, state, n)
        epochs.append(int(state.epoch[0]))
        train_hist.append(np.asarray(train))
        test_hist.append(np.asarray(test))
        hist = history()
        with tempfile.TemporaryDirectory(prefix="sweep-ckpt-") as tmp:
            path = save_block(Path(tmp) / "block", spec=trial.spec, state=state, history=hist,
                              shapes=shapes, trial_id=trial.trial_key)
            metrics = {**block_metrics(hist, planned_epochs), **info, "report_time": time.time()}
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(str(path)))
        if "SWEEP_TEST_KILL_ONCE" in hooks:
            _kill_once(hooks["SWEEP_TEST_KILL_ONCE"])
        if "SWEEP_TEST_SLEEP_AFTER_REPORT" in hooks:
            time.sleep(float(hooks["SWEEP_TEST_SLEEP_AFTER_REPORT"]))
