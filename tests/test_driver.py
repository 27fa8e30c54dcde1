"""A run marks the sweep directory it drives (``driver.json``): ``sweep status`` says it runs (not
how to resume it), a second run on this machine is refused before it writes anything, and the
mark goes when the run ends, however it ends."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from _faults import CtrlCAtStart
from helpers import invoke, tiny_spec

import sweep
from sweep.store import Driving, SweepDir
from sweep.tune import TrialHooks

LOCAL = sweep.RunOptions(executor="local", progress="off")


class StatusAtStart:
    """``on_start`` (in-process): keep what ``sweep status`` prints as the first trial starts."""

    def __init__(self, sweep_dir: Path):
        self.sweep_dir = sweep_dir
        self.said: list[str] = []

    def __call__(self, trial_key: str) -> None:
        if not self.said:
            self.said.append(invoke("status", self.sweep_dir).stdout)


@pytest.fixture
def other():
    """A live process of this machine: another run's driver, as far as a mark tells (ended after
    the test)."""
    process = subprocess.Popen(["sleep", "60"])
    yield process
    process.kill()
    process.wait()


def _namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def _mark(sweep_dir: Path, process: int, host: str | None = None, ticks: int | None = None, **changes) -> None:
    """A ``driver.json`` as a run of process ``process`` on ``host`` (this machine) leaves it."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    mark = {"host": host or socket.gethostname(), "pid": process, "started": time.time(), "ticks": ticks}
    (sweep_dir / "driver.json").write_text(json.dumps({**mark, "namespace": _namespace(), **changes}))


def _start_ticks(pid: int) -> int:
    """Linux's start time of ``pid`` (``/proc/<pid>/stat``, field 22), as ``ps -o lstart`` tells it."""
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19])


def test_status_says_the_run_runs_while_it_does_and_the_mark_goes_at_its_end(tmp_path):
    where = tmp_path / "tiny"
    status = StatusAtStart(where)
    sweep.run(
        tiny_spec(), storage=str(tmp_path), options=dataclasses.replace(LOCAL, trial_hooks=TrialHooks(on_start=status))
    )
    said = status.said[0]
    assert f"running now: pid {os.getpid()} on this machine, since " in said, said
    assert "next: it runs; `sweep status" in said and "resume" not in said, said
    assert not (where / "driver.json").exists()
    after = invoke("status", where).stdout
    assert "running now" not in after and "has not said it ended" not in after, after


def test_a_second_run_on_this_machine_is_refused_while_the_first_runs_then_goes_on(tmp_path, other):
    where = tmp_path / "tiny"
    _mark(where, other.pid)
    with pytest.raises(sweep.SpecError, match=rf"being trained now by another run \(pid {other.pid} on this ") as e:
        sweep.run(tiny_spec(), storage=str(tmp_path), options=LOCAL)
    assert str(e.value).endswith(f"(if that process is no run of this sweep, remove {where}/driver.json)")
    assert sorted(p.name for p in where.iterdir()) == ["driver.json"]  # nothing else written
    assert f"running now: pid {other.pid} on this machine" in invoke("status", where).stdout
    other.kill()  # (its process gone from here on)
    other.wait()
    sweep.run(tiny_spec(), storage=str(tmp_path), options=LOCAL)  # its process is gone: a mark left by a kill
    assert not (where / "driver.json").exists() and (where / "ensembles" / "manifest.json").exists()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="process start times are read from Linux's /proc")
def test_a_mark_whose_process_id_now_names_another_process_is_taken_as_gone(tmp_path, other):
    where = tmp_path / "tiny"
    _mark(where, other.pid, ticks=_start_ticks(other.pid) - 1)
    assert "running now" not in invoke("status", where).stdout
    sweep.run(tiny_spec(), storage=str(tmp_path), options=LOCAL)
    assert not (where / "driver.json").exists()


