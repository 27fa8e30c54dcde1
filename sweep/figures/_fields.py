"""Images of 2D and 3D fields: what a line over the points cannot show.

A field ``[channels, *spatial]`` is drawn as the image of its first channel (a 3D field: the
middle plane along its first spatial axis). An ensemble mean is drawn on the colour scale of the
ground truth or reference it is compared with (values beyond it clipped, and the title says so);
an ensemble std starts at 0; a difference is centred on 0. The predictions panels (one test sample: ground truth and ensemble
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
    """``", z index 4 of 0-7"`` for a 3D field ``[channels, z, y, x]`` (:func:`plane` draws its
    middle plane along its first spatial axis), else ``""``."""
    return f", z index {np.shape(field)[1] // 2} of 0-{np.shape(field)[1] - 1}" if np.ndim(field) == 4 else ""


def scale_of(reference: Sequence[np.ndarray]) -> tuple[float, float]:
    """The colour scale of values drawn beside ``reference`` images: the reference's own range of
    finite values (an ensemble mean that leaves it is clipped, see :func:`beyond`); a constant
    field gets a range around its value, proportionate to it."""
    finite = [i[np.isfinite(i)] for i in reference]
    finite = [f for f in finite if f.size]
    if not finite:
        return (-0.5, 0.5)
    low, high = min(float(f.min()) for f in finite), max(float(f.max()) for f in finite)
    if high > low:
        return low, high
    pad = 0.05 * abs(low) or 0.5
    return low - pad, high + pad


def beyond(images: Sequence[np.ndarray], limits: tuple[float, float]) -> str:
    """Matplotlib's ``extend`` of a colour bar for ``images`` drawn on ``limits``: which ends their
    finite values pass (by more than a thousandth of the range: not float rounding)."""
    slack = 1e-3 * (limits[1] - limits[0])
    finite = [i[np.isfinite(i)] for i in images]
    under = any(f.size and float(f.min()) < limits[0] - slack for f in finite)
    over = any(f.size and float(f.max()) > limits[1] + slack for f in finite)
    return "both" if under and over else "min" if under else "max" if over else "neither"


def draw_image(ax: Axes, image: np.ndarray, title: str, cmap: str, limits: tuple[float, float]) -> Any:
    """``image`` on ``ax`` (no ticks: the points are the pixels), titled; returns what a colour bar takes."""
    drawn = ax.imshow(image, origin="lower", cmap=cmap, vmin=limits[0], vmax=limits[1], interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title, fontsize="small")
    return drawn


def _clipped(image: np.ndarray, limits: tuple[float, float]) -> str:
    """What a title adds for an image drawn on ``limits``: where it is not finite, or clipped."""
    if not np.isfinite(image).all():
        return " (not finite)"
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
    ``(cell, row, step)``, ``row`` indexing :data:`FIELD_ROWS`. Each step has its own colour
    scales (a field that decays or grows keeps its structure visible at every step): the
    reference and the mean on the reference's range at that step (a mean that leaves it is
    clipped, its title and their colour bar say so), the std from 0 to its largest value there."""
    drawn: dict[tuple[int, int], tuple[Axes, Any]] = {}
    for cell, row, step in places:
        ax, image = fig.add_subplot(cell), plane(rolled[row][step])
        std = (0.0, max(float(np.nanmax(image, initial=0.0)), 1e-12))
        limits = std if row == 2 else scale_of([plane(rolled[0][step])])
        title = f"{FIELD_ROWS[row]}, step {step}" + (_clipped(image, limits) if row == 1 else "")
        drawn[row, step] = (ax, draw_image(ax, image, title, CMAPS[row], limits))
    for (row, step), (ax, image) in drawn.items():
        if row == 0 and (1, step) in drawn:
            continue  # the mean's colour bar is the reference's too
        shared = [drawn[0, step][0], ax] if row == 1 and (0, step) in drawn else ax
        unit = f"std over members ({channel})" if row == 2 else f"{channel}{depth_note(rolled[0][0])}"
        extend = beyond([image.get_array()], image.get_clim()) if row == 1 else "neither"
        fig.colorbar(image, ax=shared, fraction=0.046, pad=0.02, extend=extend).set_label(unit, fontsize="small")
    return [ax for ax, _ in drawn.values()]
