"""Tune's TensorBoard logger for the trials of a sweep, without what tensorboardX keeps of every
closed writer.

Tune adds a ``TBXLoggerCallback`` to every experiment when tensorboardX is installed: one event
file per trial with its results. tensorboardX registers an ``atexit`` clean-up for every
``FileWriter`` it opens, and that closure keeps the writer, its event queue and its file
object's 8 KiB buffer until the process exits: ~11 KiB per trial in the driver, after the trial
has ended (``benchmarks/tune/thousand_trials.py --object-counts`` finds one ``FileWriter``,
``EventFileWriter``, ``RecordWriter`` and ``BufferedWriter`` more per finished trial).
:class:`TrialTensorBoard`, given to Tune in its place, writes the same event files and, once a
trial's writer is closed, leaves the clean-up a closed stand-in to close, so that the rest is
freed (:func:`~._closed_writer.close_writer`, which the ``"tensorboard"`` tracker uses too). It
writes no HPARAMS table (a trial's only parameter is its key; ``add_hparams`` would open one more
writer per trial).
"""

from __future__ import annotations

import os
from typing import Any

from ray.tune.logger import TBXLoggerCallback

from ._closed_writer import close_writer


class TrialTensorBoard(TBXLoggerCallback):
    """``TBXLoggerCallback`` whose closed writers keep nothing."""

    def _try_log_hparams(self, trial: Any, result: dict) -> None:
        pass

    def log_trial_end(self, trial: Any, failed: bool = False) -> None:
        close_writer(self._trial_writer.get(trial), lambda: super(TrialTensorBoard, self).log_trial_end(trial, failed))


def trial_tensorboard(callbacks: list[Any]) -> list[Any]:
    """``[TrialTensorBoard()]`` where Tune would add its own TensorBoard logger to ``callbacks``
    (tensorboardX installed, none given, Tune's automatic loggers on), else ``[]``."""
    if os.environ.get("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "0") == "1":
        return []
    if any(isinstance(c, TBXLoggerCallback) for c in callbacks):
        return []
    try:
        return [TrialTensorBoard()]
    except ImportError:  # no tensorboardX: Tune adds none either
        return []
