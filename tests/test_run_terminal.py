"""``sweep run`` as a person runs it: the live display in a terminal, Ctrl-C (or a SIGTERM), ``--resume`` (plain
lines, no terminal) and a run with nothing left to train, each a real process: trained in-process
(``--executor local``), and on a local Ray (slow; the default run's Tune tests cover Ctrl-C and resume
on Tune: ``test_tune_waves``, ``test_tune.py::test_driver_killed_mid_sweep_then_resumed``)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import equinox as eqx
import numpy as np
import pyarrow.fs as pafs
import pytest
from helpers import tiny_spec, tree_allclose, trial_path_env

import sweep
from sweep.planning import make_plan
from sweep.training import find_blocks, load_block

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def spec() -> sweep.SweepSpec:
    """2 depths x 2 learning rates x 2 seeds, one seed per trial: 4 trials of 2 members."""
    return tiny_spec(
        name="term", seeds=2, seeds_per_trial=1, grid={"model.depth": [1, 2], "optimizer.learning_rate": [3e-3, 1e-3]}
    )


def env(**extra: str) -> dict[str, str]:
    # CI="" keeps the live display on under a CI runner (which sets CI=true): it is what this test reads
    return {**trial_path_env(), "RAY_ADDRESS": "local", "TERM": "xterm-256color", "SWEEP_DEBUG": "", "CI": "", **extra}


class Terminal:
    """A process whose controlling terminal is a pseudo-terminal of 150 x 40; Ctrl-C is typed."""

    def __init__(self, args: list[str], cwd: Path):
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 150, 0, 0))

        def controlling_terminal():
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(
            args, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env(), preexec_fn=controlling_terminal
        )
        os.close(slave)
        self.master, self.chunks = master, []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # EIO: the process closed the terminal
                return
            if not data:
                return
            self.chunks.append(data)

    @property
    def screen(self) -> str:
        return ANSI.sub("", b"".join(self.chunks).decode(errors="replace"))

    def ctrl_c(self) -> None:
        os.write(self.master, b"\x03")

    def wait(self, timeout: float) -> int:
        rc = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=10)
        os.close(self.master)
        return rc


ETA = r"member-epochs/s \| ETA \d+:\d\d"  # the live display's throughput and time left


def complete_blocks(sweep_dir: Path) -> dict:
    epochs = spec().training.epochs
    return {k: r for k, r in find_blocks(str(sweep_dir), pafs.LocalFileSystem()).items() if r.epoch >= epochs}


# the child execs at once after the fork that gives it its terminal: no JAX state is shared
@pytest.mark.filterwarnings(r"ignore:os\.fork\(\) was called:RuntimeWarning")
@pytest.mark.parametrize(
    ("executor", "stop"),
    [
        ("local", "ctrl_c"),
        pytest.param("tune", "ctrl_c", marks=pytest.mark.slow),
        # Slurm, Kubernetes, `ray job stop`: a SIGTERM to the driver, after Ray replaced its handler
        pytest.param("tune", "sigterm", marks=pytest.mark.slow),
    ],
)
def test_live_display_ctrl_c_resume_and_nothing_left(tmp_path, executor, stop):
    toml = tmp_path / "term.toml"
    spec().to_toml(toml)
    storage, sweep_dir = tmp_path / "runs", tmp_path / "runs" / "term"
    how = ["--executor", "local"] if executor == "local" else []
    held = [sys.executable, str(Path(__file__).with_name("_held_cli.py")), str(tmp_path / "hold")]
    term = Terminal([*held, "run", str(toml), "--storage", str(storage), *how], cwd=tmp_path)
    try:
        deadline = time.monotonic() + 240
        # until the display shows a throughput and an ETA and a block is complete (a trial can
        # checkpoint before a loaded driver has shown it running), one screen read per check
        while not (re.search(ETA, live := term.screen) and complete_blocks(sweep_dir)):
            assert term.proc.poll() is None, live[-3000:]
            assert time.monotonic() < deadline, live[-3000:]
            time.sleep(0.2)
        term.ctrl_c() if stop == "ctrl_c" else term.proc.send_signal(signal.SIGTERM)
        rc = term.wait(timeout=120)
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
    screen = term.screen
    # the live display: counts from the plan, configurations by grid values, ETA
    assert re.search(
        r"\[term\] \d+:\d\d \| trials \d/4 done, (\d compiling, )?\d running, \d pending \| members \d+/8", live
    ), live
    assert "depth=1 learning_rate=0.003" in live and "depth=2 learning_rate=0.001" in live
    # Ctrl-C (or SIGTERM): exit 130 (143), how far it got and how to resume; none of Ray's own hints, warnings
    # or stack dumps
    assert rc == (130 if stop == "ctrl_c" else 143), screen[-3000:]  # 128 + SIGINT or SIGTERM
    match = re.search(
        r"interrupted: (\d+) of 8 members done \(the trials' checkpoints are kept\); resume with: (.*)", screen
    )
    assert match, screen[-3000:]
    assert match.group(2).strip() == " ".join(["sweep", "run", str(toml), "--storage", str(storage), *how, "--resume"])
    done = int(match.group(1))
    assert done == 2 == 2 * len(complete_blocks(sweep_dir))  # the first trial only: the others were held
    for noise in (
        "Tuner.restore",
        "Failed to fetch metrics",
        "Traceback",
        "Token authentication",
        "Configuration for experiment",
        "tensorboard --logdir",
        "SIGTERM received",
    ):
        assert noise not in screen, noise
    assert len(sweep.load(sweep_dir)) == done  # the complete blocks were aggregated
    assert not (sweep_dir / "driver.json").exists()  # `sweep status` says how to resume, not that it runs

    # --resume without a terminal: plain progress lines, then every member, as if never interrupted
    out = subprocess.run(
        [sys.executable, "-m", "sweep", "run", str(toml), "--storage", str(storage), *how, "--resume"],
        capture_output=True,
        text=True,
        env=env(),
        cwd=tmp_path,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    lines = [line for line in out.stdout.splitlines() if line.startswith("[term] ")]
    assert lines and "\x1b" not in out.stdout
    assert f"members {done}/8" in lines[0] and "members 8/8" in lines[-1], lines
    # the members trained before are ranked by their stored losses from the first line on
    assert "val loss, mean over seeds, best first: depth=" in lines[0], lines
    assert "val loss, mean over seeds, best first: depth=" in lines[-1]  # ranked on validation
    blocks = {k: load_block(r.path) for k, r in complete_blocks(sweep_dir).items()}
    planned = make_plan(spec()).trials
    assert set(blocks) == {t.trial_key for t in planned}
    for t in planned:  # bit for bit what an uninterrupted run trains (== train_block, see test_tune)
        model, history = sweep.train_block(t.spec, t.seeds, t.hparams)
        assert tree_allclose(blocks[t.trial_key].state.params, eqx.filter(model, eqx.is_array), exact=True), t.trial_key
        np.testing.assert_array_equal(blocks[t.trial_key].history.test_loss, history.test_loss)
    assert len(sweep.load(sweep_dir)) == 8

    # nothing left to train: said at once, and Ray is not started (no session directory)
    ray_tmp = tmp_path / "ray-tmp"
    out = subprocess.run(
        [sys.executable, "-m", "sweep", "run", str(toml), "--storage", str(storage), *how],
        capture_output=True,
        text=True,
        env=env(RAY_TMPDIR=str(ray_tmp)),
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines()[0] == f"nothing to train: 8 members already in {sweep_dir}"
    assert not ray_tmp.exists() or not list(ray_tmp.rglob("session_*"))
    assert sorted(p.name for p in sweep_dir.glob("tune-*")) == ([] if executor == "local" else ["tune-0001"])


@pytest.mark.slow
def test_a_sigterm_to_the_driver_and_its_ray_ends_at_once_and_resumes(tmp_path):
    """`timeout` signals its process group, Slurm every process of the job: the Ray the driver
    started gets the SIGTERM too and its daemons end, so nothing more can be stopped gracefully.
    The driver says so and how to resume, and ends (exit 143) instead of waiting on Ray's
    reconnection timeout (a minute, then exit 1 and Ray's own message)."""
    toml = tmp_path / "term.toml"
    spec().to_toml(toml)
    storage, sweep_dir = tmp_path / "runs", tmp_path / "runs" / "term"
    held = [sys.executable, str(Path(__file__).with_name("_held_cli.py")), str(tmp_path / "hold")]
    proc = subprocess.Popen(
        [*held, "run", str(toml), "--storage", str(storage)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
        cwd=tmp_path,
        start_new_session=True,  # the driver leads a process group, as under `timeout`; Ray's daemons join it
    )
    try:
        deadline = time.monotonic() + 240
        while not complete_blocks(sweep_dir):
            assert proc.poll() is None and time.monotonic() < deadline, proc.poll()
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=50)  # Ray alone would wait 60 s
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err[-3000:]
    assert not (sweep_dir / "driver.json").exists()  # (removed before the exit at once, as at every end)
    resume = f"sweep run {toml} --storage {storage} --resume"
    assert err.strip().splitlines()[-1] == (
        "stopped: the Ray this run started lost its raylet or GCS (a SIGTERM to every process reached them too, or "
        f"they were killed), so the trials ended where they were (their checkpoints are kept); resume with: {resume}"
    ), err[-3000:]
    assert "SIGTERM received" not in err and "Traceback" not in err
    out = subprocess.run(
        [sys.executable, "-m", "sweep", *resume.split()[1:]],
        capture_output=True,
        text=True,
        env=env(),
        cwd=tmp_path,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert len(sweep.load(sweep_dir)) == 8
