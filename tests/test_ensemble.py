"""Ensemble queries: predict / mean_std against members one by one, best by
validation, summary and compare against statistics computed from the table, intervals that stay
in a metric's range, interop, and every query error."""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np
import pdequinox as pdeqx
import pyarrow.compute as pc
import pytest
from _blocks import trained_blocks
from helpers import tiny_spec, tree_allclose
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import sweep
from sweep import QueryError, load, load_data
from sweep.ensemble import compare as compare_values
from sweep.ensemble import describe
from sweep.planning import make_plan
from sweep.store import aggregate_blocks

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
    sub = ens.where(depth=DEEP).best(7)  # ranked order (by validation loss), across both trials and learning rates
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


def _ok(table):
    return table.filter(pc.field("status") != "diverged")


def test_best_ranks_by_validation_loss_with_diverged_last(ens):
    table = ens.table
    ranked = ens.best(16).table
    losses = ranked["val_loss"].to_numpy()
    assert ranked["status"][15].as_py() == "diverged"
    assert np.all(np.diff(losses[:15]) >= 0)
    best3 = ens.best(3, metric="train_loss").table["member_id"].to_pylist()
    ok = _ok(table)
    assert best3 == [ok["member_id"][i].as_py() for i in np.argsort(ok["train_loss"].to_numpy(), kind="stable")[:3]]
    worst = ens.best(3, metric="val_loss", mode="max").table["val_loss"].to_numpy()
    assert (
        worst.tolist() == sorted(ok["val_loss"].to_numpy(), reverse=True)[:3]
    )  # higher is better; diverged still last
    assert len(ens.best(100)) == 16


def test_best_chooses_by_validation_where_test_would_choose_otherwise(tmp_path):
    """Four members whose validation and test losses rank them in opposite orders."""
    block = trained_blocks(make_plan(tiny_spec(seeds=4, seeds_per_trial=4)))[0]
    val = dict(block.history.val)
    test_last = block.history.test["loss"][:, -1]
    val["loss"] = val["loss"].copy()
    val["loss"][:, -1] = test_last.max() + test_last.min() - test_last  # reversed order
    aggregate_blocks(tmp_path / "s", [block._replace(history=block.history._replace(val=val))])
    ens = load(tmp_path / "s")
    by_val, by_test = ens.best(1).table.to_pylist()[0], ens.best(1, metric="test_loss").table.to_pylist()[0]
    assert by_val["seed"] == int(np.argmin(val["loss"][:, -1])) != by_test["seed"] == int(np.argmin(test_last))
    assert ens.best_configuration() == {"config_id": by_val["config_id"]}
    row = ens.summary().to_pylist()[0]  # test reported beside the validation statistics, never ranking
    assert row["mean"] == pytest.approx(val["loss"][:, -1].astype(np.float64).mean())
    assert row["test_loss_mean"] == pytest.approx(test_last.astype(np.float64).mean())


def test_summary_matches_statistics_of_the_table_best_first(ens):
    summary = ens.summary().to_pylist()
    assert sorted((r["depth"], r["learning_rate"]) for r in summary) == [(1, 1e-3), (1, 3e-3), (2, 1e-3), (2, 3e-3)]
    assert [r["mean"] for r in summary] == sorted(r["mean"] for r in summary)  # best (lowest) first
    for row in summary:
        ok = _ok(ens.where(depth=row["depth"], learning_rate=row["learning_rate"]).table)
        v = ok["val_loss"].to_numpy().astype(np.float64)
        assert (row["count"], row["diverged"], row["n"]) == (4, 4 - len(v), len(v))
        boot = stats.bootstrap(
            (v,),
            lambda a, axis: np.stack([a.mean(axis), stats.trim_mean(a, 0.25, axis=axis)]),
            n_resamples=2000,
            method="percentile",
            rng=np.random.default_rng(0),
        ).confidence_interval
        want = {
            "mean": v.mean(),
            "std": v.std(ddof=1),
            "median": np.median(v),
            "min": v.min(),
            "max": v.max(),
            "mean_ci_low": boot[0][0],
            "mean_ci_high": boot[1][0],
            "iqm": stats.trim_mean(v, 0.25),
            "iqm_ci_low": boot[0][1],
            "iqm_ci_high": boot[1][1],
            "test_loss_mean": ok["test_loss"].to_numpy().mean(),
        }
        assert {k: row[k] for k in want} == pytest.approx(want, rel=1e-6)
        assert row["test_loss_ci_low"] <= row["test_loss_mean"] <= row["test_loss_ci_high"]
    assert sorted(r["diverged"] for r in summary) == [0, 0, 0, 1]
    frame = ens.summary_frame()
    assert list(frame.columns) == ens.summary().column_names and frame["mean"].tolist() == [r["mean"] for r in summary]
    train = ens.summary(metric="train_loss")
    assert "test_loss_mean" not in train.column_names  # only a validation metric has a test column beside it
    assert [r["mean"] for r in ens.summary(mode="max").to_pylist()] == sorted(
        (r["mean"] for r in summary), reverse=True
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=1e6, allow_subnormal=False), min_size=1, max_size=8))
def test_intervals_of_a_non_negative_metric_never_go_below_zero(values):
    d = describe(np.asarray(values, np.float32))
    for low, high in (("mean_ci_low", "mean_ci_high"), ("iqm_ci_low", "iqm_ci_high")):
        if len(values) == 1:
            assert np.isnan(d[low]) and np.isnan(d[high])
        else:
            assert 0 <= d[low] <= d[high] and d["min"] <= d[low] and d[high] <= d["max"]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0, 10), min_size=2, max_size=6), st.lists(st.floats(0, 10), min_size=2, max_size=6))
