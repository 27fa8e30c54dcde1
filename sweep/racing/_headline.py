"""What a race says in one line: ``sweep plan``, the live display, the end of a run and
``sweep show`` (a store's race) all build it here, from the race's settings and rule."""

from __future__ import annotations

from ..spec import Adaptive
from ._rules import first_decision, interval_level


def guarantee(confidence: float, precision: float | None) -> str:
    """What a race's ``confidence`` holds, in words: without ``precision`` the best is kept, with
    it every interval covers (:func:`~._rules.interval_level`)."""
    if precision is None:
        return f"a best configuration kept at {confidence:g}"
    return f"intervals simultaneous at {confidence:g}"


def decides(adaptive: Adaptive, rule: str, num_configs: int) -> str:
    """How a race under ``rule`` decides and from when: ``rank tests against the best, first
    decision after 6 seeds``, or what keeps it from deciding anything."""
    how = (
        "rank tests against the best"
        if rule == "rank"
        else f"each interval at {interval_level(adaptive, num_configs):.4g}"
    )
    first = first_decision(adaptive, num_configs, rule)
    if num_configs < 2:
        return f"{how}; one configuration: nothing to compare"
    if first is None:
        return (
            f"{how}; no configuration can be eliminated within max={adaptive.max} seeds at confidence "
            f"{adaptive.confidence:g}: raise max or lower confidence"
        )
    return f"{how}, first decision after {first} seeds"


def headline(adaptive: Adaptive, num_configs: int, rule: str, *states: str) -> str:
    """The race's line: its configurations and settings, the ``states`` given (where it stands,
    its counts), its promise and how it decides.

    Examples:
        >>> import sweep
        >>> from sweep.racing import headline
        >>> headline(sweep.Adaptive(start=3, step=3, max=9), 3, "rank", "round 2")
        'race of 3 configurations on val_loss (lower is better; start 3, step 3, max 9): round 2; a best configuration kept at 0.95 (rank tests against the best, first decision after 6 seeds)'
    """
    better = "lower" if adaptive.direction == "min" else "higher"
    precision = "" if adaptive.precision is None else f", precision {adaptive.precision:g}"
    settings = f"start {adaptive.start}, step {adaptive.step}, max {adaptive.max}{precision}"
    said = "".join(f"{s}; " for s in states if s)
    return (
        f"race of {num_configs} configuration{'s' * (num_configs != 1)} on {adaptive.metric} ({better} is better; "
        f"{settings}): {said}{guarantee(adaptive.confidence, adaptive.precision)} "
        f"({decides(adaptive, rule, num_configs)})"
    )
