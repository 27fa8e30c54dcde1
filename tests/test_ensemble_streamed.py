"""Queries over data larger than memory: ``predict`` and ``mean_std`` over array-likes read a
bounded batch at a time (an h5py dataset, a memmap), written into ``out=`` array-likes, and the
ensemble scores over a whole split given as lazy samples and trajectories: the numbers those of
the same arrays in memory, bit for bit, and bad arguments refused before any work."""

from __future__ import annotations

import h5py
import numpy as np
import pyarrow as pa
import pytest
from _blocks import datasets_of, trained_blocks
from hdf5_files import pdebench_tensor
from helpers import tiny_spec

import sweep
from sweep import QueryError
from sweep.planning import make_plan
from sweep.problems import hdf5_split, heat1d, load_problem
from sweep.store import aggregate_blocks

PROBLEM = sweep.Problem("heat1d", num_points=16, num_samples=60, trajectory_steps=5, normalize="zscore")
PLAN = make_plan(tiny_spec(problem=PROBLEM, seeds=3, seeds_per_trial=3))


@pytest.fixture(scope="module")
def ens(tmp_path_factory) -> sweep.Ensemble:
    path = tmp_path_factory.mktemp("streamed") / "ensembles"
    aggregate_blocks(path, trained_blocks(PLAN), plan=PLAN, datasets=datasets_of(PLAN))
    return sweep.load(path)


@pytest.fixture(scope="module")
def split() -> sweep.Dataset:
    """A test split in physical units, larger than the store keeps (its 16 pairs, 4 trajectories)."""
    return heat1d(num_points=16, num_samples=200, trajectory_steps=5, data_seed=1)


class Recorded:
    """An array-like that records the rows of every read and refuses to be read whole."""

    def __init__(self, a: np.ndarray):
        self.a, self.shape, self.dtype, self.rows = a, a.shape, a.dtype, []

    def __getitem__(self, index):
        first = index[0] if isinstance(index, tuple) else index
        assert isinstance(first, slice), f"read with {index!r}, not a slice of rows"
        self.rows.append(len(range(*first.indices(self.shape[0]))))
        return self.a[index]

    def __array__(self, *args, **kwargs):
        raise AssertionError("the whole array-like was read")


def inputs(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, 1, 16)).astype(np.float32)


def test_predict_over_h5py_and_memmap_equals_in_memory(ens, tmp_path):
    x = inputs(50)
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f["x"] = x
    mapped = np.lib.format.open_memmap(tmp_path / "x.npy", "w+", np.float32, x.shape)
    mapped[:] = x
    mapped.flush()
    memmap = np.load(tmp_path / "x.npy", mmap_mode="r")
    with h5py.File(tmp_path / "x.h5") as f:
        for batch_size in (7, 50):
            want = ens.predict(x, batch_size=batch_size)
            np.testing.assert_array_equal(ens.predict(f["x"], batch_size=batch_size), want)
            np.testing.assert_array_equal(ens.predict(memmap, batch_size=batch_size), want)
            mean, std = ens.mean_std(x, batch_size=batch_size)
            lazy = ens.mean_std(f["x"], batch_size=batch_size)
            np.testing.assert_array_equal(lazy[0], mean)
            np.testing.assert_array_equal(lazy[1], std)
    assert want.shape == (3, 50, 1, 16)
    # another batch size: the same numbers up to float32 rounding (XLA may sum a product by its shape)
    np.testing.assert_allclose(ens.predict(x, batch_size=7), ens.predict(x), rtol=1e-6, atol=1e-6)


