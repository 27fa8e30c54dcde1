"""Pure, jit-compiled block trainer: many seeds (and scalar hyperparameters) in one program.

A *block* is a list of members, ordered hyperparameter-set-major then seed
(``[(h0, s0), (h0, s1), ..., (h1, s0), ...]``). Every member runs the same per-member
program: ``report_every`` epochs of ``lax.scan`` over shuffled minibatches, its shuffle for
epoch ``e`` drawn from ``fold_in(shuffle_key, e)``. How members are laid out on the device
is chosen per backend (see :func:`default_layout`):

- ``"map"`` (CPU default): members split into equal parts over the host devices (one per
  core) with ``shard_map``, each device running its part one member after another with
  ``lax.map``. The state goes in and comes out split over the devices, the same placement
  every call (one compiled program per block size). A member's arithmetic is
  then the same whatever block it is in: results are bit-identical on CPU.
- ``"vmap"`` (GPU default): members vectorised with ``vmap``; equal within float tolerance.

No I/O, no printing; the dataset is an argument of the compiled program, shared by the block.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from jaxtyping import Array, Bool, Float, Int, PyTree, UInt32

from ._errors import SpecError
from .models import batched_forward, build_model
from .optim import hyperparameter_names, make_optimizer
from .problems import Dataset, load_problem
from .spec import SweepSpec

LAYOUTS = ("map", "vmap")


class TrainState(NamedTuple):
    """Everything a block needs to continue training; every leaf has a leading member axis."""

    params: PyTree
    opt_state: PyTree
    epoch: Int[Array, " m"]
    diverged: Bool[Array, " m"]
    shuffle_key: UInt32[Array, "m 2"]
    hparams: dict[str, Float[Array, " m"]]


class History(NamedTuple):
    """Per-member losses at each report (end of every chunk), in block member order."""

    seeds: tuple[int, ...]
    hparams: tuple[dict[str, float], ...]
    epoch: Int[np.ndarray, " r"]
    train_loss: Float[np.ndarray, "m r"]
    test_loss: Float[np.ndarray, "m r"]
    diverged: Bool[np.ndarray, " m"]


class Block(NamedTuple):
    """A block ready to train: the compiled program, the static model part and the data."""

    program: Any
    static: PyTree
    data: tuple[Array, Array, Array, Array]
    seeds: tuple[int, ...]
    hparams: tuple[dict[str, float], ...]
    devices: tuple[Any, ...]
    layout: str


def default_layout() -> str:
    """``SWEEP_LAYOUT`` if set, else ``"map"`` on CPU and ``"vmap"`` on accelerators."""
    layout = os.environ.get("SWEEP_LAYOUT") or ("map" if jax.default_backend() == "cpu" else "vmap")
    if layout not in LAYOUTS:
        raise SpecError(f"SWEEP_LAYOUT: got {layout!r}; choose one of {', '.join(LAYOUTS)}")
    return layout


def member_keys(sweep_seed: int, seeds: Sequence[int]) -> tuple[UInt32[Array, "m 2"], UInt32[Array, "m 2"]]:
    """(init, shuffle) key data per seed: ``split(fold_in(key(sweep_seed), seed))`` (SPEC §2)."""
    base = jax.random.key(sweep_seed)
    keys = jax.vmap(lambda s: jax.random.split(jax.random.fold_in(base, s)))(jnp.asarray(seeds, jnp.uint32))
    data = jax.random.key_data(keys)
    return data[:, 0], data[:, 1]


def _normalise_hparams(spec: SweepSpec, hparams) -> tuple[dict[str, float], ...]:
    """Hyperparameter sets as dicts keyed by optimizer argument name."""
    if hparams is None:
        structural = [k for k in spec.grid if k not in spec.vmap]
        if structural:
            raise SpecError(
                f"`grid`: {structural} change the program; train one structural config at a time "
                f"(for s, h in spec.expand(): train_block(s, seeds, h))"
            )
        hparams = spec.expand()[0][1]
    if isinstance(hparams, Mapping):
        hparams = [hparams]
    out = []
    for h in hparams:
        d = {}
        for key, value in h.items():
            part, dot, leaf = key.partition(".")
            name = leaf if dot else key
            if dot and part != "optimizer":
                raise SpecError(f"`hparams`: {key!r} is not an optimizer hyperparameter; only those can share a block")
            d[name] = float(value)
        out.append(d)
    return tuple(out) or ({},)


def _members(seeds: Sequence[int], hparams: Sequence[dict[str, float]]) -> tuple[list[int], list[dict]]:
    return [s for _ in hparams for s in seeds], [h for h in hparams for _ in seeds]


@functools.lru_cache(maxsize=64)
def _program(structure: str, shapes: tuple, layout: str, num_devices: int):
    """The jitted chunk function of one program structure (model, optimizer without its array
    hyperparameters, batch size); cached so that blocks and trials share compiled code."""
    struct = json.loads(structure)
    model_spec, opt_spec, batch_size = struct["model"], struct["optimizer"], struct["batch_size"]
    sample_shape, out_channels, num_train = shapes
    opt_name, opt_options = opt_spec["name"], _options(opt_spec)
    template = _template(model_spec["name"], json.dumps(_options(model_spec), sort_keys=True), sample_shape, out_channels)
    forward = batched_forward(template)
    num_batches = num_train // batch_size

    def loss_fn(params, static, x, y):
        pred = forward(eqx.combine(params, static), x)
        return jnp.mean(jnp.square(pred - y))

    static = _static_part(model_spec["name"], _options(model_spec), sample_shape, out_channels)

    def member_chunk(carry, hp, data, static, num_epochs):
        params, opt_state, epoch, diverged, skey = carry
        train_x, train_y, test_x, test_y = data
        opt = make_optimizer(opt_name, opt_options, hp)

        def step(c, batch):
            params, opt_state, diverged = c
            loss, grads = jax.value_and_grad(loss_fn)(params, static, *batch)
            updates, new_opt_state = opt.update(grads, opt_state, params)
            new_params = eqx.apply_updates(params, updates)
            finite = jnp.isfinite(loss) & _all_finite(new_params)
            keep = diverged | ~finite
            params = _select(keep, params, new_params)
            opt_state = _select(keep, opt_state, new_opt_state)
            return (params, opt_state, keep), loss

        def one_epoch(c, _):
            params, opt_state, epoch, diverged = c
            key = jax.random.fold_in(jax.random.wrap_key_data(skey), epoch)
            order = jax.random.permutation(key, num_train)[: num_batches * batch_size]
            order = order.reshape(num_batches, batch_size)
            (params, opt_state, diverged), losses = jax.lax.scan(
                step, (params, opt_state, diverged), (train_x[order], train_y[order])
            )
            return (params, opt_state, epoch + 1, diverged), jnp.mean(losses)

        (params, opt_state, epoch, diverged), train_losses = jax.lax.scan(
            one_epoch, (params, opt_state, epoch, diverged), None, length=num_epochs
        )
        test_loss = loss_fn(params, static, test_x, test_y)
        return (params, opt_state, epoch, diverged, skey), (train_losses[-1], test_loss)

    def chunk(state: TrainState, data, num_epochs: int):
        carry = (state.params, state.opt_state, state.epoch, state.diverged, state.shuffle_key)
        run = functools.partial(member_chunk, static=static, num_epochs=num_epochs)
        if layout == "vmap":
            new, losses = jax.vmap(run, in_axes=(0, 0, None))(carry, state.hparams, data)
            return TrainState(*new, state.hparams), losses
        per_device = jax.shard_map(
            lambda c, h, d: jax.lax.map(lambda a: run(*a, d), (c, h)),
            mesh=_mesh(num_devices), in_specs=(P("m"), P("m"), P()), out_specs=P("m"), check_vma=False,
        )
        new, losses = per_device(carry, state.hparams, data)
        return TrainState(*new, state.hparams), losses

    if layout == "vmap":
        return jax.jit(chunk, static_argnums=2)
    split, whole = NamedSharding(_mesh(num_devices), P("m")), NamedSharding(_mesh(num_devices), P())
    return jax.jit(chunk, static_argnums=2, in_shardings=(split, whole), out_shardings=split)


def _mesh(num_devices: int) -> Mesh:
    return Mesh(np.asarray(jax.devices("cpu")[:num_devices]), ("m",))


def _options(part: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in part.items() if k != "name"}


def _all_finite(tree) -> Bool[Array, ""]:
    leaves = jax.tree_util.tree_leaves(tree)
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))


def _select(pred, on_true, on_false):
    return jax.tree_util.tree_map(lambda a, b: jnp.where(pred, a, b), on_true, on_false)


def _padded(tree, size: int):
    """Pad the member axis of NumPy leaves to ``size`` by repeating member 0."""
    return jax.tree_util.tree_map(lambda a: np.concatenate([a, np.repeat(a[:1], size - a.shape[0], axis=0)]), tree)


def data_shapes(data: Dataset) -> tuple:
    """``(sample_shape, out_channels, num_train)``: all a program needs to know of the data."""
    return (tuple(data.sample_shape), data.out_channels, data.num_train)


def load_data(spec: SweepSpec) -> Dataset:
    """The spec's dataset, checked against the training settings (SPEC §8)."""
    data = load_problem(spec.problem.name, _options(spec.problem.to_dict()))
    if spec.training.batch_size > data.num_train:
        raise SpecError(
            f"`training.batch_size`: got {spec.training.batch_size}; the problem has only "
            f"{data.num_train} training samples (batch size must be <= that)"
        )
    return data


