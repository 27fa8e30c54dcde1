"""Ensemble queries (SPEC §3, §8): predict / mean_std against members one by one, best, summary
and compare against statistics computed from the table, interop, and every query error."""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np
import pdequinox as pdeqx
import pyarrow.compute as pc
import pytest
from _blocks import trained_blocks
from conftest import tiny_spec, tree_allclose
from scipy import stats

from sweep import QueryError
from sweep.store import aggregate_blocks
from sweep import load
from sweep import load_data
from sweep.planning import make_plan

PLAN = make_plan(tiny_spec(grid={"model.depth": [1, 2], "optimizer.learning_rate": [1e-3, 3e-3]}))
DEEP = 2  # the config used for inference tests


@pytest.fixture(scope="module")
def ens(tmp_path_factory):
    blocks = trained_blocks(PLAN)
    first = blocks[0]  # one diverged member, to check it ranks last and is left out of the stats
    blocks[0] = first._replace(history=first.history._replace(diverged=np.array([False, True, False, False])))
    path = tmp_path_factory.mktemp("sweep") / "ensembles"
    aggregate_blocks(path, blocks, plan=PLAN)
    return load(path)


@pytest.fixture(scope="module")
def x():
    return np.asarray(load_data(PLAN.trials[0].spec).test_x[:5])


def test_predict_equals_members_one_by_one(ens, x):
    sub = ens.where(depth=DEEP).best(7)  # ranked order, across both trials and learning rates
    y = sub.predict(x)
    assert y.shape == (7, 5, 1, 16) and len(sub) == 7
    for i, row in enumerate(sub.table.to_pylist()):
        net = sub.member(seed=row["seed"], learning_rate=row["learning_rate"])
        np.testing.assert_allclose(y[i], jax.vmap(net)(x), rtol=1e-5, atol=1e-6)
    for chunk_size in (1, 3, 64):
        np.testing.assert_array_equal(sub.predict(x, chunk_size=chunk_size), y)


def test_predict_with_the_vmap_layout_agrees(ens, x, monkeypatch):
    sub = ens.where(depth=DEEP)
    y = sub.predict(x)
    monkeypatch.setenv("SWEEP_LAYOUT", "vmap")  # the accelerator layout
    np.testing.assert_allclose(sub.predict(x, chunk_size=3), y, rtol=1e-5, atol=1e-6)