def test_a_mark_of_another_machine_is_named_and_the_run_goes_on(tmp_path, caplog):
    where = tmp_path / "tiny"
    _mark(where, 4242, host="node-7")
    with caplog.at_level(logging.WARNING, logger="sweep.store"):
        sweep.run(tiny_spec(), storage=str(tmp_path), options=LOCAL)
    assert "a run (pid 4242 on host node-7, since " in caplog.text and "has not said it ended" in caplog.text
    assert not (where / "driver.json").exists()
    _mark(where, 4242, host="node-7")
    said = invoke("status", where).stdout
    assert "a run (pid 4242 on host node-7, since " in said and "it runs there, or was killed" in said, said


def test_an_interrupted_run_removes_its_mark(tmp_path):
    stop = dataclasses.replace(LOCAL, trial_hooks=TrialHooks(on_start=CtrlCAtStart(1)))
    with pytest.raises(sweep.tune.Interrupted):
        sweep.run(tiny_spec(), storage=str(tmp_path), options=stop)
    assert (tmp_path / "tiny" / "plan.json").exists() and not (tmp_path / "tiny" / "driver.json").exists()
    assert "next: resume it with" in invoke("status", tmp_path / "tiny").stdout


@pytest.mark.parametrize("left", [False, True])
def test_of_two_runs_starting_at_once_the_one_that_marks_second_is_refused(tmp_path, monkeypatch, left, other):
    """The other run marks the directory between this run's look at it and its own mark: the
    mark is created exclusively, so this run looks again and is refused; also where both found
    the mark of a killed run (``left``), which each takes for gone."""
    where = tmp_path / "tiny"
    if left:
        gone = subprocess.Popen(["true"])
        gone.wait()
        _mark(where, gone.pid)
    look = Driving._check

    def other_marks_after_the_first_look(self, driver):
        look(self, driver)
        mark = where / "driver.json"
        if not mark.exists() or json.loads(mark.read_text())["pid"] != other.pid:
            _mark(where, other.pid)

    monkeypatch.setattr(Driving, "_check", other_marks_after_the_first_look)
    with pytest.raises(sweep.SpecError, match=rf"being trained now by another run \(pid {other.pid} "):
        with Driving(SweepDir.at(where)):
            pass
    assert json.loads((where / "driver.json").read_text())["pid"] == other.pid  # the other run's, kept


def test_a_refused_first_run_leaves_no_directory(tmp_path):
    bad = tiny_spec(training=sweep.Training(epochs=4, batch_size=1000))  # more than the training samples
    with pytest.raises(sweep.SpecError):
        sweep.run(bad, storage=str(tmp_path / "runs" / "new"), options=LOCAL)
    assert list(tmp_path.iterdir()) == []  # (neither the sweep directory nor the storage folders)


def test_while_the_run_aggregates_status_does_not_say_to_aggregate(tmp_path, other):
    where = Path(sweep.run(tiny_spec(), storage=str(tmp_path), options=LOCAL))
    for store in (where / "ensembles", where / ".ensembles"):  # as before the run's aggregation committed
        store.unlink() if store.is_symlink() else shutil.rmtree(store)
    _mark(where, other.pid)
    said = invoke("status", where).stdout
    assert "running now" in said and "ensembles: not aggregated yet" in said, said
    assert "sweep aggregate" not in said and "resume" not in said, said


@pytest.mark.parametrize(
    "odd",
    [{"pid": 0}, {"pid": -1}, {"pid": 2**40}, {"pid": True}, {"started": 1e20}, {"started": "today"}, {"host": 7}],
)
def test_a_mark_with_values_out_of_range_is_no_mark(tmp_path, odd):
    where = tmp_path / "tiny"
    _mark(where, os.getppid(), **odd)
    said = invoke("status", where)
    assert "running now" not in said.stdout and "not said it ended" not in said.stdout, said.stdout
    assert "its run stopped before it planned any trial" in said.stderr, said.stderr
    with Driving(SweepDir.at(where)):  # not refused
        assert json.loads((where / "driver.json").read_text())["pid"] == os.getpid()


