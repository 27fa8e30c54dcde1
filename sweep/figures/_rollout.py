"""Rollout panels: the rollout error over time per configuration, and an ensemble rollout against
the reference trajectory the store keeps.

- **Rollout error**: per member the stored curve ``<split>_rollout_<metric>`` (entry ``t - 1`` is
  the metric after ``t`` autoregressive steps, averaged over the split's trajectories) and each
  configuration's median with its 10-90% band over seeds, as the learning curves; one panel per
  split on a shared log y axis, the test panel showing the best configuration only where there is
  a validation split.
- **Ensemble rollout**: the chosen configuration's members rolled out from the first state (with
  ``history=h``, the first ``h``) of the first stored test trajectory (``Ensemble.rollout_mean_std``, never regenerated data): for
  1D problems space-time pictures of the reference, the ensemble mean and the ensemble std; and
  a few time slices of the mean ±1 std against the reference.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..metrics import VALID_AT, higher_is_better, rollout_summary_name, summarised_metric
from ..problems import EVALUATED
from ..store import rollout_column as _column
from ._fields import field_panels
from ._panels import OKABE_ITO, Configs, draw_bands, draw_missing, split_panels

SPLIT = re.compile(rf"(?:{'|'.join(EVALUATED)})_(\w+)")  # test_rollout_gmean_nrmse -> rollout_gmean_nrmse


def rollout_column(split: str, metric: str) -> str:
    """The list column of a split's rollout curve of ``metric`` (``"nrmse"``): ``test_rollout_nrmse``."""
    return _column(split, rollout_summary_name(metric))


def rollout_splits(table: pa.Table, metric: str) -> list[str]:
    """The splits whose rollout curves of ``metric`` the table holds for some member."""
    return [
        s
        for s in EVALUATED
        if rollout_column(s, metric) in table.column_names
        and table.column(rollout_column(s, metric)).null_count < table.num_rows
    ]


def rollout_metrics(table: pa.Table) -> list[str]:
    """The metrics whose rollout curves the table holds (for some member), in column order."""
    found = dict.fromkeys(
        metric for c in table.column_names if (m := SPLIT.fullmatch(c)) and (metric := summarised_metric(m.group(1)))
    )
    return [m for m in found if rollout_splits(table, m)]


def draw_rollout_error(ax: Axes, table: pa.Table, configs: Configs, which: str, metric: str) -> None:
    """Every member's rollout curve of ``metric`` on ``which`` (thin), each configuration's median
    and 10-90% band over seeds; x = autoregressive step, log y for an error, linear y and the
    valid-rollout threshold for a score (``correlation``)."""
    ys = table.column(rollout_column(which, metric)).to_pylist()
    score = higher_is_better(metric)
    finite = [v for y in ys if y is not None for v in y if v is not None and np.isfinite(v)]
    positive = any(v > 0 for v in finite)  # a log axis has room
    draw_bands(
        ax, [None if y is None else np.arange(1, len(y) + 1) for y in ys], ys, configs, log=positive and not score
    )
    if not score and finite and not positive:
        why = ":\nthe grid has no modes in this band" if metric.startswith("spectral_") else ""
        ax.text(0.5, 0.75, f"0 at every step{why}", transform=ax.transAxes, ha="center", va="center", color="0.3")
    if score:
        ax.axhline(VALID_AT, color="0.4", lw=0.8, ls="--", label=f"{VALID_AT} (valid rollout)")
    ax.set_xlabel("autoregressive step")
    ax.set_ylabel(f"{which} rollout {metric}")
    ax.set_title(f"{which} rollout {metric}", fontsize="medium")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def rollout_error_figure(
    fig: Figure, table: pa.Table, configs: Configs, metric: str, cells: Sequence | None = None
) -> list[Axes]:
    """One rollout-error panel per split (validation: every configuration; test: the best one)."""
    return split_panels(
        fig,
        rollout_splits(table, metric),
        configs,
        lambda ax, which, shown: draw_rollout_error(ax, table, shown, which, metric),
        cells,
    )


def slice_steps(steps: int, count: int) -> list[int]:
    """``count`` steps spread over 1..steps, ending at ``steps`` (fewer if there are fewer steps)."""
    return sorted({max(1, round(steps * (k + 1) / count)) for k in range(count)})


def _points(grid: np.ndarray | None, n: int) -> tuple[np.ndarray, str]:
    physical = grid is not None and np.size(grid) == n
    return (np.asarray(grid, np.float64), "x") if physical else (np.arange(n, dtype=np.float64), "grid point")


