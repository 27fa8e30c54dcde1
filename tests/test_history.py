"""``Problem(..., history=h)``: the ``h`` latest states stacked as input channels, the next state as
target; rollouts from ``h`` states with a moving window (ensemble rollouts and rollout metrics),
with normalisation; block invariance; bad inputs refused before any work."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import h5py
import jax
import numpy as np
import pytest
from hdf5_files import pdebench_variables
from helpers import tiny_spec

import sweep
from sweep.ensemble import HeldEnsemble
from sweep.problems import load_problem

LOCAL = sweep.RunOptions(executor="local")


def some(value):
    """``value``, which must not be None (a problem's trajectories, its normalisation)."""
    assert value is not None
    return value


def options(path, **more):
    return {"path": str(path), "val_fraction": 0.2, "test_fraction": 0.2, **more}


def test_history_stacks_the_latest_states_as_channels(tmp_path):
    states = pdebench_variables(tmp_path / "cfd.hdf5", samples=10, time=6, grid=(8,))  # density, pressure, Vx
    data = load_problem("hdf5", options(tmp_path / "cfd.hdf5", normalize="none", history=3, val_fraction=0))
    assert data.history == 3 and some(data.train_traj).shape == (8, 6, 3, 8)
    assert data.train.x.shape == (8 * 3, 9, 8) and data.train.y.shape == (8 * 3, 3, 8)
    np.testing.assert_array_equal(data.train.x[1], states[0, 1:4].reshape(9, 8))  # oldest state first
    np.testing.assert_array_equal(data.train.y[1], states[0, 4])
    np.testing.assert_array_equal(data.test.y[-1], states[-1, -1])
    # normalised per channel, each stacked state alike
    scaled = load_problem("hdf5", options(tmp_path / "cfd.hdf5", history=3, val_fraction=0))
    np.testing.assert_allclose(
        scaled.train.x[1].reshape(3, 3, 8), some(scaled.train_traj)[0, 1:4], rtol=1e-6, atol=1e-6
    )


def test_history_longer_than_the_trajectories_is_refused_before_reading(tmp_path, monkeypatch):
    pdebench_variables(tmp_path / "cfd.hdf5", samples=10, time=6, grid=(8,))
    # shapes and attributes are read; any slice of a dataset's values fails the test
    monkeypatch.setattr(h5py.Dataset, "__getitem__", lambda *a, **k: pytest.fail("read the arrays"))
    monkeypatch.setattr(h5py.Dataset, "read_direct", lambda *a, **k: pytest.fail("read the arrays"))
    with pytest.raises(sweep.SpecError, match=r"`problem.history`: got 6; .*cfd.hdf5' has 6 states .* at most 5"):
        load_problem("hdf5", options(tmp_path / "cfd.hdf5", history=6))
    with pytest.raises(sweep.SpecError, match=r"`problem.history`: got 3; .* 2 states per trajectory \(after time_str"):
        load_problem("hdf5", options(tmp_path / "cfd.hdf5", history=3, time_stride=5))


def test_bad_history_values_and_problems_without_trajectories():
    with pytest.raises(sweep.SpecError, match=r"`problem.history`: got 0; must be an integer >= 1"):
        sweep.Problem("heat1d", history=0)
    with pytest.raises(sweep.SpecError, match=r"`problem.history`: got 2; problem 'heat1d' has no trajectories"):
        load_problem("heat1d", {"num_points": 16, "num_samples": 10, "history": 2})
    with pytest.raises(sweep.SpecError, match=r"`problem.history`: got 4; the trajectories .* have 4 states"):
        load_problem("heat1d", {"num_points": 16, "num_samples": 10, "trajectory_steps": 3, "history": 4})
    spec = tiny_spec(
        problem=sweep.Problem("heat1d", num_points=16, num_samples=20, trajectory_steps=4, history=2),
        training=sweep.Training(epochs=2, batch_size=4, report_every=2, unroll=2),
    )
    with pytest.raises(sweep.SpecError, match=r"`training.unroll`: got 2 with `problem.history` 2"):
        sweep.train_block(spec, [0])


def spec_of(path) -> sweep.SweepSpec:
    problem = sweep.Problem("hdf5", **options(path, history=2))  # normalize: "zscore", hdf5's default
    training = sweep.Training(epochs=2, batch_size=8, report_every=2, rollout_steps=2, metrics=("mse",))
    return tiny_spec(name="hist", problem=problem, training=training, seeds=2, seeds_per_trial=2)


def test_block_invariance_bitwise_with_history_and_normalisation(tmp_path):
    pdebench_variables(tmp_path / "cfd.hdf5", samples=10, time=6, grid=(8,))
    spec = spec_of(tmp_path / "cfd.hdf5")
    block, history = sweep.train_block(spec, [0, 1, 2])
    alone, alone_history = sweep.train_block(spec, [2])
    last = jax.tree_util.tree_map(lambda a: a[2], eqx.filter(block, eqx.is_array))
    for a, b in zip(jax.tree_util.tree_leaves(last), jax.tree_util.tree_leaves(eqx.filter(alone, eqx.is_array))):
        np.testing.assert_array_equal(a, b[0])
    np.testing.assert_array_equal(history.train_loss[2], alone_history.train_loss[0])
    for split in ("test", "test_rollout"):
        for name, curve in getattr(history, split).items():
            np.testing.assert_array_equal(curve[2], getattr(alone_history, split)[name][0])
    assert np.all(np.isfinite(history.test_rollout["nrmse"]))


def test_rollouts_with_history_2_keep_a_moving_window(tmp_path):
    states = pdebench_variables(tmp_path / "cfd.hdf5", samples=10, time=6, grid=(8,))
    spec = spec_of(tmp_path / "cfd.hdf5")
    ens = sweep.load(sweep.run(spec, storage=str(tmp_path / "runs"), options=LOCAL))
    raw = states[-2:]  # the test trajectories, in physical units
    norm = some(ens.normalization)
    shift, scale = (np.asarray([norm[c][i] for c in ("density", "pressure", "Vx")]) for i in (0, 1))
    x0 = raw[:, :2]  # two initial states per sample
    out = ens.rollout(x0, 3)
    assert out.shape == (2, 4, 2, 3, 8)
    np.testing.assert_array_equal(out[:, 0], np.broadcast_to(raw[:, 1], out[:, 0].shape))
    for i, seed in enumerate(ens.index["seed"].to_pylist()):
        net: Any = ens.member(seed=seed)  # an eqx.Module, callable on one sample
        window = list((x0.swapaxes(0, 1) - shift[:, None]) / scale[:, None])  # normalised states, oldest first
        for t in range(1, 4):
            nxt = np.asarray(eqx.filter_vmap(net)(np.concatenate(window[-2:], axis=1).astype(np.float32)))
            window.append(nxt)
            np.testing.assert_allclose(out[i, t], nxt * scale[:, None] + shift[:, None], rtol=1e-4, atol=1e-4)
    mean, _ = ens.rollout_mean_std(x0, 3)
    np.testing.assert_allclose(mean, out.mean(0), rtol=1e-4, atol=1e-5)
    one = ens.predict(x0.reshape(2, 6, 8))  # predict takes the stacked input
    np.testing.assert_allclose(out[:, 1], one, rtol=1e-5, atol=1e-5)
    held = HeldEnsemble(ens)  # what serving answers /rollout from, checking x0 against rollout_shape
    assert held.rollout_shape == (2, 3, 8)
    np.testing.assert_array_equal(held.rollout_mean_std(x0, 3)[0], mean)
    rows = ens.scores("test").to_pylist()
    assert [r["step"] for r in rows if r["kind"] == "rollout"] == [1, 2, 3, 4]  # 6 states: 4 after the first 2
    assert "test_rollout_nrmse" in ens.table.column_names
    with pytest.raises(
        sweep.QueryError, match=r"rollout: x0 has shape \(2, 3, 8\); .* history=2 .* \(batch >= 1, 2, 3, 8\)"
    ):
        ens.rollout(raw[:, 0], 2)
