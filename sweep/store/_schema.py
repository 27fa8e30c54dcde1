"""Every column of a store, and what its files hold (their names: :mod:`sweep._layout`).

Files of a committed store (``<sweep>/ensembles/``; how generations replace each other
atomically is in :mod:`._generations`)::

    members.parquet     one row per member (:func:`members_schema`), sorted by config_id, then by
                        the vmapped hyperparameter values (names sorted), then by seed; one row
                        group (<= 65536 rows) per leaves file, min/max statistics on
                        :func:`statistics_columns`
    configs.parquet     one row per structural config (:data:`CONFIGS_SCHEMA`)
    <config_id>.eqx     eqx.tree_serialise_leaves of the config's stacked parameters, members in
                        members.parquet order; past the shard size, instead
    <config_id>/shard-NNNNN.eqx   consecutive runs of members_per_shard members
    samples.parquet     the first test samples of each problem (:data:`SAMPLES_SCHEMA`), for figures
    trajectories.parquet  the first test trajectories of each problem that has some
                        (:data:`TRAJECTORIES_SCHEMA`), for rollout figures; absent otherwise
    val_samples.parquet, val_trajectories.parquet  the same of the validation split (stores
                        made before they were kept have none)
    normalization.parquet  the per-channel statistics of each problem whose fields were
                        normalised (:data:`NORMALIZATION_SCHEMA`); absent where none was
    ensemble_scores.parquet  each configuration's ensemble scores on the stored samples and
                        trajectories (:func:`scores_schema`); absent in stores made without them
    manifest.json       format, counts, grid columns, sha256 and size of every file, missing members

No other name may appear in a store (:data:`sweep._layout.STORE_FILE`), and no symbolic link.
In the sweep directory, ``samples.parquet`` and ``trajectories.parquet`` (same schemas) are
written by ``sweep.run``, which has the data, and copied into each store by the aggregator,
which never loads data itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import pyarrow as pa

from .._layout import NORMALIZATION, SAMPLES, TRAJECTORIES, VAL_SAMPLES, VAL_TRAJECTORIES, leaves_file
from ..metrics import LOSS, summarised_metric
from ..problems import EVALUATED

if TYPE_CHECKING:
    from ..training import History

FORMAT = 2  # 2: train/val/test splits; val_/test_ columns of the loss and every metric
ROW_GROUP_ROWS = 65_536
SAMPLE_COUNT = 16  # test samples kept per problem
TRAJECTORY_COUNT = 4  # test trajectories kept per problem (every step of each)


def leaves_files(config_id: str, num_members: int, members_per_shard: int) -> list[str]:
    """Every leaves file of a config of ``num_members`` members, ``members_per_shard`` per file."""
    if num_members <= members_per_shard:
        return [leaves_file(config_id, None)]
    return [leaves_file(config_id, i) for i in range(-(-num_members // members_per_shard))]


class Column(NamedTuple):
    """A grid value column of ``members.parquet``."""

    name: str  # the last part of the dotted key when unique, else the key
    key: str  # dotted grid key, e.g. "model.depth"
    vmapped: bool


_F32, _I32 = pa.float32(), pa.int32()
IDENTITY_COLUMNS = (
    ("member_id", pa.int64()),
    ("config_id", pa.string()),
    ("seed", pa.int64()),
    ("trial_id", pa.string()),
)
ROUND = "round"  # the race round that trains the member's seed (Adaptive seeds); null without a race
RESULT_COLUMNS = (("status", pa.string()), ("epochs", _I32), ("train_loss", _F32))
HISTORY_EPOCHS = "history_epochs"
# the numeric member columns that say which member it is and how long it trained, not what it
# reached: no metric ranks by them (nor by the grid's columns)
SETTING_COLUMNS = frozenset(("member_id", "seed", "epochs", ROUND))
STATUSES = ("ok", "diverged", "stopped_early")


def evaluated_column(split: str, name: str) -> str:
    """The column of a split's final value of the loss (``name="loss"``) or a metric: ``val_loss``, ``test_nrmse``."""
    return f"{split}_{name}"


def history_column(column: str) -> str:
    """The list column of a value's curve over the reports: ``val_loss`` -> ``val_loss_history``."""
    return f"{column}_history"


def evaluated_columns(metrics: Sequence[str]) -> list[str]:
    """Final-value columns of the validation and test sets: the loss, then each metric (by stored
    name, :func:`sweep.metrics.metric_name`): ``val_loss, test_loss, val_<m>, test_<m>, ...``.
    Null where a config has no validation set or does not evaluate that metric."""
    return [evaluated_column(split, name) for name in (LOSS, *metrics) for split in EVALUATED]


def curves_by_column(history: History) -> dict[str, Any]:
    """A :class:`sweep.History`'s ``[members, reports]`` curves by column: ``train_loss``, then
    ``val_loss``, ``test_loss``, ``val_<m>``, ... (those it has)."""
    curves = {"train_loss": history.train_loss}
    for split in EVALUATED:
        curves |= {evaluated_column(split, name): c for name, c in getattr(history, split).items()}
    return curves


