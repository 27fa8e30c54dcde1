"""Problems: heat1d against an independent BTCS step, user arrays, import paths, and
their train / validation / test splits: sizes, disjointness, given or carved."""

import warnings

import jax
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.linalg
from helpers import tiny_spec

import sweep
from sweep.problems import heat1d, load_problem


def test_heat1d_matches_an_independent_btcs_step():
    n, extent, dt, nu = 24, 3.0, 0.1, 0.1
    data = heat1d(num_points=n, num_samples=20, dt=dt, diffusivity=nu, domain_extent=extent, data_seed=3)
    x = np.concatenate([split.x for split in data.splits])[:, 0].astype(np.float64)
    y = np.concatenate([split.y for split in data.splits])[:, 0].astype(np.float64)
    dx = extent / (n + 1)  # interior points only: both Dirichlet points excluded
    r = nu * dt / dx**2
    banded = np.zeros((3, n))
    banded[0, 1:], banded[1], banded[2, :-1] = -r, 1 + 2 * r, -r
    expected = scipy.linalg.solve_banded((1, 1), banded, x.T).T
    np.testing.assert_allclose(y, expected, atol=2e-5)
    # random box functions: values 0/1, jumps inside [0.2, 0.8] of the domain
    assert set(np.unique(x)) <= {0.0, 1.0}
    grid = np.linspace(0, extent, n + 2)[1:-1]
    for row in x:
        assert row.any() and grid[row > 0].min() >= 0.2 * extent - dx and grid[row > 0].max() <= 0.8 * extent + dx


def test_heat1d_with_averaged_box_edges_has_splits_of_distinct_inputs():
    """At grid edges (the reference's) the test inputs repeat training inputs; averaged edges
    draw the same boxes with each point's share of its cell inside, so no two samples are alike."""
    n, extent = 48, 3.0
    grid, averaged = heat1d(), heat1d(box_edges="averaged")
    seen = set(_rows(grid.train.x))
    assert sum(row in seen for row in _rows(grid.test.x)) == 197  # the case: the reference's splits share inputs
    seen = set(_rows(averaged.train.x))
    assert len(seen) == averaged.train.size and not seen & set(_rows(averaged.val.x, averaged.test.x))
    x = np.concatenate([split.x for split in averaged.splits])[:, 0]
    assert x.min() >= 0 and x.max() <= 1 and ((x > 0) & (x < 1)).sum(1).min() >= 1  # an edge between points
    # the same boxes: a point inside covers at least half its cell, a cell covered whole has its
    # point inside, and the mass differs by at most a cell per edge
    same = np.concatenate([split.x for split in grid.splits])[:, 0]
    assert (x[same == 1] >= 0.5).all() and (same[x == 1] == 1).all()
    np.testing.assert_array_less(np.abs(x.sum(1) - same.sum(1)), 2.0 + 1e-5)
    dx = extent / (n + 1)
    # the target is still one BTCS step of the input
    r = 0.1 * 0.1 / dx**2
    banded = np.zeros((3, n))
    banded[0, 1:], banded[1], banded[2, :-1] = -r, 1 + 2 * r, -r
    y = np.concatenate([split.y for split in averaged.splits])[:, 0]
    np.testing.assert_allclose(y, scipy.linalg.solve_banded((1, 1), banded, x.T.astype(np.float64)).T, atol=2e-5)
    with pytest.raises(sweep.SpecError, match=r"`problem.box_edges`: got 'cells'; choose one of 'grid', 'averaged'"):
        sweep.Problem("heat1d", box_edges="cells")


def _rows(*arrays) -> list[bytes]:
    return [row.tobytes() for a in arrays for row in np.asarray(a, np.float32)]


def _assert_disjoint_cover(data, train_x, test_x):
    """``data``'s train and val rows split the given training rows (each used exactly once: equal as
    multisets, so no sample is in both), the training rows keep their order, the test rows are the given ones."""
    train, val = _rows(data.train.x), _rows(data.val.x)
    assert sorted(train + val) == sorted(_rows(train_x)) and _rows(data.test.x) == _rows(test_x)
    given = iter(_rows(train_x))
    assert all(row in given for row in train)  # a subsequence: the training samples keep their order


