"""sweep.run on a local Ray: what only Tune does (placement, fractional GPUs, worker reuse, retries,
preemption, a killed driver, schedulers) and the Tune experiments a run leaves."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import equinox as eqx
import numpy as np
import pyarrow.fs as pafs
import pytest
from _faults import Barrier, KillOnce, SleepAfterReport, TermOnce, stop_and_ctrl_c
from helpers import kill_driver_when, tiny_spec, tree_allclose, trial_results, wait_processes_ended, wait_trials_ended

import sweep
from sweep.training import find_blocks, load_block
from sweep.tune import TrialHooks


def final_blocks(sweep_dir) -> dict:
    """The newest checkpoint of every trial, loaded, by trial key."""
    return {k: load_block(ref.path) for k, ref in find_blocks(str(sweep_dir), pafs.LocalFileSystem()).items()}


# The baseline's first trial alone (a trial's key does not depend on the sweep's other seeds): what
# a fault does to a trial is tested on this one (each trial is a process of about 5 CPU-seconds)
ONE_TRIAL = tiny_spec(seeds=2)


def first_trial(reference: dict) -> dict:
    """The block of :data:`ONE_TRIAL`'s one trial in ``reference`` (the baseline's blocks)."""
    (trial,) = sweep.plan(ONE_TRIAL).trials
    return {trial.trial_key: reference[trial.trial_key]}


def one_at_a_time():
    """Tune's settings for trials one after another, each in the worker the last one used."""
    from ray import tune

    return tune.TuneConfig(max_concurrent_trials=1, reuse_actors=True)


def assert_same_members(blocks: dict, reference: dict) -> None:
    assert set(blocks) == set(reference)
    for key, block in blocks.items():
        assert block.seeds == reference[key].seeds
        assert int(block.state.epoch[0]) == int(reference[key].state.epoch[0])
        assert tree_allclose(block.state.params, reference[key].state.params, exact=True), key
        assert tree_allclose(block.state.opt_state, reference[key].state.opt_state, exact=True), key


@pytest.fixture(scope="module")
def baseline(tune_tiny, ray_session):
    """tiny_spec (4 seeds, 2 per trial) trained once by sweep.run, each trial in a fresh worker
    process (no actor reuse; conftest's ``tune_tiny``), and its blocks; with the session's Ray
    started for the tests that compare a Tune run with it (``tune_tiny`` may come from another
    worker's Ray)."""
    return tune_tiny, final_blocks(tune_tiny)


def test_trial_processes_do_not_import_plotting_or_statistics(baseline):
    path, _ = baseline
    records = [json.loads(p.read_text()) for p in (path.parent / "modules").glob("*.json")]
    assert records and all(not any(r.values()) for r in records), records


def test_run_layout_metrics_and_block_invariance(baseline):
    path, blocks = baseline
    spec = tiny_spec()
    plan = sweep.plan(spec)
    assert path.name == "tiny" and (path / "plan.json").exists()
    assert {t["trial_key"] for t in json.loads((path / "plan.json").read_text())["trials"]} == {
        t.trial_key for t in plan.trials
    }
    assert [p.name for p in path.glob("tune-*")] == ["tune-0001"]
    assert set(blocks) == {t.trial_key for t in plan.trials}
    for t in plan.trials:  # trained in a 1-CPU trial == trained in-process with 2 devices, bit for bit
        model, history = sweep.train_block(spec, t.seeds)
        assert blocks[t.trial_key].trial_id == t.trial_key
        assert tree_allclose(blocks[t.trial_key].state.params, eqx.filter(model, eqx.is_array), exact=True)
        np.testing.assert_array_equal(blocks[t.trial_key].history.test_loss, history.test_loss)
        np.testing.assert_array_equal(blocks[t.trial_key].history.val_loss, history.val_loss)

    results = trial_results(path)
    for key, reports in results.items():
        assert [r["epoch"] for r in reports] == [2, 4]
        last = reports[-1]
        tl = np.asarray(last["member_test_loss"])
        assert last["members"] == 2 and last["members_done"] == 2 and last["diverged"] == 0
        assert last["test_loss_mean"] == pytest.approx(tl.mean())
        assert last["test_loss_min"] == pytest.approx(tl.min()) and last["test_loss_max"] == pytest.approx(tl.max())
        assert last["test_loss_std"] == pytest.approx(tl.std())
        vl = np.asarray(last["member_val_loss"])  # the block's validation loss: Tune's default metric
        assert vl.tolist() == pytest.approx(blocks[key].history.val_loss[:, -1].tolist())
        assert (last["val_loss_mean"], last["val_loss_min"], last["val_loss_max"]) == pytest.approx(
            (vl.mean(), vl.min(), vl.max())
        )
        assert len(last["member_train_loss"]) == 2 and last["train_loss_mean"] > 0
        assert last["member_seeds"] == list(blocks[key].seeds)
        # CPU-only trial: its JAX settings were in place before JAX started a backend
        assert last["env_before_jax"] is True and last["cpu_devices"] == 1 and last["worker_reused"] is False
        assert last["resumed_from_epoch"] == 0
    assert len({rs[-1]["pid"] for rs in results.values()}) == len(results)  # fresh workers


