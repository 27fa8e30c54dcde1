"""Adaptive seeds without Ray: the spec, the rounds, and the race as a pure function of values."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_one_line_error, invoke, tiny_spec

import sweep
from sweep import racing
from sweep.planning import Plan, hparams_key, make_plan

# -- the spec ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"start": 1}, r"`seeds.adaptive.start`: got 1; must be an integer from 2 to 16777216 \(2\*\*24\)"),
        (
            {"start": 2**25, "max": 2**25},
            r"`seeds.adaptive.start`: got 33554432; must be an integer from 2 to 16777216",
        ),
        ({"start": 2.5}, r"`seeds.adaptive.start`: got 2.5"),
        ({"step": 0}, r"`seeds.adaptive.step`: got 0; must be an integer from 1 to 16777216"),
        ({"start": 8, "max": 4}, r"`seeds.adaptive.max`: got 4; must be an integer from start \(8\)"),
        ({"max": 2**25}, r"`seeds.adaptive.max`: got 33554432"),
        ({"confidence": 1.0}, r"`seeds.adaptive.confidence`: got 1.0; must be a number in \(0, 1\)"),
        ({"confidence": 0}, r"`seeds.adaptive.confidence`: got 0"),
        ({"precision": 0}, r"`seeds.adaptive.precision`: got 0; must be a number > 0"),
        ({"precision": float("nan")}, r"`seeds.adaptive.precision`: got nan"),
        (
            {"metric": "test_loss"},
            r"`seeds.adaptive.metric`: got 'test_loss' \(did you mean 'val_loss'\?\); give a validation column",
        ),
        ({"metric": "accuracy"}, r"`seeds.adaptive.metric`: got 'accuracy' \(did you mean 'val_accuracy'\?\)"),
        ({"metric": "val_nrmse"}, r"`seeds.adaptive.metric`: got 'val_nrmse'.*add the metric to training.metrics"),
        ({"mode": "lowest"}, r"`seeds.adaptive.mode`: got 'lowest'; choose one of min, max"),
        ({"strat": 4}, r"`seeds.adaptive`: unknown field\(s\) \['strat'\] \(did you mean 'start'\?\)"),
    ],
)
def test_bad_adaptive_fields_are_named(fields, match):
    with pytest.raises(sweep.SpecError, match=match):
        tiny_spec(seeds={"adaptive": fields})


def test_a_table_of_seeds_must_be_adaptive():
    with pytest.raises(sweep.SpecError, match=r"`seeds`: got a table with \['racing'\]"):
        tiny_spec(seeds={"racing": {}})


def test_the_race_metric_may_be_a_validation_metric_of_every_config():
    spec = tiny_spec(seeds=sweep.Adaptive(metric="val_nrmse"), training=sweep.Training(epochs=2, metrics=("nrmse",)))
    assert spec.adaptive is not None and spec.adaptive.metric == "val_nrmse"
    with pytest.raises(sweep.SpecError, match=r"`seeds.adaptive.metric`: got 'val_nrmse'"):  # a grid value without it
        tiny_spec(
            seeds=sweep.Adaptive(metric="val_nrmse"),
            training=sweep.Training(epochs=2, metrics=("nrmse",)),
            grid={"training.metrics": [["nrmse"], ["mae"]]},
        )


def test_adaptive_seeds_round_trip_through_dict_and_toml(tmp_path):
    spec = tiny_spec(seeds=sweep.Adaptive(start=3, step=2, max=9, confidence=0.9, precision=0.2))
    assert spec.to_dict()["seeds"] == {"adaptive": spec.adaptive.to_dict()}
    assert sweep.SweepSpec.from_dict(spec.to_dict()) == spec
    path = tmp_path / "spec.toml"
    spec.to_toml(path)
    assert "[seeds.adaptive]" in path.read_text()
    assert sweep.SweepSpec.from_toml(path) == spec
    assert spec.seed_list == tuple(range(9))  # every seed the race may train
    assert spec.config_id == tiny_spec(seeds=9).config_id  # the seeds are no part of a config


def test_rounds_split_the_seeds_in_order():
    a = sweep.Adaptive(start=4, step=3, max=12)
    assert a.rounds == 4
    assert [a.seeds_in(r) for r in range(1, 5)] == [(0, 1, 2, 3), (4, 5, 6), (7, 8, 9), (10, 11)]
    assert [a.round_of(s) for s in range(13)] == [1, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, None]
    assert [a.seeds_through(r) for r in range(6)] == [0, 4, 7, 10, 12, 12]


def test_a_round_plans_only_the_configurations_still_racing():
    spec = tiny_spec(seeds=sweep.Adaptive(start=2, step=2, max=6), grid={"optimizer.learning_rate": [1e-3, 3e-3, 1e-2]})
    ((config, hsets),) = spec.expand()
    keys = [(config.config_id, hparams_key(h)) for h in hsets]
    plan = make_plan(spec, 4, wanted={keys[0]: (2, 3), keys[2]: (2, 3)})
    # one block per set: a block keeps its shape (and compiled program) however many sets are left
    assert [(t.seeds, t.hparams) for t in plan.trials] == [((2, 3), (hsets[0],)), ((2, 3), (hsets[2],))]
    assert make_plan(spec, 4, wanted={}).trials == ()


# -- the race ---------------------------------------------------------------------------------------
def _values(means, spread, seed=0, n=64):
    rng = np.random.default_rng(seed)
    return {(f"config{i}", "{}"): rng.normal(m, spread, n) for i, m in enumerate(means)}


def _first_decisive_round(adaptive: sweep.Adaptive, num_configs: int) -> int:
    """The first round at which a configuration can be eliminated."""
    n = racing.first_decision(adaptive, num_configs)
    return next(r for r in range(1, adaptive.rounds + 1) if adaptive.seeds_through(r) == n)


def test_a_race_eliminates_the_clearly_worse_and_keeps_the_best():
    values = _values([1.0, 1.001, 1.3, 3.0, 10.0], 0.05)
    a = sweep.Adaptive(start=4, step=4, max=32)
    first = _first_decisive_round(a, 5)
    # 20 ordered pairs at 0.05: round 2 spends half a pair's share, 0.05 / 40, and 8 seeds all worse
    # than 8 give 1 / C(16, 8) below it; 4 seeds give at best 1 / C(8, 4) = 1 / 70
    assert first == 2 and racing.rank_levels(a, 5)[:2] == (0.0, pytest.approx(0.05 / 40))
    race = racing.simulate(a, values)
    assert {e.rule for e in race.evaluations} == {"rank"}
    assert [s.status for s in race.evaluations[first - 2].standings] == ["racing"] * 5  # nothing decided before
    decided = race.decisions()
    assert {k[0]: (s.status, s.round) for k, s in decided.items()} == {
        "config2": ("eliminated", first),  # 6 standard deviations off
        "config3": ("eliminated", first),
        "config4": ("eliminated", first),
    }
    latest = race.latest()
    for best in ("config0", "config1"):  # a fiftieth of a standard deviation apart: not separated in 32 seeds
        assert latest[(best, "{}")].status == "racing" and latest[(best, "{}")].seeds == 32
    assert racing.over(a, race, list(values)) == "max_reached"
    assert race.best in {("config0", "{}"), ("config1", "{}")}
    trained = racing.members_trained(a, race, values)
    assert trained[("config3", "{}")] == 8 and trained[("config0", "{}")] == 32


def test_no_interval_is_claimed_from_fewer_values_than_its_level_needs():
    assert [racing.min_seeds(level) for level in (0.5, 0.875, 0.95, 0.99, 1 - 0.05 / 128)] == [2, 4, 6, 8, 13]
    few = racing.mean_interval(np.array([1.0, 2.0, 3.0, 4.0, 5.0]), 0.95, 0)
    assert few.mean == 3.0 and (few.low, few.high) == (-np.inf, np.inf)
    enough = racing.mean_interval(np.arange(1.0, 7.0), 0.95, 0)
    assert 1.0 <= enough.low < 3.5 < enough.high <= 6.0


def test_mode_max_is_the_mirror_of_mode_min():
    values = _values([1.0, 1.001, 1.3, 3.0, 10.0], 0.05)
    low = racing.simulate(sweep.Adaptive(start=4, step=4, max=32), values)
    high = racing.simulate(sweep.Adaptive(start=4, step=4, max=32, mode="max"), {k: -v for k, v in values.items()})
    assert {k: (s.status, s.round) for k, s in low.latest().items()} == {
        k: (s.status, s.round) for k, s in high.latest().items()
    }
    assert low.best == high.best


def test_the_race_ends_when_one_configuration_is_left():
    values = _values([1.0, 2.0, 3.0], 0.05)
    a = sweep.Adaptive(start=4, step=4, max=64)
    race = racing.simulate(a, values)
    assert len(race.evaluations) == _first_decisive_round(a, 3) and racing.over(a, race, list(values)) == "one_left"
    assert race.best == ("config0", "{}")


def test_precision_decides_and_keeps_the_last_one_training_until_decided():
    values = _values([1.0, 1.0005, 2.0], 0.05)
    a = sweep.Adaptive(start=4, step=4, max=64, precision=0.2)
    race = racing.simulate(a, values)
    decided = race.decisions()
    assert decided[("config2", "{}")].status == "eliminated"
    for k in [("config0", "{}"), ("config1", "{}")]:
        s = decided[k]
        assert s.status == "decided" and s.interval.high - s.interval.low <= 0.2 * abs(s.interval.mean)
        assert s.seeds < 64
    assert racing.over(a, race, list(values)) == "none_racing"
    alone = racing.simulate(a, {k: v for k, v in values.items() if k[0] != "config1"})
    assert alone.decisions()[("config0", "{}")].status == "decided"  # one left, but not yet precise: on until decided


def test_a_diverged_configuration_is_eliminated_and_diverged_members_are_left_out():
    values = _values([1.0, 1.5], 0.05)
    values[("config2", "{}")] = np.full(64, np.nan)
    values[("config0", "{}")][1] = np.nan  # one diverged member of the best
    race = racing.simulate(sweep.Adaptive(start=4, step=4, max=16), values)
    assert race.decisions()[("config2", "{}")].status == "eliminated"
    assert race.evaluations[0].standings[0].interval.used == 3


def test_intervals_are_reproducible_and_at_the_corrected_level():
    a = sweep.Adaptive(start=4, step=4, max=64, confidence=0.95)
    level = racing.interval_level(a, 8)
    # 12 seeds at that level, so rounds 3..16 (12 to 64 seeds) can give a bounded interval: 14 of 16;
    # the race reads one end of each interval, each at tail 0.05 / (8 * 14)
    assert racing.min_seeds(level) == 12 and level == pytest.approx(1 - 2 * 0.05 / (8 * 14))
    # with precision a decided interval claims both ends: 0.05 / (8 * 13) for both tails, from 13 seeds
    decides = sweep.Adaptive(start=4, step=4, max=64, confidence=0.95, precision=0.1)
    assert racing.interval_level(decides, 8) == pytest.approx(1 - 0.05 / (8 * 13))
    assert racing.min_seeds(racing.interval_level(decides, 8)) == 13
    assert racing.interval_level(sweep.Adaptive(start=4, step=4, max=64, confidence=0.9, precision=0.1), 8) == level
    assert racing.min_seeds(1 - 0.1 / (8 * 13)) == 12  # counting 13 rounds would leave out one that can
    assert racing.mean_interval(np.ones(11) + np.arange(11), level, 0).low == -np.inf  # unbounded below 12
    v = np.random.default_rng(3).lognormal(0, 0.5, 16)
    seed = racing.interval_seed(0, 4, ("abc", "{}"))
    first, again = racing.mean_interval(v, level, seed), racing.mean_interval(v.copy(), level, seed)
    assert first == again  # bit for bit
    assert racing.mean_interval(v, level, racing.interval_seed(1, 4, ("abc", "{}"))) != first  # seeded by sweep_seed
    ordinary = racing.mean_interval(v, 0.95, seed)
    assert first.low < ordinary.low and first.high > ordinary.high  # the corrected interval is wider
    assert first.low >= v.min() and first.high <= v.max()  # a percentile interval stays in the values' range


def test_a_configuration_worse_at_every_seed_leaves_after_6_seeds():
    """The issue's heat1d case: one learning rate never trains (0.24-0.77) while two reach 0.001-0.09."""
    a = sweep.Adaptive(start=3, step=3, max=9)
    rng = np.random.default_rng(0)
    values = {
        ("lr1e-7", "{}"): rng.uniform(0.24, 0.77, 9),
        ("lr1e-3", "{}"): rng.uniform(0.001, 0.09, 9),
        ("lr1e-2", "{}"): rng.uniform(0.001, 0.09, 9),
    }
    assert racing.first_decision(a, 3) == 6
    race = racing.simulate(a, values)
    left = race.decisions()[("lr1e-7", "{}")]
    assert (left.status, left.round, left.seeds) == ("eliminated", 2, 6)
    assert left.p == pytest.approx(1 / 924)  # 6 seeds all worse than the best's 6: 1 / C(12, 6)
    assert racing.members_trained(a, race, values)[("lr1e-7", "{}")] == 6
    # round 1 tests too, but 3 against 3 give at best 1 / C(6, 3) = 0.05, above any level
    assert [s.status for s in race.evaluations[0].standings] == ["racing"] * 3
    assert race.evaluations[0].standings[0].p == pytest.approx(1 / 20)


