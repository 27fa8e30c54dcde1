"""Fault-injection hooks run inside Ray Tune trials (``sweep.run(..., trial_hooks=TrialHooks(...))``).

Trial processes import this module by name: the Ray fixtures put ``tests/`` on every worker's path.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path


class Barrier:
    """``on_start``: wait until ``n`` trials have started (files in ``directory``) or ``timeout_s``
    passed; report ``barrier_met``."""

    def __init__(self, directory: str | os.PathLike, n: int, timeout_s: float):
        self.directory, self.n, self.timeout_s = str(directory), n, timeout_s

    def __call__(self, trial_key: str) -> dict:
        directory = Path(self.directory)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"{trial_key}-{os.getpid()}").touch()
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if len(list(directory.iterdir())) >= self.n:
                return {"barrier_met": True}
            time.sleep(0.1)
        return {"barrier_met": False}


class KillOnce:
    """``after_report``: SIGKILL the first trial process that reports (once per marker file)."""

    def __init__(self, marker: str | os.PathLike):
        self.marker = str(marker)

    def __call__(self, trial_key: str, epoch: int) -> None:
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)


class FailOnce:
    """``after_report``: the first trial to report raises (once per marker file); for the
    in-process executor, where a SIGKILL would end the test itself."""

    def __init__(self, marker: str | os.PathLike):
        self.marker = str(marker)

    def __call__(self, trial_key: str, epoch: int) -> None:
        if not os.path.exists(self.marker):
            Path(self.marker).touch()
            raise RuntimeError(f"injected failure in {trial_key}")


class FailInSecondRound:
    """``after_report``: the first trial to report once a search's first round is told (its
    ``search.json``) raises (once per marker file)."""

    def __init__(self, marker: str | os.PathLike, record: str | os.PathLike):
        self.marker, self.record = str(marker), str(record)

    def __call__(self, trial_key: str, epoch: int) -> None:
        told = json.loads(Path(self.record).read_text())["rounds"][0]["told"] is not None
        if told and not os.path.exists(self.marker):
            Path(self.marker).touch()
            raise RuntimeError(f"injected failure in {trial_key}, in the search's second round")


class SleepAfterReport:
    """``after_report``: sleep ``seconds`` (keeps trials running while a test acts)."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __call__(self, trial_key: str, epoch: int) -> None:
        time.sleep(self.seconds)


