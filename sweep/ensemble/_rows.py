"""Tables of rows that read well in a terminal and in a notebook.

:func:`format_table` and :func:`html_table` render a pyarrow table as fixed-width text or as an
HTML ``<table>``; :class:`SummaryTable` (what :meth:`sweep.Ensemble.summary` returns) is a
pyarrow table with a ``repr`` and a ``_repr_html_`` made of its rows, not of its schema.
"""

from __future__ import annotations

import html
import math
from typing import Any

import pyarrow as pa

from .._text_table import text_table

# Columns of a summary left out of its short views (`repr`, `sweep show` without --wide).
WIDE_COLUMNS = frozenset({"iqm", "iqm_ci_low", "iqm_ci_high", "n", "median", "min", "max"})
REPR_ROWS = 20  # rows shown by a repr


def cell(value: Any) -> str:
    """One value as a table cell: 4 significant digits for floats, ``-`` for null, ``[...]`` for lists."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple, dict)):
        return "[...]" if value else "[]"
    return str(value)


def _more(table: pa.Table, limit: int, hint: str) -> str:
    return f"... {table.num_rows - limit} more rows{hint}" if table.num_rows > limit else ""


def format_table(
    table: pa.Table, limit: int = 50, hint: str = " (--limit)", width: int | None = None, keys: int = 0
) -> str:
    """A fixed-width text table of the first ``limit`` rows (list columns abbreviated), then a line
    ``... N more rows<hint>`` if there are more.

    Args:
        table: the rows.
        limit: rows shown at most.
        hint: what follows the count of rows left out (how to see them).
        width: the characters a line may take (a terminal's columns); a wider table is printed in
            blocks of columns one below the other, each with the first ``keys`` columns. None: one
            block, however wide.
        keys: how many leading columns name a row (repeated in every block).

    Returns:
        The table as lines of text, one header line first (per block, blocks apart by an empty line).
    """
    rows = [[cell(v) for v in row.values()] for row in table.slice(0, limit).to_pylist()]
    more = _more(table, limit, hint)
    return text_table(table.column_names, rows, width, keys) + (f"\n{more}" if more else "")


def html_table(table: pa.Table, limit: int = 50, caption: str = "", hint: str = "") -> str:
    """The first ``limit`` rows of ``table`` as an HTML ``<table>`` (cells as :func:`format_table`
    writes them, escaped), with ``caption`` above it and the count of rows left out below.

    Example:
        ``IPython.display.HTML(html_table(ens.index, limit=10))``
    """
    head = "".join(f"<th>{html.escape(n)}</th>" for n in table.column_names)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell(v))}</td>" for v in row.values()) + "</tr>"
        for row in table.slice(0, limit).to_pylist()
    )
    more = _more(table, limit, hint)
    return (
        (f"<p>{html.escape(caption)}</p>" if caption else "")
        + f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        + (f"<p>{html.escape(more)}</p>" if more else "")
    )


def left_out(table: pa.Table) -> int:
    """How many members of a summary that did not diverge have no finite value of its metric (a
    rollout that blew up): the statistics leave them out (``n`` counts those used)."""
    if not {"count", "diverged", "n"} <= set(table.column_names):
        return 0
    rows = zip(*(table.column(c).to_pylist() for c in ("count", "diverged", "n")), strict=True)
    return sum(count - diverged - n for count, diverged, n in rows)


def compact(table: pa.Table) -> pa.Table:
    """A summary without its wide statistics (:data:`WIDE_COLUMNS`; ``n`` kept where members are
    left out, :func:`left_out`), and without ``stopped_early`` when no member stopped early: what
    ``sweep show`` prints without ``--wide``."""
    hidden = set(WIDE_COLUMNS) - ({"n"} if left_out(table) else set())
    if "stopped_early" in table.column_names and not any(table.column("stopped_early").to_pylist()):
        hidden.add("stopped_early")
    return table.drop_columns([c for c in table.column_names if c in hidden])


class SummaryTable:
    """A :class:`pyarrow.Table` of statistics per configuration that reads as its rows.

    Every attribute of the table is its own (``to_pylist()``, ``to_pandas()``, ``column()``,
    ``num_rows``, ``column_names``, ...), ``.table`` is the :class:`pyarrow.Table` itself and
    ``pyarrow.table(summary)`` gives it too. ``repr()`` and ``_repr_html_()`` (notebooks) show the
    best rows with the short set of columns (the wide statistics are in ``.table``).

    Example:
        ``ens.summary()`` in a notebook shows a table; ``ens.summary().table`` is the pyarrow table.
    """

    __slots__ = ("table", "title")

    def __init__(self, table: pa.Table, title: str = ""):
        self.table, self.title = table, title

    def __getattr__(self, name: str) -> Any:
        if name in SummaryTable.__slots__:  # not set yet (copy, unpickle): no recursion
            raise AttributeError(name)
        return getattr(self.table, name)

    def __len__(self) -> int:
        return self.table.num_rows

    def __getitem__(self, key: Any) -> Any:
        return self.table[key]

    def __eq__(self, other: object) -> bool:
        return self.table.equals(other.table if isinstance(other, SummaryTable) else other)

    __hash__ = None  # type: ignore[assignment]  # mutable-looking, as pyarrow.Table

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self.table.__arrow_c_stream__(requested_schema)

    def _shown(self) -> pa.Table:
        """The columns a person reads first: :func:`compact`, without the config ids where grid
        values name the configurations, and without the intervals of the columns beside."""
        table = compact(self.table)
        names = table.column_names
        first_stat = names.index("count") if "count" in names else len(names)
        drop = {"config_id"} if first_stat > 1 else set()
        drop |= {c for c in names if c.endswith(("_ci_low", "_ci_high")) and not c.startswith("mean_")}
        return table.drop_columns([c for c in names if c in drop])

    def _hidden(self, shown: pa.Table) -> str:
        left = [c for c in self.table.column_names if c not in set(shown.column_names)]
        return f"({len(left)} more columns in .table: {', '.join(left)})" if left else ""

    def __repr__(self) -> str:
        shown = self._shown()
        lines = [self.title] if self.title else []
        lines.append(format_table(shown, REPR_ROWS, hint=" (in .table)"))
        hidden = self._hidden(shown)
        return "\n".join(lines + ([hidden] if hidden else []))

    def _repr_html_(self) -> str:
        shown = self._shown()
        hidden = self._hidden(shown)
        return html_table(shown, REPR_ROWS, self.title, hint=" (in .table)") + (
            f"<p>{html.escape(hidden)}</p>" if hidden else ""
        )


def seed_text(seeds: list[int], runs: int = 4) -> str:
    """Seeds as runs of consecutive ones, e.g. ``"0..3, 8, 10..11"`` (at most ``runs`` runs, then ``...``)."""
    ordered = sorted(seeds)
    spans: list[list[int]] = []
    for s in ordered:
        if spans and s == spans[-1][1] + 1:
            spans[-1][1] = s
        else:
            spans.append([s, s])
    text = ", ".join(f"{a}..{b}" if b > a else str(a) for a, b in spans[:runs])
    return text + (", ..." if len(spans) > runs else "")