def test_the_rank_test_is_exact_and_counts_a_tie_as_not_worse():
    from scipy import stats

    rng = np.random.default_rng(1)
    for n, m in [(3, 3), (6, 6), (8, 5), (12, 12)]:
        x, y = rng.normal(0.5, 1, n), rng.normal(0, 1, m)
        exact = stats.mannwhitneyu(x, y, alternative="greater", method="exact").pvalue
        assert racing.worse_p(x, y) == pytest.approx(exact, rel=1e-12)
    assert racing.worse_p(np.ones(5), np.ones(5)) == 1.0  # every pair tied: none worse
    tied = np.array([1.0, 2.0, 2.0, 3.0])  # midranks would count the ties as half worse
    assert racing.worse_p(tied, tied) > stats.mannwhitneyu(tied, tied, alternative="greater").pvalue
    assert racing.worse_p(np.full(6, np.inf), np.zeros(6)) == pytest.approx(1 / 924)
    # batched: each leading index is its own test
    x = rng.normal(size=(4, 2, 6))
    batched = racing.worse_p(x, x[:, :1])
    assert batched.shape == (4, 2) and batched[2, 1] == racing.worse_p(x[2, 1], x[2, 0])
    # beyond 64 x 64 values, the normal approximation: never smaller than the exact p-value there
    a, b = rng.normal(0.6, 1, 64), rng.normal(0, 1, 65)
    exact = stats.mannwhitneyu(a, b, alternative="greater", method="exact").pvalue
    assert 1e-6 < exact < 1e-2 and exact <= racing.worse_p(a, b) <= 2 * exact


