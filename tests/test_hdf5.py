"""``Problem("hdf5")``: PDEBench's three layouts and The Well's, written here with h5py; channels,
strides, splits, auto-detection; every bad input named with its file and dataset; files that
read outside themselves (external links, virtual datasets, external storage, filter plugins)
refused; unrolled training and rollout metrics on file data."""

from __future__ import annotations

import contextlib
import logging
import re

import h5py
import numpy as np
import pytest
from hdf5_files import pdebench_samples, pdebench_tensor, pdebench_variables, well_directory, well_file
from helpers import assert_one_line_error, invoke, tiny_spec

import sweep
from sweep import training
from sweep.problems import hdf5_info, load_problem, outline_problem


def load(path, **options):
    """The file's data as they are in it (``normalize="none"``, unless ``options`` say otherwise)."""
    return load_problem("hdf5", {"path": str(path), "normalize": "none", **options})


def traj(data, split: str) -> np.ndarray:
    """The trajectories of ``split`` (which must have some)."""
    states = data.trajectories(split)
    assert states is not None
    return states


def counts(data) -> tuple[int, ...]:
    """Trajectories of train, val, test."""
    return tuple(len(traj(data, s)) for s in ("train", "val", "test"))


def test_pdebench_tensor_1d_splits_as_pdebench(tmp_path):
    states = pdebench_tensor(tmp_path / "1D_Advection.hdf5", samples=10, time=6, x=16)
    info = hdf5_info(str(tmp_path / "1D_Advection.hdf5"))
    assert (info.layout, info.form, info.channels, info.steps, info.spatial) == (
        "pdebench",
        "tensor",
        ("tensor",),
        6,
        (16,),
    )
    data = load(tmp_path / "1D_Advection.hdf5", val_fraction=0)
    # PDEBench: the last test_ratio (0.1) of the samples are the test split
    np.testing.assert_array_equal(data.train_traj, states[:9])
    np.testing.assert_array_equal(data.test_traj, states[9:])
    assert data.train.x.shape == (9 * 5, 1, 16)
    np.testing.assert_array_equal(data.train.x[:5], states[0, :5])
    np.testing.assert_array_equal(data.train.y[:5], states[0, 1:])


def test_pdebench_tensor_validation_carved_from_training_trajectories(tmp_path):
    states = pdebench_tensor(tmp_path / "a.hdf5", samples=20)
    data = load(tmp_path / "a.hdf5", test_fraction=0.25, val_fraction=0.1, data_seed=3)
    assert counts(data) == (13, 2, 5)
    np.testing.assert_array_equal(data.test_traj, states[15:])
    train = {t.tobytes() for t in traj(data, "train")}
    val = {t.tobytes() for t in traj(data, "val")}
    assert not train & val and train | val == {t.tobytes() for t in states[:15]}


