"""Figures of a sweep, drawn with matplotlib (imported here only: ``import sweep`` does not load it)."""

from __future__ import annotations

import os

from matplotlib.figure import Figure

from ..ensemble import Ensemble, load
from ._plots import sweep_figures, write_figures


def plot(source: Ensemble | str | os.PathLike, out: str | os.PathLike | None = None, *, num_samples: int = 3,
         max_curves: int = 200, metric: str = "val_loss", mode: str = "min") -> dict[str, Figure]:
    """The figures of an ensemble (or of the store of a sweep directory), by name.

    Panels: every member's train and validation loss with each configuration's median and 10-90%
    band; the final ``metric`` over seeds per configuration; and for the configuration chosen by
    ``metric`` (validation loss by default; ``mode="max"`` when higher is better) its test loss
    curves, its final test values, and its ensemble mean ±std against the ground truth on
    ``num_samples`` test samples. ``out=None`` or ending in ``.png`` gives one figure ``"sweep"``
    with every panel; another ``out`` is a prefix and gives ``"curves"``, ``"spread"`` and
    ``"predictions"``. With ``out`` they are also written (``out`` itself, or ``<out><name>.png``).

    ```python
    figures = sweep.plot("runs/heat", "heat.png")
    figures["sweep"].axes[0].get_ylabel()   # 'train loss (mse)'
    ```
    """
    ensemble = source if isinstance(source, Ensemble) else load(source)
    panels = out is not None and not str(out).endswith(".png")
    figures = sweep_figures(ensemble, panels=panels, num_samples=num_samples, max_curves=max_curves,
                            metric=metric, mode=mode)
    if out is not None:
        write_figures(figures, out)
    return figures
