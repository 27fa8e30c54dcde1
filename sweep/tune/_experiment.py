"""One Tune experiment of a run: fit it behind the display and the trackers, and read what came of it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .._interrupt import tune_sigint
from ..planning import TrialPlan
from ._quiet import quiet_tune, scoped_environ
from ._relay import relaying
from ._retries import error_line

__all__ = ["PENDING_ENV", "fit_experiment", "outcome"]

PENDING_ENV = "TUNE_MAX_PENDING_TRIALS_PG"


def outcome(results, trials: Sequence[TrialPlan]) -> tuple[set[str], list[str]]:
    """(trial keys stopped early by a scheduler, failure messages) of a finished experiment."""
    epochs = {t.trial_key: t.spec.training.epochs for t in trials}
    stopped, failed = set(), []
    for result in results:
        key = (result.config or {}).get("trial_key")
        if result.error is not None:
            failed.append(f"{key}: {error_line(str(result.error)) or type(result.error).__name__}")
        elif key in epochs and 0 < (result.metrics or {}).get("epoch", 0) < epochs[key]:
            stopped.add(key)
    return stopped, failed


def fit_experiment(
    make_tuner, plan_trials: Callable[[], Sequence[TrialPlan]], listeners: list, quiet: bool, slots: int
) -> tuple[set[str], list[str], bool]:
    """Build a tuner and fit it with ``listeners`` (the display first, then the trackers) behind
    its :class:`Relay`: (the trial keys a scheduler stopped, those of an interrupted experiment
    too, failures, interrupted), ``plan_trials()``
    the trials the experiment was to train (asked after it: a round may have added some).

    Tune's own SIGINT handling is kept (the first Ctrl-C stops the trials and saves the
    experiment, a second one raises ``KeyboardInterrupt``); an experiment in which Tune caught a
    Ctrl-C, or that returns with trials neither done nor failed, was interrupted, and Ctrl-C
    works again after it (:mod:`sweep._interrupt`). Tune keeps placement groups pending for
    ``2 * slots`` trials (``TUNE_MAX_PENDING_TRIALS_PG``, unless set): enough to start the next
    trials as soon as slots free up, instead of its default of 200 pending.
    """
    display = listeners[0]
    with quiet_tune(quiet), relaying(listeners), scoped_environ({PENDING_ENV: str(2 * slots)}), tune_sigint() as caught:
        results = make_tuner().fit()
    trials = plan_trials()
    # of this experiment: a restored one (a wave) holds only some of the trials left
    keys = {t.trial_key for t in trials} & {(r.config or {}).get("trial_key") for r in results}
    unfinished = set(display.state.unfinished())  # (an interrupted trial's last epoch is not a scheduler's stop)
    interrupted = caught() or bool(keys & unfinished)
    stopped, failures = outcome(results, trials)
    return stopped - unfinished, failures, interrupted
