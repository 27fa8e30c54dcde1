"""A compact progress line while a sweep runs (a Tune ``Callback``; Tune's own tables are off: verbose=0).

``[heat] trials 3 done, 2 running, 3 pending | members 12/32 | best block val loss 1.2e-03 | ETA 1m20s``
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import Any, TextIO

from ray.tune import Callback


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def progress_line(name: str, trials: list, planned: Mapping[str, tuple[int, int]], elapsed: float) -> str:
    """One line of progress; ``planned``: trial key -> (members, epochs)."""
    counts = {"done": 0, "running": 0, "pending": 0, "failed": 0}
    members_done = member_epochs = total_member_epochs = 0
    best = None
    for trial in trials:
        status = trial.status
        counts["done" if status == "TERMINATED" else "failed" if status == "ERROR"
               else "running" if status == "RUNNING" else "pending"] += 1
        members, epochs = planned.get(trial.config.get("trial_key"), (0, 1))
        result: dict[str, Any] = trial.last_result or {}
        total_member_epochs += members * epochs
        reached = result.get("epoch", 0)
        if status == "TERMINATED":
            reached = epochs  # finished or stopped by the scheduler: no more work
        member_epochs += members * min(reached, epochs)
        members_done += result.get("members_done", 0)
        loss = result.get("val_loss_mean")  # the best is chosen on validation, never on test
        if loss is not None and (best is None or loss < best):
            best = loss
    total_members = sum(planned.get(t.config.get("trial_key"), (0, 1))[0] for t in trials)
    parts = [f"trials {counts['done']} done, {counts['running']} running, {counts['pending']} pending"
             + (f", {counts['failed']} failed" if counts["failed"] else ""),
             f"members {members_done}/{total_members}"]
    if best is not None:
        parts.append(f"best block val loss {best:.3g}")
    fraction = member_epochs / total_member_epochs if total_member_epochs else 0.0
    if 0 < fraction < 1:
        parts.append(f"ETA {_duration(elapsed * (1 - fraction) / fraction)}")
    parts.append(f"elapsed {_duration(elapsed)}")
    return f"[{name}] " + " | ".join(parts)


class SweepProgress(Callback):
    """Prints :func:`progress_line` at most every ``every_s`` seconds and once at the end."""

    def __init__(self, name: str, planned: Mapping[str, tuple[int, int]], every_s: float = 10.0,
                 stream: TextIO | None = None):
        self.name, self.planned, self.every_s = name, dict(planned), every_s
        self.stream = stream
        self._start = time.monotonic()
        self._last = float("-inf")
        self._last_line = ""

    def _print(self, trials, force: bool) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.every_s:
            return
        line = progress_line(self.name, trials, self.planned, now - self._start)
        if force or line.split(" | elapsed")[0] != self._last_line.split(" | elapsed")[0]:
            print(line, file=self.stream or sys.stdout, flush=True)
            self._last_line = line
        self._last = now

    def on_step_end(self, iteration: int, trials: list, **info) -> None:
        self._print(trials, force=False)

    def on_experiment_end(self, trials: list, **info) -> None:
        self._print(trials, force=True)