def _program_key(spec: SweepSpec, names: tuple[str, ...]) -> str:
    optimizer = {k: v for k, v in spec.optimizer.to_dict().items() if k not in names}
    key = {"model": spec.model.to_dict(), "optimizer": optimizer, "batch_size": spec.training.batch_size}
    return json.dumps(key, sort_keys=True)


@functools.lru_cache(maxsize=64)
def _initialiser(structure: str, shapes: tuple):
    """Jitted ``(init keys, hyperparameters) -> (params, optimizer state)`` over members."""
    struct = json.loads(structure)
    model_spec, opt_spec = struct["model"], struct["optimizer"]
    sample_shape, out_channels, _ = shapes

    def one(key, hp):
        model = build_model(model_spec["name"], _options(model_spec), sample_shape, out_channels,
                            key=jax.random.wrap_key_data(key))
        params = eqx.filter(model, eqx.is_array)
        return params, make_optimizer(opt_spec["name"], _options(opt_spec), hp).init(params)

    return jax.jit(jax.vmap(one))


@functools.lru_cache(maxsize=64)
def _template(name: str, options: str, sample_shape: tuple, out_channels: int) -> eqx.Module:
    """A model with shapes in place of arrays (its structure, built without computing: building
    real weights eagerly compiles every little initialiser op, ~0.5 s for a ConvNet)."""
    return eqx.filter_eval_shape(build_model, name, json.loads(options), sample_shape, out_channels, key=jax.random.key(0))


