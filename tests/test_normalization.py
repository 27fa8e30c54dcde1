"""``Problem(..., normalize=...)``: statistics of the training split only (equal to NumPy's), the
model trained on normalised fields, the statistics in the store, and every query in physical
units (predict, mean_std, rollout, stored samples, export); ``"none"`` changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import equinox as eqx
import jax
import numpy as np
import pytest
from _blocks import datasets_of, trained_blocks
from hdf5_files import pdebench_variables, well_directory
from helpers import tiny_spec

import sweep
from sweep.planning import make_plan
from sweep.problems import Normalization, channel_statistics, load_problem, normalizations_json
from sweep.store import aggregate_blocks

LOCAL = sweep.RunOptions(executor="local")
HEAT = dict(num_points=16, num_samples=24, trajectory_steps=4, data_seed=0)


def some(value):
    """``value``, which must not be None (a problem's trajectories, its normalisation)."""
    assert value is not None
    return value


def numpy_stats(states: np.ndarray, method: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel (shift, scale) of ``states`` ``[n, t, c, *s]`` as NumPy computes them."""
    per_channel = np.moveaxis(states.astype(np.float64), 2, 0).reshape(states.shape[2], -1)
    if method == "zscore":
        return per_channel.mean(1), per_channel.std(1)
    return np.zeros(len(per_channel)), np.sqrt((per_channel**2).mean(1))


@pytest.mark.parametrize("method", ["zscore", "rms"])
def test_statistics_equal_numpys_on_the_training_split_only(tmp_path, method):
    pdebench_variables(tmp_path / "cfd.hdf5", samples=10, time=5, grid=(8, 6))
    options = {"path": str(tmp_path / "cfd.hdf5"), "test_fraction": 0.2, "val_fraction": 0.2}
    raw = load_problem("hdf5", {**options, "normalize": "none"})
    data = load_problem("hdf5", {**options, "normalize": method})
    norm = some(data.normalization)
    assert norm.method == method and norm.channels == ("density", "pressure", "Vx", "Vy")
    shift, scale = numpy_stats(some(raw.train_traj), method)  # the training trajectories, not val or test
    np.testing.assert_allclose(norm.shift, shift, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(norm.scale, scale, rtol=1e-10)
    assert not np.allclose(numpy_stats(np.concatenate([some(raw.train_traj), some(raw.test_traj)]), method)[1], scale)
    spatial = (1, 1)
    for split in ("train", "val", "test"):  # every split, inputs, targets and trajectories
        for a, b in ((some(raw.trajectories(split)), some(data.trajectories(split))), (raw.test.y, data.test.y)):
            expected = (a - shift.reshape(-1, *spatial)) / scale.reshape(-1, *spatial)
            np.testing.assert_allclose(b, expected.astype(np.float32), rtol=1e-5, atol=1e-5)
    if method == "zscore":
        states = np.moveaxis(some(data.train_traj), 2, 0).reshape(4, -1)
        np.testing.assert_allclose(states.mean(1), 0, atol=1e-5)
        np.testing.assert_allclose(states.std(1), 1, rtol=1e-4)


def test_every_kind_takes_normalize_and_none_is_the_default():
    raw = load_problem("heat1d", HEAT)
    assert raw.normalization is None
    assert load_problem("heat1d", {**HEAT, "normalize": "none"}).train.x.tobytes() == raw.train.x.tobytes()
    norm = some(load_problem("heat1d", {**HEAT, "normalize": "zscore"}).normalization)
    assert norm.channels == (0,)
    shift, scale = numpy_stats(some(raw.train_traj), "zscore")
    np.testing.assert_allclose(norm.shift, shift, rtol=1e-10)
    np.testing.assert_allclose(norm.scale, scale, rtol=1e-10)
    # without trajectories: every training input
    pairs = load_problem("heat1d", {"num_points": 16, "num_samples": 24, "normalize": "rms"})
    plain = load_problem("heat1d", {"num_points": 16, "num_samples": 24})
    np.testing.assert_allclose(
        some(pairs.normalization).scale, [np.sqrt((plain.train.x.astype(np.float64) ** 2).mean())]
    )


def test_bad_normalize_refused_naming_the_field(tmp_path):
    with pytest.raises(sweep.SpecError, match=r"`problem.normalize`: got 'minmax'; choose one of 'none', 'zscore'"):
        sweep.Problem("heat1d", normalize="minmax")
    with pytest.raises(sweep.SpecError, match=r"`problem.normalize`: got 'std'"):
        sweep.Problem("hdf5", path=str(tmp_path / "x.hdf5"), normalize="std")
    x, y = np.ones((6, 1, 4), np.float32), np.arange(6, dtype=np.float32)  # vector targets: not fields
    np.savez(tmp_path / "a.npz", train_x=x, train_y=y, test_x=x, test_y=y)
    with pytest.raises(sweep.SpecError, match=r"`problem.normalize`: got 'zscore', but the targets .* shape \(\)"):
        load_problem("arrays", {"path": str(tmp_path / "a.npz"), "normalize": "zscore"})


def test_nan_found_by_the_statistics_pass_names_trajectory_and_time():
    states = np.ones((3, 4, 2, 5), np.float32)
    states[1, 2, 1, 3] = np.nan
    with pytest.raises(sweep.SpecError, match=r"training trajectory 1 holds 1 NaN .* time/sample index 2, channel 'v'"):
        channel_statistics(((f"training trajectory {i}", s) for i, s in enumerate(states)), "zscore", ("u", "v"), "f")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A sweep of a normalised heat1d problem (offset and scaled, so that units matter), run in-process."""
    storage = tmp_path_factory.mktemp("norm")
    problem = sweep.Problem("heat1d", **HEAT, normalize="zscore")
    training = sweep.Training(epochs=4, batch_size=16, report_every=2, metrics=("mse",))
    spec = tiny_spec(name="norm", problem=problem, seeds=3, seeds_per_trial=3, training=training)
    path = sweep.run(spec, storage=str(storage), options=LOCAL)
    return spec, path, sweep.load(path)


def test_predictions_are_in_physical_units(trained):
    spec, _, ens = trained
    data = load_problem("heat1d", dict(spec.problem.options))
    raw = load_problem("heat1d", HEAT)
    norm = some(data.normalization)
    assert ens.normalization == {0: (float(norm.shift[0]), float(norm.scale[0]))}
    x = raw.test.x[:5]
    y = ens.predict(x)
    for i, seed in enumerate(ens.index["seed"].to_pylist()):
        net = ens.member(seed=seed)  # the network itself: normalised fields in and out
        out = jax.vmap(net)(norm.apply(x, 1).astype(np.float32))
        np.testing.assert_allclose(y[i], norm.undo(np.asarray(out), 1), rtol=1e-5, atol=1e-6)
    mean, std = ens.mean_std(x)
    np.testing.assert_allclose(mean, y.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(std, y.std(0), rtol=1e-4, atol=1e-6)
    states = ens.rollout(x, 2)
    np.testing.assert_array_equal(states[:, 0], np.broadcast_to(x, states[:, 0].shape))
    np.testing.assert_allclose(states[:, 1], y, rtol=1e-5, atol=1e-6)
    again = ens.predict(states[0, 1])[0]
    np.testing.assert_allclose(states[0, 2], again, rtol=1e-4, atol=1e-5)


def test_the_statistics_of_a_grid_of_models_on_one_problem_are_its_problems(tmp_path):
    """Configurations of other models on one problem share its statistics; configurations on
    problems normalised otherwise are told apart."""
    problem = sweep.Problem("heat1d", **HEAT, normalize="zscore")
    grid = {"model.depth": [1, 2]}
    ens = sweep.load(sweep.run(tiny_spec(problem=problem, seeds=1, grid=grid), storage=str(tmp_path), options=LOCAL))
    norm = some(load_problem("heat1d", dict(problem.options)).normalization)
    assert ens.normalization == ens.where(depth=2).normalization == {0: (float(norm.shift[0]), float(norm.scale[0]))}
    other = tiny_spec(name="other", seeds=1, problem=problem, grid={"problem.normalize": ["zscore", "rms"]})
    ens = sweep.load(sweep.run(other, storage=str(tmp_path), options=LOCAL))
    with pytest.raises(
        sweep.QueryError,
        match=r"^normalization: the selection's configurations were trained on other problems; select one first, "
        r"e\.g\. \.where\(normalize='rms'\) \(they differ in normalize\)$",
    ):
        _ = ens.normalization
    assert ens.where(normalize="rms").normalization != ens.where(normalize="zscore").normalization


def test_metrics_in_physical_units_and_the_loss_in_normalised_units(trained):
    _, _, ens = trained
    raw = load_problem("heat1d", HEAT)
    scale = some(ens.normalization)[0][1]
    y = ens.predict(raw.test.x)
    rows = ens.table.select(["seed", "test_mse", "test_loss"]).to_pylist()
    for i, row in enumerate(rows):
        mse = float(((y[i].astype(np.float64) - raw.test.y) ** 2).mean())
        np.testing.assert_allclose(row["test_mse"], mse, rtol=1e-4)
        np.testing.assert_allclose(row["test_loss"], mse / scale**2, rtol=1e-4)


def test_the_summary_says_which_units(trained):
    _, _, ens = trained
    note = "units: the loss in the normalised units it is minimised in (zscore per channel"
    assert note in ens.summary().title and some(ens.units_note()).startswith(note)


def test_the_figures_say_the_loss_is_in_normalised_units(trained, tmp_path):
    _, path, _ = trained
    curves = sweep.plot(path, "curves")
    assert [ax.get_ylabel() for ax in curves.axes] == [
        f"{s} loss (mse, normalised units)" for s in ("train", "val", "test")
    ]
    plan = make_plan(tiny_spec(seeds=2, seeds_per_trial=2))  # heat1d as it is: not normalised
    aggregate_blocks(tmp_path / "ensembles", trained_blocks(plan), plan=plan, datasets=datasets_of(plan))
    assert sweep.plot(tmp_path / "ensembles", "curves").axes[0].get_ylabel() == "train loss (mse)"


def test_stored_samples_and_statistics_are_physical_and_checksummed(trained):
    spec, path, ens = trained
    raw = load_problem("heat1d", HEAT)
    x, y = ens.samples()
    np.testing.assert_allclose(x, raw.test.x[: len(x)], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y, raw.test.y[: len(y)], rtol=1e-5, atol=1e-6)
    stored = ens.trajectories()
    np.testing.assert_allclose(stored, some(raw.test_traj)[: len(stored)], rtol=1e-5, atol=1e-6)
    manifest = json.loads(Path(f"{path}/ensembles/manifest.json").read_text())
    assert "normalization.parquet" in manifest["files"]
    assert Path(f"{path}/normalization.parquet").exists()  # the sweep directory keeps them too
    assert sweep.load(path).where(seed=0).normalization == ens.normalization


def test_the_json_of_the_statistics_names_channels_and_one_record_per_config():
    """What an export's manifest and a served model's /info report: one configuration's channels,
    one record per config id for several, null where nothing was normalised."""
    fields = Normalization("zscore", ("density", "vx"), np.array([1.0, 0.0]), np.array([0.5, 2.0]))
    first = Normalization("rms", (0,), np.zeros(1), np.array([3.0]))
    assert normalizations_json({"a": fields}) == {"density": [1.0, 0.5], "vx": [0.0, 2.0]}
    assert normalizations_json({"a": first, "b": None}) == {"a": {"0": [0.0, 3.0]}, "b": None}
    assert normalizations_json({"a": None, "b": None}) is None
    assert json.loads(json.dumps(normalizations_json({"a": fields, "b": first}))) == {
        "a": {"density": [1.0, 0.5], "vx": [0.0, 2.0]},
        "b": {"0": [0.0, 3.0]},
    }


def test_export_speaks_physical_units(trained, tmp_path):
    _, _, ens = trained
    raw = load_problem("heat1d", HEAT)
    out = ens.export(tmp_path / "exp", steps=2)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["normalization"] == {"0": list(some(ens.normalization)[0])}
    mean_std = jax.export.deserialize((out / "mean_std.jaxexport").read_bytes())
    x = raw.test.x[:4]
    mean, std = mean_std.call(x)
    expected = ens.mean_std(x)
    np.testing.assert_allclose(mean, expected[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(std, expected[1], rtol=1e-4, atol=1e-6)
    rollout = jax.export.deserialize((out / "rollout.jaxexport").read_bytes())
    r_mean, _ = rollout.call(x)
    np.testing.assert_allclose(r_mean, ens.rollout_mean_std(x, 2)[0], rtol=1e-4, atol=1e-5)


def test_block_invariance_bitwise_with_normalisation():
    spec = tiny_spec(problem=sweep.Problem("heat1d", **HEAT, normalize="zscore"))
    block, history = sweep.train_block(spec, [0, 1, 2])
    alone, alone_history = sweep.train_block(spec, [1])
    one = jax.tree_util.tree_map(lambda a: a[1], eqx.filter(block, eqx.is_array))
    assert all(
        np.array_equal(a, b[0])
        for a, b in zip(jax.tree_util.tree_leaves(one), jax.tree_util.tree_leaves(eqx.filter(alone, eqx.is_array)))
    )
    np.testing.assert_array_equal(history.train_loss[1], alone_history.train_loss[0])


@pytest.mark.parametrize("split", [{"test_fraction": 0.2, "val_fraction": 0.2, "data_seed": 3}, {"val_fraction": 0}])
def test_the_streamed_statistics_of_a_file_equal_those_of_the_loaded_problem(tmp_path, split):
    pdebench_variables(tmp_path / "cfd.hdf5", samples=10, time=5, grid=(8, 6))
    options = {"time_stride": 2, "space_stride": 2, **split}
    norm = some(sweep.problems.hdf5_statistics(str(tmp_path / "cfd.hdf5"), **options))
    loaded = some(load_problem("hdf5", {"path": str(tmp_path / "cfd.hdf5"), **options}).normalization)
    assert norm.channels == loaded.channels
    np.testing.assert_array_equal(norm.shift, loaded.shift)
    np.testing.assert_array_equal(norm.scale, loaded.scale)
    assert sweep.problems.hdf5_statistics(str(tmp_path / "cfd.hdf5"), normalize="none") is None


def test_the_streamed_statistics_of_the_well_use_train_only(tmp_path):
    states = well_directory(tmp_path / "well", {"train": 2, "valid": 1, "test": 1})
    norm = some(sweep.problems.hdf5_statistics(str(tmp_path / "well")))
    shift, scale = numpy_stats(states["train"], "zscore")
    np.testing.assert_allclose(norm.shift, shift, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(norm.scale, scale, rtol=1e-10)
