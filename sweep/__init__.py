"""seed-sweep: train ensembles of independently seeded JAX/Equinox networks at scale.

``import sweep`` changes nothing in the process (no JAX settings, no environment, no cache);
:func:`configure` applies what makes it fast, and :func:`run` does so itself. The Ray layer
(``sweep.run``, ``sweep.plan``), the figures (``sweep.plot``) and the service (``sweep.serve``,
``sweep.ServeOptions``: Ray Serve, FastAPI) are imported on first use, so the core never loads
Ray, Tune, FastAPI or matplotlib.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._caches import clear_caches as clear_caches
from ._configure import Configuration as Configuration
from ._configure import configure as configure
from ._errors import QueryError as QueryError
from ._errors import SpecError as SpecError
from ._errors import StoreError as StoreError
from ._errors import SweepError as SweepError
from .ensemble import Ensemble as Ensemble
from .ensemble import aggregate as aggregate
from .ensemble import load as load
from .planning import Plan as Plan
from .planning import TrialPlan as TrialPlan
from .problems import Dataset as Dataset
from .spec import Adaptive as Adaptive
from .spec import Distribution as Distribution
from .spec import Model as Model
from .spec import Optimizer as Optimizer
from .spec import Problem as Problem
from .spec import Search as Search
from .spec import SweepSpec as SweepSpec
from .spec import Training as Training
from .spec import choice as choice
from .spec import loguniform as loguniform
from .spec import randint as randint
from .spec import uniform as uniform
from .training import History as History
from .training import TrainState as TrainState
from .training import fit as fit
from .training import init_block as init_block
from .training import load_data as load_data
from .training import run_chunk as run_chunk
from .training import train as train
from .training import train_block as train_block

if TYPE_CHECKING:
    from .figures import plot as plot
    from .serving import ServeOptions as ServeOptions
    from .serving import serve as serve
    from .tune import RunOptions as RunOptions
    from .tune import plan as plan
    from .tune import run as run

__version__ = "0.1.0"

_LAZY = {
    "run": "sweep.tune",
    "RunOptions": "sweep.tune",
    "plan": "sweep.tune",
    "plot": "sweep.figures",
    "serve": "sweep.serving",
    "ServeOptions": "sweep.serving",
}

__all__ = [
    "Adaptive",
    "Configuration",
    "Dataset",
    "Distribution",
    "Ensemble",
    "History",
    "Model",
    "Optimizer",
    "Plan",
    "Problem",
    "QueryError",
    "RunOptions",
    "Search",
    "SpecError",
    "StoreError",
    "SweepError",
    "ServeOptions",
    "SweepSpec",
    "TrainState",
    "Training",
    "TrialPlan",
    "aggregate",
    "choice",
    "clear_caches",
    "configure",
    "fit",
    "init_block",
    "load",
    "load_data",
    "loguniform",
    "plan",
    "plot",
    "randint",
    "run",
    "run_chunk",
    "serve",
    "train",
    "train_block",
    "uniform",
]


# the public subpackages and modules, each imported on first use as ``sweep.<name>`` (``sweep.tune``
# and ``sweep.serving`` import Ray, ``sweep.figures`` matplotlib: ``import sweep`` imports neither)
_SUBMODULES = frozenset(
    ("cli", "ensemble", "figures", "metrics", "models", "optim", "planning", "problems", "racing", "search")
    + ("serving", "spec", "store", "training", "tune")
)


def __getattr__(name: str) -> Any:
    """``sweep.run`` / ``sweep.plan`` (Ray Tune layer), ``sweep.plot`` (matplotlib) and ``sweep.serve`` /
    ``sweep.ServeOptions`` (Ray Serve), and the subpackages (``sweep.tune.RayTasks``), loaded on first use."""
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'sweep' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names (``__all__``), ``__version__`` and the public subpackages (imported or not)."""
    return sorted(set(__all__) | {"__version__"} | _SUBMODULES)
