"""A trial process's SIGTERM handling (sweep.tune._preemption) and why Tune retried a trial
(sweep.tune._retries), without Ray: the end-to-end runs are in test_tune.py (a preempted trial)
and test_tune_cluster.py (a lost node)."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import threading
from types import SimpleNamespace

import pytest
from ray.exceptions import RayActorError, RayTaskError

from sweep.tune import _preemption
from sweep.tune._preemption import TrialPreempted, install, preemptible, requested, stopped, training
from sweep.tune._retries import latest_failure, reason_of, retry_reason


@pytest.fixture
def ray_handler(monkeypatch):
    """SIGTERM goes to a recorder standing in for Ray's handler, and no node drains; everything is
    put back after."""
    original, state = signal.getsignal(signal.SIGTERM), dict(_preemption._STATE)
    calls: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: calls.append(signum))
    monkeypatch.setattr(_preemption, "node_draining", lambda: False)
    yield calls
    signal.signal(signal.SIGTERM, original)
    _preemption._REQUESTED.clear()
    _preemption._STATE.update(state)


def test_a_sigterm_while_a_trial_trains_waits_for_the_chunk_and_a_second_one_goes_to_ray(ray_handler):
    assert install()
    with training():
        os.kill(os.getpid(), signal.SIGTERM)
        assert requested() and ray_handler == []  # the process lives on to checkpoint
        os.kill(os.getpid(), signal.SIGTERM)
        assert ray_handler == [signal.SIGTERM]  # a second one: Ray's handler, at once
    error = stopped("c-s", 6)
    assert isinstance(error, TrialPreempted) and "trial c-s preempted (SIGTERM): checkpoint at epoch 6" in str(error)
    assert _preemption.preempted_metrics()["preempted_by"] == "SIGTERM"
    with pytest.raises(TrialPreempted, match=r"notice \(SIGTERM\) before the trial"):  # no new trial here
        with training():
            pass


def test_a_draining_node_is_a_notice_asked_of_ray_at_most_every_few_seconds(ray_handler, monkeypatch):
    asked = []
    monkeypatch.setattr(_preemption, "node_draining", lambda: asked.append(1) or len(asked) > 1)
    with training():
        assert not requested() and not requested() and len(asked) == 1  # once per DRAIN_POLL_S
        _preemption._STATE["next_drain_check"] = 0.0  # DRAIN_POLL_S later
        assert requested() and len(asked) == 2
        assert requested() and len(asked) == 2  # told once: not asked again
    assert "preempted (node draining): checkpoint at epoch 4" in str(stopped("c-s", 4))
    assert ray_handler == []  # no signal involved


def test_a_sigterm_while_no_trial_trains_goes_to_ray_at_once(ray_handler):
    assert install() and install()  # idempotent: Ray's handler stays the one passed on to
    os.kill(os.getpid(), signal.SIGTERM)
    assert ray_handler == [signal.SIGTERM] and not requested()


def test_only_the_main_thread_can_install_the_handler(ray_handler):
    before = signal.getsignal(signal.SIGTERM)
    got = []
    thread = threading.Thread(target=lambda: got.append(install()))
    thread.start()
    thread.join()
    assert got == [False] and signal.getsignal(signal.SIGTERM) is before


def test_a_preempted_trial_is_an_actor_error_tune_does_not_count_and_survives_pickling():
    error = pickle.loads(pickle.dumps(TrialPreempted("trial t preempted (SIGTERM): checkpoint at epoch 2")))
    assert isinstance(error, RayActorError) and error.preempted
    assert str(error) == "trial t preempted (SIGTERM): checkpoint at epoch 2"
    # as Tune gets it from the trial actor: a task error whose cause Tune's Trial inspects
    cause = RayTaskError("train", "Traceback ...", error).as_instanceof_cause()
    assert isinstance(cause, RayActorError) and cause.preempted


NODE_LOST = """The actor died unexpectedly before finishing this task.
\tclass_name: with_resources.<locals>.ResourceTrainable
\tip: 127.0.0.1
The actor died because its node has died. Node Id: a55eb492fcb9
\tthe actor's node was terminated expectedly: received SIGTERM"""
WORKER_DIED = (
    "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit "
    "detail: Worker exits unexpectedly. Worker exits with an exit code 1."
)


