"""Why Tune retried a trial, in a few words.

Tune tells its callbacks that it retries a trial (``on_trial_recover``) but not why; the why is
the trial's latest failure in its error file, which Tune writes in the driver before it calls
them (``Trial.error_file``, one ``Failure # N`` entry per failure). The reasons:

- ``"preempted"``: the trial stopped for a SIGTERM after checkpointing (:mod:`._preemption`),
  or Ray drained its node for preemption (neither counts against ``max_failures``);
- ``"terminated (SIGTERM)"``: Ray's own SIGTERM handler ended the process (no trial trained
  in it: nothing to save);
- ``"node lost"``: the trial's node died (its Ray processes ended, the machine went away);
- ``"node unreachable"``: the call to the trial failed before Ray knew why (a node killed
  outright is declared dead only after missed health checks);
- ``"worker died"``: the trial's process died on its own (killed, out of memory);
- ``"error: <the exception's own line>"``: the trial raised (:func:`error_line`: the
  exception's ``Type: message`` line, not a note printed after it such as JAX's "For
  simplicity, JAX has removed its internal frames ...").
"""

from __future__ import annotations

import re
from typing import Any

_FAILURE = re.compile(r"^Failure # \d+ \(occurred at [^)]*\)$", re.MULTILINE)
PREEMPTED = "preempted"
_REASONS = (  # (what the error text says, the reason), the first match wins
    ("TrialPreempted", PREEMPTED),  # the trial checkpointed for a SIGTERM (sweep.tune._preemption)
    ("the actor's node was preempted", PREEMPTED),  # Ray drained the node for preemption
    ("The process receives a SIGTERM", "terminated (SIGTERM)"),  # Ray's own handler ended the process
    ("its node has died", "node lost"),
    ("is unavailable", "node unreachable"),  # the call to the trial failed before Ray knew why
    ("its worker process has died", "worker died"),
)


def latest_failure(text: str) -> str:
    """The latest failure of an error file's ``text`` (Tune writes one entry per failure)."""
    starts = [m.end() for m in _FAILURE.finditer(text)]
    return text[starts[-1] :].strip() if starts else text.strip()


_EXCEPTION = re.compile(
    r"^(?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit|Preempted)\b(?:\(\w+\))?(?::|$)"
)
_NOTES = ("For simplicity, JAX has removed its internal frames", "The above exception was the direct cause")


def error_line(text: str) -> str:
    """The exception's own line of an error's text (``ModuleNotFoundError: No module named 'x'``):
    the last line that names an exception, notes and separators printed after it left out; else
    the last line that is not one of those ("" for no text); seed-sweep's errors by their names
    (``SpecError: ...``, not ``sweep._errors.SpecError: ...``)."""
    lines = [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.strip().startswith(_NOTES) and set(line.strip()) != {"-"}
    ]
    line = next((line for line in reversed(lines) if _EXCEPTION.match(line)), lines[-1] if lines else "")
    return re.sub(r"^sweep\.[\w.]*\.(?=\w+: )", "", line)  # seed-sweep's errors by their names


def reason_of(failure: str, width: int = 80) -> str:
    """The reason (see the module) for a failure's text."""
    for needle, reason in _REASONS:
        if needle in failure:
            return reason
    line = error_line(failure)
    if len(line) > width:  # cut between words
        line = line[:width].rsplit(" ", 1)[0] + " ..."
    return f"error: {line}" if line else "error"


def retry_reason(trial: Any) -> str:
    """Why Tune retries ``trial`` (a Tune ``Trial``), from its error file; ``"error"`` if unreadable."""
    try:
        path = trial.error_file
        if not path:
            return "error"
        with open(path, encoding="utf-8", errors="replace") as f:
            return reason_of(latest_failure(f.read()))
    except OSError:
        return "error"
