"""Greedy selection across configurations: the greedy steps equal a brute-force search of each
step on a tiny pool (scores from scoringrules), weights where a member repeats, and a blend of
two architectures predicts, rolls out, scores and recalibrates as its members one by one, each
repeated as often as it was chosen."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scoringrules as sr
from _blocks import datasets_of, trained_blocks
from helpers import invoke, tiny_spec

import sweep
from sweep import QueryError
from sweep.ensemble import Blend, fit_scale
from sweep.planning import make_plan
from sweep.store import aggregate_blocks


def _crps(values, truth, counts):
    """CRPS of the members repeated ``counts`` times, by scoringrules (the multiset's own CRPS)."""
    members = np.repeat(values, counts, axis=0)
    return float(np.mean(np.asarray(sr.crps_ensemble(truth, members, m_axis=0, estimator="nrg"))))


def _brute_force(values, truth, k, metric):
    """How many times each member is chosen when each of ``k`` steps scores every candidate multiset
    one member larger from scratch (CRPS by scoringrules) and keeps the best."""

    def score(c):
        if metric == "rmse":
            return float(np.sqrt(np.mean(np.square(np.repeat(values, c, 0).mean(0) - truth))))
        return _crps(values, truth, c)

    counts = np.zeros(len(values), np.int64)
    for _ in range(k):
        candidates = [counts + np.eye(len(values), dtype=np.int64)[i] for i in range(len(values))]
        counts = candidates[int(np.argmin([score(c) for c in candidates]))]
    return counts


PROBLEM = sweep.Problem("heat1d", num_points=16, num_samples=60, data_seed=0, trajectory_steps=3)
PLAN = make_plan(tiny_spec(problem=PROBLEM, seeds=3, seeds_per_trial=3, grid={"model.depth": [1, 2]}))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("greedy") / "ensembles"
    aggregate_blocks(path, trained_blocks(PLAN), plan=PLAN, datasets=datasets_of(PLAN))
    return str(path)


@pytest.fixture(scope="module")
def ens(store):
    return sweep.load(store)


def test_a_blend_of_two_architectures_predicts_what_its_members_predict_one_by_one(ens):
    blend = ens.select_greedy(5, metric="crps", split="val")
    assert isinstance(blend, Blend) and blend.weights.sum() == pytest.approx(1.0)
    assert np.allclose(blend.weights * 5, np.rint(blend.weights * 5))  # multiples of 1/k
    x = ens.where(depth=1).samples()[0][:3]
    rows = blend.index.to_pylist()
    one_by_one = np.stack([np.stack([ens.member(r["seed"], depth=r["depth"])(xi) for xi in x]) for r in rows])
    np.testing.assert_allclose(blend.predict(x), one_by_one, rtol=1e-5, atol=1e-6)
    mean, std = blend.mean_std(x)
    w = blend.weights[:, None, None, None]
    np.testing.assert_allclose(mean, (w * one_by_one).sum(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        std, np.sqrt((w * (one_by_one - (w * one_by_one).sum(0)) ** 2).sum(0)), rtol=1e-4, atol=1e-6
    )


@pytest.mark.parametrize("metric", ["crps", "rmse"])
def test_select_greedy_equals_a_brute_force_search_of_every_step_on_the_split_samples(ens, metric):
    x, y = ens.where(depth=1).samples()  # the test samples, shared by both depths (one problem)
    configs = dict.fromkeys(ens.index["config_id"].to_pylist())  # the pool's order: the store's
    values = np.concatenate([ens.where(config_id=c).predict(x) for c in configs]).reshape(len(ens), -1)
    counts = _brute_force(values.astype(np.float64), y.reshape(-1).astype(np.float64), 5, metric)
    blend = ens.select_greedy(5, metric=metric, split="test")
    ids = ens.index["member_id"].to_pylist()
    expected = {ids[i]: c / 5 for i, c in enumerate(counts) if c}
    assert dict(zip(blend.index["member_id"].to_pylist(), blend.weights.tolist(), strict=True)) == pytest.approx(
        expected
    )


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [({"k": 0}, "k=0"), ({"k": 2, "metric": "mae"}, "metric='mae'"), ({"k": 2, "split": "train"}, "split='train'")],
)
def test_bad_arguments_are_named(ens, kwargs, named):
    with pytest.raises(QueryError) as e:
        ens.select_greedy(**kwargs)
    assert named in str(e.value)


def _mixed(ens):
    """A blend of both architectures with a repeated member: counts 2, 1 of depth 1, 1 of depth 2."""
    rows = list(zip(ens.index["depth"].to_pylist(), ens.index["seed"].to_pylist(), strict=True))
    wanted = {(1, 0): 2, (1, 1): 1, (2, 0): 1}
    return Blend.of(ens, [wanted.get(r, 0) for r in rows])


def _one_by_one(ens, blend, x, steps=0):
    """Each of the blend's members run alone (``ens.member``), one sample after another, ``steps``
    steps fed back (``[members, steps + 1, batch, ...]``; without steps ``[members, batch, ...]``)."""
    out = []
    for r in blend.index.to_pylist():
        net = ens.member(r["seed"], depth=r["depth"])
        states = [np.asarray(x)]
        for _ in range(steps):
            states.append(np.stack([np.asarray(net(s)) for s in states[-1]]))
        out.append(np.stack(states) if steps else np.stack([np.asarray(net(s)) for s in x]))
    return np.stack(out)


def test_a_mixed_blend_rolls_out_and_weighs_as_its_members_one_by_one(ens):
    blend = _mixed(ens)
    assert len(blend.parts) == 2 and sorted(blend.counts.tolist()) == [1, 1, 2]
    x = ens.where(depth=1).samples()[0][:3]
    states = blend.rollout(x, 3)
    one_by_one = _one_by_one(ens, blend, x, steps=3)
    np.testing.assert_allclose(states, one_by_one, rtol=1e-5, atol=1e-6)
    repeated = np.repeat(one_by_one, blend.counts, axis=0)  # the multiset the weights stand for
    mean, std = blend.rollout_mean_std(x, 3)
    np.testing.assert_allclose(mean, repeated.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(std, repeated.std(0), rtol=1e-4, atol=1e-6)
    mean, std = blend.mean_std(x)
    np.testing.assert_allclose(mean, repeated[:, 1].mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(std, repeated[:, 1].std(0), rtol=1e-4, atol=1e-6)


def test_a_mixed_blend_recalibrates_and_scores_its_multiset(ens):
    blend = _mixed(ens)
    x, y = ens.where(depth=1).samples()  # the test samples: fitted on them here to check the fit
    repeated = np.repeat(blend.predict(x), blend.counts, axis=0)
    fitted = blend.recalibrate("test")
    cal = fitted.calibration
    assert cal is not None and len(cal.member_ids) == 4 and cal.rollout_scale is not None
    np.testing.assert_allclose(cal.scale, fit_scale(repeated, y), rtol=1e-12)
    mean, std = fitted.mean_std(x, calibrated=True)
    np.testing.assert_allclose(std, repeated.std(0) * cal.scale[:, None], rtol=1e-4, atol=1e-6)
    low, high = fitted.predict_interval(x, 0.9)
    assert (low <= high).all()
    assert fitted.with_calibration(cal).calibration is cal
    with pytest.raises(QueryError, match="fitted on members"):
        Blend(blend.parts, [1, 1, 1]).with_calibration(cal)  # other counts: another multiset
    table = blend.scores("test").to_pylist()
    assert [r["kind"] for r in table] == ["one_step", "rollout", "rollout", "rollout"]
    fair = np.asarray(sr.crps_ensemble(y, repeated, m_axis=0, estimator="fair")).mean()
    assert table[0]["crps"] == pytest.approx(float(fair), rel=1e-5) and table[0]["members"] == 4
    rows = fitted.calibration_scores("val").to_pylist()
    assert {(r["kind"], r["calibrated"]) for r in rows} >= {("one_step", False), ("one_step", True)}


def test_sweep_scores_and_export_take_a_greedy_selection(store, ens, tmp_path):
    done = invoke("scores", store, "--greedy", "3", "--format", "json")
    assert done.exit_code == 0, done.output
    rows = json.loads(done.output)
    expected = ens.select_greedy(3).scores("test").to_pylist()
    assert [r["kind"] for r in rows] == [r["kind"] for r in expected]
    assert rows[0]["crps"] == pytest.approx(expected[0]["crps"])
    assert ens.select_greedy(3).counts.tolist() == [3]  # one member, chosen thrice: no spread to scale
    refused = invoke("scores", store, "--greedy", "3", "--recalibrate")
    assert refused.exit_code == 1 and "needs at least 3 members, 2 of them distinct" in refused.output
    done = invoke("scores", store, "--greedy", "8", "--recalibrate", "--format", "json")
    assert done.exit_code == 0, done.output
    assert {r["calibrated"] for r in json.loads(done.output)} == {False, True}
    blend = ens.select_greedy(8)
    assert len(blend) == 2
    said = " ".join(invoke("scores", store, "--greedy", "8", "--recalibrate").output.split())
    assert f"of a greedy blend of {len(blend)} member" in said and f"(counted {blend.counts.tolist()})" in said
    done = invoke("export", store, "--greedy", "3", "-o", str(tmp_path / "out"))
    assert done.exit_code == 0, done.output
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert (
        sum(manifest["weights"]) == pytest.approx(1.0) and manifest["weights"] == ens.select_greedy(3).weights.tolist()
    )
    assert invoke("verify", str(tmp_path / "out")).exit_code == 0


def test_a_mixed_blend_scores_fields_and_thresholds_of_its_multiset(ens):
    blend = _mixed(ens)
    x, y = ens.where(depth=1).samples()
    t = float(np.median(y))
    rows = blend.scores("test", thresholds=[t], fields=True).to_pylist()
    repeated = np.repeat(blend.predict(x), blend.counts, axis=0).astype(np.float64)  # the multiset
    traj = ens.where(depth=1).trajectories()
    rolled = np.repeat(blend.rollout(traj[:, 0], traj.shape[1] - 1), blend.counts, axis=0).astype(np.float64)
    for row, values, truth in [(rows[0], repeated, y)] + [
        (r, rolled[:, r["step"]], traj[:, r["step"]]) for r in rows[1:]
    ]:
        obs, fct = truth.reshape(len(truth), -1), np.moveaxis(values, 0, 1).reshape(len(truth), len(values), -1)
        energy = np.mean(sr.es_ensemble(obs, fct, m_axis=-2, v_axis=-1, estimator="fair"))
        assert row["energy_score"] == pytest.approx(float(energy), rel=1e-5), row["step"]
        variogram = np.mean(sr.vs_ensemble(obs, fct, m_axis=-2, v_axis=-1, p=0.5))
        assert row["variogram_score"] == pytest.approx(float(variogram), rel=1e-5), row["step"]
        tw = np.mean(sr.twcrps_ensemble(truth, np.moveaxis(values, 0, -1), a=t, estimator="fair"))
        assert row[f"twcrps_{t!r}"] == pytest.approx(float(tw), rel=1e-5, abs=1e-12), row["step"]
        brier = np.mean(np.square((values > t).mean(0) - (truth > t)))
        assert row[f"brier_{t!r}"] == pytest.approx(float(brier), rel=1e-6, abs=1e-12), row["step"]
        assert row["crps_skill"] - row["crps_spread"] == pytest.approx(row["crps"], rel=1e-9), row["step"]


def test_a_blend_of_one_config_with_counts_one_scores_as_its_ensemble(ens):
    one = ens.where(depth=2)
    blended = Blend.of(one, [1] * len(one)).scores("val", thresholds=[0.1], fields=True).to_pylist()
    table = one.scores("val", thresholds=[0.1], fields=True)
    streamed = [r for r in table.to_pylist() if r["kind"] in ("one_step", "rollout")]
    assert [(r["kind"], r["step"]) for r in blended] == [(r["kind"], r["step"]) for r in streamed]
    for a, b in zip(blended, streamed, strict=True):
        for c in ("crps", "crps_skill", "crps_spread", "energy_score", "variogram_score", "twcrps_0.1", "brier_0.1"):
            assert a[c] == pytest.approx(b[c], rel=1e-9, abs=1e-15), (a["kind"], a["step"], c)


def test_a_blend_holds_members_of_one_store_each_once(store, ens, tmp_path):
    import shutil

    first = ens.where(config_id=ens.index["config_id"][0].as_py())
    other_plan = make_plan(tiny_spec(problem=PROBLEM, seeds=1, seeds_per_trial=1))
    aggregate_blocks(tmp_path / "other", trained_blocks(other_plan), plan=other_plan)
    other = sweep.load(tmp_path / "other")  # another store
    with pytest.raises(QueryError, match=r"Blend\(parts\): the parts come from 2 stores .*; a blend holds members"):
        Blend([first, other], [1] * (len(first) + len(other)))
    copy = sweep.load(shutil.copytree(store, tmp_path / "copy"))  # a copy is the same store: the same members
    with pytest.raises(QueryError, match=r"Blend\(parts\): a member is in two parts"):
        Blend([first, copy.where(config_id=first.index["config_id"][0].as_py())], [1] * (2 * len(first)))
    with pytest.raises(QueryError, match=r"Blend\(parts\): a member is in two parts"):
        Blend([first, first], [1] * (2 * len(first)))
