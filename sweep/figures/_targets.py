"""Prediction panels that fit the target: what the best configuration's ensemble predicts on the
test samples the store holds, for targets that are not the inputs' grid.

- **Values** (a number or a vector per sample: an inverse problem's coefficients): predicted
  against true, one panel per component (at most :data:`MAX_COMPONENTS`), each sample a point at
  the ensemble mean with an error bar of ±1 std over members, and the diagonal.
- **Classes** (class labels, the model giving logits with the classes first): the confusion
  matrix of the ensemble's class (the largest mean logit) against the true class, counts in the
  cells, over every position of every stored sample.
- **Another grid** (super-resolution, coarse-graining): per sample the input and the target over
  their relative position in the domain (0 to 1, each on its own points), with the ensemble mean
  ±1 std on the target's points.

Same-grid targets (an emulator's next state) are drawn by :func:`._panels.predictions_figure`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ._panels import OKABE_ITO

KINDS = ("same_grid", "values", "classes", "grid")
MAX_COMPONENTS = 4  # value panels drawn at most (the first components of a longer vector)


def target_kind(x: np.ndarray, y: np.ndarray, mean: np.ndarray) -> str:
    """How the targets relate to the inputs (batches ``x``, ``y`` and the ensemble ``mean``):
    ``"classes"`` where the predictions carry a class axis the targets lack, ``"same_grid"``
    where the targets have the inputs' grid, ``"values"`` for a number or a vector per sample,
    ``"grid"`` for another grid.

    ```python
    target_kind(np.zeros((4, 1, 16)), np.zeros((4,)), np.zeros((4,)))   # 'values'
    ```
    """
    if mean.shape[1:] != y.shape[1:]:
        return "classes"
    if y.ndim == x.ndim and y.shape[2:] == x.shape[2:]:
        return "same_grid"
    return "values" if y.ndim <= 2 else "grid"


def panel_count(samples: tuple, kind: str) -> int:
    """How many panels :func:`targets_figure` draws for ``samples`` of ``kind``."""
    x, y, _, _ = samples
    if kind == "values":
        return min(MAX_COMPONENTS, int(np.prod(y.shape[1:])))
    return 1 if kind == "classes" else x.shape[0]


def _axes(fig: Figure, cells: Sequence | None, count: int) -> list[Axes]:
    out = []
    for i in range(count):
        where = cells[i] if cells is not None else (1, count, i + 1)
        out.append(fig.add_subplot(*where) if isinstance(where, tuple) else fig.add_subplot(where))
    return out


def draw_values(ax: Axes, true: np.ndarray, mean: np.ndarray, std: np.ndarray, name: str) -> None:
    """Predicted (ensemble mean ±1 std) against true values of one target component."""
    low, high = float(min(true.min(), (mean - std).min())), float(max(true.max(), (mean + std).max()))
    pad = 0.05 * (high - low or 1.0)
    ax.plot([low - pad, high + pad], [low - pad, high + pad], color="0.6", ls="--", lw=1, label="predicted = true")
    ax.errorbar(
        true,
        mean,
        yerr=std,
        fmt="o",
        ms=4,
        color=OKABE_ITO[0],
        ecolor=OKABE_ITO[0],
        elinewidth=1,
        capsize=2,
        alpha=0.85,
        label="ensemble mean ±1 std",
    )
    rmse = float(np.sqrt(np.mean((mean - true) ** 2)))
    ax.set_xlim(low - pad, high + pad)
    ax.set_ylim(low - pad, high + pad)
    ax.set_aspect("equal", adjustable="box")
    ax.set_xlabel(f"true {name}")
    ax.set_ylabel(f"predicted {name}")
    ax.set_title(f"{name}: RMSE {rmse:.3g} over {true.size} test samples", fontsize="medium")
    ax.grid(True, alpha=0.3)


def draw_confusion(ax: Axes, true: np.ndarray, logits_mean: np.ndarray) -> None:
    """The confusion matrix of the ensemble's class (largest mean logit) against the true class."""
    classes = logits_mean.shape[1]
    predicted = np.argmax(logits_mean, axis=1).ravel()
    labels = np.asarray(true).reshape(len(true), -1).ravel().astype(int)
    counts = np.zeros((classes, classes), int)
    np.add.at(counts, (np.clip(labels, 0, classes - 1), predicted), 1)
    ax.imshow(counts, cmap="Blues", vmin=0)
    for (i, j), c in np.ndenumerate(counts):
        ax.text(j, i, str(c), ha="center", va="center", color="white" if c > counts.max() / 2 else "black")
    ax.set_xticks(range(classes))
    ax.set_yticks(range(classes))
    ax.set_xlabel("predicted class (largest ensemble-mean logit)")
    ax.set_ylabel("true class")
    accuracy = float(np.mean(predicted == labels))
    ax.set_title(f"confusion matrix: accuracy {accuracy:.2f} on {labels.size} labels", fontsize="medium")


