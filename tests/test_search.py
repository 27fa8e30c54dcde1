"""``sweep.Search``: spaces checked before work, Optuna's proposals through ask and tell, seeds
per configuration and batches (trials and programs counted), resume equal to an uninterrupted
search, and the end's comparison by intervals over seeds (in-process executor)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path

import pytest
from helpers import invoke, store_files, tiny_spec

import sweep
from sweep.search import Observation, SearchRecord, propose
from sweep.tune import TrialHooks

LOCAL = sweep.RunOptions(executor="local", progress="off")
LR = {"optimizer.learning_rate": sweep.loguniform(1e-3, 3e-2)}


def search_spec(configurations=4, batch=2, space=None, seeds=3, **changes) -> sweep.SweepSpec:
    search = sweep.Search(space=space or LR, configurations=configurations, batch=batch)
    return tiny_spec(seeds=seeds, seeds_per_trial=4, search=search, **changes)


def record(path) -> dict:
    return json.loads((Path(path) / "search.json").read_text())


def planned_trials(path) -> list[dict]:
    return json.loads((Path(path) / "plan.json").read_text())["trials"]


# -- the space -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("space", "batch", "match"),
    [
        ({"model.dept": sweep.randint(1, 3)}, 1, r"`model.dept`: not an argument .*did you mean 'depth'"),
        (
            {"modle.depth": sweep.randint(1, 3)},
            1,
            r"key 'modle.depth' is not a spec field.*did you mean.*; use model.<option>, optimizer.<option> or "
            r"training.<field>$",  # only what a search can take
        ),
        ({"sweep_seed": sweep.randint(0, 3)}, 1, r"'sweep_seed' cannot be searched; seeds are what it observes"),
        ({"model.activation": sweep.loguniform(1e-3, 1.0)}, 1, r"search.space.model.activation`: loguniform .*choice"),
        ({"model.depth": sweep.uniform(1.0, 4.0)}, 1, r"search.space.model.depth`: uniform draws real.*randint"),
        ({"optimizer.learning_rate": sweep.loguniform(0.0, 1.0)}, 1, r"loguniform got \[0.0, 1.0\]; needs 0 < low"),
        ({"problem.num_samples": sweep.randint(50, 60)}, 1, r"'problem.num_samples' cannot be searched"),
        (LR, 5, r"`search.batch`: got 5, more than `search.configurations` \(4\)"),
    ],
)
def test_bad_spaces_are_named_before_work(space, batch, match):
    with pytest.raises(sweep.SpecError, match=match):
        search_spec(space=space, batch=batch)


def test_a_distribution_on_a_field_left_at_its_default_names_the_draw_that_fails():
    """``model.activation`` not in the spec (the architecture's default): the drawn end is named,
    with sweep.choice, not only the model's own error."""
    model = sweep.Model("ConvNet", hidden_channels=4, depth=1)
    with pytest.raises(
        sweep.SpecError,
        match=r"^`search.space.model.activation`: loguniform draws real numbers, and model.activation = 0.1 makes "
        r"no valid spec \(`model.activation`: unknown activation 0.1; .*\); give a range whose ends are valid, or "
        r"sweep.choice\(\[...\]\) of the values it takes$",
    ):
        search_spec(space={"model.activation": sweep.loguniform(0.1, 1.0)}, model=model)
    with pytest.raises(sweep.SpecError, match=r"unknown field\(s\) \['configs'\] \(did you mean 'configurations'\?\)"):
        sweep.Search.from_dict({"space": {"model.depth": {"randint": [1, 3]}}, "configs": 4})


CUT = {"training.unroll": sweep.choice([1, 2]), "training.cut": sweep.choice([False, True])}


def test_a_space_whose_values_make_no_valid_spec_together_is_refused_before_work():
    unrolled = sweep.Training(epochs=2, batch_size=16, unroll=2)
    with pytest.raises(
        sweep.SpecError,
        match=r"^`search.space`: training.unroll=1, training.cut=True makes no valid spec \(`training.cut`: true "
        r"with unroll=1; .*\), and the search may propose it; give a space whose every combination",
    ):
        sweep.plan(search_spec(space=CUT, training=unrolled))  # (a stored spec, read, is not held to it)


def test_a_proposal_that_makes_no_valid_spec_is_named_and_not_recorded(tmp_path):
    """A space of more combinations than are checked before work: the proposal is checked before
    ``search.json`` records it, so the search goes on once the space is mended."""
    rates = sweep.choice([round(1e-3 + 1e-6 * i, 7) for i in range(1100)])  # 4400 combinations
    spec = tiny_spec(
        seeds=2,
        training=sweep.Training(epochs=2, batch_size=16, unroll=2),
        search=sweep.Search(space={**CUT, "optimizer.learning_rate": rates}, algorithm="random", batch=4),
    )
    with pytest.raises(
        sweep.SpecError, match=r"^`search.space`: the sampler proposed \{.*'training.unroll': 1, 'training.cut': True"
    ):
        sweep.run(spec, storage=str(tmp_path), options=LOCAL)
    assert not (tmp_path / "tiny" / "search.json").exists()


def test_a_search_beside_a_grid_or_with_adaptive_seeds_is_refused():
    with pytest.raises(sweep.SpecError, match=r"`search`: given beside `grid`"):
        search_spec(grid={"model.depth": [1, 2]})
    with pytest.raises(sweep.SpecError, match=r"`seeds`: a search trains a fixed number"):
        tiny_spec(seeds=sweep.Adaptive(), search=sweep.Search(space=LR))
    with pytest.raises(sweep.SpecError, match=r"`search.metric`: got 'val_nrmse'"):
        tiny_spec(search=sweep.Search(space=LR, metric="val_nrmse"))


def test_a_scheduler_or_a_stop_is_refused_before_any_work(tmp_path):
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler

    with pytest.raises(sweep.SpecError, match=r"`scheduler`: got AsyncHyperBandScheduler; a search observes each"):
        sweep.run(search_spec(), storage=str(tmp_path), scheduler=ASHAScheduler(max_t=4))
    with pytest.raises(sweep.SpecError, match=r"`run_config.stop`: .*unobserved. Leave `stop` out of a search"):
        sweep.run(search_spec(), storage=str(tmp_path), run_config=tune.RunConfig(stop={"training_iteration": 1}))
    assert not any(tmp_path.iterdir())


def test_a_space_of_few_points_is_searched_without_repeats(tmp_path):
    few = {"optimizer.learning_rate": sweep.choice([3e-3, 1e9]), "model.depth": sweep.randint(1, 3)}
    with pytest.raises(
        sweep.SpecError,
        match=r"^`search.configurations`: got 5, but the space holds 4 configuration\(s\) \(optimizer.learning_rate: "
        r"2 values x model.depth: 2 values\); search at most 4, or train every one of them as a grid$",
    ):
        sweep.plan(search_spec(space=few, configurations=5))
    with pytest.raises(
        sweep.SpecError, match=r"`search.space.model.depth`: choice lists 1 twice; give each value once"
    ):
        sweep.plan(search_spec(space={"model.depth": sweep.choice([1, 2, 1])}, configurations=2))
    big = {"training.epochs": sweep.randint(1, 2**30)}  # counted, not listed
    assert search_spec(space=big).search.size == 2**30 - 1
    for algorithm, batch in (("random", 2), ("tpe", 1)):  # random repeats itself at sweep_seed 0; TPE once told
        search = sweep.Search(space=few, algorithm=algorithm, configurations=4, batch=batch)
        rec = SearchRecord()
        while len(rec.points) < 4:
            rec = rec.ask(propose(search, 0, rec, batch))
            rec = rec.tell(tuple(Observation(p["model.depth"], 0.0, 4) for p in rec.rounds[-1].asked))
        assert len({json.dumps(p, sort_keys=True) for p in rec.points}) == 4, rec.points


def test_a_runner_up_that_diverged_on_every_seed_is_named_as_such(tmp_path):
    space = {"optimizer.learning_rate": sweep.choice([3e-3, 1e9])}
    spec = tiny_spec(seeds=4, search=sweep.Search(space=space, algorithm="random", configurations=2, batch=2))
    path = sweep.run(spec, storage=str(tmp_path), options=LOCAL)
    assert sorted(p["optimizer.learning_rate"] for r in record(path)["rounds"] for p in r["asked"]) == [3e-3, 1e9]
    from sweep.search import summary
    from sweep.store import SweepDir

    said = summary(spec, SweepDir.of(spec, str(tmp_path)))
    assert said is not None and "the best is the only one with a finite val_loss: the runner-up (#" in said
    assert ") diverged on every seed" in said


def test_a_sampler_whose_package_is_missing_is_named_by_plan_before_work(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "cmaes" else real(name, *a))
    spec = tiny_spec(seeds=3, search=sweep.Search(space=LR, configurations=4, batch=2, algorithm="cmaes"))
    with pytest.raises(sweep.SpecError, match=r"`search.algorithm`: 'cmaes' needs the package 'cmaes', which is not"):
        sweep.plan(spec)


def test_toml_tables_and_tune_domains_give_the_same_search(tmp_path):
    from ray import tune

    spec = search_spec(
        space={"optimizer.learning_rate": sweep.loguniform(1e-3, 3e-2), "model.depth": sweep.randint(1, 3)}
    )
    (tmp_path / "s.toml").write_text(spec.to_toml())
    assert sweep.SweepSpec.from_toml(tmp_path / "s.toml") == spec
    table = tmp_path / "t.toml"
    table.write_text(
        spec.to_toml().split("[search]")[0]
        + '[search]\nconfigurations = 4\nbatch = 2\n[search.space]\n"optimizer.learning_rate" = {loguniform = [1e-3, 3e-2]}\n'
        + '"model.depth" = {randint = [1, 3]}\n'
    )
    assert sweep.SweepSpec.from_toml(table) == spec
    ray_space = {"optimizer.learning_rate": tune.loguniform(1e-3, 3e-2), "model.depth": tune.randint(1, 3)}
    assert search_spec(space=ray_space) == spec


# -- the engine ----------------------------------------------------------------------------------
def test_tpe_draws_its_first_four_or_batch_configurations_at_random_and_then_models_the_space():
    """Optuna's TPE draws 10 configurations at random by default (most of a small search); a search
    draws only max(batch, 4) so: its first round of 4, or its first four rounds of one."""
    space = {"optimizer.learning_rate": sweep.loguniform(1e-5, 1e-1), "model.depth": sweep.randint(1, 6)}
    for batch, random_rounds in ((4, 1), (1, 4)):
        tpe, uniform = (
            sweep.Search(space=space, configurations=16, batch=batch, algorithm=a) for a in ("tpe", "random")
        )
        rec = SearchRecord()
        for _ in range(random_rounds):
            assert propose(tpe, 0, rec, batch) == propose(uniform, 0, rec, batch)  # a random start
            rec = rec.ask(propose(tpe, 0, rec, batch))
            told = (Observation(math.log10(p["optimizer.learning_rate"]) ** 2, 0.0, 4) for p in rec.rounds[-1].asked)
            rec = rec.tell(tuple(told))
        assert propose(tpe, 0, rec, batch) != propose(uniform, 0, rec, batch)


def test_the_sampler_finds_a_known_optimum_through_ask_and_tell():
    """min (log10 lr + 2.5)^2 + (depth - 3)^2 / 10: the optimum is lr = 10**-2.5, depth 3."""
    search = sweep.Search(
        space={"optimizer.learning_rate": sweep.loguniform(1e-5, 1e-1), "model.depth": sweep.randint(1, 6)},
        configurations=48,
        batch=4,
    )
    rec = SearchRecord()
    while len(rec.points) < search.configurations:
        rec = rec.ask(propose(search, 0, rec, search.batch))
        assert rec.pending is not None
        told = [
            (math.log10(p["optimizer.learning_rate"]) + 2.5) ** 2 + (p["model.depth"] - 3) ** 2 / 10
            for p in rec.pending.asked
        ]
        rec = rec.tell(tuple(Observation(v, 0.0, 1) for v in told))
    best = min(rec.observations, key=lambda o: o[1].mean)[0]
    assert abs(math.log10(best["optimizer.learning_rate"]) + 2.5) < 0.25
    assert best["model.depth"] == 3
    # the same record and seed propose the same batch; a batch's points differ (constant liar)
    assert propose(search, 0, rec, 4) == propose(search, 0, rec, 4)
    assert len({json.dumps(p, sort_keys=True) for p in propose(search, 0, rec, 4)}) == 4


# -- runs ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    return Path(sweep.run(search_spec(), storage=str(tmp_path_factory.mktemp("search")), options=LOCAL))


def test_each_configuration_trains_its_seeds_in_its_own_block_of_one_program(uninterrupted):
    rounds = record(uninterrupted)["rounds"]
    assert [len(r["asked"]) for r in rounds] == [2, 2]
    assert all(o["seeds"] == 3 and o["stderr"] > 0 for r in rounds for o in r["told"])
    trials = planned_trials(uninterrupted)
    # a block per configuration (as a race's rounds): every block has one shape, whatever a round
    # proposes; a learning rate differs only in a scalar, so all four share one structural config
    assert [(len(t["hparams"]), t["seeds"]) for t in trials] == [(1, [0, 1, 2])] * 4
    assert len({t["config_id"] for t in trials}) == 1
    manifest = json.loads((uninterrupted / "ensembles" / "manifest.json").read_text())
    assert manifest["num_members"] == 4 * 3


def test_structural_proposals_become_their_own_trials(tmp_path):
    spec = search_spec(configurations=2, space={**LR, "model.depth": sweep.choice([1, 2])})
    path = sweep.run(spec, storage=str(tmp_path), options=LOCAL)
    (points,) = [r["asked"] for r in record(path)["rounds"]]
    depths = {p["model.depth"] for p in points}
    trials = planned_trials(path)
    assert len(trials) == len(points) and len({t["config_id"] for t in trials}) == len(depths)


def test_a_structural_search_run_again_counts_every_member_it_trained(tmp_path, capsys):
    """A search's configurations of other structural configs than its spec's (another depth) are
    counted as trained by a later run (from ``search.json``), not only those of the spec's own."""
    spec = search_spec(space={**LR, "model.depth": sweep.choice([1, 2])})
    path = sweep.run(spec, storage=str(tmp_path), options=LOCAL)
    assert len({p["model.depth"] for r in record(path)["rounds"] for p in r["asked"]}) == 2  # the case
    capsys.readouterr()
    generations = sorted(p.name for p in (Path(path) / ".ensembles").iterdir())
    sweep.run(spec, storage=str(tmp_path), options=dataclasses.replace(LOCAL, progress="plain"))
    assert f"nothing to train: {4 * 3} members already in" in capsys.readouterr().out
    assert sorted(p.name for p in (Path(path) / ".ensembles").iterdir()) == generations  # none aggregated again


def test_resume_after_a_failure_mid_search_equals_an_uninterrupted_search(uninterrupted, tmp_path):
    marker = tmp_path / "failed"

    class FailInRoundTwo:  # the first report of the second round's trial fails once
        def __call__(self, trial_key: str, epoch: int) -> None:
            told = record(tmp_path / "tiny")["rounds"][0]["told"] is not None
            if told and not marker.exists():
                marker.touch()
                raise RuntimeError("killed")

    hooks = TrialHooks(after_report=FailInRoundTwo())
    with pytest.raises(sweep.SweepError, match="killed"):
        sweep.run(search_spec(), storage=str(tmp_path), options=dataclasses.replace(LOCAL, trial_hooks=hooks))
    assert record(tmp_path / "tiny")["rounds"][1]["told"] is None  # asked, not told
    path = sweep.run(search_spec(), storage=str(tmp_path), options=dataclasses.replace(LOCAL, resume=True))
    assert record(path) == record(uninterrupted)
    assert store_files(path) == store_files(uninterrupted)


# slow: test_resume_after_a_failure_mid_search_equals_an_uninterrupted_search covers it in-process
@pytest.mark.slow
def test_a_search_failed_mid_round_on_tune_resumes_its_experiment(uninterrupted, ray_session, tmp_path):
    """On Ray Tune a resume restores the round's experiment, whose trials the live display must
    know: the search's configurations asked by the earlier call."""
    from _faults import FailInSecondRound

    hooks = TrialHooks(after_report=FailInSecondRound(tmp_path / "failed", tmp_path / "tiny" / "search.json"))
    from ray import tune

    failing = sweep.RunOptions(
        address=ray_session, trial_hooks=hooks, failure_config=tune.FailureConfig(max_failures=0)
    )
    with pytest.raises(sweep.SweepError, match="second round"):
        sweep.run(search_spec(), storage=str(tmp_path), options=failing)
    path = sweep.run(search_spec(), storage=str(tmp_path), options=sweep.RunOptions(address=ray_session, resume=True))
    assert record(path) == record(uninterrupted)
    assert (
        sweep.load(path).table.sort_by("member_id")["val_loss"]
        == sweep.load(uninterrupted).table.sort_by("member_id")["val_loss"]
    )


def test_raising_configurations_continues_the_same_search(uninterrupted, tmp_path):
    sweep.run(search_spec(configurations=2), storage=str(tmp_path), options=LOCAL)
    path = sweep.run(
        search_spec(configurations=4), storage=str(tmp_path), options=dataclasses.replace(LOCAL, resume=True)
    )
    assert record(path) == record(uninterrupted)
    assert store_files(path) == store_files(uninterrupted)


def test_going_on_with_other_seeds_settings_or_a_space_without_its_points_is_refused(uninterrupted, tmp_path):
    """A search told the sampler means over its seeds: more seeds, or other settings, would mix
    observations of two kinds; a space that leaves out a point asked is refused by name (not by Optuna)."""
    import shutil

    shutil.copytree(uninterrupted, tmp_path / "tiny", symlinks=True)
    before = record(tmp_path / "tiny")
    more = dataclasses.replace(LOCAL, resume=True)
    with pytest.raises(
        sweep.SpecError,
        match=r"^`search`: the search of sweep 'tiny' observed 4 configuration\(s\) .* differs in seeds "
        r"\(\[0, 1, 2, 3\] here, \[0, 1, 2\] there\); go on with the settings it ran with \(on the command line: "
        r"--set 'seeds=\[0, 1, 2\]'\)",
    ):
        sweep.run(search_spec(configurations=6, seeds=4), storage=str(tmp_path), options=more)
    with pytest.raises(sweep.SpecError, match=r"differs in training.epochs \(5 here, 4 there\)"):
        sweep.run(
            search_spec(training=sweep.Training(epochs=5, batch_size=16, report_every=2)),
            storage=str(tmp_path),
            options=more,
        )
    with pytest.raises(  # a field the last run left unset
        sweep.SpecError,
        match=r"differs in training.noise \(0.01 here, unset there\); .*\(on the command line: remove training.noise\)",
    ):
        training = sweep.Training(epochs=4, batch_size=16, report_every=2, noise=0.01)
        sweep.run(search_spec(training=training), storage=str(tmp_path), options=more)
    # the base value of a searched learning rate (trained side by side) is part of its configurations' ids
    base = sweep.Optimizer("adam", learning_rate=1e-2)
    with pytest.raises(sweep.SpecError, match=r"differs in optimizer.learning_rate \(0.01 here, 0.003 there\)"):
        sweep.run(search_spec(optimizer=base), storage=str(tmp_path), options=more)
    asked = [p["optimizer.learning_rate"] for r in before["rounds"] for p in r["asked"]]
    narrowed = {"optimizer.learning_rate": sweep.loguniform(max(asked) * 0.999, 3e-2)}
    with pytest.raises(
        sweep.SpecError,
        match=r"^`search.space`: the search of sweep 'tiny' asked optimizer.learning_rate=.* in an earlier run, "
        r"outside this space \(optimizer.learning_rate: \{'loguniform': ",
    ):
        sweep.run(search_spec(configurations=6, space=narrowed), storage=str(tmp_path), options=more)
    assert record(tmp_path / "tiny") == before
    wider = {"optimizer.learning_rate": sweep.loguniform(min(asked) / 2, 3e-2)}  # holds every point asked: goes on
    sweep.run(search_spec(configurations=5, batch=1, space=wider), storage=str(tmp_path), options=more)
    assert len(record(tmp_path / "tiny")["rounds"]) == len(before["rounds"]) + 1


def test_the_end_compares_the_best_configurations_by_intervals(uninterrupted):
    spec = search_spec()
    planned = sweep.search.standings(spec, sweep.store.SweepDir.at(uninterrupted))
    assert [s.number for s in planned] == [1, 2, 3, 4]
    best = sweep.search.ranked(spec, planned)
    assert best[0].observation.mean == min(s.observation.mean for s in planned)
    text = sweep.search.summary(spec, sweep.store.SweepDir.at(uninterrupted))
    assert text is not None and text.startswith("search: 4 of 4 configurations told, 3 seeds each")
    assert "not compared: 3 seeds give no 95% interval (at least 6 needed)" in text
    assert os.path.exists(uninterrupted / "search.json")


def test_the_search_shows_the_intervals_the_summary_shows_beside_it(tmp_path):
    """One 95% interval per configuration on `sweep show`'s screen: the search's end compares the
    ones of the store's summary (before: its own bootstrap, [0.00297, 0.01191] below [0.00297, 0.01152])."""
    spec = search_spec(configurations=2, seeds=6)
    path = sweep.run(spec, storage=str(tmp_path), options=LOCAL)
    summary = sweep.load(path).summary().to_pylist()
    standings = sweep.search.standings(spec, sweep.store.SweepDir.at(path))
    assert len(standings) == len(summary) == 2 and all(s.interval.low < s.interval.high for s in standings)
    for s in standings:
        (row,) = [r for r in summary if r["learning_rate"] == pytest.approx(s.point["optimizer.learning_rate"])]
        assert (s.interval.mean, s.interval.low, s.interval.high) == (
            row["mean"],
            row["mean_ci_low"],
            row["mean_ci_high"],
        )


def test_show_and_the_trace_figure_show_the_search(uninterrupted, tmp_path, monkeypatch):
    shown = invoke("show", uninterrupted)
    assert shown.exit_code == 0, shown.output
    assert "search: 4 of 4 configurations told, 3 seeds each; best #" in shown.output
    narrow = invoke("show", uninterrupted, columns=60).output
    search = narrow[narrow.index("search: ") :].splitlines()
    assert len(search) > 2 and all(len(line) <= 60 for line in search), search  # at word boundaries
    assert " ".join(search[:2]).startswith("search: 4 of 4 configurations told, 3 seeds each; best #")
    out = tmp_path / "figs3" / "s.png"  # its folder is created, as for every other kind
    drawn = invoke("plot", uninterrupted, "--kind", "search", "--out", out)
    assert drawn.exit_code == 0, drawn.output
    assert out.stat().st_size > 0
    fig = sweep.search.plot_trace(uninterrupted)
    (ax,) = fig.axes
    means = [s.observation.mean for s in sweep.search.standings(search_spec(), sweep.store.SweepDir.at(uninterrupted))]
    steps = ax.lines[-2].get_ydata()  # the best mean so far, then the ring around the best
    assert list(steps) == [min(means[: i + 1]) for i in range(len(means))]
    # means spread over more than a factor of LOG_SPAN: a log axis, so that the best are told apart
    for span, scale in ((max(means) / min(means) / 2, "log"), (max(means) / min(means) * 2, "linear")):
        monkeypatch.setattr("sweep.search._trace.LOG_SPAN", span)  # the means spread wider than span, or not
        assert sweep.search.plot_trace(uninterrupted).axes[0].get_yscale() == scale
    with pytest.raises(sweep.SweepError, match="holds no search"):
        sweep.search.plot_trace(tmp_path)


def test_the_plan_of_a_search_says_what_it_will_train(uninterrupted):
    fresh = sweep.plan(search_spec())
    assert fresh.trials == ()  # planned round by round, as the search proposes
    assert str(fresh).startswith("sweep 'tiny': its trials planned as the search proposes them; each trial:")
    assert "tpe search of 4 configurations on val_loss (min), 2 per round, 3 seeds each: at most 12 members" in str(
        fresh
    )
    stored = sweep.store.SweepDir.at(uninterrupted).plan()
    assert stored is not None and len(stored.spec.points) == 4 and "(4 so far)" in str(stored)
    # given its storage, as run goes on with it: what it asked so far, and refused where run refuses
    storage = str(Path(uninterrupted).parent)
    assert "(4 so far)" in str(sweep.plan(search_spec(), storage=storage))
    spec = search_spec()
    other = dataclasses.replace(spec, training=dataclasses.replace(spec.training, epochs=spec.training.epochs + 1))
    with pytest.raises(sweep.SpecError, match=r"^`search`: the search of sweep .* differs in training.epochs"):
        sweep.plan(other, storage=storage)