@pytest.mark.parametrize("grid", [(12,), (8, 6), (6, 4, 4)])
def test_pdebench_variables_1d_2d_3d_with_strides(tmp_path, grid):
    states = pdebench_variables(tmp_path / "cfd.hdf5", samples=10, time=7, grid=grid)
    info = hdf5_info(str(tmp_path / "cfd.hdf5"), time_stride=3, space_stride=2)
    assert info.channels == ("density", "pressure", "Vx", "Vy", "Vz")[: 2 + len(grid)]
    assert info.steps == 3 and info.spatial == tuple((n + 1) // 2 for n in grid)
    data = load(tmp_path / "cfd.hdf5", time_stride=3, space_stride=2, val_fraction=0)
    spatial = (slice(None, None, 2),) * len(grid)
    np.testing.assert_array_equal(data.train_traj, states[:9, ::3][(..., *spatial)])
    np.testing.assert_array_equal(data.test_traj, states[9:, ::3][(..., *spatial)])


def test_pdebench_variables_fields_choose_channels_in_the_order_given(tmp_path):
    states = pdebench_variables(tmp_path / "cfd.hdf5", grid=(8, 6))
    data = load(tmp_path / "cfd.hdf5", fields=["Vy", "density"], val_fraction=0)
    np.testing.assert_array_equal(data.train_traj, states[:5][:, :, [3, 0]])


def test_pdebench_per_sample_groups(tmp_path):
    states = pdebench_samples(tmp_path / "2D_diff-react.h5", samples=5, time=5, grid=(6, 6), channels=2)
    info = hdf5_info(str(tmp_path / "2D_diff-react.h5"), time_stride=2)
    assert (info.form, info.channels, info.steps, info.spatial) == ("samples", ("data_0", "data_1"), 3, (6, 6))
    data = load(tmp_path / "2D_diff-react.h5", time_stride=2, val_fraction=0, fields=["data_1"])
    np.testing.assert_array_equal(data.train_traj, states[:4, ::2, 1:])
    np.testing.assert_array_equal(data.test_traj, states[4:, ::2, 1:])


def test_the_well_directory_splits_and_vector_components(tmp_path):
    states = well_directory(tmp_path / "toy", {"train": 2, "valid": 1, "test": 1}, trajectories=3, grid=(6, 4))
    info = hdf5_info(str(tmp_path / "toy"))
    assert (info.layout, info.channels) == ("the_well", ("pressure", "velocity_x", "velocity_y"))
    assert info.trajectories == {"train": 6, "val": 3, "test": 3} and info.fixed == ("mask",)
    data = load(tmp_path / "toy")  # valid/ is the validation split: nothing carved
    for split, folder in (("train", "train"), ("val", "valid"), ("test", "test")):
        np.testing.assert_array_equal(data.trajectories(split), states[folder])
    velocity = load(tmp_path / "toy", fields=["velocity"], space_stride=2)  # a vector by its name: its components
    np.testing.assert_array_equal(velocity.train_traj, states["train"][:, :, 1:, ::2, ::2])


def test_files_need_to_agree_only_on_the_fields_read(tmp_path):
    states = well_directory(tmp_path / "toy", {"train": 1, "test": 1})
    with h5py.File(tmp_path / "toy" / "data" / "test" / "toy_0.hdf5", "a") as f:  # a test file without velocity
        del f["t1_fields/velocity"]
        f["t1_fields"].attrs["field_names"] = []
    pressure = load(tmp_path / "toy", fields=["pressure"], val_fraction=0)
    np.testing.assert_array_equal(pressure.test_traj, states["test"][:, :, :1])
    with pytest.raises(
        sweep.SpecError,
        match=r"toy_0.hdf5' holds channels \['pressure'\] of 5 states on \(6, 4\) \(it lacks velocity_x, velocity_y\), "
        r"but .* holds .*; every file must hold the fields read on the same grid; or name in `problem.fields` the "
        r"fields every file holds",
    ):
        load(tmp_path / "toy")
    with pytest.raises(sweep.SpecError, match=r"\(it lacks velocity_y\)"):
        load(tmp_path / "toy", fields=["pressure", "velocity_y"])


def test_the_well_without_valid_carves_it_and_a_split_folder_or_file_splits_like_pdebench(tmp_path):
    well_directory(tmp_path / "toy", {"train": 2, "test": 1}, trajectories=5)
    data = load(tmp_path / "toy", val_fraction=0.2, data_seed=1)
    assert counts(data) == (7, 3, 5)
    said = str(hdf5_info(str(tmp_path / "toy"))).splitlines()[-2]  # the files hold: val is carved later
    assert said == "  trajectories train 10, test 5 (no validation split: val is val_fraction of train)"
    folder = load(tmp_path / "toy" / "data" / "train", val_fraction=0)  # one split's folder: 10 trajectories
    assert (len(traj(folder, "train")), len(traj(folder, "test"))) == (9, 1)
    states = well_file(tmp_path / "one.hdf5", trajectories=4, grid=(5,))
    single = load(tmp_path / "one.hdf5", val_fraction=0, test_fraction=0.25)
    np.testing.assert_array_equal(single.test_traj, states[3:])
    assert hdf5_info(str(tmp_path / "one.hdf5")).channels == ("pressure", "velocity_x")


def test_auto_says_which_layout_it_chose(tmp_path, caplog):
    pdebench_tensor(tmp_path / "a.hdf5")
    with caplog.at_level(logging.INFO, logger="sweep.problems"):
        hdf5_info(str(tmp_path / "a.hdf5"))
    assert "laid out as 'pdebench' (tensor)" in caplog.text
    assert hdf5_info(str(tmp_path / "a.hdf5"), layout="pdebench").layout == "pdebench"
    with pytest.raises(sweep.SpecError, match=r"got 'the_well'.*laid out as 'pdebench'.*\['t-coordinate', 'tensor'"):
        hdf5_info(str(tmp_path / "a.hdf5"), layout="the_well")


def test_a_pdebench_file_with_a_the_well_attribute_is_read_and_a_folder_may_not_mix_layouts(tmp_path):
    pdebench_tensor(tmp_path / "a.hdf5")
    with h5py.File(tmp_path / "a.hdf5", "r+") as f:
        f.attrs["n_spatial_dims"] = 1  # an attribute The Well files carry, on a PDEBench file
    assert hdf5_info(str(tmp_path / "a.hdf5")).layout == "pdebench"  # its datasets decide
    (tmp_path / "mixed").mkdir()
    pdebench_tensor(tmp_path / "mixed" / "a.hdf5")
    well_file(tmp_path / "mixed" / "b.hdf5")
    with pytest.raises(
        sweep.SpecError,
        match=r"`problem.path`: the files mix layouts: '.*a.hdf5' is laid out as 'pdebench', '.*b.hdf5' as "
        r"'the_well'; a problem reads files of one layout",
    ):
        hdf5_info(str(tmp_path / "mixed"))


def test_problem_in_a_spec_and_toml(tmp_path):
    problem = sweep.Problem("hdf5", path="x.hdf5", fields=["density"], time_stride=2)
    assert sweep.Problem.from_dict(problem.to_dict()) == problem
    tiny_spec(problem=problem).to_toml(tmp_path / "sweep.toml")
    assert 'name = "hdf5"' in (tmp_path / "sweep.toml").read_text()
    assert sweep.SweepSpec.from_toml(tmp_path / "sweep.toml").problem == problem


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"layout": "netcdf"}, r"`problem.layout`: got 'netcdf'; choose one of auto, pdebench, the_well"),
        ({"time_stride": 0}, r"`problem.time_stride`: got 0; must be an integer >= 1"),
        ({"fields": "density"}, r"`problem.fields`: got 'density'; give a list"),
        ({"fields": ["a", "a"]}, r"`problem.fields`: got \['a', 'a'\]; give a list of distinct"),
        ({"test_fraction": 1.0}, r"`problem.test_fraction`: got 1.0; must be a number in \(0, 1\)"),
        ({"strides": 2}, r"`problem.strides`: not an option of hdf5"),
    ],
)
def test_bad_options_refused_when_the_problem_is_built(options, message):
    with pytest.raises(sweep.SpecError, match=message):
        sweep.Problem("hdf5", path="x.hdf5", **options)