def test_a_reused_worker_trains_the_same_members_as_fresh_ones(baseline, tmp_path):
    """One slot and Tune's actor reuse (sweep.run's default): both trials of the config run one
    after the other in one worker process, with its JAX, programs and dataset from the first,
    and end bit-identical to the baseline's two fresh workers. With ``checkpoint_every=2`` the
    first of the two reports has no checkpoint: each trial wrote one, at its last report."""
    _, reference = baseline
    path = sweep.run(tiny_spec(), storage=str(tmp_path), tune_config=one_at_a_time(), checkpoint_every=2)
    blocks = final_blocks(path)
    assert_same_members(blocks, reference)
    for key, block in blocks.items():
        np.testing.assert_array_equal(block.history.test_loss, reference[key].history.test_loss)
        np.testing.assert_array_equal(block.history.val_loss, reference[key].history.val_loss)
        np.testing.assert_array_equal(block.history.train_loss, reference[key].history.train_loss)
    assert sorted(p.name for p in Path(path).glob("tune-*/*/checkpoint_*")) == ["checkpoint_000000"] * 2
    assert all([r["epoch"] for r in rs] == [2, 4] for rs in trial_results(path).values())
    last = sorted((rs[-1] for rs in trial_results(path).values()), key=lambda r: r["start_time"])
    assert len(last) == 2 and len({r["pid"] for r in last}) == 1
    assert [r["worker_reused"] for r in last] == [False, True]
    assert all(r["env_before_jax"] is True and r["cpu_devices"] == 1 for r in last)


def test_killed_trial_is_retried_from_its_checkpoint(baseline, tmp_path):
    _, reference = baseline
    marker = tmp_path / "killed"
    path = sweep.run(
        ONE_TRIAL,
        storage=str(tmp_path / "store"),
        failure_config=sweep_failure_config(max_failures=2),
        trial_hooks=TrialHooks(after_report=KillOnce(marker)),
    )
    assert marker.exists()  # one trial process was SIGKILLed after its first checkpoint
    results = trial_results(path)
    resumed = [k for k, rs in results.items() if rs[-1]["resumed_from_epoch"] == 2]
    assert len(resumed) == 1
    assert_same_members(final_blocks(path), first_trial(reference))


def test_sigterm_checkpoints_the_chunk_in_progress_and_the_trial_resumes_from_it(baseline, tmp_path, capsys):
    _, reference = baseline
    marker = tmp_path / "terminated"
    path = sweep.run(
        ONE_TRIAL,
        storage=str(tmp_path / "store"),
        failure_config=sweep_failure_config(max_failures=0),  # a preemption is not counted as a failure
        trial_hooks=TrialHooks(on_start=TermOnce(marker)),  # SIGTERM while the first chunk runs
        progress="plain",
    )
    key, pid = marker.read_text().split()
    results = trial_results(path)[key]
    retry = [r for r in results if r["pid"] != int(pid)]
    assert retry and {r["resumed_from_epoch"] for r in retry} == {2}  # the chunk in progress was saved
    assert all(r["epoch"] <= 2 for r in results if r["pid"] == int(pid))  # and the trial stopped there
    # Tune records the stopping report in result.json unless the trial's error overtakes it
    for stop in (r for r in results if "preempted_by" in r):
        assert stop["epoch"] == 2 and stop["checkpoint_dir_name"] and stop["preempted_by"] == "SIGTERM"
        assert stop["report_time"] > stop["preempted_notice_time"]
    wait_processes_ended([int(pid)])  # Tune ends the preempted trial's process
    assert_same_members(final_blocks(path), first_trial(reference))
    assert f"retried 1 trial: {key} (preempted)" in capsys.readouterr().out


