"""The Ray Tune function trainable: one trial trains one block, reporting and checkpointing it.

A trial (1) takes its own plan from the object store and confines JAX to its resources before
JAX starts (:mod:`._env`), (2) takes its dataset from the object store (a problem that reads
files: its options, and reads the files here, a relative path from the folder the sweep was
started in, not from the trial's working directory: :class:`~sweep.problems.ProblemData`), (3) resumes from
``tune.get_checkpoint()`` or from a partial checkpoint of the same trial key left by an
earlier run, then (4) trains with :func:`sweep.fit`, reporting with ``tune.report(metrics,
checkpoint=...)`` paced by :mod:`._cadence` (the block saved with
:func:`sweep.training.save_block` when a checkpoint is due). A SIGTERM (a preemption notice)
makes the trial checkpoint the chunk in progress and stop, so that Tune retries it from there
(:mod:`._preemption`); a streamed block that reported once stops at the next window boundary
instead, inside its epoch, and its checkpoint's report repeats the last report's metrics with
``paused_at: [epoch, window]`` (the trackers skip it: it adds nothing to the curves).

Tune reuses a worker process for the next trial with the same resources (``reuse_actors``,
on by default in ``sweep.run``): its JAX set-up, compiled programs (:mod:`sweep.training`'s
caches) and the last dataset (host and device arrays) stay, so
that a reused worker's trial costs its training and little else; the rounds of a race or a search
run in one experiment, so the workers serve every round.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple, cast

import numpy as np

from .._errors import StoreError
from .._fs import local_copy
from ..planning import TrialPlan
from ..problems import ProblemData
from ..store import curves_by_column, rollout_curves_by_column
from ..training import Block, SavedBlock, data_shapes, fit, init_block, read_block, reader_wait, save_block
from . import _env, _preemption
from ._cadence import Cadence, Pacer


class TrialHooks(NamedTuple):
    """Callables run inside every trial process (for fault injection and instrumentation).

    They must be picklable by reference (module-level functions or instances of module-level
    classes importable on every node). ``on_start(trial_key)`` runs before training and may
    return a dict of values reported with every result; ``after_report(trial_key, epoch)``
    runs after each report and checkpoint.
    """

    on_start: Callable[[str], Mapping[str, Any] | None] | None = None
    after_report: Callable[[str, int], None] | None = None


class TrialInputs(NamedTuple):
    """What every trial of an experiment gets (through ``tune.with_parameters``): handles, not data.

    ``trials`` is ``(board, run)``: the driver's plan board
    (:func:`sweep.tune._tune_executor.plan_board`), an actor holding, under the run's key ``run``,
    ``{trial_key: {"plan": TrialPlan.to_dict(), "resume_from": path of a partial checkpoint or
    None}}``, so a trial fetches its own plan only, whichever round added it, and the refs of the
    run's :class:`~sweep.problems.ProblemData` by problem id (dropped with the run's entry when the
    run ends, so that no later run keeps them in the object store).
    """

    trials: Any
    filesystem: Any
    hooks: TrialHooks
    cadence: Cadence


_WORKER: dict[str, tuple[Any, Any]] = {}  # per process: what="data" -> (ObjectRef, its value), the last one


def _fetch(what: str, ref, made: Callable[[Any], Any] = lambda value: value) -> Any:
    """``made(ray.get(ref))``, kept for the next trial of this worker process (one value per ``what``)."""
    import ray

    held = _WORKER.get(what)
    if held is None or held[0] != ref:
        _WORKER.pop(what, None)  # drop the old value before fetching the new one
        _WORKER[what] = (ref, made(ray.get(ref)))
    return _WORKER[what][1]


def block_metrics(history, planned_epochs: int) -> dict[str, Any]:
    """Block statistics of the latest report (diverged members left out of the statistics): for
    the train loss and the loss and every metric on validation and test (``val_loss``,
    ``test_nrmse``, ...: the store's column names), ``<name>_mean`` / ``_min`` / ``_max`` / ``_std``
    and the per-member vector ``member_<name>`` (rollout geometric means included:
    ``test_rollout_gmean_nrmse_mean``, ...); for each rollout curve (``test_rollout_nrmse``, ...)
    its mean over the block at every step, ``<column>_mean`` (a list of T values)."""
    ok = ~np.asarray(history.diverged)
    out: dict[str, Any] = {}
    for name, losses in curves_by_column(history).items():
        latest = np.asarray(losses[:, -1], np.float64)
        good = latest[ok & np.isfinite(latest)]
        out[f"{name}_mean"] = float(good.mean()) if good.size else float("inf")
        out[f"{name}_min"] = float(good.min()) if good.size else float("inf")
        out[f"{name}_max"] = float(good.max()) if good.size else float("inf")
        out[f"{name}_std"] = float(good.std()) if good.size else float("nan")
        out[f"member_{name}"] = latest.tolist()
    for name, curves in rollout_curves_by_column(history).items():
        good = np.asarray(curves, np.float64)[ok]
        out[f"{name}_mean"] = (good.mean(axis=0) if len(good) else np.full(good.shape[1], np.inf)).tolist()
    epoch = int(history.epoch[-1]) if len(history.epoch) else 0
    members = int(ok.size)
    out.update(
        diverged=int((~ok).sum()),
        members=members,
        epoch=epoch,
        members_done=members if epoch >= planned_epochs else 0,
        member_seeds=[s for _ in history.hparams for s in history.seeds],
    )
    return out


class ReaderWait:
    """What a trial reports of its reader: ``reader_wait_s``, the seconds its block's trainer
    waited for the reader thread since the trial's previous report (over the chunks that report
    covers; :func:`sweep.training.reader_wait`). A block whose data fit its budget streams
    nothing and reports nothing."""

    def __init__(self, block: Block):
        self.block = block
        self.reported = reader_wait(block) or 0.0

    def metrics(self) -> dict[str, float]:
        total = reader_wait(self.block)
        if total is None:
            return {}
        since, self.reported = total - self.reported, total
        return {"reader_wait_s": since}


def device_memory() -> dict[str, int]:
    """Peak and limit of the first JAX device's memory in bytes (-1 where the backend keeps no stats, as on CPU)."""
    import jax

    stats = jax.local_devices()[0].memory_stats() or {}
    return {
        "device_peak_bytes": int(stats.get("peak_bytes_in_use", -1)),
        "device_bytes_limit": int(stats.get("bytes_limit", -1)),
    }