def _kept_all(adaptive: sweep.Adaptive, values: np.ndarray) -> np.ndarray:
    """Per simulated race (``values``: races x configurations x seeds, all configurations equal):
    whether the race keeps every configuration. Until a first elimination every configuration is
    in, so a race is a few array operations per round."""
    races, k, _ = values.shape
    levels, out = racing.rank_levels(adaptive, k), np.ones(races, bool)
    for r, level in enumerate(levels, 1):
        n = adaptive.seeds_through(r)
        v = values[:, :, :n]
        best = v.mean(-1).argmin(-1)
        p = racing.worse_p(v, v[np.arange(races), best][:, None, :])
        p[np.arange(races), best] = 1.0
        out &= ~(p <= level).any(-1)
    return out


def _equal_values(kind: str, shape: tuple[int, int, int], rng: np.random.Generator) -> np.ndarray:
    if kind == "normal":
        return rng.normal(size=shape)
    if kind == "lognormal":
        return rng.lognormal(0.0, 1.5, size=shape)
    if kind == "cauchy":  # heavy-tailed: no mean at all
        return rng.standard_cauchy(size=shape)
    return 3 * rng.normal(size=(shape[0], 1, shape[2])) + rng.normal(size=shape)  # seeds shared by configurations


@pytest.mark.parametrize("adaptive", [sweep.Adaptive(start=3, step=3, max=9), sweep.Adaptive(start=4, step=4, max=16)])
@pytest.mark.parametrize("kind", ["normal", "lognormal", "cauchy", "shared"])
def test_races_of_equal_configurations_keep_every_one_at_the_confidence(adaptive, kind):
    """Equal configurations: any elimination is a mistake. In 1,000 races per number of
    configurations (2 to 16), every configuration is kept in at least ``confidence`` of them."""
    rng = np.random.default_rng(sum(map(ord, kind)) + adaptive.max)
    for k in range(2, 17):
        values = _equal_values(kind, (1000, k, adaptive.max), rng)
        kept = _kept_all(adaptive, values)
        assert kept.mean() >= adaptive.confidence, (k, kept.mean())
        for i in range(5):  # the array version is the race: simulate agrees on whether it eliminated
            race = racing.simulate(adaptive, {(f"config{j}", "{}"): values[i, j] for j in range(k)})
            assert (not race.decisions()) == kept[i]