def sweep_failure_config(**kwargs):
    from ray import tune

    return tune.FailureConfig(**kwargs)


DRIVER = textwrap.dedent("""
    from _faults import Barrier, SleepAfterReport
    from helpers import tiny_spec
    import sweep
    from sweep.tune import TrialHooks
    hooks = TrialHooks(on_start=Barrier({pids!r}, 1, 1), after_report=SleepAfterReport(10))
    sweep.run(tiny_spec(seeds=2), storage={storage!r}, address={address!r}, trial_hooks=hooks)  # ONE_TRIAL
""")


def test_driver_killed_mid_sweep_then_resumed(baseline, ray_session, tmp_path):
    _, reference = baseline
    storage, pids = tmp_path / "store", tmp_path / "pids"
    script = DRIVER.format(pids=str(pids), storage=str(storage), address=ray_session)
    kill_driver_when(script, "tiny/tune-0001/*/checkpoint_*/block.json", storage)
    wait_trials_ended(pids)  # Ray ends the dead driver's trial processes
    # killed while the trial slept after its first checkpoint, before its last chunk
    assert not list(storage.glob("tiny/tune-0001/*/checkpoint_000001"))

    path = sweep.run(ONE_TRIAL, storage=str(storage), resume=True)
    assert sorted(p.name for p in Path(path).glob("tune-*")) == ["tune-0001"]  # restored in place
    assert_same_members(final_blocks(path), first_trial(reference))


def test_a_finished_sweep_resumed_with_other_settings_trains_them_beside(baseline, ray_session, tmp_path):
    """Its Tune experiment's trials are done by their own spec: none is restored (none labelled by
    this run's spec, which has other configurations), and the new ones train beside them."""
    path, _ = baseline
    shutil.copytree(path, tmp_path / "tiny", symlinks=True)
    other = tiny_spec(seeds=2, training=sweep.Training(epochs=2, batch_size=16, report_every=2))
    resumed = sweep.run(other, storage=str(tmp_path), address=ray_session, resume=True)
    ens = sweep.load(resumed)
    assert sorted(set(ens.table["epochs"].to_pylist())) == [2, 4] and len(ens) == 4 + 2


@pytest.fixture(scope="module")
def stopped_run(ray_session, tmp_path_factory) -> Path:
    """:data:`ONE_TRIAL` run by this process on the session's Ray with a scheduler and a stop passed
    through to Tune (its trial stopped after its first report); its sweep directory, once per module
    (read it, do not change it): what such a run keeps, and the plan board any finished run of this
    process leaves, are tested on the same run (each trial is a process of about 5 CPU-seconds)."""
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler

    stop = tune.RunConfig(stop={"training_iteration": 1})
    storage = tmp_path_factory.mktemp("stopped")
    return Path(
        sweep.run(ONE_TRIAL, storage=str(storage), scheduler=ASHAScheduler(max_t=4, grace_period=1), run_config=stop)
    )


def test_scheduler_and_stop_pass_through_keep_last_checkpoints(stopped_run, tmp_path):
    blocks = final_blocks(stopped_run)
    assert len(blocks) == 1 and all(int(b.history.epoch[-1]) == 2 for b in blocks.values())
    plan = json.loads((stopped_run / "plan.json").read_text())
    assert set(plan["stopped_trials"]) == set(blocks)
    path = shutil.copytree(stopped_run, tmp_path / stopped_run.name, symlinks=True)
    sweep.run(ONE_TRIAL, storage=str(tmp_path))  # stopped members are not trained again
    assert sorted(p.name for p in Path(path).glob("tune-*")) == ["tune-0001"]