def test_reads_a_bounded_batch_never_the_whole(ens, tmp_path):
    x = inputs(23)
    recorded = Recorded(x)
    y = ens.predict(recorded, batch_size=5)
    assert recorded.rows == [5, 5, 5, 5, 3]
    np.testing.assert_array_equal(y, ens.predict(x, batch_size=5))
    recorded = Recorded(x)
    ens.mean_std(recorded, batch_size=4)
    assert max(recorded.rows) == 4 and sum(recorded.rows) == 23
    # the default: as many as keep a batch under 64 MiB
    big = np.lib.stride_tricks.as_strided(x[:1], (200_000, 1, 16), (0, 4, 4))  # a large input, no memory
    recorded = Recorded(big)
    config, _, size = ens.checked_stream(recorded, 64, None, "predict")
    assert size == 64 * 2**20 // (16 * (4 + 12 * 3 + 16)) < 200_000  # inputs, 3 members' outputs, moments
    assert not recorded.rows
    # an array already in memory runs whole by default, as before batches: the same program and bits
    assert ens.checked_stream(np.ascontiguousarray(big), 64, None, "predict")[2] == 200_000
    memmap = np.lib.format.open_memmap(str(tmp_path / "big.npy"), "w+", np.float32, big.shape)
    assert ens.checked_stream(memmap, 64, None, "predict")[2] == size  # a file: batches


def test_the_members_parameters_are_read_once_over_all_batches(ens, split, monkeypatch):
    reads = []
    read = sweep.store.Store.read

    def counted(store, config_id, positions):
        reads.append(len(positions))
        return read(store, config_id, positions)

    monkeypatch.setattr(sweep.store.Store, "read", counted)
    x = inputs(23)
    want = ens.predict(x, batch_size=5)
    assert reads == [3]  # one batch: one read of the config's 3 members
    for query in (lambda: ens.predict(Recorded(x), batch_size=5), lambda: ens.mean_std(Recorded(x), batch_size=5)):
        reads.clear()
        query()
        assert reads == [3]  # five batches, the parameters read once
    monkeypatch.setattr("sweep.ensemble._scoring.BLOCK_BYTES", 15 * 3 * 16 * 4)  # blocks of 15 samples
    reads.clear()
    ens.scores("test", samples=split.test)
    assert reads == [3]
    monkeypatch.setattr("sweep.ensemble._predictions.HELD_BYTES", 0)  # parameters too large to hold: per batch
    reads.clear()
    np.testing.assert_array_equal(ens.predict(Recorded(x), batch_size=5), want)
    assert reads == [3] * 5


def test_out_array_likes_receive_the_results(ens, tmp_path):
    x = inputs(30)
    want, (mean, std) = ens.predict(x, batch_size=8), ens.mean_std(x, batch_size=8)
    with h5py.File(tmp_path / "out.h5", "w") as f:
        out = f.create_dataset("y", (3, 30, 1, 16), "f4")
        assert ens.predict(Recorded(x), batch_size=8, out=out) is out
        np.testing.assert_array_equal(out[:], want)
        pair = (f.create_dataset("mean", (30, 1, 16), "f4"), f.create_dataset("std", (30, 1, 16), "f8"))
        assert ens.mean_std(Recorded(x), batch_size=8, out=pair) == pair
        np.testing.assert_array_equal(pair[0][:], mean)
        np.testing.assert_array_equal(pair[1][:], std)
    memmap = np.lib.format.open_memmap(tmp_path / "y.npy", "w+", np.float32, (3, 30, 1, 16))
    ens.predict(x, batch_size=8, out=memmap)
    np.testing.assert_array_equal(memmap, want)


def test_calibrated_std_into_out_equals_in_memory(ens, tmp_path):
    x = inputs(12)
    cal = ens.recalibrate("test")
    mean, std = cal.mean_std(x, calibrated=True)
    with h5py.File(tmp_path / "out.h5", "w") as f:
        pair = (f.create_dataset("mean", (12, 1, 16), "f4"), f.create_dataset("std", (12, 1, 16), "f4"))
        cal.mean_std(f.create_dataset("x", data=x), calibrated=True, out=pair)
        np.testing.assert_array_equal(pair[0][:], mean)
        np.testing.assert_array_equal(pair[1][:], std)