class HoldAllButFirst:
    """``after_report``: the first trial to report runs freely; every other trial waits after each report
    until ``timeout_s`` passed (keeps a sweep part-done while a test acts, however fast the machine)."""

    def __init__(self, directory: str | os.PathLike, timeout_s: float):
        self.directory, self.timeout_s = str(directory), timeout_s

    def __call__(self, trial_key: str, epoch: int) -> None:
        first = Path(self.directory) / "first"
        first.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(first, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            pass
        else:
            os.write(fd, trial_key.encode())
            os.close(fd)
        while not (holder := first.read_text()):  # created, not yet written
            time.sleep(0.01)
        if holder != trial_key:
            time.sleep(self.timeout_s)


class RecordModules:
    """``after_report``: write which of ``names`` the trial process has imported to ``<directory>/<pid>.json``."""

    def __init__(self, directory: str | os.PathLike, names: tuple[str, ...]):
        self.directory, self.names = str(directory), tuple(names)

    def __call__(self, trial_key: str, epoch: int) -> None:
        import json
        import sys

        Path(self.directory).mkdir(parents=True, exist_ok=True)
        loaded = {n: n in sys.modules for n in self.names}
        (Path(self.directory) / f"{os.getpid()}.json").write_text(json.dumps(loaded))


class TermOnce:
    """``on_start``: the first trial to start sends its own process SIGTERM (a preemption notice),
    once per marker file (which gets its trial key and process id), and waits until the trial has taken the
    notice, so that it arrives while the first chunk is in progress."""

    def __init__(self, marker: str | os.PathLike, timeout_s: float = 30):
        self.marker, self.timeout_s = str(marker), timeout_s

    def __call__(self, trial_key: str) -> None:
        from sweep.tune._preemption import requested

        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(fd, f"{trial_key} {os.getpid()}".encode())
        os.close(fd)
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + self.timeout_s
        while not requested() and time.monotonic() < deadline:
            time.sleep(0.01)


class TermAfterReport:
    """``after_report``: the first trial to report sends its own process SIGTERM (a preemption
    notice) once per marker file (which gets its trial key and process id), and waits until the
    trial has taken the notice, so that it arrives before the next chunk starts."""

    def __init__(self, marker: str | os.PathLike, timeout_s: float = 30):
        self.term = TermOnce(marker, timeout_s)

    def __call__(self, trial_key: str, epoch: int) -> None:
        self.term(trial_key)


class HoldWhile:
    """``after_report``: wait while ``<directory>/<trial key>`` exists (at most ``timeout_s``);
    whoever runs the test removes the file to let the trial go on."""

    def __init__(self, directory: str | os.PathLike, timeout_s: float):
        self.directory, self.timeout_s = str(directory), timeout_s

    def __call__(self, trial_key: str, epoch: int) -> None:
        deadline = time.monotonic() + self.timeout_s
        while (Path(self.directory) / trial_key).exists() and time.monotonic() < deadline:
            time.sleep(0.05)


class OnlyFor:
    """Run ``hook`` (``on_start`` or ``after_report``) for the trials of ``keys`` only."""

    def __init__(self, keys, hook):
        self.keys, self.hook = frozenset(keys), hook

    def __call__(self, trial_key: str, *args):
        return self.hook(trial_key, *args) if trial_key in self.keys else None


class CtrlCAtStart:
    """``on_start`` (in-process executor): a Ctrl-C as the ``n``-th trial of this process starts."""

    def __init__(self, n: int):
        self.n, self.started = n, 0

    def __call__(self, trial_key: str) -> None:
        self.started += 1
        if self.started == self.n:
            self.stop()

    def stop(self) -> None:
        raise KeyboardInterrupt


class SigtermAtStart(CtrlCAtStart):
    """As :class:`CtrlCAtStart`, with a SIGTERM to this process (Slurm's, Kubernetes')."""

    def stop(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)


def stop_and_ctrl_c(marks: str | os.PathLike, stop_at: int, ctrl_c_first: bool = False):
    """A Tune scheduler (made in the driver: Tune's imports stay out of this module) that stops
    the first trial to report epoch ``stop_at``, and types a Ctrl-C at the first report of
    another trial (``ctrl_c_first``: at the first report); each once per folder ``marks``, which
    keeps the stopped trial's key in ``stopped``."""
    from ray.tune.schedulers import FIFOScheduler, TrialScheduler

    marks = Path(marks)
    marks.mkdir(parents=True, exist_ok=True)
    stopped, typed = marks / "stopped", marks / "ctrl-c"

    class StopAndCtrlC(FIFOScheduler):
        def on_trial_result(self, tune_controller, trial, result):
            key = trial.config["trial_key"]
            if not stopped.exists() and result.get("epoch") == stop_at:
                stopped.write_text(key)
            if stopped.exists() and stopped.read_text() == key:
                return TrialScheduler.STOP
            if not typed.exists() and (ctrl_c_first or stopped.exists()):
                typed.touch()
                os.kill(os.getpid(), signal.SIGINT)
            return TrialScheduler.CONTINUE

    return StopAndCtrlC()


def die_after_a_checkpoint_inside_an_epoch(monkeypatch, at: tuple[int, int]) -> list[str]:
    """The in-process executor (``sweep.tune._local``) checkpoints a streamed block at every window
    boundary (its pacer's pause always due: the public route waits 10 minutes), and its first
    trial fails right after its checkpoint inside epoch ``at[0]`` before window ``at[1]``, as a
    process killed there; returns the list that gets that trial's key."""
    from sweep.tune import _cadence, _local

    checkpoint, killed = _local.LocalExecutor._checkpoint, []

    def dies_after(self, trial, state, history, shapes):
        checkpoint(self, trial, state, history, shapes)
        if not killed and history.position is not None and tuple(history.position[:2]) == at:
            killed.append(trial.trial_key)
            raise RuntimeError("injected failure inside an epoch")

    monkeypatch.setattr(_cadence.Pacer, "pause", lambda self, now: True)
    monkeypatch.setattr(_local.LocalExecutor, "_checkpoint", dies_after)
    return killed
