"""A preemption notice makes a trial checkpoint the chunk in progress and stop.

What Ray 2.60 does by itself: a worker process's main loop installs a SIGTERM handler that
raises ``SystemExit`` in the process's main thread ("The process receives a SIGTERM."). Python
runs signal handlers in the main thread only, and Tune runs a function trainable in a thread
of its own, so the trial never sees the signal: the process exits at once, Tune gets an
``ActorDiedError`` (counted as a failure) and retries the trial from its last checkpoint,
training every epoch since that checkpoint again. A node that Ray drains (``ray drain-node``;
``ray start --block`` drains its node when it gets SIGTERM, as KubeRay's pods do when deleted)
takes no new work and goes when idle or at the drain's deadline; its trials are not told.

What a sweep's trial process does instead (:func:`preemptible`): when its first trial starts
(Tune's first ``step``, in the process's main thread), the handler below replaces Ray's. A SIGTERM while a trial trains only
sets a flag (and puts Ray's handler back, so that a second SIGTERM ends the process at once);
so does the trial's node draining, which the trial asks Ray about at chunk boundaries, at most
every :data:`DRAIN_POLL_S` seconds. The trial finishes the compiled chunk in progress, reports
it with a checkpoint, and raises :class:`TrialPreempted`, so that Tune retries it from that
checkpoint, on whatever node has room (and a drained node, idle, goes at once). The work lost is
at most the chunk in progress, and none when the process lives until its checkpoint is written.
A streamed block (its training split larger than ``Training(data_memory=...)``, where a chunk
can take hours) does not wait for its chunk: once it has reported, it asks at every window
boundary (:func:`sweep.fit`'s ``pause``), stops at the next one, and its checkpoint stands
inside the epoch (the position in the epoch's window order saved with it), so that the retry
goes on from that window, bit for bit.
A SIGTERM while no trial trains (the actor is starting, or idle between trials) goes to Ray's
handler: there is nothing to save. Where the handler cannot be installed (a trial not stepped in
the main thread), Ray's behaviour stays.

A preemption is not the trial's fault: :class:`TrialPreempted` is a ``RayActorError`` marked
``preempted``, which Tune does not count against ``FailureConfig(max_failures=...)`` (as for an
actor whose node Ray drained for preemption; ``RAY_TRAIN_COUNT_PREEMPTION_AS_FAILURE=1`` counts
them), and Tune ends the trial's actor, so the process exits as the notice asked.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from typing import Any

from ray.exceptions import RayActorError

DRAIN_POLL_S = 5.0  # a training trial asks Ray whether its node drains at most this often
_REQUESTED = threading.Event()  # a preemption notice came while a trial trained in this process
_STATE: dict[str, Any] = {
    "installed": False,
    "training": 0,
    "previous": None,
    "notice": None,
    "notice_time": None,
    "next_drain_check": 0.0,
}


class TrialPreempted(RayActorError):
    """A trial stopped for a preemption notice, after checkpointing the chunk in progress; Tune retries it
    (an actor error marked ``preempted``: not counted as a failure)."""

    def __init__(self, message: str = "preempted"):
        super().__init__(error_msg=message, preempted=True)

    def __reduce__(self):  # rebuilt from its message where Tune unpickles it
        return (type(self), (self.error_msg,))


def _on_sigterm(signum: int, frame: Any) -> None:
    previous = _STATE["previous"]
    if _STATE["training"]:
        _notice("SIGTERM")
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
    """Handle SIGTERM in this process as the module says, once per process (a later call keeps Ray's
    handler where a first notice put it back); whether it could (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    if not _STATE["installed"]:
        _STATE.update(installed=True, previous=signal.getsignal(signal.SIGTERM))
        signal.signal(signal.SIGTERM, _on_sigterm)
    return True


@contextlib.contextmanager
def training():
    """While the block runs, a SIGTERM waits for the chunk in progress (:func:`requested`).

    A process that got its notice during an earlier trial (in that trial's last chunk) starts
    no new one: the trial is stopped before it trains, and retried elsewhere."""
    if _REQUESTED.is_set():
        raise TrialPreempted(f"this worker process got a preemption notice ({_STATE['notice']}) before the trial")
    _STATE["training"] += 1
    try:
        yield
    finally:
        _STATE["training"] -= 1


def _notice(what: str) -> None:
    if not _REQUESTED.is_set():
        _STATE.update(notice=what, notice_time=time.time())
        _REQUESTED.set()


def node_draining() -> bool:
    """Whether Ray drains this process's node: no new work goes there, and the node goes when
    idle or at the drain's deadline. Reads Ray 2.60's ``GlobalState.get_draining_nodes`` (the
    node ids being drained); False where that fails."""
    try:
        import ray
        from ray._private.state import state

        return ray.get_runtime_context().get_node_id() in state.get_draining_nodes()
    except Exception:
        return False


def requested() -> bool:
    """Whether this process was told to stop (checkpoint now, then :func:`stopped`): a SIGTERM,
    or its node draining (asked of Ray at most every :data:`DRAIN_POLL_S` seconds)."""
    now = time.monotonic()
    if not _REQUESTED.is_set() and now >= _STATE["next_drain_check"]:
        _STATE["next_drain_check"] = now + DRAIN_POLL_S
        if node_draining():
            _notice("node draining")
    return _REQUESTED.is_set()


def stopped(trial_key: str, epoch: int, window: int = 0) -> TrialPreempted:
    """The error a trial raises once its checkpoint at ``epoch`` (inside it, before its window
    ``window`` where a streamed block paused there) is reported."""
    waited = time.time() - (_STATE["notice_time"] or time.time())
    at = f"epoch {epoch}" + (f", window {window}" if window else "")
    return TrialPreempted(
        f"trial {trial_key} preempted ({_STATE['notice']}): checkpoint at {at} written {waited:.2f} s "
        f"after the notice; Tune retries the trial from it"
    )


def preempted_metrics() -> dict[str, Any]:
    """What the trial's last report says of the preemption notice (what, and when), when there was one."""
    if not _REQUESTED.is_set():
        return {}
    return {"preempted_by": _STATE["notice"], "preempted_notice_time": _STATE["notice_time"]}


def preemptible(trainable_fn):
    """A Tune function trainable (a class) that runs ``trainable_fn`` with the SIGTERM handling above.

    Tune calls a trial actor's ``step`` in the process's main thread, where a signal handler can be
    installed; the trial function runs in Tune's training thread. The class is made here, so that Ray
    sends it by value, and it imports this module only when its first trial starts: with a
    ``trainable_fn`` that imports seed-sweep inside itself, constructing a trial process imports
    neither JAX nor seed-sweep, and one that Tune starts and then drops unused (it starts a process
    for every pending trial and drops it when a kept one comes free first) stops at once."""
    from ray.tune.trainable.function_trainable import wrap_function

    base: Any = wrap_function(trainable_fn)

    class Preemptible(base):
        def step(self):
            from sweep.tune._preemption import install

            install()
            return super().step()

        def _trainable_func(self, config):
            from sweep.tune._preemption import training

            with training():
                return super()._trainable_func(config)

    return Preemptible