def test_comparison_intervals_stay_in_range(a, b):
    c = compare_values(np.asarray(a), np.asarray(b))
    assert 0 <= c.ci_low <= c.probability <= c.ci_high <= 1
    assert c.difference_ci_low <= c.difference <= c.difference_ci_high
    assert -10 <= c.difference_ci_low and c.difference_ci_high <= 10  # within the range of differences


def test_compare_refuses_a_grid_column_left_free(ens):
    with pytest.raises(
        QueryError,
        match=r"compare\(\): learning_rate takes \[0.001, 0.003\] in a and \[0.001, 0.003\] "
        r"in b: members trained with different settings would be pooled.*pool=True",
    ):
        ens.compare({"depth": 1}, {"depth": 2})
    with pytest.raises(QueryError, match=r"learning_rate takes \[0.001, 0.003\] in b:"):
        ens.compare({"depth": 1, "learning_rate": 1e-3}, {"depth": 2})
    pooled = ens.compare({"depth": 1}, {"depth": 2}, pool=True)
    assert (pooled.n_a, pooled.n_b) == (8, 8)
    listed = ens.compare({"depth": 1, "learning_rate": [1e-3, 3e-3]}, {"depth": 2, "learning_rate": [1e-3, 3e-3]})
    assert listed == pooled  # a column given as a list is chosen, not left free
    with pytest.raises(QueryError, match=r"^compare\(b=\{'dept': 2\}\): unknown column 'dept' \(did you mean 'depth'"):
        ens.compare({"depth": 1}, {"dept": 2})  # named as the call made, not as where()


def test_compare_is_the_probability_of_lower_loss_and_the_difference_of_means(ens):
    fixed = {"learning_rate": 1e-3}

    def losses(depth):  # diverged members lose every comparison
        table = ens.where(depth=depth, **fixed).table
        diverged = pc.equal(table["status"], "diverged").to_numpy(zero_copy_only=False)
        values = table["val_loss"].to_numpy().astype(np.float64)
        return np.where(diverged, np.inf, values), values[~diverged]

    (a, used_a), (b, used_b) = losses(1), losses(2)
    brute = np.mean([(x < y) + 0.5 * (x == y) for x in a for y in b])
    result = ens.compare({"depth": 1, **fixed}, {"depth": 2, **fixed})
    assert result.probability == pytest.approx(brute) and (result.n_a, result.n_b) == (4, 4)
    assert (result.used_a, result.used_b) == (len(used_a), len(used_b)) and result.metric == "val_loss"
    assert 0 <= result.ci_low <= result.probability <= result.ci_high <= 1
    assert result.difference == pytest.approx(used_a.mean() - used_b.mean())
    assert result.difference_ci_low <= result.difference <= result.difference_ci_high
    assert ens.compare({"depth": 2, **fixed}, {"depth": 1, **fixed}).probability == pytest.approx(1 - brute)
    higher = ens.compare(
        {"depth": 1, **fixed}, {"depth": 2, **fixed}, mode="max"
    )  # higher is better: diverged still lose
    assert higher.probability == pytest.approx(
        np.mean(
            [
                (x > y) + 0.5 * (x == y)
                for x in np.where(np.isinf(a), -np.inf, a)
                for y in np.where(np.isinf(b), -np.inf, b)
            ]
        )
    )
    same = ens.compare({"depth": 2, **fixed}, {"depth": 2, **fixed})
    assert same.probability == 0.5 and same.ci_low <= 0.5 <= same.ci_high and same.difference == 0


