"""Adaptive seeds through sweep.run (in-process, and a killed driver on a local Ray): rounds, decisions in the plan and the store,
resume after a kill at any point, configurations joining a finished race, refusals."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest
from helpers import built_once, invoke, kill_driver_when, tiny_spec, wait_trials_ended

import sweep
from sweep import racing
from sweep.planning import hparams_key
from sweep.tune import TrialHooks

LEARNING_RATES = [1e-2, 1e-5, 3e-3]
# 3 configurations at confidence 0.9: rank tests at 0.1 / 6 (6 ordered pairs), which 4 seeds against 4
# (at best 1 / 70) cannot reach and 6 against 6 (1 / 924) can: the first decision is at round 2
SEEDS = sweep.Adaptive(start=4, step=2, max=6, confidence=0.9)
LOCAL = sweep.RunOptions(executor="local")  # a race's rounds are the policy's: no need for Tune here


def race_spec(rates=LEARNING_RATES, **changes) -> sweep.SweepSpec:
    return tiny_spec(seeds=SEEDS, grid={"optimizer.learning_rate": rates}, seeds_per_trial=4, **changes)


def plan_race(path) -> dict:
    return json.loads((Path(path) / "plan.json").read_text())["race"]


def store_files(path) -> dict[str, str]:
    """sha256 of every leaves file and of the members' rows (the same members, bit for bit)."""
    import pyarrow.parquet as pq

    store = Path(path) / "ensembles"
    out = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(store.rglob("*.eqx"))}
    out["members"] = hashlib.sha256(pq.read_table(store / "members.parquet").to_pandas().to_json().encode()).hexdigest()
    return out


def round_keys(path, n: int) -> list[str]:
    """The trial keys of the race's round ``n`` (from its plan)."""
    trials = json.loads((Path(path) / "plan.json").read_text())["trials"]
    return [t["trial_key"] for t in trials if tuple(t["seeds"]) == SEEDS.seeds_in(n)]


@pytest.fixture(scope="module")
def raced(tmp_path_factory):
    """The race of ``race_spec()`` run uninterrupted, once per test run (read it, do not change it)."""
    return built_once(
        tmp_path_factory, "race", lambda storage: sweep.run(race_spec(), storage=str(storage), options=LOCAL)
    )


def test_a_race_trains_rounds_and_records_its_decisions(raced):
    race = racing.Race.from_dict(plan_race(raced))
    ((config, hsets),) = race_spec().expand()
    key = {h["learning_rate"]: (config.config_id, hparams_key(h)) for h in hsets}
    decisions = race.decisions()
    assert [e.number for e in race.evaluations] == list(range(1, len(race.evaluations) + 1))
    assert all(s.status == "racing" for s in race.evaluations[0].standings)  # 4 seeds: too few to decide
    assert decisions[key[1e-5]].status == "eliminated" and decisions[key[1e-5]].round == 2  # barely trains
    assert race.best == key[1e-2]
    assert key[1e-2] not in decisions
    # the store: each member's round, only the seeds the race trained, the decisions in the manifest
    ens = sweep.load(raced)
    rows = ens.table.select(["seed", "learning_rate", "round", "val_loss"]).to_pylist()
    assert all(r["round"] == SEEDS.round_of(r["seed"]) for r in rows)
    seeds = {lr: sorted(r["seed"] for r in rows if r["learning_rate"] == lr) for lr in LEARNING_RATES}
    assert seeds[1e-5] == list(range(6)) and seeds[1e-2] == list(range(SEEDS.seeds_through(len(race.evaluations))))
    table = ens.race()
    assert table is not None
    by_rate = {r["learning_rate"]: r for r in table.to_pylist()}
    assert (by_rate[1e-5]["status"], by_rate[1e-5]["round"], by_rate[1e-5]["seeds"]) == ("eliminated", 2, 6)
    assert by_rate[1e-2]["best"] and by_rate[1e-2]["status"] in ("finished", "decided")
    # every interval is the one the race computes from the stored values (the pure function)
    values = {
        key[lr]: np.asarray([r["val_loss"] for r in sorted(rows, key=lambda r: r["seed"]) if r["learning_rate"] == lr])
        for lr in LEARNING_RATES
    }
    assert racing.simulate(SEEDS, values) == race
    assert ens.where(round=1).table.num_rows == 3 * SEEDS.start


