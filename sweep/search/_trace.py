"""The figure of a search: each configuration's mean and interval over seeds in order of
proposal, and the best mean so far (``sweep plot DIR --kind search``)."""

from __future__ import annotations

import math
import os

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from .._errors import SweepError
from .._fs import save_figure
from .._words import counted
from ..spec import SweepSpec
from ..store import SweepDir
from ._best import LEVEL, ranked, standings

__all__ = ["plot_trace", "searched_spec"]


def searched_spec(sweep_dir: SweepDir) -> SweepSpec:
    """The spec of the search in ``sweep_dir`` (from its plan); an error if it holds no search."""
    plan = sweep_dir.plan()
    if plan is None or plan.spec.search is None:
        raise SweepError(
            f"{sweep_dir.shown!r} holds no search (its plan has no `search`); run a spec with sweep.Search"
        )
    return plan.spec


LOG_SPAN = 10  # means spread over more than this factor: a log axis, so the best stay apart


def plot_trace(location: str | os.PathLike | SweepDir, out: str | os.PathLike | None = None, dpi: int = 150) -> Figure:
    """The search trace of the sweep at ``location``: one point per configuration told (its mean
    over seeds, with its interval at :data:`~._best.LEVEL`, or ± its standard error where too few
    seeds give no interval), the best mean so far as a step line, the best configuration ringed.
    Written to ``out`` if given (its folder created).

    Examples:
        ```python
        fig = sweep.search.plot_trace("runs/heat", out="search.png")
        ```
    """
    sweep_dir = location if isinstance(location, SweepDir) else SweepDir.at(location)
    spec = searched_spec(sweep_dir)
    search = spec.search
    assert search is not None  # searched_spec refuses a sweep without one
    every = standings(spec, sweep_dir)
    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.add_subplot()
    if every:
        x = [s.number for s in every]
        y = [s.interval.mean for s in every]
        bounded = all(math.isfinite(s.interval.low) and math.isfinite(s.interval.high) for s in every)
        if bounded:
            err = [[m - s.interval.low for s, m in zip(every, y)], [s.interval.high - m for s, m in zip(every, y)]]
            bars = f"{LEVEL:.0%} interval over seeds"
        else:
            err = [s.observation.stderr if math.isfinite(s.observation.stderr) else 0.0 for s in every]
            bars = "± standard error over seeds"
        ax.errorbar(x, y, yerr=err, fmt="o", ms=4, capsize=2, color="C0", label=f"mean, {bars}")
        better = min if search.direction == "min" else max
        so_far, best = [], math.nan
        for m in y:
            best = m if math.isnan(best) else better(best, m) if math.isfinite(m) else best
            so_far.append(best)
        ax.step(x, so_far, where="post", color="C1", label="best mean so far")
        top = ranked(spec, every)[0]
        ax.plot([top.number], [top.interval.mean], "o", ms=11, mfc="none", mec="C3", label=f"best: #{top.number}")
        ax.legend(fontsize=8)
        finite = [m for m in y if math.isfinite(m)]
        if finite and min(finite) > 0 and max(finite) > LOG_SPAN * min(finite):  # a few poor ones squeeze the rest
            ax.set_yscale("log", nonpositive="clip")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("configuration, in order of proposal")
    ax.set_ylabel(f"{search.metric} ({len(spec.seed_list)} seeds)")
    ax.set_title(
        f"{spec.name}: {search.algorithm} search, {len(every)} of {counted(search.configurations, 'configuration')}"
    )
    ax.grid(True, alpha=0.3)
    if out is not None:
        save_figure(fig, out, dpi)
    return fig
