"""Figures of the stored ensemble scores: is the seed spread a calibrated uncertainty?

They draw from ``ensemble_scores.parquet`` alone (computed at aggregation), so they run no model.
Configurations are compared on the validation split where the store holds it (else on test),
best first in the colours of every other figure:

- ``"calibration"``: coverage of the members' central 50% and 90% intervals against nominal,
  with the diagonal and the coverage expected of ``M`` calibrated members (``nominal (M - 1) /
  (M + 1)``), and the best configuration's rank histogram (flat: calibrated; U: overconfident);
- ``"spread_skill"``: spread against the RMSE of the ensemble mean at every rollout step (the
  one-step predictions where there are no rollouts), with the 1:1 line, and the ratio per step;
- ``"ensemble_size"``: the CRPS of subsets of 2, 4, 8, ... members, up to all (the subset's own,
  and the fair CRPS), and their spread-skill.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from .._words import counted
from ._panels import Configs, draw_missing, label

MAX_BINS = 20  # rank histogram bars, at most (ranks pooled into equal bins past that)
MAX_TICKS = 10  # the rank histogram ticks every rank up to this many members, whole numbers past it


def score_split(scores: pa.Table) -> str:
    """The split configurations are compared on: validation where the store scored it, else test."""
    return "val" if "val" in set(scores["split"].to_pylist()) else "test"


def _rows(scores: pa.Table, kind: str) -> pa.Table:
    split = score_split(scores)
    return scores.filter(pc.and_(pc.equal(scores["split"], split), pc.equal(scores["kind"], kind)))  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)


def _axes(fig: Figure, cells: Sequence | None, count: int) -> list[Axes]:
    cells = cells if cells is not None else [(1, count, i + 1) for i in range(count)]
    return [fig.add_subplot(*c) if isinstance(c, tuple) else fig.add_subplot(c) for c in cells[:count]]


def draw_coverage(ax: Axes, scores: pa.Table, keys: list[dict]) -> None:
    rows = _rows(scores, "one_step")
    configs = Configs(keys, rows)
    ax.plot([0, 1], [0, 1], color="0.5", ls="--", lw=1, label="nominal")
    firsts = [rows.slice(int(index[0]), 1).to_pylist()[0] for _, index, _ in configs]
    if firsts:  # the truth is one more exchangeable draw among M calibrated members
        m, ends = firsts[0]["members"], np.array([0.0, 1.0])
        whose = "" if len({r["members"] for r in firsts}) == 1 else " (the first configuration's)"
        ax.plot(
            ends,
            ends * (m - 1) / (m + 1),
            color="0.4",
            ls=":",
            lw=1,
            label=f"expected of {counted(m, 'member')}{whose}",
        )
    nominal = np.array([0.5, 0.9])
    for (config, _, color), row in zip(configs, firsts, strict=True):
        ax.plot(nominal, [row["coverage_50"], row["coverage_90"]], "-o", color=color, label=label(config), ms=5)
    ax.set_xlabel("nominal coverage of the members' central interval")
    ax.set_ylabel("observed coverage")
    ax.set_title(f"coverage ({score_split(scores)}, one step)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small", loc="best")


def draw_ranks(ax: Axes, scores: pa.Table, keys: list[dict]) -> None:
    rows = _rows(scores, "one_step")
    configs = Configs(keys, rows)
    config, index, color = next(iter(configs))
    counts = np.asarray(rows.slice(int(index[0]), 1).to_pylist()[0]["rank_histogram"], np.float64)
    edges = np.linspace(0, len(counts), min(MAX_BINS, len(counts)) + 1).round().astype(int)
    binned = np.add.reduceat(counts, edges[:-1]) / np.diff(edges)  # mean count per rank within each bar
    # a bar spans its ranks from half a rank below the first to half above the last: centred on them
    ax.bar(edges[:-1] - 0.5, binned / counts.mean(), width=np.diff(edges), align="edge", color=color, alpha=0.8)
    ax.axhline(1.0, color="0.3", ls="--", lw=1, label="flat (calibrated)")
    most = len(counts) - 1  # ranks 0..most: the truth is below none, some or all of the members
    ax.set_xlim(-0.5, most + 0.5)
    if most <= MAX_TICKS:
        ax.set_xticks(range(most + 1))
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(f"members below the truth (of {most})")
    ax.set_ylabel("frequency / flat")
    ax.set_title(f"rank histogram, best: {label(config)}")
    ax.legend(fontsize="x-small")


def calibration_figure(fig: Figure, scores: pa.Table, keys: list[dict], cells: Sequence | None = None) -> list[Axes]:
    """Coverage against nominal for every configuration, and the best one's rank histogram."""
    if not _rows(scores, "one_step").num_rows:
        return _missing(fig, cells)
    coverage, ranks = _axes(fig, cells, 2)
    draw_coverage(coverage, scores, keys)
    draw_ranks(ranks, scores, keys)
    return [coverage, ranks]


