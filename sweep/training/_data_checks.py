"""The dataset a spec trains on, loaded and checked before any work: :func:`load_data` and
:func:`check_data` name the field and the value of every problem (batch larger than the data,
trajectories too short, a model or a loss that does not fit the data's shapes)."""

from __future__ import annotations

from .._errors import SpecError
from .._words import counted
from ..metrics import check_targets, takes_class_indices
from ..models import check_output
from ..problems import SPLITS, Dataset, load_problem
from ..spec import SweepSpec
from ._program import checked_objective, data_shapes, prediction, program_key, static_part
from ._stream import window_plan


def load_data(spec: SweepSpec) -> Dataset:
    """Load (or generate) the spec's dataset and check it against the training settings and model.

    Args:
        spec: The sweep specification.

    Returns:
        The :class:`Dataset`, with ``train``, ``val`` and ``test`` ``(x, y)`` pairs (and trajectories
        where the problem has them).

    Raises:
        SpecError: The arrays are not numbers or not finite, a file is unreadable, the batch is
            larger than the training samples, a metric fails on a sample, or a model does not fit
            the data's shapes; the message names the field.

    Examples:
        ```python
        data = sweep.load_data(spec)
        data.train_x.shape  # [samples, channels, *spatial]
        ```
    """
    data = load_problem(spec.problem.name, dict(spec.problem.options))
    check_data(spec, data)
    return data


def check_data(spec: SweepSpec, data: Dataset) -> None:
    """Raise :class:`SpecError` unless ``spec`` can train on ``data``: batch size <= training samples
    (or windows, with ``unroll > 1``); trajectories long enough for ``unroll`` and ``rollout_steps``;
    a ``Training(data_memory=...)`` given can stream the training split (two windows of at
    least a shard and a batch beside the validation and test data);
    the model builds and maps one input to an output that fits the targets (their shape, or class
    logits for class-index targets; errors name the problem, both shapes and the model); the loss
    and metrics import and give a scalar on one sample; targets of class-index losses fit the
    model's number of classes (checked
    with ``eqx.filter_eval_shape``, nothing computed; the checked structure is cached for the trainer)."""
    t = spec.training
    _check_trajectories(spec, data)
    if t.unroll == 1 and t.batch_size > data.num_train:
        raise SpecError(
            f"`training.batch_size`: got {t.batch_size}; the problem has only "
            f"{counted(data.num_train, 'training sample')} (batch size must be <= that)"
        )
    if t.data_memory is not None:  # the default budget is the trial's machine's, checked where it trains
        window_plan(spec, data)
    shapes = data_shapes(data)
    static_part(spec.model.to_dict(), shapes)  # builds the checked template
    out = prediction(spec.model.to_dict(), shapes).shape
    logits = takes_class_indices(t.loss, t.metrics)
    classes = logits or shapes.target_dtype == "int32"
    model = spec.model.to_dict()
    name, target = model.pop("name"), shapes.target_shape
    check_output(name, model, spec.problem.name, shapes.sample_shape, target, out, classes, logits)
    checked_objective(program_key(spec, ()), shapes)
    check_targets(t.loss, t.metrics, {name: split.y for name, split in zip(SPLITS, data.splits)}, out[0] if out else 1)


def _check_trajectories(spec: SweepSpec, data: Dataset) -> None:
    """``unroll > 1`` needs training trajectories of at least ``unroll`` steps and as many windows
    as a batch; ``rollout_steps=T`` needs test (and, where given, validation) trajectories of at
    least ``T`` steps."""
    t, problem = spec.training, f"problem {spec.problem.name!r}"
    how = "(heat1d: trajectory_steps=<n>; exponax:<Stepper>; arrays: train_traj/val_traj/test_traj in the .npz)"
    if t.unroll > 1 and data.history > 1:
        raise SpecError(
            f"`training.unroll`: got {t.unroll} with `problem.history` {data.history}; unrolled training of "
            f"inputs that stack several states is not supported yet: set unroll=1 or history=1"
        )
    if t.unroll > 1:
        traj = data.train_traj
        if traj is None:
            raise SpecError(
                f"`training.unroll`: got {t.unroll}; unrolled training needs training trajectories and "
                f"{problem} has none {how}; or set unroll=1"
            )
        if traj.shape[1] - 1 < t.unroll:
            raise SpecError(
                f"`training.unroll`: got {t.unroll}; the training trajectories of {problem} have "
                f"{traj.shape[1] - 1} steps; unroll must be <= that"
            )
        windows = traj.shape[0] * (traj.shape[1] - t.unroll)
        if t.batch_size > windows:
            raise SpecError(
                f"`training.batch_size`: got {t.batch_size}; with unroll={t.unroll} the problem has only "
                f"{windows} training windows of {t.unroll + 1} states (batch size must be <= that)"
            )
    if t.rollout_steps:
        if data.test_traj is None:
            raise SpecError(
                f"`training.rollout_steps`: got {t.rollout_steps}; rollouts need test trajectories and "
                f"{problem} has none {how}; or set rollout_steps=0"
            )
        for split in ("val", "test"):
            traj = data.trajectories(split)
            steps = None if traj is None else traj.shape[1] - data.history  # after the first window
            if steps is not None and steps < t.rollout_steps:
                after = f" after the first {data.history} states (history)" if data.history > 1 else ""
                raise SpecError(
                    f"`training.rollout_steps`: got {t.rollout_steps}; the {split} trajectories of "
                    f"{problem} have {steps} steps{after}; rollout_steps must be <= that"
                )
