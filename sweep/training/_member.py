"""What one member's chunk of training computes, as small pure functions of one :class:`Program`.

Every member runs the same code, whatever the layout (``vmap`` or ``shard_map``) that
:func:`~._program.chunk_program` wraps around :func:`member_chunk`: ``num_epochs`` epochs
(:func:`pairs_epoch` over shuffled minibatches of one-step pairs, or :func:`windows_epoch` over
windows of ``unroll + 1`` states of the training trajectories), each minibatch one
:func:`train_step`; then :func:`evaluate` on the validation and test sets and, with
``rollout_steps``, :func:`rollout_metrics` from their trajectories. The shuffle of epoch ``e`` is
drawn from ``fold_in(shuffle_key, e)``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Bool, Float, PyTree

from .._batches import equal_parts, in_parts, joined
from ..metrics import LOSS, Metric, batch_mean
from ..optim import make_optimizer
from ..problems import EVALUATED, Dataset
from ._rollout import rollout_steps, window_step

EVAL_CHUNK = 128  # samples (or trajectories) per forward pass when evaluating a validation or test set


class Program(NamedTuple):
    """Everything a member's chunk depends on besides its state and data: built once per program
    structure (:func:`~._program.describe`)."""

    forward: Callable  # (model, batch of samples) -> batch of predictions
    static: PyTree  # the non-array part of the model, shared by every member
    loss: Metric
    evaluated: tuple  # (name, field, Metric) of the loss and every metric, on val and test
    rollout_metrics: tuple  # (name, field, Metric) evaluated along rollouts
    optimizer: tuple[str, dict[str, Any]]  # (optax name, options without the array hyperparameters)
    batch_size: int
    num_train: int
    unroll: int
    rollout_steps: int
    cut: bool = False  # stop gradients between unrolled steps
    noise: float = 0.0  # std of the Gaussian noise added to every training input
    units: tuple | None = None  # ((shift...), (scale...)) per channel of normalised data, else None
    history: int = 1  # states one input stacks (rollouts start from that many and keep a window)
    reference: Callable | None = None  # the diverted chain's batched exponax stepper, or None


def physical(program: Program, a):
    """Fields ``[..., channels, *spatial]`` of normalised data back in physical units (unchanged
    where the data were not normalised): what the metrics (never the loss) are computed on."""
    if program.units is None:
        return a
    shift, scale = (jnp.asarray(v, a.dtype).reshape(-1, *([1] * (a.ndim - 2))) for v in program.units)
    return a * scale + shift


def _all_finite(tree) -> Bool[Array, ""]:
    leaves = jax.tree_util.tree_leaves(tree)
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))


def _select(pred, on_true, on_false):
    return jax.tree_util.tree_map(lambda a, b: jnp.where(pred, a, b), on_true, on_false)


def pairs_loss(program: Program, params, x, y) -> Float[Array, ""]:
    """The loss of a minibatch of one-step pairs."""
    return batch_mean(program.loss, program.forward(eqx.combine(params, program.static), x), y)


def windows_loss(program: Program, params, window) -> Float[Array, ""]:
    """Mean over the ``unroll`` steps of the loss of the autoregressive prediction of ``window[:, k]``
    (with a ``reference`` stepper, the diverted chain: of the prediction of the reference's step
    from the same state)."""
    model = eqx.combine(params, program.static)
    k = program.unroll

    def loss(pred, t):  # of the prediction after t + 1 steps
        return batch_mean(program.loss, pred, window[:, t + 1])

    # unrolled (K copies of the step in the program): XLA then fuses across steps, which a
    # rolled loop of a few iterations keeps it from (1.2-1.4x the cost of K one-step passes)
    def step(state):
        return program.forward(model, jax.lax.stop_gradient(state) if program.cut else state)

    reference = program.reference
    if reference is None:
        _, losses = rollout_steps(step, window[:, 0], k, k, loss, unroll=True)
        return jnp.mean(losses)

    # the diverted chain: the rollout's state carries the reference's step from it alongside
    def diverted(carry):
        state = jax.lax.stop_gradient(carry[0]) if program.cut else carry[0]
        return program.forward(model, state), reference(state)

    def diverted_loss(carry, t):
        return batch_mean(program.loss, *carry)

    start = (window[:, 0], window[:, 0])
    _, losses = rollout_steps(diverted, start, k, k, diverted_loss, unroll=True)
    return jnp.mean(losses)


def train_step(opt: optax.GradientTransformation, objective: Callable, carry, batch: tuple):
    """One optimizer step on ``objective(params, *batch)``; a member whose loss or new parameters
    are not finite keeps its parameters and is marked diverged from then on."""
    params, opt_state, diverged = carry
    loss, grads = jax.value_and_grad(objective)(params, *batch)
    updates, new_opt_state = opt.update(grads, opt_state, params)
    new_params = eqx.apply_updates(params, updates)
    finite = jnp.isfinite(loss) & _all_finite(new_params)
    keep = diverged | ~finite
    params = _select(keep, params, new_params)
    opt_state = _select(keep, opt_state, new_opt_state)
    return (params, opt_state, keep), loss


def epoch_order(program: Program, shuffle_key, epoch, count: int, batches: int):
    """``[batches, batch_size]`` indices of epoch ``epoch``'s minibatches out of ``count`` items."""
    key = jax.random.fold_in(jax.random.wrap_key_data(shuffle_key), epoch)
    return jax.random.permutation(key, count)[: batches * program.batch_size].reshape(batches, program.batch_size)


