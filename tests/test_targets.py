"""Targets of any shape: an inverse problem (heat1d fields -> their diffusivity), per-sample
classes, a grid-changing problem with a user model; shapes checked before any work with errors
naming the problem, both shapes and the model; bitwise block invariance for each kind; the store,
predictions and figures of each."""

from __future__ import annotations

import jax
import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from _blocks import datasets_of, trained_blocks
from helpers import assert_same_member, member

import sweep
from sweep._layout import SAMPLES
from sweep.figures import plot
from sweep.planning import make_plan
from sweep.store import aggregate_blocks
from sweep.store._samples import read_sample_file, sample_table, samples_of
from sweep.store._schema import SAMPLES_SCHEMA_FLOAT32
from sweep.training import Shapes

ADAM = sweep.Optimizer("adam", learning_rate=3e-3)
INVERSE = sweep.Problem("inverse:heat_diffusivity", num_points=16, per_level=30)
CLASSES = sweep.Problem("classify:sample_levels", num_samples=240)
FINER = sweep.Problem("upsample:coarse_to_fine", num_coarse=8, num_samples=120)
ENCODER = sweep.Model("ConvEncoder", hidden_channels=8, depth=2, boundary_mode="dirichlet")


def spec_of(problem, model, *, epochs=30, grid=None, seeds=2, **training) -> sweep.SweepSpec:
    return sweep.SweepSpec(
        name="targets",
        problem=problem,
        model=model,
        optimizer=ADAM,
        training=sweep.Training(epochs=epochs, batch_size=16, report_every=epochs // 3, **training),
        seeds=seeds,
        seeds_per_trial=seeds,
        grid=grid or {},
    )


INVERSE_SPEC = spec_of(INVERSE, ENCODER, grid={"optimizer.learning_rate": [3e-5, 3e-3]})
CLASSES_SPEC = spec_of(CLASSES, ENCODER.replace(num_classes=3), epochs=24, loss="cross_entropy", metrics=("accuracy",))
FINER_SPEC = spec_of(FINER, sweep.Model("upsample:upsample2x", hidden=8), epochs=30)


def store_of(spec, tmp_path_factory) -> sweep.Ensemble:
    plan = make_plan(spec)
    path = tmp_path_factory.mktemp("store") / "ensembles"
    aggregate_blocks(path, trained_blocks(plan), plan=plan, datasets=datasets_of(plan))
    return sweep.load(path)


@pytest.fixture(scope="module")
def inverse(tmp_path_factory):
    return store_of(INVERSE_SPEC, tmp_path_factory)


@pytest.fixture(scope="module")
def classes(tmp_path_factory):
    return store_of(CLASSES_SPEC, tmp_path_factory)


def test_inverse_problem_trains_and_ranks_on_validation(inverse):
    data = sweep.load_data(INVERSE_SPEC)
    assert data.sample_shape == (2, 16) and data.target_shape == () and data.train.y.dtype == np.float32
    summary = inverse.summary().to_pylist()
    assert [row["learning_rate"] for row in summary] == [3e-3, 3e-5]  # ranked by validation loss
    means = [row["mean"] for row in summary]
    assert means[0] < means[1] and means[0] < 0.2 * np.var(data.val.y)  # predicting the mean scores the variance
    best = inverse.where(learning_rate=3e-3)
    mean, std = best.mean_std(data.test.x)
    assert mean.shape == std.shape == (data.test.size,)
    assert np.sqrt(np.mean((mean - data.test.y) ** 2)) < 0.45 * np.std(data.test.y)
    y = best.predict(data.test.x[:5])
    assert y.shape == (2, 5)
    for i, row in enumerate(best.table.to_pylist()):  # the ensemble's prediction is its members'
        net = best.member(seed=row["seed"], learning_rate=row["learning_rate"])
        np.testing.assert_allclose(y[i], [net(x) for x in data.test.x[:5]], rtol=1e-5, atol=1e-6)
    x, targets = best.samples()  # the store's test samples, targets of shape () per sample
    np.testing.assert_array_equal(targets, data.test.y[:16])
    assert x.shape == (16, 2, 16) and targets.dtype == np.float32


def test_per_sample_classes_with_cross_entropy_report_accuracy_above_chance(classes):
    data = sweep.load_data(CLASSES_SPEC)
    assert data.target_shape == () and data.train.y.dtype == np.int32
    rows = classes.table.to_pylist()
    assert all(row["test_accuracy"] > 0.6 for row in rows)  # chance: 1/3 (three balanced levels)
    for row in rows:
        assert row["val_loss_history"][-1] < row["val_loss_history"][0]
    best = classes.best(1, metric="val_accuracy", mode="max")
    assert best.predict(data.test.x[:4]).shape == (1, 4, 3)  # logits, classes first
    x, labels = classes.samples()
    assert labels.dtype == np.int32 and labels.shape == (16,)
    np.testing.assert_array_equal(labels, data.test.y[:16])


def test_a_2x_upsampling_user_model_trains_on_a_grid_changing_problem():
    data = sweep.load_data(FINER_SPEC)
    assert data.sample_shape == (1, 8) and data.target_shape == (1, 16)
    model, history = sweep.train_block(FINER_SPEC, [0, 1], data=data)
    assert model.out.weight.shape[0] == 2  # two members stacked
    val = history.val["loss"]
    assert (val[:, -1] < val[:, 0]).all() and (val[:, -1] < 0.05 * np.var(data.val.y)).all()


@pytest.mark.parametrize(
    ("problem", "model", "training", "message"),
    [
        (
            INVERSE,
            sweep.Model("ConvNet", depth=1),
            {},
            r"`model`: ConvNet\(depth=1\) maps one input of shape \(2, 16\) to \(1, 16\); the targets of problem "
            r"'inverse:heat_diffusivity' have shape \(\): pdequinox.arch.ConvNet keeps the inputs' grid; .*ConvEncoder",
        ),
        (
            INVERSE.replace(vector=True),
            ENCODER.replace(out_shape=[3]),
            {},
            r"`model`: ConvEncoder\(.*out_shape=\[3\]\) maps one input of shape \(2, 16\) to \(3,\); the targets of "
            r"problem 'inverse:heat_diffusivity' have shape \(2,\): model.out_shape is \[3\]",
        ),
        (
            FINER,
            sweep.Model("upsample:same_grid"),
            {},
            r"`model`: upsample:same_grid\(\) maps one input of shape \(1, 8\) to \(1, 8\); the targets of problem "
            r"'upsample:coarse_to_fine' have shape \(1, 16\): a factory must build its model for the problem's targets",
        ),
        (
            CLASSES,
            ENCODER,
            {"loss": "cross_entropy"},
            r"`model`: ConvEncoder\(.*\) maps one input of shape \(1, 8\) to \(\), one number per class label of "
            r"problem 'classify:sample_levels' \(targets of shape \(\)\); .* take logits .*set model.num_classes",
        ),
        (
            CLASSES,
            ENCODER.replace(num_classes=2),
            {"loss": "cross_entropy", "metrics": ("accuracy",)},
            r"`training.loss`: 'cross_entropy' needs class indices 0..1 .*model.num_classes.* the train targets hold 2",
        ),
        (
            sweep.Problem("inverse:returns_none"),
            ENCODER,
            {},
            r"`problem.name`: 'inverse:returns_none' returned None; a data function must return four arrays "
            r"\(train_x, train_y, test_x, test_y\) as a tuple, or a mapping",
        ),
        (
            sweep.Problem("inverse:returns_one_array"),
            ENCODER,
            {},
            r"'inverse:returns_one_array' returned an array of shape \(4, 1, 8\) \(float32\); a data function must "
            r"return four arrays",
        ),
        (
            sweep.Problem("inverse:returns_wrong_mapping"),
            ENCODER,
            {},
            r"'inverse:returns_wrong_mapping': got a dict with keys \['testing', 'training'\]; expected four arrays "
            r".*targets y \(samples, \*target_shape\)",
        ),
    ],
)
def test_bad_shapes_and_data_are_named_before_any_work(problem, model, training, message):
    spec = spec_of(problem, model, epochs=3, **training)
    with pytest.raises(sweep.SpecError, match=message):
        sweep.load_data(spec)  # what sweep.run does on the driver before any trial starts


def test_encoder_options_are_checked_when_the_spec_is_built():
    with pytest.raises(sweep.SpecError, match=r"`model.num_classes`: got 1; must be an integer >= 2"):
        ENCODER.replace(num_classes=1)
    with pytest.raises(sweep.SpecError, match=r"`model.out_shape`: got \[0\]; give the shape of one output"):
        ENCODER.replace(out_shape=[0])
    with pytest.raises(sweep.SpecError, match=r"`model.num_classes`: got 3 with out_shape \[3\]; give one"):
        ENCODER.replace(out_shape=[3], num_classes=3)
    with pytest.raises(sweep.SpecError, match=r"`model.width`: not an argument of sweep.models.ConvEncoder"):
        ENCODER.replace(width=3)
    with pytest.raises(sweep.SpecError, match=r"`model.pool`: got 'max'; sweep.models.ConvEncoder takes one of 'mean'"):
        ENCODER.replace(pool="max")


@pytest.mark.parametrize(
    "spec",
    [
        spec_of(INVERSE.replace(vector=True), ENCODER, epochs=4),
        spec_of(CLASSES, ENCODER.replace(num_classes=3), epochs=4, loss="cross_entropy", metrics=("accuracy",)),
        spec_of(FINER, sweep.Model("upsample:upsample2x", hidden=4), epochs=4, metrics=("nrmse",)),
    ],
    ids=["vector", "classes", "finer_grid"],
)
def test_block_invariance_bitwise_with_each_target_kind(spec):
    data = sweep.load_data(spec)
    assert data.val.size > 0
    alone = sweep.train(spec, 5, data=data)
    model, history = sweep.train_block(spec, [9, 5, 2, 4, 7], data=data)
    assert_same_member(model, history, 1, *alone)


def test_samples_table_round_trips_targets_of_any_shape_and_dtype(tmp_path):
    x = np.random.default_rng(0).normal(size=(20, 1, 8)).astype(np.float32)
    cases = {
        "labels": np.arange(20, dtype=np.int64) % 3 + 2**30,  # beyond float32's exact integers
        "vector": np.random.default_rng(1).normal(size=(20, 3)).astype(np.float32),
        "grid": np.random.default_rng(2).normal(size=(20, 2, 4, 4)).astype(np.float32),
    }
    datasets = {name: sweep.problems.as_dataset({"train": (x, y), "test": (x, y)}, name) for name, y in cases.items()}
    fs, path = pafs.LocalFileSystem(), str(tmp_path / SAMPLES)
    pq.write_table(sample_table(datasets), path)
    table = read_sample_file(fs, path, SAMPLES)
    for name, y in cases.items():
        xs, ys = samples_of(table, name, path)
        np.testing.assert_array_equal(xs, x[:16])
        assert ys.dtype == datasets[name].test.y.dtype == (np.int32 if name == "labels" else np.float32)
        np.testing.assert_array_equal(ys, y[:16])


def test_samples_kept_before_targets_of_any_dtype_still_read(tmp_path):
    x = np.ones((2, 1, 4), np.float32)
    rows = [
        {"problem_id": "p", "sample": i, "x": x[i].ravel(), "y": x[i].ravel() * 2, "x_shape": [1, 4], "y_shape": [1, 4]}
        for i in range(2)
    ]
    path = str(tmp_path / SAMPLES)
    pq.write_table(pa.Table.from_pylist(rows, SAMPLES_SCHEMA_FLOAT32), path)
    xs, ys = samples_of(read_sample_file(pafs.LocalFileSystem(), path, SAMPLES), "p", path)
    np.testing.assert_array_equal(xs, x)
    np.testing.assert_array_equal(ys, 2 * x)
    assert ys.dtype == np.float32


def test_parquet_targets_take_their_own_shape(tmp_path):
    rng = np.random.default_rng(0)
    rows = [
        {"x": rng.normal(size=8).tolist(), "y": [int(i % 3)], "split": "train" if i < 16 else "test"} for i in range(20)
    ]
    path = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    data = sweep.problems.load_problem("arrays", {"path": str(path), "shape": [1, 8], "target_shape": []})
    assert data.target_shape == () and data.train.y.dtype == np.int32
    with pytest.raises(sweep.SpecError, match=r"`problem.target_shape`: \[2\] does not fit rows of 1 target values"):
        sweep.problems.load_problem("arrays", {"path": str(path), "shape": [1, 8], "target_shape": [2]})


def test_figures_fit_the_target(inverse, classes, tmp_path_factory):
    fig = plot(inverse, "predictions")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "true target" and ax.get_ylabel() == "predicted target"
    points = [line for line in ax.lines if line.get_marker() == "o"]
    assert len(points) == 1 and len(points[0].get_xdata()) == 16  # every stored test sample, with error bars
    np.testing.assert_array_equal(points[0].get_xdata(), inverse.samples()[1])
    fig = plot(classes, "overview")
    (matrix,) = [ax for ax in fig.axes if ax.images]
    counts = matrix.images[0].get_array()
    assert counts.shape == (3, 3) and counts.sum() == 16 and matrix.get_ylabel() == "true class"
    spread = plot(classes, "spread", metric="val_accuracy").axes[0]  # a score in [0, 1]: a linear axis
    drawn = np.concatenate([c.get_offsets()[:, 1] for c in spread.collections])
    assert spread.get_yscale() == "linear" and len(drawn) == len(classes)
    assert plot(classes, "spread").axes[0].get_yscale() == "log"  # a loss: decades
    grid_spec = spec_of(FINER, sweep.Model("ConvEncoder", hidden_channels=8, depth=1, pool="flatten"), epochs=6)
    finer = store_of(grid_spec, tmp_path_factory)  # a built-in model to a finer grid (its dense head)
    fig = plot(finer, "predictions", num_samples=2)
    assert len(fig.axes) == 2 and fig.axes[0].get_xlabel() == "relative position in the domain"
    lengths = sorted(len(line.get_xdata()) for line in fig.axes[0].lines)
    assert lengths == [8, 16, 16]  # input on its 8 points; truth and ensemble mean on the target's 16


def test_blocks_saved_before_targets_of_any_shape_read_their_shapes():
    """A block checkpoint of an earlier seed-sweep stored (sample_shape, out_channels, num_train)."""
    old = Shapes.of([[1, 16], 1, 40])
    assert old == ((1, 16), (1, 16), 40, "float32", None, 1) and old.target_shape == (1, 16)
    new = Shapes.of([[2, 16], [], 40, "int32"])
    assert Shapes.of(new.stored()) == new and new.target_shape == ()


def test_sweep_run_stores_per_sample_classes_end_to_end(tmp_path):
    """Through sweep.run (in-process: the trials' program is the one Tune trials run): trials train on
    (samples,) integer labels; the store keeps the labels as integers, the members' accuracy, and
    members equal to those trained by train_block."""
    spec = spec_of(CLASSES, ENCODER.replace(num_classes=3), epochs=4, loss="cross_entropy", metrics=("accuracy",))
    ens = sweep.load(sweep.run(spec, storage=str(tmp_path), options=sweep.RunOptions(executor="local")))
    data = sweep.load_data(spec)
    x, labels = ens.samples()
    assert labels.dtype == np.int32 and labels.shape == (16,)
    np.testing.assert_array_equal(labels, data.test.y[:16])
    model, history = sweep.train_block(spec, spec.seed_list, data=data)
    rows = ens.table.to_pylist()
    np.testing.assert_array_equal([r["val_accuracy"] for r in rows], history.val["accuracy"][:, -1])
    alone = np.stack([np.asarray(jax.vmap(member(model, i))(x)) for i in range(2)])
    np.testing.assert_allclose(ens.predict(x), alone, rtol=1e-5, atol=1e-6)  # the store's inference path
