"""The figure of each kind of :func:`sweep.plot`: its size and where its panels go (the panels
themselves are drawn by :mod:`._panels`, :mod:`._rollout`, :mod:`._scores` and :mod:`._targets`)."""

from __future__ import annotations

from matplotlib.figure import Figure

from .._words import counted
from ._fields import field_panels, is_field
from ._figure_data import FigureData, channel_name
from ._panels import Configs, curves_figure, draw_spread, loss_name, prediction_grid, predictions_figure, splits
from ._rollout import rollout_error_figure, rollout_figure, rollout_splits, slice_panels
from ._scores import (
    calibration_figure,
    draw_coverage,
    draw_ranks,
    draw_size,
    draw_spread_error,
    ensemble_size_figure,
    spread_skill_figure,
)
from ._targets import panel_count, target_kind, targets_figure

PANELS_PER_ROW = 4  # the predictions figure's panels per row (16 samples and their residuals: 5 rows)
KINDS = (
    "overview",
    "curves",
    "spread",
    "predictions",
    "rollout_error",
    "rollout",
    "calibration",
    "spread_skill",
    "ensemble_size",
)
ROLLOUT_KINDS = ("rollout_error", "rollout")  # in "all" and the overview only where the store has their data
SCORE_KINDS = ("calibration", "spread_skill", "ensemble_size")  # likewise: the stored ensemble scores


SCORE_FIGURES = {
    "calibration": calibration_figure,
    "spread_skill": spread_skill_figure,
    "ensemble_size": ensemble_size_figure,
}