NOISE_STREAM = 1  # epoch e's input noise: fold_in(fold_in(shuffle_key, e), NOISE_STREAM), split per minibatch


def noise_keys(program: Program, shuffle_key, epoch, batches: int):
    """One key per minibatch of epoch ``epoch`` for its input noise, ``[batches]``; None without
    noise (the program is then the one it always was)."""
    if not program.noise:
        return None
    key = jax.random.fold_in(jax.random.fold_in(jax.random.wrap_key_data(shuffle_key), epoch), NOISE_STREAM)
    return jax.random.split(key, batches)


def with_noise(program: Program, x, key):
    """``x`` plus Gaussian noise of std ``program.noise`` drawn from ``key`` (``x`` if ``key`` is None)."""
    return x if key is None else x + program.noise * jax.random.normal(key, x.shape, x.dtype)


def minibatch_scan(step: Callable, carry, batches: PyTree):
    """``lax.scan(step, carry, batches)`` over the minibatches of a pass, whose train steps run
    inside a loop even when there is one minibatch.

    XLA removes a loop of one trip and inlines its body, and with one member per device the
    ``"map"`` layout's member loop goes too: the train step of a pass of one minibatch would then
    sit beside the program's inputs and outputs instead of inside a loop. There XLA:CPU emits the
    small fusions of the optimizer update (of a one-element bias) with another code generator,
    whose fused multiply-add in ``b1 * mu + (1 - b1) * g`` rounds the other product: the member
    differed by an ulp from itself in a block of several members per device. A single minibatch
    therefore runs in a ``fori_loop`` whose trip count XLA cannot read (behind an optimization
    barrier, expanded only after XLA's loop simplifications), as several run in the scan's loop.
    """
    if jax.tree_util.tree_leaves(batches)[0].shape[0] != 1:
        return jax.lax.scan(step, carry, batches)
    out = jax.eval_shape(step, carry, jax.tree_util.tree_map(lambda a: a[0], batches))[1]

    def body(i, state):
        return step(state[0], jax.tree_util.tree_map(lambda a: a[i], batches))

    zeros = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), out)
    carry, out = jax.lax.fori_loop(0, jax.lax.optimization_barrier(jnp.int32(1)), body, (carry, zeros))
    return carry, jax.tree_util.tree_map(lambda a: a[None], out)


