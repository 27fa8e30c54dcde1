"""Figures of a sweep (``sweep plot``), drawn with matplotlib's Agg backend (no display needed).

Panels: train and validation loss curves of every member (thin lines) with each configuration's
median and 10-90% band; the spread over seeds of the final validation metric per configuration
(box + points); and, for the configuration chosen on validation only, its test loss curves, its
final test values beside its validation ones, and its ensemble mean ±std against the ground
truth on a few test samples. A *configuration* is one combination of grid values (structural and
vmapped). Test numbers are shown for the chosen members only: they report the choice, never make it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..store import history_column


def _fmt(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def configurations(table: pa.Table, grid_columns: Sequence[str]) -> list[tuple[dict[str, Any], np.ndarray]]:
    """``(grid values, row indices)`` of every configuration, sorted by the grid values.

    Without grid columns the configurations are the structural ``config_id`` values.
    """
    cols = list(grid_columns) or ["config_id"]
    values = [table.column(c).to_pylist() for c in cols]
    groups: dict[tuple, list[int]] = {}
    for i, key in enumerate(zip(*values)):
        groups.setdefault(key, []).append(i)
    order = sorted(groups, key=lambda key: tuple((v is None, str(type(v)), v if v is not None else 0) for v in key))
    return [(dict(zip(cols, key)), np.asarray(groups[key])) for key in order]


def label(config: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_fmt(v)}" for k, v in config.items())


def _final_values(table: pa.Table, rows: np.ndarray, column: str) -> np.ndarray:
    """Final values of ``column`` of ``rows``; NaN for diverged members (as the summary leaves them out)."""
    values = table.column(column).take(pa.array(rows)).to_pylist()
    losses = np.asarray([np.nan if v is None else v for v in values], np.float64)
    if "status" in table.column_names:
        diverged = np.asarray(table.column("status").take(pa.array(rows)).to_pylist()) == "diverged"
        losses[diverged] = np.nan
    return losses


def _colors(n: int) -> list:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "viridis"]
    return [cmap(i if n <= 10 else i / max(1, n - 1)) for i in range(n)]


def draw_curves(ax: Axes, table: pa.Table, grid_columns: Sequence[str], column: str = "val_loss",
                totals: dict[tuple, int] | None = None, loss: str = "", title: str = "",
                palette: dict[tuple, Any] | None = None) -> None:
    """Every member's curve of ``column`` (thin) plus each configuration's median and 10-90% band.

    ``totals``: members per configuration (by grid values) when ``table`` holds a sample of them;
    ``loss``: the loss's name for the axis label; ``palette``: colours by grid values (default: one
    per configuration here). Members without the curve (no validation set) are left out.
    """
    configs = configurations(table, grid_columns)
    epochs_col = table.column("history_epochs").to_pylist()
    hist_col = table.column(history_column(column)).to_pylist()
    palette = palette or dict(zip((tuple(c.values()) for c, _ in configs), _colors(len(configs))))
    for config, rows in configs:
        color = palette[tuple(config.values())]
        rows = [r for r in rows if hist_col[r] is not None]
        if not rows:
            continue
        by_len: dict[int, list[int]] = {}
        for r in rows:
            by_len.setdefault(len(hist_col[r]), []).append(r)
            ax.plot(epochs_col[r], np.asarray(hist_col[r], np.float64), color=color, lw=0.5, alpha=0.35)
        common = max(by_len.values(), key=len)
        curves = np.asarray([hist_col[r] for r in common], np.float64)
        curves[~np.isfinite(curves)] = np.nan
        x = epochs_col[common[0]]
        if len(x) and np.isfinite(curves).any():
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN epochs of diverged configs
                lo, med, hi = np.nanpercentile(curves, [10, 50, 90], axis=0)
            ax.fill_between(x, lo, hi, color=color, alpha=0.2, lw=0)
            total = (totals or {}).get(tuple(config.values()), len(rows))
            n = f"n={len(rows)}" if total == len(rows) else f"{len(rows)} of {total} shown"
            ax.plot(x, med, color=color, lw=2, label=f"{label(config)} ({n})")
    split = column.partition("_")[0]
    ax.set_xlabel("epoch")
    ax.set_ylabel(f"{split} loss" + (f" ({loss})" if loss else ""))
    ax.set_title(title or f"{split} loss: every member, median and 10-90% band")
    ax.grid(True, which="major", alpha=0.3)
    if ax.lines:
        ax.set_yscale("log")
        ax.legend(fontsize="small")
    else:
        ax.text(0.5, 0.5, f"no {column} curves (no validation set)", ha="center", va="center", transform=ax.transAxes)


def draw_spread(ax: Axes, table: pa.Table, grid_columns: Sequence[str], metric: str = "val_loss",
                chosen: dict[str, Any] | None = None, seed: int = 0, max_points: int = 500) -> None:
    """Final ``metric`` over seeds per configuration: box plot over every member, and the members as
    points (at most ``max_points`` per configuration, drawn at random); for the ``chosen``
    configuration also its members' final test values beside (crosses), reported, not compared."""
    configs = configurations(table, grid_columns)
    rng = np.random.default_rng(seed)
    test = "test_" + metric.removeprefix("val_") if metric.startswith("val_") else None
    data, names = [], []
    for i, ((config, rows), color) in enumerate(zip(configs, _colors(len(configs)))):
        values = _final_values(table, rows, metric)
        finite = values[np.isfinite(values) & (values > 0)]
        bad = values.size - finite.size
        data.append(finite)
        names.append(label(config) + (" (chosen)" if config == chosen else "") + (f"\n({bad} diverged)" if bad else ""))
        points = finite if finite.size <= max_points else rng.choice(finite, max_points, replace=False)
        ax.scatter(i + 1 + rng.uniform(-0.15, 0.15, points.size), points, s=10, color=color, alpha=0.7, zorder=3)
        if config == chosen and test in table.column_names:
            tested = _final_values(table, rows, test)
            tested = tested[np.isfinite(tested) & (tested > 0)]
            ax.scatter(i + 1.3 + rng.uniform(-0.05, 0.05, tested.size), tested, s=14, marker="x", color="black",
                       zorder=4, label=f"{test} of the chosen configuration (not used to choose)")
    ax.boxplot(data, showfliers=False, widths=0.5)
    tilt = len(names) > 3
    ax.set_xticks(range(1, len(names) + 1), names, rotation=20 if tilt else 0, ha="right" if tilt else "center",
                  fontsize="small")
    ax.set_yscale("log")
    ax.set_xlabel("configuration")
    ax.set_ylabel(f"final {metric}")
    ax.set_title(f"{metric} over seeds per configuration")
    ax.grid(True, axis="y", alpha=0.3)
    if any(ax.get_legend_handles_labels()[1]):
        ax.legend(fontsize="x-small")