def test_without_a_validation_set_ranking_needs_an_explicit_metric(tmp_path):
    spec = tiny_spec(problem=sweep.Problem("heat1d", num_points=16, num_samples=60, val_fraction=0))
    aggregate_blocks(tmp_path / "s", trained_blocks(make_plan(spec)))
    ens = load(tmp_path / "s")
    assert ens.table["val_loss"].null_count == 4 and ens.table["val_loss_history"].null_count == 4
    message = (
        r"best\(metric='val_loss'\): 4 of 4 members \(config\(s\) \w+\) have no val_loss: they were trained "
        r"without a validation set \(problem.val_fraction=0\), and ranking needs one. Rank by another metric, "
        r"e.g. metric='test_loss'"
    )
    with pytest.raises(QueryError, match=message):
        ens.best(2)
    for query in (
        lambda e: e.summary(),
        lambda e: e.best_configuration(),
        lambda e: e.compare({"seed": 0}, {"seed": 1}),
    ):
        with pytest.raises(QueryError, match="without a validation set"):
            query(ens)
    assert (
        ens.best(2, metric="test_loss").table["test_loss"].to_pylist() == sorted(ens.table["test_loss"].to_pylist())[:2]
    )


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


@pytest.mark.parametrize(
    "query, message",
    [
        (
            lambda e, x: e.where(width=3),
            r"where\(\): unknown column 'width'; columns: member_id, config_id, seed.*depth, learning_rate",
        ),
        (lambda e, x: e.where(depth=5), r"where\(depth=5\): no member matches; in this selection depth takes \[1, 2\]"),
        (lambda e, x: e.where(depth="deep"), r"where\(depth='deep'\): column 'depth' holds int64 values"),
        (lambda e, x: e.best(0), r"best\(k=0\): k must be an integer >= 1"),
        (lambda e, x: e.best(2, metric="speed"), r"best\(metric='speed'\): no column named 'speed'.*; choose one of"),
        (
            lambda e, x: e.best(2, mode="lowest"),
            r"best\(mode='lowest'\): choose \"min\" \(lower val_loss is better\) or \"max\"",
        ),
        (lambda e, x: e.summary(metric="status"), r"summary\(metric='status'\): not a numeric column"),
        (
            lambda e, x: e.where(depth=2).member(seed=11),
            r"member\(seed=11\): no member with this seed here; seeds: \[0, 1, 2, 3\]",
        ),
        (lambda e, x: e.member(seed="1"), r"member\(seed='1'\): the seed must be an integer"),
        (
            lambda e, x: e.member(seed=1),
            r"member\(seed=1\): 4 members have this seed \(they differ in config_id, depth, learning_rate\)",
        ),
        (lambda e, x: e.predict(x), r"predict: the selection spans 2 structural configs"),
        (lambda e, x: e.stacked(), r"stacked: the selection spans 2 structural configs"),
        (
            lambda e, x: e.where(depth=2).predict(x[0]),
            r"predict: x has shape \(1, 16\) \(float32\); config \w+ takes a batch of samples of shape \(1, 16\)",
        ),
        (lambda e, x: e.where(depth=2).mean_std(x[:, :, :8]), r"mean_std: x has shape \(5, 1, 8\)"),
        (
            lambda e, x: e.where(depth=2).predict(x + 1j),
            r"predict: x has shape \(5, 1, 16\) \(complex64\); .* a real array",
        ),
        (lambda e, x: e.where(depth=2).predict(x[:0]), r"predict: x has shape \(0, 1, 16\).*\(batch >= 1, 1, 16\)"),
        (lambda e, x: e.where(depth=2).predict(x, chunk_size=0), r"predict\(chunk_size=0\): must be an integer >= 1"),
        (lambda e, x: e.compare({"depth": 1}, {"width": 2}), r"unknown column 'width'"),
    ],
)
def test_query_errors_name_the_problem(ens, x, query, message):
    with pytest.raises(QueryError, match=message):
        query(ens, x)
