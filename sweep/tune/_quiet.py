"""What ``sweep.run`` keeps off the user's terminal while Tune runs (``verbose=0``), and how.

Only switches Tune reads are used, each for the duration of ``Tuner.fit``: environment
variables that are not set already, a filter on Tune's driver logger and the level of its
analysis logger; nothing stays changed after ``sweep.run`` returns.
"""

from __future__ import annotations

import contextlib
import logging
import os
import traceback
from collections.abc import Mapping

from .._errors import SweepError

# Tune warns when its experiment state is saved often, which every checkpoint of a short trial
# causes (CheckpointConfig.num_to_keep); ``run`` sets this for the duration of ``Tuner.fit`` only.
QUIET_TUNE_ENV = {"TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S": "0"}
# Without ``verbose``, Tune's legacy reporter with verbose=0 prints nothing: no configuration
# box, no "View detailed results" and TensorBoard hints (the new reporter prints them always).
SILENT_TUNE_ENV = {"RAY_AIR_NEW_OUTPUT": "0"}


@contextlib.contextmanager
def scoped_environ(values: Mapping[str, str]):
    """Set environment variables that are not set yet, and remove them again afterwards."""
    added = {k: v for k, v in values.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


class _DropTuneNoise(logging.Filter):
    """Tune's restore hint and interruption messages (``sweep`` prints its own)."""

    NOISE = ("Experiment has been interrupted", "Stop signal received", "Trials did not complete")

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.NOISE)


class _DropMissingOldCheckpoint(logging.Filter):
    """Tune's traceback when it cannot delete an old checkpoint that is not there (a driver killed
    with ``kill -9`` left it half made; the trial goes on from its newest checkpoint all the same)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if not isinstance(error, FileNotFoundError) or "Error handling checkpoint" not in record.getMessage():
            return True
        frames = traceback.extract_tb(error.__traceback__)
        return not any(frame.name == "_delete_fs_path" for frame in frames)  # deleting the old one, only


class _DropOwnErrorTraces(logging.Filter):
    """Tune's traceback of a trial that failed with one of seed-sweep's errors (a file gone, data
    that changed): its message says all, and the display says it (retried, failed) once."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        own = isinstance(error, SweepError) or isinstance(getattr(error, "cause", None), SweepError)
        return not (own and record.getMessage().startswith("Trial task failed"))


@contextlib.contextmanager
def quiet_tune_logs(quiet: bool):
    """While Tune runs: drop its restore hint, its warnings about trials without results, its
    traceback about an old checkpoint that is missing, and those of trials failed with
    seed-sweep's own errors."""
    if not quiet:
        yield
        return
    tune_log, analysis = logging.getLogger("ray.tune.tune"), logging.getLogger("ray.tune.analysis.experiment_analysis")
    controller = logging.getLogger("ray.tune.execution.tune_controller")
    noise, missing, own, level = _DropTuneNoise(), _DropMissingOldCheckpoint(), _DropOwnErrorTraces(), analysis.level
    tune_log.addFilter(noise)
    controller.addFilter(missing)
    controller.addFilter(own)
    analysis.setLevel(logging.ERROR)
    try:
        yield
    finally:
        tune_log.removeFilter(noise)
        controller.removeFilter(missing)
        controller.removeFilter(own)
        analysis.setLevel(level)


@contextlib.contextmanager
def quiet_tune(quiet: bool):
    """Tune's warnings silenced always; with ``quiet`` its own output and restore hints too."""
    with scoped_environ({**QUIET_TUNE_ENV, **(SILENT_TUNE_ENV if quiet else {})}), quiet_tune_logs(quiet):
        yield
