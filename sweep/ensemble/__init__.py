"""Ensemble queries over a store, streamed inference and statistics over seeds."""

from ._aggregate import aggregate as aggregate
from ._ensemble import DEFAULT_CHUNK as DEFAULT_CHUNK
from ._ensemble import Ensemble as Ensemble
from ._ensemble import load as load
from ._held import HeldEnsemble as HeldEnsemble
from ._rows import SummaryTable as SummaryTable
from ._stats import Comparison as Comparison
