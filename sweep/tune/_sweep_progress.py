"""The display of a sweep's :class:`~._progress.ProgressState` while Tune runs (a Tune
``Callback``; Tune's own output is off): one rich display updated in place on a terminal, else a
plain line every ``every_s`` seconds while something changes, and once at the end."""

from __future__ import annotations

import os
import sys
from typing import TextIO

from ray.tune import Callback

from ._progress import ProgressState, duration

MODES = ("auto", "live", "plain", "off")


class SweepProgress(Callback):
    """Shows a :class:`ProgressState` while Tune runs: live on a terminal, plain lines otherwise.

    ``mode``: ``"auto"`` (live on a terminal unless ``CI`` is set or ``TERM=dumb``), ``"live"``,
    ``"plain"`` or ``"off"``. One instance serves every experiment of a ``sweep.run`` call;
    :meth:`close` ends the display.
    """

    def __init__(self, state: ProgressState, mode: str = "auto", stream: TextIO | None = None, every_s: float = 10.0):
        if mode not in MODES:
            raise ValueError(f"`progress`: got {mode!r}; choose one of {', '.join(MODES)}")
        self.state, self.stream, self.every_s = state, stream or sys.stdout, every_s
        if mode == "auto":
            tty = getattr(self.stream, "isatty", lambda: False)()
            mode = "live" if tty and not os.environ.get("CI") and os.environ.get("TERM") != "dumb" else "plain"
        self.mode = mode
        self._live, self._console, self._closed, self._started = None, None, False, False
        self._starting = ""  # what starts before the first trial shows (a live display says so)
        self._last_time, self._last_line = float("-inf"), ""

    def start(self) -> SweepProgress:
        """Show the display from the first step at which Tune has created one of the trials."""
        self._started = True
        self._show()
        return self

    def starting(self, what: str) -> None:
        """Say that ``what`` starts (Ray: seconds in which nothing else would show), where the
        display is live: one line in its place until the first trial shows; nothing elsewhere."""
        self._starting = what
        if self.mode == "live":
            self._open()

    def _show(self) -> None:
        if self._started and self.state.seen and self.mode == "live":
            self._open()

    def _open(self) -> None:
        if self._live is None and not self._closed:
            from rich.console import Console
            from rich.live import Live

            self._console = console = Console(file=self.stream, force_terminal=True)
            self._live = Live(
                console=console,
                get_renderable=self._frame,
                refresh_per_second=2,
                transient=False,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._live.start()

    def _frame(self):
        """The display and, until its last frame, an empty line below it for the cursor: a typed ^C
        is echoed where the cursor is, and after a line as wide as the terminal it would wrap, so
        that rich's next frame would start a line low and show the first line twice."""
        from rich.console import Group
        from rich.text import Text

        if self.state.seen or not self._starting:
            display = self.state.renderable()
        else:
            display = Text(
                f"[{self.state.name}] {duration(self.state.clock() - self.state.started)} | {self._starting}"
            )
        return display if self._closed else Group(display, Text(""))

    def message(self, text: str, wrap: bool = False) -> None:
        """A line printed above the display (or among the plain lines). ``wrap``: prose, wrapped at
        words to the terminal's width where the display is live (after it too); else as it is, for
        the terminal to wrap (a command or a path, copied whole)."""
        if self._console is not None:
            self._console.print(text, markup=False, highlight=False, soft_wrap=not wrap)
        elif self.mode != "off":
            print(text, file=self.stream, flush=True)

    def _plain(self, force: bool) -> None:
        if self.mode != "plain" or not self.state.seen:
            return
        now = self.state.clock()
        if not force and now - self._last_time < self.every_s:
            return
        line = self.state.line()
        if force or line.split(" | ", 1)[1] != self._last_line.split(" | ", 1)[-1]:
            print(line, file=self.stream, flush=True)
            self._last_line = line
        self._last_time = now

    def close(self, stopped: bool = False) -> None:
        """Stop the live display (its last frame stays) or print the last plain line; once.
        ``stopped``: the run was stopped (its running trials show as stopped, with no ETA)."""
        if self._closed:
            return
        if stopped:
            self.state.stop()
        self._closed = True
        if self._live is not None:
            self._live.stop()
            self._live = None
        else:
            self._plain(force=True)
        if retried := self.state.retry_summary():
            self.message(retried, wrap=True)

    # -- Tune callback hooks -------------------------------------------------------------------
    # Statuses are taken after every step, never at the experiment's end: an interrupted
    # experiment's clean-up marks its unfinished trials terminated, and they must stay unfinished.
    def on_trial_result(self, iteration: int, trials: list, trial, result: dict, **info) -> None:
        self.state.report((trial.config or {}).get("trial_key", ""), result)  # "" is no trial's key

    def on_trial_recover(self, iteration: int, trials: list, trial, reason: str = "error", **info) -> None:
        self.state.retried((trial.config or {}).get("trial_key", ""), reason)

    def on_step_end(self, iteration: int, trials: list, **info) -> None:
        self.state.statuses(trials)
        self._show()
        self._plain(force=False)
