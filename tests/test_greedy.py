"""Greedy selection across configurations: the greedy steps equal a brute-force search of each
step on a tiny pool (scores from scoringrules), weights where a member repeats, and a blend of
two architectures predicts what its members predict one by one."""

from __future__ import annotations

import numpy as np
import pytest
import scoringrules as sr
from _blocks import datasets_of, trained_blocks
from helpers import tiny_spec

import sweep
from sweep import QueryError
from sweep.ensemble import Blend
from sweep.ensemble._greedy import greedy, weighted_score
from sweep.planning import make_plan
from sweep.store import aggregate_blocks


def _crps(values, truth, counts):
    """CRPS of the members repeated ``counts`` times, by scoringrules (the multiset's own CRPS)."""
    members = np.repeat(values, counts, axis=0)
    return float(np.mean(np.asarray(sr.crps_ensemble(truth, members, m_axis=0, estimator="nrg"))))


def test_weighted_crps_is_that_of_the_repeated_members():
    rng = np.random.default_rng(0)
    values, truth = rng.normal(size=(4, 30)), rng.normal(size=30)
    counts = np.array([2, 0, 1, 3])
    assert weighted_score(values, truth, counts / 6, "crps") == pytest.approx(_crps(values, truth, counts), rel=1e-12)


@pytest.mark.parametrize("metric", ["crps", "rmse"])
def test_greedy_steps_equal_a_brute_force_search_of_every_step(metric):
    rng = np.random.default_rng(1)
    values = rng.normal(size=(5, 40)) * np.array([0.2, 1.0, 2.0, 0.5, 1.5])[:, None] + rng.normal(size=(5, 1))
    truth = rng.normal(size=40)
    counts = np.zeros(5, np.int64)
    for _ in range(6):  # every candidate multiset one member larger, scored from scratch

        def score(c):
            if metric == "rmse":
                return float(np.sqrt(np.mean(np.square(np.repeat(values, c, 0).mean(0) - truth))))
            return _crps(values, truth, c)

        candidates = [counts + np.eye(5, dtype=np.int64)[i] for i in range(5)]
        counts = candidates[int(np.argmin([score(c) for c in candidates]))]
    got = greedy(values, truth, 6, metric)
    np.testing.assert_array_equal(got, counts)
    assert got.sum() == 6 and (got > 1).any()  # with replacement: a member repeats


PLAN = make_plan(tiny_spec(seeds=3, seeds_per_trial=3, grid={"model.depth": [1, 2]}))


@pytest.fixture(scope="module")
def ens(tmp_path_factory):
    path = tmp_path_factory.mktemp("greedy") / "ensembles"
    aggregate_blocks(path, trained_blocks(PLAN), plan=PLAN, datasets=datasets_of(PLAN))
    return sweep.load(path)


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


def test_select_greedy_chooses_by_the_greedy_steps_on_the_split_samples(ens):
    x, y = ens.where(depth=1).samples()  # the test samples, shared by both depths (one problem)
    values = np.concatenate([ens.where(depth=d).predict(x) for d in (1, 2)]).reshape(len(ens), -1)
    counts = greedy(values.astype(np.float64), y.reshape(-1).astype(np.float64), 5, "crps")
    blend = ens.select_greedy(5, metric="crps", split="test")
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
