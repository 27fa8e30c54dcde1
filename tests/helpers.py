"""Helpers the tests share: tree comparison, member extraction, tiny specs, Tune results, the CLI.

Test modules import these (``from helpers import tiny_spec``); fixtures live in ``conftest.py``.
"""

from __future__ import annotations

import builtins
import fcntl
import glob
import io
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import equinox as eqx
import jax
import numpy as np

import sweep
from sweep.store import SweepDir

TESTS = str(Path(__file__).parent)
# The XLA flags the suite compiles with (LLVM's cheapest level, XLA:CPU's older fusion emitters), and
# the variable that leaves XLA's defaults in place (tests/test_xla_defaults.py runs the bit-for-bit
# properties that way)
CHEAP_COMPILE_FLAGS = ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false")
XLA_DEFAULTS = "SWEEP_TEST_XLA_DEFAULTS"
# The bit-for-bit properties promised for the programs users get, run at XLA's defaults by
# tests/test_xla_defaults.py (node ids under tests/):
# - AT_XLA_DEFAULTS (in the default run) and AT_XLA_DEFAULTS_SLOW (in the slow run): 2D block
#   invariance with unrolled, noisy and corrected training and through the matmul forward with
#   residual blocks and GroupNorm, run only there: XLA:CPU's older emitters, which the suite
#   compiles with, make them differ in the last bit between blocks on some CPUs (the default run
#   holds one method that combines unrolling, input noise and parallel correction: each method
#   costs about 20 CPU-seconds there; the slow run holds each of them apart);
# - ALSO_AT_XLA_DEFAULTS (in the slow run): block invariance in 1D, over streamed windows, split
#   evaluation and windows streamed from an HDF5 file, and resume equals uninterrupted, which hold
#   at the suite's flags too and run there as well (about 3 s there beside their modules' other
#   tests, against about 50 s at XLA's defaults).
AT_XLA_DEFAULTS = (
    "test_pde_training.py::test_a_member_is_the_same_in_any_2d_block_with_each_method[sup_noise_correct_parallel]",
)
AT_XLA_DEFAULTS_SLOW = (
    "test_pde_training.py::test_a_member_is_the_same_in_any_2d_block_with_each_method[sup]",
    "test_pde_training.py::test_a_member_is_the_same_in_any_2d_block_with_each_method[sup_noise]",
    "test_pde_training.py::test_a_member_is_the_same_in_any_2d_block_with_each_method[correct_parallel]",
    "test_pde_training.py::test_a_2d_member_trained_through_the_matmul_forward_is_the_same_in_any_block[ClassicResNet]",
)
ALSO_AT_XLA_DEFAULTS = (
    "test_trainer.py::test_block_invariance_bitwise[seeds1]",
    "test_trainer.py::test_resume_from_saved_state_equals_uninterrupted",
    "test_streaming.py::test_streamed_members_are_bit_identical_whatever_the_block[seeds1]",
    "test_streaming.py::test_members_evaluated_in_parts_are_bit_identical_whatever_the_block",
    "test_hdf5_streaming.py::test_a_streamed_trial_reads_its_windows_from_the_file_bit_for_bit_whatever_the_block",
)


