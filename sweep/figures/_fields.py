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
    """``", z = 4 of 8"`` for a 3D field ``[channels, z, y, x]`` (:func:`plane` draws its
    middle plane along its first spatial axis), else ``""``."""
    return f", z = {np.shape(field)[1] // 2} of {np.shape(field)[1]}" if np.ndim(field) == 4 else ""


def scale_of(reference: Sequence[np.ndarray]) -> tuple[float, float]:
    """The colour scale of values drawn beside ``reference`` images: the reference's own range
    (an ensemble mean that leaves it is clipped, see :func:`beyond`), never a single value."""
    low, high = min(float(i.min()) for i in reference), max(float(i.max()) for i in reference)
    return (low, high) if high > low else (low - 0.5, high + 0.5)


def beyond(images: Sequence[np.ndarray], limits: tuple[float, float]) -> str:
    """Matplotlib's ``extend`` of a colour bar for ``images`` drawn on ``limits``: which ends they pass."""
    under = any(float(i.min()) < limits[0] for i in images)
    over = any(float(i.max()) > limits[1] for i in images)
    return "both" if under and over else "min" if under else "max" if over else "neither"


def draw_image(ax: Axes, image: np.ndarray, title: str, cmap: str, limits: tuple[float, float]) -> Any:
    """``image`` on ``ax`` (no ticks: the points are the pixels), titled; returns what a colour bar takes."""
    drawn = ax.imshow(image, origin="lower", cmap=cmap, vmin=limits[0], vmax=limits[1], interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title, fontsize="small")
    return drawn


def _clipped(image: np.ndarray, limits: tuple[float, float]) -> str:
    return " (clipped)" if beyond([image], limits) != "neither" else ""


def field_prediction(fig: Figure, cell: Any, y: np.ndarray, mean: np.ndarray, name: str, channel: str) -> list[Axes]:
    """One test sample in ``cell``: its ground truth and the ensemble mean side by side, on the
    ground truth's colour scale (a mean beyond it is clipped, and its title says so); ``channel``:
    what channel 0 holds."""
    truth, predicted = plane(y), plane(mean)
    limits = scale_of([truth])
    inner = cell.subgridspec(1, 2)
    axes = [fig.add_subplot(inner[0, i]) for i in range(2)]
    draw_image(axes[0], truth, f"{name}\nground truth\n({channel}{depth_note(y)})", "viridis", limits)
    image = draw_image(axes[1], predicted, f"ensemble mean{_clipped(predicted, limits)}\n", "viridis", limits)
    fig.colorbar(image, ax=axes, fraction=0.05, pad=0.02, extend=beyond([predicted], limits))
    return axes


def field_residual(fig: Figure, cell: Any, y: np.ndarray, mean: np.ndarray, std: np.ndarray, name: str) -> list[Axes]:
    """The ensemble mean minus the ground truth of one sample (a scale centred on 0) beside the
    ensemble std (from 0), in ``cell``."""
    error, spread = plane(mean) - plane(y), plane(std)
    reach = max(float(np.abs(error).max()), 1e-12)
    inner = cell.subgridspec(1, 2)
    axes = [fig.add_subplot(inner[0, i]) for i in range(2)]
    fig.colorbar(draw_image(axes[0], error, f"{name}\nmean − truth", "RdBu_r", (-reach, reach)), ax=axes[0])
    most = max(float(spread.max()), 1e-12)
    fig.colorbar(draw_image(axes[1], spread, "ensemble std\nover members", "magma", (0.0, most)), ax=axes[1])
    return axes


def field_panels(fig: Figure, rolled: tuple, places: Sequence[tuple[Any, int, int]], channel: str) -> list[Axes]:
    """A rollout's ``(reference, mean, std)`` ``[steps + 1, c, *s]`` as images at ``places``:
    ``(cell, row, step)``, ``row`` indexing :data:`FIELD_ROWS`; a colour bar per row, the
    reference and the mean on the reference's scale over the steps shown (a mean that leaves it
    is clipped, its title and colour bar say so), the std from 0."""
    steps = sorted({step for _, _, step in places})
    images = {(row, step): plane(rolled[row][step]) for _, row, step in places}
    limits = scale_of([plane(rolled[0][step]) for step in steps])
    spread = max([float(i.max()) for (r, _), i in images.items() if r == 2] + [1e-12])
    axes: list[Axes] = []
    for row in sorted({r for _, r, _ in places}):
        row_axes, drawn, shown = [], [], []
        for cell, _, step in (p for p in places if p[1] == row):
            row_axes.append(ax := fig.add_subplot(cell))
            image, scale = images[row, step], (0.0, spread) if row == 2 else limits
            title = f"{FIELD_ROWS[row]}, step {step}" + (_clipped(image, scale) if row == 1 else "")
            drawn.append(draw_image(ax, image, title, CMAPS[row], scale))
            shown.append(image)
        unit = f"std over members ({channel})" if row == 2 else f"{channel}{depth_note(rolled[0][0])}"
        extend = beyond(shown, limits) if row == 1 else "neither"
        fig.colorbar(drawn[-1], ax=row_axes, fraction=0.05, pad=0.02, extend=extend).set_label(unit)
        axes += row_axes
    return axes
