"""pdequinox architectures by name, activations by name, and user factories by import path."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import equinox as eqx
import jax
import pdequinox as pdeqx

from .._errors import SpecError
from .._import_path import import_object, is_import_path

ARCHITECTURES = (
    "ConvNet", "ClassicResNet", "ModernResNet", "DilatedResNet",
    "ClassicUNet", "ModernUNet", "ClassicFNO", "MLP",
)
ACTIVATIONS = {
    "relu": jax.nn.relu, "gelu": jax.nn.gelu, "tanh": jax.nn.tanh, "silu": jax.nn.silu,
    "swish": jax.nn.swish, "elu": jax.nn.elu, "selu": jax.nn.selu, "sigmoid": jax.nn.sigmoid,
    "softplus": jax.nn.softplus, "leaky_relu": jax.nn.leaky_relu, "mish": jax.nn.mish,
    "identity": lambda x: x,
}
_INFERRED = ("num_spatial_dims", "in_channels", "key")
_ACTIVATION_ARGS = ("activation", "final_activation")


def _arch_parameters(name: str) -> dict[str, inspect.Parameter]:
    params = inspect.signature(getattr(pdeqx.arch, name).__init__).parameters
    return {k: p for k, p in params.items() if k != "self" and k not in _INFERRED}


def check_model(name: str, options: Mapping[str, Any]) -> None:
    """Raise :class:`SpecError` unless ``name(**options)`` names a buildable model."""
    if is_import_path(name):
        return
    if name not in ARCHITECTURES:
        raise SpecError(
            f"`model.name`: unknown architecture {name!r}; choose one of {', '.join(ARCHITECTURES)} "
            f"or give a factory as \"package.module:function\""
        )
    params = _arch_parameters(name)
    for key, value in options.items():
        if key not in params:
            if key in _INFERRED:
                raise SpecError(f"`model.{key}`: inferred from the problem's arrays; remove it from the spec")
            raise SpecError(f"`model.{key}`: not an argument of pdequinox.arch.{name}; allowed: {', '.join(params)}")
        if key == "out_channels" and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise SpecError(f"`model.out_channels`: got {value!r}; must be an integer >= 1 (default: the targets' channels)")
        if key in _ACTIVATION_ARGS and value not in ACTIVATIONS:
            raise SpecError(f"`model.{key}`: unknown activation {value!r}; choose one of {', '.join(ACTIVATIONS)}")
    if name == "MLP" and "num_points" in options:
        raise SpecError("`model.num_points`: inferred from the problem's arrays; remove it from the spec")


def build_model(name: str, options: Mapping[str, Any], sample_shape: tuple[int, ...], out_channels: int, *, key) -> eqx.Module:
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