def test_bad_files_named_with_file_and_dataset(tmp_path):
    with pytest.raises(sweep.SpecError, match=r"`problem.path`: '.*missing.hdf5' does not exist"):
        load(tmp_path / "missing.hdf5")
    (tmp_path / "text.hdf5").write_text("not hdf5")
    with pytest.raises(sweep.SpecError, match=r"text.hdf5' is not an HDF5 file"):
        load(tmp_path / "text.hdf5")
    with h5py.File(tmp_path / "other.hdf5", "w") as f:
        f["u"] = np.zeros((2, 3))
    with pytest.raises(sweep.SpecError, match=r"neither a PDEBench nor a The Well file: it holds \['u'\]"):
        load(tmp_path / "other.hdf5")
    (tmp_path / "empty").mkdir()
    with pytest.raises(sweep.SpecError, match=r"the folder '.*empty' holds no HDF5 file"):
        load(tmp_path / "empty")
    pdebench_variables(tmp_path / "cfd.hdf5", grid=(8, 6))
    with pytest.raises(sweep.SpecError, match=r"'Vz' is not a time-varying field.*has density, pressure, Vx, Vy"):
        load(tmp_path / "cfd.hdf5", fields=["Vz"])
    with pytest.raises(sweep.SpecError, match=r"`problem.time_stride`: got 5; .*cfd.hdf5' has 5 states"):
        load(tmp_path / "cfd.hdf5", time_stride=5)
    with pytest.raises(
        sweep.SpecError, match=r"`problem.space_stride`: got 7; .*\(8, 6\).*at most the smallest axis \(6\)"
    ):
        load(tmp_path / "cfd.hdf5", space_stride=7)