def figure(kind: str, d: FigureData) -> Figure:
    from ..planning import config_label

    normalised = any(d.ens.store.normalization(c) is not None for c in set(d.ens.index["config_id"].to_pylist()))
    loss = loss_name(d.spec) + (", normalised units" if normalised else "")  # metrics: physical units
    chosen_on = "" if d.metric == "val_loss" else f" by {d.metric}"  # the default needs no word
    best = f"best{chosen_on}: {config_label(d.keys[0])}"
    grid = prediction_grid(d.spec)
    if kind == "curves":
        fig = Figure(figsize=(4.6 * len(splits(d.curves)), 4.2), layout="constrained")
        curves_figure(fig, d.curves, Configs(d.keys, d.curves, d.totals), loss)
        return fig
    if kind == "spread":
        fig = Figure(figsize=(max(5.0, 1.3 * len(d.keys) + 2), 4.2), layout="constrained")
        draw_spread(fig.add_subplot(), d.ens.index, Configs(d.keys, d.ens.index), d.metric)
        return fig
    if kind == "rollout_error":
        assert d.rollout_metric is not None  # plot() drops or refuses the kind without one
        fig = Figure(figsize=(4.6 * len(rollout_splits(d.curves, d.rollout_metric)), 4.2), layout="constrained")
        rollout_error_figure(fig, d.curves, Configs(d.keys, d.curves, d.totals), d.rollout_metric)
        return fig
    if kind == "rollout":
        assert d.rolled is not None  # plot() drops or refuses the kind without trajectories
        dims = 0 if isinstance(d.rolled, str) else d.rolled[0].ndim - 2  # spatial axes
        fig = Figure(figsize=(16, {0: 4.2, 1: 8.4}.get(dims, 11.0)), layout="constrained")
        rollout_figure(fig, d.rolled, f"{d.spec.problem.name}, {best}", grid, channel=channel_name(d.ens, d.keys[0]))
        return fig
    if kind in SCORE_FIGURES:
        panels = 1 if kind == "spread_skill" and "rollout" not in d.scores["kind"].to_pylist() else 2
        fig = Figure(figsize=(5.2 * panels, 4.4), layout="constrained")
        SCORE_FIGURES[kind](fig, d.scores, d.keys)
        return fig
    assert d.samples is not None  # plot() reads samples for "predictions" and "overview"
    targets = "same_grid" if isinstance(d.samples, str) else target_kind(d.samples[0], d.samples[1], d.samples[2])
    n = 0 if isinstance(d.samples, str) else panel_count(d.samples, targets)  # a string says why there are none
    if kind == "predictions":
        if targets not in ("same_grid", "grid"):  # value scatters, a confusion matrix: one row
            fig = Figure(figsize=(4.8 * max(n, 1), 4.8), layout="constrained")
            _predictions(fig, d.samples, targets, best, grid, names=d.sample_names)
            return fig
        panels = max(n + 1 if targets == "same_grid" else n, 1)  # same-grid samples get a residual panel
        cols = min(panels, PANELS_PER_ROW)
        rows = -(-panels // cols)
        fig = Figure(figsize=(4.6 * max(cols, 2), 3.8 * rows), layout="constrained")
        cells = fig.add_gridspec(rows, cols)
        places = [cells[i // cols, i % cols] for i in range(panels)]
        _predictions(fig, d.samples, targets, best, grid, places, d.sample_names, channel_name(d.ens, d.keys[0]))
        if not isinstance(d.samples, str) and is_field(d.samples[1][0]):  # images: their titles name no configuration
            fig.suptitle(f"{best}: test samples, ground truth beside the ensemble mean")
        return fig
    n_splits = len(splits(d.curves))
    n_errors = len(rollout_splits(d.curves, d.rollout_metric)) if d.rollout_metric else 0
    fields = d.rolled is not None and not isinstance(d.rolled, str) and d.rolled[0].ndim > 3  # 2D or 3D images
    n_slices = 0 if d.rolled is None else 1 if isinstance(d.rolled, str) else 3 if fields else 2  # at least
    rows = (3 if n_errors or n_slices else 2) + (d.scores is not None)
    cols = max(n_splits + 1, n + 1, n_errors + n_slices, 4 if d.scores is not None else 0)
    # a row that only says why it is empty (a factory's model, no samples) takes a strip
    only_text = [False, isinstance(d.samples, str)]
    only_text += [not n_errors and isinstance(d.rolled, str)] if n_errors or n_slices else []
    heights = [0.35 if text else 1.0 for text in only_text] + [1.0] * (d.scores is not None)
    fig = Figure(figsize=(4.6 * cols, 4.2 * sum(heights)), layout="constrained")
    cells = fig.add_gridspec(rows, cols, height_ratios=heights)
    curves_figure(fig, d.curves, Configs(d.keys, d.curves, d.totals), loss, [cells[0, i] for i in range(n_splits)])
    draw_spread(fig.add_subplot(cells[0, n_splits:]), d.ens.index, Configs(d.keys, d.ens.index), d.metric)
    panels = n + 1 if n and targets == "same_grid" else n  # same-grid samples get a residual panel
    row = cells[1, :].subgridspec(1, panels) if panels else None  # the samples (and residuals) fill the row
    _predictions(
        fig,
        d.samples,
        targets,
        best,
        grid,
        [row[0, i] for i in range(panels)] if row else [cells[1, :]],
        d.sample_names,
        channel_name(d.ens, d.keys[0]),
    )
    if n_errors:  # without time slices the error panels fill the row
        assert d.rollout_metric is not None  # n_errors is 0 without one
        row = cells[2, :].subgridspec(1, n_errors) if not n_slices else None
        places = [row[0, i] if row is not None else cells[2, i] for i in range(n_errors)]
        rollout_error_figure(fig, d.curves, Configs(d.keys, d.curves, d.totals), d.rollout_metric, places)
    if n_slices and fields:  # the reference, mean and std at the last step, as images
        assert d.rolled is not None and not isinstance(d.rolled, str)  # fields says so
        last = d.rolled[0].shape[0] - 1
        places = [(cells[2, n_errors + row], row, last) for row in range(3)]
        field_panels(fig, d.rolled, places, channel_name(d.ens, d.keys[0]))
    elif n_slices:  # the time slices fill the rest of the row
        assert d.rolled is not None  # n_slices is 0 without a rollout
        slice_panels(
            fig,
            d.rolled,
            "best — rollout, ",
            grid,
            [cells[2, n_errors:]] if isinstance(d.rolled, str) else [cells[2, i] for i in range(n_errors, cols)],
            cols - n_errors,
        )
    if d.scores is not None:  # is the spread calibrated? coverage, ranks, spread vs error, CRPS vs members
        last = [fig.add_subplot(cells[rows - 1, i]) for i in range(4)]
        draw_coverage(last[0], d.scores, d.keys)
        draw_ranks(last[1], d.scores, d.keys)
        draw_spread_error(last[2], d.scores, d.keys)
        draw_size(last[3], d.scores, d.keys, "crps", name_configs=False)  # named in the coverage legend
    fig.suptitle(
        f"sweep {d.spec.name!r}, problem {d.spec.problem.name}: {counted(len(d.ens), 'member')} in "
        f"{counted(len(d.keys), 'configuration')} (best first by mean {d.metric.replace('_', ' ')})"
    )
    return fig


def _predictions(
    fig: Figure, samples: tuple | str, targets: str, title: str, grid, cells=None, names=None, channel="channel 0"
) -> None:
    """The predictions panels that fit the targets: the same-grid panels (the samples, then their
    residuals), or those of :mod:`._targets` (value scatters, a confusion matrix, curves over
    another grid)."""
    if isinstance(samples, str) or targets == "same_grid":
        predictions_figure(fig, samples, title, grid, cells, names, channel)
    else:
        targets_figure(fig, samples, targets, title, cells=cells)
