"""The seeds of a sweep: an int ``N`` (seeds ``0..N-1``) or a list of distinct integers.

A member's key is ``fold_in(key(sweep_seed), seed)`` (docs: Concepts), so seeds and
``sweep_seed`` are uint32 values; the plan holds every seed, so one sweep holds at most 2**24.
"""

from __future__ import annotations

from collections.abc import Iterable, Sized

from .._errors import SpecError
from ._values import is_int

SEED_LIMIT = 2**32  # seeds and sweep_seed are folded into member keys as uint32 (docs: Concepts)
MAX_SEEDS = 2**24  # seeds of one sweep: its plan holds every one of them


def seed_tuple(seeds: int | Iterable[int]) -> tuple[int, ...]:
    if is_int(seeds):
        if not 1 <= seeds <= MAX_SEEDS:
            raise SpecError(
                f"`seeds`: got {seeds}; the number of seeds must be >= 1 and at most {MAX_SEEDS} (2**24) per sweep"
            )
        return tuple(range(int(seeds)))
    if isinstance(seeds, (str, bytes, bool)) or not isinstance(seeds, Iterable):
        raise SpecError(f"`seeds`: got {seeds!r}; give an int N (seeds 0..N-1) or a list of ints")
    if isinstance(seeds, Sized) and len(seeds) > MAX_SEEDS:
        raise SpecError(f"`seeds`: got {len(seeds)} seeds; at most {MAX_SEEDS} (2**24) per sweep")
    values = []
    for s in seeds:
        if not is_int(s) or not 0 <= s < SEED_LIMIT:
            raise SpecError(f"`seeds`: got {s!r}; seeds must be non-negative integers below 2**32")
        if len(values) == MAX_SEEDS:
            raise SpecError(f"`seeds`: more than {MAX_SEEDS} (2**24) seeds; that is the most one sweep holds")
        values.append(int(s))
    if not values:
        raise SpecError("`seeds`: got an empty list; give at least one seed")
    dupes = sorted({s for s in values if values.count(s) > 1}) if len(set(values)) < len(values) else []
    if dupes:
        raise SpecError(f"`seeds`: duplicate seed(s) {dupes[:10]}; each seed may appear once")
    return tuple(values)