def test_the_display_says_which_round_tested_a_racing_configuration(raced):
    """While round 2 trains, a configuration still racing shows round 1's mean and test: the row
    says so ("tested at round 1"), where the race line names the round being trained."""
    race = racing.Race.from_dict(plan_race(raced))
    ((config, hsets),) = race_spec().expand()
    keys = [(config.config_id, hparams_key(h)) for h in hsets]
    after_round_1 = dataclasses.replace(race, evaluations=race.evaluations[:1])
    step = racing.RaceStep({k: SEEDS.seeds_in(2) for k in keys}, after_round_1, None)
    statuses = [status for _, _, status in racing.rows(SEEDS, step, keys).values()]
    assert all(s.startswith("racing (tested at round 1)") for s in statuses), statuses
    before = racing.RaceStep({k: SEEDS.seeds_in(1) for k in keys}, dataclasses.replace(race, evaluations=()), None)
    assert [status for _, _, status in racing.rows(SEEDS, before, keys).values()] == ["racing"] * len(keys)


def test_sweep_show_lists_the_decisions(raced):
    result = invoke("show", raced)
    assert result.exit_code == 0, result.output
    text = result.output
    assert "race of 3 configurations on val_loss (lower is better; start 4, step 2, max 6)" in text
    assert "a best configuration kept at 0.9 (rank tests against the best, first decision after 6 seeds)" in text
    line = next(line for line in text.splitlines() if line.lstrip().startswith("1e-05"))
    assert "eliminated" in line.split() and "2" in line.split()


def test_a_finished_race_has_nothing_to_train(raced, tmp_path, capsys):
    shutil.copytree(raced, tmp_path / "tiny", symlinks=True)
    before = sorted(p.name for p in raced.glob("local/*/*"))
    path = sweep.run(race_spec(), storage=str(tmp_path), progress="plain")  # nothing to train: no executor starts
    assert sorted(p.name for p in Path(path).glob("local/*/*")) == before
    out = capsys.readouterr().out
    assert "race of 3 configurations on val_loss (lower is better; start 4, step 2, max 6): over after" in out
    assert "(rank tests against the best, first decision after 6 seeds)" in out


def test_stopped_after_a_decision_was_written_resumes_to_the_same_race(raced, tmp_path):
    """Ctrl-C right after round 1's evaluation is in plan.json, as round 2's trial starts."""
    from _faults import CtrlCAtStart

    first_of_round_2 = len(LEARNING_RATES) + 1  # round 1: a block per configuration
    stop = dataclasses.replace(LOCAL, trial_hooks=TrialHooks(on_start=CtrlCAtStart(first_of_round_2)))
    with pytest.raises(sweep.tune.Interrupted):
        sweep.run(race_spec(), storage=str(tmp_path), options=stop)
    assert len(plan_race(tmp_path / "tiny")["evaluations"]) == 1
    path = sweep.run(race_spec(), storage=str(tmp_path), options=LOCAL)
    assert plan_race(path) == plan_race(raced)
    assert store_files(path) == store_files(raced)


class FailRound:
    """``after_report``: a trial of ``keys`` fails after its first report (once per marker file)."""

    def __init__(self, marker: str, keys: list[str]):
        self.marker, self.keys = marker, set(keys)

    def __call__(self, trial_key: str, epoch: int) -> None:
        if trial_key in self.keys and not os.path.exists(self.marker):
            Path(self.marker).touch()
            raise RuntimeError("injected failure mid-round")


def test_a_round_failed_mid_way_resumes_to_the_same_race(raced, tmp_path):
    hooks = TrialHooks(after_report=FailRound(str(tmp_path / "failed"), round_keys(raced, 2)))
    with pytest.raises(sweep.SweepError, match="injected failure mid-round"):
        sweep.run(race_spec(), storage=str(tmp_path), options=dataclasses.replace(LOCAL, trial_hooks=hooks))
    assert len(plan_race(tmp_path / "tiny")["evaluations"]) == 1  # round 2 was not evaluated
    path = sweep.run(race_spec(), storage=str(tmp_path), options=dataclasses.replace(LOCAL, resume=True))
    assert plan_race(path) == plan_race(raced)
    assert store_files(path) == store_files(raced)