def test_fields_and_values_a_problem_cannot_read_are_named_before_any_work(tmp_path):
    """Complex or text values (numpy would drop an imaginary part with a warning), a channel named
    twice (a vector field's name, then one of its components), and a field the first of a
    folder's files lacks, named with that file."""
    for values, kind in ((np.ones((4, 3, 8), np.complex64), "complex64"), (np.full((4, 3, 8), b"a"), "|S1")):
        with h5py.File(tmp_path / f"{values.dtype.kind}.hdf5", "w") as f:
            f["tensor"] = values
        with pytest.raises(
            sweep.SpecError,
            match=rf"{values.dtype.kind}.hdf5':/tensor holds {re.escape(kind)} values; seed-sweep reads real",
        ):
            load(tmp_path / f"{values.dtype.kind}.hdf5")
    well_file(tmp_path / "toy.hdf5")
    with pytest.raises(
        sweep.SpecError, match=r"`problem.fields`: 'velocity_x' names velocity_x, named already by another of "
    ):
        load(tmp_path / "toy.hdf5", fields=["velocity", "velocity_x"])
    (tmp_path / "two").mkdir()
    pdebench_tensor(tmp_path / "two" / "a.hdf5", samples=4, time=3, x=8)
    pdebench_tensor(tmp_path / "two" / "b.hdf5", samples=4, time=3, x=8)
    with pytest.raises(
        sweep.SpecError, match=r"'data_0' is not a time-varying field of '.*a.hdf5' \(the first of the 2"
    ):
        load(tmp_path / "two", fields=["data_0"])


def test_a_missing_relative_path_says_where_it_was_looked_for(tmp_path, monkeypatch):
    """A relative `problem.path` is taken from the current directory: the message shows the
    absolute path tried and says so, in Python and from `sweep plan` started elsewhere."""
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    tried = repr(str(tmp_path / "elsewhere" / "cfd.hdf5"))
    with pytest.raises(sweep.SpecError, match="relative path is taken from the current directory") as e:
        load("cfd.hdf5")
    assert f"'cfd.hdf5' does not exist (looked for {tried}" in str(e.value)
    tiny_spec(problem=sweep.Problem("hdf5", path="cfd.hdf5")).to_toml(tmp_path / "cfd.toml")
    result = invoke("plan", tmp_path / "cfd.toml")
    assert_one_line_error(
        result, "`problem.path`: 'cfd.hdf5' does not exist", f"looked for {tried}", "current directory"
    )
    with pytest.raises(sweep.SpecError) as e:  # an absolute path is shown as it is, with nothing to add
        load(tmp_path / "missing.hdf5")
    assert "looked for" not in str(e.value)


def test_a_trial_reads_a_relative_path_from_the_folder_the_sweep_started_in(tmp_path, monkeypatch):
    """What a trial gets of a problem (ProblemData) carries the driver's folder, its ``origin``: a
    trial in another working directory (as Tune gives each) reads the same file, its trainer too;
    where that folder lacks the file (another node), the message names the absolute path tried."""
    pdebench_tensor(tmp_path / "a.hdf5", samples=10, time=4, x=8)
    monkeypatch.chdir(tmp_path)
    spec = tiny_spec(problem=sweep.Problem("hdf5", path="a.hdf5"), seeds=1, seeds_per_trial=1)
    data = outline_problem("hdf5", dict(spec.problem.options), 16, 4).data
    assert data.origin == str(tmp_path) and data.options["path"] == "a.hdf5"  # the spec keeps its text
    whole = training.load_data(spec)
    (tmp_path / "trial").mkdir()
    monkeypatch.chdir(tmp_path / "trial")  # a trial's own working directory
    trial = data.load()  # the splits left in the file, with the folder to read it from
    assert trial.origin == str(tmp_path)
    held = training.init_block(spec, [0], data=trial)[0].data
    np.testing.assert_array_equal(np.asarray(held.train.x), whole.train.x)  # read by the trainer from the file
    (tmp_path / "node").mkdir()
    elsewhere = str(tmp_path / "node")  # the sweep's folder on a node that does not hold the file
    with pytest.raises(sweep.SpecError) as e:
        data._replace(origin=elsewhere).load()
    tried = repr(str(tmp_path / "node" / "a.hdf5"))
    assert f"`problem.path`: 'a.hdf5' does not exist (looked for {tried}" in str(e.value)
    assert f"taken from the folder the sweep was started in, {elsewhere!r}" in str(e.value)


