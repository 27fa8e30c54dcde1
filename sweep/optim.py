"""Optax optimizers named in a spec, with scalar hyperparameters passed as arrays.

The trainer calls :func:`make_optimizer` inside the traced step with the member's
hyperparameters as (traced) scalars, so one compiled program serves every learning rate.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard

import optax

from ._errors import SpecError, did_you_mean

OPTIMIZERS = (
    "adabelief",
    "adadelta",
    "adafactor",
    "adagrad",
    "adam",
    "adamax",
    "adamaxw",
    "adamw",
    "adan",
    "amsgrad",
    "fromage",
    "lamb",
    "lars",
    "lion",
    "nadam",
    "nadamw",
    "noisy_sgd",
    "novograd",
    "optimistic_adam",
    "optimistic_gradient_descent",
    "radam",
    "rmsprop",
    "rprop",
    "sgd",
    "sign_sgd",
    "signum",
    "sm3",
    "yogi",
)
SCHEDULES = tuple(n for n in dir(optax) if n.endswith("_schedule") and n != "scale_by_schedule")


def _is_float(value: Any) -> TypeGuard[float]:
    return isinstance(value, float) or (isinstance(value, int) and not isinstance(value, bool))


def check_optimizer(name: str, options: Mapping[str, Any]) -> None:
    """Raise :class:`SpecError` unless ``optax.<name>(**options)`` is a valid optimizer."""
    if name not in OPTIMIZERS:
        raise SpecError(
            f"`optimizer.name`: unknown optimizer {name!r}{did_you_mean(name, OPTIMIZERS)}; "
            f"choose one of {', '.join(OPTIMIZERS)}"
        )
    params = inspect.signature(getattr(optax, name)).parameters
    allowed = set(params) | {"schedule"}
    for key in options:
        if key not in allowed:
            raise SpecError(
                f"`optimizer.{key}`: not an argument of optax.{name}{did_you_mean(key, allowed)}; "
                f"allowed: {', '.join(sorted(allowed))}"
            )
    _check_kinds(
        "optimizer", name, params, {k: v for k, v in options.items() if k not in ("schedule", "learning_rate")}
    )
    lr = options.get("learning_rate")
    if not _is_float(lr) or not math.isfinite(lr) or lr < 0:
        raise SpecError(f"`optimizer.learning_rate`: got {lr!r}; must be a finite number >= 0")
    if "schedule" in options:
        _check_schedule(options["schedule"])


_KINDS = {
    "a number": _is_float,
    "an integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "true or false": lambda v: isinstance(v, bool),
}


def _kind(param: inspect.Parameter) -> str | None:
    """What a spec may give for an optax argument (a key of ``_KINDS``), read from its default and
    annotation; None where it may be anything plain data can say (masks, dtypes)."""
    default, annotation = param.default, param.annotation
    text = str(annotation)
    if isinstance(default, float):
        return "a number"
    if annotation is bool:
        return "true or false"
    if annotation is int or text == "int | None":
        return "an integer"
    if "Any" in text or "Callable" in text:
        return None
    if "float" in text:  # jax.typing.ArrayLike: a scalar
        return "a number"
    return "true or false" if isinstance(default, bool) else None


def _check_schedule(schedule: Any) -> None:
    if not isinstance(schedule, Mapping) or schedule.get("name") not in SCHEDULES:
        got = schedule.get("name") if isinstance(schedule, Mapping) else schedule
        raise SpecError(
            f'`optimizer.schedule`: got {got!r}; give {{name = "<schedule>", ...}} with one of {", ".join(SCHEDULES)}'
        )
    fn = getattr(optax, schedule["name"])
    kwargs = _schedule_kwargs(schedule)
    try:
        inspect.signature(fn).bind(**kwargs)
    except TypeError as e:
        raise SpecError(f"`optimizer.schedule`: bad arguments for optax.{schedule['name']}: {e}") from None
    _check_kinds("optimizer.schedule", schedule["name"], inspect.signature(fn).parameters, kwargs)


def _check_kinds(field: str, name: str, params: Mapping[str, inspect.Parameter], options: Mapping[str, Any]) -> None:
    """Each option of ``optax.<name>`` must be of the kind its signature says (:func:`_kind`)."""
    for key, value in options.items():
        kind = _kind(params[key])
        if kind is None or _KINDS[kind](value) or (value is None and params[key].default is None):
            continue
        default = params[key].default
        raise SpecError(
            f"`{field}.{key}`: got {value!r} ({type(value).__name__}); optax.{name} takes {kind} here"
            + ("" if default is inspect.Parameter.empty else f" (default {default!r})")
        )


def _schedule_kwargs(schedule: Mapping[str, Any]) -> dict[str, Any]:
    fn = getattr(optax, schedule["name"])
    kwargs = {k: v for k, v in schedule.items() if k != "name"}
    params = inspect.signature(fn).parameters
    for unit in ("init_value", "peak_value"):
        if unit in params and unit not in kwargs:
            kwargs[unit] = 1.0
    return kwargs


def hyperparameter_names(options: Mapping[str, Any], hparam_sets: Iterable[Mapping[str, Any]] = ()) -> tuple[str, ...]:
    """Names passed as arrays: ``learning_rate``, every float option, and those in ``hparam_sets``."""
    names = ["learning_rate"]
    names += [k for k, v in options.items() if k != "learning_rate" and isinstance(v, float)]
    names += [k for h in hparam_sets for k in h]
    return tuple(dict.fromkeys(names))


def make_optimizer(name: str, options: Mapping[str, Any], hparams: Mapping[str, Any]) -> optax.GradientTransformation:
    """``optax.<name>`` with ``hparams`` (arrays) overriding ``options``; schedule scales the update."""
    kwargs = {k: v for k, v in options.items() if k != "schedule"} | dict(hparams)
    opt = getattr(optax, name)(**kwargs)
    if "schedule" in options:
        schedule = options["schedule"]
        opt = optax.chain(opt, optax.scale_by_schedule(getattr(optax, schedule["name"])(**_schedule_kwargs(schedule))))
    return opt
