"""Fixed-width text tables that fit a terminal: a table wider than the terminal is printed in
blocks of columns one below the other, each led by the columns that name a row.

The one renderer of the package's text tables: a plan's trials (:meth:`sweep.Plan.format`) and
the rows of a store (:func:`sweep.ensemble.format_table`: ``sweep show``, ``sweep scores``, an
``Ensemble``'s ``repr``).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence


def text_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], width: int | None = None, keys: int = 0, left: bool = False
) -> str:
    """``header`` and ``rows`` (cells as text) as fixed-width lines, two spaces between columns.

    Args:
        header: the column names.
        rows: the cells of each row, one per column.
        width: the characters a line may take (a terminal's columns); a wider table is printed in
            blocks of columns one below the other (blocks apart by an empty line), each with the
            first ``keys`` columns. None: one block, however wide.
        keys: how many leading columns name a row (repeated in every block).
        left: cells flush left (text) rather than right (numbers).

    Example:
        ``text_table(["config", "loss"], [["depth=2", "0.1"]])`` -> ``" config  loss\\ndepth=2   0.1"``
    """
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]

    def line(cells: Sequence[str], columns: list[int]) -> str:
        text = "  ".join(cells[i].ljust(widths[i]) if left else cells[i].rjust(widths[i]) for i in columns)
        return text.rstrip() if left else text

    blocks = _blocks(widths, width if rows else None, keys)  # no rows: the header alone
    return "\n\n".join("\n".join(line(r, columns) for r in [header, *rows]) for columns in blocks)


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