def _saved_block(trial: TrialPlan, resume_from: str | None, filesystem) -> SavedBlock | None:
    """The trial's Tune checkpoint (a restarted trial), else a partial checkpoint of the same
    trial key left by an earlier run (``resume_from``), else None."""
    from ray import tune

    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d:
            return checked_block(d, trial, f"the Tune checkpoint of trial {trial.trial_key!r} ({checkpoint.path})")
    if resume_from is not None:
        with local_copy(filesystem, resume_from) as d:
            return checked_block(d, trial, repr(resume_from))
    return None


def checked_block(directory: str | os.PathLike[str], trial: TrialPlan, source: str) -> SavedBlock:
    """The block checkpoint in ``directory`` (a copy of ``source``, as messages name it), read once
    its ``block.json`` is found to be one of ``trial`` (its key, seeds, hyperparameters and the
    structure its spec says, by the spec's own id): before the spec it holds builds a model, which
    may run code it names. Else a :class:`StoreError`."""
    ref = read_block(directory)
    try:
        config_id = ref.spec.config_id
    except (ValueError, TypeError, AttributeError, RecursionError) as e:  # (SpecError is a ValueError)
        raise StoreError(f"{source}: the spec of its block.json is not valid ({str(e)[:200]})") from None
    hparams = [{k: float(v) for k, v in h.items()} for h in ref.hparams]
    theirs = {"trial": ref.trial_key, "config": config_id, "seeds": ref.seeds, "hyperparameters": hparams}
    ours = {
        "trial": trial.trial_key,
        "config": trial.config_id,
        "seeds": trial.seeds,
        "hyperparameters": list(trial.hparams),
    }
    differ = [f"{k} {str(theirs[k])[:60]} (the trial's: {str(ours[k])[:60]})" for k in ours if theirs[k] != ours[k]]
    if differ:
        raise StoreError(
            f"{source}: not a checkpoint of trial {trial.trial_key!r}: its {'; its '.join(differ)}; it cannot be "
            f"resumed: delete it (the trial then trains from the start), or run without resume"
        )
    return ref.load()


