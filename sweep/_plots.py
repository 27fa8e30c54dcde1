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

MEMBER_COLUMNS = {  # members.parquet columns that are not grid values (SPEC §7)
    "member_id", "config_id", "seed", "trial_id", "status", "epochs", "train_loss", "test_loss",
    "train_loss_history", "test_loss_history", "history_epochs",
}


def grid_columns(table: pa.Table) -> list[str]:
    """The columns that hold grid values (every column a member table has beyond the fixed ones)."""
    return [c for c in table.column_names
            if c not in MEMBER_COLUMNS and not pa.types.is_nested(table.schema.field(c).type)]


def _fmt(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def configurations(table: pa.Table) -> list[tuple[dict[str, Any], np.ndarray]]:
    """``(grid values, row indices)`` of every configuration, sorted by the grid values.

    Without grid columns the configurations are the structural ``config_id`` values.
    """
    cols = grid_columns(table) or ["config_id"]
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


def best_configuration(table: pa.Table) -> dict[str, Any]:
    """The configuration with the lowest mean final test loss over its members that did not diverge."""
    best, best_loss = None, np.inf
    for config, rows in configurations(table):
        losses = _final_losses(table, rows)
        losses = losses[np.isfinite(losses)]
        if losses.size and losses.mean() < best_loss:
            best, best_loss = config, losses.mean()
    if best is None:
        raise ValueError("every member diverged (test loss NaN/inf): no configuration to show predictions of")
    return best


def _colors(n: int) -> list:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "viridis"]
    return [cmap(i if n <= 10 else i / max(1, n - 1)) for i in range(n)]


def draw_curves(ax: Axes, table: pa.Table, which: str = "test", totals: dict[tuple, int] | None = None) -> None:
    """Every member's loss history (thin) plus each configuration's median and 10-90% band.

    ``totals``: members per configuration (by grid values) when ``table`` holds a sample of them.
    """
    configs = configurations(table)
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


def draw_spread(ax: Axes, table: pa.Table, seed: int = 0, max_points: int = 500) -> None:
    """Final test loss over seeds per configuration: box plot over every member, and the members
    as points (at most ``max_points`` per configuration, drawn at random)."""
    configs = configurations(table)
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
    from .trainer import load_data

    data = load_data(config_spec(ens, config))
    n = min(num_samples, data.test_x.shape[0])
    mean, std = ens.where(**config).mean_std(data.test_x[:n])
    return data.test_x[:n], data.test_y[:n], np.asarray(mean), np.asarray(std)


def _index(ens) -> pa.Table:
    """The selection's member table without histories (cheap: what ``where`` filters on)."""
    index = getattr(ens, "index", None)
    return index if isinstance(index, pa.Table) else ens._index


def best_of_summary(ens) -> dict[str, Any]:
    """The configuration with the lowest mean test loss in ``ens.summary()`` (as ``sweep show`` ranks)."""
    summary = ens.summary().sort_by([("mean", "ascending")]).to_pylist()
    row = summary[0]
    if not np.isfinite(row["mean"]):
        raise ValueError("every member diverged (test loss NaN/inf): no configuration to show predictions of")
    keys = [k for k in row if k in grid_columns(_index(ens))]
    return {k: row[k] for k in keys} or {"config_id": row["config_id"]}


def curve_sample(ens, max_curves: int) -> tuple[pa.Table, dict[tuple, int]]:
    """Member rows (with histories) of at most ``max_curves`` members per configuration, evenly
    spaced in store order, and the number of members of each configuration."""
    index = _index(ens)
    configs = configurations(index)
    totals = {tuple(config.values()): len(rows) for config, rows in configs}
    if all(len(rows) <= max_curves for _, rows in configs):
        return ens.table, totals
    ids = index.column("member_id").to_numpy()
    keep = [ids[rows[np.linspace(0, len(rows) - 1, min(max_curves, len(rows))).astype(int)]] for _, rows in configs]
    return ens.where(member_id=np.concatenate(keep).tolist()).table, totals


def plot_sweep(ens, out: str | Path, num_samples: int = 3, max_curves: int = 200) -> list[Path]:
    """Write the figures of ``ens`` (a :class:`sweep.ensemble.Ensemble`); returns the PNG paths.

    ``out`` ending in ``.png``: one figure with every panel. Otherwise ``out`` is a prefix of
    ``<out>curves.png``, ``<out>test_loss.png`` and ``<out>predictions.png``. Learning curves
    show at most ``max_curves`` members per configuration; the loss spread uses every member.
    """
    if len(ens) == 0:
        raise ValueError("the ensemble has no members to plot")
    index = _index(ens)
    best = best_of_summary(ens)
    x, y, mean, std = predictions(ens, best, num_samples)
    curves, totals = curve_sample(ens, max_curves)
    n = x.shape[0]
    titles = [f"best: {label(best)} — test sample {i}" for i in range(n)]
    out = str(out)
    if out.endswith(".png"):
        cols = max(3, n)
        fig = Figure(figsize=(5.5 * cols, 9), layout="constrained")
        grid = fig.add_gridspec(2, cols)
        draw_curves(fig.add_subplot(grid[0, 0]), curves, "train", totals)
        draw_curves(fig.add_subplot(grid[0, 1]), curves, "test", totals)
        draw_spread(fig.add_subplot(grid[0, 2:]), index)
        for i in range(n):
            draw_prediction(fig.add_subplot(grid[1, i]), x[i], y[i], mean[i], std[i], titles[i])
        fig.suptitle(f"{len(ens)} members in {len(totals)} configurations")
        return [_save(fig, Path(out))]
    paths = []
    fig = Figure(figsize=(12, 4.5), layout="constrained")
    draw_curves(fig.add_subplot(1, 2, 1), curves, "train", totals)
    draw_curves(fig.add_subplot(1, 2, 2), curves, "test", totals)
    paths.append(_save(fig, Path(f"{out}curves.png")))
    fig = Figure(figsize=(max(6, 1.6 * len(totals) + 2), 4.5), layout="constrained")
    draw_spread(fig.add_subplot(), index)
    paths.append(_save(fig, Path(f"{out}test_loss.png")))
    fig = Figure(figsize=(5 * n, 4), layout="constrained")
    for i in range(n):
        draw_prediction(fig.add_subplot(1, n, i + 1), x[i], y[i], mean[i], std[i], titles[i])
    paths.append(_save(fig, Path(f"{out}predictions.png")))
    return paths


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


__all__: Sequence[str] = ("plot_sweep", "draw_curves", "draw_spread", "draw_prediction", "best_configuration")
