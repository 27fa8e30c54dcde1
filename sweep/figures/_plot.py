"""``sweep.plot``: the figures of a sweep by kind, and writing them as PNG, PDF or SVG."""

from __future__ import annotations

import inspect
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from .._errors import QueryError
from .._import_path import is_import_path
from ..ensemble import Ensemble, load
from ._plots import Configs, curves_figure, draw_spread, loss_name, prediction_grid, predictions_figure, splits

KINDS = ("overview", "curves", "spread", "predictions")
FORMATS = (".png", ".pdf", ".svg")


def _kinds(kind: str | tuple | list) -> list[str]:
    kinds = list(KINDS[1:]) if kind == "all" else [kind] if isinstance(kind, str) else list(kind)
    for k in kinds:
        if k not in KINDS:
            hint = "; write files with out=" if isinstance(k, (str, os.PathLike)) and Path(k).suffix else ""
            raise QueryError(f"`kind`: got {k!r}; choose one of {', '.join(KINDS)} or 'all' (or a list){hint}")
    return kinds


def figure_paths(out: str | os.PathLike, kind: str | list[str] | tuple[str, ...]) -> list[Path]:
    """Where :func:`plot` writes the figures of ``kind``: one figure to ``out`` itself; several to
    ``<stem>-<kind><suffix>`` next to it (``figs/heat.pdf`` -> ``figs/heat-curves.pdf``,
    ``figs/heat-spread.pdf``, ``figs/heat-predictions.pdf``)."""
    kinds = _kinds(kind)
    out = Path(out)
    if out.suffix.lower() not in FORMATS:
        raise QueryError(f"`out`: got {str(out)!r}; give a file name ending in {', '.join(FORMATS)} "
                         f"(several figures are written as <name>-<kind><suffix>)")
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


def _samples(ens: Ensemble, config: dict[str, Any], num_samples: int):
    """``(spec, (test_x, test_y, mean, std))`` of the first test samples the store holds, under
    ``config``'s ensemble; or ``(spec, why not)`` (with a warning) where the store holds none or
    the model is built by a factory, code the store names that figures never import."""
    chosen = ens.where(**config)
    spec = chosen.spec
    if is_import_path(spec.model.name):
        reason = (f"the model of config {chosen.index['config_id'][0].as_py()} is built by {spec.model.name!r}, "
                  f"code the store names, and figures never import it; compute predictions with "
                  f"Ensemble.mean_std where that factory is installed")
    else:
        try:
            x, y = (a[:num_samples] for a in chosen.samples())
        except QueryError as e:
            reason = str(e).removeprefix("samples(): ")
        else:
            mean, std = chosen.mean_std(x)
            return spec, (x, y, np.asarray(mean), np.asarray(std))
    warnings.warn(f"predictions left out: {reason}", stacklevel=3)
    return spec, reason


def plot(source: Ensemble | str | os.PathLike, kind: str | list[str] | tuple[str, ...] = "overview", *,
         out: str | os.PathLike | None = None, dpi: int = 200, metric: str | None = None, mode: str = "min",
         num_samples: int = 3, max_curves: int = 200) -> Figure | dict[str, Figure]:
    """The figures of an ensemble (or of the store of a sweep directory).

    ``kind``: ``"curves"`` (every member's learning curves with each configuration's median and
    10-90% band, one panel per split on a shared y axis), ``"spread"`` (the final ``metric``
    over seeds per configuration), ``"predictions"`` (the best configuration's ensemble mean
    ±std against the ground truth on ``num_samples`` of the test samples the store holds, over the
    physical coordinate where the problem knows it; never regenerated, and left out, with a
    warning saying why, for a model a factory builds) or ``"overview"`` (all of it in one figure). One kind returns
    one ``Figure``; ``"all"`` or a list returns ``{kind: Figure}``. Configurations are ordered
    best first by their mean ``metric`` (default: the summary's, the validation loss; ``mode="max"``
    where higher is better), as ``sweep show`` lists them; the best one is the chosen configuration
    whose test curves and predictions are shown (test numbers report the choice, never make it).

    ``out``: also write the figures (``.png``, ``.pdf`` or ``.svg``, at ``dpi`` for PNG): one
    figure to ``out``, several to ``<stem>-<kind><suffix>`` (see :func:`figure_paths`).

    ```python
    fig = sweep.plot("runs/heat")                               # the overview
    figs = sweep.plot(ens, "all", out="figs/heat.pdf")         # figs/heat-curves.pdf, ...
    figs["curves"].axes[0].get_ylabel()                         # 'train loss (mse)'
    ```
    """
    kinds = _kinds(kind)
    paths = figure_paths(out, kinds) if out is not None else None
    ens = source if isinstance(source, Ensemble) else load(source)
    if len(ens) == 0:
        raise QueryError("plot: the ensemble has no members to plot")
    metric = metric or _summary_metric(ens)
    keys = _order(ens, metric, mode)
    need_curves = {"curves", "overview"} & set(kinds)
    curves, totals = _curve_sample(ens, keys, max_curves) if need_curves else (None, None)
    spec, samples = _samples(ens, keys[0], num_samples) if {"predictions", "overview"} & set(kinds) else (None, None)
    figures = {k: _figure(k, ens, keys, curves, totals, spec, samples, metric) for k in kinds}
    if paths is not None:
        for fig, path in zip(figures.values(), paths):
            path.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(path, dpi=dpi)
    return figures[kinds[0]] if isinstance(kind, str) and kind != "all" else figures


def _figure(kind: str, ens: Ensemble, keys, curves, totals, spec, samples, metric: str) -> Figure:
    from ..planning import config_label

    loss = loss_name(ens.where(**keys[0]).spec)
    best = f"best: {config_label(keys[0])}"
    if kind == "curves":
        n = len(splits(curves))
        fig = Figure(figsize=(4.6 * n, 4.2), layout="constrained")
        curves_figure(fig, curves, Configs(keys, curves, totals), loss)
        return fig
    if kind == "spread":
        fig = Figure(figsize=(max(5.0, 1.3 * len(keys) + 2), 4.2), layout="constrained")
        draw_spread(fig.add_subplot(), ens.index, Configs(keys, ens.index), metric)
        return fig
    grid = prediction_grid(spec)
    n = 0 if isinstance(samples, str) else samples[0].shape[0]  # a string says why there are none
    if kind == "predictions":
        fig = Figure(figsize=(4.6 * max(n, 2), 3.8), layout="constrained")
        predictions_figure(fig, samples, best, grid)
        return fig
    n_splits = len(splits(curves))
    cols = max(n_splits + 1, n)
    fig = Figure(figsize=(4.6 * cols, 8.4), layout="constrained")
    cells = fig.add_gridspec(2, cols)
    curves_figure(fig, curves, Configs(keys, curves, totals), loss, [cells[0, i] for i in range(n_splits)])
    draw_spread(fig.add_subplot(cells[0, n_splits:]), ens.index, Configs(keys, ens.index), metric)
    predictions_figure(fig, samples, best, grid, [cells[1, i] for i in range(n)] if n else [cells[1, :]])
    fig.suptitle(f"{len(ens)} members in {len(keys)} configurations")
    return fig
