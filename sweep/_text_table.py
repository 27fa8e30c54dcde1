"""Fixed-width text tables that fit a terminal: a table wider than the terminal is printed in
blocks of columns one below the other, each led by the columns that name a row.

The one renderer of the package's text tables: a plan's trials (:meth:`sweep.Plan.format`) and
the rows of a store (:func:`sweep.ensemble.format_table`: ``sweep show``, ``sweep scores``, an
``Ensemble``'s ``repr``).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence

HEADER_LINES = 3  # the most lines a column's name is folded into, at its underscores
HEADER_WIDTH = 12  # a name folds into the fewest lines that are no wider than this (or its cells)


def text_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], width: int | None = None, keys: int = 0, left: bool = False
) -> str:
    """``header`` and ``rows`` (cells as text) as fixed-width lines, two spaces between columns.

    Args:
        header: the column names.
        rows: the cells of each row, one per column.
        width: the characters a line may take (a terminal's columns); a wider table is printed in
            blocks of columns one below the other (blocks apart by an empty line), each with the
            first ``keys`` columns; where it saves blocks, the names of the other columns that
            are wider than their cells fold after underscores (up to :data:`HEADER_LINES` lines,
            right-aligned with the cells). None: one block, however wide.
        keys: how many leading columns name a row (repeated in every block).
        left: cells flush left (text) rather than right (numbers).

    Example:
        ``text_table(["config", "loss"], [["depth=2", "0.1"]])`` -> ``" config  loss\\ndepth=2   0.1"``
    """
    header, rows = [printable(h) for h in header], [[printable(c) for c in r] for r in rows]
    names = [[h] for h in header]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    if width is not None and rows and len(_blocks(widths, width, keys)) > 1:
        # too wide for one block: fold the long names of the columns that do not name a row,
        # where that saves blocks
        cells = [max([0] + [len(r[i]) for r in rows]) for i in range(len(header))]
        folded = [[h] if i < keys else _folded(h, cells[i]) for i, h in enumerate(header)]
        narrower = [max([cells[i]] + [len(n) for n in folded[i]]) for i in range(len(header))]
        if len(_blocks(narrower, width, keys)) < len(_blocks(widths, width, keys)):
            names, widths = folded, narrower
    depth = max([1] + [len(n) for n in names])
    header_rows = [[([""] * (depth - len(n)) + n)[k] for n in names] for k in range(depth)]

    def line(cells: Sequence[str], columns: list[int]) -> str:
        text = "  ".join(cells[i].ljust(widths[i]) if left else cells[i].rjust(widths[i]) for i in columns)
        return text.rstrip()

    def block(columns: list[int]) -> str:
        named = [h for h in header_rows if any(h[i] for i in columns)]  # the header lines it uses
        return "\n".join(line(r, columns) for r in [*named, *rows])

    return "\n\n".join(block(columns) for columns in _blocks(widths, width if rows else None, keys))


def printable(text: str) -> str:
    """``text`` with its control characters escaped (``\\x1b``): a table's cells may come from a
    store someone else wrote, and a terminal acts on the codes it is sent."""
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _folded(name: str, cells: int) -> list[str]:
    """``name`` in the fewest lines (at most :data:`HEADER_LINES`), broken after underscores, that
    are no wider than ``cells`` or :data:`HEADER_WIDTH` characters; as it is where it has no
    underscore or is no wider than its cells."""
    pieces = re.findall(r"[^_]*_|[^_]+$", name)
    if len(name) <= cells or len(pieces) < 2:
        return [name]
    for count in range(1, HEADER_LINES + 1):
        for width in range(max(cells, *map(len, pieces)), len(name) + 1):
            lines = _packed(pieces, width)
            if len(lines) <= count:
                break
        if max(map(len, lines)) <= max(cells, HEADER_WIDTH) or count == HEADER_LINES:
            return lines
    return [name]


def _packed(pieces: list[str], width: int) -> list[str]:
    """``pieces`` joined into lines of at most ``width`` characters (a longer piece alone)."""
    lines = [""]
    for piece in pieces:
        if lines[-1] and len(lines[-1]) + len(piece) > width:
            lines.append(piece)
        else:
            lines[-1] += piece
    return lines


def _blocks(widths: list[int], width: int | None, keys: int) -> list[list[int]]:
    """Column indices per block: the first ``keys`` columns, then as many of the others, in order,
    as fit in ``width`` characters (at least one per block); one block where the table fits, or
    where the keys and the narrowest other column do not (blocks would not fit either)."""
    key_columns = list(range(min(keys, len(widths))))
    others = widths[len(key_columns) :]
    if (
        width is None
        or sum(widths) + 2 * (len(widths) - 1) <= width
        or not others
        or sum(widths[j] + 2 for j in key_columns) + min(others) > width
    ):
        return [list(range(len(widths)))]
    blocks: list[list[int]] = []
    for i in range(len(key_columns), len(widths)):
        block = blocks[-1] if blocks else None
        if block is None or sum(widths[j] + 2 for j in block) + widths[i] > width:
            blocks.append([*key_columns, i])
        else:
            block.append(i)
    return blocks


def wrapped(text: str, width: int | None) -> str:
    """Each line of ``text`` wrapped at word boundaries to ``width`` characters (None: as it is)."""
    if width is None:
        return text
    wrap = textwrap.TextWrapper(width, break_long_words=False, break_on_hyphens=False)
    return "\n".join(wrap.fill(line) or line for line in text.split("\n"))
