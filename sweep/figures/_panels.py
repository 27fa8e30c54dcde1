"""Drawing the figures of a sweep with matplotlib (no display needed: plain ``Figure`` objects).

Panels: learning curves of every member (thin lines) with each configuration's median and
10-90% band, one panel per split on a shared y axis; the spread of the final loss over seeds
per configuration (box + points); the best configuration's ensemble mean ±std against the ground
truth on a few test samples, over the physical coordinate where the problem knows it.

A *configuration* is one combination of grid values (structural and vmapped). Configurations
are ordered best-first as in the summary table (``sweep show``) and keep one colour of the
Okabe-Ito palette (colour-blind safe) in every panel; past eight, viridis.

Figures draw only from what the store holds: the tables, the test samples stored at
aggregation, and members' weights in a model rebuilt from a built-in architecture (or from a
factory the store names, only with ``trust_code``). They never regenerate data, and without
``trust_code`` never import a model factory a store names, so plotting a store someone sent runs
none of its code; where predictions would need that, the panel says so instead.
"""

from __future__ import annotations

import textwrap
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatterSciNotation, MaxNLocator, MultipleLocator

from ..metrics import mode_of
from ..planning import config_label
from ..problems import coordinates
from ._fields import field_prediction, field_residual, is_field

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
SPLITS = ("train", "val", "test")  # learning-curve panels, where the store holds the split's history
RESIDUAL_SHADES = ("0.0", "0.45", "0.7")  # one per sample in the residual panel (greys)
RESIDUAL_STYLES = ("-", "--", ":", "-.")
LEGEND_SAMPLES = 6  # the residual panel names its samples in a legend up to this many


class Configs:
    """Configurations (grid values) best first, each with its rows in a table and its colour."""

    def __init__(self, keys: list[dict[str, Any]], table: pa.Table, totals: dict[tuple, int] | None = None):
        cols = list(keys[0])
        rows: dict[tuple, list[int]] = {}
        for i, key in enumerate(zip(*(table.column(c).to_pylist() for c in cols))):
            rows.setdefault(key, []).append(i)
        n = len(keys)
        colors = list(OKABE_ITO[:n]) if n <= len(OKABE_ITO) else [_viridis(i / (n - 1)) for i in range(n)]
        self.items = [
            (k, np.asarray(rows[tuple(k.values())]), colors[i]) for i, k in enumerate(keys) if tuple(k.values()) in rows
        ]
        self.totals = totals or {tuple(k.values()): len(r) for k, r, _ in self.items}

    def __iter__(self):
        return iter(self.items)

    @classmethod
    def only(cls, configs: Configs, n: int) -> Configs:
        """The first ``n`` configurations of ``configs`` (same rows and colours)."""
        out = cls.__new__(cls)
        out.items, out.totals = configs.items[:n], configs.totals
        return out

    def __len__(self) -> int:
        return len(self.items)


def _viridis(x: float):
    from matplotlib import colormaps

    return colormaps["viridis"](x)


def label(config: dict[str, Any]) -> str:
    return config_label(config)


def _integer_epochs(ax: Axes) -> None:
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def report_ticks(ax: Axes, epochs: list, max_ticks: int = 8) -> None:
    """Epoch ticks on report epochs: multiples of the report interval (the smallest gap between
    reported epochs), every k-th one so that at most about ``max_ticks`` are drawn."""
    reported = sorted({int(e) for row in epochs if row is not None for e in row})
    gaps = np.diff(reported)
    if len(reported) == 1:  # one report: its epoch alone, the dots beside it in view
        ax.set_xticks(reported)
        ax.set_xlim(reported[0] - 0.5, reported[0] + 0.5)
        return
    if len(reported) < 2 or gaps.min() < 1:
        _integer_epochs(ax)
        return
    every = int(gaps.min())
    stride = max(1, int(np.ceil((reported[-1] / every) / max_ticks)))
    ax.xaxis.set_major_locator(MultipleLocator(every * stride))


