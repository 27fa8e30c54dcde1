"""``sweep.plot``: the figures of a sweep by kind, and writing them as PNG, PDF or SVG."""

from __future__ import annotations

import inspect
import os
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from matplotlib.figure import Figure

from .._errors import QueryError
from .._import_path import is_import_path
from ..ensemble import Ensemble, load
from ._plots import Configs, curves_figure, draw_spread, loss_name, prediction_grid, predictions_figure, splits
from ._rollout import rollout_error_figure, rollout_figure, rollout_metrics, rollout_splits, slice_panels
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
FORMATS = (".png", ".pdf", ".svg")


def _kinds(kind: str | tuple | list) -> list[str]:
    kinds: list[str] = list(KINDS[1:]) if kind == "all" else [kind] if isinstance(kind, str) else list(kind)
    for k in kinds:
        if k not in KINDS:
            hint = "; write files with out=" if isinstance(k, (str, os.PathLike)) and Path(k).suffix else ""
            raise QueryError(f"`kind`: got {k!r}; choose one of {', '.join(KINDS)} or 'all' (or a list){hint}")
    return kinds


def figure_paths(out: str | os.PathLike[str], kind: str | list[str] | tuple[str, ...]) -> list[Path]:
    """Where :func:`plot` writes the figures of ``kind``: one figure to ``out`` itself; several to
    ``<stem>-<kind><suffix>`` next to it (``figs/heat.pdf`` -> ``figs/heat-curves.pdf``,
    ``figs/heat-spread.pdf``, ``figs/heat-predictions.pdf``)."""
    kinds = _kinds(kind)
    out = Path(out)
    if out.suffix.lower() not in FORMATS:
        raise QueryError(
            f"`out`: got {str(out)!r}; give a file name ending in {', '.join(FORMATS)} "
            f"(several figures are written as <name>-<kind><suffix>)"
        )
    if len(kinds) == 1:
        return [out]
    return [out.with_name(f"{out.stem}-{k}{out.suffix}") for k in kinds]


def _summary_metric(ens: Ensemble) -> str:
    return inspect.signature(ens.summary).parameters["metric"].default


def _order(ens: Ensemble, metric: str, mode: str) -> list[dict[str, Any]]:
    """Every configuration's grid values, best mean ``metric`` first (as ``sweep show``)."""
    cols = ens.grid_columns or ["config_id"]
    return [{c: row[c] for c in cols} for row in ens.summary(metric, mode).to_pylist()]


def _curve_sample(ens: Ensemble, keys: list[dict[str, Any]], max_curves: int):
    """Member rows (with histories) of at most ``max_curves`` members per configuration, evenly
    spaced in store order, and the number of members of each configuration."""
    index = ens.index
    groups = Configs(keys, index)
    if all(len(rows) <= max_curves for _, rows, _ in groups):
        return ens.table, groups.totals
    ids = index.column("member_id").to_numpy()
    keep = [ids[rows[np.linspace(0, len(rows) - 1, min(max_curves, len(rows))).astype(int)]] for _, rows, _ in groups]
    return ens.where(member_id=np.concatenate(keep).tolist()).table, groups.totals


def _factory(chosen: Ensemble, spec, trust_code: bool = False) -> str | None:
    """Why figures cannot run ``chosen``'s model (built by a factory, code the store names, and
    ``trust_code`` not given), or None."""
    if not is_import_path(spec.model.name) or trust_code:
        return None
    return (
        f"the model of config {chosen.index['config_id'][0].as_py()} is built by {spec.model.name!r}, code the "
        f"store names, and figures never import it unless told to (trust_code=True, `sweep plot --trust-code`) "
        f"where that factory is installed"
    )