def draw_grids(ax: Axes, x: np.ndarray, y: np.ndarray, mean: np.ndarray, std: np.ndarray, title: str) -> None:
    """One sample: the input and the target (channel 0, flattened) over their relative position in
    the domain, each on its own points, and the ensemble mean ±1 std on the target's points."""
    xi, yi, mi, si = (np.asarray(a, np.float64)[0].ravel() for a in (x, y, mean, std))
    at_x, at_y = ((np.arange(n) + 0.5) / n for n in (xi.size, yi.size))
    ax.plot(at_x, xi, color="0.6", ls="--", marker=".", lw=1, label=f"input ({xi.size} points)")
    ax.plot(at_y, yi, color="black", lw=1.5, label=f"ground truth ({yi.size} points)")
    ax.plot(at_y, mi, color=OKABE_ITO[0], lw=1.5, label="ensemble mean")
    ax.fill_between(at_y, mi - si, mi + si, color=OKABE_ITO[0], alpha=0.3, lw=0, label="±1 std over members")
    ax.set_xlabel("relative position in the domain")
    ax.set_ylabel("value")
    ax.set_title(title, fontsize="medium")


def targets_figure(
    fig: Figure, samples: tuple, kind: str, title: str, count: int | None = None, cells: Sequence | None = None
) -> list[Axes]:
    """The panels of ``samples`` (``(x, y, mean, std)`` of the stored test samples) for targets of
    ``kind`` (:func:`target_kind`, not ``"same_grid"``): value scatters, a confusion matrix, or
    ``count`` samples (default every one) over the target's grid; in ``cells`` where given.

    ```python
    fig = Figure()
    targets_figure(fig, (x, y, mean, std), target_kind(x, y, mean), "best: depth=2")
    ```
    """
    x, y, mean, std = samples
    if kind == "classes":
        (ax,) = _axes(fig, cells, 1)
        draw_confusion(ax, y, mean)
        ax.set_title(f"{title}\n{ax.get_title()}", fontsize="medium")
        return [ax]
    if kind == "values":
        n = panel_count(samples, kind)
        true, predicted, spread = (a.reshape(len(a), -1) for a in (y, mean, std))
        axes = _axes(fig, cells, n)
        for i, ax in enumerate(axes):
            name = "target" if y.ndim == 1 else f"target[{i}]"
            draw_values(ax, true[:, i], predicted[:, i], spread[:, i], name)
        axes[0].set_title(f"{title}\n{axes[0].get_title()}", fontsize="medium")
        axes[0].legend(fontsize="x-small", loc="upper left")
        return axes
    n = x.shape[0] if count is None else min(count, x.shape[0])
    axes = _axes(fig, cells, n)
    for i, ax in enumerate(axes):
        if i:
            ax.sharey(axes[0])
        draw_grids(ax, x[i], y[i], mean[i], std[i], f"{title} — test sample {i}")
    if axes:
        axes[0].legend(fontsize="x-small", loc="best")
    return axes
