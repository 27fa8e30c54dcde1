"""A large plan trains as several Tune experiments, *waves* of at most :func:`wave_size` trials,
one after another, so that the driver's memory stays flat in the number of trials (the rounds
of a race or a search share an experiment while they fit in one: :func:`room_for`).

Tune keeps every trial of an experiment in the driver until the experiment ends (its ``Trial``
record, ~0.04 MiB after :func:`sweep.tune._relay.trim`, measured with
``benchmarks/tune/thousand_trials.py``), and some of its work at every step visits every trial: one
experiment of 10,000 trials grows the driver by ~350 MiB and slows down as it fills. A wave's
records go when the wave ends, so the driver holds at most one wave's.

Each wave is an experiment ``tune-NNNN`` of the sweep directory. ``resume=True`` restores the
latest one (the wave that was running) and then plans and trains, in waves again, whatever no
checkpoint holds yet. Waves are even in size, at least ``25 * slots`` trials each, so that the
slots idle at the end of a wave (half a trial per slot, on average) cost under 2% of it.

A scheduler compares trials within one experiment (ASHA's rungs, PBT's population) and a time
budget bounds one experiment, so a sweep with either runs as one experiment, as does one that
fits in a wave.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

from ._options import RunOptions

WAVE_TRIALS = 1000  # trials per wave at least; the driver keeps ~0.04 MiB per trial of a wave
T = TypeVar("T")


def wave_size(slots: int) -> int:
    """The largest wave on a cluster of ``slots`` trial slots."""
    return max(WAVE_TRIALS, 25 * slots)


def room_for(options: RunOptions, slots: int) -> int | None:
    """How many trials one experiment takes (``None``: every trial of the run, with a scheduler
    or a time budget)."""
    budget = options.tune_config is not None and options.tune_config.time_budget_s is not None
    return None if options.the_scheduler is not None or budget else wave_size(slots)


def waves(trials: Sequence[T], options: RunOptions, slots: int) -> list[Sequence[T]]:
    """``trials`` in waves of even size, each one Tune experiment (one wave with a scheduler or a
    time budget)."""
    room = room_for(options, slots)
    if room is None or len(trials) <= room:
        return [trials]
    count = math.ceil(len(trials) / room)
    size = math.ceil(len(trials) / count)
    return [trials[i : i + size] for i in range(0, len(trials), size)]
