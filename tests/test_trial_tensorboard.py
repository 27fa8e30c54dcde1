"""Tune's TensorBoard logger as sweep.run gives it to Tune: the same event file per trial, and
nothing of a finished trial's writer kept in the driver."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

from ray import tune
from ray.tune.logger import TBXLoggerCallback
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from sweep.tune._trial_tensorboard import TrialTensorBoard, trial_tensorboard


class _Trial:
    """What Tune's TensorBoard logger reads of a trial."""

    def __init__(self, path: Path):
        self.local_path, self.evaluated_params = str(path), {"trial_key": "t1"}

    def init_local_path(self) -> None:
        Path(self.local_path).mkdir(parents=True, exist_ok=True)


def test_a_finished_trials_writer_is_freed_and_its_events_written(tmp_path):
    logger, trial = TrialTensorBoard(), _Trial(tmp_path / "t1")
    for step in (1, 2):
        logger.on_trial_result(step, [], trial, {"training_iteration": step, "val_loss_mean": 0.5 / step})
    (file_writer,) = logger._trial_writer[trial].all_writers.values()
    queue = weakref.ref(file_writer.event_writer)
    logger.on_trial_complete(3, [], trial)
    gc.collect()
    assert queue() is None  # tensorboardX's atexit clean-up would keep it to the end of the process
    (events,) = (tmp_path / "t1").glob("events.out.tfevents.*")
    loaded = EventAccumulator(str(events)).Reload()
    assert [e.value for e in loaded.Scalars("ray/tune/val_loss_mean")] == [0.5, 0.25]


def test_it_replaces_tunes_own_unless_one_is_given(monkeypatch):
    assert [type(c) for c in trial_tensorboard([])] == [TrialTensorBoard]
    assert trial_tensorboard([TBXLoggerCallback()]) == []
    assert trial_tensorboard([tune.Callback()]) != []
    monkeypatch.setenv("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    assert trial_tensorboard([]) == []
