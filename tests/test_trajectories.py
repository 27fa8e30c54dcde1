"""Trajectories of a problem: heat1d by repeated BTCS steps, pairs derived
from trajectories, validation carved by trajectory, and named errors for bad trajectories."""

import numpy as np
import pytest
import scipy.linalg

import sweep
from sweep.problems import as_dataset, heat1d


def _btcs(u, n, extent, dt, nu):
    r = nu * dt / (extent / (n + 1)) ** 2
    banded = np.zeros((3, n))
    banded[0, 1:], banded[1], banded[2, :-1] = -r, 1 + 2 * r, -r
    return scipy.linalg.solve_banded((1, 1), banded, u.T).T


def test_heat1d_trajectories_are_repeated_btcs_steps_and_leave_the_pairs_alone():
    n, steps = 12, 6
    data = heat1d(num_points=n, num_samples=20, trajectory_steps=steps, data_seed=2)
    plain = heat1d(num_points=n, num_samples=20, data_seed=2)
    assert plain.train_traj is None and plain.val_traj is None and plain.test_traj is None
    for with_traj, without in zip(data.splits, plain.splits):  # the pairs bit for bit
        assert with_traj.x.tobytes() == without.x.tobytes() and with_traj.y.tobytes() == without.y.tobytes()
    assert data.train_traj.shape == (14, steps + 1, 1, n) and data.train_traj.dtype == np.float32
    assert data.val_traj.shape == (2, steps + 1, 1, n) and data.test_traj.shape == (4, steps + 1, 1, n)
    for split, traj in zip(data.splits, (data.train_traj, data.val_traj, data.test_traj)):
        # each split's trajectories start from its own samples, in order (validation carved alike)
        assert traj[:, 0].tobytes() == split.x.tobytes() and traj[:, 1].tobytes() == split.y.tobytes()
        expected = _btcs(traj[:, :-1, 0].reshape(-1, n).astype(np.float64), n, 3.0, 0.1, 0.1)
        np.testing.assert_allclose(traj[:, 1:, 0].reshape(-1, n), expected, atol=2e-5)
    assert not np.allclose(data.test_traj[:, -1], data.test_traj[:, 1])  # it keeps diffusing


def _traj(n, steps, seed, c=1, s=8):
    return np.random.default_rng(seed).normal(size=(n, steps + 1, c, s))


def test_pairs_are_derived_from_trajectories_and_validation_is_carved_by_trajectory():
    train, test = _traj(9, 4, 0), _traj(1, 6, 1)
    data = as_dataset(None, "test", trajectories={"train": train, "test": test})
    assert data.val_traj.shape == (1, 5, 1, 8) and data.train_traj.shape == (8, 5, 1, 8)  # 0.1 of 10 trajectories
    given = {row.tobytes() for row in train.astype(np.float32)}
    kept = [row.tobytes() for row in data.train_traj] + [row.tobytes() for row in data.val_traj]
    assert sorted(kept) == sorted(given)  # held out whole: no state of a validation trajectory is trained on
    for split, traj in zip(data.splits, (data.train_traj, data.val_traj, data.test_traj)):
        # every (state, next state) of every trajectory, trajectory by trajectory
        np.testing.assert_array_equal(split.x, traj[:, :-1].reshape(-1, 1, 8))
        np.testing.assert_array_equal(split.y, traj[:, 1:].reshape(-1, 1, 8))
    none = as_dataset(None, "test", val_fraction=0, trajectories={"train": train, "test": test})
    assert (
        none.val_traj is None and none.val.size == 0 and none.train_traj.tobytes() == train.astype(np.float32).tobytes()
    )


@pytest.mark.parametrize(
    "trajectories, pairs, message",
    [
        (
            {"train": np.zeros((3, 4))},
            True,
            r"`train_traj` has shape \(3, 4\); need \(samples, steps \+ 1, channels, \*spatial\)",
        ),
        (
            {"train": np.zeros((3, 1, 1, 8))},
            True,
            r"`train_traj` has shape \(3, 1, 1, 8\): 1 state\(s\) per trajectory; need at least 2",
        ),
        (
            {"test": np.zeros((3, 4, 2, 8))},
            True,
            r"`test_traj` holds states of shape \(2, 8\); they must have the inputs' shape \(1, 8\)",
        ),
        ({"test": np.full((3, 4, 1, 8), np.nan)}, True, r"`test_traj` holds 96 NaN or infinite value\(s\)"),
        ({"validation": np.zeros((3, 4, 1, 8))}, True, r"trajectories of unknown split\(s\) \['validation'\]"),
        ({"train": np.zeros((3, 4, 1, 8))}, False, r"without \(x, y\) pairs, give training and test trajectories"),
    ],
)
def test_bad_trajectories_are_named(trajectories, pairs, message):
    arrays = (np.zeros((6, 1, 8)), np.zeros((6, 1, 8)), np.zeros((2, 1, 8)), np.zeros((2, 1, 8))) if pairs else None
    with pytest.raises(sweep.SpecError, match=message):
        as_dataset(arrays, "test", trajectories=trajectories)


