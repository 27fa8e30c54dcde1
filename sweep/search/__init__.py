"""Model-based search over configurations, each observed as a block of seeds (the spec's part is
:class:`sweep.Search`; the guide is docs/search.md).

One concept per module: ``_record`` (``search.json``, every ask and tell), ``_sampler`` (Optuna
through ask and tell), ``_observe`` (what a configuration's seeds came to), ``_rounds`` (the
round policy ``sweep.run`` drives), ``_best`` (the end: the best configurations by their
intervals over seeds) and ``_trace`` (the figure of the search).
"""

from ._best import LEVEL as LEVEL
from ._best import Standing as Standing
from ._best import headline as headline
from ._best import ranked as ranked
from ._best import standings as standings
from ._best import summary as summary
from ._record import Observation as Observation
from ._record import SearchRecord as SearchRecord
from ._record import read_record as read_record
from ._rounds import SearchRounds as SearchRounds
from ._sampler import check_engine as check_engine
from ._sampler import propose as propose
from ._trace import plot_trace as plot_trace
from ._trace import searched_spec as searched_spec

__all__ = [
    "LEVEL",
    "Observation",
    "SearchRecord",
    "SearchRounds",
    "Standing",
    "check_engine",
    "headline",
    "ranked",
    "plot_trace",
    "propose",
    "read_record",
    "searched_spec",
    "standings",
    "summary",
]
