"""``Problem("hdf5")``: the data are read where they are trained. The driver holds an outline
(the full shapes, the normalisation statistics and the first rows of each split, equal to the
problem's) and reads the files' metadata, its pass over the files (the training split's
statistics and every split checked finite, one trajectory at a time; kept in the sweep
directory for later runs) and the rows the sweep keeps; ``sweep.plan`` measures an ``"auto"``
block size on the outline; Tune's trials read the files themselves; the store is the local
executor's, bit for bit."""

from __future__ import annotations

import logging
import os

import h5py
import numpy as np
import pytest
from _faults import FailOnce
from hdf5_files import pdebench_tensor, well_directory
from helpers import store_files, tiny_spec

import sweep
from sweep.problems import SPLITS, load_problem, outline_problem
from sweep.store import SweepDir
from sweep.tune import TrialHooks


@pytest.mark.parametrize(
    "files, options",
    [
        ("pdebench", {}),
        ("pdebench", {"history": 2, "val_fraction": 0.2, "data_seed": 3, "normalize": "rms"}),
        ("pdebench", {"val_fraction": 0, "normalize": "none"}),
        ("well", {"history": 2}),
        ("well-without-valid", {"val_fraction": 0.3, "data_seed": 5}),
    ],
)
def test_the_outline_has_the_problems_shapes_statistics_and_first_rows(tmp_path, files, options):
    if files == "pdebench":
        pdebench_tensor(tmp_path / "a.hdf5", samples=30, time=6, x=16)
        path = tmp_path / "a.hdf5"
    else:
        splits = {"train": 2, "valid": 1, "test": 2} if files == "well" else {"train": 3, "test": 2}
        well_directory(tmp_path / "toy", splits, trajectories=3 if files == "well" else 5)
        path = tmp_path / "toy"
    options = {"path": str(path), **options}
    data = load_problem("hdf5", options)
    outline = outline_problem("hdf5", options, samples=16, trajectories=4)
    shapes, kept = outline.shapes, outline.kept
    for split in SPLITS:
        for a, shaped, first in zip(getattr(data, split), getattr(shapes, split), getattr(kept, split)):
            assert (shaped.shape, shaped.dtype, shaped.nbytes) == (a.shape, a.dtype, a.nbytes)
            assert len(first) >= min(1 if split == "train" else 16, len(a))  # what the store keeps
            np.testing.assert_array_equal(first, a[: len(first)])
        states, shaped, first = data.trajectories(split), shapes.trajectories(split), kept.trajectories(split)
        if states is None:
            assert shaped is None and first is None
        else:
            assert shaped is not None and first is not None and shaped.shape == states.shape
            assert len(first) >= min(1 if split == "train" else 4, len(states))
            np.testing.assert_array_equal(first, states[: len(first)])
    assert (shapes.history, kept.normalization is None) == (data.history, data.normalization is None)
    if data.normalization is not None:
        assert kept.normalization is not None
        np.testing.assert_array_equal(kept.normalization.shift, data.normalization.shift)
        np.testing.assert_array_equal(kept.normalization.scale, data.normalization.scale)


def counted_reads(monkeypatch) -> list[tuple[int, int]]:
    """The trajectory ranges ``(start, stop)`` this process reads of a PDEBench file's ``/tensor`` from now on."""
    read = []
    getitem = h5py.Dataset.__getitem__

    def counted(self, selection, *args, **kwargs):
        if self.name == "/tensor":
            first = selection[0] if isinstance(selection, tuple) else selection
            read.append((first.start, first.stop))
        return getitem(self, selection, *args, **kwargs)

    monkeypatch.setattr(h5py.Dataset, "__getitem__", counted)
    return read


