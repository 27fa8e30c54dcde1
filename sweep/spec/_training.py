"""``Training``: how every member of a sweep is trained and evaluated (docs: Reference > Spec fields).

Frozen and validated on construction: every bad field is a :class:`SpecError` naming it, the
value and what is allowed. What can only be checked against the data (trajectories long
enough for ``unroll`` and ``rollout_steps``, a batch that fits the training windows) is
checked by :func:`sweep.training.check_data` before any trial starts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from .._errors import SpecError
from ..metrics import check_names, check_rollout_names, metric_name, rollout_summary_names
from ._bytes import as_bytes
from ._values import known_fields, refuse_unknown

INT32_LIMIT = 2**31  # training counters are int32 inside the compiled program
# Fields added after stores were first written: left out of identity() at their defaults, so that
# the config id (and trial keys) of a spec that does not use them stays what it always was.
_LATER_DEFAULTS = {
    "unroll": 1,
    "rollout_steps": 0,
    "rollout_metrics": ["nrmse"],
    "cut": False,
    "noise": 0.0,
    "diverted": False,
    "correct": None,
    "coarse_proportion": 0.5,
    "data_memory": None,
}
CORRECTIONS = ("sequential", "parallel", "sequential_with_bypass")  # APEBench's CorrectedStepper modes


def _names(value: Any, field: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise SpecError(f'`training.{field}`: got {value!r}; give a list of names, e.g. ["mse", "nrmse"]')
    return tuple(value)


@known_fields
@dataclasses.dataclass(frozen=True)
class Training:
    """Epochs, batch size, how often (in epochs) a trial reports and checkpoints, the loss it
    minimises and the metrics every report evaluates on the validation and test sets.

    ``loss`` and each of ``metrics``: a built-in (``"mse"``, ``"mae"``, ``"nrmse"``,
    ``"cross_entropy"``) or ``"package.module:fn"`` with ``fn(pred, target) -> scalar`` for one
    sample (see :mod:`sweep.metrics`). Both are part of the structural config: changing them is
    a new config (and new trials).

    Autoregressive emulators (the problem must give trajectories; docs: How-to guides >
    Autoregressive emulators): ``unroll`` trains on windows of consecutive states,
    ``rollout_steps`` measures every member's rollout at every report.

    Attributes:
        epochs: Passes over the training samples (or windows), an integer ``>= 1``.
        batch_size: Samples per update, an integer ``>= 1``; at most the training samples
            (checked against the data).
        report_every: Epochs per compiled chunk: a trial reports, evaluates and may checkpoint
            after each. An integer ``>= 1``.
        loss: What training minimises: a built-in name or ``"package.module:fn"`` of one sample.
        metrics: Evaluated with the loss on the validation and test sets at every report; stored
            as ``val_<name>`` / ``test_<name>`` (an import path's function name).
        unroll: ``1`` trains on the one-step pairs. ``K > 1`` trains on windows of ``K + 1``
            consecutive states of the training trajectories: the member predicts ``K`` steps
            autoregressively from the window's first state, and the loss is the mean of the
            ``K`` per-step losses. An integer ``>= 1``.
        rollout_steps: ``T > 0`` rolls each member out ``T`` steps from the first state of every
            validation and test trajectory at every report and evaluates ``rollout_metrics``
            after each step: columns ``val_rollout_<m>`` / ``test_rollout_<m>`` (``T`` values)
            and their geometric mean over steps ``1..min(T, 100)``, ``val_rollout_gmean_<m>`` /
            ``test_rollout_gmean_<m>``, with their means over steps 6-12 and 13-30 where ``T``
            reaches them (``test_rollout_window_6_12_<m>``; for ``correlation``, whose higher
            values are better, the steps it stays at or above 0.8 instead:
            ``test_rollout_valid_steps_correlation``).
            ``0``: no rollouts.
        rollout_metrics: The metrics of the rollouts (not empty when ``rollout_steps > 0``).
        cut: With ``unroll = K > 1``: stop the gradients between the unrolled steps ("pushforward";
            APEBench ``sup;K;true``, trainax ``SupervisedTrainer(cut_bptt=True)``): each step's
            loss differentiates only the step that made it, from the rolled-out state it started
            from. ``False``: backpropagate through the whole unroll (``sup;K``).
        noise: The standard deviation of Gaussian noise added to every training input (a pair's
            input, a window's first state): input noise injection. ``0.0``: none. A finite
            number ``>= 0``, in the units the network sees (normalised ones where the problem
            normalises); each member draws its own noise from its shuffle key.
        diverted: With ``unroll = K > 1``: the diverted chain (APEBench ``div;K``, with ``cut``
            ``div;K;true``; trainax ``DivertedChainBranchOneTrainer``): the member rolls out ``K``
            steps from the window's first state and each step's target is the problem's exponax
            stepper applied to the state the member started that step from (a differentiable
            reference inside the unroll); the window's later states are not used. The problem
            must be ``exponax:<Stepper>`` or ``apebench:<scenario>_<N>d``.
        correct: Correction learning (APEBench ``correct;<mode>``, its ``CorrectedStepper``): the
            member corrects a coarse stepper, the problem's exponax stepper advanced
            ``coarse_proportion * dt``. ``"sequential"``: the network of the coarse step;
            ``"parallel"``: the coarse step plus the network of the state;
            ``"sequential_with_bypass"``: the coarse step plus the network of it. It is used in
            training, evaluation and the trainer's rollouts; ``None``: the network alone
            predicts (APEBench ``predict``). Needs a PDE problem, as ``diverted`` does.
        coarse_proportion: The coarse stepper's fraction of ``dt`` with ``correct``, in
            ``(0, 1]`` (APEBench's ``coarse_proportion``, default 0.5).
        data_memory: The data budget of a trial, in bytes (an integer or text such as
            ``"4GiB"``): the most its data may take where it trains, shared by its whole block.
            Data that fit train as always; a larger training split is streamed in windows of
            shards, in an order drawn from the problem's ``data_seed`` and the epoch, and
            validation and test data that leave no room for two windows of a batch are
            evaluated in parts of at most half the budget (docs: How-to guides > Real datasets >
            Larger than memory). ``None``: a quarter of the
            device's memory on a GPU, a quarter of the host's memory on CPU (or of its control
            group's limit, a container's or a Slurm job's, where lower), so that whether a trial
            streams depends on the machine: set it to train the same everywhere.

    Every integer lies below ``2**31`` (training counters are int32 in the compiled program).

    Raises:
        SpecError: A field is invalid; the message names it, the value and what is allowed.

    Examples:
        >>> import sweep
        >>> sweep.Training(epochs=50, unroll=4, rollout_steps=100, rollout_metrics=("nrmse", "mse")).unroll
        4
        >>> try:
        ...     sweep.Training(epochs=0)
        ... except sweep.SpecError as e:
        ...     print(e)
        `training.epochs`: got 0; must be an integer >= 1 (and below 2**31)
    """

    epochs: int = 100
    batch_size: int = 32
    report_every: int = 10
    loss: str = "mse"
    metrics: tuple[str, ...] = ()
    unroll: int = 1
    rollout_steps: int = 0
    rollout_metrics: tuple[str, ...] = ("nrmse",)
    cut: bool = False
    noise: float = 0.0
    diverted: bool = False
    correct: str | None = None
    coarse_proportion: float = 0.5
    data_memory: int | str | None = None

    def __post_init__(self) -> None:
        for field, low in (("epochs", 1), ("batch_size", 1), ("report_every", 1), ("unroll", 1), ("rollout_steps", 0)):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value < INT32_LIMIT:
                raise SpecError(f"`training.{field}`: got {value!r}; must be an integer >= {low} (and below 2**31)")
        object.__setattr__(self, "metrics", _names(self.metrics, "metrics"))
        object.__setattr__(self, "rollout_metrics", _names(self.rollout_metrics, "rollout_metrics"))
        if not isinstance(self.cut, bool):
            raise SpecError(f"`training.cut`: got {self.cut!r}; must be true or false")
        if self.cut and self.unroll == 1:
            raise SpecError(
                "`training.cut`: true with unroll=1; cutting gradients between unrolled steps needs unroll >= 2"
            )
        noise = self.noise
        if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not 0 <= noise < float("inf"):
            raise SpecError(f"`training.noise`: got {noise!r}; must be a finite number >= 0 (0: no noise)")
        object.__setattr__(self, "noise", float(noise))
        if not isinstance(self.diverted, bool):
            raise SpecError(f"`training.diverted`: got {self.diverted!r}; must be true or false")
        if self.diverted and self.unroll == 1:
            raise SpecError(
                "`training.diverted`: true with unroll=1; the diverted chain rolls out unroll >= 2 steps "
                "(with unroll=1 it is one-step training on the data)"
            )
        if self.correct is not None and self.correct not in CORRECTIONS:
            raise SpecError(
                f"`training.correct`: got {self.correct!r}; choose one of {', '.join(map(repr, CORRECTIONS))} "
                f"(APEBench's correct;<mode>), or None (the network alone)"
            )
        proportion = self.coarse_proportion
        if isinstance(proportion, bool) or not isinstance(proportion, (int, float)) or not 0 < proportion <= 1:
            raise SpecError(
                f"`training.coarse_proportion`: got {proportion!r}; must be a number in (0, 1] (the coarse "
                f"stepper's fraction of dt)"
            )
        object.__setattr__(self, "coarse_proportion", float(proportion))
        if self.data_memory is not None:
            object.__setattr__(self, "data_memory", as_bytes(self.data_memory, "training.data_memory"))
        check_names(self.loss, self.metrics)
        check_rollout_names(self.rollout_metrics)
        if self.rollout_steps and not self.rollout_metrics:
            raise SpecError(
                f"`training.rollout_metrics`: empty with rollout_steps={self.rollout_steps}; name at "
                f'least one metric, e.g. ["nrmse"] (or set rollout_steps=0: no rollouts)'
            )

    @property
    def uses_stepper(self) -> bool:
        """Whether training needs the problem's exponax stepper (``diverted`` or ``correct``)."""
        return self.diverted or self.correct is not None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"metrics": list(self.metrics), "rollout_metrics": list(self.rollout_metrics)}

    def identity(self) -> dict[str, Any]:
        """What identifies the training in a config id: :meth:`to_dict` without the fields added
        since stores were first written where they hold their defaults (``unroll=1``,
        ``rollout_steps=0``, ``rollout_metrics=["nrmse"]``, ``cut=False``, ``noise=0.0``,
        ``diverted=False``, ``correct=None``, ``coarse_proportion=0.5``, ``data_memory=None``), so
        that older ids stay valid."""
        return {k: v for k, v in self.to_dict().items() if k not in _LATER_DEFAULTS or v != _LATER_DEFAULTS[k]}

    def validation_columns(self) -> list[str]:
        """The validation columns every member reports: ``val_loss``, ``val_<metric>`` of each metric
        and, with rollouts, ``val_rollout_gmean_<metric>`` (``val_rollout_valid_steps_correlation``)."""
        names = ["val_loss", *(f"val_{metric_name(m)}" for m in self.metrics)]
        return names + [
            f"val_{name}"
            for m in (self.rollout_metrics if self.rollout_steps else ())
            for name in rollout_summary_names(metric_name(m), self.rollout_steps)
        ]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Training:
        refuse_unknown(data, sorted(f.name for f in dataclasses.fields(cls)), "`training`")
        return cls(**data)

    def replace(self, **changes: Any) -> Training:
        return Training.from_dict(self.to_dict() | changes)
