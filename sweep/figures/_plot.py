"""``sweep.plot``: the figures of a sweep by kind, and writing them as PNG, PDF or SVG."""

from __future__ import annotations

import os
from pathlib import Path

from matplotlib.figure import Figure

from .._errors import QueryError, did_you_mean, warn
from .._fs import local_out, save_figure
from ..ensemble import Ensemble, load
from ._figure_data import (
    SHOWN_SAMPLES,
    FigureData,
    best_first,
    curve_sample,
    drawn_rollout_metric,
    ensemble_rollout,
    predicted_samples,
    stored_scores,
    summary_metric,
)
from ._kinds import KINDS, ROLLOUT_KINDS, SCORE_KINDS, figure

FORMATS = (".png", ".pdf", ".svg")


def _kinds(kind: str | tuple | list) -> list[str]:
    kinds: list[str] = list(KINDS[1:]) if kind == "all" else [kind] if isinstance(kind, str) else list(kind)
    for k in kinds:
        if k not in KINDS:
            hint = "; write files with out=" if isinstance(k, (str, os.PathLike)) and Path(k).suffix else ""
            if k == "search":  # drawn from the search's record in the sweep directory, not from a store
                hint = "; a search's trace is sweep.search.plot_trace(sweep_dir) (sweep plot DIR --kind search)"
            raise QueryError(
                f"`kind`: got {k!r}{did_you_mean(k, [*KINDS, 'all'])}; choose one of {', '.join(KINDS)} or 'all' "
                f"(or a list){hint}"
            )
    return kinds


def figure_paths(out: str | os.PathLike[str], kind: str | list[str] | tuple[str, ...]) -> list[Path]:
    """Where :func:`plot` writes the figures of ``kind``: one figure to ``out`` itself; several to
    ``<stem>-<kind><suffix>`` next to it (``figs/heat.pdf`` -> ``figs/heat-curves.pdf``,
    ``figs/heat-spread.pdf``, ``figs/heat-predictions.pdf``)."""
    kinds = _kinds(kind)
    out = local_out(out)
    if out.suffix.lower() not in FORMATS:
        raise QueryError(
            f"`out`: got {str(out)!r}; give a file name ending in {', '.join(FORMATS)} "
            f"(several figures are written as <name>-<kind><suffix>)"
        )
    if len(kinds) == 1:
        return [out]
    return [out.with_name(f"{out.stem}-{k}{out.suffix}") for k in kinds]