def draw_prediction(ax: Axes, x: np.ndarray, y: np.ndarray, mean: np.ndarray, std: np.ndarray, title: str) -> None:
    """One test sample: input, ground truth and the ensemble mean ±std (channel 0, flattened)."""
    xi, yi, mi, si = (np.asarray(a, np.float64)[0].ravel() for a in (x, y, mean, std))
    grid = np.arange(yi.size)
    if xi.size == yi.size:
        ax.plot(grid, xi, color="0.6", ls="--", lw=1, label="input")
    ax.plot(grid, yi, color="black", lw=1.5, label="ground truth")
    ax.plot(grid, mi, color="C3", lw=1.5, label="ensemble mean")
    ax.fill_between(grid, mi - si, mi + si, color="C3", alpha=0.3, lw=0, label="±1 std over members")
    ax.set_xlabel("grid point" if np.ndim(y) == 2 else "grid point (flattened)")
    ax.set_ylabel("value")
    ax.set_title(title, fontsize="medium")
    ax.legend(fontsize="x-small")


def config_spec(ens, config: dict[str, Any]):
    """The :class:`SweepSpec` of the structural config that ``config``'s members share."""
    return ens.where(**config).spec


def predictions(ens, config: dict[str, Any], num_samples: int):
    """``(test_x, test_y, mean, std)`` of the first test samples under ``config``'s ensemble."""
    from ..training import load_data

    data = load_data(config_spec(ens, config))
    n = min(num_samples, data.test_x.shape[0])
    mean, std = ens.where(**config).mean_std(data.test_x[:n])
    return data.test_x[:n], data.test_y[:n], np.asarray(mean), np.asarray(std)


