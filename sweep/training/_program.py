"""The compiled programs of a block: initialisation and one chunk of training epochs.

One program per *program structure*: the model spec, the optimizer without its array
hyperparameters, the batch size and the data shapes (:func:`program_key`). Hyperparameters
such as the learning rate are program inputs, so blocks with other values reuse it. Every
member runs the same per-member code: ``num_epochs`` epochs of ``lax.scan`` over shuffled
minibatches, the shuffle of epoch ``e`` drawn from ``fold_in(shuffle_key, e)`` (of the one-step
pairs, or with ``Training(unroll=K > 1)`` of the windows of ``K + 1`` states of the training
trajectories, each predicted ``K`` steps autoregressively by ``lax.scan``); at the end of a
chunk every member is evaluated on the validation and test sets, and with
``Training(rollout_steps=T)`` rolled out ``T`` steps (``lax.scan``) from every validation and
test trajectory, a minibatch of trajectories at a time. How members are laid out is the
block's layout:

- ``"map"`` (CPU): members split into equal parts over the host devices with ``shard_map``,
  each device running its part one member after another with ``lax.map``; the state goes in
  and comes out split over the devices, the same placement every call. A member's arithmetic
  is then the same whatever block it is in: results are bit-identical on CPU.
- ``"vmap"`` (GPU): members vectorised with ``vmap``; equal within float tolerance.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from jaxtyping import Array, Bool, Float, Int, PyTree, UInt32

from .._caches import cached
from .._canonical import canonical_json
from ..metrics import check_on_sample, objective, rollout_objective
from ..models import batched_forward, build_model, model_template
from ..optim import make_optimizer
from ..problems import Dataset, pde_stepper
from ..spec import SweepSpec
from ._correction import corrected
from ._layout import members_mesh
from ._member import Program, member_chunk

PROGRAMS = 8  # compiled programs (and initialisers) kept per process: a reused trial worker's last structures


class TrainState(NamedTuple):
    """Everything a block needs to continue training; every leaf has a leading member axis.

    Attributes:
        params: The members' parameters.
        opt_state: Their optimizer states.
        epoch: Epochs trained, per member.
        diverged: Whether each member diverged (it then stops updating).
        shuffle_key: Each member's shuffle key; epoch ``e`` shuffles with ``fold_in(key, e)``.
        hparams: Each member's optimizer hyperparameters (program inputs).
    """

    params: PyTree
    opt_state: PyTree
    epoch: Int[Array, " m"]
    diverged: Bool[Array, " m"]
    shuffle_key: UInt32[Array, "m 2"]
    hparams: dict[str, Float[Array, " m"]]


class Shapes(NamedTuple):
    """All a program needs to know of the data (hashable: programs are cached by it)."""

    sample_shape: tuple[int, ...]  # one input: (channels, *spatial)
    target_shape: tuple[int, ...]  # one target: any shape, () for one number or class label
    num_train: int
    target_dtype: str = "float32"  # "int32": integer targets (class labels)
    units: tuple | None = None  # ((shift...), (scale...)) per channel of normalised data: metrics in physical units
    history: int = 1  # states one input stacks as channels (rollouts keep a window of them)

    @classmethod
    def of(cls, value: Sequence[Any]) -> Shapes:
        """Shapes from their stored form (lists), including a block of an earlier seed-sweep, which
        stored ``(sample_shape, out_channels, num_train)``: targets ``(out_channels, *spatial)``."""
        sample, target, num_train, *rest = value
        target = (target, *sample[1:]) if isinstance(target, int) else target
        units = rest[1] if len(rest) > 1 else None
        units = None if units is None else tuple(tuple(float(v) for v in part) for part in units)
        history = int(rest[2]) if len(rest) > 2 else 1
        return cls(tuple(sample), tuple(target), int(num_train), *rest[:1], units=units, history=history)

    def stored(self) -> list:
        """The JSON form :meth:`of` reads back (units and history only where the data have them,
        so that other blocks store what they always stored)."""
        stored = [list(self.sample_shape), list(self.target_shape), self.num_train, self.target_dtype]
        units = None if self.units is None else [list(part) for part in self.units]
        return stored + ([units] if units or self.history != 1 else []) + ([self.history] if self.history != 1 else [])


def data_shapes(data: Dataset) -> Shapes:
    """:class:`Shapes` of ``data``: all a program needs to know of it."""
    dtype = "int32" if data.train.y.dtype.kind == "i" else "float32"
    norm = data.normalization
    units = None if norm is None else (tuple(map(float, norm.shift)), tuple(map(float, norm.scale)))
    return Shapes(tuple(data.sample_shape), tuple(data.target_shape), data.num_train, dtype, units, data.history)


def program_key(spec: SweepSpec, hparam_names: Sequence[str]) -> str:
    """Canonical text of what one compiled program depends on (besides the data shapes)."""
    optimizer = {k: v for k, v in spec.optimizer.to_dict().items() if k not in hparam_names}
    t = spec.training
    return canonical_json(
        {
            "model": spec.model.to_dict(),
            "optimizer": optimizer,
            "batch_size": t.batch_size,
            "loss": t.loss,
            "metrics": list(t.metrics),
            "unroll": t.unroll,
            "rollout_steps": t.rollout_steps,
            "rollout_metrics": list(t.rollout_metrics),
            "cut": t.cut,
            "noise": t.noise,
        }
        | _stepper_key(spec)
    )


def _stepper_key(spec: SweepSpec) -> dict[str, Any]:
    """What of the problem a program depends on: with ``diverted`` or ``correct`` its exponax
    stepper (the problem itself); nothing otherwise, so that other programs stay shared."""
    t = spec.training
    if not t.uses_stepper:
        return {}
    key: dict[str, Any] = {"problem": spec.problem.to_dict(), "diverted": t.diverted}
    return key | ({"correct": t.correct, "coarse_proportion": t.coarse_proportion} if t.correct else {})


def program_data(data: Dataset, unrolled: bool, rollout_steps: int) -> Dataset:
    """What of ``data`` a block's program reads: the training pairs (or, ``unrolled`` (``unroll > 1``),
    the training trajectories instead), the validation and test pairs, and with ``rollout_steps=T``
    the first ``T + h`` states of the validation and test trajectories (``h``: the states an input
    stacks, ``data.history``); nothing else goes to a device."""

    def states(traj):
        return None if traj is None or not rollout_steps else traj[:, : rollout_steps + data.history]

    train = type(data.train)(data.train.x[:0], data.train.y[:0]) if unrolled else data.train
    return data._replace(
        train=train,
        train_traj=data.train_traj if unrolled else None,
        val_traj=states(data.val_traj),
        test_traj=states(data.test_traj),
        normalization=None,  # applied already: the program sees the normalised fields
        origin=None,  # the files read already: the program sees arrays
    )


def _options(part: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in part.items() if k != "name"}


@cached()
def template(name: str, options: str, sample_shape: tuple, target_shape: tuple) -> eqx.Module:
    """A model with shapes in place of arrays (its structure, built without computing: building
    real weights eagerly compiles every little initialiser op, ~0.5 s for a ConvNet), checked to
    build and apply to one input (:func:`sweep.models.model_template`)."""
    return model_template(name, json.loads(options), sample_shape, target_shape)


def _template(model_spec: Mapping[str, Any], shapes: tuple) -> eqx.Module:
    return template(model_spec["name"], canonical_json(_options(model_spec)), shapes[0], shapes[1])


def static_part(model_spec: Mapping[str, Any], shapes: tuple) -> PyTree:
    """The non-array part of a model (shared by every member)."""
    return eqx.partition(_template(model_spec, shapes), eqx.is_array)[1]


def prediction(model_spec: Mapping[str, Any], shapes: tuple) -> jax.ShapeDtypeStruct:
    """Shape and dtype of the model's output on one sample (nothing computed)."""
    model = _template(model_spec, shapes)
    return eqx.filter_eval_shape(lambda m, x: m(x), model, jax.ShapeDtypeStruct(shapes[0], jnp.float32))


