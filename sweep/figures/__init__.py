"""Figures of a sweep, drawn with matplotlib (imported here only: ``import sweep`` does not load it)."""

from __future__ import annotations

import os

from matplotlib.figure import Figure

from ..ensemble import Ensemble, load
from ._plots import sweep_figures, write_figures


def plot(source: Ensemble | str | os.PathLike, out: str | os.PathLike | None = None, *, num_samples: int = 3,
         max_curves: int = 200) -> dict[str, Figure]:
    """The figures of an ensemble (or of the store of a sweep directory), by name.

    Panels: every member's train and test loss with each configuration's median and 10-90%
    band, the final test loss over seeds per configuration, and the best configuration's
    ensemble mean ±std against the ground truth on ``num_samples`` test samples. ``out=None``
    or ending in ``.png`` gives one figure ``"sweep"`` with every panel; another ``out`` is a
    prefix and gives ``"curves"``, ``"test_loss"`` and ``"predictions"``. With ``out`` they
    are also written (``out`` itself, or ``<out><name>.png``).

    ```python
    figures = sweep.plot("runs/heat", "heat.png")
    figures["sweep"].axes[0].get_ylabel()   # 'train loss (MSE)'
    ```
    """
    ensemble = source if isinstance(source, Ensemble) else load(source)
    panels = out is not None and not str(out).endswith(".png")
    figures = sweep_figures(ensemble, panels=panels, num_samples=num_samples, max_curves=max_curves)
    if out is not None:
        write_figures(figures, out)
    return figures
