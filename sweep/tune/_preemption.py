"""A preemption notice (SIGTERM) makes a trial checkpoint the chunk in progress and stop.

What Ray 2.60 does by itself: a worker process's main loop installs a SIGTERM handler that
raises ``SystemExit`` in the process's main thread ("The process receives a SIGTERM."). Python
runs signal handlers in the main thread only, and Tune runs a function trainable in a thread
of its own, so the trial never sees the signal: the process exits at once, Tune gets an
``ActorDiedError`` (counted as a failure) and retries the trial from its last checkpoint,
training every epoch since that checkpoint again.

What a sweep's trial process does instead (:func:`preemptible`): when Tune sets the trial actor
up (in the main thread), the handler below replaces Ray's. A SIGTERM while a trial trains only
sets a flag (and puts Ray's handler back, so that a second SIGTERM ends the process at once);
the trial finishes the compiled chunk in progress, reports it with a checkpoint, and raises
:class:`TrialPreempted`, so that Tune retries it from that checkpoint, on whatever node has
room. The work lost is at most the chunk in progress, and none when the process lives until
its checkpoint is written. A SIGTERM while no trial trains (the actor is starting, or idle
between trials) goes to Ray's handler: there is nothing to save. Where the handler cannot be
installed (an actor not set up in the main thread), Ray's behaviour stays.

A preemption is not the trial's fault: :class:`TrialPreempted` is a ``RayActorError`` marked
``preempted``, which Tune does not count against ``FailureConfig(max_failures=...)`` (as for an
actor whose node Ray drained for preemption; ``RAY_TRAIN_COUNT_PREEMPTION_AS_FAILURE=1`` counts
them), and Tune ends the trial's actor, so the process exits as the SIGTERM asked.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from typing import Any

from ray.exceptions import RayActorError

_REQUESTED = threading.Event()  # a SIGTERM arrived while a trial trained in this process
_STATE: dict[str, Any] = {"training": 0, "previous": None, "signal_time": None}


class TrialPreempted(RayActorError):
    """A trial stopped for a SIGTERM, after checkpointing the chunk in progress; Tune retries it
    (an actor error marked ``preempted``: not counted as a failure)."""

    def __init__(self, message: str = "preempted"):
        super().__init__(error_msg=message, preempted=True)

    def __reduce__(self):  # rebuilt from its message where Tune unpickles it
        return (type(self), (self.error_msg,))


def _on_sigterm(signum: int, frame: Any) -> None:
    previous = _STATE["previous"]
    if _STATE["training"]:
        _STATE["signal_time"] = time.time()
        _REQUESTED.set()
        signal.signal(signal.SIGTERM, previous)  # a second SIGTERM: Ray's handler, at once
        return
    _pass_on(previous, signum, frame)


def _pass_on(previous: Any, signum: int, frame: Any) -> None:
    """What SIGTERM did before :func:`install` (Ray's handler raises ``SystemExit``)."""
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:  # the default action: end the process
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.raise_signal(signal.SIGTERM)


def install() -> bool:
    """Handle SIGTERM in this process as the module says; whether it could (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    current = signal.getsignal(signal.SIGTERM)
    if current is not _on_sigterm:
        _STATE["previous"] = current
        signal.signal(signal.SIGTERM, _on_sigterm)
    return True


@contextlib.contextmanager
def training():
    """While the block runs, a SIGTERM waits for the chunk in progress (:func:`requested`).

    A process that got its SIGTERM during an earlier trial (in that trial's last chunk) starts
    no new one: the trial is stopped before it trains, and retried elsewhere."""
    if _REQUESTED.is_set():
        raise TrialPreempted("this worker process got SIGTERM during its previous trial; the trial is retried")
    _STATE["training"] += 1
    try:
        yield
    finally:
        _STATE["training"] -= 1


def requested() -> bool:
    """Whether a SIGTERM asked this process to stop (checkpoint now, then :func:`stopped`)."""
    return _REQUESTED.is_set()


def stopped(trial_key: str, epoch: int) -> TrialPreempted:
    """The error a trial raises once its checkpoint at ``epoch`` is reported."""
    waited = time.time() - (_STATE["signal_time"] or time.time())
    return TrialPreempted(
        f"trial {trial_key} preempted (SIGTERM): checkpoint at epoch {epoch} written {waited:.2f} s after "
        f"the signal; Tune retries the trial from it"
    )


def preempted_metrics() -> dict[str, float]:
    """What the trial's last report says of the preemption (the signal's time), when there was one."""
    return {"preempted_signal_time": _STATE["signal_time"]} if _REQUESTED.is_set() else {}


def preemptible(trainable_fn):
    """A Tune function trainable (a class) that runs ``trainable_fn`` with the SIGTERM handling above.

    Tune sets a trial actor up (``setup``) in the process's main thread, where a signal handler
    can be installed; the trial function runs in Tune's training thread."""
    from ray.tune.trainable.function_trainable import wrap_function

    base: Any = wrap_function(trainable_fn)

    class Preemptible(base):
        def setup(self, config):
            install()
            super().setup(config)

        def _trainable_func(self, config):
            with training():
                return super()._trainable_func(config)

    return Preemptible