def draw_spread_error(ax: Axes, scores: pa.Table, keys: list[dict]) -> None:
    rolled = _rows(scores, "rollout")
    rows = rolled if rolled.num_rows else _rows(scores, "one_step")
    top = 0.0
    for config, index, color in Configs(keys, rows):
        picked = rows.take(index)
        rmse, spread = picked["rmse"].to_numpy(), picked["spread"].to_numpy()
        ax.plot(rmse, spread, "-o" if len(rmse) < 30 else "-", color=color, ms=3, label=label(config))
        if len(rmse) > 1:
            ax.plot(rmse[-1:], spread[-1:], "s", color=color, ms=6)
        top = max(top, np.nanmax(np.r_[rmse, spread]))
    ax.plot([0, top * 1.05], [0, top * 1.05], color="0.5", ls="--", lw=1, label="1:1 (calibrated)")
    what = "per rollout step (square: last)" if rolled.num_rows else "one step"
    ax.set_xlabel("RMSE of the ensemble mean")
    ax.xaxis.set_major_locator(MaxNLocator(4))  # numbers like 0.002: more would run together in a small panel
    ax.set_ylabel("spread (ensemble std)")
    ax.set_title(f"spread vs error, {what} ({score_split(scores)})")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small", loc="best")


def draw_ratio_per_step(ax: Axes, scores: pa.Table, keys: list[dict]) -> None:
    rows = _rows(scores, "rollout")
    for config, index, color in Configs(keys, rows):
        picked = rows.take(index)
        ax.plot(picked["step"].to_numpy(), picked["spread_skill"].to_numpy(), color=color, label=label(config))
    ax.axhline(1.0, color="0.5", ls="--", lw=1, label="1: calibrated")
    ax.legend(fontsize="x-small", loc="best")
    ax.set_xlabel("rollout step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole
    ax.set_ylabel("spread-skill ratio (1: calibrated, < 1: overconfident)")
    ax.set_title(f"spread-skill per step ({score_split(scores)})")
    ax.grid(True, alpha=0.3)


def spread_skill_figure(fig: Figure, scores: pa.Table, keys: list[dict], cells: Sequence | None = None) -> list[Axes]:
    """Spread against error (per rollout step where the store has rollouts), and the ratio per step."""
    if not _rows(scores, "one_step").num_rows:
        return _missing(fig, cells)
    count = 2 if _rows(scores, "rollout").num_rows else 1
    axes = _axes(fig, cells, count)
    draw_spread_error(axes[0], scores, keys)
    if count == 2:
        draw_ratio_per_step(axes[1], scores, keys)
    return axes


def draw_size(ax: Axes, scores: pa.Table, keys: list[dict], column: str, name_configs: bool = True) -> None:
    """``column`` of subsets of members against their size; for ``"crps"`` the ensemble's own CRPS
    (solid: what an ensemble of that many members scores) above the fair CRPS (dashed: its limit
    for many members, the same expected value at every size), with a legend saying which line is
    which (after the configurations where ``name_configs``; the overview names them elsewhere)."""
    rows = _rows(scores, "ensemble_size")
    name = "CRPS" if column == "crps" else "spread-skill"
    if not rows.num_rows:
        draw_missing(ax, "one member each", "No ensemble sizes")
        ax.set_title(f"{name} vs ensemble size")
        return
    for config, index, color in Configs(keys, rows):
        picked = rows.take(index)
        members = picked["members"].to_numpy()
        shown = "crps_ensemble" if column == "crps" else column
        ax.plot(members, picked[shown].to_numpy(), "-o", color=color, ms=4, label=label(config))
        if column == "crps":
            ax.plot(members, picked["crps"].to_numpy(), "--x", color=color, lw=1, ms=4)  # x: a single size shows
    if column == "spread_skill":
        calibrated = ax.axhline(1.0, color="0.5", ls="--", lw=1, label="1: calibrated")
        ax.legend(handles=[calibrated], fontsize="x-small", loc="best")
    else:  # the line styles, in black: the colours are the configurations'
        styles = [
            Line2D([], [], color="k", marker="o", ms=4, label="CRPS of the ensemble"),
            Line2D([], [], color="k", ls="--", marker="x", lw=1, ms=4, label="fair CRPS (many members)"),
        ]
        named = ax.get_legend_handles_labels()[0] if name_configs else []
        low, high = ax.get_ylim()  # room above the curves for the legend's lines
        ax.set_ylim(low, high + 0.07 * (len(named) + len(styles)) * (high - low))
        ax.legend(handles=[*named, *styles], fontsize="x-small", loc="upper right")
    ax.set_xscale("log", base=2)
    sizes = sorted(set(rows["members"].to_pylist()))
    ax.set_xticks(sizes, [str(k) for k in sizes])
    ax.minorticks_off()
    ax.set_xlabel("members in the ensemble")
    ax.set_ylabel({"crps": "CRPS", "spread_skill": "spread-skill ratio"}[column])
    ax.set_title(f"{name} vs ensemble size ({score_split(scores)})")
    ax.grid(True, alpha=0.3)


def ensemble_size_figure(fig: Figure, scores: pa.Table, keys: list[dict], cells: Sequence | None = None) -> list[Axes]:
    """CRPS and spread-skill of subsets of members (averaged over subsets of each size) against their size."""
    if not _rows(scores, "ensemble_size").num_rows:
        return _missing(fig, cells, "no configuration has two members or more")
    axes = _axes(fig, cells, 2)
    draw_size(axes[0], scores, keys, "crps")
    draw_size(axes[1], scores, keys, "spread_skill")
    return axes


def _missing(fig: Figure, cells: Sequence | None, why: str = "the store scored no configuration") -> list[Axes]:
    ax = _axes(fig, cells, 1)[0]
    draw_missing(ax, why, "No ensemble scores")
    return [ax]
