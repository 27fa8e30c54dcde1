"""pdequinox architectures by name, activations by name, and user factories by import path."""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import pdequinox as pdeqx

from .._errors import SpecError, did_you_mean
from .._import_path import import_object, is_import_path

ARCHITECTURES = (
    "ConvNet",
    "ClassicResNet",
    "ModernResNet",
    "DilatedResNet",
    "ClassicUNet",
    "ModernUNet",
    "ClassicFNO",
    "MLP",
)
ACTIVATIONS = {
    "relu": jax.nn.relu,
    "gelu": jax.nn.gelu,
    "tanh": jax.nn.tanh,
    "silu": jax.nn.silu,
    "swish": jax.nn.swish,
    "elu": jax.nn.elu,
    "selu": jax.nn.selu,
    "sigmoid": jax.nn.sigmoid,
    "softplus": jax.nn.softplus,
    "leaky_relu": jax.nn.leaky_relu,
    "mish": jax.nn.mish,
    "identity": lambda x: x,
}
_INFERRED = ("num_spatial_dims", "in_channels", "key")
_ACTIVATION_ARGS = ("activation", "final_activation")
_MAY_BE_ZERO = ("depth", "num_levels")  # every other integer argument counts channels, blocks, modes or taps
_UNETS = ("ClassicUNet", "ModernUNet")


def _arch_parameters(name: str) -> dict[str, inspect.Parameter]:
    params = inspect.signature(getattr(pdeqx.arch, name).__init__).parameters
    return {k: p for k, p in params.items() if k != "self" and k not in _INFERRED}


def check_model(name: str, options: Mapping[str, Any]) -> None:
    """Raise :class:`SpecError` unless ``name(**options)`` names a buildable model."""
    if is_import_path(name):
        return
    if name not in ARCHITECTURES:
        raise SpecError(
            f"`model.name`: unknown architecture {name!r}{did_you_mean(name, ARCHITECTURES)}; "
            f"choose one of {', '.join(ARCHITECTURES)} "
            f'or give a factory as "package.module:function"'
        )
    params = _arch_parameters(name)
    for key, value in options.items():
        if key not in params:
            if key in _INFERRED:
                raise SpecError(f"`model.{key}`: inferred from the problem's arrays; remove it from the spec")
            raise SpecError(
                f"`model.{key}`: not an argument of pdequinox.arch.{name}{did_you_mean(key, params)}; "
                f"allowed: {', '.join(params)}"
            )
        if key in _ACTIVATION_ARGS:
            if value not in ACTIVATIONS:
                raise SpecError(f"`model.{key}`: unknown activation {value!r}; choose one of {', '.join(ACTIVATIONS)}")
            continue
        allowed = _allowed(key, params[key].annotation, value)
        if allowed:
            raise SpecError(f"`model.{key}`: got {value!r}; pdequinox.arch.{name} takes {allowed}")
    if name == "MLP" and "num_points" in options:
        raise SpecError("`model.num_points`: inferred from the problem's arrays; remove it from the spec")
    multipliers = options.get("channel_multipliers")
    levels = options.get("num_levels", params["num_levels"].default if "num_levels" in params else None)
    if multipliers is not None and len(multipliers) != levels:
        raise SpecError(
            f"`model.channel_multipliers`: got {multipliers!r}; {name} needs one per level (num_levels = {levels})"
        )


