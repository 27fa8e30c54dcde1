"""The named parts of a spec: ``Problem``, ``Model`` and ``Optimizer`` (a name and its options).

Each checks its options against what it names on construction (the problem kind's signature,
the architecture's, optax's) and raises :class:`SpecError` naming the field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Self

from .._canonical import canonical_json
from .._errors import SpecError
from ..models import check_model
from ..optim import check_optimizer
from ..problems import check_problem
from ._values import plain


class _Named:
    """A frozen ``name`` + keyword options record: ``Part("name", key=value, ...)``."""

    _field = ""
    name: str
    options: dict[str, Any]

    def __init__(self, name: str, /, *positional: Any, **options: Any):
        if positional:
            part = type(self).__name__
            raise SpecError(
                f"`{self._field}`: {part}({name!r}, ...) got {len(positional)} positional value(s) after "
                f"the name; give options as keywords, e.g. {part}({name!r}, **options) or "
                f"{part}({name!r}, key=value)"
            )
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "options", {k: plain(v, f"{self._field}.{k}") for k, v in options.items()})
        self._check()

    def __setattr__(self, key: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {key!r}")

    def __eq__(self, other: Any) -> bool:
        return type(self) is type(other) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(canonical_json(self.to_dict()))

    def __repr__(self) -> str:
        kw = "".join(f", {k}={v!r}" for k, v in self.options.items())
        return f"{type(self).__name__}({self.name!r}{kw})"

    def __getattr__(self, key: str) -> Any:
        options = self.__dict__.get("options", {})
        if key in options:
            return options[key]
        raise AttributeError(key)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, **self.options}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        data = dict(data)
        if "name" not in data:
            raise SpecError(f"`{cls._field}.name`: missing; give the {cls._field} a name")
        return cls(data.pop("name"), **data)

    def replace(self, **changes: Any) -> Self:
        data = self.to_dict() | changes
        return type(self).from_dict(data)

    def _check(self) -> None:
        raise NotImplementedError


class Problem(_Named):
    """The data of a sweep: a kind by name with its options.

    Kinds: ``"heat1d"`` (the heat-equation data of the pdequinox example), ``"exponax:<Stepper>"``
    (trajectories of a PDE in 1D, 2D or 3D, ``num_spatial_dims=``; the ``[pde]`` extra; APEBench's
    scenario names are aliases: ``"apebench:phy_adv_2d"``), ``"arrays"`` (with ``path=`` to an ``.npz`` or
    Parquet file) or ``"package.module:function"`` returning the arrays. Every kind takes
    ``val_fraction`` and ``data_seed``. Options and defaults: docs, Reference > Spec fields.

    Args:
        name: The kind.
        **options: Its options, checked against the kind's signature.

    Raises:
        SpecError: An unknown kind or option, or a value of the wrong type.

    Examples:
        >>> import sweep
        >>> sweep.Problem("heat1d", num_points=48, num_samples=1000)
        Problem('heat1d', num_points=48, num_samples=1000)
        >>> sweep.Problem("heat1d", num_points=48).num_points
        48
    """

    _field = "problem"

    def _check(self):
        check_problem(self.name, self.options)


class Model(_Named):
    """The network of every member: a pdequinox architecture by name with its keyword arguments, or
    a factory ``"package.module:factory"`` called with the options and ``key=``.

    Spatial dimensions and channels are inferred from the data; the model is built for the data's
    shapes before any trial starts.

    Args:
        name: ``ConvNet``, ``ClassicResNet``, ``ModernResNet``, ``DilatedResNet``, ``ClassicUNet``,
            ``ModernUNet``, ``ClassicFNO``, ``MLP``, or an import path.
        **options: The architecture's keyword arguments (activations by name).

    Raises:
        SpecError: An unknown architecture or option, or a value of the wrong type.

    Examples:
        >>> import sweep
        >>> sweep.Model("ConvNet", hidden_channels=16, depth=6, activation="relu")
        Model('ConvNet', hidden_channels=16, depth=6, activation='relu')
    """

    _field = "model"

    def _check(self):
        check_model(self.name, self.options)


class Optimizer(_Named):
    """An optax optimizer by name with its keyword arguments (``learning_rate`` required).

    ``schedule={"name": "cosine_decay_schedule", "decay_steps": 1000}`` multiplies the learning
    rate by an optax schedule (built with ``init_value=1.0``) of the step count.

    Args:
        name: An optax optimizer (``"adam"``, ``"adamw"``, ``"sgd"``, ...).
        **options: Its keyword arguments, each checked against the optax signature.

    Raises:
        SpecError: An unknown optimizer or option, or a value of the wrong type.

    Examples:
        >>> import sweep
        >>> sweep.Optimizer("adam", learning_rate=3e-4, b1=0.9).learning_rate
        0.0003
        >>> try:
        ...     sweep.Optimizer("adam", learning_rate=3e-4, b1="0.9")
        ... except sweep.SpecError as e:
        ...     print(e)
        `optimizer.b1`: got '0.9' (str); optax.adam takes a number here (default 0.9)
    """

    _field = "optimizer"

    def _check(self):
        check_optimizer(self.name, self.options)
