"""Ctrl-C around one Tune experiment: whether Tune caught it, and Ctrl-C working again afterwards.

``Tuner.fit`` installs its own SIGINT handler (on the main thread, unless
``TUNE_DISABLE_SIGINT_HANDLER=1``): the first Ctrl-C stops the experiment and puts the previous
handler back, a second one reaches that handler. Without a Ctrl-C, Tune's handler stays
installed after ``fit`` returns (Ray 2.60), so a Ctrl-C after it (between the waves of a large
plan, during the aggregation) would only set a flag of the finished experiment and be lost; and
a Ctrl-C that arrives as the last trials of an experiment finish leaves no unfinished trial to
tell it happened. :func:`tune_sigint` answers both: the handler in place before the experiment
is put back, and ``caught()`` says whether Tune's handler ran.

```python
with tune_sigint() as caught:
    results = tuner.fit()
interrupted = caught() or ...
```
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def tune_sigint() -> Iterator[Callable[[], bool]]:
    """Yields ``caught()``: whether Tune's SIGINT handler ran inside the block; the SIGINT handler
    of before the block is in place after it."""
    outcome = {"caught": False}
    if threading.current_thread() is not threading.main_thread():  # Tune installs no handler there
        yield lambda: False
        return
    before = signal.getsignal(signal.SIGINT)
    tune_handles = os.environ.get("TUNE_DISABLE_SIGINT_HANDLER", "0") in ("", "0")
    try:
        yield lambda: outcome["caught"]
    finally:
        after = signal.getsignal(signal.SIGINT)
        # Tune's handler, once it has run, has put ``before`` back; one still installed has not run
        outcome["caught"] = tune_handles and after is before
        if after is not before:
            signal.signal(signal.SIGINT, before)