def test_the_driver_reads_one_trajectory_at_a_time_and_the_trials_read_the_file_at_its_relative_path(
    ray_session, tmp_path, monkeypatch
):
    """A relative `problem.path` is taken from the folder the sweep starts in, by the driver and by
    every Tune trial (each of which runs in a working directory of its own)."""
    # test: the last 6 trajectories; validation: 6 drawn from the first 54; normalize="zscore", the default
    pdebench_tensor(tmp_path / "1D_Advection.hdf5", samples=60, time=6, x=16)
    monkeypatch.chdir(tmp_path)
    spec = tiny_spec(problem=sweep.Problem("hdf5", path="1D_Advection.hdf5"), seeds=2)
    local = sweep.run(spec, storage=str(tmp_path / "local"), options=sweep.RunOptions(executor="local"))

    read = counted_reads(monkeypatch)  # what the driver reads (Tune's trials run in other processes)
    tuned = sweep.run(spec, storage=str(tmp_path / "tune"))

    assert all(stop - start == 1 for start, stop in read)  # never more than one trajectory at a time
    # the driver's pass (the statistics of the 48 training trajectories, the 6 validation and 6 test
    # trajectories checked finite), the first training trajectory again, and the first 4 validation
    # and test trajectories (what samples.parquet and trajectories.parquet keep)
    assert len(read) == 48 + 6 + 6 + 1 + 4 + 4
    assert sorted(start for start, _ in read if start >= 54) == sorted([*range(54, 60), *range(54, 58)])
    assert store_files(tuned) == store_files(local)  # the trials trained on the file's data, as in process


def test_the_drivers_pass_is_kept_exactly_and_made_again_when_a_file_changes(tmp_path, monkeypatch, caplog):
    path = tmp_path / "1D_Advection.hdf5"
    pdebench_tensor(path, samples=20, time=4, x=8)  # test: the last 2
    options = {"path": str(path), "normalize": "rms", "val_fraction": 0}
    read = counted_reads(monkeypatch)
    first = outline_problem("hdf5", options, samples=4, trajectories=2)
    assert first.scan is not None and first.scan.normalization is not None
    # the pass (the 18 training trajectories' statistics, the 2 test ones checked), then the kept rows
    assert sorted(start for start, _ in read) == sorted([*range(20), 0, 18, 19])

    sweep_dir = SweepDir.at(str(tmp_path / "runs" / "tiny"))
    sweep_dir.write_data_scans({"p": first.scan})
    kept = sweep_dir.data_scans()["p"]  # the statistics exactly, the files' sizes and times
    assert kept.files == first.scan.files
    np.testing.assert_array_equal(kept.normalization.scale, first.scan.normalization.scale)  # pyright: ignore[reportOptionalMemberAccess]

    scans = tmp_path / "runs" / "tiny" / "data_scans.json"
    scans.write_text(scans.read_text()[:-9])  # cut short: a cache that does not read is made again, not trusted
    with caplog.at_level(logging.WARNING, logger="sweep.store"):
        assert sweep_dir.data_scans() == {}
    assert "data_scans.json does not read" in caplog.text

    read.clear()
    again = outline_problem("hdf5", options, samples=4, trajectories=2, scan=kept)
    assert sorted(start for start, _ in read) == [0, 18, 19] and again.scan is kept  # only the rows the sweep keeps
    np.testing.assert_array_equal(again.kept.test.x, first.kept.test.x)

    with h5py.File(path, "r+") as f:  # the file changes: a NaN in the last test trajectory
        tensor = f["tensor"]
        assert isinstance(tensor, h5py.Dataset)
        tensor[19, 3, 5] = np.nan
    with pytest.raises(sweep.SpecError, match=r"1D_Advection.hdf5':/tensor holds NaN .*trajectory 19, time index 3"):
        outline_problem("hdf5", options, samples=4, trajectories=2, scan=kept)


