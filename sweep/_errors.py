"""The exceptions users see. Each message names the field or file, the value and what is allowed."""

from collections.abc import Iterable


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
