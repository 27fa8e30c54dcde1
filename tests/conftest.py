"""Shared fixtures: keys, a tiny spec, one local Ray for the whole session and one Tune run on it."""

from __future__ import annotations

import gc
import itertools
import os
import shutil
import signal
import sys
import warnings
from pathlib import Path

import jax
import pytest
from _blocks import STORE_PLAN, datasets_of, trained_blocks
from helpers import (
    AT_XLA_DEFAULTS,
    AT_XLA_DEFAULTS_SLOW,
    CHEAP_COMPILE_FLAGS,
    XLA_DEFAULTS,
    built_once,
    tiny_spec,
    trial_path_env,
)

import sweep
from sweep.store import aggregate_blocks

# The suite's own compilation cache (under the pytest cache, not the user's ~/.cache), inherited by
# every process the tests start (Ray's workers, `sweep` subprocesses).
os.environ["SWEEP_COMPILE_CACHE"] = str(Path(__file__).parent.parent / ".pytest_cache" / "jax")
# About a hundred Python processes of a run (pytest's workers, Ray's trial and Serve workers, `sweep`
# commands, scripts) import the same modules: where PYTHONDONTWRITEBYTECODE is set, as in many
# containers, each would compile seed-sweep's and the tests' sources again (about a tenth of the
# CPU time of the tests that start processes, docs/performance.md). The run writes their bytecode
# once, to __pycache__ (ignored by git); its own processes inherit this.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
# The suite's programs are tiny, so compiling them is most of their time: LLVM at its cheapest level
# compiles them about a third faster than XLA's defaults, and XLA:CPU's older fusion emitters in
# less than half the time left (docs/performance.md).
# The bit-for-bit properties promised to users run at XLA's defaults, the programs users get
# (tests/test_xla_defaults.py).
if not os.environ.get(XLA_DEFAULTS):
    _flags = os.environ.get("XLA_FLAGS", "").split()
    os.environ["XLA_FLAGS"] = " ".join(_flags + [f for f in CHEAP_COMPILE_FLAGS if f not in _flags])
# The process settings `sweep run` and every trial use (one JAX CPU device per core, the
# compilation cache), so that the in-process tests exercise the same block layout.
sweep.configure()
# A test process keeps about 1.5 million objects alive by its end (JAX's and seed-sweep's caches of
# traced and compiled programs), and every full collection of Python's cyclic garbage collector
# scans them all (0.3-1 s each): a full collection once in 100 collections of the middle generation
# instead of CPython's 10 (on 5 of the suite's files in one process: 4 full collections instead of
# 19, 2.3-2.7 s instead of 6.3-7.5, 55 MiB more at the peak; docs/performance.md).
gc.set_threshold(*gc.get_threshold()[:2], 100)
# A suite started as a background job (`pytest ... &` in a script) inherits SIGINT ignored, and so
# would every process its tests start: the tests of Ctrl-C need it delivered, as in a terminal.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# The test that runs the bit-for-bit properties at XLA's defaults ([default]: AT_XLA_DEFAULTS,
# [slow]: AT_XLA_DEFAULTS_SLOW and ALSO_AT_XLA_DEFAULTS)
AT_DEFAULTS_RUNNER = "test_xla_defaults.py::test_block_invariance_resume_and_streaming_are_bitwise_at_xla_defaults"
# The longest tests (20-40 s each on a clean clone: that runner, whose programs compile at XLA's
# defaults, and the tests that start Ray, Serve or a driver process of their own), started first so
# that none is the suite's tail (the collection's order puts the runner last).
STARTED_FIRST = (
    f"{AT_DEFAULTS_RUNNER}[default]",
    "test_tune_cluster.py::test_a_lost_nodes_trial_resumes_on_the_surviving_node_and_a_new_node_is_used",
    "test_serving_cli.py::test_sweep_serve_answers_and_stops_cleanly_on_sigint",
    "test_race_run.py::test_a_race_on_tune_trains_every_round_in_one_experiment_on_the_same_workers",
    "test_new_user.py::test_a_script_that_puts_its_model_on_sys_path_trains_on_the_local_ray",
    "test_tune.py::test_driver_killed_mid_sweep_then_resumed",
    "test_tune_waves.py::test_a_plan_in_waves_trains_every_member_and_resumes_between_waves",
)  # in this order


# The tests on the session's Ray (``ray_session``, and ``tune_tiny``, which starts it where it trains)
# come next, all in the first worker's share (xdist's worksteal deals each worker a contiguous part
# of the collection and steals from the end of a queue): one local Ray for the run instead of one
# per worker, each 6-7 CPU-seconds to start and 1.5 every 30 s while it waits (docs/performance.md).
ON_SESSION_RAY = ("ray_session", "tune_tiny")