@pytest.mark.skipif(_namespace() is None, reason="process namespaces are read from Linux's /proc")
def test_a_mark_of_another_process_namespace_on_this_machine_is_named_not_taken_for_gone(tmp_path, caplog):
    """A container with the host's name (host networking) sees other process ids: its mark may
    name a live run whose id is free here."""
    where = tmp_path / "tiny"
    _mark(where, 4242, namespace="pid:[1]")
    said = invoke("status", where).stdout
    assert "a run (pid 4242 on this machine (in another container or process namespace), since " in said, said
    assert "nothing planned yet" in said and "or was killed before it planned any trial" in said, said
    with caplog.at_level(logging.WARNING, logger="sweep.store"), Driving(SweepDir.at(where)):
        pass
    assert "has not said it ended" in caplog.text


def test_a_storage_folder_listing_names_the_sweep_a_run_drives(tmp_path, other):
    where = Path(sweep.run(tiny_spec(), storage=str(tmp_path), options=LOCAL))
    _mark(where, other.pid)
    said = invoke("status", tmp_path).stdout
    other.kill()  # (its process gone from here on)
    other.wait()
    line = next(x for x in said.splitlines() if x.startswith(f"  {where}"))
    assert "(4 members stored" in line and f"; running now (pid {other.pid} on this machine, since " in line, line
    assert "running now" not in invoke("status", tmp_path).stdout  # (its process gone)


def test_aggregating_a_sweep_a_run_drives_says_the_store_holds_the_members_finished_so_far(tmp_path, other):
    where = Path(sweep.run(tiny_spec(), storage=str(tmp_path), options=LOCAL))
    _mark(where, other.pid)
    with pytest.warns(UserWarning, match=rf"a run drives it now \(pid {other.pid} on this machine, since "):
        sweep.aggregate(where)
    assert len(sweep.load(where)) == 4


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="process states are read from Linux's /proc")
def test_a_run_killed_but_not_yet_reaped_by_its_parent_is_gone(tmp_path):
    """A launcher that started the run and waits for it later: its killed process is a zombie,
    which keeps its id and start time."""
    where = tmp_path / "tiny"
    ended = subprocess.Popen(["true"])  # not waited for: a zombie until the end of the test
    try:
        deadline = time.monotonic() + 10
        while Path(f"/proc/{ended.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        _mark(where, ended.pid, ticks=_start_ticks(ended.pid))
        assert "running now" not in invoke("status", where).stdout
        with Driving(SweepDir.at(where)):  # not refused
            pass
    finally:
        ended.wait()


def test_on_a_disk_without_hard_links_the_mark_is_written_all_the_same(tmp_path, monkeypatch):
    def no_links(source, target):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    where = tmp_path / "tiny"
    with Driving(SweepDir.at(where)):
        said = invoke("status", where).stdout
        assert f"running now: pid {os.getpid()} on this machine" in said, said
    assert list(tmp_path.iterdir()) == []


class CtrlCAfterFirstReport:
    """``after_report`` (in-process): a Ctrl-C after the first report, inside the trial's epochs."""

    def __call__(self, trial_key: str, epoch: int) -> None:
        raise KeyboardInterrupt


def test_aggregating_a_driven_sweep_says_its_run_trains_the_unfinished_trials_on(tmp_path, other):
    stop = dataclasses.replace(LOCAL, trial_hooks=TrialHooks(after_report=CtrlCAfterFirstReport()))
    with pytest.raises(sweep.tune.Interrupted):
        sweep.run(tiny_spec(), storage=str(tmp_path), options=stop)
    where = tmp_path / "tiny"
    _mark(where, other.pid)
    said = invoke("aggregate", where)
    other.kill()  # (its process gone from here on)
    other.wait()
    assert (
        "stored as their last checkpoint left them (status stopped_early); the run that drives it trains them on"
        in (said.stdout)
    ), said.stdout + said.stderr
    assert "--resume" not in said.stdout
    assert "trains them on, and aggregating again" in invoke("aggregate", where).stdout  # (no run drives it now)