def curve_sample(ens, max_curves: int) -> tuple[pa.Table, dict[tuple, int]]:
    """Member rows (with histories) of at most ``max_curves`` members per configuration, evenly
    spaced in store order, and the number of members of each configuration."""
    index = ens.index
    configs = configurations(index, ens.grid_columns)
    totals = {tuple(config.values()): len(rows) for config, rows in configs}
    if all(len(rows) <= max_curves for _, rows in configs):
        return ens.table, totals
    ids = index.column("member_id").to_numpy()
    keep = [ids[rows[np.linspace(0, len(rows) - 1, min(max_curves, len(rows))).astype(int)]] for _, rows in configs]
    return ens.where(member_id=np.concatenate(keep).tolist()).table, totals


def _loss_names(ens) -> str:
    """The loss(es) of the selection's configs, for axis labels (``"mse"``)."""
    configs = ens.index.column("config_id").unique().to_pylist()
    return ", ".join(sorted({ens.where(config_id=c).spec.training.loss for c in configs}))


def sweep_figures(ens, *, panels: bool = False, num_samples: int = 3, max_curves: int = 200,
                  metric: str = "val_loss", mode: str = "min") -> dict[str, Figure]:
    """The figures of ``ens`` (a :class:`sweep.Ensemble`) by name: one figure ``"sweep"`` with every
    panel, or (``panels=True``) ``"curves"``, ``"spread"`` and ``"predictions"``. The chosen
    configuration is ``ens.best_configuration(metric, mode)`` (validation by default); learning
    curves show at most ``max_curves`` members per configuration; the spread uses every member.
    """
    if len(ens) == 0:
        raise ValueError("the ensemble has no members to plot")
    index, grid = ens.index, ens.grid_columns
    best = ens.best_configuration(metric, mode)
    x, y, mean, std = predictions(ens, best, num_samples)
    curves, totals = curve_sample(ens, max_curves)
    chosen, _ = curve_sample(ens.where(**best), max_curves)
    loss = _loss_names(ens)
    n = x.shape[0]
    titles = [f"chosen on {metric}: {label(best)} — test sample {i}" for i in range(n)]
    test_title = "test loss: the chosen configuration only"

    palette = dict(zip(totals, _colors(len(totals))))  # one colour per configuration in every panel

    def draw_all(axes: list[Axes]) -> None:
        draw_curves(axes[0], curves, grid, "train_loss", totals, loss, palette=palette)
        draw_curves(axes[1], curves, grid, "val_loss", totals, loss, palette=palette)
        draw_curves(axes[2], chosen, grid, "test_loss", None, loss, test_title, palette)

    if not panels:
        cols = max(4, n)
        fig = Figure(figsize=(5.5 * cols, 9), layout="constrained")
        spec = fig.add_gridspec(2, cols)
        draw_all([fig.add_subplot(spec[0, i]) for i in range(3)])
        draw_spread(fig.add_subplot(spec[0, 3:]), index, grid, metric, best)
        for i in range(n):
            draw_prediction(fig.add_subplot(spec[1, i]), x[i], y[i], mean[i], std[i], titles[i])
        fig.suptitle(f"{len(ens)} members in {len(totals)} configurations; chosen on {metric}, test shown for the chosen only")
        return {"sweep": fig}
    figures = {"curves": Figure(figsize=(17, 4.5), layout="constrained"),
               "spread": Figure(figsize=(max(6, 1.6 * len(totals) + 2), 4.5), layout="constrained"),
               "predictions": Figure(figsize=(5 * n, 4), layout="constrained")}
    draw_all([figures["curves"].add_subplot(1, 3, i + 1) for i in range(3)])
    draw_spread(figures["spread"].add_subplot(), index, grid, metric, best)
    for i in range(n):
        draw_prediction(figures["predictions"].add_subplot(1, n, i + 1), x[i], y[i], mean[i], std[i], titles[i])
    return figures


def write_figures(figures: dict[str, Figure], out: str | Path) -> list[Path]:
    """Save figures: one figure to ``out`` (a ``.png`` path), several to ``<out><name>.png``."""
    out = str(out)
    paths = [Path(out)] if len(figures) == 1 and out.endswith(".png") else [Path(f"{out}{name}.png") for name in figures]
    for fig, path in zip(figures.values(), paths):
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
    return paths
