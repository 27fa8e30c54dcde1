"""Every file of a sweep directory and of a store, named once: the modules that read or write
them import their names from here.

A sweep directory (``<storage>/<spec.name>/``)::

    plan.json                    PLAN: every trial ever planned (union over runs), stopped ones, a race
    search.json                  SEARCH: a search's asks and tells, round by round
    samples.parquet              SAMPLES (and the other SPLIT_FILES): test data for figures
    data_scans.json              DATA_SCANS: the driver's pass over each file-reading problem (hdf5)
    resume.json                  RESUME: how to resume the last `sweep run`, and its folder (`sweep status` says)
    driver.json                  DRIVER: the run driving it now (its machine and process; removed at its end)
    tune-0001/                   EXPERIMENT_PREFIX: one Ray Tune experiment per run (per wave)
        <trial_key>/checkpoint_000001/{block.json,state.eqx}     CHECKPOINT_PREFIX, BLOCK_META, BLOCK_STATE
        <trial_key>/error.txt, error.pkl                         TUNE_ERROR_FILES (Tune's, of a failed trial)
    local/                       LOCAL_DIR: the in-process executor's trials, laid out as Tune's
        <trial_key>/checkpoint_000001/{block.json,state.eqx}
        <trial_key>/checkpoint_000001_000003/   a streamed block paused inside epoch 1, before its window 3
    ensembles -> .ensembles/000007          STORE_NAME: the store, a link to its committed generation
    .ensembles/CURRENT, .ensembles/.lock    POINTER, LOCK

A store generation (``.ensembles/NNNNNN/``)::

    manifest.json                MANIFEST: format, counts, sha256 and size of every file
    members.parquet, configs.parquet        MEMBERS, CONFIGS
    <config_id>.eqx, <config_id>/shard-NNNNN.eqx   leaves_file()
    samples.parquet, trajectories.parquet, val_samples.parquet, val_trajectories.parquet
    ensemble_scores.parquet      ENSEMBLE_SCORES
    normalization.parquet        NORMALIZATION (where a problem normalised its fields)

An export of an ensemble (``Ensemble.export(path)``)::

    manifest.json, mean_std.jaxexport, rollout.jaxexport      EXPORT_MANIFEST, EXPORT_PARTS

The names are part of the formats: stores and sweep directories written by earlier versions are
read by these same names, so none of them may change.
"""

from __future__ import annotations

import re

# -- the sweep directory --------------------------------------------------------------------------
PLAN = "plan.json"
SEARCH = "search.json"  # a search's every ask and tell (sweep.Search)
DATA_SCANS = "data_scans.json"  # by problem id: its files' stamps and statistics (sweep.problems.Scan)
RESUME = "resume.json"  # the last CLI run's command with --resume (RunOptions.resume_command) and its folder
DRIVER = "driver.json"  # the run driving it now: machine, process id, start (sweep.store._driver)
EXPERIMENT_PREFIX = "tune-"  # tune-0001, tune-0002, ...
LOCAL_DIR = "local"  # <sweep>/local/<trial_key>/checkpoint_<epoch>/ (the in-process executor)
CHECKPOINT_PREFIX = "checkpoint_"  # checkpoint_000012: the epoch, six digits (Tune's own naming)
BLOCK_STATE = "state.eqx"
BLOCK_META = "block.json"  # written last: a checkpoint is complete when it is there
TUNE_ERROR_FILES = ("error.txt", "error.pkl")  # what Tune leaves in a failed trial's directory

# -- the store ------------------------------------------------------------------------------------
STORE_NAME = "ensembles"  # the store's name inside a sweep directory
POINTER = "CURRENT"  # in the generations directory: names the committed generation
LOCK = ".lock"  # in the generations directory: held by the one aggregation writing
MANIFEST = "manifest.json"
MEMBERS = "members.parquet"
CONFIGS = "configs.parquet"
SAMPLES = "samples.parquet"
TRAJECTORIES = "trajectories.parquet"
VAL_SAMPLES = "val_samples.parquet"
VAL_TRAJECTORIES = "val_trajectories.parquet"
ENSEMBLE_SCORES = "ensemble_scores.parquet"
NORMALIZATION = "normalization.parquet"  # the statistics fields were normalised with (Problem(normalize=...))
SPLIT_FILES = {
    "val": (VAL_SAMPLES, VAL_TRAJECTORIES),
    "test": (SAMPLES, TRAJECTORIES),
}  # per split: samples, trajectories

CONFIG_ID = re.compile(r"[0-9a-f]{12}")
GENERATION = re.compile(r"\d{6,}")
STORE_FILE = re.compile(
    "|".join(
        map(
            re.escape,
            (MEMBERS, CONFIGS, SAMPLES, TRAJECTORIES, VAL_SAMPLES, VAL_TRAJECTORIES, ENSEMBLE_SCORES, NORMALIZATION),
        )
    )
    + rf"|{CONFIG_ID.pattern}(?:/shard-\d{{5}})?\.eqx"
)
STORE_FILES = (
    f"{MEMBERS}, {CONFIGS}, {SAMPLES}, {TRAJECTORIES}, {VAL_SAMPLES}, {VAL_TRAJECTORIES}, {ENSEMBLE_SCORES}, "
    f"{NORMALIZATION}, <config_id>.eqx, <config_id>/shard-NNNNN.eqx"
)

# -- an export ------------------------------------------------------------------------------------
EXPORT_MANIFEST = "manifest.json"
EXPORT_KIND = "seed-sweep export"  # the manifest's `kind`
EXPORT_FORMAT = 1  # and its `format`
EXPORT_PARTS = ("mean_std.jaxexport", "rollout.jaxexport")  # the programs: mean and std, rollout


def checkpoint_name(epoch: int, window: int | None = None) -> str:
    """The directory of a block checkpoint after ``epoch`` epochs: ``checkpoint_000012``; one of
    a streamed block paused inside a chunk, in epoch ``epoch`` before its window ``window``:
    ``checkpoint_000012_000003``."""
    return f"{CHECKPOINT_PREFIX}{epoch:06d}" + ("" if window is None else f"_{window:06d}")


def at_report(name: str) -> bool:
    """Whether the checkpoint directory ``name`` stands at a report (``checkpoint_000012``), not
    inside an epoch (``checkpoint_000012_000003``: :func:`checkpoint_name`)."""
    return re.fullmatch(rf"{CHECKPOINT_PREFIX}\d+", name) is not None


def experiment_name(number: int) -> str:
    """The directory of a sweep's ``number``-th Tune experiment: ``tune-0003``."""
    return f"{EXPERIMENT_PREFIX}{number:04d}"


def leaves_file(config_id: str, shard: int | None) -> str:
    """A config's leaves file in a store: ``<config_id>.eqx``, or shard ``shard`` of it."""
    return f"{config_id}.eqx" if shard is None else f"{config_id}/shard-{shard:05d}.eqx"