def draw_slice(
    ax: Axes,
    reference: np.ndarray,
    mean: np.ndarray,
    std: np.ndarray,
    step: int,
    title: str,
    grid: np.ndarray | None = None,
) -> None:
    """The state after ``step`` steps (channel 0, flattened): reference and ensemble mean ±1 std."""
    ref, m, s = (np.asarray(a[step], np.float64)[0].ravel() for a in (reference, mean, std))
    points, xlabel = _points(grid, ref.size)
    ax.plot(points, ref, color="black", lw=1.5, label="reference")
    ax.plot(points, m, color=OKABE_ITO[0], lw=1.5, label="ensemble mean")
    ax.fill_between(points, m - s, m + s, color=OKABE_ITO[0], alpha=0.3, lw=0, label="±1 std over members")
    ax.set_xlabel(xlabel if np.ndim(reference) == 3 else f"{xlabel} (flattened)")
    ax.set_ylabel("value")
    ax.set_title(title, fontsize="medium")


def slice_panels(
    fig: Figure, rolled: tuple[np.ndarray, np.ndarray, np.ndarray] | str, title: str, grid, cells: Sequence, count: int
) -> list[Axes]:
    """``count`` time slices in ``cells`` (shared y axis, legend in the first), titled ``title`` +
    the step; ``rolled`` is ``(reference, mean, std)`` ``[steps + 1, c, *s]`` each, or why there are
    none (one panel)."""
    if isinstance(rolled, str):
        ax = fig.add_subplot(cells[0])
        draw_missing(ax, rolled, "No ensemble rollout")
        return [ax]
    reference = rolled[0]
    axes: list[Axes] = []
    for cell, step in zip(cells, slice_steps(reference.shape[0] - 1, count)):
        ax = fig.add_subplot(cell)
        if axes:
            ax.sharey(axes[0])
        draw_slice(ax, *rolled, step, f"{title}step {step} of {reference.shape[0] - 1}", grid)
        axes.append(ax)
    axes[0].legend(fontsize="x-small", loc="best")
    return axes


def space_time_panels(fig: Figure, rolled: tuple, grid, cells: Sequence) -> list[Axes]:
    """Space-time pictures (channel 0 of a 1D problem; x across, step up) of the reference and the
    ensemble mean on one colour scale that holds both, and of the ensemble std from 0, each with a
    labelled colour bar."""
    reference, mean, std = (np.asarray(a, np.float64)[:, 0] for a in rolled)
    points, xlabel = _points(grid, reference.shape[1])
    half = (points[-1] - points[0]) / max(1, len(points) - 1) / 2  # pixels centred on the points and steps
    extent = (points[0] - half, points[-1] + half, -0.5, reference.shape[0] - 0.5)
    low, high = min(reference.min(), mean.min()), max(reference.max(), mean.max())
    axes = []
    for cell, field, name, cmap, limits, unit in zip(
        cells,
        (reference, mean, std),
        ("reference", "ensemble mean", "ensemble std"),
        ("viridis", "viridis", "magma"),
        ((low, high), (low, high), (0, max(float(std.max()), 1e-12))),
        ("value (channel 0)", "value (channel 0)", "std over members (channel 0)"),
        strict=True,
    ):
        ax = fig.add_subplot(cell)
        image = ax.imshow(
            field,
            aspect="auto",
            origin="lower",
            extent=extent,
            cmap=cmap,
            vmin=limits[0],
            vmax=limits[1],
            interpolation="nearest",
        )
        fig.colorbar(image, ax=ax, fraction=0.06, pad=0.02).set_label(unit)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("autoregressive step")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(name, fontsize="medium")
        axes.append(ax)
    return axes


def rollout_figure(
    fig: Figure, rolled: tuple | str, title: str, grid, slices: int = 4, channel: str = "channel 0"
) -> list[Axes]:
    """The ``"rollout"`` kind: for 1D problems a row of space-time pictures above a row of
    ``slices`` time slices; for 2D and 3D ones images of the reference, the ensemble mean and the
    ensemble std (rows) at ``slices`` steps (columns). Each row of a 1D figure is its own grid, so
    that the colour bars and labels of one row take no room from the other."""
    if not isinstance(rolled, str) and rolled[0].ndim > 3:
        steps = slice_steps(rolled[0].shape[0] - 1, slices)
        cells = fig.add_gridspec(3, len(steps))
        fig.suptitle(f"{title}: ensemble rollout from the start of a stored test trajectory")
        places = [(cells[r, c], r, step) for r in range(3) for c, step in enumerate(steps)]
        return field_panels(fig, rolled, places, channel)
    one_d = not isinstance(rolled, str) and rolled[0].ndim == 3
    rows = fig.add_gridspec(2 if one_d else 1, 1)
    bottom = rows[-1, 0].subgridspec(1, 1 if isinstance(rolled, str) else slices)
    slice_cells = [bottom[0, i] for i in range(1 if isinstance(rolled, str) else slices)]
    if not one_d:
        return slice_panels(fig, rolled, f"{title} — ", grid, slice_cells, slices)
    assert not isinstance(rolled, str)  # one_d is False for a reason string
    top = rows[0, 0].subgridspec(1, 3)
    pictures = space_time_panels(fig, rolled, grid, [top[0, i] for i in range(3)])
    fig.suptitle(f"{title}: ensemble rollout from the start of a stored test trajectory")
    return pictures + slice_panels(fig, rolled, "", grid, slice_cells, slices)