def pairs_epoch(program: Program, opt, shuffle_key, train, carry, gather: bool = False):
    """One pass over shuffled minibatches of the training pairs ``train`` (``(x, y)``, of
    ``program.num_train`` samples): (carry, mean loss). ``gather``: each minibatch gathered in the
    step that trains on it, instead of the shuffled split first (what a streamed window does: no
    shuffled copy of the window per member; the same minibatches, but another program, whose
    arithmetic XLA may fuse otherwise, so the in-memory program keeps its own)."""
    params, opt_state, epoch, diverged = carry
    train_x, train_y = train
    batches = program.num_train // program.batch_size
    order = epoch_order(program, shuffle_key, epoch, program.num_train, batches)

    def step(c, batch):
        *pairs, key = batch
        x, y = (train_x[pairs[0]], train_y[pairs[0]]) if gather else pairs
        return train_step(opt, lambda p, x, y: pairs_loss(program, p, x, y), c, (with_noise(program, x, key), y))

    shuffled = (order,) if gather else (train_x[order], train_y[order])
    (params, opt_state, diverged), losses = minibatch_scan(
        step, (params, opt_state, diverged), (*shuffled, noise_keys(program, shuffle_key, epoch, batches))
    )
    return (params, opt_state, epoch + 1, diverged), jnp.mean(losses)