def draw_bands(ax: Axes, xs: list, ys: list, configs: Configs, log: bool = True) -> None:
    """Every row's curve ``ys[r]`` over ``xs[r]`` (thin; ``None``: the row has none) plus each
    configuration's median and 10-90% band over its rows, at the most common curve length; log y
    unless ``log=False``."""
    for i, (config, rows, color) in enumerate(configs):
        rows = [r for r in rows if ys[r] is not None]  # null: this config has no such curve
        if not rows:
            continue
        # a curve of one report is a dot (a line draws nothing), the configurations' dots side by side
        beside = (i - (len(configs) - 1) / 2) * min(0.1, 0.6 / len(configs))
        by_len: dict[int, list[int]] = {}
        for r in rows:
            by_len.setdefault(len(ys[r]), []).append(r)
            x = np.asarray(xs[r], np.float64) + (beside if len(ys[r]) == 1 else 0)
            ax.plot(x, np.asarray(ys[r], np.float64), color=color, lw=0.5, alpha=0.35, marker=_dot(x), ms=3)
        common = max(by_len.values(), key=len)
        curves = np.asarray([ys[r] for r in common], np.float64)
        curves[~np.isfinite(curves)] = np.nan
        x = np.asarray(xs[common[0]], np.float64) + (beside if curves.shape[1] == 1 else 0)
        if len(x) and np.isfinite(curves).any():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN points of diverged configs
                lo, med, hi = np.nanpercentile(curves, [10, 50, 90], axis=0)
            total = configs.totals.get(tuple(config.values()), len(rows))
            n = f"n={len(rows)}" if total == len(rows) else f"{len(rows)} of {total} shown"
            if len(x) == 1:  # the 10-90% range as an error bar
                ax.errorbar(x, med, [med - lo, hi - med], color=color, marker="o", capsize=4, lw=2)
            else:
                ax.fill_between(x, lo, hi, color=color, alpha=0.2, lw=0)
            ax.plot(x, med, color=color, lw=2, marker=_dot(x), label=f"{label(config)} ({n})")
    if log:
        log_y(ax)
    ax.grid(True, which="major", alpha=0.3)


class _PlainLog(LogFormatterSciNotation):
    """Labels the ticks matplotlib's log formatter labels, as plain numbers (``0.3``, not
    ``3×10⁻¹``: an axis within a decade labels its minor ticks too)."""

    def __call__(self, x: float, pos: int | None = None) -> str:
        return f"{x:.6g}" if super().__call__(x, pos) else ""


def log_y(ax: Axes) -> None:
    """A log y axis labelled with plain numbers."""
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(_PlainLog())
    ax.yaxis.set_minor_formatter(_PlainLog(labelOnlyBase=False, minor_thresholds=(2, 0.4)))


def _dot(points: Any) -> str | None:
    """``"o"`` for a curve of one point (a line through it draws nothing), else None."""
    return "o" if len(points) == 1 else None


def draw_curves(ax: Axes, table: pa.Table, configs: Configs, which: str, loss: str) -> None:
    """Every member's ``which`` loss history (thin) plus each configuration's median and 10-90% band."""
    draw_bands(
        ax, table.column("history_epochs").to_pylist(), table.column(f"{which}_loss_history").to_pylist(), configs
    )
    ax.set_xlabel("epoch")
    ax.set_ylabel(f"{which} loss ({loss})")
    ax.set_title(f"{which} loss")
    epochs = table.column("history_epochs").to_pylist()
    report_ticks(ax, epochs)
    reported = {int(e) for row in epochs if row is not None for e in row}
    if len(reported) == 1 and all(row is None or len(row) <= 1 for row in epochs):  # dots: say why
        how = "train more than one epoch" if reported == {1} else "set training.report_every\nbelow training.epochs"
        ax.set_xlabel(f"epoch (one report per member;\n{how} for curves)")


def draw_spread(ax: Axes, table: pa.Table, configs: Configs, metric: str, seed: int = 0, max_points: int = 500) -> None:
    """Final ``metric`` over seeds per configuration, best first: a box over every member and the
    members as points (at most ``max_points`` per configuration, drawn at random)."""
    rng = np.random.default_rng(seed)
    data, names, colors = [], [], []
    for i, (config, rows, color) in enumerate(configs):
        losses = _final(table, rows, metric)
        finite = losses[np.isfinite(losses)]
        bad = losses.size - finite.size
        data.append(finite)
        colors.append(color)
        names.append(
            "\n".join(f"{v:g}" if isinstance(v, float) else str(v) for v in config.values())
            + (f"\n({bad} diverged)" if bad else "")
        )
        points = finite if finite.size <= max_points else rng.choice(finite, max_points, replace=False)
        ax.scatter(
            i + 1 + rng.uniform(-0.15, 0.15, points.size), points, s=10, color=color, alpha=0.8, zorder=3, linewidths=0
        )
    ax.boxplot(
        data,
        showfliers=False,
        widths=0.5,
        medianprops={"color": "black", "lw": 1.5},
        boxprops={"color": "0.3"},
        whiskerprops={"color": "0.3"},
        capprops={"color": "0.3"},
    )
    ax.set_xticks(range(1, len(names) + 1), names, fontsize="small")
    for tick, color in zip(ax.get_xticklabels(), colors):
        tick.set_color(color)
    if mode_of(metric) == "min" and all((d > 0).all() for d in data):  # errors over decades; scores such
        log_y(ax)  # as accuracy or a correlation (<= 1, maybe <= 0) on a linear axis
    keys = list(configs.items[0][0]) if len(configs) else []
    ax.set_xlabel(f"{', '.join(keys)} (best first)")
    ax.set_ylabel(f"final {metric.replace('_', ' ')}")
    ax.set_title(f"{metric.replace('_', ' ')} over seeds")
    ax.grid(True, axis="y", alpha=0.3)


