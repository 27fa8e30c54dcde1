"""pdequinox architectures by name, ``ConvEncoder`` (a field to a vector), activations by name,
and user factories by import path."""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import pdequinox as pdeqx
from jaxtyping import PRNGKeyArray

from .._errors import SpecError, did_you_mean
from .._import_path import import_object, is_import_path
from ._encoder import ConvEncoder

ENCODERS = {"ConvEncoder": ConvEncoder}  # built-in models whose outputs need not keep the inputs' grid
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
MODELS = (*ARCHITECTURES, *ENCODERS)  # every built-in model a spec may name
ACTIVATIONS: dict[str, Callable[[Any], Any]] = {
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
    params = inspect.signature(_arch(name).__init__, eval_str=name in ENCODERS).parameters
    extra = (
        {"num_classes": inspect.Parameter("num_classes", inspect.Parameter.KEYWORD_ONLY)} if name in ENCODERS else {}
    )
    inferred = (*_INFERRED, "grid") if name in ENCODERS else _INFERRED
    return {k: p for k, p in params.items() if k != "self" and k not in inferred} | extra


def _arch(name: str) -> type:
    return ENCODERS[name] if name in ENCODERS else getattr(pdeqx.arch, name)


def _arch_name(name: str) -> str:
    return f"sweep.models.{name}" if name in ENCODERS else f"pdequinox.arch.{name}"


def _check_encoder(options: Mapping[str, Any]) -> None:
    """``out_shape`` (a list of integers >= 1, ``[]`` for one number) and ``num_classes`` (an integer
    >= 2: the output is that many logits), not both."""
    shape, classes = options.get("out_shape"), options.get("num_classes")
    if shape is not None and not (
        isinstance(shape, (list, tuple))
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in shape)
    ):
        raise SpecError(
            f"`model.out_shape`: got {shape!r}; give the shape of one output as a list of integers >= 1 "
            f"([] for one number), or leave it out to use the targets' shape"
        )
    if classes is not None and (not isinstance(classes, int) or isinstance(classes, bool) or classes < 2):
        raise SpecError(f"`model.num_classes`: got {classes!r}; must be an integer >= 2 (the number of classes)")
    if shape is not None and classes is not None:
        raise SpecError(
            f"`model.num_classes`: got {classes!r} with out_shape {shape!r}; give one: num_classes for class "
            f"logits (out_shape [num_classes]), out_shape for anything else"
        )


def check_model(name: str, options: Mapping[str, Any]) -> None:
    """Raise :class:`SpecError` unless ``name(**options)`` names a buildable model."""
    if is_import_path(name):
        return
    if name not in MODELS:
        raise SpecError(
            f"`model.name`: unknown architecture {name!r}{did_you_mean(name, MODELS)}; "
            f"choose one of {', '.join(MODELS)} "
            f'or give a factory as "package.module:function"'
        )
    params = _arch_parameters(name)
    for key, value in options.items():
        if key not in params:
            if key in _INFERRED:
                raise SpecError(f"`model.{key}`: inferred from the problem's arrays; remove it from the spec")
            raise SpecError(
                f"`model.{key}`: not an argument of {_arch_name(name)}{did_you_mean(key, params)}; "
                f"allowed: {', '.join(params)}"
            )
        if key in ("out_shape", "num_classes") and name in ENCODERS:
            continue  # checked below
        if key in _ACTIVATION_ARGS:
            if value not in ACTIVATIONS:
                raise SpecError(f"`model.{key}`: unknown activation {value!r}; choose one of {', '.join(ACTIVATIONS)}")
            continue
        allowed = _allowed(key, params[key].annotation, value)
        if allowed:
            raise SpecError(f"`model.{key}`: got {value!r}; {_arch_name(name)} takes {allowed}")
    if name in ENCODERS:
        _check_encoder(options)
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