def rollout_column(split: str, summary_name: str) -> str:
    """The list column of a split's rollout curve at the last report, from the name of its summary
    (``"rollout_gmean_nrmse"``): ``test_rollout_nrmse`` (entry ``t - 1``: after ``t`` steps)."""
    return f"{split}_rollout_{summarised_metric(summary_name)}"


def rollout_columns(metrics: Sequence[str]) -> list[str]:
    """The rollout curve columns of the stored metrics that are rollout summaries (``rollout_gmean_<m>``,
    ``rollout_window_6_12_<m>``, ...; :func:`sweep.metrics.summarised_metric`), once each:
    ``val_rollout_<m>, test_rollout_<m>, ...``."""
    return list(
        dict.fromkeys(rollout_column(split, name) for name in metrics if summarised_metric(name) for split in EVALUATED)
    )


def rollout_curves_by_column(history: History) -> dict[str, Any]:
    """A :class:`sweep.History`'s latest ``[members, T]`` rollout curves by column (``test_rollout_nrmse``, ...)."""
    return {
        f"{split}_rollout_{name}": c for split in EVALUATED for name, c in getattr(history, f"{split}_rollout").items()
    }


def _value_type(column: str) -> pa.DataType:
    """Rollout summaries are float64 (computed in float64 from the curves), other values float32."""
    return pa.float64() if summarised_metric(column.partition("_")[2]) else _F32


def value_columns(metrics: Sequence[str]) -> list[str]:
    """Every per-member value that has a curve: ``train_loss`` and :func:`evaluated_columns`."""
    return ["train_loss", *evaluated_columns(metrics)]


def fixed_columns(metrics: Sequence[str]) -> tuple[str, ...]:
    """The columns that are not grid values (a grid column must not take one of these names)."""
    return tuple(members_schema([], {}, metrics).names)


def members_schema(columns: list[Column], types: dict[str, pa.DataType], metrics: Sequence[str]) -> pa.Schema:
    """``members.parquet``: identity, one column per grid key, the race round, status and epochs, the final values
    (train, val and test loss, then each metric on val and test), their curves, the rollout curves
    at the last report (list<float64> of T values; null without that split's trajectories), the
    report epochs."""
    values = value_columns(metrics)
    return pa.schema(
        [
            *IDENTITY_COLUMNS,
            *((c.name, types[c.name]) for c in columns),
            (ROUND, _I32),
            *RESULT_COLUMNS,
            *((c, _value_type(c)) for c in values[1:]),
            *((history_column(c), pa.list_(_value_type(c))) for c in values),
            *((c, pa.list_(pa.float64())) for c in rollout_columns(metrics)),
            (HISTORY_EPOCHS, pa.list_(_I32)),
        ]
    )


FIXED_COLUMNS = fixed_columns(())  # the columns of every store, whatever its metrics


def statistics_columns(columns: list[Column]) -> list[str]:
    """The ``members.parquet`` columns whose row-group min/max statistics are written: what queries
    select row groups by (member ids, configs, seeds, grid values)."""
    return ["member_id", "config_id", "seed", *(c.name for c in columns)]


def index_columns(grid_columns: list[str], metrics: Sequence[str], race: bool = False) -> list[str]:
    """The ``members.parquet`` columns queries filter and rank on (no histories); ``race``: with the
    ``round`` column (stores of a race; stores made before races have none)."""
    return (
        [name for name, _ in IDENTITY_COLUMNS]
        + list(grid_columns)
        + ([ROUND] if race else [])
        + [name for name, _ in RESULT_COLUMNS]
        + evaluated_columns(metrics)
    )


def index_problems(schema: pa.Schema, names: list[str], metrics: Sequence[str]) -> list[str]:
    """What keeps a ``members.parquet`` of ``schema`` from holding the columns ``names`` (its
    :func:`index_columns`, of a store of ``metrics``): a column missing, or of another kind than
    seed-sweep writes (integer, text, float; a grid column may be of any type)."""
    kinds = {name: t for name, t in (*IDENTITY_COLUMNS, (ROUND, _I32), *RESULT_COLUMNS)}
    kinds |= {c: _F32 for c in evaluated_columns(metrics)}
    problems = []
    for name in names:
        want = kinds.get(name)
        if name not in schema.names:
            problems.append(f"no column {name!r}")
        elif want is not None and _kind(schema.field(name).type) != _kind(want):
            problems.append(f"column {name!r} is {schema.field(name).type}, not {_kind(want)}")
    return problems


def _kind(t: pa.DataType) -> str:
    if pa.types.is_integer(t):
        return "integer"
    if pa.types.is_floating(t):
        return "float"
    return "text" if pa.types.is_string(t) or pa.types.is_large_string(t) else str(t)