def test_heat1d_splits_match_the_reference_and_carve_validation_from_training():
    reference = heat1d(val_fraction=0)  # the reference example's data: 800 training, 200 test samples
    assert reference.train.x.shape == (800, 1, 48) and reference.test.x.shape == (200, 1, 48)
    assert reference.val.x.shape == (0, 1, 48) and reference.train.x.dtype == np.float32
    data = heat1d()  # default val_fraction 0.1 of all samples, from the training part
    assert (data.train.size, data.val.size, data.test.size) == (700, 100, 200)
    _assert_disjoint_cover(data, reference.train.x, reference.test.x)
    other = heat1d(data_seed=1)
    assert heat1d().val.x.tobytes() == data.val.x.tobytes() and other.val.size == 100
    assert [s.size for s in heat1d(num_samples=10, test_fraction=0.3, val_fraction=0.2).splits] == [5, 2, 3]


def test_heat1d_reproduces_reference_initial_states():
    data = heat1d(num_samples=10)
    grid = np.linspace(0, 3.0, 50)[1:-1]
    key = jax.random.split(jax.random.PRNGKey(0), 10)[0]
    k1, k2 = jax.random.split(key)
    lo = float(jax.random.uniform(k1, (), minval=0.6, maxval=1.2))
    hi = float(jax.random.uniform(k2, (), minval=1.8, maxval=2.4))
    np.testing.assert_array_equal(data.train_x[0, 0], ((grid >= lo) & (grid <= hi)).astype(np.float32))


def test_data_seed_is_separate_from_member_seeds():
    a, b = heat1d(num_samples=10, data_seed=0), heat1d(num_samples=10, data_seed=1)
    assert not np.array_equal(a.train_x, b.train_x)
    assert np.array_equal(a.train_x, heat1d(num_samples=10, data_seed=0).train_x)


def _arrays(n=12, m=4, c=1, s=8, o=1):
    rng = np.random.default_rng(0)
    return {
        "train_x": rng.normal(size=(n, c, s)),
        "train_y": rng.normal(size=(n, o, s)),
        "test_x": rng.normal(size=(m, c, s)),
        "test_y": rng.normal(size=(m, o, s)),
    }


def test_npz_arrays_with_validation_carved_or_given(tmp_path):
    a = _arrays(n=36)
    np.savez(tmp_path / "d.npz", **a)
    data = load_problem("arrays", {"path": str(tmp_path / "d.npz")})
    assert (data.train.size, data.val.size, data.test.size) == (32, 4, 4)  # 0.1 of 40 samples
    assert data.test_y.shape == (4, 1, 8)
    _assert_disjoint_cover(data, a["train_x"], a["test_x"])
    again = load_problem("arrays", {"path": str(tmp_path / "d.npz"), "data_seed": 0})
    reseeded = load_problem("arrays", {"path": str(tmp_path / "d.npz"), "data_seed": 5, "val_fraction": 0.25})
    assert again.val.x.tobytes() == data.val.x.tobytes() and reseeded.val.size == 10
    none = load_problem("arrays", {"path": str(tmp_path / "d.npz"), "val_fraction": 0})
    assert none.val.size == 0 and none.train.x.tobytes() == a["train_x"].astype(np.float32).tobytes()
    rng = np.random.default_rng(1)
    np.savez(tmp_path / "v.npz", **a, val_x=rng.normal(size=(3, 1, 8)), val_y=rng.normal(size=(3, 1, 8)))
    given = load_problem("arrays", {"path": str(tmp_path / "v.npz")})
    assert (given.train.size, given.val.size) == (36, 3)
    with pytest.raises(sweep.SpecError, match=r"`problem.val_fraction`: got 0.2, but .* has its own validation split"):
        load_problem("arrays", {"path": str(tmp_path / "v.npz"), "val_fraction": 0.2})
    np.savez(tmp_path / "half.npz", **a, val_x=rng.normal(size=(3, 1, 8)))
    with pytest.raises(sweep.SpecError, match=r"has val_x but not \{'val_y'\}; give both val_x and val_y, or neither"):
        load_problem("arrays", {"path": str(tmp_path / "half.npz")})


