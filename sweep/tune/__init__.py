"""Running sweeps: ``run`` (one loop of round policies and executors: Ray Tune, or in-process),
its ``RunOptions``, ``plan``, the trainable, checks, trial environment, progress, trackers, and
``RayTasks``, the tasks of ``sweep.aggregate`` as Ray tasks.

The only part of seed-sweep that uses Ray; ``ray`` is imported when :func:`run` is called, and
started only by the Tune executor. ``import sweep`` does not import this package: ``sweep.run``, ``sweep.RunOptions``
and ``sweep.plan`` load it on first use.
"""

from ._loggers import LOGGERS as LOGGERS
from ._loggers import MemberLogger as MemberLogger
from ._loggers import MLflowLogger as MLflowLogger
from ._loggers import TensorBoardLogger as TensorBoardLogger
from ._loggers import WandbLogger as WandbLogger
from ._options import RunOptions as RunOptions
from ._plan import plan as plan
from ._ray_tasks import RayTasks as RayTasks
from ._run import METRIC as METRIC
from ._run import Interrupted as Interrupted
from ._run import run as run
from ._trainable import TrialHooks as TrialHooks
