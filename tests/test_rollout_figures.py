"""Rollout figures: the rollout error over steps per configuration (median and 10-90% band over
seeds, validation for all, test for the chosen one), and the chosen configuration's ensemble
rollout against the stored reference trajectory; in the overview and "all" only where the store
has the data, a clear error where a rollout kind is asked for without it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _blocks import TRAJ, trained_blocks, write_sweep
from helpers import OKABE_ITO, assert_one_line_error, best_first, config_label, invoke, tiny_spec
from matplotlib.colors import to_hex

import sweep
from sweep import QueryError
from sweep.planning import make_plan

SCORES = [
    "calibration",
    "spread_skill",
    "ensemble_size",
]  # kinds of the stored ensemble scores, which sweep.aggregate writes


def aggregated(tmp_path_factory, plan):
    """A complete, aggregated sweep directory of ``plan`` (samples and trajectories kept)."""
    root = write_sweep(tmp_path_factory.mktemp("figs") / "sweep", plan, trained_blocks(plan))
    sweep.aggregate(root, progress=False)
    return root


@pytest.fixture(scope="module")
def plain_store(tmp_path_factory):
    """Neither test trajectories nor rollout curves."""
    return aggregated(tmp_path_factory, make_plan(tiny_spec(seeds=2, grid={"model.depth": [1, 2]})))


@pytest.fixture(scope="module")
def traj_store(tmp_path_factory):
    """Test trajectories but no rollout curves (trained without rollout_steps)."""
    return aggregated(tmp_path_factory, TRAJ)


def test_the_rollout_figure_draws_the_chosen_ensemble_against_the_stored_trajectory(traj_store):
    ens = sweep.load(traj_store)
    best = ens.where(**ens.best_configuration())  # chosen on validation
    reference = best.trajectories()[0]
    mean, std = best.rollout_mean_std(reference[None, 0], 5)
    fig = sweep.plot(traj_store, "rollout")
    images, slices = [ax for ax in fig.axes if ax.images], [ax for ax in fig.axes if ax.lines]
    assert [ax.get_title() for ax in images] == ["reference", "ensemble mean", "ensemble std"]
    np.testing.assert_array_equal(images[0].images[0].get_array(), reference[:, 0])
    np.testing.assert_allclose(images[1].images[0].get_array(), mean[:, 0, 0], rtol=1e-6)
    np.testing.assert_allclose(images[2].images[0].get_array(), std[:, 0, 0], rtol=1e-6)
    assert images[0].images[0].get_clim() == images[1].images[0].get_clim()  # one colour scale for both
    low, high = images[0].images[0].get_clim()
    assert low <= min(reference[:, 0].min(), mean[:, 0, 0].min()) and high >= max(reference.max(), mean.max())
    assert images[2].images[0].get_clim() == (0, pytest.approx(std.max()))  # nothing clipped
    bars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert [b.get_ylabel() for b in bars] == ["value (channel 0)"] * 2 + ["std over members (channel 0)"]
    import warnings

    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "constrained_layout not applied": labels would overlap and be cut
        canvas.draw()
    page = fig.bbox
    for bar in bars:  # every colour bar's label inside the figure, clear of the next panel
        box = bar.yaxis.label.get_window_extent(canvas.get_renderer())
        assert page.x0 <= box.x0 and box.x1 <= page.x1, (box, page)
    for bar, right in zip(bars[:2], images[1:], strict=True):
        box = bar.yaxis.label.get_window_extent(canvas.get_renderer())
        assert box.x1 < right.yaxis.label.get_window_extent(canvas.get_renderer()).x0
    assert [ax.get_title() for ax in slices] == [f"step {t} of 5" for t in (1, 2, 4, 5)]
    for ax, t in zip(slices, (1, 2, 4, 5)):
        ref_line, mean_line = ax.lines
        np.testing.assert_array_equal(ref_line.get_ydata(), reference[t, 0])
        np.testing.assert_allclose(mean_line.get_ydata(), mean[t, 0, 0], rtol=1e-6)
        assert to_hex(mean_line.get_color()) == OKABE_ITO[0].lower() and ax.get_xlabel() == "x"
        assert ax.get_ylim() == slices[0].get_ylim()
    assert [t.get_text() for t in slices[0].get_legend().get_texts()] == [
        "reference",
        "ensemble mean",
        "±1 std over members",
    ]


def test_slices_spread_over_the_steps_and_end_at_the_last(traj_store):
    # 5 steps in 4 slices: 5 * (k + 1) / 4 rounds to 1, 2, 4, 5 (the last step always drawn)
    slice_axes = [ax for ax in sweep.plot(traj_store, "rollout").axes if ax.lines]
    assert [ax.get_title() for ax in slice_axes] == [f"step {t} of 5" for t in (1, 2, 4, 5)]


def test_the_overview_and_all_include_the_rollout_where_the_store_has_trajectories(traj_store, plain_store, tmp_path):
    figures = sweep.plot(traj_store, "all")
    assert list(figures) == ["curves", "spread", "predictions", "rollout", *SCORES]  # no rollout curves: no error kind
    overview = sweep.plot(traj_store, num_samples=2)
    titles = [ax.get_title() for ax in overview.axes]
    assert sum("— rollout, step" in t for t in titles) == 4  # the rollout row fills the 4 columns
    assert list(sweep.plot(plain_store, "all")) == ["curves", "spread", "predictions", *SCORES]
    assert not any("rollout" in ax.get_title() for ax in sweep.plot(plain_store).axes)
    result = invoke("plot", traj_store, "--kind", "all", "--out", tmp_path / "f.png", "--dpi", "50")
    assert result.exit_code == 0, result.stderr
    assert str(tmp_path / "f-rollout.png") in result.stdout.split() and (tmp_path / "f-rollout.png").is_file()


def test_a_rollout_kind_without_its_data_is_a_clear_error(plain_store, tmp_path):
    with pytest.raises(QueryError, match=r"plot\(kind='rollout'\): the store holds no test trajectories"):
        sweep.plot(plain_store, "rollout")
    with pytest.raises(
        QueryError,
        match=r"plot\(kind='rollout_error'\): the store has no rollout curves; they are the columns "
        r"val_/test_rollout_<metric>, stored for Training\(rollout_steps=T",
    ):
        sweep.plot(plain_store, ["curves", "rollout_error"])
    assert_one_line_error(
        invoke("plot", plain_store, "--kind", "rollout", "--out", tmp_path / "r.png"),
        "--kind rollout: the store holds no test trajectories",
    )
    assert_one_line_error(
        invoke("plot", plain_store, "--kind", "rollout_error", "--out", tmp_path / "r.png"),
        "--kind rollout_error: the store has no rollout curves",
    )
    assert not (tmp_path / "r.png").exists()


ROLLING = make_plan(
    tiny_spec(
        problem=sweep.Problem("heat1d", num_points=16, num_samples=60, trajectory_steps=5),
        seeds=3,
        seeds_per_trial=3,
        training=sweep.Training(
            epochs=2, batch_size=16, report_every=1, rollout_steps=5, rollout_metrics=("nrmse", "correlation")
        ),
        grid={"model.depth": [1, 2], "optimizer.learning_rate": [3e-3, 1e-3]},
    )
)


@pytest.fixture(scope="module")
def rolling_store(tmp_path_factory):
    """A sweep trained with rollout metrics: the store has rollout curves and test trajectories."""
    return aggregated(tmp_path_factory, ROLLING)


def test_rollout_error_panels_show_the_median_and_band_over_seeds_per_configuration(rolling_store):
    ens = sweep.load(rolling_store)
    keys = best_first(ens)
    val, test = sweep.plot(ens, "rollout_error").axes
    assert val.get_yscale() == test.get_yscale() == "log" and val.get_xlabel() == "autoregressive step"
    assert val.get_ylabel() == "val rollout nrmse" and val.get_ylim() == test.get_ylim()
    medians = [line for line in val.lines if line.get_linewidth() == 2]
    assert [to_hex(m.get_color()) for m in medians] == [c.lower() for c in OKABE_ITO[:4]]  # best first
    assert [t.get_text().split(" (")[0] for t in val.get_legend().get_texts()] == [config_label(k) for k in keys]
    for which, ax in (("val", val), ("test", test)):
        for median, key in zip([m for m in ax.lines if m.get_linewidth() == 2], keys):
            curves = ens.where(**key).table.column(f"{which}_rollout_nrmse").to_pylist()
            np.testing.assert_array_equal(median.get_xdata(), np.arange(1, 6))
            np.testing.assert_allclose(median.get_ydata(), np.median(curves, axis=0))
    assert len(val.lines) == 12 + 4 and len(test.lines) == 3 + 1  # test: the configuration chosen on validation
    assert "best configuration on validation" in test.get_title()


def test_the_overview_of_a_rolling_sweep_has_a_rollout_row_and_all_every_kind(rolling_store, tmp_path):
    assert list(sweep.plot(rolling_store, "all")) == [
        "curves",
        "spread",
        "predictions",
        "rollout_error",
        "rollout",
        *SCORES,
    ]
    titles = [ax.get_title() for ax in sweep.plot(rolling_store, num_samples=1).axes]
    assert titles[-8:-4] == [  # the rollout row, above the ensemble scores' row
        "val rollout nrmse",
        "test rollout nrmse\n(best configuration on validation)",
        "best — rollout, step 2 of 5",
        "best — rollout, step 5 of 5",
    ]
    with pytest.raises(QueryError, match=r"rollout_metric='mse'.*it holds rollout curves of nrmse, correlation"):
        sweep.plot(rolling_store, "rollout_error", rollout_metric="mse")
    with pytest.raises(QueryError, match=r"rollout_metric='nrmes'.* that metric \(did you mean 'nrmse'\?\); it holds"):
        sweep.plot(rolling_store, "rollout_error", rollout_metric="nrmes")
    with pytest.warns(UserWarning, match=r"rollout_metric='nrmse'\): left unused: of these figures \(spread\) none"):
        sweep.plot(rolling_store, "spread", rollout_metric="nrmse")  # drawn with no word, before
    assert_one_line_error(
        invoke("plot", rolling_store, "--rollout-metric", "mse", "--out", tmp_path / "o.png"),
        "--rollout-metric mse: the store has no rollout curves of that metric",
    )
    result = invoke(
        "plot",
        rolling_store,
        "--kind",
        "rollout_error",
        "--rollout-metric",
        "nrmse",
        "--out",
        tmp_path / "e.png",
        "--dpi",
        "50",
    )
    assert result.exit_code == 0 and result.stdout.strip() == f"wrote {tmp_path / 'e.png'}"


def test_an_emulators_predictions_show_different_trajectories_and_their_residuals(tmp_path_factory):
    data = sweep.problems.heat1d(num_points=16, num_samples=60, trajectory_steps=5, data_seed=0)
    path = tmp_path_factory.mktemp("npz") / "traj.npz"
    two = [np.concatenate([t, 2 * t], axis=2) for t in (data.train_traj, data.test_traj)]  # two channels
    np.savez(path, train_traj=two[0], test_traj=two[1])  # pairs derived trajectory by trajectory
    plan = make_plan(tiny_spec(name="emu", problem=sweep.Problem("arrays", path=str(path)), seeds=2))
    root = aggregated(tmp_path_factory, plan)
    ens = sweep.load(root)
    x, y = ens.samples()
    assert np.array_equal(x[1], y[0])  # the stored samples: consecutive states of trajectory 0
    traj = ens.trajectories()
    fig = sweep.plot(root, "predictions", num_samples=3)
    *panels, residual = fig.axes
    assert [ax.get_title().split("\n")[-1] for ax in panels] == [f"test trajectory {k}, step 0→1" for k in range(3)]
    mean, _ = ens.mean_std(traj[:3, 0])
    for k, ax in enumerate(panels):
        truth, drawn = (
            next(x for x in ax.lines if x.get_label() == n).get_ydata() for n in ("ground truth", "ensemble mean")
        )
        np.testing.assert_array_equal(truth, traj[k, 1, 0])
        np.testing.assert_allclose(drawn, mean[k, 0], rtol=1e-6)
        np.testing.assert_allclose(residual.lines[k].get_ydata(), mean[k, 0] - traj[k, 1, 0], rtol=1e-5, atol=1e-7)
    assert [ax.get_ylabel() for ax in panels] == ["value (channel 0 of 2)"] * 3  # which of the channels
    assert residual.get_title() == "residual (±1 std over members) (channel 0 of 2)"
    overview = sweep.plot(root, num_samples=3)
    assert "sweep 'emu', problem arrays" in overview.get_suptitle()
    assert all(ax.has_data() or ax.texts for ax in overview.axes)  # no empty panel
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(overview).draw()  # lays the figure out
    rows: dict[float, list] = {}
    for ax in overview.axes:
        box = ax.get_position()
        rows.setdefault(round(box.y0, 1), []).append(box)
    assert len(rows) == 4  # curves and spread; predictions and residuals; rollout slices; ensemble scores
    spans = []
    for boxes in rows.values():  # every row filled from edge to edge: no empty cell in it
        boxes.sort(key=lambda b: b.x0)
        widths = min(b.width for b in boxes)
        assert all(b.x0 - a.x1 < widths / 2 for a, b in zip(boxes, boxes[1:])), boxes
        spans.append((boxes[0].x0, boxes[-1].x1))
    assert max(s[1] for s in spans) - min(s[1] for s in spans) < 0.05, spans


def test_a_score_is_drawn_on_a_linear_axis_with_the_valid_rollout_threshold(rolling_store):
    ens = sweep.load(rolling_store)
    score, _ = sweep.plot(ens, "rollout_error", rollout_metric="correlation").axes
    error, _ = sweep.plot(ens, "rollout_error", rollout_metric="nrmse").axes
    assert (score.get_yscale(), error.get_yscale()) == ("linear", "log")
    assert [line.get_ydata()[0] for line in score.lines if line.get_linestyle() == "--"] == [0.8]
    lowest = np.nanmin(np.asarray(ens.table["val_rollout_correlation"].to_pylist(), np.float64))
    assert score.get_ylim()[0] <= lowest  # every correlation is on the axis, negative ones too


def test_spread_skill_per_rollout_step_has_whole_step_ticks(tmp_path_factory):
    plan = make_plan(  # 3 steps: matplotlib's own ticks would be 1, 1.5, 2, 2.5, 3
        tiny_spec(
            problem=sweep.Problem("heat1d", num_points=16, num_samples=40, trajectory_steps=3),
            seeds=2,
            seeds_per_trial=2,
            training=sweep.Training(epochs=1, batch_size=16, report_every=1, rollout_steps=3),
        )
    )
    _, per_step = sweep.plot(aggregated(tmp_path_factory, plan), "spread_skill").axes
    assert per_step.get_xlabel() == "rollout step"
    ticks = [t for t in per_step.get_xticks() if per_step.get_xlim()[0] <= t <= per_step.get_xlim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks


def test_the_stored_trajectories_and_samples_of_one_problem_serve_every_structural_config(rolling_store):
    ens = sweep.load(rolling_store)  # two depths: two structural configs of one problem
    assert len(set(ens.index["config_id"].to_pylist())) == 2
    np.testing.assert_array_equal(ens.trajectories(), ens.where(depth=2).trajectories())
    np.testing.assert_array_equal(ens.samples()[0], ens.where(depth=1).samples()[0])


def test_a_rollout_metric_that_is_0_everywhere_is_drawn_on_a_linear_axis_and_said(tmp_path_factory):
    """spectral_high on 8 points: no mode reaches its band, every value is 0, which a log axis
    cannot show (matplotlib warned, and drew empty panels)."""
    pytest.importorskip("exponax")
    problem = sweep.Problem("exponax:Diffusion", num_points=8, num_train=3, num_val=1, num_test=1, test_steps=3)
    training = sweep.Training(
        epochs=1, batch_size=3, report_every=1, rollout_steps=3, rollout_metrics=("spectral_high",)
    )
    root = aggregated(tmp_path_factory, make_plan(tiny_spec(problem=problem, seeds=2, training=training)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "Data has no positive values"
        fig = sweep.plot(root, "rollout_error", rollout_metric="spectral_high")
    panels = [ax for ax in fig.axes if ax.lines]
    assert panels and all(ax.get_yscale() == "linear" for ax in panels)
    assert all(
        "0 at every step:\nthe grid has no modes in this band" in [t.get_text() for t in ax.texts] for ax in panels
    )


def test_2d_fields_are_drawn_as_images_not_as_flattened_lines(tmp_path_factory):
    pytest.importorskip("exponax")
    problem = sweep.Problem(
        "exponax:Diffusion", num_spatial_dims=2, num_points=8, num_train=3, num_val=1, num_test=2, test_steps=3
    )
    training = sweep.Training(epochs=1, batch_size=3, report_every=1)
    plan = make_plan(tiny_spec(problem=problem, seeds=2, seeds_per_trial=2, training=training))
    root = aggregated(tmp_path_factory, plan)
    traj = sweep.load(root).trajectories()[0]  # [4, 1, 8, 8]
    figure = sweep.plot(root, "rollout")
    assert figure.get_suptitle().startswith("exponax:Diffusion, best")  # which problem's rollout it is
    rollout = [ax for ax in figure.axes if ax.images]
    rows = ("reference", "ensemble mean", "ensemble std")
    titles = [ax.get_title().removesuffix(" (clipped)") for ax in rollout]
    assert titles == [f"{row}, step {t}" for row in rows for t in (1, 2, 3)]
    np.testing.assert_array_equal(rollout[1].images[0].get_array(), traj[2, 0])  # the reference at step 2
    # each step's reference range is the scale of its reference and mean (a mean beyond it is clipped),
    # the std's from 0 to its largest value at that step: a field that decays shows its shape at every step
    for t, reference, mean, spread in zip((1, 2, 3), rollout[:3], rollout[3:6], rollout[6:], strict=True):
        scale = (float(traj[t, 0].min()), float(traj[t, 0].max()))
        assert np.allclose(reference.images[0].get_clim(), scale) and np.allclose(mean.images[0].get_clim(), scale)
        shown = mean.images[0].get_array()
        assert mean.get_title().endswith(" (clipped)") == bool(shown.min() < scale[0] or shown.max() > scale[1])
        assert spread.images[0].get_clim() == (0, pytest.approx(float(spread.images[0].get_array().max())))
    predicted = sweep.plot(root, "predictions", num_samples=2)
    imaged = [ax for ax in predicted.axes if ax.images]
    assert [ax.get_title().split("\n")[1 if i % 2 == 0 and i < 4 else 0] for i, ax in enumerate(imaged)] == [
        *(["ground truth", "ensemble mean"] * 2),
        "test trajectory 0, step 0→1",
        "ensemble std",
    ]
    assert predicted.get_suptitle().endswith(": test samples, ground truth beside the ensemble mean")
    assert not any("flattened" in ax.get_xlabel() for ax in predicted.axes)
    overview = sweep.plot(root, num_samples=1)
    assert [ax.get_title() for ax in overview.axes if ax.images][-3:] == [f"{row}, step 3" for row in rows]


def test_an_emulator_with_history_shows_trajectories_and_at_most_the_stored_count(tmp_path_factory):
    """``history=2``: the inputs stack two states; the predictions still step through different
    trajectories (named by the step predicted), and at most 16 samples are drawn (the store's count)."""
    problem = sweep.Problem("heat1d", num_points=16, num_samples=60, trajectory_steps=9, history=2)
    plan = make_plan(tiny_spec(problem=problem, seeds=2, seeds_per_trial=2))
    root = aggregated(tmp_path_factory, plan)
    titles = [ax.get_title() for ax in sweep.plot(root, "predictions", num_samples=20).axes]
    samples = [t.split("\n")[-1] for t in titles if t.startswith("best: ")]
    assert len(samples) == 16, titles
    assert samples[:3] == ["test trajectory 0, step 1→2", "test trajectory 1, step 1→2", "test trajectory 2, step 1→2"]