def test_npz_missing_key_and_bad_shapes(tmp_path):
    arrays = _arrays()
    np.savez(tmp_path / "missing.npz", **{k: v for k, v in arrays.items() if k != "test_y"})
    with pytest.raises(sweep.SpecError, match=r"lacks array\(s\) \['test_y'\]"):
        load_problem("arrays", {"path": str(tmp_path / "missing.npz")})
    arrays["train_y"] = arrays["train_y"][:5]
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(sweep.SpecError, match="different sample counts"):
        load_problem("arrays", {"path": str(tmp_path / "bad.npz")})
    with pytest.raises(sweep.SpecError, match="does not exist"):
        load_problem("arrays", {"path": str(tmp_path / "nope.npz")})
    good = _arrays()
    np.savez(tmp_path / "typo.npz", **{("tset_x" if k == "test_x" else k): v for k, v in good.items()})
    with pytest.raises(
        sweep.SpecError, match=r"lacks array\(s\) \['test_x'\]; it holds 'tset_x' \(did you mean 'test_x'\?\); need"
    ):
        load_problem("arrays", {"path": str(tmp_path / "typo.npz")})
    np.savez(tmp_path / "val_typo.npz", **good, vla_x=good["test_x"], coordinates=np.arange(3), test_idx=np.arange(2))
    with pytest.warns(UserWarning, match=r"array 'vla_x' \(did you mean 'val_x'\?\) left out; the arrays read"):
        load_problem("arrays", {"path": str(tmp_path / "val_typo.npz")})  # test_idx: near test_x, which it holds
    np.savez(tmp_path / "extra.npz", **good, test_idx=np.arange(2), coords=np.arange(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # arrays beside the ones read, none of them a misspelt missing one
        load_problem("arrays", {"path": str(tmp_path / "extra.npz")})


def _parquet(path, a, splits=("train", "test")):
    rows = {"x": [], "y": [], "split": []}
    for split in splits:
        for x, y in zip(a[f"{split}_x"], a[f"{split}_y"]):
            rows["x"].append(x.ravel().tolist())
            rows["y"].append(y.ravel().tolist())
            rows["split"].append(split)
    pq.write_table(pa.table(rows), path)


def test_parquet_arrays_with_validation_carved_or_given(tmp_path):
    a = _arrays()
    _parquet(tmp_path / "d.parquet", a)
    data = load_problem("arrays", {"path": str(tmp_path / "d.parquet"), "shape": [1, 8], "val_fraction": 0})
    np.testing.assert_allclose(data.train_x, a["train_x"].astype(np.float32))
    np.testing.assert_allclose(data.test_y, a["test_y"].astype(np.float32))
    carved = load_problem("arrays", {"path": str(tmp_path / "d.parquet"), "shape": [1, 8]})
    assert (carved.train.size, carved.val.size, carved.test.size) == (10, 2, 4)
    _assert_disjoint_cover(carved, a["train_x"], a["test_x"])
    with pytest.raises(sweep.SpecError, match="`problem.shape`"):
        load_problem("arrays", {"path": str(tmp_path / "d.parquet"), "shape": [2, 8]})
    a |= {"val_x": a["test_x"][:3] + 1, "val_y": a["test_y"][:3]}
    _parquet(tmp_path / "v.parquet", a, ("train", "val", "test"))
    given = load_problem("arrays", {"path": str(tmp_path / "v.parquet"), "shape": [1, 8]})
    assert (given.train.size, given.val.size, given.test.size) == (12, 3, 4)
    np.testing.assert_allclose(given.val.x, a["val_x"].astype(np.float32))
    a["val_x"] = a["val_x"][:0]
    pq.write_table(pa.table({"x": [[0.0] * 8], "y": [[0.0] * 8], "split": ["validation"]}), tmp_path / "bad.parquet")
    with pytest.raises(sweep.SpecError, match=r"split value\(s\) \['validation'\]; allowed: train, val, test"):
        load_problem("arrays", {"path": str(tmp_path / "bad.parquet"), "shape": [1, 8]})


def make_data(n=10):
    """A user loader found by import path in the test below."""
    a = _arrays(n=n)
    return a["train_x"], a["train_y"], a["test_x"], a["test_y"]


def make_splits(n=10, data_seed=0):
    """A user loader that returns its own validation split (and takes the data seed)."""
    a = _arrays(n=n)
    rng = np.random.default_rng(data_seed)
    return {
        "train": (a["train_x"], a["train_y"]),
        "val": (rng.normal(size=(2, 1, 8)), rng.normal(size=(2, 1, 8))),
        "test": (a["test_x"], a["test_y"]),
    }


def test_import_path_problem_trains():
    spec = tiny_spec(
        problem=sweep.Problem("test_problems:make_data", n=16),
        training=sweep.Training(epochs=1, batch_size=4, report_every=1),
    )
    model, history = sweep.train_block(spec, [0])
    assert history.test_loss.shape == (1, 1) and np.isfinite(history.test_loss).all()
    assert history.val_loss.shape == (1, 1) and np.isfinite(history.val_loss).all()


def test_import_path_problem_splits_four_arrays_or_a_mapping():
    data = load_problem("test_problems:make_data", {"n": 36})  # data_seed is not passed on: make_data does not take it
    assert (data.train.size, data.val.size, data.test.size) == (32, 4, 4)
    _assert_disjoint_cover(data, _arrays(n=36)["train_x"], _arrays(n=36)["test_x"])
    assert load_problem("test_problems:make_data", {"n": 36, "data_seed": 3}).val.x.tobytes() != data.val.x.tobytes()
    assert load_problem("test_problems:make_data", {"n": 36, "val_fraction": 0}).val.size == 0
    given = load_problem("test_problems:make_splits", {"data_seed": 4})  # passed on: make_splits takes it
    np.testing.assert_allclose(given.val.x, np.random.default_rng(4).normal(size=(2, 1, 8)).astype(np.float32))
    assert (given.train.size, given.val.size, given.test.size) == (10, 2, 4)


@pytest.mark.parametrize(
    "name, options, message",
    [
        (
            "heat1d",
            {"val_fraction": 1.0},
            r"`problem.val_fraction`: got 1.0; must be a number in \[0, 1\) \(0: no validation set\)",
        ),
        ("heat1d", {"val_fraction": -0.1}, r"`problem.val_fraction`: got -0.1"),
        (
            "heat1d",
            {"val_fraction": 0.5, "test_fraction": 0.5},
            r"`problem.val_fraction`: got 0.5 with test_fraction 0.5; "
            r"together they must leave training samples",
        ),
        ("arrays", {"path": "x.npz", "val_fraction": "a lot"}, r"`problem.val_fraction`: got 'a lot'"),
        ("arrays", {"path": "x.npz", "data_seed": -1}, r"`problem.data_seed`: got -1; must be a non-negative integer"),
    ],
)
def test_bad_split_options_are_spec_errors(name, options, message):
    with pytest.raises(sweep.SpecError, match=message):
        sweep.Problem(name, **options)


def test_a_validation_split_must_leave_training_samples():
    with pytest.raises(
        sweep.SpecError,
        match=r"`problem.val_fraction`: got 0.9: 18 validation samples would leave none of "
        r"the 16 training samples",
    ):
        load_problem("test_problems:make_data", {"n": 16, "val_fraction": 0.9})


def test_import_path_errors():
    with pytest.raises(sweep.SpecError, match="cannot import module 'no_such_mod'"):
        load_problem("no_such_mod:f", {})
    with pytest.raises(sweep.SpecError, match="has no attribute 'nope'"):
        load_problem("test_problems:nope", {})