def state_nbytes(state) -> int:
    """Bytes of a block's training state (what a checkpoint writes)."""
    import jax

    return sum(int(x.nbytes) for x in jax.tree_util.tree_leaves(state))


def train_trial(config: Mapping[str, Any], *, inputs: TrialInputs) -> None:
    """Train the block of trial ``config["trial_key"]`` (a Tune function trainable)."""
    start_time = time.time()
    import ray
    from ray import tune

    board, run = inputs.trials
    got = ray.get(board.get.remote(run, config["trial_key"]))  # one trial's task, its run's datasets' refs
    task, data = cast(tuple[dict[str, Any], dict[str, Any]], got)
    env_info = _env.apply(task["plan"]["spec"]["resources"])  # before anything can start JAX

    trial, hooks = TrialPlan.from_dict(task["plan"]), inputs.hooks
    extra = dict(hooks.on_start(trial.trial_key) or {}) if hooks.on_start else {}
    # a file-backed problem: read here, a relative path from the folder the sweep was started in
    dataset = _fetch("data", data[trial.spec.problem_id], ProblemData.load)
    block, state = init_block(trial.spec, trial.seeds, trial.hparams, dataset)
    saved = _saved_block(trial, task["resume_from"], inputs.filesystem)
    history = None
    if saved is not None:
        state, history = saved.state, saved.history
    info = {
        "trial_key": trial.trial_key,
        "config_id": trial.config_id,
        "node_id": ray.get_runtime_context().get_node_id(),
        "pid": os.getpid(),
        "start_time": start_time,
        "resumed_from_epoch": int(state.epoch[0]),
        **({} if history is None or history.position is None else {"resumed_from_window": history.position.window}),
        **env_info,
        **extra,
    }
    planned_epochs, shapes, waits = trial.spec.training.epochs, data_shapes(dataset), ReaderWait(block)

    def metrics(history) -> dict[str, Any]:
        return {
            **block_metrics(history, planned_epochs),
            **info,
            **device_memory(),
            **waits.metrics(),
            "report_time": time.time(),
        }

    if history is not None and int(state.epoch[0]) >= planned_epochs:  # already complete: say where it stands
        tune.report(metrics(history))
        return
    pacer = Pacer(inputs.cadence, state_nbytes(state), time.time())
    reported = [history is not None and len(history.epoch) > 0]  # a pause's report repeats the last one

    def pause() -> bool:  # a streamed block stops inside an epoch for a preemption notice
        return reported[0] and _preemption.requested()

    trained = fit(block, state, history, pause=pause)
    for state, history in trained:
        now = time.time()
        if history.paused:  # SIGTERM inside an epoch: checkpoint at this window boundary, then stop
            assert history.position is not None
            paused = {"paused_at": [history.position.epoch, history.position.window]}
            _report_checkpoint(trial, state, history, shapes, {**metrics(history), **paused})
            raise _preemption.stopped(trial.trial_key, history.position.epoch, history.position.window)
        reported[0] = True
        last = int(history.epoch[-1]) >= planned_epochs
        stop = not last and _preemption.requested()  # SIGTERM: checkpoint this chunk, then stop
        if not pacer.report(now, last or stop):
            continue
        if not pacer.checkpoint(now, last or stop):
            tune.report(metrics(history))
        else:
            _report_checkpoint(trial, state, history, shapes, metrics(history))
        if stop:
            raise _preemption.stopped(trial.trial_key, int(history.epoch[-1]))
        if hooks.after_report:
            hooks.after_report(trial.trial_key, int(history.epoch[-1]))


def _report_checkpoint(trial: TrialPlan, state, history, shapes, metrics: dict[str, Any]) -> None:
    """``tune.report(metrics, checkpoint=...)`` of the block saved as it stands."""
    from ray import tune

    with tempfile.TemporaryDirectory(prefix="sweep-ckpt-") as tmp:
        path = save_block(  # (not flushed: Tune copies it into the storage and this folder goes)
            Path(tmp) / "block",
            spec=trial.spec,
            state=state,
            history=history,
            shapes=shapes,
            trial_id=trial.trial_key,
            flush=False,
        )
        tune.report(
            {**metrics, **_preemption.preempted_metrics()}, checkpoint=tune.Checkpoint.from_directory(str(path))
        )
