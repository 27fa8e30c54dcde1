"""The settings of one ``sweep.run`` call, checked before anything starts, and the Tune experiment
they make.

Tune's own settings travel in Tune's own objects: ``tune_config=tune.TuneConfig(...)`` and
``run_config=tune.RunConfig(...)`` are passed through, except for the fields a sweep owns (the
trials are its plan's blocks; their names, storage and scheduler are its own), which are refused
with the argument to use instead.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .._errors import SpecError
from ..store import SweepDir
from ._cadence import check_checkpoint_every
from ._trainable import TrialHooks

METRIC, MODE = "val_loss_mean", "min"  # Tune's default: the block's mean validation loss

# field -> what to use instead
_OWNED_TUNE = {
    "search_alg": "the sweep's plan decides the trials (grid= and seeds= in the spec)",
    "num_samples": "seeds= in the spec",
    "trial_name_creator": "nothing: trials are named by their trial key",
    "trial_dirname_creator": "nothing: trial directories are named by their trial key",
}
_OWNED_RUN = {
    "name": "nothing: each run is a new experiment tune-NNNN in the sweep directory",
    "storage_path": "sweep.run(storage=...)",
    "storage_filesystem": "sweep.run(storage_filesystem=...)",
    "local_dir": "sweep.run(storage=...)",
    "verbose": "sweep.run(verbose=...)",
}


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """Everything of a ``sweep.run`` call but the spec and where it is stored."""

    address: str | None = None
    resume: bool = False
    scheduler: Any = None
    failure_config: Any = None
    hooks: TrialHooks = dataclasses.field(default_factory=TrialHooks)
    progress: str = "auto"
    resume_command: str | None = None
    checkpoint_every: int | str = "auto"
    tune_config: Any = None  # tune.TuneConfig or None
    run_config: Any = None  # tune.RunConfig or None
    verbose: int = 0

    def __post_init__(self) -> None:
        check_checkpoint_every(self.checkpoint_every)
        _check_owned("tune_config", self.tune_config, _OWNED_TUNE)
        _check_owned("run_config", self.run_config, _OWNED_RUN)
        if self.tune_config is not None and self.tune_config.scheduler is not None and self.scheduler is not None:
            raise SpecError("`tune_config.scheduler`: a scheduler is given twice; pass it once, as scheduler=")

    @property
    def the_scheduler(self) -> Any:
        """The scheduler, given as ``scheduler=`` or in ``tune_config``."""
        return self.scheduler if self.tune_config is None or self.scheduler is not None else self.tune_config.scheduler

    @property
    def max_concurrent_trials(self) -> int | None:
        return None if self.tune_config is None else self.tune_config.max_concurrent_trials

    @property
    def quiet(self) -> bool:
        return not self.verbose

    def default_metric(self) -> bool:
        """Whether Tune ranks trials by :data:`METRIC` (nobody named a metric)."""
        named = self.tune_config is not None and self.tune_config.metric is not None
        return not named and getattr(self.the_scheduler, "_metric", None) is None

    def check_scheduler_metric(self, validated: bool) -> None:
        """Without a validation set there is no default to rank trials by: a scheduler needs its own metric."""
        scheduler = self.the_scheduler
        if scheduler is not None and self.default_metric() and not validated:
            name = type(scheduler).__name__
            raise SpecError(
                f"`scheduler`: {name} has no metric, and the sweep has no validation set (problem.val_fraction=0) "
                f"for the default {METRIC!r}; give it one explicitly, e.g. {name}(metric='test_loss_mean', "
                f"mode='min') (a choice made on the test set makes its test numbers optimistic), or train with a "
                f"validation set"
            )

    def tuner(self, trainable, trial_keys: list[str], sweep_dir: SweepDir, validated: bool, callbacks: list):
        """A new Tune experiment ``<sweep>/tune-NNNN`` with one trial per trial key
        (:meth:`the_tune_config`, :meth:`the_run_config`)."""
        from ray import tune

        return tune.Tuner(
            trainable,
            param_space={"trial_key": tune.grid_search(trial_keys)},
            tune_config=self.the_tune_config(validated),
            run_config=self.the_run_config(sweep_dir, callbacks),
        )

    def the_tune_config(self, validated: bool):
        """The ``tune.TuneConfig`` of the experiment: the one given, or ``reuse_actors=True`` (trial
        workers reused across trials) without one; trials named by their trial key; ranked by
        :data:`METRIC` where nobody named a metric and every config has a validation set."""
        from ray import tune

        given = self.tune_config or tune.TuneConfig(reuse_actors=True)
        metric = {"metric": METRIC, "mode": MODE} if self.default_metric() and validated else {}
        return dataclasses.replace(
            given,
            scheduler=self.the_scheduler,
            trial_dirname_creator=_trial_dirname,
            trial_name_creator=_trial_dirname,
            **metric,
        )

    def the_run_config(self, sweep_dir: SweepDir, callbacks: list):
        """The ``tune.RunConfig`` of the experiment: stored in the sweep directory as its next
        experiment, Ray's and Tune's output at :attr:`verbose`, the two newest checkpoints per
        trial and a failed trial retried twice unless ``run_config`` (or ``failure_config``) says
        otherwise, ``callbacks`` after the user's, and Tune's TensorBoard logger as
        :class:`~._trial_tensorboard.TrialTensorBoard` (which frees each trial's writer)."""
        from ray import tune

        from ._trial_tensorboard import trial_tensorboard

        # A RunConfig fills in defaults as it is made (a FailureConfig without retries, a
        # CheckpointConfig that keeps every checkpoint, a verbosity read from the environment), so
        # the user's fields count where they differ from those, and the sweep's own apply otherwise.
        run, default = self.run_config, tune.RunConfig()
        given = {} if run is None else {f.name: getattr(run, f.name) for f in dataclasses.fields(run)}
        ours = {*_OWNED_RUN, "failure_config", "checkpoint_config", "callbacks"}
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
            verbose=self.verbose,
            failure_config=self.failure_config or failure,
            checkpoint_config=checkpoint,
            callbacks=[*user, *callbacks, *trial_tensorboard(user)],
        )


def _is_local(sweep_dir: SweepDir) -> bool:
    import pyarrow.fs as pafs

    return isinstance(sweep_dir.filesystem, pafs.LocalFileSystem)


def _trial_dirname(trial) -> str:
    return trial.config["trial_key"]


def _check_owned(argument: str, config: Any, owned: dict[str, str]) -> None:
    """Refuse a Tune config that sets a field the sweep owns (to other than Tune's default),
    naming what to use instead."""
    if config is None:
        return
    default = type(config)()
    for field, instead in owned.items():
        value = getattr(config, field, None)
        if value != getattr(default, field, None):
            raise SpecError(f"`{argument}.{field}`: got {value!r}; a sweep sets it itself; use {instead}")


def unknown_options(options: dict[str, Any]) -> None:
    """Refuse keyword arguments ``sweep.run`` does not take, saying which Tune config holds them."""
    if not options:
        return
    import dataclasses as dc

    from ray import tune

    key = sorted(options)[0]
    if key in {f.name for f in dc.fields(tune.TuneConfig)}:
        hint = f"pass tune_config=tune.TuneConfig({key}=...)"
    elif key in {f.name for f in dc.fields(tune.RunConfig)}:
        hint = f"pass run_config=tune.RunConfig({key}=...)"
    else:
        hint = "see help(sweep.run) for its arguments"
    raise SpecError(f"`{key}`: not an argument of sweep.run; {hint}")
