"""Ensemble queries over a store, streamed inference and statistics over seeds."""

from ._aggregate import aggregate as aggregate
from ._ensemble import Ensemble as Ensemble
from ._ensemble import load as load
from ._held import HeldEnsemble as HeldEnsemble
from ._predictions import DEFAULT_CHUNK as DEFAULT_CHUNK
from ._rows import SummaryTable as SummaryTable
from ._rows import compact as compact
from ._rows import format_table as format_table
from ._stats import Comparison as Comparison