def test_one_state_per_sample_is_refused(tmp_path):
    with h5py.File(tmp_path / "2D_DarcyFlow.hdf5", "w") as f:
        f["tensor"] = np.ones((4, 1, 8, 8), np.float32)  # PDEBench's Darcy flow: a steady solution per sample
    with pytest.raises(sweep.SpecError, match=r"2D_DarcyFlow.hdf5' holds one state per sample"):
        load(tmp_path / "2D_DarcyFlow.hdf5")


def test_shapes_that_differ_between_fields_or_files(tmp_path):
    with h5py.File(tmp_path / "cfd.hdf5", "w") as f:
        f["density"] = np.zeros((4, 5, 8), np.float32)
        f["Vx"] = np.zeros((4, 5, 6), np.float32)
    with pytest.raises(
        sweep.SpecError, match=r"cfd.hdf5': /density and /Vx have different .* \(4, 5, 8\) and \(4, 5, 6\)"
    ):
        load(tmp_path / "cfd.hdf5")
    well_directory(tmp_path / "toy", {"train": 1, "test": 1}, grid=(6, 4))
    well_file(tmp_path / "toy" / "data" / "test" / "toy_9.hdf5", grid=(6, 6))
    with pytest.raises(sweep.SpecError, match=r"toy_9.hdf5' holds channels .* on \(6, 6\), but .* on \(6, 4\)"):
        load(tmp_path / "toy")
    with pytest.raises(
        sweep.SpecError, match=r"`problem.fields`: 'mask' is not a time-varying .*mask is constant in time"
    ):
        load(tmp_path / "toy" / "data" / "train", fields=["mask"])


def test_per_sample_groups_of_different_shapes(tmp_path):
    with h5py.File(tmp_path / "swe.h5", "w") as f:
        f["0000/data"] = np.ones((4, 8, 8, 1), np.float32)
        f["0001/data"] = np.ones((4, 8, 6, 1), np.float32)
    with pytest.raises(sweep.SpecError, match=r"swe.h5': /0000/data and /0001/data have different .* \(4, 8, 8, 1\)"):
        load(tmp_path / "swe.h5")


def test_the_well_splits_leave_no_test_fraction_and_need_test(tmp_path):
    well_directory(tmp_path / "toy", {"train": 1, "test": 1})
    with pytest.raises(sweep.SpecError, match=r"`problem.test_fraction`: got 0.2, but .* has its own test split"):
        load(tmp_path / "toy", test_fraction=0.2)
    well_directory(tmp_path / "half", {"train": 1})
    with pytest.raises(sweep.SpecError, match=r"has train/ but no test/"):
        load(tmp_path / "half")


