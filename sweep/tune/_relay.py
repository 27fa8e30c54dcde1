"""The one Tune callback ``sweep.run`` gives an experiment: it forwards Tune's events to the
display and trackers of the ``sweep.run`` call fitting it now, and trims what Tune keeps of a
finished trial.

Tune pickles an experiment's callbacks into its ``tuner.pkl`` and uses those copies when the
experiment is restored (``sweep run --resume``, often in a new process). A :class:`Relay` holds
nothing, so the restored copy talks to the live objects of the call that restores it.

Tune keeps every trial in the driver to the end: its last result, the results of its kept
checkpoints, and running statistics of every numeric metric (``metric_analysis``, with two
deques of the last 5 and 10 values per metric for the running averages: ~25 KB per trial with
seed-sweep's ~48 numeric metrics, measured with ``benchmarks/tune/thousand_trials.py
--tracemalloc``), plus the per-member vectors, whose size grows with the block. Once a trial
has completed (every listener has had its results, and Tune's result files are written),
:func:`trim` cuts what the driver holds of it to what Tune and ``sweep.run`` read of a finished
trial: the results keep Tune's own keys and the block statistics (no per-member vectors, none
of the trial's constant facts: devices, start time, ...), the statistics keep the metrics one
may rank by, and the running-average deques go (a completed trial gets no more results).
Tune's ``result.json`` files keep every result whole.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from typing import Any

from ray.tune import Callback

from .._errors import warn
from ._retries import retry_reason

_LISTENERS: list[Any] = []  # of the sweep.run call now in Tuner.fit


@contextlib.contextmanager
def relaying(listeners: list[Any]):
    """Forward every :class:`Relay`'s events to ``listeners`` while the block runs."""
    _LISTENERS[:] = listeners
    try:
        yield
    finally:
        _LISTENERS.clear()


def notify(listeners: list[Any], hook: str, **info: Any) -> None:
    """Call ``hook`` of every listener that has it; one that fails is taken off ``listeners``
    with a warning (a tracker that fails must not fail the sweep)."""
    for listener in list(listeners):
        if hasattr(listener, hook):
            try:
                getattr(listener, hook)(**info)
            except Exception as e:
                listeners.remove(listener)
                if hasattr(listener, "off"):  # a tracker: its end-of-run hint is not printed
                    listener.off = True
                warn(
                    f"{type(listener).__name__} failed ({type(e).__name__}: {' '.join(str(e).split())[:300]}); "
                    f"it is off for the rest of this run",
                    RuntimeWarning,
                )


def _forward(hook: str) -> Callable[..., None]:  # Tune passes a hook's arguments by keyword
    def method(self, **info: Any) -> None:
        notify(_LISTENERS, hook, **info)

    method.__name__ = hook
    return method


RANKED = re.compile(r".*_(mean|min|max|std)|epoch|diverged|training_iteration|time_total_s")  # statistics kept
_OWN = frozenset({"trial_key", "config_id", "members", "members_done"})  # sweep.run reads these of a finished trial


def _kept_keys() -> frozenset[str]:
    """The result keys Tune itself writes (and reads back): iteration, times, ids, done, config."""
    from ray.tune import result

    return (
        frozenset(
            {
                *result.AUTO_RESULT_KEYS,
                *result.DEBUG_METRICS,
                result.DONE,
                result.SHOULD_CHECKPOINT,
                "checkpoint_dir_name",
                "experiment_tag",
                "iterations_since_restore",
            }
        )
        | _OWN
    )


def trim(trial: Any) -> None:
    """Cut what Tune holds of a completed ``trial`` to Tune's own result keys and the
    :data:`RANKED` statistics (no ``member_*`` vectors), and drop the deques behind its running
    averages. Reads Tune's trial internals (``run_metadata``, Ray 2.60); anything missing is left
    alone."""
    metadata = getattr(trial, "run_metadata", None)
    if metadata is None:
        return
    kept = _kept_keys()
    results = [metadata.last_result]
    manager = getattr(metadata, "checkpoint_manager", None)
    results += [r.metrics for r in getattr(manager, "_checkpoint_results", ()) if isinstance(r.metrics, dict)]
    for result in results:
        for key in [k for k in result if k not in kept and not RANKED.fullmatch(k)]:
            del result[key]
    for key in [k for k in metadata.metric_analysis if not RANKED.fullmatch(k)]:
        del metadata.metric_analysis[key]
    metadata.metric_n_steps.clear()  # only update_metric reads them, and a completed trial gets no more results
    metadata.invalidate_cache()
    trial.invalidate_json_state()


class Relay(Callback):
    """A stateless Tune callback that forwards these hooks to the current listeners (and trims
    completed trials, and says why a trial is retried)."""

    on_trial_start = _forward("on_trial_start")
    on_trial_result = _forward("on_trial_result")
    on_trial_error = _forward("on_trial_error")
    on_step_end = _forward("on_step_end")
    _on_trial_complete = _forward("on_trial_complete")
    _on_trial_recover = _forward("on_trial_recover")

    def on_trial_complete(self, **info: Any) -> None:
        self._on_trial_complete(**info)
        trim(info["trial"])

    def on_trial_recover(self, **info: Any) -> None:
        """Forward with ``reason``: why Tune retries the trial (:func:`._retries.retry_reason`)."""
        self._on_trial_recover(**info, reason=retry_reason(info["trial"]))
