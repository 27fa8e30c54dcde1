"""The exceptions users see. Each message names the field or file, the value and what is allowed."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(value: object, choices: Iterable[str]) -> str:
    """``" (did you mean 'epochs'?)"`` when ``value`` is close to one of ``choices``, else ``""``.

    Example:
        ``did_you_mean("epoch", ["epochs", "batch_size"])`` -> ``" (did you mean 'epochs'?)"``
    """
    close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


class SweepError(Exception):
    """Base class of every error seed-sweep raises on bad input or a bad store."""


class SpecError(SweepError, ValueError):
    """A sweep specification (or a value derived from it) is invalid."""


class StoreError(SweepError):
    """A store directory or one of its files is missing, corrupt, altered or of another format.

    ``problems`` lists every problem found (one, unless :meth:`sweep.store.Store.verify` found several).
    """

    problems: tuple[str, ...]

    def __init__(self, message: str, problems: Iterable[str] = ()):
        super().__init__(message)
        self.problems = tuple(problems) or (message,)


class QueryError(SweepError, ValueError):
    """An ensemble query (where / best / member / predict) cannot be answered."""