def test_nan_named_with_trajectory_and_time_index(tmp_path):
    with h5py.File(tmp_path / "cfd.hdf5", "w") as f:
        f["density"] = np.ones((4, 6, 8), np.float32)
        pressure = np.ones((4, 6, 8), np.float32)
        pressure[2, 4, 3] = np.inf
        f["pressure"] = pressure
    with pytest.raises(
        sweep.SpecError,
        match=r"cfd.hdf5':/pressure holds NaN or infinity \(channel 'pressure', trajectory 2, time index 4\)",
    ):
        load(tmp_path / "cfd.hdf5")
    strided = load(tmp_path / "cfd.hdf5", time_stride=3, val_fraction=0)
    assert traj(strided, "train").shape == (3, 2, 2, 8)  # time index 4 is not selected
    with h5py.File(tmp_path / "wide.hdf5", "w") as f:  # finite in float64, not in float32
        f["density"] = np.ones((4, 6, 8), np.float32)
        pressure = np.ones((4, 6, 8))
        pressure[1, 2, 5] = 1e300
        f["pressure"] = pressure
    with pytest.raises(
        sweep.SpecError,
        match=r"wide.hdf5':/pressure holds 1e\+300, beyond float32's range \(\|value\| <= 3.403e\+38\) \(channel "
        r"'pressure', trajectory 1, time index 2\)",
    ):
        load(tmp_path / "wide.hdf5")


def test_external_link_refused_and_never_followed(tmp_path):
    outside = tmp_path / "outside.hdf5"
    with h5py.File(outside, "w") as f:
        f["secret"] = np.ones((4, 5, 8), np.float32)
    with h5py.File(tmp_path / "data.hdf5", "w") as f:
        f["density"] = np.ones((4, 5, 8), np.float32)
        f["pressure"] = h5py.ExternalLink(str(outside), "/secret")
    outside.unlink()  # were the link followed, this would be an HDF5 error, not a SpecError
    with pytest.raises(
        sweep.SpecError, match=r"data.hdf5':/pressure is an external link to '.*outside.hdf5':'/secret'"
    ):
        load(tmp_path / "data.hdf5")


def test_virtual_dataset_of_another_file_refused(tmp_path):
    with h5py.File(tmp_path / "source.hdf5", "w") as f:
        f["u"] = np.ones((4, 5, 8), np.float32)
    layout = h5py.VirtualLayout(shape=(4, 5, 8), dtype=np.float32)
    layout[...] = h5py.VirtualSource(str(tmp_path / "source.hdf5"), "u", shape=(4, 5, 8))
    with h5py.File(tmp_path / "data.hdf5", "w") as f:
        f.create_virtual_dataset("tensor", layout)
    with pytest.raises(sweep.SpecError, match=r"data.hdf5':/tensor is a virtual dataset reading other file\(s\)"):
        load(tmp_path / "data.hdf5")


def test_external_storage_refused(tmp_path):
    raw = tmp_path / "raw.bin"
    np.ones((4, 5, 8), np.float32).tofile(raw)
    with h5py.File(tmp_path / "data.hdf5", "w") as f:
        f.create_dataset("tensor", shape=(4, 5, 8), dtype=np.float32, external=[(str(raw), 0, h5py.h5f.UNLIMITED)])
    with pytest.raises(
        sweep.SpecError, match=r"data.hdf5':/tensor keeps its data in external file\(s\) \['.*raw.bin'\]"
    ):
        load(tmp_path / "data.hdf5")


def test_filter_plugin_refused_before_any_read(tmp_path, monkeypatch):
    monkeypatch.setenv("HDF5_PLUGIN_PATH", str(tmp_path))
    with h5py.File(tmp_path / "data.hdf5", "w") as f:
        space = h5py.h5s.create_simple((4, 5, 8))
        plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        plist.set_chunk((1, 5, 8))
        plist.set_filter(32001, h5py.h5z.FLAG_OPTIONAL, (0,))  # Blosc, an HDF5 plugin
        h5py.h5d.create(f.id, b"tensor", h5py.h5t.NATIVE_FLOAT, space, dcpl=plist)
        tensor = f["tensor"]
        assert isinstance(tensor, h5py.Dataset)
        tensor[...] = np.ones((4, 5, 8), np.float32)
    with pytest.raises(sweep.SpecError, match=r"data.hdf5':/tensor is compressed with HDF5 filter 32001, a plugin"):
        load(tmp_path / "data.hdf5")