def _static_part(name: str, options: dict, sample_shape: tuple, out_channels: int) -> PyTree:
    """The non-array part of a model (shared by every member)."""
    return eqx.partition(_template(name, json.dumps(options, sort_keys=True), sample_shape, out_channels), eqx.is_array)[1]


def state_skeleton(spec: SweepSpec, num_members: int, hparam_names: Sequence[str], shapes: tuple) -> TrainState:
    """Shapes and dtypes of a block's :class:`TrainState` (for deserialisation; computes nothing).

    ``shapes = (sample_shape, out_channels, num_train)`` of the block's dataset.
    """
    names = tuple(hparam_names)
    keys = jax.ShapeDtypeStruct((num_members, 2), jnp.uint32)
    hp = {n: jax.ShapeDtypeStruct((num_members,), jnp.float32) for n in names}
    params, opt_state = jax.eval_shape(_initialiser(_program_key(spec, names), tuple(shapes)), keys, hp)
    m = (num_members,)
    return TrainState(params, opt_state, jax.ShapeDtypeStruct(m, jnp.int32), jax.ShapeDtypeStruct(m, jnp.bool_), keys, hp)


def init_block(
    spec: SweepSpec, seeds: Sequence[int], hparams=None, data: Dataset | None = None, layout: str | None = None
) -> tuple[Block, TrainState]:
    """Build a block's program and its initial state (epoch 0) without training.

    ``hparams``: a dict or a list of dicts of optimizer hyperparameters (``"learning_rate"`` or
    ``"optimizer.learning_rate"``); ``None`` takes the spec's vmapped grid (or nothing).
    """
    seeds = tuple(int(s) for s in seeds)
    if not seeds or any(s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise SpecError(f"`seeds`: got {list(seeds)[:10]}; give distinct non-negative integers")
    hsets = _normalise_hparams(spec, hparams)
    data = load_data(spec) if data is None else data
    layout = layout or default_layout()
    names = hyperparameter_names(spec.optimizer.options, hsets)
    member_seeds, member_h = _members(seeds, hsets)
    devices = tuple(jax.devices("cpu")[: len(member_seeds)]) if layout == "map" else (jax.devices()[0],)
    shapes = data_shapes(data)
    program = _program(_program_key(spec, names), shapes, layout, len(devices))

    init_keys, shuffle_keys = member_keys(spec.sweep_seed, member_seeds)
    hp = {n: np.asarray([h.get(n, spec.optimizer.options.get(n)) for h in member_h], np.float32) for n in names}
    params, opt_state = _initialiser(_program_key(spec, names), shapes)(init_keys, hp)
    static = _static_part(spec.model.name, _options(spec.model.to_dict()), data.sample_shape, data.out_channels)
    m = len(member_seeds)
    state = TrainState(params, opt_state, jnp.zeros(m, jnp.int32), jnp.zeros(m, bool), shuffle_keys, hp)
    place = NamedSharding(_mesh(len(devices)), P()) if layout == "map" else devices[0]
    arrays = jax.device_put(tuple(data), place)  # the dataset once per device
    return Block(program, static, arrays, seeds, hsets, devices, layout), state


def run_chunk(block: Block, state: TrainState, num_epochs: int) -> tuple[TrainState, tuple[Array, Array]]:
    """Train every member ``num_epochs`` more epochs (one compiled call).

    Returns the new state and, per member, the mean train loss of the last epoch and the test loss.
    In the CPU ``"map"`` layout the members are split into equal contiguous parts over the host
    devices (padded by repeating member 0) and the state comes back as host (NumPy) arrays.
    """
    if block.layout == "vmap":
        return block.program(jax.device_put(state, block.devices[0]), block.data, num_epochs)
    m = state.epoch.shape[0]
    size = -(-m // len(block.devices)) * len(block.devices)
    padded = _padded(jax.tree_util.tree_map(np.asarray, state), size)
    split = NamedSharding(_mesh(len(block.devices)), P("m"))  # the same placement every call
    out = block.program(jax.device_put(padded, split), block.data, num_epochs)
    return jax.tree_util.tree_map(lambda a: np.asarray(a)[:m], out)


def chunks(training) -> list[int]:
    """Epochs per compiled call: ``report_every`` each, the last one possibly shorter."""
    full, rest = divmod(training.epochs, training.report_every)
    return [training.report_every] * full + ([rest] if rest else [])


def model_of(block: Block, state: TrainState) -> eqx.Module:
    """The block's stacked model (array leaves with a leading member axis)."""
    return eqx.combine(state.params, block.static)


def train_block(spec: SweepSpec, seeds: Sequence[int], hparams=None, *, data: Dataset | None = None,
                layout: str | None = None) -> tuple[eqx.Module, History]:
    """Train one block in-process (no Ray) and return ``(stacked_model, history)``.

    Members are ordered hyperparameter-set-major, then seed, as in ``history.seeds`` /
    ``history.hparams`` repeated: member ``i`` is ``(hparams[i // len(seeds)], seeds[i % len(seeds)])``.

    ```python
    model, history = sweep.train_block(spec, seeds=[0, 1, 2], hparams=[{"learning_rate": 1e-3}])
    history.test_loss.shape  # (3, number of reports)
    ```
    """
    block, state = init_block(spec, seeds, hparams, data, layout)
    epochs, train_losses, test_losses = [], [], []
    for n in chunks(spec.training):
        state, (train, test) = run_chunk(block, state, n)
        epochs.append(int(state.epoch[0]))
        train_losses.append(np.asarray(train))
        test_losses.append(np.asarray(test))
    history = History(
        seeds=block.seeds,
        hparams=block.hparams,
        epoch=np.asarray(epochs, np.int32),
        train_loss=np.stack(train_losses, axis=1),
        test_loss=np.stack(test_losses, axis=1),
        diverged=np.asarray(state.diverged),
    )
    return model_of(block, state), history


def train(spec: SweepSpec, seed: int, hparams: Mapping[str, float] | None = None, **kwargs) -> tuple[eqx.Module, History]:
    """Train one member; the model has no member axis and the history arrays one row.

    ``hparams`` picks one set of optimizer hyperparameters (needed when the spec vmaps several).
    """
    if hparams is None and len(_normalise_hparams(spec, None)) > 1:
        raise SpecError(f"`hparams`: the spec vmaps {list(spec.vmap)}; pass one set, e.g. hparams={{'learning_rate': 1e-3}}")
    model, history = train_block(spec, [seed], None if hparams is None else [hparams], **kwargs)
    params, static = eqx.partition(model, eqx.is_array)
    return eqx.combine(jax.tree_util.tree_map(lambda a: a[0], params), static), history
