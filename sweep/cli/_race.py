"""The race of adaptive seeds under ``sweep show``: its settings and outcome, then its decisions."""

from __future__ import annotations

import typer

from ._tables import format_table, prose


def race_lines(ens, limit: int) -> None:
    """Print the store's race (nothing for a sweep with fixed seeds): a title line, then one row per
    configuration, the order of the grid."""
    table = ens.race()
    if table is None:
        return
    typer.echo("")
    typer.echo(prose(table.schema.metadata[b"title"].decode() + ":"))
    typer.echo(format_table(table, limit, {"config_id", *ens.grid_columns}))
