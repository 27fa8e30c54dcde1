"""The search under ``sweep show``: its headline (is the best separated from the runner-up?) and
its best configurations with their intervals over seeds."""

from __future__ import annotations

import typer


def search_lines(sweep_dir: str) -> None:
    """Print the search of ``sweep_dir`` (nothing for a grid or a race)."""
    from ..search import summary
    from ..store import SweepDir

    at = SweepDir.at(sweep_dir)
    plan = at.plan()
    if plan is None or plan.spec.search is None:
        return
    text = summary(plan.spec, at)
    if text:
        from ._tables import prose

        typer.echo("")
        typer.echo(prose(text))
