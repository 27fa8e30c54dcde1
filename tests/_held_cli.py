"""``python tests/_held_cli.py HOLD_DIR ARGS...``: the ``sweep`` command with a trial hook that keeps every
trial but the first waiting after each report (``_faults.HoldAllButFirst``), so that a test can type
Ctrl-C while the sweep is part-done on a machine of any speed."""

import functools
import sys

from _faults import HoldAllButFirst

import sweep.tune

hold = HoldAllButFirst(sys.argv.pop(1), timeout_s=60)
sweep.tune.run = functools.partial(sweep.tune.run, trial_hooks=sweep.tune.TrialHooks(after_report=hold))

from sweep.cli import main

main()
