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
test trajectory, ``EVAL_CHUNK`` trajectories at a time. How members are laid out is the
block's layout:

- ``"map"`` (CPU): members split into equal parts over the host devices with ``shard_map``,
  each device running its part one member after another with ``lax.map``; the state goes in
  and comes out split over the devices, the same placement every call. A member's arithmetic
  is then the same whatever block it is in: results are bit-identical on CPU.
- ``"vmap"`` (GPU): members vectorised with ``vmap``; equal within float tolerance.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from jaxtyping import Array, Bool, Float, Int, PyTree, UInt32

from .._caches import cached
from .._canonical import canonical_json
from ..metrics import batch_mean, check_on_sample, objective, rollout_objective
from ..models import batched_forward, build_model, model_template
from ..optim import make_optimizer
from ..problems import EVALUATED, Dataset
from ..spec import SweepSpec

LAYOUTS = ("map", "vmap")
EVAL_CHUNK = 128  # samples (or trajectories) per forward pass when evaluating a validation or test set
PROGRAMS = 8  # compiled programs (and initialisers) kept per process: a reused trial worker's last structures


class TrainState(NamedTuple):
    """Everything a block needs to continue training; every leaf has a leading member axis."""

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

    @classmethod
    def of(cls, value: Sequence[Any]) -> Shapes:
        """Shapes from their stored form (lists), including a block of an earlier seed-sweep, which
        stored ``(sample_shape, out_channels, num_train)``: targets ``(out_channels, *spatial)``."""
        sample, target, num_train, *dtype = value
        target = (target, *sample[1:]) if isinstance(target, int) else target
        return cls(tuple(sample), tuple(target), int(num_train), *dtype)

    def stored(self) -> list:
        """The JSON form :meth:`of` reads back."""
        return [list(self.sample_shape), list(self.target_shape), self.num_train, self.target_dtype]


def data_shapes(data: Dataset) -> Shapes:
    """:class:`Shapes` of ``data``: all a program needs to know of it."""
    dtype = "int32" if data.train.y.dtype.kind == "i" else "float32"
    return Shapes(tuple(data.sample_shape), tuple(data.target_shape), data.num_train, dtype)


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
        }
    )


def program_data(data: Dataset, unrolled: bool, rollout_steps: int) -> Dataset:
    """What of ``data`` a block's program reads: the training pairs (or, ``unrolled`` (``unroll > 1``),
    the training trajectories instead), the validation and test pairs, and with ``rollout_steps=T``
    the first ``T + 1`` states of the validation and test trajectories; nothing else goes to a device."""

    def states(traj):
        return None if traj is None or not rollout_steps else traj[:, : rollout_steps + 1]

    train = type(data.train)(data.train.x[:0], data.train.y[:0]) if unrolled else data.train
    return data._replace(
        train=train,
        train_traj=data.train_traj if unrolled else None,
        val_traj=states(data.val_traj),
        test_traj=states(data.test_traj),
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


def mesh(num_devices: int) -> Mesh:
    return Mesh(np.asarray(jax.devices("cpu")[:num_devices]), ("m",))


def _all_finite(tree) -> Bool[Array, ""]:
    leaves = jax.tree_util.tree_leaves(tree)
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))


def _select(pred, on_true, on_false):
    return jax.tree_util.tree_map(lambda a, b: jnp.where(pred, a, b), on_true, on_false)