CONFIGS_SCHEMA = pa.schema(
    [
        ("config_id", pa.string()),
        ("spec", pa.string()),
        ("num_members", pa.int64()),
        ("first_member", pa.int64()),
        ("members_per_shard", pa.int64()),
        ("files", pa.list_(pa.string())),
        ("sample_shape", pa.list_(pa.int64())),
        ("target_shape", pa.list_(pa.int64())),  # one target's shape: any shape, [] for one number
        ("num_train", pa.int64()),
    ]
)
# configs.parquet as seed-sweep wrote it while targets had the inputs' grid: out_channels (int64) in
# place of target_shape, which is (out_channels, *sample_shape[1:]); read as such
CONFIGS_SCHEMA_SAME_GRID = pa.schema(
    [("out_channels", pa.int64()) if f.name == "target_shape" else f for f in CONFIGS_SCHEMA]
)

SAMPLES_SCHEMA = pa.schema(
    [  # x: [channels, *spatial] flattened; y: a target of any shape (y_shape, [] for one number)
        ("problem_id", pa.string()),
        ("sample", pa.int32()),
        ("x", pa.list_(_F32)),
        ("y", pa.list_(pa.float64())),  # float32 and int32 targets, both exactly
        ("x_shape", pa.list_(_I32)),
        ("y_shape", pa.list_(_I32)),
        ("y_dtype", pa.string()),  # "float32" or "int32" (class labels)
    ]
)
# samples.parquet as seed-sweep wrote it before targets of any dtype: y float32, no y_dtype
SAMPLES_SCHEMA_FLOAT32 = pa.schema([("y", pa.list_(_F32)) if f.name == "y" else f for f in SAMPLES_SCHEMA][:-1])
TRAJECTORIES_SCHEMA = pa.schema(
    [  # states: [steps + 1, channels, *spatial] flattened, their shape in states_shape
        ("problem_id", pa.string()),
        ("trajectory", pa.int32()),
        ("states", pa.list_(_F32)),
        ("states_shape", pa.list_(_I32)),
    ]
)
NORMALIZATION_SCHEMA = pa.schema(
    [  # one row per channel of each normalised problem: field = normalised * scale + shift
        ("problem_id", pa.string()),
        ("channel", pa.int32()),
        ("name", pa.string()),  # the channel's name (a file's field), null where it has none
        ("method", pa.string()),  # "zscore" or "rms"
        ("shift", pa.float64()),
        ("scale", pa.float64()),
    ]
)
SAMPLE_FILES = {  # what sweep.run keeps of the data for figures, scores and physical units, by file
    SAMPLES: SAMPLES_SCHEMA,
    TRAJECTORIES: TRAJECTORIES_SCHEMA,
    VAL_SAMPLES: SAMPLES_SCHEMA,
    VAL_TRAJECTORIES: TRAJECTORIES_SCHEMA,
    NORMALIZATION: NORMALIZATION_SCHEMA,
}
SCORE_KINDS = ("one_step", "rollout", "rollout_gmean", "ensemble_size")  # rows of ensemble_scores.parquet
SCORE_COLUMNS = ("crps", "crps_ensemble", "mae", "rmse", "spread", "spread_skill", "coverage_50", "coverage_90")
GAIN_COLUMNS = ("ensemble", "members", "gain")  # <loss or metric>_<...>: of the mean, mean over members, ratio


def gain_column(name: str, what: str) -> str:
    """A loss or metric of the ensemble mean (``what="ensemble"``), averaged over members
    (``"members"``), or their ratio (``"gain"``): ``loss_gain``, ``nrmse_members``."""
    return f"{name}_{what}"


def scores_schema(key_fields: Sequence[pa.Field], metrics: Sequence[str]) -> pa.Schema:
    """``ensemble_scores.parquet``: one row per configuration (``key_fields``: ``config_id`` and the
    grid columns, as in ``members.parquet``), split (``"val"``, ``"test"``), kind (:data:`SCORE_KINDS`:
    the one-step predictions of the stored samples at ``step`` 0, each step of the rollouts of the
    stored trajectories, their geometric mean over steps 1..100 with ``step`` null, and the one-step
    scores of subsets of ``members`` members) and step: the number of members and of points scored,
    :data:`SCORE_COLUMNS`, the rank histogram (``members + 1`` counts; null for subsets and
    geometric means) and, on one-step rows, the loss and each metric of the ensemble mean, averaged
    over members, and their ratio (:func:`gain_column`; null where not computed)."""
    return pa.schema(
        [
            *key_fields,
            ("split", pa.string()),
            ("kind", pa.string()),
            ("step", _I32),
            ("members", pa.int64()),
            ("points", pa.int64()),
            *((c, pa.float64()) for c in SCORE_COLUMNS),
            ("rank_histogram", pa.list_(pa.int64())),
            *((gain_column(name, what), pa.float64()) for name in (LOSS, *metrics) for what in GAIN_COLUMNS),
        ]
    )
