"""Images of 2D and 3D fields: what a line over the points cannot show.

A field ``[channels, *spatial]`` is drawn as the image of its first channel (a 3D field: the
middle plane along its first spatial axis). Fields compared with each other (a ground truth and
an ensemble mean) share one colour scale that holds both; an ensemble std starts at 0; a
difference is centred on 0. The predictions panels (one test sample: ground truth and ensemble
mean; then mean minus truth and the std) and the rollout panels (reference, mean and std at
several steps) are made of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

FIELD_ROWS = ("reference", "ensemble mean", "ensemble std")
CMAPS = ("viridis", "viridis", "magma")  # values, values, a spread from 0


def is_field(sample: np.ndarray) -> bool:
    """Whether a sample ``[channels, *spatial]`` has two or more spatial axes (drawn as images)."""
    return np.ndim(sample) > 2


def plane(field: np.ndarray) -> np.ndarray:
    """Channel 0 of a field ``[channels, *spatial]`` as an image ``[y, x]``: a 2D field itself,
    the middle plane along the first spatial axis of a 3D one."""
    image = np.asarray(field, np.float64)[0]
    while image.ndim > 2:
        image = image[image.shape[0] // 2]
    return image


def depth_note(field: np.ndarray) -> str:
    """``", middle plane of 16"`` for a 3D field ``[channels, z, y, x]`` (see :func:`plane`), else ``""``."""
    return f", middle plane of {np.shape(field)[1]}" if np.ndim(field) == 4 else ""


def draw_image(ax: Axes, image: np.ndarray, title: str, cmap: str, limits: tuple[float, float]) -> Any:
    """``image`` on ``ax`` (no ticks: the points are the pixels), titled; returns what a colour bar takes."""
    drawn = ax.imshow(image, origin="lower", cmap=cmap, vmin=limits[0], vmax=limits[1], interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title, fontsize="small")
    return drawn


def field_prediction(fig: Figure, cell: Any, y: np.ndarray, mean: np.ndarray, name: str, channel: str) -> list[Axes]:
    """One test sample in ``cell``: its ground truth and the ensemble mean side by side, on one
    colour scale (``channel``: what channel 0 holds)."""
    truth, predicted = plane(y), plane(mean)
    limits = (min(truth.min(), predicted.min()), max(truth.max(), predicted.max()))
    inner = cell.subgridspec(1, 2)
    axes = [fig.add_subplot(inner[0, i]) for i in range(2)]
    draw_image(axes[0], truth, f"{name}\nground truth", "viridis", limits)
    image = draw_image(axes[1], predicted, "ensemble mean", "viridis", limits)
    fig.colorbar(image, ax=axes, fraction=0.05, pad=0.02).set_label(f"{channel}{depth_note(y)}")
    return axes


def field_residual(fig: Figure, cell: Any, y: np.ndarray, mean: np.ndarray, std: np.ndarray, name: str) -> list[Axes]:
    """The ensemble mean minus the ground truth of one sample (a scale centred on 0) beside the
    ensemble std (from 0), in ``cell``."""
    error, spread = plane(mean) - plane(y), plane(std)
    reach = max(float(np.abs(error).max()), 1e-12)
    inner = cell.subgridspec(1, 2)
    axes = [fig.add_subplot(inner[0, i]) for i in range(2)]
    fig.colorbar(draw_image(axes[0], error, f"{name}\nmean − truth", "RdBu_r", (-reach, reach)), ax=axes[0])
    fig.colorbar(
        draw_image(axes[1], spread, "ensemble std", "magma", (0.0, max(float(spread.max()), 1e-12))), ax=axes[1]
    )
    return axes


def field_panels(fig: Figure, rolled: tuple, places: Sequence[tuple[Any, int, int]], channel: str) -> list[Axes]:
    """A rollout's ``(reference, mean, std)`` ``[steps + 1, c, *s]`` as images at ``places``:
    ``(cell, row, step)``, ``row`` indexing :data:`FIELD_ROWS`; a colour bar per row, the
    reference and the mean on one scale that holds both."""
    images = {(row, step): plane(rolled[row][step]) for _, row, step in places}
    for row, step in [(r, t) for r, t in images if r < 2]:  # the other of reference and mean, for the scale
        images.setdefault((1 - row, step), plane(rolled[1 - row][step]))
    values = [i for (r, _), i in images.items() if r < 2]
    low, high = min(float(i.min()) for i in values), max(float(i.max()) for i in values)
    spread = max([float(i.max()) for (r, _), i in images.items() if r == 2] + [1e-12])
    axes: list[Axes] = []
    for row in sorted({r for _, r, _ in places}):
        row_axes, drawn = [], []
        for cell, _, step in (p for p in places if p[1] == row):
            row_axes.append(ax := fig.add_subplot(cell))
            limits = (0.0, spread) if row == 2 else (low, high)
            drawn.append(draw_image(ax, images[row, step], f"{FIELD_ROWS[row]}, step {step}", CMAPS[row], limits))
        unit = f"std over members ({channel})" if row == 2 else f"{channel}{depth_note(rolled[0][0])}"
        fig.colorbar(drawn[-1], ax=row_axes, fraction=0.05, pad=0.02).set_label(unit)
        axes += row_axes
    return axes
