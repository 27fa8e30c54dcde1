"""Losses and metrics by name: small pure functions ``fn(pred, target) -> scalar`` of ONE sample.

``Training(loss=..., metrics=(...))`` name them: a built-in (:data:`BUILTINS`) or an import path
``"package.module:fn"``. The trainer applies a function to every sample of a batch (``vmap``) and
averages; the loss is what it minimises, the metrics are evaluated with the loss on the validation
and test sets at every report.

```python
import jax.numpy as jnp

def top_class_share(pred, target):          # pred: logits (classes, *spatial); target: (1, *spatial)
    return jnp.mean(jnp.argmax(pred, axis=0) == 0)

Training(loss="cross_entropy", metrics=("accuracy", "my_metrics:top_class_share"))
```

A target has any shape: the inputs' (an emulator), a vector or a number per sample (an inverse
problem), another grid; ``mse``, ``mae`` and ``nrmse`` compare a prediction with a target of the
same shape. The fields of the PDE benchmarks (``(channels, *spatial)``) have their metrics too:
``vrmse`` (The Well's variance-scaled RMSE), ``correlation`` (Pearson's; higher is better),
``apebench_nrmse`` and ``apebench_correlation`` (APEBench's own, which sum the channels' nRMSE
and do not centre the correlation) and ``spectral_low``, ``spectral_mid``, ``spectral_high``
(Fourier-space errors in PDEBench's wavenumber bands). ``cross_entropy`` and ``accuracy`` take class indices: a target ``(*t)`` (``()``: one
label per sample) or ``(1, *t)`` against logits ``(classes, *t)``.

Names are checked when the spec is built (no code is imported then: a stored spec names import
paths that reading a store must not run); :func:`check_on_sample` imports the paths and checks
that every function returns a scalar on one sample of the problem, before any training.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._errors import SpecError, did_you_mean
from ._field_metrics import BANDS, apebench_correlation, apebench_nrmse, correlation, spectral_error, vrmse
from ._import_path import import_object, is_import_path
from ._rollout_curves import ROLLOUT_GMEAN as ROLLOUT_GMEAN
from ._rollout_curves import ROLLOUT_VALID_STEPS as ROLLOUT_VALID_STEPS
from ._rollout_curves import ROLLOUT_WINDOW as ROLLOUT_WINDOW
from ._rollout_curves import VALID_AT as VALID_AT
from ._rollout_curves import WINDOWS as WINDOWS
from ._rollout_curves import rollout_gmean as rollout_gmean
from ._rollout_curves import summarised_metric as summarised_metric
from ._rollout_curves import valid_steps as valid_steps
from ._rollout_curves import window_mean as window_mean

LOSS = "loss"  # the name the training objective is evaluated under (val_loss, test_loss)


class Metric(NamedTuple):
    """A per-sample function, and optionally the same batch mean written as one reduction."""

    per_sample: Callable[[Array, Array], Array]
    batch_mean: Callable[[Array, Array], Array] | None = None  # == mean over samples of per_sample
    integer_targets: bool = False  # targets hold class indices (checked against the data)
    higher_is_better: bool = False  # a score, not an error: never a loss; its rollouts counted in valid steps


def _same_shape(name: str, pred: Array, target: Array) -> None:
    if pred.shape != target.shape:
        raise ValueError(
            f"{name} needs a prediction and a target of the same shape; got {pred.shape} and {target.shape}"
        )


def mse(pred: Float[Array, "c *s"], target: Float[Array, "c *s"]) -> Float[Array, ""]:
    """Mean squared error over every channel and point."""
    _same_shape("mse", pred, target)
    return jnp.mean(jnp.square(pred - target))


def mae(pred: Float[Array, "c *s"], target: Float[Array, "c *s"]) -> Float[Array, ""]:
    """Mean absolute error over every channel and point."""
    _same_shape("mae", pred, target)
    return jnp.mean(jnp.abs(pred - target))


def nrmse(pred: Float[Array, "c *s"], target: Float[Array, "c *s"]) -> Float[Array, ""]:
    """``‖pred − target‖ / ‖target‖`` (2-norms over every channel and point; a zero target gives inf)."""
    _same_shape("nrmse", pred, target)
    return jnp.sqrt(jnp.sum(jnp.square(pred - target)) / jnp.sum(jnp.square(target)))


def _class_indices(name: str, pred: Array, target: Array) -> Array:
    """``target`` as int32 class indices of the shape of ``pred[1:]`` (a target ``(1, *t)`` loses
    its label channel), or a ValueError saying what fits logits ``pred`` (classes first)."""
    if pred.ndim == 0 or target.shape not in (pred.shape[1:], (1, *pred.shape[1:])):
        raise ValueError(
            f"{name} needs class indices of shape {pred.shape[1:]} (or {(1, *pred.shape[1:])}) for logits of "
            f"shape {pred.shape} (classes first); got targets of shape {target.shape}"
        )
    return target.reshape(pred.shape[1:]).astype(jnp.int32)


def cross_entropy(pred: Float[Array, "k ..."], target: Float[Array, "..."]) -> Float[Array, ""]:
    """Softmax cross-entropy of logits ``pred`` (classes on axis 0, ``(classes, *t)``) against
    integer class indices ``target`` of shape ``t`` or ``(1, *t)`` (``()``: one label per sample),
    averaged over the positions."""
    labels = _class_indices("cross_entropy", pred, target)
    logp = jax.nn.log_softmax(pred, axis=0)
    picked = jnp.take_along_axis(logp, labels[None], axis=0)
    return -jnp.mean(picked)


def accuracy(pred: Float[Array, "k ..."], target: Float[Array, "..."]) -> Float[Array, ""]:
    """Fraction of positions whose largest logit is the target class (targets as for
    :func:`cross_entropy`; one label per sample: 1.0 or 0.0). Higher is better."""
    labels = _class_indices("accuracy", pred, target)
    return jnp.mean((jnp.argmax(pred, axis=0) == labels).astype(jnp.float32))


def _elementwise_mean(fn: Callable[[Array], Array]) -> Callable[[Array, Array], Array]:
    """The batch mean of a per-sample mean of ``fn(pred - target)``: every sample has as many
    points, so it is the mean over the whole batch (one reduction, as the trainer always did)."""
    return lambda pred, target: jnp.mean(fn(pred - target))


BUILTINS: dict[str, Metric] = {
    "mse": Metric(mse, _elementwise_mean(jnp.square)),
    "mae": Metric(mae, _elementwise_mean(jnp.abs)),
    "nrmse": Metric(nrmse),
    "cross_entropy": Metric(cross_entropy, integer_targets=True),
    "accuracy": Metric(accuracy, integer_targets=True, higher_is_better=True),
    "vrmse": Metric(vrmse),
    "correlation": Metric(correlation, higher_is_better=True),
    "apebench_nrmse": Metric(apebench_nrmse),
    "apebench_correlation": Metric(apebench_correlation, higher_is_better=True),
    **{f"spectral_{band}": Metric(spectral_error(band)) for band in BANDS},
}


def takes_class_indices(loss: str, metrics: Sequence[str]) -> bool:
    """Whether the loss or a metric is a built-in on class indices (``cross_entropy``, ``accuracy``)."""
    return any(entry in BUILTINS and BUILTINS[entry].integer_targets for entry in (loss, *metrics))


def metric_name(entry: str) -> str:
    """The name a loss or metric is stored under: a built-in's name, or an import path's
    function name (``"my_metrics:accuracy"`` -> ``"accuracy"``, column ``val_accuracy``)."""
    return entry if entry in BUILTINS else entry.rpartition(":")[2].rpartition(".")[2]


def _check_entry(entry: Any, field: str, what: str, choices: Sequence[str] = tuple(BUILTINS)) -> None:
    if not isinstance(entry, str) or not (entry in BUILTINS or is_import_path(entry)):
        raise SpecError(
            f"`{field}`: unknown {what} {entry!r}{did_you_mean(entry, choices)}; choose one of {', '.join(choices)} "
            f"or give a function "
            f'fn(pred, target) -> scalar of one sample as "package.module:fn"'
        )


def losses() -> list[str]:
    """The built-ins a trainer can minimise (every one but the scores, whose higher values are better)."""
    return [name for name, m in BUILTINS.items() if not m.higher_is_better]


def check_names(loss: Any, metrics: Sequence[Any]) -> None:
    """Raise :class:`SpecError` unless ``loss`` and ``metrics`` name built-ins or import paths,
    with distinct stored names (nothing is imported here)."""
    _check_entry(loss, "training.loss", "loss", losses())
    if higher_is_better(loss):
        raise SpecError(
            f"`training.loss`: {loss!r} is a score (higher is better) and the trainer minimises its loss; "
            f"choose one of {', '.join(losses())} and evaluate {loss!r} in training.metrics"
        )
    seen: dict[str, str] = {}
    for i, entry in enumerate(metrics):
        _check_entry(entry, f"training.metrics[{i}]", "metric")
        name = metric_name(entry)
        if name == LOSS:
            raise SpecError(
                f"`training.metrics[{i}]`: {entry!r} would be stored as `val_loss`, the loss's own "
                f"column; rename the function"
            )
        if name in seen:
            raise SpecError(
                f"`training.metrics[{i}]`: {entry!r} and {seen[name]!r} would both be stored as "
                f"`val_{name}` / `test_{name}`; {_once(entry, seen[name])}"
            )
        seen[name] = entry


def _once(entry: str, before: str) -> str:
    """What to do about two metrics stored under one name: list a metric once, or rename a function."""
    return "list each metric once" if entry == before else "give each metric its own function name"


def check_rollout_names(metrics: Sequence[Any]) -> None:
    """Raise :class:`SpecError` unless every rollout metric names a built-in comparing states or an
    import path, with distinct stored names (columns ``test_rollout_<name>``; nothing imported)."""
    seen: dict[str, str] = {}
    for i, entry in enumerate(metrics):
        field = f"training.rollout_metrics[{i}]"
        _check_entry(entry, field, "rollout metric", rollout_builtins())
        if entry in BUILTINS and BUILTINS[entry].integer_targets:
            raise SpecError(
                f"`{field}`: {entry!r} compares predictions with class indices; a rollout compares "
                f"states with states: choose one of {', '.join(rollout_builtins())}"
            )
        name = metric_name(entry)
        if name in seen:
            raise SpecError(
                f"`{field}`: {entry!r} and {seen[name]!r} would both be stored as `test_rollout_{name}`; "
                f"{_once(entry, seen[name])}"
            )
        seen[name] = entry


def rollout_builtins() -> list[str]:
    """The built-in metrics a rollout can be measured by (those comparing states)."""
    return [name for name, m in BUILTINS.items() if not m.integer_targets]


def resolve(entry: str, field: str) -> Metric:
    """The :class:`Metric` a name stands for (an import path is imported here)."""
    return BUILTINS[entry] if entry in BUILTINS else Metric(import_object(entry, field))


def objective(loss: str, metrics: Sequence[str]) -> tuple[tuple[str, str, Metric], ...]:
    """``(stored name, spec field, Metric)`` of the loss (stored as ``"loss"``) and every metric."""
    entries = [(LOSS, "training.loss", loss)] + [
        (metric_name(m), f"training.metrics[{i}]", m) for i, m in enumerate(metrics)
    ]
    return tuple((name, field, resolve(entry, field)) for name, field, entry in entries)


def rollout_objective(metrics: Sequence[str]) -> tuple[tuple[str, str, Metric], ...]:
    """``(stored name, spec field, Metric)`` of every rollout metric (columns ``test_rollout_<name>``)."""
    return tuple(
        (metric_name(m), f"training.rollout_metrics[{i}]", resolve(m, f"training.rollout_metrics[{i}]"))
        for i, m in enumerate(metrics)
    )


def check_on_sample(
    loss: str,
    metrics: Sequence[str],
    pred: jax.ShapeDtypeStruct,
    target: jax.ShapeDtypeStruct,
    rollout_metrics: Sequence[str] = (),
) -> None:
    """Raise :class:`SpecError` (naming the field) unless the loss, every metric and every rollout
    metric, applied to one sample (the model's prediction ``pred``, a target ``target``; shapes
    only, nothing computed), return a real scalar, and the loss a float one."""
    entries = [loss, *metrics, *rollout_metrics]
    for (_name, field, metric), entry in zip(objective(loss, metrics) + rollout_objective(rollout_metrics), entries):
        try:
            out = jax.eval_shape(metric.per_sample, pred, target)
        except Exception as e:  # the user's function may raise anything on these shapes
            raise SpecError(
                f"`{field}`: {entry!r} fails on one sample of the problem (prediction {pred.shape}, "
                f"target {target.shape}): {type(e).__name__}: {e}"
            ) from None
        shape, dtype = getattr(out, "shape", None), getattr(out, "dtype", None)
        real = dtype is not None and (
            jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer) or dtype == jnp.bool_
        )
        if shape != () or not real:
            raise SpecError(
                f"`{field}`: {entry!r} returned {_described(out)} on one sample (prediction {pred.shape}, "
                f"target {target.shape}); it must return one real number per sample (the trainer "
                f"averages it over the batch)"
            )
        assert dtype is not None  # `real` is False without a dtype
        if field == "training.loss" and not jnp.issubdtype(dtype, jnp.floating):
            raise SpecError(
                f"`{field}`: {entry!r} returned {dtype} values; a loss must return a float to be differentiated"
            )


def _described(out: Any) -> str:
    if hasattr(out, "shape") and hasattr(out, "dtype"):
        return f"an array of shape {tuple(out.shape)} ({out.dtype})"
    return f"a {type(out).__name__}"


def check_targets(loss: str, metrics: Sequence[str], targets: dict[str, np.ndarray], num_classes: int) -> None:
    """Raise :class:`SpecError` unless, for a loss or metric on class indices (``cross_entropy``),
    every target of every split (``{"train": y, ...}``) is an integer in ``[0, num_classes)``."""
    for field, entry in [("training.loss", loss)] + [(f"training.metrics[{i}]", m) for i, m in enumerate(metrics)]:
        if entry not in BUILTINS or not BUILTINS[entry].integer_targets:
            continue
        for split, y in targets.items():
            bad = (y != np.round(y)) | (y < 0) | (y >= num_classes)
            if bad.any():
                raise SpecError(
                    f"`{field}`: {entry!r} needs class indices 0..{num_classes - 1} as targets (the model outputs "
                    f"{num_classes} logits; set model.out_channels, or model.num_classes of ConvEncoder, to the "
                    f"number of classes); the {split} targets hold {y[bad].flat[0].item()!r}"
                )


def batch_mean(metric: Metric, pred: Float[Array, "b ..."], target: Float[Array, "b ..."]) -> Float[Array, ""]:
    """The mean over a batch of ``metric`` on each sample, as float32."""
    if metric.batch_mean is not None:
        return metric.batch_mean(pred, target)
    return jnp.mean(jax.vmap(metric.per_sample)(pred, target).astype(jnp.float32))


def higher_is_better(name: str) -> bool:
    """Whether ``name`` is a built-in score (``correlation``, ``accuracy``), not an error."""
    return name in BUILTINS and BUILTINS[name].higher_is_better


def mode_of(column: str, mode: str | None = None) -> str:
    """``mode`` where given, else whether lower (``"min"``) or higher (``"max"``) values of the store
    column ``column`` are better: ``"max"`` for a built-in score (``val_accuracy``,
    ``test_correlation``) and the valid steps of its rollouts (``test_rollout_valid_steps_correlation``),
    ``"min"`` for every other column (losses, errors, a function's metric).

    Example:
        ``mode_of("val_accuracy")`` -> ``"max"``; ``mode_of("val_loss")`` -> ``"min"``;
        ``mode_of("val_accuracy", "min")`` -> ``"min"``
    """
    if mode is not None or not isinstance(column, str):  # (a column of another type is refused where it is used)
        return "min" if mode is None else mode
    name = next((column.removeprefix(s) for s in ("val_", "test_") if column.startswith(s)), column)
    return "max" if name.startswith(ROLLOUT_VALID_STEPS) or higher_is_better(name) else "min"


def rollout_summary_name(metric: str) -> str:
    """The name a rollout metric's curve is first summarised under (a column ``test_<name>``): the
    geometric mean of an error (``rollout_gmean_nrmse``), the valid steps of a built-in score whose
    higher values are better (``rollout_valid_steps_correlation``; a geometric mean of a signed
    score is NaN wherever one step is <= 0). Any other name, a function's by import path too,
    counts as an error."""
    return (ROLLOUT_VALID_STEPS if higher_is_better(metric) else ROLLOUT_GMEAN) + metric


def _windows(metric: str, steps: int) -> list[tuple[str, int, int]]:
    """The name, first and last step of each of The Well's :data:`WINDOWS` that curves of ``steps``
    steps reach, for an error (a score has none)."""
    if higher_is_better(metric):
        return []
    return [(f"{ROLLOUT_WINDOW}{a}_{b}_{metric}", a, b) for a, b in WINDOWS if steps >= b]


def rollout_summary_names(metric: str, steps: int) -> list[str]:
    """Every summary of ``metric``'s rollout curves of ``steps`` steps: :func:`rollout_summary_name`,
    then for an error the mean over each of The Well's :data:`WINDOWS` the curves reach
    (``rollout_window_6_12_nrmse`` from 12 steps, ``rollout_window_13_30_nrmse`` from 30)."""
    return [rollout_summary_name(metric), *(name for name, _, _ in _windows(metric, steps))]


def rollout_summaries(metric: str, curves: Float[np.ndarray, "... t"]) -> dict[str, np.ndarray]:
    """The summaries :func:`rollout_summary_names` of ``metric``'s rollout curves, in float64:
    :func:`rollout_gmean` or :func:`valid_steps` at :data:`VALID_AT`, and :func:`window_mean`."""
    c = np.asarray(curves)
    first = valid_steps(c, VALID_AT).astype(np.float64) if higher_is_better(metric) else rollout_gmean(c)
    windows = {name: window_mean(c, a, b) for name, a, b in _windows(metric, c.shape[-1])}
    return {rollout_summary_name(metric): first, **windows}
