"""Counts in the words users read: ``counted(1, "trial")`` -> ``"1 trial"``, ``counted(3, "trial")`` -> ``"3 trials"``."""

from __future__ import annotations


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural (``noun + "s"``) unless ``n`` is 1.

    Example:
        ``counted(1, "structural config")`` -> ``"1 structural config"``; ``counted(0, "trial")`` -> ``"0 trials"``
    """
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
