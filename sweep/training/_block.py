"""A block: many seeds (and scalar hyperparameters) of one structural config in one program.

Members are ordered hyperparameter-set-major then seed (``[(h0, s0), (h0, s1), ..., (h1, s0),
...]``). :func:`init_block` builds the program and the initial state, :func:`run_chunk` trains
every member some epochs in one compiled call. No I/O, no printing; the dataset is an argument
of the compiled program, shared by the block.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, TypedDict

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from jaxtyping import Array, PyTree, UInt32

from .._caches import cached
from .._configure import warn_unconfigured
from .._errors import SpecError
from ..optim import check_optimizer, hyperparameter_names
from ..problems import Dataset
from ..spec import SweepSpec, hparam_name, is_int, is_number, seed_tuple
from ._data_checks import check_data, load_data
from ._layout import LAYOUTS, default_layout, members_mesh, on_devices, pad_members
from ._program import (
    Shapes,
    TrainState,
    chunk_program,
    data_shapes,
    initialiser,
    program_data,
    program_key,
    static_part,
)
from ._stream import Stream, WindowPosition, held_part, make_stream, read_held, streamed_chunk

HParams = Mapping[str, float] | Sequence[Mapping[str, float]] | None
"""A block's optimizer hyperparameters: one set (a dict), a list of sets, or ``None`` for the spec's."""


class BlockOptions(TypedDict, total=False):
    """The optional settings of a block, passed by keyword to :func:`train_block` and :func:`sweep.train`
    (as to :func:`init_block`).

    Attributes:
        data: The spec's dataset, if already loaded (:func:`load_data`).
        layout: ``"map"`` or ``"vmap"``; ``None`` picks the backend's default (CPU ``"map"``,
            bit-identical whatever the block; GPU ``"vmap"``).
    """

    data: Dataset | None
    layout: str | None


class Block(NamedTuple):
    """A block ready to train: its spec, the compiled program, the static model part and the data."""

    spec: SweepSpec
    program: Any
    static: PyTree
    data: Dataset  # of device arrays
    seeds: tuple[int, ...]
    hparams: tuple[dict[str, float], ...]
    devices: tuple[Any, ...]
    layout: str
    stream: Stream | None = None  # the training split streamed in windows (larger than the data budget)

    @property
    def num_members(self) -> int:
        return len(self.seeds) * len(self.hparams)


def member_keys(sweep_seed: int, seeds: Sequence[int]) -> tuple[UInt32[Array, "m 2"], UInt32[Array, "m 2"]]:
    """(init, shuffle) key data per seed: ``split(fold_in(key(sweep_seed), seed))``."""
    base = jax.random.key(sweep_seed)
    keys = jax.vmap(lambda s: jax.random.split(jax.random.fold_in(base, s)))(jnp.asarray(seeds, jnp.uint32))
    data = jax.random.key_data(keys)
    return data[:, 0], data[:, 1]


def hparam_sets(spec: SweepSpec, hparams: HParams) -> tuple[dict[str, float], ...]:
    """Hyperparameter sets as dicts keyed by optimizer argument name."""
    if hparams is None:
        assert spec.vmap is not None  # __post_init__ resolves None to the vmappable grid keys
        structural = [k for k in spec.varied if k not in spec.vmap]
        if structural:
            raise SpecError(
                f"`grid`: {structural} change the program; train one structural config at a time "
                f"(for s, h in spec.expand(): train_block(s, seeds, h))"
            )
        return spec.expand()[0][1]
    if isinstance(hparams, Mapping):
        hparams = [hparams]
    out = []
    for i, h in enumerate(hparams):
        for key in h:
            if "." in key and not key.startswith("optimizer."):
                raise SpecError(f"`hparams`: {key!r} is not an optimizer hyperparameter; only those can share a block")
        named = {
            hparam_name(k): float(v) if np.ndim(v) == 0 and isinstance(v, (np.generic, np.ndarray, jax.Array)) else v
            for k, v in h.items()
        }
        if len(named) < len(h):
            twice = sorted({hparam_name(k) for k in h if hparam_name(k) != k and hparam_name(k) in h})
            raise SpecError(f"`hparams[{i}]` {dict(h)}: names {twice} twice (with and without 'optimizer.'); once")
        try:  # the rules of the spec's own optimizer fields: known arguments, finite rates >= 0
            check_optimizer(spec.optimizer.name, {**spec.optimizer.options, **named})
        except SpecError as e:
            parts = {"model": spec.model.options, "training": spec.training.to_dict(), "problem": spec.problem.options}
            elsewhere = [f"{part}.{k}" for k in named for part, fields in parts.items() if k in fields]
            hint = (
                f"; {', '.join(elsewhere)} is no optimizer hyperparameter: set it in the spec (a block trains one "
                f"structural config)"
                if elsewhere
                else ""
            )
            raise SpecError(f"`hparams[{i}]` {dict(h)}: {e}{hint}") from None
        out.append({k: float(v) for k, v in named.items()})
    for i, h in enumerate(out):  # a set without a name the others vary: the spec's value, else refused
        missing = sorted(n for s in out for n in s if n not in h and not is_number(spec.optimizer.options.get(n)))
        if missing:
            raise SpecError(
                f"`hparams[{i}]` {h}: no {missing[0]!r}, which other sets give and the spec's optimizer does not; "
                f"give it in every set, or set optimizer.{missing[0]} in the spec"
            )
    return tuple(out) or ({},)


def state_skeleton(spec: SweepSpec, num_members: int, hparam_names: Sequence[str], shapes: Shapes) -> TrainState:
    """Shapes and dtypes of a block's :class:`TrainState` (for deserialisation; computes nothing).

    ``shapes``: the :class:`~._program.Shapes` of the block's dataset.
    """
    names = tuple(hparam_names)
    return _skeleton(program_key(spec, names), num_members, names, tuple(shapes))


@cached(64)
def _skeleton(structure: str, num_members: int, names: tuple[str, ...], shapes: tuple) -> TrainState:
    """:func:`state_skeleton` of one program structure (cached: blocks of one config share it)."""
    keys = jax.ShapeDtypeStruct((num_members, 2), jnp.uint32)
    hp = {n: jax.ShapeDtypeStruct((num_members,), jnp.float32) for n in names}
    params, opt_state = jax.eval_shape(initialiser(structure, shapes), keys, hp)
    m = (num_members,)
    return TrainState._make(  # abstract leaves (ShapeDtypeStruct) in place of the arrays
        (params, opt_state, jax.ShapeDtypeStruct(m, jnp.int32), jax.ShapeDtypeStruct(m, jnp.bool_), keys, hp)
    )


def init_block(
    spec: SweepSpec,
    seeds: Sequence[int],
    hparams: HParams = None,
    data: Dataset | None = None,
    layout: str | None = None,
) -> tuple[Block, TrainState]:
    """Build a block's program and its initial state (epoch 0) without training.

    Args:
        spec: The sweep specification.
        seeds: The block's seeds: distinct integers in [0, 2**32), checked as the spec's are.
        hparams: A dict or a list of dicts of optimizer hyperparameters (``"learning_rate"`` or
            ``"optimizer.learning_rate"``); ``None`` takes the spec's vmapped grid (or nothing).
        data: The spec's dataset, if already loaded (:func:`load_data`).
        layout: ``"map"`` or ``"vmap"``; ``None`` picks the backend's default (CPU ``"map"``,
            bit-identical whatever the block; GPU ``"vmap"``).

    Returns:
        ``(block, state)``, the compiled program with its data and a :class:`TrainState`.

    Raises:
        SpecError: The data or the model do not fit the spec.

    Examples:
        ```python
        block, state = sweep.init_block(spec, seeds=[0, 1, 2])
        state, metrics = sweep.run_chunk(block, state, spec.training.report_every)
        ```
    """
    seeds = np.asarray(seeds).tolist() if hasattr(seeds, "__array__") else seeds  # (a JAX array too)
    if isinstance(seeds, (int, float, str, bytes)) or not isinstance(seeds, Iterable):  # (a 0-d array: a number)
        more = f", range({seeds}) for seeds 0..{seeds - 1}" if is_int(seeds) and seeds >= 1 else ""
        example = f"[{seeds}] for seed {seeds}" if is_int(seeds) and seeds >= 0 else "[0, 1, 2]"
        raise SpecError(f"`seeds`: got {seeds!r}; give the block's seeds as a list: {example}{more}")
    seeds = seed_tuple(seeds)
    hsets = hparam_sets(spec, hparams)
    if layout not in (None, *LAYOUTS):
        raise SpecError(f"`layout`: got {layout!r}; give one of {list(LAYOUTS)}, or None for the backend's default")
    if data is None:
        data = load_data(spec)
    else:
        check_data(spec, data)
    layout = layout or default_layout()
    if layout == "map":
        warn_unconfigured()
    names = hyperparameter_names(spec.optimizer.options, hsets)
    member_seeds = [s for _ in hsets for s in seeds]
    member_h = [h for h in hsets for _ in seeds]
    devices = tuple(jax.devices("cpu")[: len(member_seeds)]) if layout == "map" else (jax.devices()[0],)
    shapes = data_shapes(data)
    key = program_key(spec, names)
    program = chunk_program(key, shapes, layout, len(devices))

    init_keys, shuffle_keys = member_keys(spec.sweep_seed, member_seeds)
    hp: dict[str, Any] = {  # NumPy arrays, which the jitted program takes like device arrays
        n: np.asarray([h.get(n, spec.optimizer.options.get(n)) for h in member_h], np.float32) for n in names
    }
    params, opt_state = initialiser(key, shapes)(init_keys, hp)
    m = len(member_seeds)
    state = TrainState(params, opt_state, jnp.zeros(m, jnp.int32), jnp.zeros(m, bool), shuffle_keys, hp)
    place = NamedSharding(members_mesh(len(devices)), P()) if layout == "map" else devices[0]
    stream = make_stream(spec, data, key, shapes, layout, len(devices), place)
    held = stream is None or stream.parts is None  # validation and test held on the devices
    # a trial's data of a file problem: what the block holds read from the files now
    t = spec.training
    data = _read(spec.problem, _Same(data), t.unroll, t.rollout_steps, stream is None, held)
    # the dataset once per device, and once for consecutive blocks reading the same parts of it
    arrays = _placed(_Same(data), place, t.unroll > 1, t.rollout_steps, stream is not None, held)
    static = static_part(spec.model.to_dict(), shapes)
    return Block(spec, program, static, arrays, seeds, hsets, devices, layout, stream), state


class _Same:
    """A cache key that is its object by identity (and keeps it alive while cached)."""

    def __init__(self, value: Any):
        self.value = value

    def __hash__(self) -> int:
        return id(self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.value is self.value


@cached(maxsize=1)
def _read(problem: Any, data: _Same, unroll: int, rollout_steps: int, train: bool, evaluated: bool) -> Dataset:
    """:func:`~._stream.read_held`, kept for the next block of the same dataset object (a reused
    trial worker's next trial reads nothing)."""
    return read_held(problem, data.value, unroll, rollout_steps, train, evaluated)


@cached(maxsize=1)
def _placed(data: _Same, place: Any, unrolled: bool, rollout_steps: int, streamed: bool, held: bool) -> Dataset:
    """The arrays of the dataset a block's program reads (:func:`program_data`; ``streamed``:
    without the training split; not ``held``: without the validation and test data either) on the
    block's devices; the last one is kept, so that the next
    block trained on the same dataset object with the same ``unroll > 1`` and ``rollout_steps``
    (a reused trial worker's next trial) copies nothing."""
    needed = program_data(data.value, unrolled, rollout_steps)
    return on_devices(held_part(needed, held) if streamed else needed, place)


def run_chunk(block: Block, state: TrainState, num_epochs: int) -> tuple[TrainState, dict[str, Any]]:
    """Train every member of a block ``num_epochs`` more epochs in one compiled call.

    In the CPU ``"map"`` layout the members are split into equal contiguous parts over the host
    devices (padded by repeating member 0) and the state comes back as host (NumPy) arrays.

    Args:
        block: The block's program (:func:`init_block`).
        state: Its current state.
        num_epochs: Epochs to train.

    Returns:
        ``(state, metrics)``, the new state and, per member, the mean train loss of the last epoch
        and the loss and metrics on the validation and test sets (``{"train_loss": [m], "val":
        {"loss": [m], ...}, "test": {...}}``; no ``"val"`` without a validation set).

    Examples:
        ```python
        block, state = sweep.init_block(spec, seeds=[0, 1])
        state, metrics = sweep.run_chunk(block, state, 5)
        metrics["val"]["loss"]  # one value per member
        ```
    """
    if isinstance(num_epochs, (bool, np.bool_)) or not isinstance(num_epochs, numbers.Integral) or num_epochs < 1:
        raise SpecError(f"`num_epochs`: got {num_epochs!r}; give the epochs to train, an integer >= 1")
    state, evaluation, _ = chunk_until(block, state, int(num_epochs))
    assert evaluation is not None  # nothing asked to pause
    return state, evaluation


def chunk_until(
    block: Block,
    state: TrainState,
    num_epochs: int,
    position: WindowPosition | None = None,
    pause: Callable[[], bool] | None = None,
) -> tuple[TrainState, dict[str, Any] | None, WindowPosition | None]:
    """:func:`run_chunk` of a streamed block continued from ``position`` (inside the epoch
    ``state`` stands at) and paused at a window boundary where ``pause()`` says so
    (:func:`~._stream.streamed_chunk`): ``(state, evaluation, None)`` at the chunk's end, or
    ``(state, None, position)`` where it paused. A block whose data fit never pauses, nor one
    whose budget is the machine's default (no ``Training(data_memory=...)``): resumed on another
    machine, its epoch could be cut into other windows, and the position would not hold there."""
    if block.spec.training.data_memory is None:
        pause = None
    if position is not None:
        position.check(None if block.stream is None else block.stream.plan, int(np.asarray(state.epoch)[0]))

    def chunk(placed: TrainState, sums: Any) -> tuple[TrainState, Any, WindowPosition | None]:
        if block.stream is None:
            return (*block.program(placed, block.data, num_epochs), None)
        at = None if position is None else position._replace(loss_sums=sums)
        return streamed_chunk(block.stream, placed, block.data, num_epochs, at, pause)

    sums = None if position is None else np.asarray(position.loss_sums, np.float64)
    if block.layout == "vmap":
        return chunk(jax.device_put(state, block.devices[0]), sums)
    padded, m = pad_members(jax.tree_util.tree_map(np.asarray, state), len(block.devices))
    split = NamedSharding(members_mesh(len(block.devices)), P("m"))  # the same placement every call
    if sums is not None:
        sums = pad_members(sums, len(block.devices))[0]
    state, evaluation, paused = chunk(jax.device_put(padded, split), sums)
    state, evaluation = jax.tree_util.tree_map(lambda a: np.asarray(a)[:m], (state, evaluation))
    return state, evaluation, None if paused is None else paused._replace(loss_sums=paused.loss_sums[:m])


def model_of(block: Block, state: TrainState) -> eqx.Module:
    """The block's stacked model (array leaves with a leading member axis)."""
    return eqx.combine(state.params, block.static)


def reader_wait(block: Block) -> float | None:
    """Seconds the trainer of ``block`` has waited so far for its reader thread to bring the next
    window of its streamed training split (summed over its chunks: each waits at least for its
    first window); ``None`` where its data fit the budget (``Training(data_memory=...)``).

    Examples:
        ```python
        block, state = sweep.init_block(spec, seeds=[0, 1])
        for state, history in sweep.fit(block, state):
            print(sweep.training.reader_wait(block))  # 0.031, 0.064, ... (None in memory)
        ```
    """
    return None if block.stream is None else block.stream.waited[0]