@pytest.mark.slow
def test_a_later_run_takes_the_drivers_pass_from_the_sweep_directory_until_a_file_changes(tmp_path, monkeypatch):
    path = tmp_path / "1D_Advection.hdf5"
    pdebench_tensor(path, samples=20, time=4, x=8)  # test: the last 2; validation: 2 drawn from the first 18
    storage, options = str(tmp_path / "runs"), sweep.RunOptions(executor="local")
    read = counted_reads(monkeypatch)
    load = sweep.problems.ProblemData.load

    def loaded_by_the_trials(data):  # the in-process executor's trials read the file from here on
        read.append(None)
        return load(data)

    monkeypatch.setattr(sweep.problems.ProblemData, "load", loaded_by_the_trials)

    def by_driver() -> list[tuple[int, int]]:
        return read[: read.index(None)]

    sweep.run(tiny_spec(problem=sweep.Problem("hdf5", path=str(path)), seeds=2), storage=storage, options=options)
    # one trajectory at a time: its pass (each of the 20 trajectories once), then the rows the sweep
    # keeps (the first training trajectory and the 2 validation and 2 test trajectories)
    assert all(stop - start == 1 for start, stop in by_driver())
    assert len(by_driver()) == 20 + 1 + 2 + 2 and {start for start, _ in by_driver()} == set(range(20))
    assert (tmp_path / "runs" / "tiny" / "data_scans.json").is_file()

    read.clear()  # more seeds: the statistics and the checks are the sweep directory's, only the kept rows are read
    sweep.run(tiny_spec(problem=sweep.Problem("hdf5", path=str(path)), seeds=4), storage=storage, options=options)
    assert len(by_driver()) == 1 + 2 + 2 and all(stop - start == 1 for start, stop in by_driver())

    with h5py.File(path, "r+") as f:  # the file changes: a NaN in the last test trajectory
        tensor = f["tensor"]
        assert isinstance(tensor, h5py.Dataset)
        tensor[19, 3, 5] = np.nan
    with pytest.raises(
        sweep.SpecError,
        match=r"1D_Advection.hdf5':/tensor holds NaN .*\(channel 'tensor', trajectory 19, time index 3\)",
    ):
        sweep.run(tiny_spec(problem=sweep.Problem("hdf5", path=str(path)), seeds=6), storage=storage, options=options)


@pytest.mark.parametrize("split", ["test", "valid"])
def test_nan_only_in_a_validation_or_test_trajectory_is_named_before_any_trial(tmp_path, split):
    well_directory(tmp_path / "toy", {"train": 1, "valid": 1, "test": 1}, trajectories=2, grid=(6, 4))
    with h5py.File(tmp_path / "toy" / "data" / split / "toy_0.hdf5", "r+") as f:
        velocity = f["t1_fields/velocity"]
        assert isinstance(velocity, h5py.Dataset)
        velocity[1, 2, 3, 1, 0] = np.inf  # trajectory 1, time index 2, velocity_x
    spec = tiny_spec(problem=sweep.Problem("hdf5", path=str(tmp_path / "toy")), seeds=2)
    with pytest.raises(
        sweep.SpecError,
        match=rf"{split}/toy_0.hdf5':/t1_fields/velocity holds NaN or infinity \(channel 'velocity_x', "
        rf"trajectory 1, time index 2\)",
    ):
        sweep.run(spec, storage=str(tmp_path / "runs"), options=sweep.RunOptions(executor="local"))
    assert not (tmp_path / "runs" / "tiny" / "local").exists()  # no trial started


def test_plan_measures_an_auto_block_size_on_the_outline(tmp_path, monkeypatch):
    path = tmp_path / "1D_Advection.hdf5"
    pdebench_tensor(path, samples=20, time=4, x=8)
    spec = tiny_spec(problem=sweep.Problem("hdf5", path=str(path)), seeds=4, seeds_per_trial="auto")
    read = counted_reads(monkeypatch)
    planned = sweep.plan(spec)
    assert all(stop - start == 1 for start, stop in read)  # the driver never loads the file
    assert len(read) == 20 + 1 + 2 + 2  # its pass and the rows a sweep keeps, as sweep.run's driver
    assert 1 <= planned.seeds_per_trial <= 4


