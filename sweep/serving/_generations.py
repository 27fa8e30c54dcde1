"""What a service did with each generation it was asked to serve (``watch_s``, ``POST /reload``):
switched to it, or refused it and kept serving the one it had.

A replica loads a generation with :func:`switch_to`, which notes the outcome; the notes go to the
service's board (:class:`._deployment.Board`, a :class:`GenerationLog`), and the process that
started the service reads them (:meth:`._service.Service.changes`: what ``sweep serve`` prints
while it serves). Ray-free: the board and the replicas wrap it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._model import Selection, ServedModel, generation_of


class GenerationLog:
    """The lines saying what became of each generation, in order, one per generation and outcome
    (every replica of a service, and every look of ``watch_s`` at a generation it cannot serve,
    notes the same outcome: it is kept once)."""

    def __init__(self) -> None:
        self._lines: list[str] = []
        self._noted: set[tuple[str, str]] = set()

    def note(self, outcome: str, root: str, line: str) -> None:
        """Keep ``line`` unless ``outcome`` (``"serving"``, ``"refused"``) of ``root`` is kept already."""
        if (outcome, root) not in self._noted:
            self._noted.add((outcome, root))
            self._lines.append(line)

    def since(self, count: int) -> list[str]:
        """The lines after the first ``count``."""
        return self._lines[count:]


def switch_to(
    root: str,
    current: ServedModel,
    selection: Selection,
    buckets: tuple[int, ...],
    note: Callable[[str, str, str], Any],
) -> ServedModel:
    """Generation ``root`` loaded and compiled for ``selection`` (``current`` serving meanwhile),
    its outcome given to ``note(outcome, root, line)``; re-raises what made it fail, after noting
    it, so that the caller keeps ``current``."""
    try:
        model = ServedModel(root, selection, buckets)
    except Exception as e:
        kept = current.generation or "-"
        note("refused", root, f"generation {generation_of(root) or root} refused, {kept} keeps serving: {e}")
        raise
    note("serving", root, f"serving generation {model.generation or '-'}: {len(model.member_ids)} members")
    return model
