"""Figures of a sweep (``sweep plot``), drawn with matplotlib's Agg backend (no display needed).

Panels: learning curves of every member (thin lines) with each configuration's median and
10-90% band; the spread of final test loss over seeds per configuration (box + points); the
best configuration's ensemble mean ±std against the ground truth on a few test samples.
A *configuration* is one combination of grid values (structural and vmapped).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from matplotlib.axes import Axes
from matplotlib.figure import Figure

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


def _final_losses(table: pa.Table, rows: np.ndarray) -> np.ndarray:
    """Final test losses of ``rows``; NaN for diverged members (as the summary leaves them out)."""
    values = table.column("test_loss").take(pa.array(rows)).to_pylist()
    losses = np.asarray([np.nan if v is None else v for v in values], np.float64)
    if "status" in table.column_names:
        diverged = np.asarray(table.column("status").take(pa.array(rows)).to_pylist()) == "diverged"
        losses[diverged] = np.nan
    return losses


def _colors(n: int) -> list:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "viridis"]
    return [cmap(i if n <= 10 else i / max(1, n - 1)) for i in range(n)]


def draw_curves(ax: Axes, table: pa.Table, grid_columns: Sequence[str], which: str = "test",
                totals: dict[tuple, int] | None = None) -> None:
    """Every member's loss history (thin) plus each configuration's median and 10-90% band.

    ``totals``: members per configuration (by grid values) when ``table`` holds a sample of them.
    """
    configs = configurations(table, grid_columns)
    epochs_col = table.column("history_epochs").to_pylist()
    hist_col = table.column(f"{which}_loss_history").to_pylist()
    for (config, rows), color in zip(configs, _colors(len(configs))):
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
    ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel(f"{which} loss (MSE)")
    ax.set_title(f"{which} loss: every member, median and 10-90% band")
    ax.grid(True, which="major", alpha=0.3)
    if configs:
        ax.legend(fontsize="small")


def draw_spread(ax: Axes, table: pa.Table, grid_columns: Sequence[str], seed: int = 0, max_points: int = 500) -> None:
    """Final test loss over seeds per configuration: box plot over every member, and the members
    as points (at most ``max_points`` per configuration, drawn at random)."""
    configs = configurations(table, grid_columns)
    rng = np.random.default_rng(seed)
    data, names = [], []
    for i, ((config, rows), color) in enumerate(zip(configs, _colors(len(configs)))):
        losses = _final_losses(table, rows)
        finite = losses[np.isfinite(losses) & (losses > 0)]
        bad = losses.size - finite.size
        data.append(finite)
        names.append(label(config) + (f"\n({bad} diverged)" if bad else ""))
        points = finite if finite.size <= max_points else rng.choice(finite, max_points, replace=False)
        ax.scatter(i + 1 + rng.uniform(-0.15, 0.15, points.size), points, s=10, color=color, alpha=0.7, zorder=3)
    ax.boxplot(data, showfliers=False, widths=0.5)
    tilt = len(names) > 3
    ax.set_xticks(range(1, len(names) + 1), names, rotation=20 if tilt else 0, ha="right" if tilt else "center",
                  fontsize="small")
    ax.set_yscale("log")
    ax.set_xlabel("configuration")
    ax.set_ylabel("final test loss (MSE)")
    ax.set_title("test loss over seeds per configuration")
    ax.grid(True, axis="y", alpha=0.3)


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


def sweep_figures(ens, *, panels: bool = False, num_samples: int = 3, max_curves: int = 200) -> dict[str, Figure]:
    """The figures of ``ens`` (a :class:`sweep.Ensemble`) by name: one figure ``"sweep"`` with every
    panel, or (``panels=True``) ``"curves"``, ``"test_loss"`` and ``"predictions"``. Learning curves
    show at most ``max_curves`` members per configuration; the loss spread uses every member.
    """
    if len(ens) == 0:
        raise ValueError("the ensemble has no members to plot")
    index, grid = ens.index, ens.grid_columns
    best = ens.best_configuration()
    x, y, mean, std = predictions(ens, best, num_samples)
    curves, totals = curve_sample(ens, max_curves)
    n = x.shape[0]
    titles = [f"best: {label(best)} — test sample {i}" for i in range(n)]
    if not panels:
        cols = max(3, n)
        fig = Figure(figsize=(5.5 * cols, 9), layout="constrained")
        spec = fig.add_gridspec(2, cols)
        draw_curves(fig.add_subplot(spec[0, 0]), curves, grid, "train", totals)
        draw_curves(fig.add_subplot(spec[0, 1]), curves, grid, "test", totals)
        draw_spread(fig.add_subplot(spec[0, 2:]), index, grid)
        for i in range(n):
            draw_prediction(fig.add_subplot(spec[1, i]), x[i], y[i], mean[i], std[i], titles[i])
        fig.suptitle(f"{len(ens)} members in {len(totals)} configurations")
        return {"sweep": fig}
    figures = {"curves": Figure(figsize=(12, 4.5), layout="constrained"),
               "test_loss": Figure(figsize=(max(6, 1.6 * len(totals) + 2), 4.5), layout="constrained"),
               "predictions": Figure(figsize=(5 * n, 4), layout="constrained")}
    draw_curves(figures["curves"].add_subplot(1, 2, 1), curves, grid, "train", totals)
    draw_curves(figures["curves"].add_subplot(1, 2, 2), curves, grid, "test", totals)
    draw_spread(figures["test_loss"].add_subplot(), index, grid)
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