def test_configurations_added_to_a_finished_race_start_at_round_1(raced, tmp_path):
    shutil.copytree(raced, tmp_path / "tiny", symlinks=True)
    path = sweep.run(race_spec([*LEARNING_RATES, 2e-2]), storage=str(tmp_path), options=LOCAL)
    old, new = plan_race(raced), plan_race(path)
    assert new["evaluations"][: len(old["evaluations"])] == old["evaluations"]  # earlier decisions stand
    added = hparams_key({"learning_rate": 2e-2})
    joined = [s for e in new["evaluations"][len(old["evaluations"]) :] for s in e["standings"] if s["hparams"] == added]
    assert joined[0]["round"] == 1 and joined[0]["seeds"] == SEEDS.start
    ens = sweep.load(path)
    assert sorted(ens.where(learning_rate=2e-2).table["seed"].to_pylist())[: SEEDS.start] == list(range(SEEDS.start))
    kept = ens.where(learning_rate=1e-5).table  # eliminated before: not trained again
    assert sorted(kept["seed"].to_pylist()) == list(range(6))


def test_a_max_below_the_rounds_raced_is_refused_before_any_work(raced, tmp_path):
    shutil.copytree(raced, tmp_path / "tiny", symlinks=True)
    lower = dataclasses.replace(SEEDS, max=4)  # one round; the race has raced round 2 (6 seeds)
    with pytest.raises(
        sweep.SpecError,
        match=r"^`seeds.adaptive.max`: got 4; the race of sweep 'tiny' has raced configurations to round 2 "
        r"\(6 seeds each\), and max=4 ends a race at round 1. Go on with max >= 6 \(--set seeds.adaptive.max=6\)",
    ):
        spec = tiny_spec(seeds=lower, grid={"optimizer.learning_rate": [*LEARNING_RATES, 2e-2]}, seeds_per_trial=4)
        sweep.run(spec, storage=str(tmp_path), options=LOCAL)
    assert plan_race(tmp_path / "tiny") == plan_race(raced)


@pytest.mark.parametrize("resume", [True, False])
def test_a_race_goes_on_only_with_the_settings_it_ran_with(raced, tmp_path, resume):
    """Other epochs make other configurations: they would race the old ones as newcomers, told
    apart by config id alone (the walk's race marked a 10-epoch configuration best beside 30-epoch
    ones 13x better)."""
    shutil.copytree(raced, tmp_path / "tiny", symlinks=True)
    spec = race_spec()
    other = dataclasses.replace(spec, training=dataclasses.replace(spec.training, epochs=spec.training.epochs + 1))
    with pytest.raises(
        sweep.SpecError,
        match=rf"^`seeds.adaptive`: the race of sweep 'tiny' compares configurations trained with its last run's "
        rf"settings, and this spec differs in training.epochs \({spec.training.epochs + 1} here, "
        rf"{spec.training.epochs} there\); go on with the settings it ran with \(on the command line: --set "
        rf"training.epochs={spec.training.epochs}\)",
    ):
        sweep.run(other, storage=str(tmp_path), options=dataclasses.replace(LOCAL, resume=resume))
    assert plan_race(tmp_path / "tiny") == plan_race(raced)
    with pytest.raises(sweep.SpecError, match=r"^`seeds.adaptive`: the race of sweep 'tiny' compares"):
        sweep.plan(other, storage=str(tmp_path))  # as run refuses it


def test_a_scheduler_or_a_stop_is_refused_before_any_work(tmp_path):
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler

    with pytest.raises(sweep.SpecError, match=r"`scheduler`: got AsyncHyperBandScheduler; with adaptive seeds"):
        sweep.run(race_spec(), storage=str(tmp_path), scheduler=ASHAScheduler(max_t=4))
    with pytest.raises(sweep.SpecError, match=r"`run_config.stop`"):
        sweep.run(race_spec(), storage=str(tmp_path), run_config=tune.RunConfig(stop={"training_iteration": 1}))
    assert not (tmp_path / "tiny").exists()