def test_a_stochastically_best_configuration_is_kept_at_the_confidence():
    """One configuration better than the rest by a shift: its false elimination rate is at most
    ``1 - confidence`` (here the others are close enough to it that they often stay too)."""
    a = sweep.Adaptive(start=4, step=4, max=16, confidence=0.8)
    rng = np.random.default_rng(5)
    races, k = 1000, 6
    values = rng.normal(size=(races, k, a.max)) + np.linspace(0.0, 0.5, k)[:, None]
    lost = 0
    for i in range(races):
        race = racing.simulate(a, {(f"config{j}", "{}"): values[i, j] for j in range(k)})
        lost += race.latest()[("config0", "{}")].status == "eliminated"
    assert lost / races <= 1 - a.confidence


def test_a_race_stored_before_the_rank_rule_goes_on_under_its_intervals():
    """plan.json of a race recorded by the interval rule (no ``rule`` in its evaluations): resumed
    anywhere, it ends with the very evaluations the interval rule computed."""
    stored = json.loads((Path(__file__).parent / "race_before_rank_rule.json").read_text())
    old = racing.Race.from_dict(stored)
    assert {e.rule for e in old.evaluations} == {"interval"} and len(old.evaluations) == 6
    rng = np.random.default_rng(7)  # the values the stored race was run on
    values = {(f"config{i}", "{}"): rng.normal(m, 0.1, 24) for i, m in enumerate([1.0, 1.02, 1.2, 1.6])}
    a = sweep.Adaptive(start=4, step=4, max=24)
    for cut in range(1, 6):
        resumed = racing.simulate(a, values, race=racing.Race(old.evaluations[:cut]))
        assert resumed == old
    assert racing.rule_of(a, racing.Race()) == "rank" and racing.rule_of(a, old) == "interval"
    new = racing.simulate(a, values)
    assert {e.rule for e in new.evaluations} == {"rank"}
    assert racing.Race.from_dict(json.loads(json.dumps(new.to_dict()))) == new