def _out_shape(name: str, options: Mapping[str, Any], target_shape: tuple[int, ...]) -> tuple[int, ...]:
    """What a built-in model outputs for one sample: an encoder's ``out_shape`` (``num_classes``
    logits, or the targets' shape); a pdequinox architecture's ``(out_channels, *inputs' grid)``,
    its channels those of the options (a classifier's classes) or of the targets."""
    if name in ENCODERS:
        if options.get("num_classes") is not None:
            return (options["num_classes"],)
        return tuple(options["out_shape"]) if options.get("out_shape") is not None else tuple(target_shape)
    return (options.get("out_channels", target_shape[0] if target_shape else 1),)


def _target(sample_shape: tuple[int, ...], target_shape: tuple[int, ...] | int) -> tuple[int, ...]:
    """``target_shape``, or for a number of output channels those channels on the inputs' grid."""
    if isinstance(target_shape, int):
        return (target_shape, *sample_shape[1:])
    return tuple(target_shape)


def build_model(
    name: str,
    options: Mapping[str, Any],
    sample_shape: tuple[int, ...],
    target_shape: tuple[int, ...] | int,
    *,
    key: PRNGKeyArray,
) -> eqx.Module:
    """Build one model for inputs of ``sample_shape = (channels, *spatial)`` and targets of
    ``target_shape``: a pdequinox architecture with the targets' channels (``target_shape[0]``)
    unless the options give ``out_channels`` (a classifier's number of classes); a
    ``ConvEncoder`` with ``out_shape`` the targets' shape unless the options give ``out_shape``
    or ``num_classes``; a factory by import path with its options only (it builds its model for
    the problem itself). An integer ``target_shape`` is a number of output channels on the inputs'
    grid.

    ```python
    net = build_model("ConvNet", {"depth": 2}, (1, 48), (1, 48), key=jax.random.key(0))
    enc = build_model("ConvEncoder", {}, (1, 48), (2,), key=jax.random.key(0))   # (1, 48) -> (2,)
    ```
    """
    kwargs: dict[str, Any] = {k: ACTIVATIONS[v] if k in _ACTIVATION_ARGS else v for k, v in options.items()}
    if is_import_path(name):
        factory = import_object(name, "model.name")
        return factory(**kwargs, key=key)
    target_shape = _target(sample_shape, target_shape)
    num_spatial_dims = len(sample_shape) - 1
    if name in ENCODERS:
        out_shape = _out_shape(name, options, target_shape)
        kwargs = {k: v for k, v in kwargs.items() if k not in ("out_shape", "num_classes")}
        grid = tuple(sample_shape[1:])
        return ENCODERS[name](num_spatial_dims, sample_shape[0], out_shape, **kwargs, grid=grid, key=key)
    out_channels = _out_shape(name, options, target_shape)[0]
    kwargs.pop("out_channels", None)
    if name == "MLP":
        kwargs["num_points"] = sample_shape[1]
    for tup in ("dilation_rates", "channel_multipliers"):
        if isinstance(kwargs.get(tup), list):
            kwargs[tup] = tuple(kwargs[tup])
    arch = getattr(pdeqx.arch, name)
    return arch(num_spatial_dims, sample_shape[0], out_channels, **kwargs, key=key)


def describe_model(name: str, options: Mapping[str, Any]) -> str:
    """``ConvNet(depth=2, ...)``: a model as errors name it."""
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in options.items())})"


