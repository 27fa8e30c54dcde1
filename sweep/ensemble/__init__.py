"""Ensemble queries over a store, streamed inference and statistics over seeds."""

from ._aggregate import aggregate as aggregate
from ._blend import Blend as Blend
from ._calibration import Calibration as Calibration
from ._calibration import conformal_quantiles as conformal_quantiles
from ._calibration import fit_scale as fit_scale
from ._calibration import load_calibration as load_calibration
from ._ensemble import Ensemble as Ensemble
from ._ensemble import load as load
from ._export import new_export_dir as new_export_dir
from ._export_check import is_export as is_export
from ._export_check import manifest_sha256 as manifest_sha256
from ._export_check import verify_export as verify_export
from ._field_scores import brier_score as brier_score
from ._field_scores import crps_terms as crps_terms
from ._field_scores import energy_score as energy_score
from ._field_scores import twcrps as twcrps
from ._field_scores import variogram_score as variogram_score
from ._held import HeldEnsemble as HeldEnsemble
from ._predictions import DEFAULT_CHUNK as DEFAULT_CHUNK
from ._rows import SummaryTable as SummaryTable
from ._rows import compact as compact
from ._rows import format_table as format_table
from ._rows import left_out as left_out
from ._stats import Comparison as Comparison
from ._stats import compare as compare
from ._stats import describe as describe