def pytest_sessionfinish(session):
    """The garbage of the run collected until none is left, then what is alive frozen: pytest's
    check for unraisable exceptions then collects five times more, each pass over every object
    this process holds (about 1 s each at the end of a worker) unless they are frozen."""
    for _ in range(5):
        if not gc.collect():
            break
    gc.freeze()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """``STARTED_FIRST`` first, then the tests on the session's Ray (``ON_SESSION_RAY``); with the
    cheap flags, each bit-for-bit property of ``AT_XLA_DEFAULTS`` (``AT_XLA_DEFAULTS_SLOW``) left out
    where the run has the test that runs it at XLA's defaults, and skipped, saying how to run it,
    where it does not."""
    if not os.environ.get(XLA_DEFAULTS):
        runner = {name: f"{AT_DEFAULTS_RUNNER}[default]" for name in AT_XLA_DEFAULTS}
        runner |= {name: f"{AT_DEFAULTS_RUNNER}[slow]" for name in AT_XLA_DEFAULTS_SLOW}
        names = {_name(item) for item in items}
        kept, left_out = [], []
        for item in items:
            by = runner.get(_name(item))
            if by in names:
                left_out.append(item)
                continue
            if by:
                reason = f"checked at XLA's defaults only: run tests/{AT_DEFAULTS_RUNNER}, or this test with {XLA_DEFAULTS}=1"
                item.add_marker(pytest.mark.skip(reason=reason))
            kept.append(item)
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = kept
    first = {name: i for i, name in enumerate(STARTED_FIRST)}
    items.sort(key=lambda item: (first.get(_name(item), len(first)), not _on_session_ray(item)))  # stable


def _on_session_ray(item: pytest.Item) -> bool:
    return bool(set(ON_SESSION_RAY) & set(getattr(item, "fixturenames", ())))


def _name(item: pytest.Item) -> str:
    """A test's node id under tests/ (as ``AT_XLA_DEFAULTS`` and ``STARTED_FIRST`` name it)."""
    return item.nodeid.removeprefix("tests/")


def _sigint_lost() -> tuple[bool, bool]:
    """``(ignored, blocked)``: whether this process ignores SIGINT (``SIG_IGN`` at the C level, which
    ``signal.getsignal`` does not see when a library set it) and whether its main thread blocks it;
    a child process inherits both."""
    status = Path("/proc/self/status")
    if not status.exists():
        return False, False
    masks = dict(line.split(":\t") for line in status.read_text().splitlines() if line.startswith(("SigIgn", "SigBlk")))
    return tuple(bool(int(masks[k], 16) & (1 << (2 - 1))) for k in ("SigIgn", "SigBlk"))  # type: ignore[return-value]


@pytest.fixture(autouse=True)
def sigint_left_as_found():
    """Every test leaves the process's SIGINT handling as it found it: SIGINT left ignored or
    blocked is inherited by every process started later in this test worker (a Ctrl-C sent to them
    is lost)."""
    before, lost = signal.getsignal(signal.SIGINT), _sigint_lost()
    yield
    after = signal.getsignal(signal.SIGINT)
    if after is not before or _sigint_lost() != lost:
        now = (after, *_sigint_lost())
        signal.signal(signal.SIGINT, before)  # the next tests run as they would alone
        signal.pthread_sigmask(signal.SIG_UNBLOCK if not lost[1] else signal.SIG_BLOCK, {signal.SIGINT})
        pytest.fail(f"the test left SIGINT (handler, ignored, blocked) = {now} (it was {(before, *lost)})")


@pytest.fixture
def getkey():
    counter = itertools.count()
    return lambda: jax.random.key(next(counter))


@pytest.fixture
def spec():
    return tiny_spec()


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> Path:
    """The committed store of ``_blocks.STORE_PLAN`` (built once per test module; read it, do not change it)."""
    path = tmp_path_factory.mktemp("store") / "ensembles"
    aggregate_blocks(path, trained_blocks(STORE_PLAN), plan=STORE_PLAN, datasets=datasets_of(STORE_PLAN))
    return path


@pytest.fixture
def store(original, tmp_path) -> Path:
    """A private, plain-directory copy of :func:`original`, free to corrupt (test_cli.py has its own ``store``)."""
    copy = tmp_path / "copy"
    shutil.copytree(original.resolve(), copy)
    return copy


@pytest.fixture(scope="session")
def ray_session():
    """A local Ray with 2 CPUs and 1 (fake) GPU whose workers import ``tests/``; yields its GCS address."""
    import ray

    os.environ["PYTHONPATH"] = trial_path_env()["PYTHONPATH"]  # inherited by Ray's processes
    if not ray.is_initialized():
        with warnings.catch_warnings():  # Ray forks and execs its daemons at once
            warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
            # address="local": a new instance even when another Ray runs on this machine (a bare
            # ray.init() would join the latest one started there)
            ray.init(
                address="local",
                num_cpus=2,
                num_gpus=1,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


WORKER_FREE = ("matplotlib", "scipy", "sweep.figures", "sweep.cli")  # what a trial process must not import


@pytest.fixture(scope="session")
def tune_tiny(request, tmp_path_factory) -> Path:
    """``tiny_spec()`` (4 seeds, 2 per trial) trained on the session's Ray by ``sweep.run``, each
    trial in a fresh worker process (no actor reuse), with a TensorBoard tracker; the trials record
    which of ``WORKER_FREE`` they imported in ``<storage>/modules``. Returns the sweep directory
    (read it, do not change it). Shared by the tests of what Tune does (``test_tune``) and of the
    executors writing the same store (``test_loop``): one Tune run for both, once per test run
    (``helpers.built_once``)."""

    def train(storage: Path) -> str:
        from _faults import RecordModules
        from ray import tune

        from sweep.tune import TrialHooks

        request.getfixturevalue("ray_session")  # started here only where this worker trains it
        options = sweep.RunOptions(
            trial_hooks=TrialHooks(after_report=RecordModules(storage / "modules", WORKER_FREE)),
            tune_config=tune.TuneConfig(reuse_actors=False),
            loggers=("tensorboard",),
        )
        return sweep.run(tiny_spec(), storage=str(storage), options=options)

    return built_once(tmp_path_factory, "tune-tiny", train)