def built_once(tmp_path_factory, name: str, build: Callable[[Path], str | os.PathLike]) -> Path:
    """The path ``build(directory)`` returns, built once per test run, for tests that read it and
    never change it: under pytest-xdist, by the first worker that asks, in a directory all of the
    run's workers see (a worker that asks while it is built waits for it, under a lock; a build
    that fails is tried again by the next worker that asks)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's directory; each worker's own lies below it
    directory, built = root / name, root / f"{name}.built"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not built.exists():
            shutil.rmtree(directory, ignore_errors=True)  # what a build that failed left
            directory.mkdir()
            built.write_text(str(Path(build(directory)).relative_to(directory)))
    return directory / built.read_text()


def tree_allclose(a, b, *, rtol=1e-5, atol=1e-6, exact=False) -> bool:
    """Same structure and leaves equal (``exact``: bit for bit)."""
    la, ta = jax.tree_util.tree_flatten(eqx.filter(a, eqx.is_array))
    lb, tb = jax.tree_util.tree_flatten(eqx.filter(b, eqx.is_array))
    if ta != tb or len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if exact and not np.array_equal(x, y, equal_nan=True):
            return False
        if not exact and not np.allclose(x, y, rtol=rtol, atol=atol, equal_nan=True):
            return False
    return True


def member(model, i):
    """Member ``i`` of a stacked model (pdequinox's helper)."""
    import pdequinox as pdeqx

    return pdeqx.extract_from_ensemble(model, i)


def convolves(forward, model, xb) -> bool:
    """Whether ``forward(model, xb)`` runs a ``lax.conv`` (pdequinox's own convolution), not
    the fast forward's matmuls."""
    return "conv_general_dilated" in str(eqx.filter_make_jaxpr(forward)(model, xb)[0])


def assert_same_member(block_model, block_history, i, model, history) -> None:
    """Member ``i`` of a trained block is, bit for bit, the member trained alone: weights and every
    curve of its history (train loss, loss and metrics on validation and test, rollout curves)."""
    assert tree_allclose(member(block_model, i), model, exact=True)
    np.testing.assert_array_equal(block_history.train_loss[i], history.train_loss[0])
    for split in ("val", "test", "val_rollout", "test_rollout"):
        curves, alone = getattr(block_history, split), getattr(history, split)
        assert curves.keys() == alone.keys()
        for name in curves:
            np.testing.assert_array_equal(curves[name][i], alone[name][0])


def tiny_spec(**changes) -> sweep.SweepSpec:
    """A spec that trains in well under a second per block on CPU."""
    base = dict(
        name="tiny",
        problem=sweep.Problem("heat1d", num_points=16, num_samples=60, data_seed=0),
        model=sweep.Model("ConvNet", hidden_channels=4, depth=2, activation="relu", boundary_mode="dirichlet"),
        optimizer=sweep.Optimizer("adam", learning_rate=3e-3),
        training=sweep.Training(epochs=4, batch_size=16, report_every=2),
        seeds=4,
        seeds_per_trial=2,
    )
    base.update(changes)
    return sweep.SweepSpec(**base)


def trial_path_env() -> dict[str, str]:
    """The environment with ``tests/`` on PYTHONPATH, so that Ray workers import the test hooks (``_faults``)."""
    paths = [TESTS, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}


def trial_results(sweep_dir: str | os.PathLike) -> dict[str, list[dict]]:
    """Every result each trial reported (Tune's result.json files), by trial key."""
    out: dict[str, list[dict]] = {}
    for path in sorted(glob.glob(f"{sweep_dir}/tune-*/*/result.json")):
        lines = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
        for r in lines:
            out.setdefault(r["trial_key"], []).append(r)
    return out


def kill_driver_when(script: str, pattern: str, root: Path, timeout_s: float = 180) -> None:
    """Run ``script`` as a fresh driver process (``tests/`` on its path), SIGKILL it as soon as a
    file matching the glob ``pattern`` exists under ``root``, and return once it is gone."""
    import signal
    import subprocess
    import sys
    import time

    driver = subprocess.Popen(
        [sys.executable, "-c", script], env=trial_path_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + timeout_s
        while not list(root.glob(pattern)):
            assert driver.poll() is None, f"the driver ended before {pattern} appeared"
            assert time.monotonic() < deadline, f"no {pattern} within {timeout_s} s"
            time.sleep(0.2)
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()


def wait_processes_ended(pids: list[int], timeout_s: float = 60) -> None:
    """Wait until the processes ``pids`` have ended (zombies count as ended); fail after ``timeout_s``."""
    import time

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()

    deadline = time.monotonic() + timeout_s
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(alive(pid) for pid in pids)


def wait_trials_ended(pids: Path, timeout_s: float = 60) -> None:
    """Wait until the trial processes that recorded themselves in ``pids`` (the ``Barrier`` hook's
    ``<trial_key>-<pid>`` files) have ended, as Ray ends them after their driver died."""
    wait_processes_ended([int(p.name.rsplit("-", 1)[1]) for p in pids.iterdir()], timeout_s)


def file_bytes(folder: str | os.PathLike) -> dict[str, bytes]:
    """Every file under ``folder`` (links resolved), by its path relative to it: its bytes."""
    root = Path(folder).resolve()
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def invoke(*args, columns: int | None = None):
    """The ``sweep`` command run in this process (typer's ``CliRunner``) with ``args``: its result;
    ``COLUMNS`` unset (whole lines, as in a pipe), or ``columns``."""
    from typer.testing import CliRunner

    from sweep.cli import app

    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": None if columns is None else str(columns)})


def assert_one_line_error(result, *fragments: str) -> None:
    """The command failed with exit code 1 and one line ``error: ...`` holding every fragment, no traceback."""
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 1, (result.exit_code, result.output, result.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def store_files(sweep_dir) -> dict:
    """Every file of a sweep directory's store, by name: its sha256 (as the manifest lists it)."""
    manifest = json.loads((Path(sweep_dir) / "ensembles" / "manifest.json").read_text())
    return {name: entry["sha256"] for name, entry in manifest["files"].items()}


# The Okabe-Ito palette (colour-blind safe), in the order the figures give it to configurations,
# best first (docs/guides/figures.md).
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")


def config_label(key: dict) -> str:
    """A configuration as the figures' legends name it: ``"depth=1 learning_rate=0.003"``."""
    return " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in key.items())


def best_first(ens: sweep.Ensemble) -> list[dict]:
    """The grid values of every configuration, best validation mean first (as ``sweep show`` lists them)."""
    return [{k: r[k] for k in ens.grid_columns} for r in ens.summary().to_pylist()]


def assert_failed_once_then_resumed_equals_uninterrupted(spec: sweep.SweepSpec, tmp_path: Path) -> None:
    """An in-process run of ``spec`` whose trial fails once after its first report, resumed, stores
    what an uninterrupted run stores (seeds and losses)."""
    import dataclasses

    import pytest
    from _faults import FailOnce

    from sweep.tune import TrialHooks

    local = sweep.RunOptions(executor="local", progress="off")
    hooks = TrialHooks(after_report=FailOnce(str(tmp_path / "failed")))
    with pytest.raises(sweep.SweepError, match="injected failure"):
        sweep.run(spec, storage=str(tmp_path / "a"), options=dataclasses.replace(local, trial_hooks=hooks))
    resumed = sweep.run(spec, storage=str(tmp_path / "a"), options=dataclasses.replace(local, resume=True))
    uninterrupted = sweep.run(spec, storage=str(tmp_path / "b"), options=local)
    columns = ["seed", "val_loss", "test_loss", "train_loss"]
    assert (
        sweep.load(resumed).table.select(columns).to_pylist()
        == sweep.load(uninterrupted).table.select(columns).to_pylist()
    )


def assert_killed_inside_an_epoch_then_resumed_equals_uninterrupted(
    spec: sweep.SweepSpec, tmp_path: Path, monkeypatch, at: tuple[int, int] = (1, 2)
) -> None:
    """An in-process run of the streamed ``spec`` whose first trial checkpoints at every window
    boundary and dies right after its checkpoint inside epoch ``at[0]`` before window ``at[1]``,
    resumed, stores what an uninterrupted run stores, bit for bit."""
    import dataclasses

    import pytest
    from _faults import die_after_a_checkpoint_inside_an_epoch

    local = sweep.RunOptions(executor="local", progress="off")
    uninterrupted = sweep.run(spec, storage=str(tmp_path / "b"), options=local)
    with monkeypatch.context() as m:
        killed = die_after_a_checkpoint_inside_an_epoch(m, at)
        with pytest.raises(sweep.SweepError, match="injected failure inside an epoch"):
            sweep.run(spec, storage=str(tmp_path / "a"), options=local)
    left = sorted(p.name for p in Path(tmp_path / "a").glob(f"*/local/{killed[0]}/checkpoint_*"))
    # the trial resumes from inside the epoch; the last report's checkpoint stays, for aggregation
    assert left == [f"checkpoint_{at[0]:06d}", f"checkpoint_{at[0]:06d}_{at[1]:06d}"]
    blocks = SweepDir.of(spec, str(tmp_path / "a"))
    assert blocks.blocks()[killed[0]].progress == at and blocks.blocks(reported=True)[killed[0]].progress == (at[0], 0)
    resumed = sweep.run(spec, storage=str(tmp_path / "a"), options=dataclasses.replace(local, resume=True))
    assert store_files(resumed) == store_files(uninterrupted)  # every member's weights and curves, bit for bit


def machine_of(monkeypatch, memory: int, cgroup: dict[str, str] | None = None) -> None:
    """This process on a machine of ``memory`` bytes of physical memory (``os.sysconf``'s pages),
    whose control-group files (``/proc/self/cgroup``, those under ``/sys/fs/cgroup``) are the texts
    of ``cgroup`` by path, and no others (none: no control groups)."""
    real, files = os.sysconf, cgroup or {}
    pages = {"SC_PAGE_SIZE": 1, "SC_PHYS_PAGES": memory}
    monkeypatch.setattr(os, "sysconf", lambda name: pages.get(name) or real(name))
    real_open = builtins.open

    def fake_open(file, *args, **kwargs):
        name = str(file)
        if name == "/proc/self/cgroup" or name.startswith("/sys/fs/cgroup/"):
            if name not in files:
                raise FileNotFoundError(name)
            return io.StringIO(files[name])
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", fake_open)
