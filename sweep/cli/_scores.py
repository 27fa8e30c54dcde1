"""``sweep scores DIR``: the ensemble scores a store holds; and the "how many seeds?" line of ``sweep show``."""

from __future__ import annotations

from typing import Annotated

import typer

from ._args import CLIError, Format, parse_where
from ._options import DirArg

KINDS = ("one_step", "rollout", "rollout_gmean", "ensemble_size", "all")
SHOWN = [
    "split",
    "kind",
    "step",
    "members",
    "crps",
    "crps_ensemble",
    "rmse",
    "spread",
    "spread_skill",
    "coverage_50",
    "coverage_90",
]


def scores(
    sweep_dir: DirArg,
    split: Annotated[str | None, typer.Option(help="'val' or 'test' (default: both).")] = None,
    kind: Annotated[
        str, typer.Option(help="one_step, rollout (per step), rollout_gmean, ensemble_size, or all.")
    ] = "one_step",
    where: Annotated[list[str] | None, typer.Option(help="Keep configurations with column=value (repeatable).")] = None,
    limit: Annotated[int, typer.Option(min=1, help="Print at most this many rows.")] = 50,
    wide: Annotated[bool, typer.Option("--wide", help="Every column (MAE, points, rank histogram, gains).")] = False,
    format: Annotated[
        Format, typer.Option("--format", help="table (for reading), csv or json (every column, up to --limit).")
    ] = Format.table,
) -> None:
    """The ensemble scores stored for every configuration (computed when the sweep was aggregated).

    CRPS (fair), RMSE of the ensemble mean, spread and the spread-skill ratio (1: calibrated, below
    1: overconfident), and how often the truth falls in the members' central 50% and 90%
    intervals, on the stored validation and test samples (one_step), at every rollout step of the
    stored trajectories (rollout) and their geometric mean over steps 1..100, and for subsets of
    members (ensemble_size). The loss of the ensemble mean against the mean member's (loss_gain,
    > 1: the ensemble beats a member) is listed beside one_step rows.
    """
    import pyarrow.compute as pc

    from ..ensemble import load
    from ._tables import format_table, write_table

    if kind not in KINDS:
        raise CLIError(f"--kind: got {kind!r}; choose one of {', '.join(KINDS)}")
    ens = load(sweep_dir)
    kw = parse_where(where)
    if kw:
        ens = ens.where(**kw)
    table = ens.stored_scores(split)
    if kind != "all":
        table = table.filter(pc.equal(table["kind"], kind))  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
    fmt = Format(format).value
    if fmt != "table":
        typer.echo(write_table(table.slice(0, limit), fmt), nl=False)
        return
    keys = ["config_id", *ens.grid_columns]
    gains = [c for c in table.column_names if c.endswith("_gain")]
    if not wide:
        table = table.select([c for c in [*keys, *SHOWN, *gains[:1]] if c in table.column_names])
    typer.echo(f"ensemble scores ({kind}, {split or 'val and test'}) of {len(ens)} members, from the store:")
    typer.echo(format_table(table, limit))


def seeds_line(ens, metric: str, mode: str, width: float = 0.1) -> str:
    """How many seeds bring the 95% interval of the best configuration's mean ``metric`` to
    ``width`` of its mean (``sweep show``'s last line)."""
    row = ens.seeds_needed(metric, width, mode).to_pylist()[0]
    if row["seeds_needed"] is None:
        return (
            f"seeds needed: unknown for the best configuration ({row['n']} usable seed(s); at least 2 give an interval)"
        )
    return (
        f"seeds needed for a 95% interval of the best mean {metric} within {width:.0%} of it: "
        f"{row['seeds_needed']} ({row['n']} trained give {row['relative_width']:.0%})"
    )
