"""The sweep directory is read through one SweepDir, which reads each of its files once per run."""

from __future__ import annotations

import dataclasses

import pytest
from _blocks import plan_of, trained_blocks, write_sweep
from _local_fs import counting_filesystem
from helpers import tiny_spec

import sweep
from sweep.planning import MemberId
from sweep.store import SweepDir
from sweep.training import save_block


def _opens(counter, suffix: str) -> dict[str, int]:
    return {path: opens for path, (opens, _) in counter.by_file().items() if path.endswith(suffix)}


def test_each_file_is_read_once_and_refresh_reads_only_new_checkpoints(tmp_path):
    spec = tiny_spec()
    plan = plan_of(spec)
    blocks = trained_blocks(plan)
    root = write_sweep(tmp_path / "tiny", plan, blocks[:1])
    fs, counter = counting_filesystem()
    where = SweepDir.at(str(root), fs)

    done, refs = where.done(spec)
    assert done == {MemberId.of(t.config_id, s, h) for t in plan.trials[:1] for h, s in t.members()}
    assert set(refs) == {plan.trials[0].trial_key}
    where.done(spec), where.plan(), where.blocks()  # asked again: nothing read again
    assert list(_opens(counter, "plan.json").values()) == [1]
    assert list(_opens(counter, "block.json").values()) == [1]

    b = blocks[1]  # a trial writes its checkpoint meanwhile
    new = root / "run" / f"trial_{b.trial_id}" / "checkpoint_000001"
    save_block(new, spec=b.spec, state=b.state, history=b.history, shapes=b.shapes, trial_id=b.trial_id)
    assert set(where.blocks()) == {plan.trials[0].trial_key}  # as of the last listing
    where.refresh()
    assert set(where.blocks()) == {t.trial_key for t in plan.trials[:2]}
    assert sorted(_opens(counter, "block.json").values()) == [1, 1]  # the new one read, the old one not again

    where.write_plan(plan)  # its own write: kept, not read back
    assert where.plan() == plan and list(_opens(counter, "plan.json").values()) == [1]


def test_a_member_id_names_the_same_member_however_it_is_spelled():
    assert MemberId.of("c", 3, {"learning_rate": 1e-3}) == MemberId.of("c", 3.0, {"learning_rate": 0.001})
    assert MemberId.of("c", 3, {"learning_rate": 1e-3}) != MemberId.of("c", 3, {"learning_rate": 3e-3})
    config_id, seed, hparams = MemberId.of("c", 3, {"learning_rate": 1e-3})  # a plain tuple too
    assert (config_id, seed) == ("c", 3) and "learning_rate" in hparams


def test_a_resumed_run_with_more_seeds_reads_the_plan_and_each_block_json_once(tmp_path):
    """What a resumed, extended sweep reads of its directory (the driver, through a counting
    filesystem): plan.json once, and every block checkpoint's block.json once (the loop's reads,
    the same for either executor; in-process here)."""
    spec, options = tiny_spec(seeds=4), sweep.RunOptions(executor="local", progress="off")
    path = sweep.run(spec, storage=str(tmp_path), options=options)
    fs, counter = counting_filesystem()
    more = dataclasses.replace(spec, seeds=6)
    resume = dataclasses.replace(options, resume=True)
    again = sweep.run(more, storage=str(tmp_path), storage_filesystem=fs, options=resume)
    assert again == path
    assert list(_opens(counter, "plan.json").values()) == [1]
    block_reads = _opens(counter, "block.json")
    assert len(block_reads) >= 3 and set(block_reads.values()) == {1}, block_reads  # 2 old trials, 1 new
    ens = sweep.load(path)
    assert sorted(ens.table["seed"].to_pylist()) == list(range(6))


@pytest.mark.parametrize("field", ["num_samples", "search_alg", "trial_name_creator"])
def test_tune_fields_a_sweep_owns_are_refused(field):
    from ray import tune

    value = {"num_samples": 4, "search_alg": object(), "trial_name_creator": str}[field]
    with pytest.raises(sweep.SpecError, match=rf"`tune_config\.{field}`: got .*a sweep sets it itself; use"):
        sweep.run(tiny_spec(), tune_config=tune.TuneConfig(**{field: value}))


def test_an_unknown_option_names_the_tune_config_that_holds_it():
    with pytest.raises(sweep.SpecError, match=r"`max_concurrent_trials`: .*tune_config=tune\.TuneConfig"):
        sweep.run(tiny_spec(), max_concurrent_trials=1)
    with pytest.raises(sweep.SpecError, match=r"`callbacks`: .*run_config=tune\.RunConfig"):
        sweep.run(tiny_spec(), callbacks=[])
    with pytest.raises(
        sweep.SpecError, match=r"`colour`: not an argument of sweep\.run nor a field of sweep\.RunOptions"
    ):
        sweep.run(tiny_spec(), colour="red")


class _Stop(Exception):
    """Raised by the recording ``tune.Tuner``: the experiment is not run."""


def _tuner_configs(monkeypatch, tmp_path, spec, options):
    """``(tune_config, run_config)`` that ``sweep.run`` gives ``ray.tune.Tuner``."""
    from ray import tune

    seen = {}

    def recording(trainable, *, param_space, tune_config, run_config):
        seen.update(tune=tune_config, run=run_config)
        raise _Stop

    monkeypatch.setattr(tune, "Tuner", recording)
    with pytest.raises(_Stop):
        sweep.run(spec, storage=str(tmp_path), options=dataclasses.replace(options, progress="off"))
    return seen["tune"], seen["run"]


def test_the_run_config_keeps_the_sweeps_defaults_unless_the_user_set_them(ray_session, tmp_path, monkeypatch):
    from ray import tune

    from sweep import RunOptions

    spec = tiny_spec()
    configs, plain = _tuner_configs(monkeypatch, tmp_path / "a", spec, RunOptions())
    assert plain.verbose == 0 and plain.name == "tune-0001" and plain.storage_path == str(tmp_path / "a" / spec.name)
    assert plain.failure_config.max_failures == 2 and plain.checkpoint_config.num_to_keep == 2
    assert type(plain.callbacks[-1]).__name__ == "TrialTensorBoard"  # after the sweep's own callbacks
    assert configs.reuse_actors is True and configs.metric == "val_loss_mean"
    theirs_callback = tune.Callback()
    user = tune.RunConfig(
        stop={"training_iteration": 1},
        failure_config=tune.FailureConfig(max_failures=5),
        checkpoint_config=tune.CheckpointConfig(num_to_keep=3),
        callbacks=[theirs_callback],
    )
    _, theirs = _tuner_configs(monkeypatch, tmp_path / "b", spec, RunOptions(run_config=user, verbose=1))
    assert theirs.stop == {"training_iteration": 1} and theirs.verbose == 1
    assert theirs.failure_config.max_failures == 5 and theirs.checkpoint_config.num_to_keep == 3
    assert theirs.callbacks[0] is theirs_callback  # theirs first, then the sweep's
    assert [type(c) for c in theirs.callbacks[1:]] == [type(c) for c in plain.callbacks]
    explicit = RunOptions(failure_config=tune.FailureConfig(max_failures=7), run_config=user)
    assert _tuner_configs(monkeypatch, tmp_path / "c", spec, explicit)[1].failure_config.max_failures == 7
    no_val = tiny_spec(problem=sweep.Problem("heat1d", num_points=16, num_samples=60, val_fraction=0))
    given = RunOptions(tune_config=tune.TuneConfig())
    assert _tuner_configs(monkeypatch, tmp_path / "d", no_val, given)[0].metric is None  # nothing to rank by
