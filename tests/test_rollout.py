"""Rollout metrics (``Training(rollout_steps=T)``): the curves against a hand-rolled
NumPy loop, their geometric mean, the store columns and what ranks by them, and a sweep of an
exponax problem through Ray Tune; and large evaluation sets evaluated in parts."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pyarrow as pa
import pytest
from _blocks import datasets_of, trained_blocks
from helpers import member, tiny_spec

import sweep
from sweep import training
from sweep.metrics import rollout_gmean, valid_steps, window_mean
from sweep.planning import make_plan
from sweep.store import aggregate_blocks

MODEL = sweep.Model("ConvNet", hidden_channels=4, depth=1, activation="relu", boundary_mode="dirichlet")


def rolling(steps=5, batch_size=5, metrics=("nrmse", "mse"), **problem):
    problem = {"num_points": 16, "num_samples": 35, "trajectory_steps": 6, **problem}
    return tiny_spec(
        problem=sweep.Problem("heat1d", **problem),
        model=MODEL,
        training=sweep.Training(
            epochs=2, batch_size=batch_size, report_every=1, rollout_steps=steps, rollout_metrics=metrics
        ),
    )


def test_rollout_curves_are_the_hand_rolled_loop():
    spec = rolling(batch_size=3)  # trajectories rolled out a minibatch at a time
    data = training.load_data(spec)
    assert (len(data.val_traj), len(data.test_traj)) == (4, 7)  # in parts of 3: 2 x 2, and 3 x 3 (padded)
    model, history = sweep.train_block(spec, [0, 3], data=data)
    for i in range(2):
        net = member(model, i)
        for split in ("val", "test"):
            traj = data.trajectories(split).astype(np.float64)
            nrmse, mse = np.zeros((len(traj), 5)), np.zeros((len(traj), 5))
            for j, trajectory in enumerate(traj):
                state = trajectory[0]
                for t in range(1, 6):
                    state = np.asarray(net(jnp.asarray(state, jnp.float32)), np.float64)
                    error = state - trajectory[t]
                    nrmse[j, t - 1] = np.sqrt(np.sum(error**2) / np.sum(trajectory[t] ** 2))
                    mse[j, t - 1] = np.mean(error**2)
            curves = getattr(history, f"{split}_rollout")
            np.testing.assert_allclose(curves["nrmse"][i], nrmse.mean(0), rtol=2e-5)
            np.testing.assert_allclose(curves["mse"][i], mse.mean(0), rtol=2e-5)
            gmean = getattr(history, split)["rollout_gmean_nrmse"][i, -1]
            assert gmean == np.exp(np.mean(np.log(curves["nrmse"][i].astype(np.float64))))


def test_geometric_mean_is_over_the_first_100_steps():
    curve = np.concatenate([np.full(100, 0.5), np.full(50, 1e6)])
    assert rollout_gmean(curve) == pytest.approx(0.5) and rollout_gmean(curve[:4]) == pytest.approx(0.5)
    assert rollout_gmean(np.array([[0.1, 0.4, 1.6], [0.0, 1.0, 1.0]])) == pytest.approx([0.4, 0.0])


def test_store_columns_and_rankings_by_the_rollout(tmp_path):
    spec = rolling(steps=12, trajectory_steps=12, num_samples=78, metrics=("nrmse", "mse", "correlation"))
    gridded = tiny_spec(
        problem=spec.problem,
        model=MODEL,
        training=dataclasses.replace(spec.training, metrics=("nrmse", "correlation")),  # one-step: their gains
        seeds=3,
        seeds_per_trial=3,
        grid={"model.depth": [1, 2]},
    )
    plan = make_plan(gridded)
    ens = sweep.load(aggregate_blocks(tmp_path / "store", trained_blocks(plan), plan, datasets=datasets_of(plan)))
    table = ens.table
    for split in ("val", "test"):
        assert table.schema.field(f"{split}_rollout_nrmse").type == pa.list_(pa.float64())
        assert table.schema.field(f"{split}_rollout_gmean_nrmse").type == pa.float64()
        assert table.schema.field(f"{split}_rollout_gmean_nrmse_history").type == pa.list_(pa.float64())
        curves = table[f"{split}_rollout_nrmse"].to_pylist()
        assert all(len(c) == 12 for c in curves)
        # The Well's window of steps 6-12 (the curves do not reach 13-30)
        np.testing.assert_array_equal(
            table[f"{split}_rollout_window_6_12_nrmse"].to_numpy(), window_mean(np.array(curves), 6, 12)
        )
        assert f"{split}_rollout_window_13_30_nrmse" not in table.column_names
        np.testing.assert_array_equal(table[f"{split}_rollout_gmean_nrmse"].to_numpy(), rollout_gmean(np.array(curves)))
        assert all(len(h) == 2 for h in table[f"{split}_rollout_gmean_nrmse_history"].to_pylist())
        # a score (higher is better) is summarised by its valid steps, not by a geometric mean
        correlations = np.array(table[f"{split}_rollout_correlation"].to_pylist())
        valid = table[f"{split}_rollout_valid_steps_correlation"].to_numpy()
        np.testing.assert_array_equal(valid, valid_steps(correlations, 0.8))
        assert f"{split}_rollout_gmean_correlation" not in table.column_names
    best = ens.best(2, metric="val_rollout_gmean_nrmse")
    assert best.table["val_rollout_gmean_nrmse"].to_pylist() == sorted(table["val_rollout_gmean_nrmse"].to_pylist())[:2]
    summary = ens.summary(metric="val_rollout_gmean_mse")
    assert summary.num_rows == 2 and "test_rollout_gmean_mse_mean" in summary.column_names  # the test value beside
    assert ens.compare({"depth": 1}, {"depth": 2}, metric="val_rollout_gmean_nrmse").n_a == 3
    assert ens.compare({"depth": 1}, {"depth": 2}, metric="val_rollout_window_6_12_mse").n_a == 3
    longest = ens.best(2, metric="val_rollout_valid_steps_correlation", mode="max").table
    assert sorted(longest["val_rollout_valid_steps_correlation"].to_pylist()) == sorted(valid)[-2:]
    with pytest.raises(
        sweep.QueryError,
        match=r"^best\(metric='val_rollout_nrmse'\): each member's curve over the rollout's steps, not one value; "
        r"rank by a number that sums it up: val_rollout_gmean_nrmse, val_rollout_window_6_12_nrmse$",
    ):
        ens.best(2, metric="val_rollout_nrmse")
    scores = ens.where(depth=1).scores("test")
    (one,) = [r for r in scores.to_pylist() if r["kind"] == "one_step"]
    # the ensemble gain, above 1 where the mean beats the mean member: of an error, members / ensemble;
    # of a score (correlation, higher is better), ensemble / members
    assert one["nrmse_gain"] == pytest.approx(one["nrmse_members"] / one["nrmse_ensemble"])
    assert one["correlation_gain"] == pytest.approx(one["correlation_ensemble"] / one["correlation_members"])


def test_a_split_without_trajectories_has_no_rollout_curves():
    spec = rolling(val_fraction=0)  # no validation set: no validation trajectories
    _, history = sweep.train_block(spec, [0])
    assert set(history.test_rollout) == {"nrmse", "mse"} and history.val_rollout == {} and history.val == {}


def test_a_sweep_of_an_exponax_problem_stores_rollouts(tmp_path):
    pytest.importorskip("exponax")
    problem = sweep.Problem(
        "exponax:Advection", num_points=16, num_train=3, num_test=2, num_val=2, train_steps=4, test_steps=6
    )
    spec = tiny_spec(
        problem=problem,
        model=MODEL.replace(boundary_mode="periodic"),
        seeds=2,
        seeds_per_trial=2,
        training=sweep.Training(epochs=2, batch_size=4, report_every=1, unroll=2, rollout_steps=6),
    )
    path = sweep.run(spec, storage=str(tmp_path), options=sweep.RunOptions(executor="local", progress="off"))
    table = sweep.load(path).table
    assert [len(c) for c in table["test_rollout_nrmse"].to_pylist()] == [6, 6]
    assert np.isfinite(table["val_rollout_gmean_nrmse"].to_numpy()).all()


def test_evaluation_sets_are_evaluated_in_parts_over_every_sample():
    spec = tiny_spec(
        problem=sweep.Problem("heat1d", num_points=16, num_samples=70),
        model=MODEL,
        training=sweep.Training(epochs=1, batch_size=3, report_every=1, metrics=("nrmse",)),  # parts of a minibatch
    )
    data = training.load_data(spec)
    assert (data.val.size, data.test.size) == (7, 14)  # in parts of 3, the last padded
    model, history = sweep.train_block(spec, [1], data=data)
    net = member(model, 0)
    for split in ("val", "test"):
        x, y = getattr(data, split)
        pred = np.asarray(jax.vmap(net)(jnp.asarray(x)), np.float64)
        nrmse = np.sqrt(np.sum((pred - y) ** 2, axis=(1, 2)) / np.sum(y.astype(np.float64) ** 2, axis=(1, 2)))
        np.testing.assert_allclose(getattr(history, split)["loss"][0, -1], np.mean((pred - y) ** 2), rtol=1e-5)
        np.testing.assert_allclose(getattr(history, split)["nrmse"][0, -1], nrmse.mean(), rtol=1e-5)
