"""The sweep specification: its parts, validated on construction (docs: Reference > Spec fields).

One module per part: :class:`Problem`, :class:`Model` and :class:`Optimizer` (a name and its
options, ``_parts``), :class:`Training` (``_training``), the seeds (``_seeds``; seeds in rounds,
:class:`Adaptive`, ``_adaptive``), a :class:`Search` (``_search``) over distributions (``_space``)
and the whole
:class:`SweepSpec` (``_sweep``), with the dotted keys of its grid (``_keys``), its ``resources``
(``_resources``) and its TOML file (``_toml``); ``_values`` holds the rule every value passes
(plain, finite data).
"""

from ._adaptive import Adaptive as Adaptive
from ._bytes import as_bytes as as_bytes
from ._bytes import size_text as size_text
from ._keys import hparam_name as hparam_name
from ._parts import Model as Model
from ._parts import Optimizer as Optimizer
from ._parts import Problem as Problem
from ._search import Search as Search
from ._seeds import MAX_SEEDS as MAX_SEEDS
from ._seeds import SEED_LIMIT as SEED_LIMIT
from ._seeds import seed_tuple as seed_tuple
from ._space import Distribution as Distribution
from ._space import choice as choice
from ._space import loguniform as loguniform
from ._space import randint as randint
from ._space import uniform as uniform
from ._sweep import SweepSpec as SweepSpec
from ._toml import read_toml as read_toml
from ._training import INT32_LIMIT as INT32_LIMIT
from ._training import Training as Training
from ._values import is_int as is_int
from ._values import is_number as is_number

__all__ = [
    "Adaptive",
    "Distribution",
    "INT32_LIMIT",
    "MAX_SEEDS",
    "SEED_LIMIT",
    "Search",
    "Model",
    "Optimizer",
    "Problem",
    "SweepSpec",
    "Training",
    "as_bytes",
    "choice",
    "hparam_name",
    "loguniform",
    "randint",
    "read_toml",
    "size_text",
    "uniform",
]