@cached(PROGRAMS)
def checked_objective(structure: str, shapes: tuple):
    """``(loss and metrics, rollout metrics)`` of a program structure (each ``(name, field, Metric)``,
    see :func:`sweep.metrics.objective`), imported and checked to give a scalar on one sample."""
    struct = json.loads(structure)
    shapes = Shapes.of(shapes)
    target = jax.ShapeDtypeStruct(shapes.target_shape, jnp.dtype(shapes.target_dtype))
    rollout = struct["rollout_metrics"] if struct["rollout_steps"] else ()
    check_on_sample(struct["loss"], struct["metrics"], prediction(struct["model"], shapes), target, rollout)
    return objective(struct["loss"], struct["metrics"]), rollout_objective(rollout)


@cached(PROGRAMS)
def initialiser(structure: str, shapes: tuple):
    """Jitted ``(init keys, hyperparameters) -> (params, optimizer state)`` over members."""
    struct = json.loads(structure)
    model_spec, opt_spec = struct["model"], struct["optimizer"]
    sample_shape, target_shape = shapes[0], shapes[1]

    def one(key, hp):
        model = build_model(
            model_spec["name"], _options(model_spec), sample_shape, target_shape, key=jax.random.wrap_key_data(key)
        )
        params = eqx.filter(model, eqx.is_array)
        return params, make_optimizer(opt_spec["name"], _options(opt_spec), hp).init(params)

    return jax.jit(jax.vmap(one))