def _final(table: pa.Table, rows: np.ndarray, metric: str) -> np.ndarray:
    """Final ``metric`` of ``rows``; NaN for diverged members (as the summary leaves them out)."""
    values = table.column(metric).take(pa.array(rows)).to_pylist()
    losses = np.asarray([np.nan if v is None else v for v in values], np.float64)
    if "status" in table.column_names:
        diverged = np.asarray(table.column("status").take(pa.array(rows)).to_pylist()) == "diverged"
        losses[diverged] = np.nan
    return losses


def draw_prediction(
    ax: Axes,
    x: np.ndarray,
    y: np.ndarray,
    mean: np.ndarray,
    std: np.ndarray,
    title: str,
    grid: np.ndarray | None = None,
    channel: str = "channel 0",
) -> None:
    """One test sample: input, ground truth and the ensemble mean ±std (channel 0, flattened;
    ``channel``: its name where the data name it),
    over ``grid`` (physical positions) where known, else over the point index."""
    xi, yi, mi, si = (np.asarray(a, np.float64)[0].ravel() for a in (x, y, mean, std))
    physical = grid is not None and np.size(grid) == yi.size
    points = np.asarray(grid, np.float64) if physical else np.arange(yi.size)
    if xi.size == yi.size:
        ax.plot(points, xi, color="0.6", ls="--", lw=1, label="input")
    ax.plot(points, yi, color="black", lw=1.5, label="ground truth")
    ax.plot(points, mi, color=OKABE_ITO[0], lw=1.5, label="ensemble mean")
    ax.fill_between(points, mi - si, mi + si, color=OKABE_ITO[0], alpha=0.3, lw=0, label="±1 std over members")
    ax.set_xlabel("x" if physical else ("grid point" if np.ndim(y) == 2 else "grid point (flattened)"))
    ax.set_ylabel(_first_channel("value" if channel == "channel 0" else channel, np.shape(y)[0]))
    ax.set_title(title, fontsize="medium")


def prediction_grid(spec) -> np.ndarray | None:
    """Physical coordinates of a spec's samples (1-D problems that know them), else None."""
    return coordinates(spec.problem.name, dict(spec.problem.options))


def loss_name(spec) -> str:
    return spec.training.loss


def splits(table: pa.Table) -> list[str]:
    """The splits whose loss curves the table holds for some member (no validation set: null)."""
    return [
        s
        for s in SPLITS
        if f"{s}_loss_history" in table.column_names and table.column(f"{s}_loss_history").null_count < table.num_rows
    ]


def curves_figure(
    fig: Figure, table: pa.Table, configs: Configs, loss: str, cells: Sequence | None = None
) -> list[Axes]:
    """One learning-curve panel per split on a shared y axis; the legend in the first one (see
    :func:`split_panels`)."""
    return split_panels(
        fig, splits(table), configs, lambda ax, which, shown: draw_curves(ax, table, shown, which, loss), cells
    )


def split_panels(fig: Figure, names: list[str], configs: Configs, draw, cells: Sequence | None = None) -> list[Axes]:
    """One panel per split of ``names`` (``draw(ax, split, configs)``) on a shared y axis; the legend
    in the first one.

    Where there is a validation split, configurations are compared on it and the test panel
    shows the best configuration only: test curves report the choice, never make it.
    """
    axes: list[Axes] = []
    for i, which in enumerate(names):
        where = cells[i] if cells is not None else (1, len(names), i + 1)
        ax = fig.add_subplot(*where) if isinstance(where, tuple) else fig.add_subplot(where)
        if axes:
            ax.sharey(axes[0])
            ax.tick_params(labelleft=True)
        chosen_only = which == "test" and "val" in names
        draw(ax, which, Configs.only(configs, 1) if chosen_only else configs)
        if chosen_only:
            ax.set_title(f"{ax.get_title()}\n(best configuration on validation)", fontsize=ax.title.get_fontsize())
        axes.append(ax)
    if axes:
        axes[0].legend(fontsize="small", loc="best", framealpha=0.9)
    return axes


