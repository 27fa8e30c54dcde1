"""``sweep show``: statistics over seeds per configuration, or the members, best first."""

from __future__ import annotations

from typing import Annotated

import typer

from .._words import counted
from ..metrics import mode_of
from ._args import Format, choice, parse_where
from ._options import DirArg, MetricOpt, ModeOpt, WhereOpt, existing, warn_test_ranking


def show(
    sweep_dir: DirArg,
    metric: MetricOpt = "val_loss",
    mode: ModeOpt = None,
    members: Annotated[
        bool, typer.Option("--members", help="List members (best first) instead of configurations.")
    ] = False,
    where: WhereOpt = None,
    limit: Annotated[int, typer.Option(min=1, help="Print at most this many rows.")] = 50,
    wide: Annotated[bool, typer.Option("--wide", help="Every statistic (median, min, max, IQM too).")] = False,
    format: Annotated[
        Format,
        typer.Option(
            "--format",
            parser=choice(Format),
            help="table (for reading), csv or json (for other tools; every row up to --limit).",
        ),
    ] = Format.table,
    scores: Annotated[bool, typer.Option("--scores", help="The stored ensemble scores beside (sweep scores).")] = False,
) -> None:
    """Statistics over seeds per configuration, best first.

    One row per configuration (structural config x vmapped hyperparameters), ranked by the mean of
    METRIC (validation loss by default): member counts and, over members that did not diverge,
    mean, std and the 95% bootstrap interval of the mean (--wide: median, min, max, IQM too), with
    the test mean and its interval beside (reported, not used to rank).

    In a terminal, a table wider than it (or than COLUMNS, where that is set) is printed in blocks
    of columns one below the other, each led by the columns that name a row (long column names
    fold after underscores where that saves a block); a pipe or a file gets whole lines (--format
    csv or json for other tools).
    """
    from .._errors import StoreError
    from ..ensemble import compact, left_out, load, whole_configurations
    from ._race import race_lines
    from ._scores import seeds_line
    from ._search import search_lines
    from ._status import storage_listing
    from ._tables import format_table, prose, write_table

    try:
        ens = load(existing(sweep_dir))
    except StoreError:
        listing = storage_listing(sweep_dir, "show")
        if listing is None:
            raise
        typer.echo(listing)
        return
    kw = parse_where(where)
    if kw:
        ens = ens.where(**kw)
    warn_test_ranking(ens, metric)
    fmt = Format(format).value
    first = "lowest" if mode_of(metric, mode) == "min" else "highest"
    if members:
        table = ens.best(min(limit, len(ens)), metric=metric, mode=mode).table  # reads only the rows shown
        table = table.drop_columns([c for c in table.column_names if c.endswith("_history") or c == "history_epochs"])
        if fmt != "table":
            typer.echo(write_table(table, fmt), nl=False)
            return
        typer.echo(f"members ranked by {metric} ({first} first):")
        typer.echo(format_table(table, limit, {"member_id", "config_id", "seed"}))
        if len(ens) > limit:
            typer.echo(f"... {len(ens) - limit} more members (--limit)")
        return
    table = ens.summary(metric, mode, scores=scores).table
    if not wide:
        table = compact(table)
    if fmt != "table":
        typer.echo(write_table(table.slice(0, limit), fmt), nl=False)
        return
    beside = [c.removesuffix("_mean") for c in table.column_names if c.startswith("test_") and c.endswith("_mean")]
    typer.echo(
        prose(
            f"{metric} over seeds per configuration ({counted(len(ens), 'member')}), {first} mean first; 95% bootstrap "
            f"intervals" + (f"; {', '.join(beside)} reported beside, not used to rank:" if beside else ":")
        )
    )
    units = ens.units_note()
    if units:
        typer.echo(prose(units))
    typer.echo(format_table(table, limit, {"config_id", *ens.grid_columns}))
    missing = left_out(table)
    if missing:
        typer.echo(
            prose(
                f"n: the members with a finite {metric}; {counted(missing, 'member')} that trained without diverging "
                f"{'has' if missing == 1 else 'have'} none (a rollout that blew up, or a metric it was not evaluated on) "
                f"and {'is' if missing == 1 else 'are'} left out of the statistics"
            )
        )
    if scores and whole_configurations(ens, stored := ens.stored_scores()).num_rows < stored.num_rows:
        typer.echo(
            prose(
                "scores: the store's are of every member of a configuration, so none are shown for a configuration "
                "the selection holds only some members of; `sweep scores` with the same --where computes its own "
                "(with --trust-code where a model factory builds the members)"
            )
        )
    typer.echo(prose(seeds_line(ens, metric, mode)))
    race_lines(ens, limit)
    search_lines(existing(sweep_dir))
