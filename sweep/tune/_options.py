"""``sweep.RunOptions``: every setting of a ``sweep.run`` call but the spec and its storage, in
one frozen object (as Ray Tune's ``TuneConfig`` / ``RunConfig`` and :class:`sweep.ServeOptions`
hold theirs), checked when it is made.

Tune's own settings travel in Tune's own objects: ``tune_config=tune.TuneConfig(...)`` and
``run_config=tune.RunConfig(...)`` are passed through, except for the fields a sweep owns (the
trials are its plan's blocks; their names, storage and scheduler are its own), which are refused
with the argument to use instead. The experiment they make is :mod:`._tuner`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import SpecError
from ._cadence import check_checkpoint_every
from ._trainable import TrialHooks

METRIC, MODE = "val_loss_mean", "min"  # Tune's default: the block's mean validation loss
EXECUTORS = ("tune", "local")  # how rounds are trained (see RunOptions.executor)
PROGRESS = ("auto", "live", "plain", "off")

# field -> what to use instead
OWNED_TUNE = {
    "search_alg": "the sweep's plan decides the trials (grid= and seeds= in the spec)",
    "num_samples": "seeds= in the spec",
    "trial_name_creator": "nothing: trials are named by their trial key",
    "trial_dirname_creator": "nothing: trial directories are named by their trial key",
}
OWNED_RUN = {
    "name": "nothing: each run is a new experiment tune-NNNN in the sweep directory",
    "storage_path": "sweep.run(storage=...)",
    "storage_filesystem": "sweep.run(storage_filesystem=...)",
    "local_dir": "sweep.run(storage=...)",
    "verbose": "sweep.RunOptions(verbose=...)",
}


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """How :func:`sweep.run` trains a sweep: where, with what executor, with which Tune settings.

    Args:
        executor: ``"tune"`` (default): every block is a Ray Tune trial (placement on a cluster,
            fractional GPUs, retries, preemption, node loss, waves of a large plan); ``"local"``:
            the blocks train one after another in this process (:func:`sweep.train_block`'s
            program, checkpoints under ``<sweep>/local/``), no Ray started. Both write the same
            store, bit for bit on CPU, and either resumes what the other left.
        address: ``None`` starts (or reuses) a local Ray instance of this process, never a cluster
            found on the machine; ``"auto"``, ``"HOST:6379"`` or ``"ray://host:10001"`` joins a cluster.
        resume: First restore the latest Tune experiment (``Tuner.restore``, errored trials resumed
            from their checkpoints), then train whatever is still missing. Partial checkpoints are
            continued either way.
        scheduler: Any Tune scheduler; without its own metric it gets ``val_loss_mean`` / ``min``
            (without a validation set, a scheduler must be given its metric).
        failure_config: A ``tune.FailureConfig`` (default: retry a trial twice).
        trial_hooks: A :class:`sweep.tune.TrialHooks` run inside every trial (fault injection).
        loggers: Trackers that get one run per member (or per configuration), by name
            (``"tensorboard"``, ``"mlflow"``, ``"wandb"``) or as :mod:`sweep.tune` logger objects.
        progress: ``"auto"`` (a live display on a terminal, plain lines otherwise), ``"live"``,
            ``"plain"`` or ``"off"``.
        resume_command: What the Ctrl-C message says to run to resume (default: the Python call);
            kept in the sweep directory with the current folder, where ``sweep status`` prints it
            if it is a ``sweep run ... --resume`` command of that directory.
        checkpoint_every: A block checkpoint every that many reports, or ``"auto"`` (as often as
            keeps the checkpoint traffic within a tenth of what the storage takes); the last report
            always checkpoints.
        tune_config: A ``tune.TuneConfig`` passed through (``max_concurrent_trials``,
            ``time_budget_s``, ``reuse_actors``, ``metric``/``mode``, a ``scheduler``), used as it is
            (Tune's own default is ``reuse_actors=False``; without one, trial workers are reused).
            The fields a sweep sets itself (``num_samples``, ``search_alg``, trial names) are refused.
        run_config: A ``tune.RunConfig`` passed through (``stop``, ``callbacks``,
            ``checkpoint_config``, ``failure_config``, ...); its name and storage are the sweep's.
        verbose: 1 or more shows Ray's and Tune's own output, hidden by default.

    Raises:
        SpecError: on a value that cannot work (the message names the field, the value and what
            is allowed), before anything starts.

    Examples:
        ```python
        options = sweep.RunOptions(address="auto", progress="plain", loggers=["tensorboard"])
        path = sweep.run(spec, storage="s3://bucket/runs", options=options)
        path = sweep.run(spec, storage="./runs", options=sweep.RunOptions(executor="local"))
        ```
    """

    executor: str = "tune"
    address: str | None = None
    resume: bool = False
    scheduler: Any = None
    failure_config: Any = None
    trial_hooks: TrialHooks = dataclasses.field(default_factory=TrialHooks)
    loggers: Sequence[Any] = ()
    progress: str = "auto"
    resume_command: str | None = None
    checkpoint_every: int | str = "auto"
    tune_config: Any = None  # tune.TuneConfig or None
    run_config: Any = None  # tune.RunConfig or None
    verbose: int = 0

    def __post_init__(self) -> None:
        _choice("executor", self.executor, EXECUTORS)
        _choice("progress", self.progress, PROGRESS)
        if not isinstance(self.resume, bool):
            raise SpecError(f"`resume`: got {self.resume!r}; give True or False")
        if isinstance(self.verbose, bool) or not isinstance(self.verbose, int) or self.verbose < 0:
            raise SpecError(f"`verbose`: got {self.verbose!r}; give an integer >= 0 (0 hides Ray's and Tune's output)")
        if self.trial_hooks is None:
            object.__setattr__(self, "trial_hooks", TrialHooks())
        if not isinstance(self.trial_hooks, TrialHooks):
            raise SpecError(f"`trial_hooks`: got {type(self.trial_hooks).__name__}; give a sweep.tune.TrialHooks")
        if isinstance(self.loggers, (str, bytes)) or not isinstance(self.loggers, Sequence):
            object.__setattr__(self, "loggers", (self.loggers,))  # one tracker given alone
        object.__setattr__(self, "loggers", tuple(self.loggers))
        check_checkpoint_every(self.checkpoint_every)
        _check_owned("tune_config", self.tune_config, OWNED_TUNE)
        _check_owned("run_config", self.run_config, OWNED_RUN)
        if self.tune_config is not None and self.tune_config.scheduler is not None and self.scheduler is not None:
            raise SpecError("`tune_config.scheduler`: a scheduler is given twice; pass it once, as scheduler=")
        if self.executor == "local":
            self._check_local()

    def _check_local(self) -> None:
        """What only Ray Tune does is refused with the local executor, before anything starts."""
        tune_only = {
            "address": self.address,
            "scheduler": self.the_scheduler,
            "failure_config": self.failure_config,
            "tune_config": self.tune_config,
            "run_config": self.run_config,
        }
        for name, value in tune_only.items():
            if value is not None:
                raise SpecError(
                    f"`{name}`: got {value!r}; executor='local' trains in this process without Ray Tune; "
                    f"use executor='tune' for it, or leave it out"
                )

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


def _choice(field: str, value: Any, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise SpecError(f"`{field}`: got {value!r}; choose one of {', '.join(map(repr, allowed))}")


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


def fold_options(options: RunOptions | None, keywords: Mapping[str, Any]) -> RunOptions:
    """``options`` with the keyword arguments of ``sweep.run``'s older signature folded in
    (``sweep.run(spec, resume=True)`` is ``options=RunOptions(resume=True)``); a keyword that is
    no :class:`RunOptions` field is refused, naming the Tune config that holds it if one does,
    and so is one given both ways."""
    if options is not None and not isinstance(options, RunOptions):
        raise SpecError(f"`options`: got {type(options).__name__}; give a sweep.RunOptions(...)")
    options = options or RunOptions()
    if not keywords:
        return options
    fields = {f.name for f in dataclasses.fields(RunOptions)}
    for key in sorted(keywords):
        if key not in fields:
            raise SpecError(f"`{key}`: not an argument of sweep.run nor a field of sweep.RunOptions; {_hint(key)}")
        if getattr(options, key) != getattr(RunOptions(), key):
            raise SpecError(f"`{key}`: given both as sweep.run({key}=...) and in options=; give it once, in options")
    return dataclasses.replace(options, **keywords)


def _hint(key: str) -> str:
    from ray import tune

    if key in {f.name for f in dataclasses.fields(tune.TuneConfig)}:
        return f"pass options=sweep.RunOptions(tune_config=tune.TuneConfig({key}=...))"
    if key in {f.name for f in dataclasses.fields(tune.RunConfig)}:
        return f"pass options=sweep.RunOptions(run_config=tune.RunConfig({key}=...))"
    return f"its fields are {', '.join(f.name for f in dataclasses.fields(RunOptions))}"
