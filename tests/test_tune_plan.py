"""Planning, block-size rule, trial environment and progress: the parts of sweep.tune without Ray runs."""

from __future__ import annotations

import json
import logging

import pytest
from helpers import tiny_spec

import sweep
from sweep.planning import Plan, hparams_key, make_plan, merge_plans
from sweep.training import compiled_bytes, init_block
from sweep.tune._auto import PROBE_MINIBATCHES, Probe, choose_seeds_per_trial, measure, probe_data
from sweep.tune._checks import check_resources, check_writable
from sweep.tune._env import cpu_devices, trial_env
from sweep.tune._quiet import quiet_tune_logs


def test_seeds_split_into_blocks():
    plan = make_plan(tiny_spec(seeds=5, seeds_per_trial=2))
    assert [t.seeds for t in plan.trials] == [(0, 1), (2, 3), (4,)]
    assert plan.num_members == 5 and plan.seeds_per_trial == 2
    assert len({t.trial_key for t in plan.trials}) == 3
    assert make_plan(tiny_spec(seeds=5), seeds_per_trial=5).trials[0].seeds == tuple(range(5))


def test_the_plan_line_says_the_largest_block_the_seeds_allow():
    assert "up to 2 seeds per block" in str(make_plan(tiny_spec(seeds=5, seeds_per_trial=2)))
    assert "up to 1 seed per block" in str(make_plan(tiny_spec(seeds=5, seeds_per_trial=1)))
    few = make_plan(tiny_spec(seeds=3, seeds_per_trial=8))  # blocks of up to 8, but only 3 seeds
    assert few.seeds_per_trial == 8 and "up to 3 seeds per block" in str(few)


def test_structural_keys_make_trials_vmapped_keys_share_blocks():
    spec = tiny_spec(
        seeds=4, seeds_per_trial=4, grid={"model.depth": [1, 2], "optimizer.learning_rate": [1e-3, 3e-3, 1e-2]}
    )
    plan = make_plan(spec)
    assert len(plan.trials) == 2  # one per depth
    assert {t.spec.model.depth for t in plan.trials} == {1, 2}
    assert len(plan.config_ids) == 2
    for t in plan.trials:
        assert [h["learning_rate"] for h in t.hparams] == [1e-3, 3e-3, 1e-2]
        assert t.num_members == 12
        assert t.members()[:2] == [({"learning_rate": 1e-3}, 0), ({"learning_rate": 1e-3}, 1)]
    unvmapped = make_plan(
        tiny_spec(seeds=4, seeds_per_trial=4, grid={"optimizer.learning_rate": [1e-3, 3e-3]}, vmap=[])
    )
    assert len(unvmapped.trials) == 2 and all(len(t.hparams) == 1 for t in unvmapped.trials)


def test_plan_is_deterministic_and_round_trips():
    spec = tiny_spec(seeds=7, grid={"optimizer.learning_rate": [1e-3, 3e-3]})
    a, b = make_plan(spec), make_plan(spec)
    assert a == b and a.to_dict() == b.to_dict()
    back = Plan.from_dict(json.loads(json.dumps(a.to_dict())))
    assert back == a
    assert "4 trials" in str(a) and a.trials[0].trial_key in str(a)


def test_done_members_are_left_out():
    spec = tiny_spec(seeds=6, seeds_per_trial=2, grid={"optimizer.learning_rate": [1e-3, 3e-3]})
    cid = make_plan(spec).trials[0].config_id
    plan = make_plan(spec, done=[(cid, 0), (cid, 1), (cid, 2)])
    assert [t.seeds for t in plan.trials] == [(3, 4), (5,)]
    # one hyperparameter set done for seed 3: that set's remaining seeds become their own trials
    triples = [(cid, s, {"learning_rate": 1e-3}) for s in (0, 1, 2, 3)] + [
        (cid, s, hparams_key({"learning_rate": 3e-3})) for s in (0, 1, 2)
    ]
    plan = make_plan(spec, done=triples)
    got = sorted((t.seeds, tuple(h["learning_rate"] for h in t.hparams)) for t in plan.trials)
    assert got == [((3, 4), (0.003,)), ((4, 5), (0.001,)), ((5,), (0.003,))]
    assert make_plan(spec, done=[(cid, s) for s in range(6)]).trials == ()
    # an unrelated config id changes nothing
    assert make_plan(spec, done=[("other", 0)]) == make_plan(spec)