def test_a_race_needs_a_validation_set(tmp_path):
    spec = race_spec(problem=sweep.Problem("heat1d", num_points=16, num_samples=60, data_seed=0, val_fraction=0))
    with pytest.raises(sweep.SpecError, match=r"`seeds.adaptive.metric`: 'val_loss' needs a validation set"):
        sweep.run(spec, storage=str(tmp_path), options=LOCAL)
    with pytest.raises(sweep.SpecError, match=r"needs a validation set"):
        sweep.plan(spec)


def test_plan_shows_the_next_round(raced):
    planned = sweep.plan(race_spec())
    assert {t.seeds for t in planned.trials} == {SEEDS.seeds_in(1)}
    assert (
        "race of 3 configurations on val_loss (lower is better; start 4, step 2, max 6): a best configuration kept at 0.9 "
        in str(planned)
    )
    assert "first decision after 6 seeds" in str(planned)  # what `sweep plan` prints
    stored = sweep.plan(race_spec(), storage=str(raced.parent))
    assert stored.trials == () and stored.race == racing.Race.from_dict(plan_race(raced))  # the race is over


DRIVER = textwrap.dedent("""
    import sys
    from _faults import Barrier, OnlyFor, SleepAfterReport
    import sweep
    from sweep.tune import TrialHooks
    sys.path.insert(0, {tests!r})
    from test_race_run import race_spec
    # round 2's trials wait after each report, so the kill lands mid-round
    hooks = TrialHooks(on_start=Barrier({pids!r}, 1, 0), after_report=OnlyFor({second!r}, SleepAfterReport(30)))
    sweep.run(race_spec(), storage={storage!r}, options=sweep.RunOptions(address={address!r}, trial_hooks=hooks))
""")


def test_a_race_on_tune_trains_every_round_in_one_experiment_on_the_same_workers(raced, ray_session, tmp_path):
    path = Path(sweep.run(race_spec(), storage=str(tmp_path), options=sweep.RunOptions(address=ray_session)))
    assert plan_race(path) == plan_race(raced) and store_files(path) == store_files(raced)
    assert [p.name for p in path.glob("tune-*")] == ["tune-0001"]
    results = [json.loads(p.read_text().splitlines()[-1]) for p in path.glob("tune-0001/*/result.json")]
    trials = json.loads((path / "plan.json").read_text())["trials"]
    assert len(results) == len(trials) > 3  # two rounds: 3 + 3 trials
    first = min(min(t["seeds"]) for t in trials)
    round_of = {t["trial_key"]: 1 if min(t["seeds"]) == first else 2 for t in trials}
    pids = {n: {r["pid"] for r in results if round_of[r["config"]["trial_key"]] == n} for n in (1, 2)}
    assert pids[1] & pids[2]  # a process of round 1 trains in round 2: Tune keeps it across the rounds


@pytest.mark.slow
def test_driver_killed_mid_round_then_resumed_equals_uninterrupted(raced, ray_session, tmp_path):
    storage, pids = tmp_path / "store", tmp_path / "pids"
    script = DRIVER.format(
        tests=str(Path(__file__).parent),
        pids=str(pids),
        storage=str(storage),
        address=ray_session,
        second=round_keys(raced, 2),
    )
    # the rounds share one Tune experiment: kill once a trial of round 2 has checkpointed
    kill_driver_when(
        script, f"tiny/tune-0001/{round_keys(raced, 2)[0]}/checkpoint_*/block.json", storage, timeout_s=300
    )
    assert len(plan_race(storage / "tiny")["evaluations"]) == 1
    wait_trials_ended(pids)  # Ray ends the dead driver's trial processes
    path = sweep.run(race_spec(), storage=str(storage), options=sweep.RunOptions(resume=True))
    assert plan_race(path) == plan_race(raced)
    assert store_files(path) == store_files(raced)