@cached(PROGRAMS)
def chunk_program(structure: str, shapes: tuple, layout: str, num_devices: int):
    """The jitted ``(state, data, num_epochs) -> (state, evaluation)`` of one program structure
    (:func:`program_key`); cached so that blocks and trials share compiled code. ``data``: the
    block's :func:`program_data`.

    ``evaluation`` per member: ``{"train_loss": mean loss of the last epoch, "val": {"loss": ...,
    <metric>: ...}, "test": {...}}`` after the chunk; a split without samples is left out. With
    rollouts also ``"val_rollout"`` / ``"test_rollout"``: ``{<metric>: [T] curve}`` (entry
    ``t - 1``: the metric after ``t`` steps, averaged over the split's trajectories).
    """
    evaluated, rollout_metrics = checked_objective(structure, shapes)
    loss = evaluated[0][2]
    struct = json.loads(structure)
    model_spec, opt_spec, batch_size = struct["model"], struct["optimizer"], struct["batch_size"]
    unroll, rollout_steps = struct["unroll"], struct["rollout_steps"]
    num_train = shapes[2]
    opt_name, opt_options = opt_spec["name"], _options(opt_spec)
    forward = batched_forward(_template(model_spec, shapes))
    num_batches = num_train // batch_size
    static = static_part(model_spec, shapes)

    def loss_fn(params, x, y):
        return batch_mean(loss, forward(eqx.combine(params, static), x), y)

    def unrolled_loss_fn(params, window):
        """Mean over the ``unroll`` steps of the loss of the autoregressive prediction of ``window[:, k]``."""
        model = eqx.combine(params, static)

        def one_step(state, target):
            pred = forward(model, state)
            return pred, batch_mean(loss, pred, target)

        # unrolled (K copies of the step in the program): XLA then fuses across steps, which a
        # rolled loop of a few iterations keeps it from (1.2-1.4x the cost of K one-step passes)
        _, losses = jax.lax.scan(one_step, window[:, 0], jnp.swapaxes(window[:, 1:], 0, 1), unroll=True)
        return jnp.mean(losses)

    def predict(params, x):
        """The model on every sample of ``x``, ``EVAL_CHUNK`` samples at a time (``lax.map``; the
        last part padded): the activations of a whole test set at once are slower (memory-bound)
        and can exceed memory."""
        model, n = eqx.combine(params, static), x.shape[0]
        if n <= EVAL_CHUNK:
            return forward(model, x)
        parts = -(-n // EVAL_CHUNK)
        padded = jnp.concatenate([x, jnp.zeros((parts * EVAL_CHUNK - n, *x.shape[1:]), x.dtype)])
        pred = jax.lax.map(lambda part: forward(model, part), padded.reshape(parts, EVAL_CHUNK, *x.shape[1:]))
        return pred.reshape(parts * EVAL_CHUNK, *pred.shape[2:])[:n]

    def evaluate(params, split):
        # Barriers keep the evaluation one fused unit whatever surrounds it: with one member per
        # device XLA inlines the member loop, and without them would fuse (and round) exp/log of
        # e.g. cross_entropy differently than in a block of several members per device.
        pred, y = jax.lax.optimization_barrier((predict(params, split.x), split.y))
        return jax.lax.optimization_barrier({name: batch_mean(metric, pred, y) for name, _, metric in evaluated})

    def rollout(params, traj):
        """``{metric: [T]}``: every trajectory's first state rolled out ``T`` steps, at most
        ``EVAL_CHUNK`` trajectories at a time (in equal parts, the last padded and masked), the
        metrics averaged over the trajectories."""
        model = eqx.combine(params, static)
        n = traj.shape[0]
        parts = -(-n // EVAL_CHUNK)
        per = -(-n // parts)  # 300 trajectories: three parts of 100, none padded
        padded = jnp.concatenate([traj, jnp.zeros((parts * per - n, *traj.shape[1:]), traj.dtype)])
        padded = padded.reshape(parts, per, *traj.shape[1:])
        real = (jnp.arange(parts * per) < n).reshape(parts, per)

        def part(sums, inputs):
            states, keep = inputs

            def one_step(state, target):
                pred = forward(model, state)
                return pred, jnp.stack(
                    [jax.vmap(m.per_sample)(pred, target).astype(jnp.float32) for _, _, m in rollout_metrics]
                )

            _, values = jax.lax.scan(one_step, states[:, 0], jnp.swapaxes(states[:, 1:], 0, 1))  # [T, metrics, per]
            return sums + jnp.sum(jnp.where(keep, values, 0.0), axis=-1), None

        params, padded = jax.lax.optimization_barrier((params, padded))
        sums, _ = jax.lax.scan(part, jnp.zeros((rollout_steps, len(rollout_metrics)), jnp.float32), (padded, real))
        return jax.lax.optimization_barrier({name: sums[:, i] / n for i, (name, _, _) in enumerate(rollout_metrics)})

    def member_chunk(carry, hp, data: Dataset, num_epochs):
        params, opt_state, epoch, diverged, skey = carry
        opt = make_optimizer(opt_name, opt_options, hp)

        def step(c, batch, objective):
            params, opt_state, diverged = c
            loss, grads = jax.value_and_grad(objective)(params, *batch)
            updates, new_opt_state = opt.update(grads, opt_state, params)
            new_params = eqx.apply_updates(params, updates)
            finite = jnp.isfinite(loss) & _all_finite(new_params)
            keep = diverged | ~finite
            params = _select(keep, params, new_params)
            opt_state = _select(keep, opt_state, new_opt_state)
            return (params, opt_state, keep), loss

        def order_of(epoch, count, batches):
            key = jax.random.fold_in(jax.random.wrap_key_data(skey), epoch)
            return jax.random.permutation(key, count)[: batches * batch_size].reshape(batches, batch_size)

        def pairs_epoch(c, _):
            params, opt_state, epoch, diverged = c
            train_x, train_y = data.train
            order = order_of(epoch, num_train, num_batches)
            (params, opt_state, diverged), losses = jax.lax.scan(
                functools.partial(step, objective=loss_fn),
                (params, opt_state, diverged),
                (train_x[order], train_y[order]),
            )
            return (params, opt_state, epoch + 1, diverged), jnp.mean(losses)

        def windows_epoch(c, _):
            """One pass over every window of ``unroll + 1`` states of every training trajectory."""
            params, opt_state, epoch, diverged = c
            traj = data.train_traj
            starts = traj.shape[1] - unroll  # windows per trajectory
            count = traj.shape[0] * starts
            offsets = jnp.arange(unroll + 1)

            def window_step(c, index):
                window = traj[(index // starts)[:, None], (index % starts)[:, None] + offsets]
                return step(c, (window,), unrolled_loss_fn)

            (params, opt_state, diverged), losses = jax.lax.scan(
                window_step, (params, opt_state, diverged), order_of(epoch, count, count // batch_size)
            )
            return (params, opt_state, epoch + 1, diverged), jnp.mean(losses)

        (params, opt_state, epoch, diverged), train_losses = jax.lax.scan(
            pairs_epoch if unroll == 1 else windows_epoch, (params, opt_state, epoch, diverged), None, length=num_epochs
        )
        evaluation = {split: evaluate(params, getattr(data, split)) for split in EVALUATED if getattr(data, split).size}
        if rollout_steps:
            evaluation |= {
                f"{split}_rollout": rollout(params, data.trajectories(split))
                for split in EVALUATED
                if data.trajectories(split) is not None
            }
        return (params, opt_state, epoch, diverged, skey), {"train_loss": train_losses[-1], **evaluation}

    def chunk(state: TrainState, data, num_epochs: int):
        carry = (state.params, state.opt_state, state.epoch, state.diverged, state.shuffle_key)
        run = functools.partial(member_chunk, num_epochs=num_epochs)
        if layout == "vmap":
            new, evaluation = jax.vmap(run, in_axes=(0, 0, None))(carry, state.hparams, data)
            return TrainState(*new, state.hparams), evaluation
        per_device = jax.shard_map(
            lambda c, h, d: jax.lax.map(lambda a: run(*a, d), (c, h)),
            mesh=mesh(num_devices),
            in_specs=(P("m"), P("m"), P()),
            out_specs=P("m"),
            check_vma=False,
        )
        new, evaluation = per_device(carry, state.hparams, data)
        return TrainState(*new, state.hparams), evaluation

    if layout == "vmap":
        return jax.jit(chunk, static_argnums=2)
    split, whole = NamedSharding(mesh(num_devices), P("m")), NamedSharding(mesh(num_devices), P())
    return jax.jit(chunk, static_argnums=2, in_shardings=(split, whole), out_shardings=split)
