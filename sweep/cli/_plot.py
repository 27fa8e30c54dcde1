"""``sweep plot``: the figures of a sweep, written as PNG, PDF or SVG."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._args import Kind, choice
from ._options import DirArg, MetricOpt, ModeOpt, TrustCodeOpt, existing, warn_test_ranking


def plot(
    sweep_dir: DirArg,
    out: Annotated[
        str | None,
        typer.Option(
            metavar="FILE",
            help="Figure file: .png, .pdf or .svg. Several figures (--kind all) go "
            "to <stem>-<kind><suffix> next to it. Default: <SWEEP_DIR>/sweep.png (beside SWEEP_DIR where it "
            "is a store or an export, whose files are listed; ./sweep.png for remote sweeps).",
        ),
    ] = None,
    kind: Annotated[
        Kind,
        typer.Option(
            parser=choice(Kind),
            metavar="KIND",  # the kinds are in the help: a metavar of them all breaks mid-word at 80 columns
            help="overview (every panel in one figure), curves, spread, predictions, "
            "rollout_error, rollout, calibration, spread_skill, ensemble_size, search (a search's "
            "trace: each configuration's mean and interval by order of proposal), or all "
            "(one file per figure the store has the data for).",
        ),
    ] = Kind.overview,
    dpi: Annotated[int, typer.Option(min=10, max=2400, help="Resolution of PNG files.")] = 200,
    metric: MetricOpt = "val_loss",
    mode: ModeOpt = None,
    samples: Annotated[
        int,
        typer.Option(min=1, help="Test samples shown with the ensemble's predictions (at most those the store keeps)."),
    ] = 3,
    max_curves: Annotated[int, typer.Option(min=1, help="Learning curves drawn per configuration (at most).")] = 200,
    rollout_metric: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="Rollout metric whose error over steps is drawn (default: the first stored, e.g. nrmse).",
            show_default=False,
        ),
    ] = None,
    trust_code: TrustCodeOpt = False,
) -> None:
    """Learning curves, spread over seeds, predictions ±std.

    Panels: every member's learning curves with each configuration's median and 10-90% band (log
    scale, one panel per split on a shared y axis; with a validation set the test panel shows the
    configuration chosen on METRIC only); the final METRIC over seeds per configuration; the
    chosen configuration's ensemble mean ±std against the ground truth on the first test samples
    the store holds; for autoregressive emulators the rollout error over steps per configuration
    (median and 10-90% band over seeds) and the chosen configuration's ensemble rolled out
    against a stored test trajectory (mean ±std); where the store holds ensemble scores, a row of
    them (coverage, rank histogram, spread vs error, CRPS vs ensemble size). Configurations are
    ordered best first by METRIC, as in `sweep show`. Draws only from the store: no data is
    regenerated and no model factory the store names is imported (that panel then says why it is
    empty) unless --trust-code is given.
    """
    from ..figures import figure_paths
    from ..figures import plot as plot_sweep

    if out is None:
        out = _default_out(sweep_dir)
    chosen = Kind(kind).value
    if chosen == "search":  # drawn from the search's record, not the store
        from ..search import plot_trace

        figure_paths(out, "overview")  # a bad --out fails before anything is read
        plot_trace(existing(sweep_dir), out=out, dpi=dpi)
        typer.echo(f"wrote {out}")
        return
    figure_paths(out, chosen)  # a bad --out fails before the store is read
    if metric.startswith("test_"):  # it chooses the configuration drawn
        from ..ensemble import load

        warn_test_ranking(load(existing(sweep_dir)), metric)
    figures = plot_sweep(
        existing(sweep_dir),
        chosen,
        out=out,
        dpi=dpi,
        metric=metric,
        mode=mode,
        num_samples=samples,
        max_curves=max_curves,
        rollout_metric=rollout_metric,
        trust_code=trust_code,
    )
    for path in figure_paths(out, list(figures)) if isinstance(figures, dict) else [out]:
        typer.echo(f"wrote {path}")


def _default_out(sweep_dir: str) -> str:
    """``<sweep_dir>/sweep.png``, or, where that lies inside a store or an export (which hold only the
    files they list), beside it: for a generation of a sweep's store (``ensembles`` links to
    ``.ensembles/NNNNNN``), in the sweep directory; ``./sweep.png`` for a URI."""
    from .._fs import checked_folder_around
    from .._layout import STORE_NAME

    if "://" in sweep_dir:
        return "sweep.png"
    inside = Path(sweep_dir) / "sweep.png"
    folder = checked_folder_around(inside)
    if folder is None:
        return str(inside)
    beside = folder.parent.parent if folder.parent.name == f".{STORE_NAME}" else folder.parent
    return str(beside / "sweep.png")