def test_precision_races_decide_by_intervals_and_say_when_they_first_can():
    a = sweep.Adaptive(start=4, step=4, max=64, precision=0.1)
    assert racing.rule_of(a, racing.Race()) == "interval"
    assert racing.first_decision(a, 8, "interval") == 16  # 13 seeds at 0.99952: the round of 16
    assert racing.first_decision(sweep.Adaptive(start=4, step=4, max=64), 8) == 8
    assert racing.first_decision(sweep.Adaptive(start=2, step=1, max=4), 8) is None  # 4 seeds decide nothing
    assert racing.first_decision(sweep.Adaptive(start=2, step=1, max=4), 1) is None


def test_resuming_anywhere_takes_the_steps_of_an_uninterrupted_race():
    values = _values([1.0, 1.02, 1.2, 1.6], 0.1)
    a = sweep.Adaptive(start=4, step=4, max=24)
    keys = list(values)
    whole = racing.simulate(a, values)
    # a kill mid-round: some configurations have their next round, others not yet
    race = racing.Race(whole.evaluations[:1])
    step = racing.next_step(a, race, keys, {k: 1 for k in keys})
    racing_now = [k for k in keys if race.latest()[k].status == "racing"]
    assert step.train == dict.fromkeys(racing_now, 2)
    partly = {k: (2 if k == racing_now[0] else 1) for k in keys}
    assert racing.next_step(a, race, keys, partly).train == dict.fromkeys(racing_now[1:], 2)
    # after the kill: the records round-trip through JSON, and the race goes on to the same end
    stored = racing.Race.from_dict(json.loads(json.dumps(race.to_dict())))
    assert stored == race
    assert racing.simulate(a, values, race=stored) == whole