def _test_pairs(chosen: Ensemble, num_samples: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``num_samples`` test inputs and targets with their names. Where the stored samples are
    consecutive states of one trajectory (an emulator's pairs, trajectory by trajectory) and the
    store keeps test trajectories, the first step of different trajectories instead."""
    x, y = chosen.samples()
    consecutive = len(x) > 1 and x.shape == y.shape and np.array_equal(x[1], y[0])
    try:
        traj = chosen.trajectories() if consecutive else None
    except QueryError:
        traj = None
    if traj is None:
        return x[:num_samples], y[:num_samples], [f"test sample {i}" for i in range(min(num_samples, len(x)))]
    picks = [(i % len(traj), i // len(traj)) for i in range(min(num_samples, len(traj) * (traj.shape[1] - 1)))]
    names = [f"test trajectory {k}, step {t}→{t + 1}" for k, t in picks]
    return np.stack([traj[k, t] for k, t in picks]), np.stack([traj[k, t + 1] for k, t in picks]), names


def _samples(ens: Ensemble, config: dict[str, Any], num_samples: int, trust_code: bool = False):
    """``(spec, (test_x, test_y, mean, std), names)`` of the first test samples the store holds
    (:func:`_test_pairs`; every one where the targets are values or classes: a scatter or a
    confusion matrix draws them all), under ``config``'s ensemble; or ``(spec, why not, [])`` (with a
    warning) where the store holds none or the model is built by a factory, code the store names
    that figures import only with ``trust_code``."""
    chosen = ens.where(**config)
    spec = chosen.spec
    reason = _factory(chosen, spec, trust_code)
    if reason is None:
        try:
            x, y = chosen.samples()
        except QueryError as e:
            reason = str(e).removeprefix("samples(): ")
        else:
            mean, std = (np.asarray(a) for a in chosen.mean_std(x))
            if target_kind(x, y, mean) not in ("same_grid", "grid"):  # a scatter or a confusion matrix: all
                return spec, (x, y, mean, std), [f"test sample {i}" for i in range(len(x))]
            x, y, names = _test_pairs(chosen, num_samples)
            mean, std = chosen.mean_std(x)
            return spec, (x, y, np.asarray(mean), np.asarray(std)), names
    warnings.warn(f"predictions left out: {reason}", stacklevel=3)
    return spec, reason, []


def _rolled(ens: Ensemble, config: dict[str, Any], named: bool, trust_code: bool = False) -> tuple | str | None:
    """``(reference, mean, std)`` ``[steps + 1, c, *s]``: ``config``'s ensemble rolled out from the
    first state of the first test trajectory the store holds, against it; why not (with a warning)
    where figures cannot run the model; None where the store holds no trajectories (a
    :class:`QueryError` saying so if the ``"rollout"`` kind was ``named``)."""
    chosen = ens.where(**config)
    try:
        reference = chosen.trajectories()[0]
    except QueryError as e:
        if named:
            raise QueryError(f"plot(kind='rollout'): {str(e).removeprefix('trajectories(): ')}") from None
        return None
    reason = _factory(chosen, chosen.spec, trust_code)
    if reason is None:
        try:
            mean, std = chosen.rollout_mean_std(reference[None, 0], reference.shape[0] - 1)
        except QueryError as e:  # a model whose outputs cannot be fed back in
            reason = str(e).removeprefix("rollout_mean_std: ")
        else:
            return reference, mean[:, 0], std[:, 0]
    warnings.warn(f"ensemble rollout left out: {reason}", stacklevel=3)
    return reason


def _rollout_metric(curves, asked: str | None, explicit: bool) -> str | None:
    """The rollout metric drawn (``asked``, else the first the store holds); None if there is none
    and no rollout figure was asked for by name."""
    held = rollout_metrics(curves)
    if asked is not None and asked not in held or asked is None and not held and explicit:
        have = (
            f"it holds rollout curves of {', '.join(held)}"
            if held
            else (
                "it holds none (columns val_/test_rollout_<metric>, stored for Training(rollout_steps=T, "
                "rollout_metrics=(...)))"
            )
        )
        raise QueryError(
            f"plot(rollout_metric={asked!r}): the store has no rollout curves of that metric; {have}"
            if asked is not None
            else f"plot(kind='rollout_error'): the store has no rollout curves; {have}"
        )
    return asked or (held[0] if held else None)


class _Data(NamedTuple):
    """What the figures of one call draw from."""

    ens: Ensemble
    keys: list[dict[str, Any]]  # configurations, best first
    metric: str
    curves: Any  # member rows with histories (a sample of at most max_curves per configuration)
    totals: Any
    spec: Any  # the best configuration's spec
    samples: tuple | str | None  # predictions, or why there are none
    sample_names: list[str]  # what each predicted sample is
    rollout_metric: str | None
    rolled: tuple | str | None  # an ensemble rollout, why there is none, or None: no trajectories
    scores: Any  # the stored ensemble scores, or None: the store has none


def plot(
    source: Ensemble | str | os.PathLike[str],
    kind: str | list[str] | tuple[str, ...] = "overview",
    *,
    out: str | os.PathLike[str] | None = None,
    dpi: int = 200,
    metric: str | None = None,
    mode: str = "min",
    num_samples: int = 3,
    max_curves: int = 200,
    rollout_metric: str | None = None,
    trust_code: bool = False,
) -> Figure | dict[str, Figure]:
    """The figures of an ensemble (or of the store of a sweep directory), as matplotlib Figures.

    Kinds: ``"curves"`` (every member's learning curves with each configuration's median and
    10-90% band, one panel per split on a shared y axis), ``"spread"`` (the final ``metric`` over
    seeds per configuration), ``"predictions"`` (the best configuration's ensemble mean ±std
    against the ground truth on the test samples the store holds, over the physical coordinate
    where the problem knows it; never regenerated, and left out, with a warning saying why, for a
    model a factory builds), ``"rollout_error"`` (each member's rollout curve of
    ``rollout_metric`` over autoregressive steps with each configuration's median and 10-90% band),
    ``"rollout"`` (the best configuration's ensemble rolled out from the first stored test
    trajectory's first state: space-time pictures of the reference, the ensemble mean and std
    for 1D problems, and time slices of the mean ±1 std against the reference),
    ``"calibration"`` (coverage of the members' central 50% and 90% intervals against nominal, and
    the best configuration's rank histogram), ``"spread_skill"`` (spread against the RMSE of the
    ensemble mean per rollout step, with the 1:1 line) and ``"ensemble_size"`` (CRPS and
    spread-skill against the number of members), all three from the stored ensemble scores, on
    the validation split where the store holds it (see :mod:`sweep.figures._scores`), or
    ``"overview"`` (all of it in one figure; the rollout row where the store has rollout curves
    or test trajectories, the scores row where it has ensemble scores). One kind returns one ``Figure``; ``"all"`` (every kind whose data the
    store holds) or a list returns ``{kind: Figure}``. Configurations are ordered best first by
    their mean ``metric`` (default: the summary's, the validation loss; ``mode="max"`` where
    higher is better), as ``sweep show`` lists them; the best one is the chosen configuration
    whose test curves, predictions and rollouts are shown (test numbers report the choice,
    never make it). A rollout kind asked for by name that the store has no data for raises
    :class:`QueryError` saying what is missing.

    Args:
        source: An :class:`Ensemble`, or a sweep directory (or its store) to load.
        kind: A kind above, ``"all"`` (every kind whose data the store holds) or a list of kinds.
        out: Also write the figures (``.png``, ``.pdf`` or ``.svg``): one figure to ``out``,
            several to ``<stem>-<kind><suffix>`` next to it.
        dpi: Resolution of PNG files.
        metric: The member column that ranks (default: the summary's, the validation loss).
        mode: ``"min"`` if lower ``metric`` is better, ``"max"`` if higher.
        num_samples: Test samples shown with the predictions (at most those the store keeps).
        max_curves: Learning curves drawn per configuration (at most, evenly spaced).
        rollout_metric: The rollout metric of ``"rollout_error"`` (default: the first stored).

    Returns:
        One ``Figure`` for one kind, or a dict of figures by kind for ``"all"`` or a list.

    Raises:
        QueryError: A kind asked for by name whose data the store does not hold (saying what is
            missing), or a ``metric`` / ``rollout_metric`` it does not hold.

    Examples:
        ```python
        fig = sweep.plot("runs/heat")  # the overview
        figs = sweep.plot(ens, "all", out="figs/heat.pdf")  # figs/heat-curves.pdf, ...
        figs["curves"].axes[0].get_ylabel()  # 'train loss (mse)'
        ```
    """
    kinds = _kinds(kind)
    if out is not None:
        figure_paths(out, kinds)  # a bad `out` fails before the store is read
    ens = source if isinstance(source, Ensemble) else load(source)
    if len(ens) == 0:
        raise QueryError("plot: the ensemble has no members to plot")
    metric = metric or _summary_metric(ens)
    keys = _order(ens, metric, mode)
    named = set() if kind == "all" else set(kinds)  # kinds asked for by name: their data must be there
    wanted = set(kinds) | (set(ROLLOUT_KINDS) if "overview" in kinds else set())
    curves, totals = (
        _curve_sample(ens, keys, max_curves) if {"curves", "overview", "rollout_error"} & wanted else (None, None)
    )
    r_metric = _rollout_metric(curves, rollout_metric, "rollout_error" in named) if curves is not None else None
    rolled = _rolled(ens, keys[0], "rollout" in named, trust_code) if "rollout" in wanted else None
    named_scores = [k for k in SCORE_KINDS if k in named]
    overview = "overview" in kinds
    scores = _stored_scores(ens, *named_scores[:1]) if overview or set(SCORE_KINDS) & wanted else None
    if kind == "all":  # every kind whose data the store holds
        kinds = [k for k in kinds if (k != "rollout_error" or r_metric) and (k != "rollout" or rolled is not None)]
        kinds = [k for k in kinds if k not in SCORE_KINDS or scores is not None]
    spec, samples, names = (
        _samples(ens, keys[0], num_samples, trust_code)
        if {"predictions", "overview"} & set(kinds)
        else (ens.where(**keys[0]).spec, None, [])
    )
    data = _Data(ens, keys, metric, curves, totals, spec, samples, names, r_metric, rolled, scores)
    figures = {k: _figure(k, data) for k in kinds}
    if out is not None:
        for fig, path in zip(figures.values(), figure_paths(out, kinds)):
            path.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(path, dpi=dpi)
    return figures[kinds[0]] if isinstance(kind, str) and kind != "all" else figures


def _stored_scores(ens: Ensemble, named: str | None = None):
    """The stored ensemble scores of ``ens`` (None where the store has none or scored nothing; a
    :class:`QueryError` saying so if a score figure was ``named``)."""
    try:
        table = ens.stored_scores()
    except QueryError as e:
        if named:
            raise QueryError(f"plot(kind={named!r}): {str(e).removeprefix('stored_scores(): ')}") from None
        return None
    if not table.num_rows and named:
        raise QueryError(
            f"plot(kind={named!r}): the store scored none of these configurations (see the warnings of `sweep aggregate`)"
        )
    return table if table.num_rows else None


SCORE_FIGURES = {
    "calibration": calibration_figure,
    "spread_skill": spread_skill_figure,
    "ensemble_size": ensemble_size_figure,
}


def _figure(kind: str, d: _Data) -> Figure:
    from ..planning import config_label

    loss = loss_name(d.spec)
    best = f"best: {config_label(d.keys[0])}"
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
        one_d = not isinstance(d.rolled, str) and d.rolled[0].ndim == 3
        fig = Figure(figsize=(16, 8.4 if one_d else 4.2), layout="constrained")
        rollout_figure(fig, d.rolled, best, grid)
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
        curves = targets in ("same_grid", "grid")
        panels = n + 1 if targets == "same_grid" else n  # same-grid samples get a residual panel
        fig = Figure(figsize=(4.6 * max(panels, 2), 3.8) if curves else (4.8 * max(n, 1), 4.8), layout="constrained")
        _predictions(fig, d.samples, targets, best, grid, names=d.sample_names)
        return fig
    n_splits = len(splits(d.curves))
    n_errors = len(rollout_splits(d.curves, d.rollout_metric)) if d.rollout_metric else 0
    n_slices = 0 if d.rolled is None else 1 if isinstance(d.rolled, str) else 2  # at least
    rows = (3 if n_errors or n_slices else 2) + (d.scores is not None)
    cols = max(n_splits + 1, n + 1, n_errors + n_slices, 4 if d.scores is not None else 0)
    fig = Figure(figsize=(4.6 * cols, 4.2 * rows), layout="constrained")
    cells = fig.add_gridspec(rows, cols)
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
    )
    if n_errors:  # without time slices the error panels fill the row
        assert d.rollout_metric is not None  # n_errors is 0 without one
        row = cells[2, :].subgridspec(1, n_errors) if not n_slices else None
        places = [row[0, i] if row is not None else cells[2, i] for i in range(n_errors)]
        rollout_error_figure(fig, d.curves, Configs(d.keys, d.curves, d.totals), d.rollout_metric, places)
    if n_slices:  # the time slices fill the rest of the row
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
        draw_size(last[3], d.scores, d.keys, "crps")
    fig.suptitle(
        f"sweep {d.spec.name!r}, problem {d.spec.problem.name}: {len(d.ens)} members in "
        f"{len(d.keys)} configurations (best first by mean {d.metric.replace('_', ' ')})"
    )
    return fig


def _predictions(fig: Figure, samples: tuple | str, targets: str, title: str, grid, cells=None, names=None) -> None:
    """The predictions panels that fit the targets: the same-grid panels (the samples, then their
    residuals), or those of :mod:`._targets` (value scatters, a confusion matrix, curves over
    another grid)."""
    if isinstance(samples, str) or targets == "same_grid":
        predictions_figure(fig, samples, title, grid, cells, names)
    else:
        targets_figure(fig, samples, targets, title, cells=cells)