@cached(PROGRAMS)
def describe(structure: str, shapes: tuple) -> Program:
    """The :class:`~._member.Program` of a program structure (:func:`program_key`) and data shapes,
    its configuration decoded (and its loss and metrics checked) once."""
    evaluated, rollout = checked_objective(structure, shapes)
    struct = json.loads(structure)
    model_spec, opt_spec = struct["model"], struct["optimizer"]
    forward, reference = batched_forward(_template(model_spec, shapes)), None
    if "problem" in struct:
        problem = dict(struct["problem"])
        name = problem.pop("name")
        if struct["diverted"]:
            reference = jax.vmap(pde_stepper(name, problem))
        if struct.get("correct"):
            forward = corrected(forward, pde_stepper(name, problem, struct["coarse_proportion"]), struct["correct"])
    return Program(
        forward=forward,
        static=static_part(model_spec, shapes),
        loss=evaluated[0][2],
        evaluated=tuple(evaluated),
        rollout_metrics=tuple(rollout),
        optimizer=(opt_spec["name"], _options(opt_spec)),
        batch_size=struct["batch_size"],
        num_train=shapes[2],
        unroll=struct["unroll"],
        rollout_steps=struct["rollout_steps"],
        cut=struct.get("cut", False),
        noise=struct.get("noise", 0.0),
        units=Shapes.of(shapes).units,
        history=Shapes.of(shapes).history,
        reference=reference,
    )


def members_program(run: Callable, layout: str, num_devices: int, static: bool = False):
    """The jitted ``(state, data[, static]) -> (state, outputs)`` that runs
    ``run(carry, hparams, data[, static]) -> (carry, outputs)`` for every member of a
    :class:`TrainState` (``carry``: ``(params, opt_state, epoch, diverged, shuffle_key)``), laid
    out as ``layout`` says: ``vmap``, or ``shard_map`` over ``num_devices`` CPU devices with
    ``lax.map`` on each (the state split over them, ``data`` whole on each). ``static``: a third,
    static argument (compiled once per value)."""

    def chunk(state: TrainState, data, *extra):
        carry = (state.params, state.opt_state, state.epoch, state.diverged, state.shuffle_key)

        def member(c, h, d):
            return run(c, h, d, *extra)

        if layout == "vmap":
            new, outputs = jax.vmap(member, in_axes=(0, 0, None))(carry, state.hparams, data)
            return TrainState(*new, hparams=state.hparams), outputs
        per_device = jax.shard_map(
            lambda c, h, d: jax.lax.map(lambda a: member(a[0], a[1], d), (c, h)),
            mesh=members_mesh(num_devices),
            in_specs=(P("m"), P("m"), P()),
            out_specs=P("m"),
            check_vma=False,
        )
        new, outputs = per_device(carry, state.hparams, data)
        return TrainState(*new, hparams=state.hparams), outputs

    argnums = (2,) if static else ()
    if layout == "vmap":
        return jax.jit(chunk, static_argnums=argnums)
    split, whole = NamedSharding(members_mesh(num_devices), P("m")), NamedSharding(members_mesh(num_devices), P())
    return jax.jit(chunk, static_argnums=argnums, in_shardings=(split, whole), out_shardings=split)


@cached(PROGRAMS)
def chunk_program(structure: str, shapes: tuple, layout: str, num_devices: int):
    """The jitted ``(state, data, num_epochs) -> (state, evaluation)`` of one program structure
    (:func:`program_key`); cached so that blocks and trials share compiled code. ``data``: the
    block's :func:`program_data`. Every member runs :func:`~._member.member_chunk`, laid out by
    :func:`members_program`.

    ``evaluation`` per member: ``{"train_loss": mean loss of the last epoch, "val": {"loss": ...,
    <metric>: ...}, "test": {...}}`` after the chunk; a split without samples is left out. With
    rollouts also ``"val_rollout"`` / ``"test_rollout"``: ``{<metric>: [T] curve}`` (entry
    ``t - 1``: the metric after ``t`` steps, averaged over the split's trajectories).
    """
    program = describe(structure, shapes)

    def run(carry, hp, data, num_epochs: int):
        return member_chunk(program, carry, hp, data, num_epochs, gather=layout == "vmap")

    return members_program(run, layout, num_devices, static=True)
