"""The exceptions users see. Each message names the field or file, the value and what is allowed."""

from __future__ import annotations

import contextlib
import difflib
import inspect
import os
import warnings
from collections.abc import Iterable


def did_you_mean(value: object, choices: Iterable[str]) -> str:
    """``" (did you mean 'epochs'?)"`` when ``value`` is close to one of ``choices``, else ``""``:
    the one choice it is in another case, else the one choice it is the start of (a name cut short, 4 characters at least), else the closest
    by :func:`difflib.get_close_matches`, else the one choice sharing the longest start with it
    (most of ``value``: a shortened name).

    Examples:
        ``did_you_mean("epoch", ["epochs", "batch_size"])`` -> ``" (did you mean 'epochs'?)"``;
        ``did_you_mean("configs", ["configurations", "batch"])`` -> ``" (did you mean 'configurations'?)"``
    """
    text, names = str(value), [str(c) for c in choices]
    cased = [c for c in names if c.lower() == text.lower()]  # another case: "HDF5" for "hdf5"
    if len(cased) == 1 and cased[0] != text:
        return f" (did you mean {cased[0]!r}?)"
    completed = [c for c in names if len(text) >= 4 and c.startswith(text)]  # a name cut short
    close = completed if len(completed) == 1 else difflib.get_close_matches(text, names, n=1, cutoff=0.75)
    if not close:  # a shortened name ("configs"): the one choice sharing the longest start with it
        shared = {c: len(os.path.commonprefix([text, c])) for c in names}
        longest = max(shared.values(), default=0)
        tied = [c for c, n in shared.items() if n == longest]
        close = tied if len(tied) == 1 and longest >= max(4, 0.75 * len(text)) else []
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


class NoStoreError(StoreError):
    """A folder holds neither a store nor a sweep directory (a typo, a data folder): the one
    :class:`StoreError` whose remedy may be another kind of folder (an export, for ``sweep verify``)."""


class QueryError(SweepError, ValueError):
    """An ensemble query (where / best / member / predict) cannot be answered."""


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_CONTEXTLIB = os.path.abspath(contextlib.__file__)  # a `with` of seed-sweep's context managers runs in it


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` attributed to the first frame outside seed-sweep and ``contextlib``: the
    user's line that called into it, at whatever depth the warning arises (Python 3.12's
    ``skip_file_prefixes``), not one of seed-sweep's; in a thread seed-sweep started, the frame
    that started it (``threading``'s), as no user line is on that thread's stack."""
    frame, level = inspect.currentframe(), 1
    while frame is not None and (
        (file := os.path.abspath(frame.f_code.co_filename)).startswith(_PACKAGE) or file == _CONTEXTLIB
    ):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