def test_merge_plans_is_the_union():
    old = make_plan(tiny_spec(seeds=4))
    cid = old.trials[0].config_id
    new = make_plan(tiny_spec(seeds=6), done=[(cid, s) for s in range(4)])
    merged = merge_plans(old, new)
    assert [t.seeds for t in merged.trials] == [(0, 1), (2, 3), (4, 5)]
    assert merged.spec == tiny_spec(seeds=6)
    assert merge_plans(merged, new) == merged


PROBE = Probe(per_member_bytes=1_000, fixed_bytes=10_000, memory_bytes=1_000_000, member_epoch_s=0.01, backend="cpu")


def test_auto_block_size_rule():
    kw = dict(num_seeds=1000, num_configs=1, num_hparam_sets=1, epochs=100, slots=1)
    # speed: 60 s / (0.01 s * 100 epochs) = 60 members
    assert choose_seeds_per_trial(PROBE, **kw) == 60
    # memory: (0.8 * 1e6 - 1e4) / 1e3 = 790 members; on a GPU (no timing) memory decides
    assert choose_seeds_per_trial(PROBE._replace(member_epoch_s=None), **kw) == 790
    # hyperparameter sets share the budget; seeds = members / sets
    assert choose_seeds_per_trial(PROBE._replace(member_epoch_s=None), **(kw | {"num_hparam_sets": 10})) == 79
    # fill the cluster: at least `slots` trials
    assert choose_seeds_per_trial(PROBE, **(kw | {"slots": 50})) == 20
    # never more than the seeds, never less than one
    assert choose_seeds_per_trial(PROBE, **(kw | {"num_seeds": 7})) == 7
    assert choose_seeds_per_trial(PROBE._replace(memory_bytes=1), **kw) == 1


def test_auto_plan_measures_in_process():
    spec = tiny_spec(seeds=8, seeds_per_trial="auto")
    plan = sweep.plan(spec)
    assert 1 <= plan.seeds_per_trial <= 8
    assert sorted(s for t in plan.trials for s in t.seeds) == list(range(8))