@pytest.mark.parametrize(
    "ctrl_c_first",
    [False, pytest.param(True, marks=pytest.mark.slow)],
    ids=["stop-then-ctrl-c", "ctrl-c-then-stop-in-the-resume"],
)
def test_a_scheduler_stop_around_a_ctrl_c_is_kept(ray_session, tmp_path, ctrl_c_first):
    """A trial a scheduler stopped, then a Ctrl-C in the same round (or a Ctrl-C, then a stop in
    the experiment the resume restores): the stop is recorded, an interrupted trial is not taken
    for a stopped one, and the store is as an uninterrupted run's. The second order (about 18 s
    on 2 cores) runs in the slow run; the default run resumes an interrupted run here too."""
    spec = tiny_spec(seeds=4, seeds_per_trial=2, training=sweep.Training(epochs=6, batch_size=16, report_every=2))
    stop_at = 4 if ctrl_c_first else 2  # (then in the resume: the trials pause after each report)
    scheduler = stop_and_ctrl_c(tmp_path / "m", stop_at, ctrl_c_first)
    hooks = TrialHooks(after_report=SleepAfterReport(1.0 if ctrl_c_first else 0.0))
    with pytest.raises(sweep.tune.Interrupted):
        sweep.run(spec, storage=str(tmp_path), address=ray_session, scheduler=scheduler, trial_hooks=hooks)
    path = sweep.run(spec, storage=str(tmp_path), address=ray_session, resume=True, trial_hooks=hooks)
    stopped = (tmp_path / "m" / "stopped").read_text()
    assert json.loads((Path(path) / "plan.json").read_text())["stopped_trials"] == [stopped]
    table = sweep.load(path).table
    reached = sorted(set(zip(table["trial_id"].to_pylist(), table["epochs"].to_pylist(), table["status"].to_pylist())))
    (other,) = {t for t, _, _ in reached} - {stopped}
    assert reached == sorted([(stopped, stop_at, "stopped_early"), (other, 6, "ok")])


def test_the_runs_of_a_process_share_one_plan_board_and_leave_no_plans_on_it(stopped_run):
    """The actor that hands each trial its plan and its dataset's ref is one per driver process
    (an actor is a worker process of its own; a named actor of the process's Ray job, which every
    later run finds), and each run drops its plans and its datasets' refs when it ends (nothing of
    a finished run's data stays pinned in the object store by it). The run: ``stopped_run``, by
    this process (and any other run this process made before this test)."""
    import gc
    import time

    import ray

    gc.collect()  # the run's handles to the board go
    time.sleep(2)  # an actor no handle holds ends within a second or so (this one must not)
    name = f"seed-sweep-plan-board-{ray.get_runtime_context().get_job_id()}"
    assert ray.get(ray.get_actor(name).held.remote()) == []  # still there for the next run, and empty


def test_fractional_gpu_trials_share_the_device(ray_session, tmp_path):
    # two trials of a third of the (fake) GPU each: both at once on the one device, each JAX
    # limited to its share before it starts (three would need more than the session's 2 CPUs)
    spec = tiny_spec(seeds=2, seeds_per_trial=1, resources={"cpu": 1, "gpu": 0.3})
    path = sweep.run(
        spec, storage=str(tmp_path / "store"), trial_hooks=TrialHooks(on_start=Barrier(tmp_path / "started", 2, 120))
    )
    results = trial_results(path)
    assert len(results) == 2
    last = [rs[-1] for rs in results.values()]
    assert all(r["barrier_met"] for r in last)  # both were running at the same time
    assert max(r["start_time"] for r in last) < min(r["report_time"] for r in last)
    for r in last:
        assert r["env_before_jax"] is True
        assert r["xla_mem_fraction"] == pytest.approx(0.95 * 0.3)
    assert len(final_blocks(path)) == 2


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(spec=tiny_spec(resources={"cpu": 1, "gpu": 2})), r"resources\.gpu.*got 2.*1 GPU"),
        (dict(spec=tiny_spec(resources={"cpu": 3, "gpu": 0})), r"resources\.cpu.*got 3"),
        (
            dict(spec=tiny_spec(training=sweep.Training(epochs=2, batch_size=64, report_every=1))),
            r"training\.batch_size.*64",
        ),
        (dict(spec=tiny_spec(), max_concurent_trials=2), r"max_concurent_trials.*not an argument of sweep\.run"),
    ],
)
def test_bad_input_fails_before_any_trial(ray_session, tmp_path, kwargs, match):
    with pytest.raises(sweep.SpecError, match=match):
        sweep.run(storage=str(tmp_path), **kwargs)
    assert not list(tmp_path.glob("*/tune-*"))


def test_a_scheduler_without_its_metric_needs_a_validation_set(ray_session, tmp_path):
    from ray.tune.schedulers import ASHAScheduler

    spec = tiny_spec(problem=sweep.Problem("heat1d", num_points=16, num_samples=60, val_fraction=0))
    with pytest.raises(
        sweep.SpecError,
        match=r"`scheduler`: AsyncHyperBandScheduler has no metric, and the sweep has no "
        r"validation set \(problem.val_fraction=0\) for the default 'val_loss_mean'",
    ):
        sweep.run(spec, storage=str(tmp_path), scheduler=ASHAScheduler(max_t=4, grace_period=1))
    assert not list(tmp_path.glob("*/tune-*"))


