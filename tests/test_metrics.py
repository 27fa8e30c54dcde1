"""Losses and metrics: the built-ins against NumPy, names and import paths checked before
work, block invariance for every built-in loss with a validation set, a classifier trained with
cross_entropy reporting accuracy by import path, and metric columns that round-trip into the store."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from helpers import assert_same_member, tiny_spec

import sweep
from sweep import metrics, training
from sweep.store import aggregate_blocks

HEAT = sweep.Problem("heat1d", num_points=16, num_samples=60, val_fraction=0.2, data_seed=0)
CLASSES = sweep.Problem("classify:three_levels", num_samples=100)
FAST = sweep.Training(epochs=2, batch_size=16, report_every=1)


def classifier(**training) -> sweep.SweepSpec:
    return tiny_spec(
        problem=CLASSES,
        model=sweep.Model("MLP", width_size=16, depth=1, out_channels=3),
        optimizer=sweep.Optimizer("adam", learning_rate=1e-2),
        training=sweep.Training(
            **{
                "epochs": 2,
                "batch_size": 16,
                "report_every": 1,
                "loss": "cross_entropy",
                "metrics": ["classify:accuracy"],
                **training,
            }
        ),
    )


def test_builtins_match_numpy_per_sample_then_averaged():
    rng = np.random.default_rng(0)
    pred, target = rng.normal(size=(5, 2, 7)).astype(np.float32), rng.normal(size=(5, 2, 7)).astype(np.float32)
    d = (pred - target).astype(np.float64)
    expected = {
        "mse": np.mean(d**2),
        "mae": np.mean(np.abs(d)),
        "nrmse": np.mean(np.linalg.norm(d.reshape(5, -1), axis=1) / np.linalg.norm(target.reshape(5, -1), axis=1)),
    }
    for name, value in expected.items():
        assert float(metrics.batch_mean(metrics.BUILTINS[name], pred, target)) == pytest.approx(value, rel=1e-5), name
        per_sample = [float(metrics.BUILTINS[name].per_sample(p, t)) for p, t in zip(pred, target)]
        assert np.mean(per_sample) == pytest.approx(value, rel=1e-5), name  # the one-pass batch mean is the same
    logits, labels = rng.normal(size=(5, 3, 7)), rng.integers(0, 3, size=(5, 1, 7))
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    want = -np.mean(np.take_along_axis(logp, labels, axis=1))
    got = metrics.batch_mean(metrics.BUILTINS["cross_entropy"], logits.astype(np.float32), labels.astype(np.float32))
    assert float(got) == pytest.approx(want, rel=1e-5)


@pytest.mark.parametrize(
    "training, message",
    [
        (
            dict(loss="msee"),
            r"`training.loss`: unknown loss 'msee' \(did you mean 'mse'\?\); choose one of mse, mae, nrmse, "
            r"cross_entropy, vrmse, apebench_nrmse, "
            r"spectral_low, spectral_mid, spectral_high or give a function",
        ),
        *(
            (
                dict(loss=score),
                rf"`training.loss`: '{score}' is a score \(higher is better\) and the trainer minimises its loss; "
                rf"choose one of mse, .* and evaluate '{score}' in training.metrics",
            )
            for score in ("correlation", "accuracy", "apebench_correlation")
        ),
        (
            dict(rollout_steps=2, rollout_metrics=["corelation"]),
            r"`training.rollout_metrics\[0\]`: unknown rollout metric 'corelation' \(did you mean 'correlation'\?\); choose one of mse, mae, nrmse, "
            r"vrmse, correlation, apebench_nrmse, apebench_correlation, spectral_low, spectral_mid, spectral_high or give",
        ),
        (dict(metrics=["mse", "rmse"]), r"`training.metrics\[1\]`: unknown metric 'rmse'"),
        (dict(metrics=["nrmse", "nrmse"]), r"`training.metrics\[1\]`: 'nrmse' and 'nrmse' .*; list each metric once$"),
        (
            dict(metrics=["a.b:nrmse", "nrmse"]),
            r"`training.metrics\[1\]`: 'nrmse' and 'a.b:nrmse' .*; give each metric its own function name$",
        ),
        (dict(metrics="mse"), r"`training.metrics`: got 'mse'; give a list of names"),
        (
            dict(metrics=["mse", "other:mse"]),
            r"`training.metrics\[1\]`: 'other:mse' and 'mse' would both be stored as `val_mse`",
        ),
        (dict(metrics=["my.module:loss"]), r"`training.metrics\[0\]`: 'my.module:loss' would be stored as `val_loss`"),
    ],
)
def test_bad_names_are_spec_errors_when_the_spec_is_built(training, message):
    with pytest.raises(sweep.SpecError, match=message):
        sweep.Training(**training)


@pytest.mark.parametrize(
    "training, message",
    [
        (dict(metrics=["no_such_module:f"]), r"`training.metrics\[0\]`: cannot import module 'no_such_module'"),
        (dict(loss="classify:nope"), r"`training.loss`: module 'classify' has no attribute 'nope'$"),
        (dict(metrics=["classify:acuracy"]), r"has no attribute 'acuracy' \(did you mean 'accuracy'\?\)"),
        (
            dict(metrics=["mse", "classify:per_point_error"]),
            r"`training.metrics\[1\]`: 'classify:per_point_error' returned an array of shape \(1, 16\) \(float32\) on one "
            r"sample \(prediction \(1, 16\), target \(1, 16\)\); it must return one real number per sample",
        ),
        (
            dict(loss="classify:needs_three_args"),
            r"`training.loss`: 'classify:needs_three_args' fails on one sample .*TypeError",
        ),
        (
            dict(loss="cross_entropy"),
            r"`training.loss`: 'cross_entropy' needs class indices 0..0 as targets .*set model.out_channels",
        ),
    ],
)
def test_import_paths_and_outputs_are_checked_before_training(training, message):
    spec = tiny_spec(problem=HEAT, training=FAST.replace(**training))
    with pytest.raises(sweep.SpecError, match=message):
        sweep.load_data(spec)  # what sweep.run does on the driver before any trial starts
    with pytest.raises(sweep.SpecError, match=message.split(":")[0]):
        sweep.train_block(spec, [0])


def test_a_prediction_that_does_not_fit_the_loss_is_a_spec_error():
    spec = tiny_spec(problem=HEAT, model=sweep.Model("MLP", width_size=8, depth=1, out_channels=3), training=FAST)
    with pytest.raises(
        sweep.SpecError,
        match=r"`model`: MLP\(width_size=8, depth=1, out_channels=3\) maps one input of shape \(1, 16\) to "
        r"\(3, 16\); the targets of problem 'heat1d' have shape \(1, 16\): model.out_channels is 3",
    ):
        sweep.load_data(spec)


def test_loss_and_metrics_are_part_of_the_structural_config(tmp_path):
    base = tiny_spec(training=FAST)
    others = [base.training.replace(loss="mae"), base.training.replace(metrics=["nrmse"])]
    ids = {base.config_id} | {tiny_spec(training=t).config_id for t in others}
    assert len(ids) == 3
    programs = [sweep.init_block(s, [0])[0].program for s in (base, *(tiny_spec(training=t) for t in others))]
    assert sweep.init_block(tiny_spec(training=FAST), [1])[0].program is programs[0]  # one program per structure
    assert len({id(p) for p in programs}) == 3
    gridded = tiny_spec(training=FAST, grid={"training.loss": ["mse", "mae"]})
    assert [c.training.loss for c, _ in gridded.expand()] == ["mse", "mae"]  # separate trials, not vmapped
    with_metrics = tiny_spec(
        training=base.training.replace(loss="classify:accuracy", metrics=["nrmse", "classify:accuracy"])
    )
    with_metrics.to_toml(tmp_path / "s.toml")
    assert sweep.SweepSpec.from_toml(tmp_path / "s.toml") == with_metrics


@pytest.mark.parametrize("loss", ["mse", "mae", "nrmse", "cross_entropy"])
def test_block_invariance_bitwise_for_every_builtin_loss_with_a_validation_set(loss):
    if loss == "cross_entropy":
        spec = classifier(metrics=["classify:accuracy", "cross_entropy"])
    else:
        spec = tiny_spec(problem=HEAT, training=FAST.replace(loss=loss, metrics=["mse", "mae", "nrmse"]))
    data = sweep.load_data(spec)
    assert data.val.size > 0
    alone = sweep.train(spec, 5, data=data)
    model, history = sweep.train_block(spec, [9, 5, 2, 4, 7], data=data)
    assert_same_member(model, history, 1, *alone)
    assert set(history.val) == {"loss", *(metrics.metric_name(m) for m in spec.training.metrics)}


def test_classifier_trains_with_cross_entropy_and_reports_accuracy(tmp_path):
    spec = dataclasses.replace(classifier(epochs=20, report_every=5), problem=CLASSES.replace(num_samples=300))
    data = sweep.load_data(spec)
    assert (data.train.size, data.val.size, data.test.size) == (210, 30, 60)
    block, state = sweep.init_block(spec, [0, 1])
    *_, (_, history) = sweep.fit(block, state)
    accuracy = history.val["accuracy"]
    assert accuracy.shape == (2, 4) and ((0 <= accuracy) & (accuracy <= 1)).all()
    assert (history.test["accuracy"][:, -1] > 0.7).all()  # guessing the commonest level gets 0.38
    assert (history.val_loss[:, -1] < history.val_loss[:, 0]).all()
    saved = training.SavedBlock(
        spec, block.seeds, block.hparams, training.data_shapes(data), state, history, "t0", False
    )
    ens = sweep.load(aggregate_blocks(tmp_path / "store", [saved]))
    rows = ens.table.to_pylist()
    for i, row in enumerate(rows):  # the user metric by import path, round-tripped into members.parquet
        for split in ("val", "test"):
            assert row[f"{split}_accuracy"] == pytest.approx(float(getattr(history, split)["accuracy"][i, -1]))
            assert row[f"{split}_accuracy_history"] == pytest.approx(getattr(history, split)["accuracy"][i].tolist())
            assert row[f"{split}_loss"] == pytest.approx(float(getattr(history, split)["loss"][i, -1]))
    best = ens.best(1, metric="val_accuracy", mode="max").table.to_pylist()[0]
    assert best["val_accuracy"] == max(r["val_accuracy"] for r in rows)
    logits = ens.best(1).predict(data.test.x[:4])
    assert logits.shape == (1, 4, 3, 8)  # classes on the channel axis


def test_a_score_ranks_highest_first_unless_told_otherwise(tmp_path):
    """``val_accuracy`` (a score, as ``correlation``) ranks highest first wherever no ``mode`` is
    given: summaries, best members and configurations, comparisons, ``sweep show``, a search and
    a race; a loss or an error lowest first; ``mode`` given wins."""
    from _blocks import datasets_of, trained_blocks
    from helpers import invoke

    from sweep.planning import make_plan

    # the structure of the cross_entropy invariance test above, one seed a trial: its member alone's
    # program, not two more (blocks of 2 seeds and of 1)
    one_seed = classifier(epochs=4, metrics=["classify:accuracy", "cross_entropy"])
    spec = dataclasses.replace(one_seed, seeds=3, seeds_per_trial=1, grid={"optimizer.learning_rate": [1e-2, 1e-4]})
    plan = make_plan(spec)
    ens = sweep.load(aggregate_blocks(tmp_path / "s", trained_blocks(plan), plan=plan, datasets=datasets_of(plan)))
    means = [row["mean"] for row in ens.summary("val_accuracy").to_pylist()]
    assert means == sorted(means, reverse=True) and means[0] > means[-1]
    assert [row["mean"] for row in ens.summary("val_accuracy", mode="min").to_pylist()] == means[::-1]
    assert [row["mean"] for row in ens.summary("val_loss").to_pylist()] == sorted(
        ens.summary().column("mean").to_pylist()
    )
    best_lr = ens.summary("val_accuracy").to_pylist()[0]["learning_rate"]
    assert ens.best_configuration("val_accuracy") == {"learning_rate": best_lr}
    accuracies = ens.table.column("val_accuracy").to_pylist()
    assert ens.best(1, "val_accuracy").table.column("val_accuracy").to_pylist() == [max(accuracies)]
    assert ens.best(1, "val_accuracy", mode="min").table.column("val_accuracy").to_pylist() == [min(accuracies)]
    assert ens.compare({"learning_rate": 1e-2}, {"learning_rate": 1e-4}, metric="val_accuracy").mode == "max"
    with pytest.raises(sweep.QueryError, match=r"best\(metric=None\): no column named None"):
        ens.best(1, metric=None)  # a QueryError naming it, not an AttributeError from mode_of
    out = invoke("show", str(tmp_path / "s"), "--metric", "val_accuracy").stdout
    assert "highest mean first" in out, out
    assert metrics.mode_of("test_rollout_valid_steps_correlation") == "max" and metrics.mode_of("val_nrmse") == "min"
    space = {"optimizer.learning_rate": sweep.loguniform(1e-4, 1e-2)}
    search = sweep.Search(space, metric="val_accuracy")
    assert search.direction == "max" and sweep.Search(space).direction == "min"
    assert dataclasses.replace(search, metric="val_loss").direction == "min"  # follows the metric it is given
    assert sweep.Search.from_dict(search.to_dict()) == search and search.mode is None
    race = sweep.Adaptive(metric="val_accuracy")
    assert race.direction == "max" and dataclasses.replace(race, metric="val_loss").direction == "min"
    assert sweep.Adaptive(metric="val_accuracy", mode="min").direction == "min"