def test_configurations_added_to_a_finished_race_start_at_round_1():
    values = _values([1.0, 2.0, 3.0], 0.05)
    a = sweep.Adaptive(start=4, step=4, max=16)
    first = racing.simulate(a, values)
    assert racing.over(a, first, list(values)) == "one_left"
    more = {**values, ("config3", "{}"): np.random.default_rng(9).normal(1.01, 0.05, 64)}
    step = racing.next_step(a, first, list(more), {**dict.fromkeys(values, 1), ("config3", "{}"): 0})
    assert step.train == {("config3", "{}"): 1}  # the newcomer alone trains round 1; the leader waits
    second = racing.simulate(a, more, race=first)
    assert second.evaluations[: len(first.evaluations)] == first.evaluations  # earlier decisions stand
    joined = [e.standings for e in second.evaluations[len(first.evaluations) :]]
    assert [s.round for s in joined[0] if s.config_id == "config3"] == [1]
    assert second.latest()[("config3", "{}")].status == "racing"  # as good as the leader: not eliminated


def test_the_race_is_recorded_in_plan_json():
    spec = tiny_spec(seeds=sweep.Adaptive(start=2, step=2, max=4))
    race = racing.simulate(spec.adaptive, _values([1.0, 2.0], 0.01))
    plan = Plan(spec, (), 2, race=race)
    back = Plan.from_dict(json.loads(json.dumps(plan.to_dict(), allow_nan=False)))
    assert back.race == race and back.spec == spec


def test_the_command_line_sets_a_field_of_adaptive_seeds(tmp_path):
    tiny_spec(seeds=sweep.Adaptive()).to_toml(tmp_path / "spec.toml")
    result = invoke(
        "plan", tmp_path / "spec.toml", "--set", "seeds.adaptive.max=32", "--set", "grid.model.depth=[1, 2]"
    )
    assert result.exit_code == 0, result.stderr
    default = sweep.Adaptive()
    assert f"(lower is better; start {default.start}, step {default.step}, max 32)" in result.output
    assert "race of 2 configurations" in result.output  # the grid's two depths
    assert_one_line_error(
        invoke("plan", tmp_path / "spec.toml", "--set", "seeds.adaptive.start=1"), "seeds.adaptive.start", "got 1"
    )


def test_a_plan_says_how_its_race_decides_and_from_when():
    spec = tiny_spec(
        seeds=sweep.Adaptive(start=4, step=4, max=24), grid={"optimizer.learning_rate": [1e-3, 3e-3, 1e-2, 3e-2]}
    )
    new = str(Plan(spec, (), 2))
    assert (
        "race of 4 configurations on val_loss (lower is better; start 4, step 4, max 24): a best configuration kept at 0.95"
        in new
    )
    assert "(rank tests against the best, first decision after 8 seeds)" in new
    assert "up to 4 seeds per block" in str(Plan(spec, (), 16))  # a round's seeds (start, step), not max
    stored = json.loads((Path(__file__).parent / "race_before_rank_rule.json").read_text())
    old = str(Plan(spec, (), 2, race=racing.Race.from_dict(stored)))  # goes on under its intervals
    level = racing.interval_level(spec.adaptive, 4)
    assert f"(each interval at {level:.4g}, first decision after 12 seeds)" in old
    few = tiny_spec(seeds=sweep.Adaptive(start=2, step=1, max=4), grid={"optimizer.learning_rate": [1e-3, 3e-3, 1e-2]})
    assert "no configuration can be eliminated within max=4 seeds at confidence 0.95: raise max" in str(
        Plan(few, (), 2)
    )


def test_a_race_of_many_seeds_has_levels_at_every_round():
    """1 / C(2n, n) overflows a float beyond ~500 seeds; max may go to 2**24."""
    levels = racing.rank_levels(sweep.Adaptive(start=3, step=3, max=3000), 3)
    assert len(levels) == 1000 and levels[0] == 0.0 and all(0 < v < 0.05 / 6 for v in levels[1:])
    assert "start 3, step 3, max 3000" in str(
        Plan(
            tiny_spec(seeds=sweep.Adaptive(start=3, step=3, max=3000), grid={"optimizer.learning_rate": [1e-3, 3e-3]}),
            (),
            2,
        )
    )
