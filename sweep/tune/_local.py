"""The in-process executor (``RunOptions(executor="local")``): the trials of a round train one
after another in this process, no Ray started.

Each trial trains its block with the program every Tune trial runs (:func:`sweep.init_block`,
:func:`sweep.fit`), paced by the same :class:`~._cadence.Pacer`, and writes its checkpoints to
``<sweep>/local/<trial_key>/checkpoint_<epoch>/`` (the layout of a Tune checkpoint, which
:meth:`sweep.store.SweepDir.done` and the aggregator find wherever it lies): ``state.eqx``
first, then ``block.json``, then the trial's older checkpoint goes, so a crash at any point
leaves the newest complete one. A streamed block (its training split larger than
``Training(data_memory=...)``) is also checkpointed inside an epoch, at a window boundary, when
the pacer says so (:meth:`~._cadence.Pacer.pause`), as ``checkpoint_<epoch>_<window>/``, with
no report. A trial continues from a partial checkpoint of its trial key (left by either
executor), inside an epoch where it stopped there. The display and the trackers get the events a Tune experiment
sends them (``on_trial_result``, ``on_step_end``). An exception in a trial fails that trial
(its message kept, as Tune keeps it; there are no retries); Ctrl-C stops the round.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow.fs as pafs

from .._errors import SpecError
from .._fs import local_copy, local_path
from .._layout import BLOCK_META, BLOCK_STATE, CHECKPOINT_PREFIX, LOCAL_DIR, at_report, checkpoint_name
from ..planning import TrialPlan
from ..problems import Dataset, Outline
from ..spec import SweepSpec
from ..store import SweepDir
from ..training import data_shapes, fit, init_block, save_block
from ._cadence import Cadence, Pacer, cadence
from ._checks import check_writable
from ._executor import Outcome, Round, RoundStream, Stopped, next_round
from ._options import RunOptions
from ._plan import block_size_here
from ._relay import notify
from ._trainable import ReaderWait, block_metrics, checked_block, state_nbytes

__all__ = ["LocalExecutor"]


def check_gpus_here(resources: Mapping[str, float]) -> None:
    """The GPUs a trial asks for must be in this process, which trains every trial (as a Tune
    trial's must be on one node: :func:`._checks.check_resources`)."""
    want = float(resources.get("gpu", 0))
    if want > 0:
        import jax

        here = sum(d.platform == "gpu" for d in jax.devices())
        if want > here:
            raise SpecError(
                f"`resources.gpu`: got {want:g}; this process sees {here} GPU(s), and the local executor trains "
                f"every trial in it: set resources.gpu to at most {here}, or run on Ray (executor='tune')"
            )


class TrialView(NamedTuple):
    """What the display and the trackers read of a trial in Tune's events: its config and status."""

    config: dict[str, Any]
    status: str


class LocalExecutor:
    """Trains rounds in this process (see the module's docstring)."""

    def __init__(self, spec: SweepSpec, sweep_dir: SweepDir, options: RunOptions, display, trackers: list):
        self.spec, self.sweep_dir, self.options = spec, sweep_dir, options
        self.display, self.trackers = display, trackers
        self.listeners = [display, *trackers]  # the display first
        self.map_tasks = map  # the aggregation's tasks: in this process
        self.datasets: Mapping[str, Dataset] = {}
        self.pace: Cadence | None = None
        self.steps = 0

    def start(self, outlines: Mapping[str, Outline]) -> None:
        """Check the storage; load the data of every problem here (once: a problem that reads
        files reads them now)."""
        check_writable(self.sweep_dir.filesystem, self.sweep_dir.path, self.sweep_dir.shown)
        check_gpus_here(self.spec.resources)
        self.datasets = {key: outline.data.load() for key, outline in outlines.items()}
        self.pace = cadence(self.options.checkpoint_every, 1, self.sweep_dir.filesystem)
        self.display.start()

    def block_size(self, spec: SweepSpec) -> int:
        """Measured here, for one trial at a time."""
        return block_size_here(spec, self.datasets, slots=1)

    def restore(self) -> Outcome:
        """Nothing to restore: every trial continues from its partial checkpoint when it is planned again."""
        return Outcome()

    def train(self, rounds: RoundStream) -> Outcome:
        """Each round's trials one after another; the failures of every round."""
        failures: list[str] = []
        round = next_round(rounds, None)
        while round is not None:
            outcome = self._train_round(round)
            failures += outcome.failures
            round = next_round(rounds, outcome)
        return Outcome(frozenset(), tuple(failures))

    def _train_round(self, round: Round) -> Outcome:
        for tracker in self.trackers:
            tracker.add(round.trials)
        self.display.state.add(round.trials)
        status = {t.trial_key: "PENDING" for t in round.trials}
        failures = []
        for trial in round.trials:
            status[trial.trial_key] = "RUNNING"
            self._event("on_step_end", trials=self._views(status))  # compiling, until its first report
            try:
                self._train_trial(trial, round.resume_from.get(trial.trial_key), status)
                status[trial.trial_key] = "TERMINATED"
            except KeyboardInterrupt:
                raise Stopped from None
            except Exception as e:  # a failed trial fails alone, as on Tune
                status[trial.trial_key] = "ERROR"
                failures.append(f"{trial.trial_key}: {type(e).__name__}: {' '.join(str(e).split())}")
            self._event("on_step_end", trials=self._views(status))
        return Outcome(frozenset(), tuple(failures))

    # -- one trial ----------------------------------------------------------------------------------
    def _train_trial(self, trial: TrialPlan, resume_from: str | None, status: dict[str, str]) -> None:
        start_time, hooks = time.time(), self.options.trial_hooks
        assert self.pace is not None  # set by start()
        extra = dict(hooks.on_start(trial.trial_key) or {}) if hooks.on_start else {}
        dataset = self.datasets[trial.spec.problem_id]
        block, state = init_block(trial.spec, trial.seeds, trial.hparams, dataset)
        history = None
        if resume_from is not None:
            with local_copy(self.sweep_dir.filesystem, resume_from) as d:
                saved = checked_block(d, trial, repr(resume_from))
            state, history = saved.state, saved.history
        info = {
            "trial_key": trial.trial_key,
            "config_id": trial.config_id,
            "pid": os.getpid(),
            "start_time": start_time,
            "resumed_from_epoch": int(state.epoch[0]),
            **({} if history is None or history.position is None else {"resumed_from_window": history.position.window}),
            **extra,
        }
        planned, shapes = trial.spec.training.epochs, data_shapes(dataset)
        view = TrialView({"trial_key": trial.trial_key}, "RUNNING")
        if history is not None and int(state.epoch[0]) >= planned:  # already complete: say where it stands
            self._report(view, status, {**block_metrics(history, planned), **info})
            return
        pacer, waits = Pacer(self.pace, state_nbytes(state), time.time()), ReaderWait(block)
        trained = fit(block, state, history, pause=lambda: pacer.pause(time.time()))
        for state, history in trained:
            if history.paused:  # a streamed block inside an epoch: checkpointed, not reported
                self._checkpoint(trial, state, history, shapes)
                continue
            now, last = time.time(), int(history.epoch[-1]) >= planned
            if not pacer.report(now, last):
                continue
            if pacer.checkpoint(now, last):
                self._checkpoint(trial, state, history, shapes)
            result = {**block_metrics(history, planned), **info, **waits.metrics(), "report_time": now}
            self._report(view, status, result)
            if hooks.after_report:
                hooks.after_report(trial.trial_key, int(history.epoch[-1]))

    def _checkpoint(self, trial: TrialPlan, state, history, shapes) -> None:
        """``<sweep>/local/<trial_key>/checkpoint_<epoch>`` (a streamed block paused inside an
        epoch: ``checkpoint_<epoch>_<window>``): its state, then its ``block.json``, then the
        trial's older checkpoints go, but a pause keeps the newest report's (what is aggregated)."""
        fs, trial_dir = self.sweep_dir.filesystem, f"{self.sweep_dir.path}/{LOCAL_DIR}/{trial.trial_key}"
        at = history.position  # a streamed block paused inside an epoch: checkpoint_<epoch>_<window>
        name = checkpoint_name(int(history.epoch[-1])) if at is None else checkpoint_name(at.epoch, at.window)
        fields = {"spec": trial.spec, "state": state, "history": history, "shapes": shapes, "trial_id": trial.trial_key}
        older = sorted(
            i.base_name
            for i in fs.get_file_info(pafs.FileSelector(trial_dir, allow_not_found=True))
            if i.type == pafs.FileType.Directory and i.base_name.startswith(CHECKPOINT_PREFIX) and i.base_name != name
        )
        if at is not None:  # a pause keeps the newest report's checkpoint: what the store aggregates
            reports = [n for n in older if at_report(n)]
            older = [n for n in older if n not in reports[-1:]]
        older = [f"{trial_dir}/{n}" for n in older]
        here = local_path(fs, trial_dir)
        if here is not None:
            save_block(Path(here) / name, **fields)  # written aside, renamed into place
        else:
            with tempfile.TemporaryDirectory(prefix="sweep-ckpt-") as tmp:
                saved = save_block(Path(tmp) / name, **fields)
                fs.create_dir(f"{trial_dir}/{name}", recursive=True)
                for file in (BLOCK_STATE, BLOCK_META):  # block.json last: a checkpoint is complete when it is there
                    pafs.copy_files(str(saved / file), f"{trial_dir}/{name}/{file}", destination_filesystem=fs)
        for path in older:
            fs.delete_dir(path)

    # -- what the display and the trackers see --------------------------------------------------------
    def _report(self, view: TrialView, status: dict[str, str], result: dict[str, Any]) -> None:
        self.steps += 1
        self._event("on_trial_result", trials=self._views(status), trial=view, result=result)
        self._event("on_step_end", trials=self._views(status))

    def _views(self, status: dict[str, str]) -> list[TrialView]:
        return [TrialView({"trial_key": key}, s) for key, s in status.items()]

    def _event(self, hook: str, **info: Any) -> None:
        notify(self.listeners, hook, iteration=self.steps, **info)
