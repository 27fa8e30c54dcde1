"""The Tune experiment of one wave of a round: ``tune.Tuner`` from :class:`~._options.RunOptions`.

The user's ``tune_config`` / ``run_config`` are passed through, the fields a sweep owns set by
the sweep: one trial per trial key, named by it, stored in the sweep directory as its next
experiment ``tune-NNNN``.
"""

from __future__ import annotations

import dataclasses

from ..store import SweepDir
from ._options import METRIC, MODE, OWNED_RUN, RunOptions

__all__ = ["run_config", "tune_config", "tuner"]


def tuner(options: RunOptions, trainable, sweep_dir: SweepDir, validated: bool, callbacks: list):
    """A new Tune experiment ``<sweep>/tune-NNNN`` whose trials the run loop's rounds give, one per
    trial key (:class:`~._round_searcher.RoundSearcher`; :func:`tune_config`, :func:`run_config`)."""
    from ray import tune

    return tune.Tuner(
        trainable,
        param_space={},
        tune_config=tune_config(options, validated),
        run_config=run_config(options, sweep_dir, callbacks),
    )


def tune_config(options: RunOptions, validated: bool):
    """The ``tune.TuneConfig`` of the experiment: the one given, or ``reuse_actors=True`` (trial
    workers reused across trials) without one; trials suggested by the loop's rounds and named by
    their trial key; ranked by
    :data:`METRIC` where nobody named a metric and every config has a validation set."""
    from ray import tune

    from ._round_searcher import RoundSearcher

    given = options.tune_config or tune.TuneConfig(reuse_actors=True)
    metric = {"metric": METRIC, "mode": MODE} if options.default_metric() and validated else {}
    return dataclasses.replace(
        given,
        scheduler=options.the_scheduler,
        search_alg=RoundSearcher(),
        num_samples=-1,  # until the searcher says FINISHED
        trial_dirname_creator=_trial_dirname,
        trial_name_creator=_trial_dirname,
        **metric,
    )


def run_config(options: RunOptions, sweep_dir: SweepDir, callbacks: list):
    """The ``tune.RunConfig`` of the experiment: stored in the sweep directory as its next
    experiment, Ray's and Tune's output at ``options.verbose``, the two newest checkpoints per
    trial and a failed trial retried twice unless ``run_config`` (or ``failure_config``) says
    otherwise, ``callbacks`` after the user's, and Tune's TensorBoard logger as
    :class:`~._trial_tensorboard.TrialTensorBoard` (which frees each trial's writer)."""
    from ray import tune

    from ._trial_tensorboard import trial_tensorboard

    # A RunConfig fills in defaults as it is made (a FailureConfig without retries, a
    # CheckpointConfig that keeps every checkpoint, a verbosity read from the environment), so
    # the user's fields count where they differ from those, and the sweep's own apply otherwise.
    run, default = options.run_config, tune.RunConfig()
    given = {} if run is None else {f.name: getattr(run, f.name) for f in dataclasses.fields(run)}
    ours = {*OWNED_RUN, "failure_config", "checkpoint_config", "callbacks"}
    failure = given.get("failure_config", default.failure_config)
    checkpoint = given.get("checkpoint_config", default.checkpoint_config)
    if failure == default.failure_config:
        failure = tune.FailureConfig(max_failures=2)
    if checkpoint == default.checkpoint_config:
        checkpoint = tune.CheckpointConfig(num_to_keep=2)
    user = list(given.get("callbacks") or [])
    return tune.RunConfig(
        **{k: v for k, v in given.items() if k not in ours},
        name=sweep_dir.next_experiment(),
        storage_path=sweep_dir.path,
        storage_filesystem=None if _is_local(sweep_dir) else sweep_dir.filesystem,
        verbose=options.verbose,
        failure_config=options.failure_config or failure,
        checkpoint_config=checkpoint,
        callbacks=[*user, *callbacks, *trial_tensorboard(user)],
    )


def _is_local(sweep_dir: SweepDir) -> bool:
    import pyarrow.fs as pafs

    return isinstance(sweep_dir.filesystem, pafs.LocalFileSystem)


def _trial_dirname(trial) -> str:
    return trial.config["trial_key"]
