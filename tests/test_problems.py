"""Problems: heat1d against an independent BTCS step, user arrays, import paths (SPEC §3)."""

import jax
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.linalg
from conftest import tiny_spec

import sweep
from sweep.problems import heat1d, load_problem


def test_heat1d_matches_an_independent_btcs_step():
    n, extent, dt, nu = 24, 3.0, 0.1, 0.1
    data = heat1d(num_points=n, num_samples=20, dt=dt, diffusivity=nu, domain_extent=extent, data_seed=3)
    x = np.concatenate([data.train_x, data.test_x])[:, 0].astype(np.float64)
    y = np.concatenate([data.train_y, data.test_y])[:, 0].astype(np.float64)
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


def test_heat1d_split_and_shapes_match_reference():
    data = heat1d()
    assert data.train_x.shape == (800, 1, 48) and data.test_x.shape == (200, 1, 48)
    assert data.train_x.dtype == np.float32


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
    return {"train_x": rng.normal(size=(n, c, s)), "train_y": rng.normal(size=(n, o, s)),
            "test_x": rng.normal(size=(m, c, s)), "test_y": rng.normal(size=(m, o, s))}


def test_npz_arrays(tmp_path):
    np.savez(tmp_path / "d.npz", **_arrays())
    data = load_problem("arrays", {"path": str(tmp_path / "d.npz")})
    assert data.train_x.shape == (12, 1, 8) and data.test_y.shape == (4, 1, 8)


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


def test_parquet_arrays(tmp_path):
    a = _arrays()
    rows = {"x": [], "y": [], "split": []}
    for split in ("train", "test"):
        for x, y in zip(a[f"{split}_x"], a[f"{split}_y"]):
            rows["x"].append(x.ravel().tolist())
            rows["y"].append(y.ravel().tolist())
            rows["split"].append(split)
    pq.write_table(pa.table(rows), tmp_path / "d.parquet")
    data = load_problem("arrays", {"path": str(tmp_path / "d.parquet"), "shape": [1, 8]})
    np.testing.assert_allclose(data.train_x, a["train_x"].astype(np.float32))
    np.testing.assert_allclose(data.test_y, a["test_y"].astype(np.float32))
    with pytest.raises(sweep.SpecError, match="`problem.shape`"):
        load_problem("arrays", {"path": str(tmp_path / "d.parquet"), "shape": [2, 8]})


def make_data(n=10):
    """A user loader found by import path in the test below."""
    a = _arrays(n=n)
    return a["train_x"], a["train_y"], a["test_x"], a["test_y"]


def test_import_path_problem_trains():
    spec = tiny_spec(problem=sweep.Problem("test_problems:make_data", n=16),
                     training=sweep.Training(epochs=1, batch_size=4, report_every=1))
    model, history = sweep.train_block(spec, [0])
    assert history.test_loss.shape == (1, 1) and np.isfinite(history.test_loss).all()


def test_import_path_errors():
    with pytest.raises(sweep.SpecError, match="cannot import module 'no_such_mod'"):
        load_problem("no_such_mod:f", {})
    with pytest.raises(sweep.SpecError, match="has no attribute 'nope'"):
        load_problem("test_problems:nope", {})