@pytest.mark.parametrize(
    ("normalize", "change"),
    [
        ("zscore", r"the training split's statistics of 'tensor': shift .* then; shift .* now"),
        ("none", r"other data in files of the same sizes"),  # no statistics: the states' digest tells
    ],
)
def test_more_seeds_on_files_that_changed_are_refused_before_any_work(tmp_path, normalize, change):
    """Members added to a sweep whose files changed would be trained on other data, and the store
    would map the old members' outputs with the new statistics: refused, naming the change."""
    path = tmp_path / "a.hdf5"
    pdebench_tensor(path, samples=20, time=4, x=8)
    storage, options = str(tmp_path / "runs"), sweep.RunOptions(executor="local", progress="off")

    def spec(seeds: int):
        return tiny_spec(problem=sweep.Problem("hdf5", path=str(path), normalize=normalize), seeds=seeds)

    sweep.run(spec(2), storage=storage, options=options)
    _rewrite_in_place(path)
    refused = (
        r"`problem.path` = '.*a.hdf5': the data changed since members of this sweep were trained on it \("
        + change
        + r"\); .* in a new sweep"
    )
    with pytest.raises(sweep.SpecError, match=refused):
        sweep.plan(spec(4), storage=storage)  # the plan says what the run would refuse
    with pytest.raises(sweep.SpecError, match=refused):
        sweep.run(spec(4), storage=storage, options=options)
    ens = sweep.load(tmp_path / "runs" / "tiny")
    assert len(ens) == 2  # nothing trained, the store as it was
    with pytest.raises(sweep.QueryError, match=r"the sweep read its files, channels first: sweep.problems.hdf5_split"):
        ens.predict(np.zeros((1, 8, 1), np.float32))  # the file's own layout: channels last

    norm = sweep.problems.Normalization("zscore", ("tensor",), np.array([1.0]), np.array([2.0]))
    then = sweep.problems.Scan((("a.hdf5", 100, 1),), norm)
    assert sweep.problems.Scan((("a.hdf5", 100, 2),), norm).change_from(then) is None  # a copy: only times differ
    assert sweep.problems.Scan((("a.hdf5", 120, 2),), norm).change_from(then) == "'a.hdf5': 100 bytes then, 120 now"
    assert sweep.problems.Scan((("b.hdf5", 100, 1),), norm).change_from(then) == "files ['a.hdf5'] then, ['b.hdf5'] now"


def _rewrite_in_place(path) -> None:
    """Other values, the same size: a file rewritten in place."""
    with h5py.File(path, "r+") as f:
        tensor = f["tensor"]
        assert isinstance(tensor, h5py.Dataset)
        tensor[...] = tensor[...] * 10 + 40


def test_a_resume_on_files_that_changed_under_an_unfinished_trial_is_refused(tmp_path):
    """A trial interrupted part way has no whole member yet: resumed on changed files, it would
    go on on other data than it began with."""
    path = tmp_path / "a.hdf5"
    pdebench_tensor(path, samples=20, time=4, x=8)
    spec = tiny_spec(problem=sweep.Problem("hdf5", path=str(path)), seeds=2)
    storage = str(tmp_path / "runs")
    hooks = TrialHooks(after_report=FailOnce(str(tmp_path / "failed")))
    with pytest.raises(sweep.SweepError, match="injected failure"):
        sweep.run(spec, storage=storage, options=sweep.RunOptions(executor="local", progress="off", trial_hooks=hooks))
    assert SweepDir.at(tmp_path / "runs" / "tiny").done(spec)[0] == set()  # no member whole
    _rewrite_in_place(path)
    refused = r"`problem.path` = '.*a.hdf5': the data changed since members of this sweep were trained on it"
    with pytest.raises(sweep.SpecError, match=refused):
        sweep.plan(spec, storage=storage)
    with pytest.raises(sweep.SpecError, match=refused):
        sweep.run(spec, storage=storage, options=sweep.RunOptions(executor="local", progress="off", resume=True))


def test_a_trial_whose_files_differ_from_the_drivers_is_refused(tmp_path):
    """Another copy on a trial's node, or files changed after the driver's pass: the trial would
    train on other data, with other statistics than the store records."""
    path = tmp_path / "a.hdf5"
    pdebench_tensor(path, samples=20, time=4, x=8)
    driver = outline_problem("hdf5", {"path": str(path)}, samples=4, trajectories=1)
    os.utime(path, ns=(1, 1))  # a copy: only the time differs, the trial's own pass agrees
    assert driver.data.load().train.x.shape == driver.shapes.train.x.shape
    _rewrite_in_place(path)
    with pytest.raises(
        sweep.SpecError,
        match=r"`problem.path` = '.*a.hdf5': this trial's files differ from those the sweep's driver read \(the "
        r"training split's statistics of 'tensor': .*\); every node must see the same files",
    ):
        driver.data.load()