def draw_missing(ax: Axes, reason: str, what: str = "No predictions") -> None:
    """An empty panel saying why there is nothing to draw (``what``: what is missing)."""
    ax.axis("off")
    ax.text(
        0.5,
        0.5,
        textwrap.fill(f"{what}: {reason}", 90),
        ha="center",
        va="center",
        fontsize="medium",
        transform=ax.transAxes,
    )


def draw_residuals(
    ax: Axes, y: np.ndarray, mean: np.ndarray, std: np.ndarray, names: Sequence[str], grid: np.ndarray | None = None
) -> None:
    """The ensemble mean minus the ground truth of every sample (channel 0, flattened), each with
    its ±1 std band over members, around a zero line; samples told apart by shade and line style
    (the colours belong to the configurations)."""
    size = np.asarray(y[0])[0].size
    physical = grid is not None and np.size(grid) == size
    points = np.asarray(grid, np.float64) if physical else np.arange(size)
    for i, name in enumerate(names):
        yi, mi, si = (np.asarray(a[i], np.float64)[0].ravel() for a in (y, mean, std))
        color, style = RESIDUAL_SHADES[i % len(RESIDUAL_SHADES)], RESIDUAL_STYLES[i % len(RESIDUAL_STYLES)]
        ax.plot(points, mi - yi, color=color, ls=style, lw=1.3, label=name)
        ax.fill_between(points, mi - yi - si, mi - yi + si, color=color, alpha=0.15, lw=0)
    ax.axhline(0.0, color="black", lw=0.8)
    ax.set_xlabel("x" if physical else ("grid point" if np.ndim(y[0]) == 2 else "grid point (flattened)"))
    ax.set_ylabel("ensemble mean − ground truth")  # the channel in the title: the label is long already
    many = len(names) > LEGEND_SAMPLES  # shades and styles repeat: a legend would name no line apart
    what = f"residuals of {len(names)} samples" if many else "residual"
    ax.set_title(_first_channel(f"{what} (±1 std over members)", np.shape(y[0])[0]), fontsize="medium")
    if not many:
        ax.legend(fontsize="x-small", loc="best")


def predictions_figure(
    fig: Figure,
    samples: tuple | str,
    title: str,
    grid,
    cells: Sequence | None = None,
    names: Sequence[str] | None = None,
    channel: str = "channel 0",
) -> list[Axes]:
    """One panel per test sample, then one panel of their residuals (mean minus truth);
    ``samples`` is ``(x, y, mean, std)``, or the reason there are none (one panel saying so, in
    the first cell). ``names``: what each sample is (default ``test sample i``); ``cells``: one
    per sample plus one for the residuals. 2D and 3D fields (``channel``: what channel 0 holds)
    are images: a sample's ground truth beside the ensemble mean, and the first sample's mean
    minus truth beside the ensemble std (:mod:`._fields`)."""
    if isinstance(samples, str):
        where = cells[0] if cells is not None else (1, 1, 1)
        ax = fig.add_subplot(*where) if isinstance(where, tuple) else fig.add_subplot(where)
        draw_missing(ax, samples)
        return [ax]
    x, y, mean, std = samples
    n = x.shape[0]
    names = list(names) if names is not None else [f"test sample {i}" for i in range(n)]
    if is_field(y[0]):  # 2D and 3D fields: images, not lines over flattened points
        if cells is None:
            row = fig.add_gridspec(1, n + 1)
            cells = [row[0, i] for i in range(n + 1)]
        images = [field_prediction(fig, cells[i], y[i], mean[i], names[i], channel) for i in range(n)]
        return [ax for pair in images for ax in pair] + field_residual(fig, cells[n], y[0], mean[0], std[0], names[0])
    axes: list[Axes] = []
    for i in range(n + 1):
        where = cells[i] if cells is not None else (1, n + 1, i + 1)
        ax = fig.add_subplot(*where) if isinstance(where, tuple) else fig.add_subplot(where)
        if i == n:
            draw_residuals(ax, y, mean, std, names, grid)
        else:
            if axes:
                ax.sharey(axes[0])
            draw_prediction(ax, x[i], y[i], mean[i], std[i], f"{title}\n{names[i]}", grid, channel)
        axes.append(ax)
    axes[0].legend(fontsize="x-small", loc="upper left")
    return axes


def _first_channel(label: str, channels: int) -> str:
    """A label of channel 0's values, naming the channel where there are several."""
    return label if channels == 1 else f"{label} (channel 0 of {channels})"