def model_template(
    name: str, options: Mapping[str, Any], sample_shape: tuple[int, ...], target_shape: tuple[int, ...] | int
) -> eqx.Module:
    """The model with ``jax.ShapeDtypeStruct`` leaves in place of arrays (``eqx.filter_eval_shape``:
    nothing is computed), checked to build, to be an ``eqx.Module`` and to apply to one input of
    ``sample_shape`` (whether its output fits the targets is :func:`check_output`'s). Every
    failure is a :class:`SpecError` naming the model field.

    ```python
    model_template("ConvNet", {"depth": 2}, (1, 48), (1, 48)).lifting   # shapes only
    ```
    """
    _check_grid(name, options, tuple(sample_shape))
    if is_import_path(name):
        _check_factory_options(name, options)
    target_shape = _target(tuple(sample_shape), target_shape)
    what = describe_model(name, options)
    build = functools.partial(
        eqx.filter_eval_shape, build_model, name, options, tuple(sample_shape), tuple(target_shape)
    )
    try:
        model = build(key=jax.random.key(0))
    except SpecError:
        raise
    except Exception as e:  # a model or factory that cannot be built raises anything
        raise SpecError(
            f"`model`: {what} cannot be built for inputs of shape {tuple(sample_shape)} and targets of "
            f"shape {tuple(target_shape)}: {_first_line(e)}"
        ) from None
    if not isinstance(model, eqx.Module):
        returned = "an array" if isinstance(model, jax.ShapeDtypeStruct) else type(model).__name__
        raise SpecError(
            f"`model.name`: {name!r} returned {returned}, not an equinox.Module; a model "
            f"factory must return an eqx.Module that maps one sample to one target"
        )
    _check_trainable(name, model, build(key=jax.random.key(1)))
    try:
        eqx.filter_eval_shape(lambda m, x: m(x), model, jax.ShapeDtypeStruct(tuple(sample_shape), jnp.float32))
    except Exception as e:
        raise SpecError(
            f"`model`: {what} cannot be applied to one input of shape {tuple(sample_shape)}: {_first_line(e)}"
        ) from None
    return model


def _check_factory_options(name: str, options: Mapping[str, Any]) -> None:
    """Every option a keyword the factory ``name`` takes (unless it takes ``**kwargs``)."""
    try:
        params = inspect.signature(import_object(name, "model.name")).parameters
    except (TypeError, ValueError):  # a callable without a signature: its call says
        return
    allowed = [n for n, p in params.items() if n != "key" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    for key in options:
        if key not in allowed and not any(p.kind == p.VAR_KEYWORD for p in params.values()):
            raise SpecError(
                f"`model.{key}`: not an argument of {name}{did_you_mean(key, allowed)}; allowed: {', '.join(allowed)}"
            )


def _check_trainable(name: str, model: eqx.Module, again: eqx.Module) -> None:
    """Every class of ``model`` is the one a second build (``again``) makes (not one a factory
    defines at each call: two members' models would not stack), and every array of it is trained
    (a real floating one: gradients of integers, or of keys, do not exist)."""
    for made, remade in zip(_modules(model), _modules(again), strict=False):
        if type(made) is not type(remade) and type(made).__qualname__ == type(remade).__qualname__:
            raise SpecError(
                f"`model.name`: {name!r} builds {type(made).__qualname__}, a class it defines at every call, and "
                f"members' models must be of one class: define it once, at module level"
            )
    for path, leaf in jax.tree_util.tree_flatten_with_path(model)[0]:
        if isinstance(leaf, jax.ShapeDtypeStruct) and not jnp.issubdtype(leaf.dtype, jnp.inexact):
            key = jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key)
            raise SpecError(
                f"`model.name`: {name!r} builds a model whose array model{jax.tree_util.keystr(path)} is "
                f"{'a PRNG key' if key else leaf.dtype}; every array of a model is trained, and gradients of "
                f"{'keys' if key else 'integers'} do not exist: keep such values out of its arrays (a tuple in a field "
                f"marked eqx.field(static=True){', of jax.random.key_data' if key else ''}), or make them floating"
            )


def _modules(node: Any) -> list[eqx.Module]:
    """The equinox Modules in ``node``: itself, and those its fields, lists, tuples and dicts hold."""
    if isinstance(node, eqx.Module):
        return [node, *(m for value in vars(node).values() for m in _modules(value))]
    if isinstance(node, (list, tuple)):
        return [m for value in node for m in _modules(value)]
    if isinstance(node, dict):
        return [m for value in node.values() for m in _modules(value)]
    return []


