"""The one Tune callback ``sweep.run`` gives an experiment: it forwards Tune's events to the
display and trackers of the ``sweep.run`` call fitting it now.

Tune pickles an experiment's callbacks into its ``tuner.pkl`` and uses those copies when the
experiment is restored (``sweep run --resume``, often in a new process). A :class:`Relay` holds
nothing, so the restored copy talks to the live objects of the call that restores it.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any

from ray.tune import Callback

_LISTENERS: list[Any] = []  # of the sweep.run call now in Tuner.fit


@contextlib.contextmanager
def relaying(listeners: list[Any]):
    """Forward every :class:`Relay`'s events to ``listeners`` while the block runs."""
    _LISTENERS[:] = listeners
    try:
        yield
    finally:
        _LISTENERS.clear()


def _forward(hook: str):
    def method(self, **info: Any) -> None:
        for listener in list(_LISTENERS):
            if hasattr(listener, hook):
                try:
                    getattr(listener, hook)(**info)
                except Exception as e:  # a tracker that fails must not fail the sweep
                    _LISTENERS.remove(listener)
                    warnings.warn(f"{type(listener).__name__} failed ({type(e).__name__}: {' '.join(str(e).split())[:300]}); "
                                  f"it is off for the rest of this run", RuntimeWarning, stacklevel=2)

    method.__name__ = hook
    return method


class Relay(Callback):
    """A stateless Tune callback that forwards these hooks to the current listeners."""

    on_trial_start = _forward("on_trial_start")
    on_trial_result = _forward("on_trial_result")
    on_trial_complete = _forward("on_trial_complete")
    on_trial_error = _forward("on_trial_error")
    on_step_end = _forward("on_step_end")
