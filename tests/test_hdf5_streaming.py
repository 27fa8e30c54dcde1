"""A trial of ``Problem("hdf5")`` holds its validation and test splits, not its training split:
the trainer reads the training split from the file, whole where it fits the data budget, a
window at a time in the reader thread where it is streamed; bit for bit the problem's data."""

from __future__ import annotations

import dataclasses
import threading

import h5py
import numpy as np
import pytest
from hdf5_files import pdebench_tensor
from helpers import (
    assert_failed_once_then_resumed_equals_uninterrupted,
    assert_killed_inside_an_epoch_then_resumed_equals_uninterrupted,
    assert_same_member,
    store_files,
    tiny_spec,
    trial_results,
)

import sweep
from sweep import training
from sweep.problems import outline_problem, outlined

# 24 training trajectories of 6 states (history 2: 4 pairs of 192 bytes each, 96 pairs) beside
# 4.5 KiB of validation and test pairs: 10000 bytes stream them in 7 windows an epoch
STREAMED = sweep.Training(epochs=2, batch_size=8, report_every=1, data_memory=10000)
LOCAL = sweep.RunOptions(executor="local", progress="off")


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    path = tmp_path_factory.mktemp("h5") / "1D_Advection.hdf5"
    pdebench_tensor(path, samples=30, time=6, x=16)
    return tiny_spec(problem=sweep.Problem("hdf5", path=str(path), history=2), training=STREAMED)


def trial_data(spec):
    """What a trial of ``spec`` holds (:meth:`sweep.problems.ProblemData.load`)."""
    return outline_problem("hdf5", dict(spec.problem.options), 16, 4).data.load()


@pytest.fixture(scope="module")
def in_memory(spec):
    data = training.load_data(spec)  # the whole problem, as hdf5_problem reads it
    return data, sweep.train(spec, 5, data=data)


def test_a_trial_holds_validation_and_test_but_not_the_training_split(spec, in_memory):
    data, trial = in_memory[0], trial_data(spec)
    assert outlined(trial.train.x) and outlined(trial.train.y) and outlined(trial.train_traj)
    assert trial.train.x.shape == data.train.x.shape  # sized and checked at its full shape
    for split in ("val", "test"):
        for held, whole in zip(getattr(trial, split), getattr(data, split)):
            np.testing.assert_array_equal(held, whole)


def test_a_streamed_trial_reads_its_windows_from_the_file_bit_for_bit_whatever_the_block(spec, in_memory, monkeypatch):
    read = []  # (thread, trajectories) of every read of the field
    getitem = h5py.Dataset.__getitem__

    def counted(self, selection, *args, **kwargs):
        if self.name == "/tensor" and isinstance(selection, tuple) and isinstance(selection[0], slice):
            read.append((threading.current_thread().name, selection[0].stop - selection[0].start))
        return getitem(self, selection, *args, **kwargs)

    trial = trial_data(spec)
    block, _ = training.init_block(spec, [0, 5, 7], data=trial)
    assert block.stream is not None and block.stream.plan.num_windows == 7
    monkeypatch.setattr(h5py.Dataset, "__getitem__", counted)
    model, history = sweep.train_block(spec, [0, 5, 7], data=trial)
    assert_same_member(model, history, 1, *in_memory[1])  # streamed from memory, alone
    assert read and all(thread.startswith("sweep-reader") for thread, _ in read)
    assert sum(n for _, n in read) >= 2 * 24  # every training trajectory, every epoch
    assert max(n for _, n in read) <= 2  # a shard of pairs at a time, never the split


def test_a_trial_whose_data_fit_reads_the_training_split_whole_and_trains_as_in_memory(spec, in_memory):
    roomy = dataclasses.replace(spec, training=dataclasses.replace(STREAMED, data_memory=None))
    data, trial = in_memory[0], trial_data(spec)
    block, _ = training.init_block(roomy, [5], data=trial)
    assert block.stream is None
    np.testing.assert_array_equal(np.asarray(block.data.train.x), data.train.x)
    np.testing.assert_array_equal(np.asarray(block.data.train.y), data.train.y)


def test_a_streamed_file_run_killed_after_an_epoch_and_resumed_equals_an_uninterrupted_run(spec, tmp_path):
    assert_failed_once_then_resumed_equals_uninterrupted(spec, tmp_path)


def test_a_streamed_file_run_killed_inside_an_epoch_and_resumed_equals_an_uninterrupted_run(
    spec, tmp_path, monkeypatch
):
    assert_killed_inside_an_epoch_then_resumed_equals_uninterrupted(spec, tmp_path, monkeypatch, at=(1, 4))


@pytest.mark.slow  # unrolled windows compile apart (~1 min on a shared CPU)
def test_streamed_trajectories_from_the_file_equal_those_from_memory(spec):
    unrolled = dataclasses.replace(
        spec,
        problem=sweep.Problem("hdf5", path=spec.problem.options["path"]),
        training=dataclasses.replace(STREAMED, unroll=2, data_memory=8000),
    )
    trial = trial_data(unrolled)
    block, _ = training.init_block(unrolled, [5], data=trial)
    assert block.stream is not None and block.stream.plan.item_bytes == 6 * 64
    alone = sweep.train(unrolled, 5, data=training.load_data(unrolled))
    model, history = sweep.train_block(unrolled, [0, 5], data=trial)
    assert_same_member(model, history, 1, *alone)


@pytest.mark.slow  # a Tune run of two trials on the session's Ray (~100 s on a shared 2-core CPU)
def test_streamed_file_trials_on_tune_store_the_members_of_the_in_process_executor(spec, ray_session, tmp_path):
    local = sweep.run(spec, storage=str(tmp_path / "local"), options=LOCAL)
    tuned = sweep.run(spec, storage=str(tmp_path / "tune"), options=sweep.RunOptions(progress="off"))
    results = trial_results(tuned)
    assert len(results) == 2
    assert all(r["reader_wait_s"] >= 0 for rows in results.values() for r in rows)  # every Tune trial streamed
    assert store_files(tuned) == store_files(local)  # the stored members, bit for bit