def test_trajectories_need_targets_shaped_like_inputs():
    arrays = (np.zeros((6, 1, 8)), np.zeros((6, 2, 8)), np.zeros((2, 1, 8)), np.zeros((2, 2, 8)))
    with pytest.raises(
        sweep.SpecError, match=r"must map a state to the next state: inputs \(1, 8\) and targets \(2, 8\)"
    ):
        as_dataset(arrays, "test", trajectories={"test": _traj(2, 3, 0)})


def test_heat1d_trajectory_steps_is_checked():
    with pytest.raises(sweep.SpecError, match=r"`problem.trajectory_steps`: got -1; must be a non-negative integer"):
        sweep.Problem("heat1d", trajectory_steps=-1)


def test_npz_trajectories_beside_pairs_or_alone(tmp_path):
    from sweep.problems import load_problem

    rng = np.random.default_rng(0)
    pairs = {k: rng.normal(size=(n, 1, 8)) for k, n in [("train_x", 6), ("train_y", 6), ("test_x", 2), ("test_y", 2)]}
    np.savez(tmp_path / "both.npz", **pairs, test_traj=_traj(3, 5, 1))
    both = load_problem("arrays", {"path": str(tmp_path / "both.npz"), "val_fraction": 0})
    assert both.train_traj is None and both.test_traj.shape == (3, 6, 1, 8) and both.test.size == 2
    np.savez(tmp_path / "only.npz", train_traj=_traj(4, 3, 2), val_traj=_traj(2, 7, 3), test_traj=_traj(2, 7, 4))
    only = load_problem("arrays", {"path": str(tmp_path / "only.npz")})
    assert (only.train.size, only.val.size, only.test.size) == (12, 14, 14)  # derived: samples x steps
    np.testing.assert_array_equal(only.val_traj, _traj(2, 7, 3).astype(np.float32))
    np.savez(tmp_path / "half.npz", train_traj=_traj(4, 3, 2))
    with pytest.raises(
        sweep.SpecError, match=r"lacks array\(s\) \['train_x', .*or only trajectories: train_traj and test_traj"
    ):
        load_problem("arrays", {"path": str(tmp_path / "half.npz")})
    np.savez(tmp_path / "obj.npz", **pairs, test_traj=np.array([{"a": 1}], dtype=object))
    with pytest.raises(
        sweep.SpecError, match=r"array 'test_traj' of .* holds Python objects; seed-sweep never unpickles"
    ):
        load_problem("arrays", {"path": str(tmp_path / "obj.npz")})


def test_pairs_beside_training_trajectories_are_held_out_with_them(tmp_path):
    """No validation state among the training trajectories: the pairs of an .npz given beside its
    trajectories go with their trajectory (every consecutive pair), or are refused."""
    from sweep.problems import load_problem

    train, test = _traj(18, 4, 0), _traj(2, 6, 1)
    x, y = train[:, :-1].reshape(-1, 1, 8), train[:, 1:].reshape(-1, 1, 8)
    np.savez(tmp_path / "own.npz", train_x=x, train_y=y, test_x=test[:, 0], test_y=test[:, 1], train_traj=train)
    data = load_problem("arrays", {"path": str(tmp_path / "own.npz")})
    assert data.val_traj.shape == (2, 5, 1, 8) and data.train_traj.shape == (16, 5, 1, 8)
    for split, traj in ((data.train, data.train_traj), (data.val, data.val_traj)):
        np.testing.assert_array_equal(split.x, traj[:, :-1].reshape(-1, 1, 8))
        np.testing.assert_array_equal(split.y, traj[:, 1:].reshape(-1, 1, 8))
    trained = {row.tobytes() for row in data.train_traj.reshape(-1, 1, 8)}
    assert not any(row.tobytes() in trained for row in data.val.x)  # before: 11 of 12 were
    np.savez(
        tmp_path / "other.npz", train_x=x[::2], train_y=y[::2], test_x=test[:, 0], test_y=test[:, 1], train_traj=train
    )
    with pytest.raises(sweep.SpecError, match=r"training pairs beside training trajectories that they are not the"):
        load_problem("arrays", {"path": str(tmp_path / "other.npz")})
    with_val = load_problem("arrays", {"path": str(tmp_path / "other.npz"), "val_fraction": 0})
    assert with_val.val.size == 0 and with_val.train.size == len(x[::2])
    # history > 1 derives every split's pairs from the trajectories: the given ones are not used
    np.savez(
        tmp_path / "both.npz",
        train_x=x[::2],
        train_y=y[::2],
        test_x=test[:, 0],
        test_y=test[:, 1],
        train_traj=train,
        test_traj=test,
    )
    stacked = load_problem("arrays", {"path": str(tmp_path / "both.npz"), "history": 2})
    assert stacked.train_traj.shape == (16, 5, 1, 8) and stacked.train.x.shape == (16 * 3, 2, 8)
    pairs = {"train_x": x, "train_y": y, "test_x": test[:, 0], "test_y": test[:, 1]}
    np.savez(tmp_path / "val.npz", **pairs, val_x=x[:2], val_y=y[:2], train_traj=train, test_traj=test)
    with pytest.raises(sweep.SpecError, match=r"gives validation pairs \(val_x, val_y\) but no val_traj"):
        load_problem("arrays", {"path": str(tmp_path / "val.npz"), "history": 2})  # not dropped in silence