@pytest.mark.parametrize(
    "failure, reason",
    [
        ("Traceback ...\nsweep.tune._preemption.TrialPreempted: trial t preempted (SIGTERM): ...", "preempted"),
        ("...\n\tthe actor's node was preempted: Node was forcibly preempted", "preempted"),
        (WORKER_DIED + " The process receives a SIGTERM.", "terminated (SIGTERM)"),
        (NODE_LOST, "node lost"),
        (
            "ray.exceptions.ActorUnavailableError: The actor daa8 is unavailable: The actor is temporarily "
            "unavailable: RpcError: RPC error: Socket closed rpc_code: 14.",
            "node unreachable",
        ),
        (WORKER_DIED, "worker died"),
        ('Traceback ...\n  File "x.py", line 1\nValueError: bad value\n', "error: ValueError: bad value"),
        (  # JAX's note after the exception is not the reason
            "Traceback ...\nModuleNotFoundError: No module named 'my_models'\n--------------------\n"
            "For simplicity, JAX has removed its internal frames from the traceback of the following exception. "
            "Set JAX_TRACEBACK_FILTERING=off to include these.",
            "error: ModuleNotFoundError: No module named 'my_models'",
        ),
        (
            "ray.exceptions.RayTaskError(ModuleNotFoundError): ray::train_trial() (pid=1)\n  File ...\n"
            "ModuleNotFoundError: No module named 'my_models'",
            "error: ModuleNotFoundError: No module named 'my_models'",
        ),
        (
            "Traceback ...\nsweep._errors.SpecError: `problem.path`: 'data' does not exist (looked for '/tmp/data': a "
            "relative path is taken from the folder the sweep was started in)",
            "error: SpecError: `problem.path`: 'data' does not exist (looked for '/tmp/data': a ...",
        ),
        ("", "error"),
    ],
)
def test_the_reason_of_a_failure(failure, reason):
    assert reason_of(failure) == reason


def test_the_reason_is_the_latest_failure_of_the_trials_error_file(tmp_path):
    path = tmp_path / "error.txt"
    path.write_text(
        f"Failure # 1 (occurred at 2026-12-02_07-06-52)\n{NODE_LOST}\n"
        "Failure # 2 (occurred at 2026-12-02_07-07-10)\nTraceback ...\nKeyError: 'x'\n"
    )
    assert latest_failure(path.read_text()) == "Traceback ...\nKeyError: 'x'"
    assert retry_reason(SimpleNamespace(error_file=str(path))) == "error: KeyError: 'x'"
    assert retry_reason(SimpleNamespace(error_file=None)) == "error"
    assert retry_reason(SimpleNamespace(error_file=str(tmp_path / "missing.txt"))) == "error"


def test_a_trial_process_loads_neither_jax_nor_seed_sweep_until_its_trial_starts():
    """The trainable Tune sends to each trial process (the executor's trial function in the preemptible
    class) unpickles without importing JAX or seed-sweep: a process Tune starts and drops unused stops at
    once instead of after importing them (seconds, which Tune waits for at an experiment's end)."""
    import cloudpickle

    from sweep.tune._tune_executor import trial_function

    trial = trial_function()
    payload = cloudpickle.dumps(preemptible(lambda config: trial(config, inputs=None)))  # as with_parameters does
    loaded = (
        "import sys, cloudpickle\ncls = cloudpickle.loads(sys.stdin.buffer.read())\n"
        "print(cls.__name__, [m for m in ('jax', 'sweep') if m in sys.modules])"
    )
    run = subprocess.run([sys.executable, "-c", loaded], input=payload, capture_output=True, timeout=120)
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    assert run.stdout.decode().split() == ["Preemptible", "[]"]


def test_a_trial_failed_with_seed_sweeps_own_error_leaves_no_tune_traceback(caplog):
    """Its message says all, and the display says it once; any other error keeps Tune's traceback."""
    import logging

    from ray.exceptions import RayTaskError

    from sweep import SpecError
    from sweep.tune._quiet import quiet_tune_logs

    log = logging.getLogger("ray.tune.execution.tune_controller")
    wrapped = RayTaskError("train_trial", "Traceback ...", SpecError("`problem.path`: gone"))
    log.addHandler(caplog.handler)  # (Ray's loggers do not propagate to the root's)
    with caplog.at_level(logging.ERROR, logger=log.name), quiet_tune_logs(True):
        for error in (SpecError("`problem.path`: gone"), wrapped.as_instanceof_cause(), ValueError("a bug")):
            try:
                raise error
            except Exception:
                log.exception("Trial task failed for trial t")
    log.removeHandler(caplog.handler)
    assert [r.exc_info[0] for r in caplog.records if r.exc_info] == [ValueError]
