"""``Problem("hdf5")``: the data are read where they are trained. The driver holds an outline
(the full shapes, the normalisation statistics and the first rows of each split, equal to the
problem's) and reads the files' metadata, the statistics pass (the training split, one trajectory
at a time) and the rows the sweep keeps; Tune's trials read the files themselves; the store is
the local executor's, bit for bit."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from hdf5_files import pdebench_tensor, well_directory
from helpers import store_files, tiny_spec

import sweep
from sweep.problems import SPLITS, load_problem, outline_problem


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
    shapes, kept, _ = outline_problem("hdf5", options, samples=16, trajectories=4)
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


def test_the_driver_reads_one_trajectory_at_a_time_and_the_trials_read_the_file(ray_session, tmp_path, monkeypatch):
    path = tmp_path / "1D_Advection.hdf5"
    pdebench_tensor(path, samples=60, time=6, x=16)  # test: the last 6; validation: 6 drawn from the first 54
    spec = tiny_spec(problem=sweep.Problem("hdf5", path=str(path)), seeds=2)  # normalize="zscore", the default
    local = sweep.run(spec, storage=str(tmp_path / "local"), options=sweep.RunOptions(executor="local"))

    read = []  # the trajectory ranges the driver reads of the field (Tune's trials run in other processes)
    getitem = h5py.Dataset.__getitem__

    def counted(self, selection, *args, **kwargs):
        if self.name == "/tensor":
            first = selection[0] if isinstance(selection, tuple) else selection
            read.append((first.start, first.stop))
        return getitem(self, selection, *args, **kwargs)

    monkeypatch.setattr(h5py.Dataset, "__getitem__", counted)
    tuned = sweep.run(spec, storage=str(tmp_path / "tune"))

    assert all(stop - start == 1 for start, stop in read)  # never more than one trajectory at a time
    # the statistics pass (the 48 training trajectories), the first training trajectory again, and
    # the first 4 validation and test trajectories (what samples.parquet and trajectories.parquet keep)
    assert len(read) == 48 + 1 + 4 + 4
    assert sorted(start for start, _ in read if start >= 54) == [54, 55, 56, 57]
    assert store_files(tuned) == store_files(local)  # the trials trained on the file's data, as in process