def test_a_damaged_file_is_named_with_its_dataset_and_trajectory_before_any_work(tmp_path):
    path = tmp_path / "damaged.hdf5"
    states = np.random.default_rng(0).normal(size=(8, 4, 16)).astype(np.float32)
    with h5py.File(path, "w") as f:  # one compressed chunk per trajectory
        f.create_dataset("tensor", data=states, chunks=(1, 4, 16), compression="gzip")
        f["x-coordinate"] = np.linspace(0, 1, 16, dtype=np.float32)
        f["t-coordinate"] = np.linspace(0, 1, 5, dtype=np.float32)
        tensor = f["tensor"]
        assert isinstance(tensor, h5py.Dataset)
        chunk = tensor.id.get_chunk_info(2)
    with open(path, "r+b") as raw:  # bytes of trajectory 2's chunk overwritten: its filter cannot decode it
        raw.seek(chunk.byte_offset + 4)
        raw.write(b"\xff" * 16)
    with pytest.raises(
        sweep.SpecError,
        match=r"damaged.hdf5':/tensor cannot be read \(trajectory 2: .*filter returned failure.*\); the file is "
        r"damaged: copy it again",
    ):
        outline_problem("hdf5", {"path": str(path)}, samples=4, trajectories=2)


def test_the_figures_of_a_file_name_its_channel(tmp_path):
    pdebench_tensor(tmp_path / "a.hdf5", samples=20, time=4, x=8)
    spec = tiny_spec(problem=sweep.Problem("hdf5", path=str(tmp_path / "a.hdf5")), seeds=2)
    path = sweep.run(spec, storage=str(tmp_path / "runs"), options=sweep.RunOptions(executor="local", progress="off"))
    first = sweep.plot(path, "predictions").axes[0]
    assert first.get_ylabel() == "tensor"  # the file's name of channel 0, not "value"


def test_more_seeds_on_an_arrays_file_that_changed_are_refused(tmp_path):
    """The same for a problem of a user's arrays file: its stamp, statistics and a digest of its
    arrays are kept, and a file rewritten with other values is named."""
    rng = np.random.default_rng(0)
    arrays = {"train_x": rng.normal(size=(40, 1, 16)), "train_y": rng.normal(size=(40, 1, 16))}
    arrays |= {"test_x": rng.normal(size=(8, 1, 16)), "test_y": rng.normal(size=(8, 1, 16))}
    path = tmp_path / "mine.npz"
    np.savez(path, **{k: v.astype(np.float32) for k, v in arrays.items()})
    storage, options = str(tmp_path / "runs"), sweep.RunOptions(executor="local", progress="off")

    def spec(seeds: int):
        return tiny_spec(problem=sweep.Problem("arrays", path=str(path)), seeds=seeds)

    sweep.run(spec(2), storage=storage, options=options)
    np.savez(path, **{k: (v * 3 + 1).astype(np.float32) for k, v in arrays.items()})  # the same size
    with pytest.raises(
        sweep.SpecError,
        match=r"`problem.path` = '.*mine.npz': the data changed .*\(other data in files of the same sizes\)",
    ):
        sweep.run(spec(4), storage=storage, options=options)
    np.savez(path, **{k: v.astype(np.float32) for k, v in arrays.items()})  # put back (a new time): accepted
    sweep.run(spec(4), storage=storage, options=options)
    assert len(sweep.load(tmp_path / "runs" / "tiny")) == 4


def test_a_bad_field_of_a_grid_value_is_named_as_the_grid_sets_it(tmp_path):
    """The spec file has no `problem.fields` line: the error names the grid's entry and its value."""
    pdebench_tensor(tmp_path / "a.hdf5", samples=20, time=4, x=8)
    problem = sweep.Problem("hdf5", path=str(tmp_path / "a.hdf5"))
    spec = tiny_spec(problem=problem, grid={"problem.fields": [["tensor"], ["tensr"]]})
    with pytest.raises(
        sweep.SpecError,
        match=r'^`grid.problem.fields` = \["tensr"\]: '
        + r"'tensr' is not a time-varying field of '.*a.hdf5' \(did you "
        r"mean 'tensor'\?\)",
    ):
        sweep.plan(spec)