def fits_target(out_shape: tuple[int, ...], target_shape: tuple[int, ...], classes: bool) -> bool:
    """Whether a model's output of ``out_shape`` fits a target of ``target_shape``: the same shape,
    or with ``classes`` (targets are class indices) logits with the classes first: ``(k, *target)``,
    or ``(k, *target[1:])`` for a target ``(1, *spatial)`` of one label channel."""
    if tuple(out_shape) == tuple(target_shape):
        return True
    logits = tuple(out_shape[1:])
    return (
        classes
        and len(out_shape) >= 1
        and (logits == target_shape or target_shape[:1] == (1,) and logits == target_shape[1:])
    )


def check_output(
    name: str,
    options: Mapping[str, Any],
    problem: str,
    sample_shape: tuple[int, ...],
    target_shape: tuple[int, ...],
    out_shape: tuple[int, ...],
    classes: bool,
    logits: bool = False,
) -> None:
    """Raise :class:`SpecError` naming the problem, both shapes and the model unless the model's
    output on one sample (``out_shape``) fits the problem's targets (:func:`fits_target`; ``classes``:
    the loss or a metric takes class indices, or the targets are integers). ``logits``: the loss or
    a metric takes class indices, so an output without a class axis (one number per label) is
    refused too, saying how to ask for logits.

    ```python
    check_output("ConvNet", {}, "heat1d", (1, 16), (1, 16), (1, 16), False)   # fits: returns None
    ```
    """
    sample_shape, target_shape, out_shape = tuple(sample_shape), tuple(target_shape), tuple(out_shape)
    what = describe_model(name, options)
    if logits and out_shape == target_shape and (not target_shape or name in ENCODERS):
        how = "set model.num_classes" if name in ENCODERS else "build it to output (classes, *target_shape)"
        raise SpecError(
            f"`model`: {what} maps one input of shape {sample_shape} to {out_shape}, one number per class label "
            f"of problem {problem!r} (targets of shape {target_shape}); the class-index loss and metrics take "
            f"logits (classes, *target_shape): {how}"
        )
    if fits_target(out_shape, target_shape, classes):
        return
    class_note = " (or class logits (classes, ...) for class-index targets)" if classes else ""
    if is_import_path(name):
        hint = "a factory must build its model for the problem's targets"
    elif name in ENCODERS:
        hint = (
            f"model.num_classes is {options['num_classes']}, so it outputs {out_shape}"
            if options.get("num_classes") is not None
            else f"model.out_shape is {list(options['out_shape'])}; remove it to output the targets' shape"
            if options.get("out_shape") is not None
            else "set model.out_shape or model.num_classes"
        )
    elif len(target_shape) != len(sample_shape) or target_shape[1:] != sample_shape[1:]:
        hint = (
            f"{_arch_name(name)} keeps the inputs' grid; for a vector, a number or a class per sample use "
            f'"ConvEncoder", for another grid a model factory by import path'
        )
    elif "out_channels" in options:
        hint = f"model.out_channels is {options['out_channels']}"
    else:
        hint = "the model's output channels must be the targets'"
    raise SpecError(
        f"`model`: {what} maps one input of shape {sample_shape} to {out_shape}; the targets of problem "
        f"{problem!r} have shape {target_shape}{class_note}: {hint}"
    )


def _check_grid(name: str, options: Mapping[str, Any], sample_shape: tuple[int, ...]) -> None:
    """Architectures whose arguments bound the grid they fit: U-Nets halve it, FNOs keep modes of it;
    and every built-in one needs a grid: inputs ``(channels, *spatial)`` with a spatial axis."""
    spatial = sample_shape[1:]
    grid = " x ".join(map(str, spatial))
    if not is_import_path(name) and len(sample_shape) < 2:
        fix = (
            f"for one channel over {sample_shape[0]} points give x[:, None], of shape (samples, 1, {sample_shape[0]})"
            if sample_shape
            else "give x of shape (samples, channels, *spatial)"
        )
        raise SpecError(
            f"`model.name`: {name} takes samples (channels, *spatial), with at least one spatial axis; the inputs' "
            f"samples have shape {tuple(sample_shape)}, no spatial axis: {fix}"
        )
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