def test_unrolled_training_and_rollout_metrics_on_file_data(tmp_path):
    pdebench_variables(tmp_path / "cfd.hdf5", samples=8, time=6, grid=(8, 8))
    spec = tiny_spec(
        problem=sweep.Problem("hdf5", path=str(tmp_path / "cfd.hdf5"), fields=["density", "Vx"], test_fraction=0.25),
        model=sweep.Model("ConvNet", hidden_channels=4, depth=1, activation="relu"),
        training=sweep.Training(epochs=2, batch_size=4, report_every=1, unroll=2, rollout_steps=3),
        seeds=2,
    )
    data = training.load_data(spec)
    assert data.sample_shape == (2, 8, 8) and traj(data, "test").shape == (2, 6, 2, 8, 8)
    _, history = training.train_block(spec, [0, 1], data=data)
    curves = history.test_rollout["nrmse"]
    assert curves.shape == (2, 3) and np.isfinite(curves).all()


@contextlib.contextmanager
def on_s3(folder, monkeypatch):
    """The files under ``folder`` copied to ``s3://datasets/`` on a moto server that the ``AWS_*``
    variables name, while inside."""
    import pyarrow.fs as pafs
    from _moto import moto_server, s3_filesystem

    with moto_server() as (host, port):
        for key, value in {
            "AWS_ENDPOINT_URL": f"http://{host}:{port}",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }.items():
            monkeypatch.setenv(key, value)
        fs = s3_filesystem(host, port)
        fs.create_dir("datasets")
        pafs.copy_files(str(folder), "datasets", pafs.LocalFileSystem(), fs)
        yield


def test_files_on_s3_read_as_the_same_files_on_disk(tmp_path, monkeypatch):
    from _moto import counting_requests

    well_directory(tmp_path / "toy", {"train": 2, "valid": 1, "test": 1}, grid=(6, 4))
    pdebench_samples(tmp_path / "2D_diff-react.h5")
    with on_s3(tmp_path, monkeypatch):
        assert hdf5_info("s3://datasets/toy").files["test"] == ("s3://datasets/toy/data/test/toy_0.hdf5",)
        for name in ("toy", "2D_diff-react.h5"):
            with counting_requests() as requests:
                remote = load(f"s3://datasets/{name}", space_stride=2)
            # HDF5's many small reads (headers, B-tree nodes) come from blocks: each opening of
            # these files (all smaller than a block) is one GET, not one per read
            assert 0 < requests["GET"] <= requests["HEAD"], requests
            local = load(tmp_path / name, space_stride=2)
            for split in ("train", "val", "test"):
                np.testing.assert_array_equal(traj(remote, split), traj(local, split))
        with pytest.raises(sweep.SpecError, match=r"`problem.path`: 's3://datasets/nothing' does not exist"):
            load("s3://datasets/nothing")