def test_bad_arguments_are_refused_before_any_work(ens, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("work started")

    monkeypatch.setattr(type(ens), "outputs", never)
    x = Recorded(inputs(10))
    cases = [
        (lambda: ens.predict(x, batch_size=0), r"predict\(batch_size=0\): must be an integer >= 1"),
        (lambda: ens.mean_std(x, batch_size=2.5), r"mean_std\(batch_size=2.5\): must be an integer >= 1"),
        (
            lambda: ens.predict(Recorded(np.zeros((4, 2, 16), np.float32))),
            r"x has shape \(4, 2, 16\).*\(batch >= 1, 1, 16\)",
        ),
        (
            lambda: ens.predict(x, out=np.zeros((3, 9, 1, 16), np.float32)),
            r"out has shape \(3, 9, 1, 16\).*\(3, 10, 1, 16\)",
        ),
        (lambda: ens.predict(x, out=np.zeros((3, 10, 1, 16), np.float16)), r"out has shape .*float16.*dtype float32"),
        (lambda: ens.predict(x, out=np.zeros((3, 10, 1, 16), np.int32)), r"dtype float32 \(or a wider float\)"),
        (lambda: ens.mean_std(x, out=np.zeros((10, 1, 16))), r"mean_std\(out=ndarray\): give a tuple \(mean, std\)"),
        (lambda: ens.mean_std(x, out=(np.zeros((10, 1, 16)), [0.0])), r"out\[1\] has list"),
    ]
    for call, message in cases:
        with pytest.raises(QueryError, match=message):
            call()
    assert not x.rows


def scores_of(table: pa.Table) -> list[dict]:
    return [{k: v for k, v in row.items()} for row in table.to_pylist()]


def test_scores_over_a_lazy_whole_split_equal_in_memory(ens, split, tmp_path):
    (x, y), traj = split.test, split.test_traj
    assert len(x) > 16 and len(traj) > 4  # more than the store keeps
    want = ens.scores("test", samples=(x, y), trajectories=traj)
    with h5py.File(tmp_path / "test.h5", "w") as f:
        f["x"], f["y"], f["traj"] = x, y, traj
    with h5py.File(tmp_path / "test.h5") as f:
        got = ens.scores("test", samples=(f["x"], f["y"]), trajectories=f["traj"])
    assert scores_of(got) == scores_of(want)
    kinds = got.column("kind").to_pylist()
    assert kinds.count("one_step") == 1 and kinds.count("rollout") == 5 and "rollout_gmean" in kinds
    assert got.column("points").to_pylist()[0] == x.size  # every sample of the split, not the 16 kept
    assert scores_of(got) != scores_of(ens.scores("test"))
    # only trajectories: only rollout rows
    only = ens.scores("val", trajectories=traj)
    assert set(only.column("kind").to_pylist()) == {"rollout", "rollout_gmean"}
    assert set(only.column("split").to_pylist()) == {"val"}


def test_scores_read_blocks_and_equal_the_arrays_in_memory(ens, split, monkeypatch):
    (x, y), traj = split.test, split.test_traj
    whole = ens.scores("test", samples=(x, y), trajectories=traj)  # one block
    # 15 samples of 3 members (16 float32 each) a block; 3 trajectories of 5 steps
    monkeypatch.setattr("sweep.ensemble._scoring.BLOCK_BYTES", 15 * 3 * 16 * 4)
    want = ens.scores("test", samples=(x, y), trajectories=traj)
    lazy = [Recorded(a) for a in (x, y, traj)]
    got = ens.scores("test", samples=(lazy[0], lazy[1]), trajectories=lazy[2])
    assert scores_of(got) == scores_of(want)
    assert max(lazy[0].rows) == 15 and max(lazy[1].rows) == 15 and sum(lazy[0].rows) == len(x)
    assert max(lazy[2].rows) <= 3 and len(lazy[2].rows) > 2
    for a, b in zip(scores_of(got), scores_of(whole), strict=True):  # float32 sums in another order
        assert a["kind"] == b["kind"] and a["points"] == b["points"]
        assert a["rank_histogram"] == b["rank_histogram"]
        for k in ("crps", "mae", "rmse", "spread", "coverage_90"):
            assert a[k] == pytest.approx(b[k], rel=1e-5)


def test_bad_split_data_refused_before_any_work(ens, split, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("work started")

    monkeypatch.setattr(type(ens), "outputs", never)
    monkeypatch.setattr(type(ens), "rollout_states", never)
    (x, y), traj = split.test, split.test_traj
    cases = [
        (dict(samples=x), r"scores\(samples=ndarray\): give a pair \(x, y\)"),
        (dict(samples=(x, y[:-1])), r"x has shape \(\d+, 1, 16\) but y has shape \(\d+, 1, 16\)"),
        (
            dict(trajectories=traj[:, :, :, :8]),
            r"scores\(trajectories=...\): shape .*\(trajectories >= 1, states >= 2, 1, 16\)",
        ),
        (dict(trajectories=traj[:, :1]), r"states >= 2"),
    ]
    for kwargs, message in cases:
        with pytest.raises(QueryError, match=message):
            ens.scores("test", **kwargs)


@pytest.mark.parametrize("history", [1, 2])
def test_hdf5_split_views_are_the_problem_in_physical_units(tmp_path, history):
    pdebench_tensor(tmp_path / "a.hdf5", samples=20, time=6, x=16)
    problem = sweep.Problem("hdf5", path=str(tmp_path / "a.hdf5"), normalize="zscore", history=history)
    data = load_problem("hdf5", {**problem.options, "normalize": "none"})
    for split, (x, y), traj in (("test", data.test, data.test_traj), ("val", data.val, data.val_traj)):
        view = hdf5_split(problem, split)
        assert traj is not None
        assert view.x.shape == x.shape and view.y.shape == y.shape and view.trajectories.shape == traj.shape
        np.testing.assert_array_equal(view.x[:], x)
        np.testing.assert_array_equal(view.y[3:11], y[3:11])
        np.testing.assert_array_equal(view.x[5:6], x[5:6])
        np.testing.assert_array_equal(view.trajectories[1:], traj[1:])
        np.testing.assert_array_equal(view.x[2], x[2])
    with pytest.raises(sweep.SpecError, match=r"hdf5_split\(split='tset'\): choose \"train\", \"val\" or \"test\""):
        hdf5_split(problem, "tset")
    with pytest.raises(sweep.SpecError, match=r"give a Problem\(\"hdf5\", path=...\) or the path"):
        hdf5_split(sweep.Problem("heat1d"), "test")


def test_scores_and_predict_over_an_hdf5_split_view(ens, tmp_path):
    pdebench_tensor(tmp_path / "a.hdf5", samples=40, time=6, x=16)
    view = hdf5_split(str(tmp_path / "a.hdf5"), "test", test_fraction=0.5)
    data = load_problem("hdf5", {"path": str(tmp_path / "a.hdf5"), "normalize": "none", "test_fraction": 0.5})
    (x, y), traj = data.test, data.test_traj
    want = ens.scores("test", samples=(x, y), trajectories=traj)
    got = ens.scores("test", samples=(view.x, view.y), trajectories=view.trajectories)
    assert scores_of(got) == scores_of(want)
    np.testing.assert_array_equal(ens.predict(view.x, batch_size=9), ens.predict(x, batch_size=9))


def test_blend_streams_like_its_members(ens, tmp_path):
    blend = ens.select_greedy(3, split="test")
    x = inputs(21)
    recorded = Recorded(x)
    want = blend.predict(x, batch_size=4)
    np.testing.assert_array_equal(blend.predict(recorded, batch_size=4), want)
    assert max(recorded.rows) == 4
    np.testing.assert_allclose(want, blend.predict(x), rtol=1e-6, atol=1e-6)
    mean, std = blend.mean_std(x, batch_size=4)
    with h5py.File(tmp_path / "out.h5", "w") as f:
        pair = (f.create_dataset("mean", (21, 1, 16), "f4"), f.create_dataset("std", (21, 1, 16), "f4"))
        blend.mean_std(Recorded(x), batch_size=4, out=pair)
        np.testing.assert_array_equal(pair[0][:], mean)
        np.testing.assert_array_equal(pair[1][:], std)
