"""Figures of a sweep, drawn with matplotlib (imported here only: ``import sweep`` does not load it)."""

from ._plot import FORMATS as FORMATS
from ._plot import KINDS as KINDS
from ._plot import figure_paths as figure_paths
from ._plot import plot as plot