def plot(
    source: Ensemble | str | os.PathLike[str],
    kind: str | list[str] | tuple[str, ...] = "overview",
    *,
    out: str | os.PathLike[str] | None = None,
    dpi: int = 200,
    metric: str | None = None,
    mode: str | None = None,
    num_samples: int = SHOWN_SAMPLES,
    max_curves: int = 200,
    rollout_metric: str | None = None,
    trust_code: bool = False,
) -> Figure | dict[str, Figure]:
    """The figures of an ensemble (or of the store of a sweep directory), as matplotlib Figures.

    Kinds: ``"curves"`` (every member's learning curves with each configuration's median and
    10-90% band, one panel per split on a shared y axis), ``"spread"`` (the final ``metric`` over
    seeds per configuration), ``"predictions"`` (the best configuration's ensemble mean ±std
    against the ground truth on the test samples the store holds, over the physical coordinate
    where the problem knows it; never regenerated, and left out, with a warning saying why, for a
    model a factory builds), ``"rollout_error"`` (each member's rollout curve of
    ``rollout_metric`` over autoregressive steps with each configuration's median and 10-90% band),
    ``"rollout"`` (the best configuration's ensemble rolled out from the first stored test
    trajectory's first state: space-time pictures of the reference, the ensemble mean and std
    for 1D problems, and time slices of the mean ±1 std against the reference),
    ``"calibration"`` (coverage of the members' central 50% and 90% intervals against nominal, and
    the best configuration's rank histogram), ``"spread_skill"`` (spread against the RMSE of the
    ensemble mean per rollout step, with the 1:1 line) and ``"ensemble_size"`` (CRPS and
    spread-skill against the number of members), all three from the stored ensemble scores (a
    selection of fewer members: its own, computed), on the validation split where the store holds
    it (see :mod:`sweep.figures._scores`), or
    ``"overview"`` (all of it in one figure; the rollout row where the store has rollout curves
    or test trajectories, the scores row where it has ensemble scores). One kind returns one ``Figure``; ``"all"`` (every kind whose data the
    store holds) or a list returns ``{kind: Figure}``. Configurations are ordered best first by
    their mean ``metric`` (default: the summary's, the validation loss; highest first for a
    built-in score such as ``val_accuracy``, or with ``mode="max"``), as ``sweep show`` lists them; the best one is the chosen configuration
    whose test curves, predictions and rollouts are shown (test numbers report the choice,
    never make it). A rollout kind asked for by name that the store has no data for raises
    :class:`QueryError` saying what is missing.

    Args:
        source: An :class:`Ensemble`, or a sweep directory (or its store) to load.
        kind: A kind above, ``"all"`` (every kind whose data the store holds) or a list of kinds.
        out: Also write the figures (``.png``, ``.pdf`` or ``.svg``): one figure to ``out``,
            several to ``<stem>-<kind><suffix>`` next to it.
        dpi: Resolution of PNG files.
        metric: The member column that ranks (default: the summary's, the validation loss).
        mode: ``"min"`` if lower ``metric`` is better, ``"max"`` if higher; ``None`` (default): ``"max"`` for a built-in score (``val_accuracy``, ``val_correlation``), else ``"min"``.
        num_samples: Test samples shown with the predictions (at most those the store keeps).
        max_curves: Learning curves drawn per configuration (at most, evenly spaced).
        rollout_metric: The rollout metric of ``"rollout_error"`` (default: the first stored).
        trust_code: Draw the predictions and rollouts of a model the store names by import path
            (your own model factory: code the store names, as :func:`sweep.load`'s
            ``trust_code``); without it (and for an Ensemble loaded without it) their panels
            say why they are left out.

    Returns:
        One ``Figure`` for one kind, or a dict of figures by kind for ``"all"`` or a list.

    Raises:
        QueryError: A kind asked for by name whose data the store does not hold (saying what is
            missing), a ``metric`` / ``rollout_metric`` it does not hold, or ``num_samples`` /
            ``max_curves`` below 1.

    Examples:
        ```python
        fig = sweep.plot("runs/heat")  # the overview
        figs = sweep.plot(ens, "all", out="figs/heat.pdf")  # figs/heat-curves.pdf, ...
        figs["curves"].axes[0].get_ylabel()  # 'train loss (mse)'
        ```
    """
    kinds = _kinds(kind)
    for name, value in (("num_samples", num_samples), ("max_curves", max_curves)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise QueryError(f"plot({name}={value!r}): give an integer >= 1")
    if out is not None:
        figure_paths(out, kinds)  # a bad `out` fails before the store is read
    ens = source if isinstance(source, Ensemble) else load(source, trust_code=trust_code)
    if trust_code and not ens.store.trust_code:  # an Ensemble loaded without trust, trusted here
        ens = Ensemble(ens.store.trusting(), ens.index)
    trust_code = ens.store.trust_code  # an Ensemble loaded with trust_code=True needs no more
    if len(ens) == 0:
        raise QueryError("plot: the ensemble has no members to plot")
    metric = metric or summary_metric(ens)
    keys = best_first(ens, metric, mode)
    named = set() if kind == "all" else set(kinds)  # kinds asked for by name: their data must be there
    wanted = set(kinds) | (set(ROLLOUT_KINDS) if "overview" in kinds else set())
    if rollout_metric is not None and "rollout_error" not in wanted:
        warn(
            f"plot(rollout_metric={rollout_metric!r}): left unused: of these figures ({', '.join(kinds)}) none draws a "
            f"rollout's error (rollout_error and the overview do)"
        )
    curves, totals = (
        curve_sample(ens, keys, max_curves) if {"curves", "overview", "rollout_error"} & wanted else (None, None)
    )
    r_metric = drawn_rollout_metric(curves, rollout_metric, "rollout_error" in named) if curves is not None else None
    rolled = ensemble_rollout(ens, keys[0], "rollout" in named, trust_code) if "rollout" in wanted else None
    named_scores = [k for k in SCORE_KINDS if k in named]
    overview = "overview" in kinds
    scores = stored_scores(ens, *named_scores[:1]) if overview or set(SCORE_KINDS) & wanted else None
    if kind == "all":  # every kind whose data the store holds
        kinds = [k for k in kinds if (k != "rollout_error" or r_metric) and (k != "rollout" or rolled is not None)]
        kinds = [k for k in kinds if k not in SCORE_KINDS or scores is not None]
    spec, samples, names = (
        predicted_samples(ens, keys[0], num_samples, trust_code)
        if {"predictions", "overview"} & set(kinds)
        else (ens.where(**keys[0]).spec, None, [])
    )
    data = FigureData(ens, keys, metric, curves, totals, spec, samples, names, r_metric, rolled, scores)
    figures = {k: figure(k, data) for k in kinds}
    if out is not None:
        for fig, path in zip(figures.values(), figure_paths(out, kinds)):
            save_figure(fig, path, dpi)
    return figures[kinds[0]] if isinstance(kind, str) and kind != "all" else figures
