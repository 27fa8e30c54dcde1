"""seed-sweep: train ensembles of independently seeded JAX/Equinox networks at scale.

The core (spec, trainer, store, ensemble) never imports Ray; ``sweep.run`` does, lazily.
"""

from . import _jax_setup

_jax_setup.configure()

from ._errors import QueryError as QueryError  # noqa: E402
from ._errors import SpecError as SpecError  # noqa: E402
from ._errors import StoreError as StoreError  # noqa: E402
from ._errors import SweepError as SweepError  # noqa: E402
from .spec import Model as Model  # noqa: E402
from .spec import Optimizer as Optimizer  # noqa: E402
from .spec import Problem as Problem  # noqa: E402
from .spec import SweepSpec as SweepSpec  # noqa: E402
from .spec import Training as Training  # noqa: E402
from .ensemble import Ensemble as Ensemble  # noqa: E402
from .ensemble import load as load  # noqa: E402
from .trainer import History as History  # noqa: E402
from .trainer import TrainState as TrainState  # noqa: E402
from .trainer import init_block as init_block  # noqa: E402
from .trainer import run_chunk as run_chunk  # noqa: E402
from .trainer import train as train  # noqa: E402
from .trainer import train_block as train_block  # noqa: E402
from .tune import plan as plan  # noqa: E402
from .tune import run as run  # noqa: E402

__version__ = "0.1.0"