def test_storage_not_writable(ray_session, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(sweep.SpecError, match=r"`storage`.*not writable"):
        sweep.run(tiny_spec(), storage=str(blocker / "runs"))


def test_auto_block_size_is_measured_where_trials_run_and_kept(ray_session, tmp_path):
    spec = tiny_spec(seeds=4, seeds_per_trial="auto")
    # the size is chosen for the cluster's slots (2), whatever the trials run at once: one reused
    # worker trains them in turn (one trial process fewer, about 5 CPU-seconds)
    path = Path(sweep.run(spec, storage=str(tmp_path), tune_config=one_at_a_time()))
    plan = json.loads((path / "plan.json").read_text())
    chosen = plan["seeds_per_trial"]
    assert plan["spec"]["seeds_per_trial"] == "auto" and 1 <= chosen <= 2  # 2 slots: at most 4 / 2 seeds
    assert all(len(t["seeds"]) <= chosen for t in plan["trials"])
    assert sorted(s for b in final_blocks(path).values() for s in b.seeds) == [0, 1, 2, 3]
    # a later run of the same sweep reuses the stored size (no new measurement, same blocks)
    assert sweep.plan(tiny_spec(seeds=6, seeds_per_trial="auto"), storage=str(tmp_path)).seeds_per_trial == chosen


def test_tune_feeds_the_trackers_one_run_per_member(baseline):
    """The trackers as Tune callbacks (test_loggers checks their files in depth, in-process)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    path, blocks = baseline
    runs = {p.parent for p in (path / "tensorboard").rglob("events.out.tfevents.*")}
    assert len(runs) == 4  # one run per member
    for row in sweep.load(path).table.to_pylist():
        (run,) = (path / "tensorboard").glob(f"*/seed={row['seed']}")
        events = EventAccumulator(str(run))
        events.Reload()
        assert [s.step for s in events.Scalars("val_loss")] == row["history_epochs"]
        assert [s.value for s in events.Scalars("val_loss")] == pytest.approx(row["val_loss_history"], rel=1e-6)


# slow: in the default run, test_loop.py::test_a_failed_trial_is_named_and_resume_continues_to_the_same_store
# covers a failed trial named then resumed, and test_driver_killed_mid_sweep_then_resumed (here) and
# test_tune_waves.py cover a resume restoring the Tune experiment in place
@pytest.mark.slow
def test_failed_trial_raises_then_resume_continues_it(baseline, tmp_path):
    _, reference = baseline
    storage = str(tmp_path / "store")
    with pytest.raises(sweep.SweepError, match=r"1 trial\(s\) of sweep 'tiny' failed.*resume=True"):
        sweep.run(
            tiny_spec(),
            storage=storage,
            failure_config=sweep_failure_config(max_failures=0),
            trial_hooks=TrialHooks(after_report=KillOnce(tmp_path / "killed")),
        )
    path = sweep.run(tiny_spec(), storage=storage, resume=True)
    assert sorted(p.name for p in Path(path).glob("tune-*")) == ["tune-0001"]
    resumed = [k for k, rs in trial_results(path).items() if rs[-1]["resumed_from_epoch"] == 2]
    assert len(resumed) == 1  # the errored trial went on from its checkpoint
    assert_same_members(final_blocks(path), reference)


def test_a_module_the_clusters_workers_cannot_import_is_named_before_any_trial(ray_session, tmp_path, monkeypatch):
    code = tmp_path / "code"
    code.mkdir()
    (code / "nu_driver_only.py").write_text(
        "import equinox as eqx\n\ndef net(hidden=4, *, key):\n    return eqx.nn.Conv1d(1, 1, 3, padding=1, key=key)\n"
    )
    monkeypatch.syspath_prepend(str(code))  # this process imports it; the cluster's workers do not
    spec = tiny_spec(name="probe", model=sweep.Model("nu_driver_only:net", hidden=4), seeds=2)
    with pytest.raises(
        sweep.SpecError,
        match=r"`model.name`: cannot import module 'nu_driver_only' .*No module named 'nu_driver_only'.*"
        r"on the Ray cluster's workers.*runtime_env",
    ):
        sweep.run(spec, storage=str(tmp_path / "runs"), options=sweep.RunOptions(address=ray_session))
    assert not list((tmp_path / "runs").glob("*/tune-*"))
