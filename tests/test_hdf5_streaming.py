"""A trial of ``Problem("hdf5")`` holds none of its splits: the trainer reads them from the file,
whole where they fit the data budget, the training split a window at a time in the reader thread
where it is streamed, the validation and test splits a part at a time where they are evaluated in
parts; bit for bit the problem's data."""

from __future__ import annotations

import dataclasses
import threading
import tracemalloc

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
from sweep.problems import hdf5_reader, outline_problem, outlined

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


def test_a_trial_holds_no_split_and_reads_each_from_the_file_as_the_problem_holds_it(spec, in_memory):
    data, trial = in_memory[0], trial_data(spec)
    options = dict(spec.problem.options)
    for split in ("train", "val", "test"):
        pairs, whole, traj = getattr(trial, split), getattr(data, split), trial.trajectories(split)
        assert outlined(pairs.x) and outlined(pairs.y) and outlined(traj)
        assert pairs.x.shape == whole.x.shape and traj.shape == data.trajectories(split).shape  # sized at full shape
        x, y = hdf5_reader(options, trial.normalization, False, split)(0, len(pairs.x))
        np.testing.assert_array_equal(x, whole.x)
        np.testing.assert_array_equal(y, whole.y)
        np.testing.assert_array_equal(
            hdf5_reader(options, trial.normalization, True, split)(1, 3), data.trajectories(split)[1:3]
        )


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
    for split in ("train", "val", "test"):
        for held, whole in zip(getattr(block.data, split), getattr(data, split)):
            np.testing.assert_array_equal(np.asarray(held), whole)


@pytest.fixture(scope="module")
def held_spec(tmp_path_factory):
    """60 validation and 60 test trajectories of 6 states of 512 points (history 2: 240 pairs each,
    1.4 MiB, every array past malloc's mmap threshold, which aligns to 16 bytes, not 64) held on
    the CPU devices beside windows of the training split (of ~0.25 MiB)."""
    path = tmp_path_factory.mktemp("h5") / "1D_Advection.hdf5"
    pdebench_tensor(path, samples=300, time=6, x=512)
    problem = sweep.Problem("hdf5", path=str(path), history=2)
    return tiny_spec(problem=problem, training=dataclasses.replace(STREAMED, data_memory=2**21))


def numpy_bytes() -> int:
    """Bytes of the NumPy arrays alive that ``tracemalloc`` (started) saw allocated."""
    domain = tracemalloc.DomainFilter(True, np.lib.tracemalloc_domain)
    return sum(t.size for t in tracemalloc.take_snapshot().filter_traces([domain]).traces)


def test_a_streamed_trial_holds_its_validation_and_test_data_once_in_host_memory(held_spec):
    # the arrays read from the file are the ones the devices read in place, not a second, aligned copy
    trial = trial_data(held_spec)
    sweep.clear_caches()  # no dataset kept from another test
    tracemalloc.start()
    try:
        block, _ = training.init_block(held_spec, [0, 1], data=trial)
        alive = numpy_bytes()
    finally:
        tracemalloc.stop()
    assert block.stream is not None and block.stream.parts is None  # streamed, validation and test held
    held = sum(int(a.nbytes) for split in ("val", "test") for a in getattr(block.data, split))
    assert held > 2**20 and held <= alive < 1.05 * held  # once (before: as read, and aligned, 1.7x)


def test_a_streamed_chunk_lets_its_last_window_go_before_the_evaluation(held_spec):
    block, state = training.init_block(held_spec, [0], data=trial_data(held_spec))
    assert block.stream is not None and block.stream.plan.num_windows > 2
    window, evaluate, during = block.stream.plan.window_bytes, block.stream.evaluation, []

    def evaluation(state, held):  # the NumPy bytes alive as the evaluation starts
        during.append(numpy_bytes())
        return evaluate(state, held)

    tracemalloc.start()
    try:
        sweep.run_chunk(block._replace(stream=block.stream._replace(evaluation=evaluation)), state, 1)
    finally:
        tracemalloc.stop()
    assert during[0] < window / 4  # no window (before: the last one, which the reader's future held)


def test_validation_and_test_evaluated_in_parts_are_read_from_the_file_a_part_at_a_time(spec, monkeypatch):
    # 9 validation and 9 test trajectories (36 pairs each) with 2 rollout steps: 18 KiB, evaluated
    # in parts of <= 1.5 KiB (8 pairs, 6 trajectories: 2 parts of 5) beside windows of the training split
    parted = dataclasses.replace(
        spec,
        problem=sweep.Problem(
            "hdf5", path=spec.problem.options["path"], history=2, test_fraction=0.3, val_fraction=0.3
        ),
        training=dataclasses.replace(STREAMED, data_memory=3072, rollout_steps=2),
    )
    trial = trial_data(parted)
    block, _ = training.init_block(parted, [5], data=trial)
    assert block.stream is not None and (block.stream.parts.pairs, block.stream.parts.trajectories) == (8, 6)  # pyright: ignore[reportOptionalMemberAccess]
    read = []  # trajectories of every read of the field by this thread (the evaluation's)
    getitem = h5py.Dataset.__getitem__

    def counted(self, selection, *args, **kwargs):
        if threading.current_thread() is threading.main_thread() and isinstance(selection, tuple):
            read.append((selection[0].stop - selection[0].start, selection[1].stop))  # trajectories, states
        return getitem(self, selection, *args, **kwargs)

    alone = sweep.train(parted, 5, data=training.load_data(parted))  # evaluated in the same parts from memory
    monkeypatch.setattr(h5py.Dataset, "__getitem__", counted)
    model, history = sweep.train_block(parted, [0, 5], data=trial)
    assert_same_member(model, history, 1, *alone)
    assert set(history.val_rollout) and set(history.test_rollout)
    assert sum(n for n, _ in read) == 2 * 2 * (9 + 9)  # 2 chunks x 2 splits x (the pairs' + the rollouts' 9)
    assert max(n for n, _ in read) <= 5  # a part at a time, never a split (9 trajectories)
    # the pairs read every state; the rollouts only the 2 + 2 they start from and reach (history 2, 2 steps)
    assert sum(n for n, states in read if states == 4) == 2 * 2 * 9 and {states for _, states in read} == {4, 6}


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