def test_mean_std_equals_numpy_over_predict(ens, x):
    sub = ens.where(depth=DEEP)
    y = sub.predict(x).astype(np.float64)
    for chunk_size in (3, 64):
        mean, std = sub.mean_std(x, chunk_size=chunk_size)
        np.testing.assert_allclose(mean, y.mean(0), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(std, y.std(0), rtol=1e-5, atol=1e-7)


def test_best_ranks_by_metric_with_diverged_last(ens):
    table = ens.table
    ranked = ens.best(16).table
    losses = ranked["test_loss"].to_numpy()
    assert ranked["status"][15].as_py() == "diverged"
    assert np.all(np.diff(losses[:15]) >= 0)
    best3 = ens.best(3, metric="train_loss").table["member_id"].to_pylist()
    ok = table.filter(pc.field("status") != "diverged")
    assert best3 == [ok["member_id"][i].as_py() for i in np.argsort(ok["train_loss"].to_numpy(), kind="stable")[:3]]
    assert len(ens.best(100)) == 16


def test_summary_matches_statistics_of_the_table(ens):
    summary = ens.summary().to_pylist()
    assert [(r["depth"], r["learning_rate"]) for r in summary] == [(1, 1e-3), (1, 3e-3), (2, 1e-3), (2, 3e-3)]
    for row in summary:
        members = ens.where(depth=row["depth"], learning_rate=row["learning_rate"]).table
        ok = members.filter(pc.field("status") != "diverged")
        v = ok["test_loss"].to_numpy().astype(np.float64)
        assert (row["count"], row["diverged"], row["n"]) == (4, 4 - len(v), len(v))
        ci = stats.t.interval(0.95, len(v) - 1, loc=v.mean(), scale=stats.sem(v))
        boot = stats.bootstrap((v,), lambda a, axis: stats.trim_mean(a, 0.25, axis=axis), n_resamples=2000,
                               method="percentile", rng=np.random.default_rng(0)).confidence_interval
        want = {"mean": v.mean(), "std": v.std(ddof=1), "median": np.median(v), "min": v.min(), "max": v.max(),
                "mean_ci_low": ci[0], "mean_ci_high": ci[1], "iqm": stats.trim_mean(v, 0.25),
                "iqm_ci_low": boot[0], "iqm_ci_high": boot[1]}
        assert {k: row[k] for k in want} == pytest.approx(want, rel=1e-12)
    assert [r["diverged"] for r in summary] == [1, 0, 0, 0]


def test_compare_is_the_probability_of_lower_loss(ens):
    def losses(depth):  # diverged members lose every comparison
        table = ens.where(depth=depth).table
        return np.where(pc.equal(table["status"], "diverged").to_numpy(zero_copy_only=False), np.inf, table["test_loss"])

    a, b = losses(1), losses(2)
    brute = np.mean([(x < y) + 0.5 * (x == y) for x in a for y in b])
    result = ens.compare({"depth": 1}, {"depth": 2})
    assert result.probability == pytest.approx(brute) and (result.n_a, result.n_b) == (8, 8)
    assert 0 <= result.ci_low <= result.probability <= result.ci_high <= 1
    assert ens.compare({"depth": 2}, {"depth": 1}).probability == pytest.approx(1 - brute)
    same = ens.compare({"depth": 2}, {"depth": 2})
    assert same.probability == 0.5 and same.ci_low <= 0.5 <= same.ci_high


def test_stacked_works_with_pdequinox(ens):
    sub = ens.where(depth=DEEP, learning_rate=3e-3)
    stacked = sub.stacked()
    members = [sub.member(seed=s) for s in range(4)]
    for i, net in enumerate(members):
        assert tree_allclose(pdeqx.extract_from_ensemble(stacked, i), net, exact=True)
    assert tree_allclose(pdeqx.combine_to_ensemble(members), stacked, exact=True)
    assert isinstance(members[0], eqx.Module) and sub.spec.model.depth == DEEP


def test_where_selects_by_values_and_lists(ens):
    assert len(ens.where(depth=[1, 2], learning_rate=1e-3)) == 8
    assert len(ens.where(status="diverged")) == 1
    assert ens.where() is ens and len(ens.where(seed={0, 3})) == 8


@pytest.mark.parametrize("query, message", [
    (lambda e, x: e.where(width=3), r"where\(\): unknown column 'width'; columns: member_id, config_id, seed.*depth, learning_rate"),
    (lambda e, x: e.where(depth=5), r"where\(depth=5\): no member matches; in this selection depth takes \[1, 2\]"),
    (lambda e, x: e.where(depth="deep"), r"where\(depth='deep'\): column 'depth' holds int64 values"),
    (lambda e, x: e.best(0), r"best\(k=0\): k must be an integer >= 1"),
    (lambda e, x: e.best(2, metric="speed"), r"best\(metric='speed'\): not a numeric column; choose one of"),
    (lambda e, x: e.summary(metric="status"), r"summary\(metric='status'\): not a numeric column"),
    (lambda e, x: e.where(depth=2).member(seed=11), r"member\(seed=11\): no member with this seed here; seeds: \[0, 1, 2, 3\]"),
    (lambda e, x: e.member(seed="1"), r"member\(seed='1'\): the seed must be an integer"),
    (lambda e, x: e.member(seed=1), r"member\(seed=1\): 4 members have this seed \(they differ in config_id, depth, learning_rate\)"),
    (lambda e, x: e.predict(x), r"predict: the selection spans 2 structural configs"),
    (lambda e, x: e.stacked(), r"stacked: the selection spans 2 structural configs"),
    (lambda e, x: e.where(depth=2).predict(x[0]), r"predict: x has shape \(1, 16\) \(float32\); config \w+ takes a batch of samples of shape \(1, 16\)"),
    (lambda e, x: e.where(depth=2).mean_std(x[:, :, :8]), r"mean_std: x has shape \(5, 1, 8\)"),
    (lambda e, x: e.where(depth=2).predict(x[:0]), r"predict: x has shape \(0, 1, 16\).*\(batch >= 1, 1, 16\)"),
    (lambda e, x: e.where(depth=2).predict(x, chunk_size=0), r"predict\(chunk_size=0\): must be an integer >= 1"),
    (lambda e, x: e.compare({"depth": 1}, {"width": 2}), r"unknown column 'width'"),
])
def test_query_errors_name_the_problem(ens, x, query, message):
    with pytest.raises(QueryError, match=message):
        query(ens, x)