def _allowed(key: str, annotation: Any, value: Any) -> str:
    """What a pdequinox argument annotated ``annotation`` takes, if ``value`` is not that ("" if it is)."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in args:
        if value is None:
            return ""
        need = _allowed(key, next(a for a in args if a is not type(None)), value)
        return need and f"None or {need}"
    if annotation is bool:
        return "" if isinstance(value, bool) else "true or false"
    if annotation is int:
        low = 0 if key in _MAY_BE_ZERO else 1
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= low
        return "" if ok else f"an integer >= {low}"
    if typing.get_origin(annotation) is typing.Literal:
        return "" if value in args else f"one of {', '.join(map(repr, args))}"
    if typing.get_origin(annotation) is tuple:
        ok = isinstance(value, list) and value and all(_allowed(key, int, v) == "" for v in value)
        return "" if ok else "a non-empty list of integers >= 1"
    return ""


def build_model(
    name: str, options: Mapping[str, Any], sample_shape: tuple[int, ...], out_channels: int, *, key
) -> eqx.Module:
    """Build one model for inputs of ``sample_shape = (channels, *spatial)`` with ``out_channels``
    outputs, unless the options give ``out_channels`` (a classifier's number of classes).

    ```python
    net = build_model("ConvNet", {"depth": 2}, (1, 48), 1, key=jax.random.key(0))
    ```
    """
    kwargs = {k: ACTIVATIONS[v] if k in _ACTIVATION_ARGS else v for k, v in options.items()}
    if is_import_path(name):
        factory = import_object(name, "model.name")
        return factory(**kwargs, key=key)
    out_channels = kwargs.pop("out_channels", out_channels)
    num_spatial_dims = len(sample_shape) - 1
    if name == "MLP":
        kwargs["num_points"] = sample_shape[1]
    for tup in ("dilation_rates", "channel_multipliers"):
        if isinstance(kwargs.get(tup), list):
            kwargs[tup] = tuple(kwargs[tup])
    arch = getattr(pdeqx.arch, name)
    return arch(num_spatial_dims, sample_shape[0], out_channels, **kwargs, key=key)


def model_template(
    name: str, options: Mapping[str, Any], sample_shape: tuple[int, ...], out_channels: int
) -> eqx.Module:
    """The model with ``jax.ShapeDtypeStruct`` leaves in place of arrays (``eqx.filter_eval_shape``:
    nothing is computed), checked to fit the data: it builds, is an ``eqx.Module``, and maps one
    input of ``sample_shape`` to one target, ``(out_channels, *spatial)`` (``out_channels`` of the
    options where they give it: a classifier's number of classes). Every failure is a
    :class:`SpecError` naming the model field.

    ```python
    model_template("ConvNet", {"depth": 2}, (1, 48), 1).lifting   # shapes only
    ```
    """
    _check_grid(name, options, tuple(sample_shape))
    what = f"{name}({', '.join(f'{k}={v!r}' for k, v in options.items())})"
    try:
        model = eqx.filter_eval_shape(
            build_model, name, options, tuple(sample_shape), out_channels, key=jax.random.key(0)
        )
    except SpecError:
        raise
    except Exception as e:  # a model or factory that cannot be built raises anything
        raise SpecError(
            f"`model`: {what} cannot be built for inputs of shape {tuple(sample_shape)} with "
            f"{out_channels} output channel(s): {_first_line(e)}"
        ) from None
    if not isinstance(model, eqx.Module):
        raise SpecError(
            f"`model.name`: {name!r} returned {type(model).__name__}, not an equinox.Module; a model "
            f"factory must return an eqx.Module that maps one sample to one target"
        )
    try:
        out = eqx.filter_eval_shape(lambda m, x: m(x), model, jax.ShapeDtypeStruct(tuple(sample_shape), jnp.float32))
    except Exception as e:
        raise SpecError(
            f"`model`: {what} cannot be applied to one input of shape {tuple(sample_shape)}: {_first_line(e)}"
        ) from None
    channels = options.get("out_channels", out_channels)  # given: a classifier's classes
    want = (channels, *sample_shape[1:])
    if getattr(out, "shape", None) != want:
        hint = " (a factory must build its model for the problem's channels)" if is_import_path(name) else ""
        target = (
            f"model.out_channels is {channels}, so it must give {want}"
            if "out_channels" in options
            else f"the problem's targets have shape {want}{hint}"
        )
        raise SpecError(
            f"`model`: {what} maps one input of shape {tuple(sample_shape)} to "
            f"{getattr(out, 'shape', type(out).__name__)}; {target}"
        )
    return model


def _check_grid(name: str, options: Mapping[str, Any], sample_shape: tuple[int, ...]) -> None:
    """Architectures whose arguments bound the grid they fit: U-Nets halve it, FNOs keep modes of it."""
    spatial = sample_shape[1:]
    grid = " x ".join(map(str, spatial))
    if name in _UNETS and spatial:
        levels = options.get("num_levels", _arch_parameters(name)["num_levels"].default)
        if any(s % 2**levels for s in spatial):
            fits = min((s & -s).bit_length() - 1 for s in spatial)  # times every size halves evenly
            raise SpecError(
                f"`model.num_levels`: got {levels}; {name} halves the grid {levels} time(s), so every "
                f"spatial size of the inputs ({grid} points) must be divisible by 2**{levels} = {2**levels}; "
                f"use num_levels <= {fits}"
            )
    if name == "ClassicFNO" and spatial:
        modes = options.get("num_modes", _arch_parameters(name)["num_modes"].default)
        most = min([*spatial[:-1], spatial[-1] // 2 + 1])
        if modes > most:
            raise SpecError(
                f"`model.num_modes`: got {modes}; on a grid of {grid} points ClassicFNO keeps at most "
                f"{most} Fourier modes (the last axis has points // 2 + 1, the others as many as points)"
            )


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")