def test_trial_env():
    cpu = trial_env({"cpu": 2, "gpu": 0}, environ={})
    assert cpu == {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"}
    assert cpu_devices({"cpu": 2, "gpu": 0}) == 2 and cpu_devices({"cpu": 0.5}) == 1 and cpu_devices({"cpu": 3.7}) == 3
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in cpu
    assert (
        trial_env({"cpu": 0.5, "gpu": 0}, environ={"XLA_FLAGS": "--foo"})["XLA_FLAGS"]
        == "--foo --xla_cpu_multi_thread_eigen=false"
    )
    frac = trial_env({"cpu": 1, "gpu": 0.25}, environ={})
    assert float(frac["XLA_PYTHON_CLIENT_MEM_FRACTION"]) == pytest.approx(0.2375)
    assert frac["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert trial_env({"cpu": 4, "gpu": 1}, environ={}) == {}


def test_check_resources():
    nodes = [{"CPU": 8, "GPU": 1}, {"CPU": 4}]
    check_resources({"cpu": 8, "gpu": 1}, nodes)
    with pytest.raises(sweep.SpecError, match=r"`resources.gpu`: got 2; the Ray cluster has 1 GPU"):
        check_resources({"cpu": 1, "gpu": 2}, nodes)
    with pytest.raises(sweep.SpecError, match=r"`resources.gpu`: got 0.5; the Ray cluster has 0 GPU"):
        check_resources({"cpu": 1, "gpu": 0.5}, [{"CPU": 4}])
    with pytest.raises(sweep.SpecError, match=r"`resources.cpu`: got 9.*at most 8 on one node"):
        check_resources({"cpu": 9, "gpu": 0}, nodes)


@pytest.mark.parametrize("gpu", [-1, -0.5, 1.5, 2.5])
def test_bad_gpu_fraction_is_a_spec_error(gpu):
    with pytest.raises(sweep.SpecError, match=r"`resources.gpu`"):
        tiny_spec(resources={"cpu": 1, "gpu": gpu})


def test_check_writable(tmp_path):
    import pyarrow.fs as pafs

    check_writable(pafs.LocalFileSystem(), str(tmp_path / "a" / "b"), "x")
    assert (tmp_path / "a" / "b").is_dir() and not list((tmp_path / "a" / "b").iterdir())
    (tmp_path / "f").write_text("")
    with pytest.raises(sweep.SpecError, match=r"`storage`: 'shown' is not writable"):
        check_writable(pafs.LocalFileSystem(), str(tmp_path / "f" / "runs"), "shown")


def test_compiled_memory_estimate_grows_with_members():
    spec = tiny_spec()
    data = sweep.load_data(spec)
    four, eight, sixteen = (compiled_bytes(spec, data, (), m) for m in (4, 8, 16))
    assert 0 < four < eight < sixteen
    assert sixteen - eight == pytest.approx(2 * (eight - four), rel=0.05)  # linear in members
    # one member at a time: a member adds its state, in and out of the call, not its step's temporaries
    from sweep.training import data_shapes, state_bytes

    two, eight = (compiled_bytes(spec, data, (), m, layout="map") for m in (2, 8))
    assert eight - two == pytest.approx(6 * 2 * state_bytes(spec, data_shapes(data)), rel=0.05)
    with pytest.raises(ValueError, match=r'`layout`: got \'pmap\'; expected "vmap" or "map"'):
        compiled_bytes(spec, data, (), 2, layout="pmap")


def test_the_cpu_probe_counts_a_steps_temporaries_on_every_device():
    """A bigger minibatch makes each member's step bigger, not its state: the fixed part grows, by
    the same amount on each of the process's CPU devices, and stays above their copies of the data."""
    import jax

    from sweep.training import device_data_bytes

    small = tiny_spec(training=sweep.Training(epochs=1, batch_size=4))
    big = tiny_spec(training=sweep.Training(epochs=1, batch_size=32))
    data = sweep.load_data(small)
    a, b = measure(small, (), data, {"cpu": 1}), measure(big, (), data, {"cpu": 1})
    assert a.per_member_bytes == b.per_member_bytes
    assert b.fixed_bytes > a.fixed_bytes > len(jax.devices("cpu")) * device_data_bytes(small, data)[0]
    assert (b.fixed_bytes - a.fixed_bytes) % len(jax.devices("cpu")) == 0


def test_the_cpu_speed_probe_times_a_few_minibatches_of_a_large_split(monkeypatch):
    """A training split of many minibatches is timed on PROBE_MINIBATCHES of them (every split cut
    to the same share) and the time scaled up; a small one is timed whole, as before."""
    import sweep.tune._auto as auto

    small = tiny_spec(training=sweep.Training(epochs=1, batch_size=16))  # 42 pairs: timed whole
    data = sweep.load_data(small)
    assert probe_data(small, data)[0] is data
    spec = tiny_spec(training=sweep.Training(epochs=1, batch_size=1))  # 42 minibatches of one pair
    timed, share = probe_data(spec, data)
    assert timed.num_train == PROBE_MINIBATCHES == 16 and share == 16 / 42
    assert [len(s.x) for s in (timed.val, timed.test)] == [-(-len(s.x) * 16 // 42) for s in (data.val, data.test)]
    given = []
    monkeypatch.setattr(auto, "init_block", lambda *a, **kw: given.append(a[3]) or init_block(*a, **kw))
    probe = measure(spec, (), data, {"cpu": 1})
    assert [d.num_train for d in given] == [16] and probe.member_epoch_s is not None and probe.member_epoch_s > 0


def test_a_trial_plan_carries_its_own_seeds_not_the_sweeps():
    plan = make_plan(tiny_spec(seeds=list(range(0, 2000, 2)), seeds_per_trial=10))
    assert all(t.spec.seed_list == t.seeds for t in plan.trials)
    assert len(json.dumps(plan.trials[0].to_dict())) < 2000  # not O(the sweep's seeds)
    assert {t.spec.config_id for t in plan.trials} == {plan.spec.expand()[0][0].config_id}


def test_pacing_of_reports_and_checkpoints():
    import pyarrow.fs as pafs

    from sweep.tune._cadence import Pacer, cadence

    local = cadence("auto", slots=2, filesystem=pafs.LocalFileSystem())
    assert local.report_interval_s == pytest.approx(0.02) and local.checkpoint_every is None
    assert local.checkpoint_bytes_per_s == pytest.approx(0.1 * 1e9 / 2)
    remote = cadence("auto", slots=2, filesystem=pafs.SubTreeFileSystem("/tmp", pafs.LocalFileSystem()))
    assert remote.checkpoint_bytes_per_s == pytest.approx(0.1 * 47e6 / 2)
    # a 764 MiB block on the remote budget: one checkpoint per ~340 s, the last report always
    pacer = Pacer(remote, 764 * 2**20, start=0.0)
    reports = [(t, pacer.report(t, last=False)) for t in (10.0, 10.001, 200.0, 400.0)]
    assert [r for _, r in reports] == [True, False, True, True]  # 1 ms after a report: skipped
    assert [pacer.checkpoint(t, last=False) for t in (10.0, 200.0, 400.0)] == [False, False, True]
    assert pacer.report(400.001, last=True) and pacer.checkpoint(400.001, last=True)
    every = Pacer(cadence(2, slots=1, filesystem=pafs.LocalFileSystem()), 10, start=0.0)
    done = [(every.report(t, last=t == 5), every.checkpoint(t, last=t == 5)) for t in (1, 2, 3, 4, 5)]
    assert [c for _, c in done] == [False, True, False, True, True]  # every 2nd report, and the last
    with pytest.raises(sweep.SpecError, match=r"`checkpoint_every`: got 0; give an integer >= 1"):
        cadence(0, slots=1, filesystem=pafs.LocalFileSystem())


def test_a_streamed_block_pauses_to_checkpoint_inside_an_epoch_when_the_last_checkpoint_is_old():
    import pyarrow.fs as pafs

    from sweep.tune._cadence import PAUSE_AFTER_S, Pacer, cadence

    auto = Pacer(cadence("auto", slots=1, filesystem=pafs.LocalFileSystem()), 1000, start=0.0)
    assert [auto.pause(t) for t in (PAUSE_AFTER_S - 1, PAUSE_AFTER_S, PAUSE_AFTER_S + 1)] == [False, True, False]
    assert auto.pause(2 * PAUSE_AFTER_S)  # counted from the pause's checkpoint
    huge = Pacer(cadence("auto", slots=1, filesystem=pafs.LocalFileSystem()), 10**12, start=0.0)  # 10^4 s a checkpoint
    assert not huge.pause(PAUSE_AFTER_S) and huge.pause(10**4)  # the byte budget holds inside an epoch too
    every = Pacer(cadence(3, slots=1, filesystem=pafs.LocalFileSystem()), 1000, start=0.0)
    assert not every.pause(100 * PAUSE_AFTER_S)  # checkpoint_every=k: at reports only


def test_a_reused_worker_keeps_its_jax_settings_and_refuses_other_resources(monkeypatch):
    from sweep.tune import _env

    monkeypatch.setattr(_env, "_PROCESS", {})
    monkeypatch.setattr(_env, "backend_started", lambda: True)  # as in a worker where JAX runs: nothing is set
    first = _env.apply({"cpu": 1, "gpu": 0})
    assert first["worker_reused"] is False and first["env_before_jax"] is False
    again = _env.apply({"cpu": 1, "gpu": 0})
    assert again == {**first, "worker_reused": True}
    with pytest.raises(sweep.SweepError, match=r"set up for \{'cpu': 1.0, 'gpu': 0.0\}.*new processes"):
        _env.apply({"cpu": 1, "gpu": 0.5})


def test_a_completed_trial_is_trimmed_to_what_tune_needs():
    from ray.tune.experiment import Trial
    from ray.tune.registry import register_trainable

    from sweep.tune._relay import trim

    register_trainable("sweep-noop", lambda config: None)
    trial = Trial("sweep-noop", config={"trial_key": "k"}, stub=True)
    trial.update_last_result(
        {
            "member_test_loss": [0.1] * 1000,
            "member_seeds": list(range(1000)),
            "epoch": 4,
            "test_loss_mean": 0.1,
            "cpu_devices": 1,
            "start_time": 1.0,
            "training_iteration": 2,
            "trial_key": "k",
            "time_total_s": 0.5,
            "done": True,
        }
    )
    trim(trial)
    assert set(trial.last_result) == {
        "epoch",
        "test_loss_mean",
        "training_iteration",
        "trial_key",
        "time_total_s",
        "done",
        "trial_id",
    }  # Tune's own keys, the statistics, what sweep.run reads
    assert set(trial.run_metadata.metric_analysis) == {"epoch", "test_loss_mean", "training_iteration", "time_total_s"}
    assert trial.run_metadata.metric_n_steps == {}
    assert "member_seeds" not in trial.get_json_state()[1] and "cpu_devices" not in trial.get_json_state()[1]


def test_an_address_where_nothing_answers_is_named_at_once(tmp_path, monkeypatch):
    """Ray retries a dead address for a minute before it says so: the sweep checks it first."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(sweep.SweepError, match=r"^`address`: nothing answers at 127.0.0.1:1 \(ConnectionRefused"):
        sweep.run(tiny_spec(), storage=str(tmp_path), options=sweep.RunOptions(address="127.0.0.1:1"))
    assert not list(tmp_path.glob("tiny/tune-*"))  # no experiment started


def test_tunes_traceback_about_a_missing_old_checkpoint_is_kept_off_the_screen():
    """After a driver killed with kill -9, a resumed Tune cannot delete a checkpoint the kill left
    half made, and logs a traceback; the trial goes on. Other errors of Tune's still show."""
    log = logging.getLogger("ray.tune.execution.tune_controller")
    shown: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = shown.append  # type: ignore[method-assign]

    def _delete_fs_path(error: Exception) -> None:  # where Tune deletes an old checkpoint
        raise error

    def handling(error: Exception, deleting: bool = True) -> None:
        try:
            _delete_fs_path(error) if deleting else _raise(error)
        except Exception:
            log.exception("Trial %s: Error handling checkpoint %s", "t-1", "result")

    def _raise(error: Exception) -> None:
        raise error

    log.addHandler(handler)
    try:
        with quiet_tune_logs(True):
            handling(FileNotFoundError("Path not found: checkpoint_000002"))
            handling(RuntimeError("something else"))
            handling(FileNotFoundError("a new checkpoint's file"), deleting=False)  # not the old one's deletion
        handling(FileNotFoundError("Path not found: checkpoint_000002"))  # outside sweep.run: Tune's own
    finally:
        log.removeHandler(handler)
    assert [r.exc_info[1].args[0] for r in shown if r.exc_info and r.exc_info[1]] == [
        "something else",
        "a new checkpoint's file",
        "Path not found: checkpoint_000002",
    ]