def test_files_larger_than_the_blocks_kept_read_from_s3_as_on_disk(tmp_path, monkeypatch):
    """Gzip chunks that straddle the blocks read from object storage, more blocks than are kept,
    and trajectories of a block or more (read as they are): the same arrays as from disk."""
    from _moto import counting_requests

    pdebench_variables(tmp_path / "2D_CFD.hdf5", samples=24, time=20, grid=(32, 32))  # 7.9 MB, 80 KB chunks
    pdebench_tensor(tmp_path / "1D_Advection.hdf5", samples=4, time=256, x=1024)  # 1 MiB per trajectory
    with on_s3(tmp_path, monkeypatch):
        for name, options in (("2D_CFD.hdf5", {"fields": ["density", "Vx"]}), ("1D_Advection.hdf5", {})):
            with counting_requests() as requests:
                remote = load(f"s3://datasets/{name}", **options)
            # two GETs per MiB of the file, and one per opening, at most (the reads: 80 and 21 GETs)
            assert requests["GET"] <= 2 * -(-(tmp_path / name).stat().st_size // 2**20) + requests["HEAD"], requests
            local = load(tmp_path / name, **options)
            for split in ("train", "val", "test"):
                np.testing.assert_array_equal(traj(remote, split), traj(local, split))


@pytest.fixture
def s3_only(tmp_path, monkeypatch):
    """``(filesystem, local file)``: a PDEBench file copied to ``s3://datasets/`` on an S3 endpoint
    that only the filesystem object knows (no ``AWS_*`` variable says where it is)."""
    import os

    import pyarrow.fs as pafs
    from _moto import moto_server, s3_filesystem

    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    pdebench_tensor(tmp_path / "1D_Advection.hdf5", samples=12, time=4, x=8)
    with moto_server() as (host, port):
        fs = s3_filesystem(host, port)
        for bucket in ("datasets", "sweeps"):
            fs.create_dir(bucket)
        pafs.copy_files(str(tmp_path / "1D_Advection.hdf5"), "datasets/1D_Advection.hdf5", destination_filesystem=fs)
        yield fs, tmp_path / "1D_Advection.hdf5"


def test_s3_files_read_through_the_sweeps_filesystem_on_the_driver_and_in_the_trials(s3_only):
    import pickle

    import pyarrow.fs as pafs

    from sweep.problems import outline_problem

    fs, local_file = s3_only
    path = "s3://datasets/1D_Advection.hdf5"
    assert hdf5_info(path, filesystem=fs).files == {"all": (path,)}
    local = load_problem("hdf5", {"path": str(local_file)})
    outline = outline_problem("hdf5", {"path": path}, samples=4, trajectories=2, filesystem=fs)  # the driver
    np.testing.assert_array_equal(outline.kept.test.x[:4], local.test.x[:4])
    trial = pickle.loads(pickle.dumps(outline.data)).load()  # what a Tune trial gets, and reads
    for split in ("train", "val", "test"):
        np.testing.assert_array_equal(traj(trial, split), traj(local, split))
    with h5py.File(local_file, "r+") as f:  # the object replaced by one of other values, the same size
        tensor = f["tensor"]
        assert isinstance(tensor, h5py.Dataset)
        tensor[...] = tensor[...] * 10 + 40
    pafs.copy_files(str(local_file), "datasets/1D_Advection.hdf5", destination_filesystem=fs)
    with pytest.raises(sweep.SpecError, match=r"this trial's files differ from those the sweep's driver read \(the"):
        pickle.loads(pickle.dumps(outline.data)).load()  # its statistics are not the driver's


@pytest.mark.slow
def test_a_sweep_on_s3_trains_on_files_read_through_its_filesystem(s3_only, tmp_path):
    import pyarrow.fs as pafs

    fs, local_file = s3_only
    options = sweep.RunOptions(executor="local")

    def spec(path: str) -> sweep.SweepSpec:
        return tiny_spec(problem=sweep.Problem("hdf5", path=path), seeds=1, seeds_per_trial=1)

    on_s3 = sweep.run(spec("s3://datasets/1D_Advection.hdf5"), "s3://sweeps", fs, options)
    assert fs.get_file_info("sweeps/tiny/data_scans.json").type == pafs.FileType.File
    ensemble = sweep.load(on_s3, storage_filesystem=fs)
    on_disk = sweep.load(sweep.run(spec(str(local_file)), str(tmp_path / "runs"), None, options))
    x, _ = on_disk.samples()
    np.testing.assert_array_equal(ensemble.predict(x), on_disk.predict(x))  # trained on the same data
    assert ensemble.normalization == on_disk.normalization


def test_a_file_of_another_layout_or_held_for_writing_gets_what_to_do(tmp_path, monkeypatch):
    with h5py.File(tmp_path / "ns.h5", "w") as f:  # PDEBench's incompressible Navier-Stokes layout
        for name in ("velocity", "particles", "force", "t"):
            f[name] = np.zeros((2, 3), np.float32)
    with pytest.raises(
        sweep.SpecError,
        match=r"ns.h5' is neither a PDEBench nor a The Well file: it holds \['force', 'particles', 't', 'velocity'\].*"
        r"Load other files' states yourself: Problem\('arrays', path=...\) or a data function",
    ):
        hdf5_info(str(tmp_path / "ns.h5"))

    def locked(*args, **kwargs):  # what HDF5 says of a file another process holds open for writing
        raise OSError(11, "Unable to synchronously open file (unable to lock file, errno = 11)")

    monkeypatch.setattr(h5py, "File", locked)
    with pytest.raises(sweep.SpecError, match=r"close it there, or read it anyway with .*HDF5_USE_FILE_LOCKING=FALSE"):
        hdf5_info(str(tmp_path / "ns.h5"))