def windows_epoch(program: Program, opt, shuffle_key, traj, carry):
    """One pass over every window of ``unroll + 1`` states of every training trajectory of
    ``traj`` (the first state of each with input noise, if any)."""
    params, opt_state, epoch, diverged = carry
    unroll = program.unroll
    starts = traj.shape[1] - unroll  # windows per trajectory
    count = traj.shape[0] * starts
    offsets = jnp.arange(unroll + 1)
    batches = count // program.batch_size

    def window_step(c, batch):
        index, key = batch
        window = traj[(index // starts)[:, None], (index % starts)[:, None] + offsets]
        if key is not None:
            window = jnp.concatenate([with_noise(program, window[:, :1], key), window[:, 1:]], axis=1)
        return train_step(opt, lambda p, w: windows_loss(program, p, w), c, (window,))

    (params, opt_state, diverged), losses = minibatch_scan(
        window_step,
        (params, opt_state, diverged),
        (epoch_order(program, shuffle_key, epoch, count, batches), noise_keys(program, shuffle_key, epoch, batches)),
    )
    return (params, opt_state, epoch + 1, diverged), jnp.mean(losses)


def eval_part(program: Program) -> int:
    """Samples (or trajectories) per forward pass of an evaluation: a minibatch, at most ``EVAL_CHUNK``."""
    return min(EVAL_CHUNK, program.batch_size)


def predict(program: Program, params, x, most: int = EVAL_CHUNK):
    """The model on every sample of ``x``, in :func:`~sweep._batches.equal_parts` of at most
    ``most`` samples (``lax.map``; the last part padded): the activations of a whole test set at
    once are slower (memory-bound) and can exceed memory."""
    model, n = eqx.combine(params, program.static), x.shape[0]
    count, size = equal_parts(n, most)
    if count == 1:
        return program.forward(model, x)
    return joined(jax.lax.map(lambda part: program.forward(model, part), in_parts(x, count, size)), n)


def evaluate(program: Program, params, split) -> dict[str, Float[Array, ""]]:
    """The loss (in the normalised units it is minimised in) and every metric (in physical units)
    of ``params`` on one split's pairs."""
    # Barriers keep the evaluation one fused unit whatever surrounds it: with one member per
    # device XLA inlines the member loop, and without them would fuse (and round) exp/log of
    # e.g. cross_entropy differently than in a block of several members per device. Predictions a
    # minibatch at a time, as a training step holds activations: in parts of 128 pairs of 64 x 64 the
    # matmul form of a convolution made 220 MiB of temporaries per device, 115 MiB in parts of 32.
    pred, y = jax.lax.optimization_barrier((predict(program, params, split.x, eval_part(program)), split.y))
    if program.units is None:
        return jax.lax.optimization_barrier(
            {name: batch_mean(metric, pred, y) for name, _, metric in program.evaluated}
        )
    units = (physical(program, pred), physical(program, y))
    return jax.lax.optimization_barrier(
        {name: batch_mean(metric, *(units if name != LOSS else (pred, y))) for name, _, metric in program.evaluated}
    )


def rollout_sums(program: Program, params, traj, keep) -> Float[Array, "T metrics"]:
    """``[T, metrics]``: every metric (in physical units) of the rollout of the first state of each
    trajectory of ``traj`` kept by ``keep`` (``[n]``, bool), summed over those trajectories; in
    :func:`~sweep._batches.equal_parts` of at most a minibatch (or ``EVAL_CHUNK``) of trajectories
    (the last padded and masked): each step of a part holds a forward pass over a minibatch."""
    model, metrics, steps = eqx.combine(params, program.static), program.rollout_metrics, program.rollout_steps
    n = traj.shape[0]
    count, size = equal_parts(n, eval_part(program))  # 300 trajectories, batch 128: three parts of 100
    padded, real = in_parts(traj, count, size), in_parts(keep, count, size)

    def part(sums, inputs):
        states, keep = inputs

        def scores(pred, t):  # [metrics, size]: each metric of each trajectory after t + 1 steps
            pred, target = physical(program, pred), physical(program, states[:, t + program.history])
            return jnp.stack([jax.vmap(m.per_sample)(pred, target).astype(jnp.float32) for _, _, m in metrics])

        h = program.history  # the first h states are the initial window; step t predicts state t + h
        first = states[:, :h].reshape(states.shape[0], -1, *states.shape[3:])
        step = window_step(lambda s: program.forward(model, s), h)
        _, values = rollout_steps(
            step, first, steps, steps, lambda w, t: scores(w[:, w.shape[1] - states.shape[2] :], t)
        )
        return sums + jnp.sum(jnp.where(keep, values, 0.0), axis=-1), None  # values: [T, metrics, size]

    params, padded = jax.lax.optimization_barrier((params, padded))
    sums, _ = jax.lax.scan(part, jnp.zeros((steps, len(metrics)), jnp.float32), (padded, real))
    return sums


def rollout_metrics(program: Program, params, traj) -> dict[str, Float[Array, " T"]]:
    """``{metric: [T]}``: every trajectory's first state rolled out ``T`` steps
    (:func:`~._rollout.rollout_steps`, each state scored against the trajectory), the metrics (in
    physical units) averaged over the trajectories (:func:`rollout_sums` over their number)."""
    n = traj.shape[0]
    sums = rollout_sums(program, params, traj, jnp.ones(n, bool))
    return jax.lax.optimization_barrier(
        {name: sums[:, i] / n for i, (name, _, _) in enumerate(program.rollout_metrics)}
    )


def part_sums(program: Program, params, part, rollout: bool) -> dict[str, Any]:
    """What one member adds up over one part of a split evaluated in parts (its validation and
    test data larger than the data budget leaves them): ``part`` is ``(x, y, keep)`` or, with
    ``rollout``, ``(traj, keep)`` (``keep``: the real items, not the padding), the result each
    metric of :func:`evaluate` summed over the kept samples (float32), or the ``[T, metrics]``
    :func:`rollout_sums` of the kept trajectories. Every metric is a mean over samples of
    ``Metric.per_sample``, so the sums of a split's parts over its size are its metrics."""
    if rollout:
        return {"rollout": rollout_sums(program, params, *part)}
    (x, y, keep), params = jax.lax.optimization_barrier((part, params))  # as in evaluate
    pred = predict(program, params, x, eval_part(program))  # activations of a minibatch at most
    units = (physical(program, pred), physical(program, y))

    def total(name: str, metric: Metric):
        values = jax.vmap(metric.per_sample)(*(units if name != LOSS else (pred, y))).astype(jnp.float32)
        return jnp.sum(jnp.where(keep, values, 0.0))

    return jax.lax.optimization_barrier({name: total(name, metric) for name, _, metric in program.evaluated})


def member_evaluation(program: Program, params, data: Dataset) -> dict[str, Any]:
    """``{"val": {...}, "test": {...}}``: the loss and metrics of ``params`` on the validation and
    test pairs of ``data`` (a split without samples left out), with rollouts also
    ``"val_rollout"`` / ``"test_rollout"``: ``{<metric>: [T] curve}``."""
    evaluation = {
        split: evaluate(program, params, getattr(data, split)) for split in EVALUATED if getattr(data, split).size
    }
    if program.rollout_steps:
        evaluation |= {
            f"{split}_rollout": rollout_metrics(program, params, data.trajectories(split))
            for split in EVALUATED
            if data.trajectories(split) is not None
        }
    return evaluation


def member_chunk(program: Program, carry, hp, data: Dataset, num_epochs: int, gather: bool = False):
    """``num_epochs`` epochs of one member, then its evaluation: ``(carry, evaluation)``.

    ``carry``: ``(params, opt_state, epoch, diverged, shuffle_key)``; ``hp``: its array
    hyperparameters. ``evaluation``: ``{"train_loss": mean loss of the last epoch, "val": {...},
    "test": {...}}`` (:func:`member_evaluation`). ``gather``: as :func:`pairs_epoch` takes it
    (the ``"vmap"`` layout's: vmapped, a shuffled copy of the split would be one per member).
    """
    params, opt_state, epoch, diverged, skey = carry
    name, options = program.optimizer
    opt = make_optimizer(name, options, hp)
    if program.unroll == 1:
        epoch_fn, train = functools.partial(pairs_epoch, gather=gather), data.train
    else:
        assert data.train_traj is not None  # an unrolled program's data has training trajectories (program_data)
        epoch_fn, train = windows_epoch, data.train_traj

    def one_epoch(c, _):
        return epoch_fn(program, opt, skey, train, c)

    (params, opt_state, epoch, diverged), train_losses = jax.lax.scan(
        one_epoch, (params, opt_state, epoch, diverged), None, length=num_epochs
    )
    evaluation = member_evaluation(program, params, data)
    return (params, opt_state, epoch, diverged, skey), {"train_loss": train_losses[-1], **evaluation}


WINDOW_STREAM = 2  # streamed window w of epoch e: fold_in(fold_in(fold_in(shuffle_key, e), WINDOW_STREAM), w)


def window_pass(program: Program, carry, hp, window):
    """One member's pass over one streamed window of its current epoch: ``(carry, mean loss)``.

    ``window``: ``(train, w)``, the window's training pairs ``(x, y)`` (or, with ``unroll > 1``,
    trajectories) and its place ``w`` in the epoch's window order. The member draws its own
    minibatches inside the window (as an epoch over pairs or windows of states,
    :func:`pairs_epoch` / :func:`windows_epoch`) from a key of its shuffle key, the epoch and
    ``w``; the epoch counter is left to the caller (it advances after the epoch's last window).
    """
    # Barriers keep XLA's simplifications from reaching across the pass (see evaluate); XLA:CPU
    # expands them before fusing, so what keeps a pass of one minibatch the same arithmetic with
    # one member per device (the member loop inlined) as with several is its loop (minibatch_scan).
    (train, index), (params, opt_state, epoch, diverged, skey) = jax.lax.optimization_barrier((window, carry))
    name, options = program.optimizer
    opt = make_optimizer(name, options, hp)
    key = jax.random.fold_in(jax.random.fold_in(jax.random.wrap_key_data(skey), epoch), WINDOW_STREAM)
    wkey = jax.random.key_data(jax.random.fold_in(key, index))
    if program.unroll == 1:
        inside = program._replace(num_train=train[0].shape[0])
        (params, opt_state, _, diverged), loss = pairs_epoch(
            inside, opt, wkey, train, (params, opt_state, epoch, diverged), gather=True
        )
    else:
        (params, opt_state, _, diverged), loss = windows_epoch(
            program, opt, wkey, train, (params, opt_state, epoch, diverged)
        )
    return jax.lax.optimization_barrier(((params, opt_state, epoch, diverged, skey), loss))
