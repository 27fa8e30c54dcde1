"""Reference test trajectories kept with the samples (figures never regenerate data): written by
the sweep, copied into the store, checksummed and verified like every file; stores without
them still load and say so when asked."""

from __future__ import annotations

import numpy as np
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from _blocks import TRAJ, datasets_of, trained_blocks, write_sweep
from helpers import tiny_spec

import sweep
from sweep import QueryError, StoreError
from sweep.planning import make_plan
from sweep.store import Store, aggregate_blocks, write_samples

PAIRS = make_plan(tiny_spec(seeds=2))  # a problem without trajectories


def test_the_first_test_trajectories_are_stored_verified_and_read_back(tmp_path):
    root = write_sweep(tmp_path / "sweep", TRAJ, trained_blocks(TRAJ))
    assert (root / "trajectories.parquet").is_file()
    sweep.aggregate(root, progress=False)
    data = next(iter(datasets_of(TRAJ).values()))
    assert data.test_traj.shape[0] > 4  # more than the store keeps
    store = Store.open(root)
    assert "trajectories.parquet" in store.manifest["files"]
    store.verify()
    for depth in (1, 2):  # both configs share the problem
        states = sweep.load(root).where(depth=depth).trajectories()
        assert states.shape == (4, 6, 1, 16) and states.dtype == np.float32
        np.testing.assert_array_equal(states, data.test_traj[:4])
    x, _ = sweep.load(root).where(depth=1).samples()
    np.testing.assert_array_equal(x, data.test_x[:16])  # the samples are unchanged beside them
    first = (root / "ensembles" / "trajectories.parquet").read_bytes()
    sweep.aggregate(root, progress=False)  # aggregating twice gives the same file
    assert (root / "ensembles" / "trajectories.parquet").read_bytes() == first


def test_in_memory_aggregation_keeps_trajectories_too(tmp_path):
    datasets = datasets_of(TRAJ)
    aggregate_blocks(tmp_path / "s", trained_blocks(TRAJ), plan=TRAJ, datasets=datasets)
    np.testing.assert_array_equal(
        sweep.load(tmp_path / "s").where(depth=1).trajectories(), next(iter(datasets.values())).test_traj[:4]
    )


def test_a_store_without_trajectories_loads_and_says_why_there_are_none(tmp_path):
    root = write_sweep(tmp_path / "sweep", PAIRS, trained_blocks(PAIRS))
    assert not (root / "trajectories.parquet").exists()  # no problem has any: no file
    sweep.aggregate(root, progress=False)
    store = Store.open(root)
    assert "trajectories.parquet" not in store.manifest["files"]
    assert store.trajectories(PAIRS.config_ids[0]) is None
    store.verify()
    ens = sweep.load(root)
    assert ens.samples()[0].shape == (12, 1, 16)  # every test sample of 60 (test_fraction 0.2)
    with pytest.raises(
        QueryError,
        match=r"trajectories\(\): the store holds no test trajectories for config .*"
        r"heat1d without trajectory_steps",
    ):
        ens.trajectories()


def test_writing_samples_again_replaces_the_rows_of_the_problems_given_and_keeps_the_others(tmp_path):
    fs, root = pafs.LocalFileSystem(), tmp_path / "sweep"
    root.mkdir()
    with_traj, without = datasets_of(TRAJ), datasets_of(PAIRS)
    write_samples(fs, str(root), with_traj)
    write_samples(fs, str(root), without)  # another problem, without trajectories: the first one's stay
    table = pq.read_table(root / "trajectories.parquet")
    assert set(table["problem_id"].to_pylist()) == set(with_traj) and table.num_rows == 4
    assert set(pq.read_table(root / "samples.parquet")["problem_id"].to_pylist()) == set(with_traj) | set(without)
    pid = next(iter(with_traj))
    stripped = {pid: with_traj[pid]._replace(train_traj=None, val_traj=None, test_traj=None)}
    write_samples(fs, str(root), stripped)  # the same problem now without trajectories: its old ones go
    assert pq.read_table(root / "trajectories.parquet").num_rows == 0


def test_an_altered_trajectories_file_is_refused(tmp_path):
    root = write_sweep(tmp_path / "sweep", TRAJ, trained_blocks(TRAJ))
    sweep.aggregate(root, progress=False)
    stored = next((root / "ensembles").resolve().glob("trajectories.parquet"))
    table = pq.read_table(stored)
    states = table["states"].to_pylist()
    states[0][3] += 1.0
    stored.unlink()
    pq.write_table(table.set_column(2, "states", [states]).cast(table.schema), stored)
    with pytest.raises(StoreError, match="trajectories.parquet"):
        sweep.load(root).where(depth=1).trajectories()
    with pytest.raises(StoreError, match="trajectories.parquet"):
        Store.open(root).verify()


def test_rollout_and_trajectories_line_up_after_the_documented_swapaxes(tmp_path):
    datasets = datasets_of(TRAJ)
    aggregate_blocks(tmp_path / "s", trained_blocks(TRAJ), plan=TRAJ, datasets=datasets)
    sub = sweep.load(tmp_path / "s").where(depth=1)
    traj = sub.trajectories()  # [trajectories, T + 1, ...]
    states = sub.rollout(traj[:, 0], traj.shape[1] - 1)  # [members, T + 1, trajectories, ...]
    assert states.shape[1:] == traj.swapaxes(0, 1).shape
    np.testing.assert_array_equal(states[:, 0], np.broadcast_to(traj.swapaxes(0, 1)[0], states[:, 0].shape))
    np.testing.assert_allclose(states[:, 1], sub.predict(traj[:, 0]), rtol=1e-5, atol=1e-6)  # step t: a batch
    for method in (sweep.Ensemble.trajectories, sweep.Ensemble.rollout):
        assert "swapaxes(0, 1)" in method.__doc__ and "Axis order" in method.__doc__
