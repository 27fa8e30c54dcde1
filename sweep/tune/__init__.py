"""Ray Tune orchestration: ``run``, ``plan``, the trainable, checks, trial environment, progress.

The only part of seed-sweep that uses Ray; ``ray`` is imported when :func:`run` is called.
``import sweep`` does not import this package: ``sweep.run`` and ``sweep.plan`` load it on
first use.
"""

from ._run import METRIC as METRIC
from ._run import plan as plan
from ._run import run as run
from ._trainable import TrialHooks as TrialHooks
