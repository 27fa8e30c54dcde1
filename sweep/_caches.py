"""Caches of compiled programs and model templates, all cleared by :func:`clear_caches`.

Modules decorate their builders with :func:`cached` instead of ``functools.lru_cache`` (and
register module-level jitted functions with :func:`register`) so that one call frees every
compiled program seed-sweep holds, as ``eqx.clear_caches`` does for Equinox.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable)
_CLEARERS: list[Callable[[], None]] = []


def cached(maxsize: int = 64) -> Callable[[F], F]:
    """``functools.lru_cache(maxsize)`` that :func:`clear_caches` clears."""

    def decorate(fn: F) -> F:
        wrapped = functools.lru_cache(maxsize=maxsize)(fn)
        _CLEARERS.append(wrapped.cache_clear)
        return wrapped  # type: ignore[return-value]

    return decorate


def register(jitted: F) -> F:
    """A ``jax.jit`` function whose compiled programs :func:`clear_caches` drops; returns it."""
    _CLEARERS.append(jitted.clear_cache)
    return jitted


def clear_caches() -> None:
    """Drop every compiled program and model template seed-sweep has cached in this process.

    The next block, inference call or data generation compiles again (or reads JAX's persistent
    compilation cache, if :func:`sweep.configure` switched it on).

    Examples:
        ```python
        sweep.clear_caches()  # e.g. between benchmarks, to time compilation again
        ```
    """
    for clear in _CLEARERS:
        clear()
