"""Training on a split larger than the data budget: windows streamed to the block's devices.

A block whose data (:func:`~._program.program_data`) exceed its budget
(``Training(data_memory=...)``, :func:`~._budget.data_budget`) keeps the validation and test
data on its devices (where they fit beside two shards; else it evaluates them in parts,
:mod:`~._eval_parts`) and streams the training split: each epoch goes over the windows of a
:class:`~._windows.WindowPlan` in the order drawn for it, every member making its own pass over
each window (:func:`~._member.window_pass`), while a reader thread reads the next window and
transfers it (asynchronously) to the devices. At most two windows are held at a time. After the
chunk's last epoch every member is evaluated (:func:`~._member.member_evaluation`).

Each member's arithmetic is the same whatever the block (the windows, their order and the
members' keys do not depend on it), so streamed blocks are bit-identical on CPU like the others.
A chunk ends at the end of an epoch; it can also pause at a window boundary inside an epoch
(``pause()``, asked after every window but the chunk's last: a preemption notice, a checkpoint
due by time), and then returns a :class:`WindowPosition`: the epoch, the index of its next window
in the epoch's order and the epoch's training-loss sums so far. A block continued from there
(in this process or from a checkpoint that saved the position) reads the same windows in the
same order and ends bit for bit where an uninterrupted one does, its ``train_loss`` included.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import jax
import numpy as np

from .._caches import cached
from .._errors import SpecError
from ..problems import EVALUATED, Dataset, Split, hdf5_reader, outlined
from ..spec import Problem, SweepSpec, size_text
from ._budget import data_budget, nbytes, streams
from ._eval_parts import EvalParts, eval_parts, evaluate_in_parts, item_bytes
from ._layout import host_aligned, let_go
from ._member import member_evaluation, window_pass
from ._program import PROGRAMS, TrainState, describe, members_program, program_data
from ._reader import Source, WindowBuffers, read_window
from ._windows import WindowPlan, plan_windows


def array_source(data: Dataset, unroll: int) -> Source:
    """The training split of ``data`` held in host memory: its pairs, or with ``unroll > 1`` its
    trajectories."""
    if unroll == 1:
        x, y = data.train
        return Source(len(x), x[0].nbytes + y[0].nbytes, 1, lambda a, b: (x[a:b], y[a:b]))
    traj = data.train_traj
    assert traj is not None  # check_data: unrolled training has training trajectories
    return Source(len(traj), traj[0].nbytes, traj.shape[1] - unroll, lambda a, b: traj[a:b])


def file_reader(problem: Problem, data: Dataset, split: str, unrolled: bool) -> Callable[[int, int], Any] | None:
    """``read(start, stop)`` of the items of ``split`` (pairs, or ``unrolled`` trajectories) of an
    ``"hdf5"`` ``problem`` from its files (:func:`~sweep.problems.hdf5_reader`; a relative local
    path taken from ``data.origin``), where ``data`` left them there (a
    trial's data: :meth:`sweep.problems.ProblemData.load`); else ``None`` (data given whole, or
    the driver's outline, which ``sweep plan`` measures a block on as it is, reading no file)."""
    arrays = data.trajectories(split) if unrolled else getattr(data, split).x
    if problem.name != "hdf5" or not outlined(arrays):
        return None
    return hdf5_reader(dict(problem.options), data.normalization, unrolled, split, data.origin)


def file_source(problem: Problem, data: Dataset, unroll: int) -> Source | None:
    """The training split of ``data`` read from the files of an ``"hdf5"`` ``problem`` where
    ``data`` left it there (:func:`file_reader`), else ``None``."""
    read = file_reader(problem, data, "train", unroll > 1)
    if read is None:
        return None
    traj = data.trajectories("train")
    unit = 1 if unroll > 1 or traj is None else len(data.train.x) // len(traj)  # pairs per trajectory
    return array_source(data, unroll)._replace(read=read, unit=unit)


def read_held(
    problem: Problem, data: Dataset, unroll: int, rollout_steps: int, train: bool, evaluated: bool
) -> Dataset:
    """``data`` with what its program reads (:func:`~._program.program_data`) held in memory,
    read from the files where ``data`` hold only its outline (:func:`file_reader`): the training
    split (``train``), the validation and test pairs and, with ``rollout_steps``, their
    trajectories (``evaluated``), as aligned host arrays (:func:`~._layout.host_aligned`: what
    the CPU devices read in place, so that they and this dataset share one copy); the rest as
    it is."""
    changes: dict[str, Any] = {}
    source = file_source(problem, data, unroll) if train else None
    if source is not None:
        whole = host_aligned(source.read(0, source.items))
        changes["train_traj" if unroll > 1 else "train"] = whole if unroll > 1 else Split(*whole)
    for split in EVALUATED if evaluated else ():
        read = file_reader(problem, data, split, False)
        if read is not None:
            changes[split] = Split(*host_aligned(read(0, len(getattr(data, split).x))))
        traj = data.trajectories(split)
        read = file_reader(problem, data, split, True) if rollout_steps else None
        if read is not None and traj is not None:
            changes[f"{split}_traj"] = host_aligned(read(0, len(traj)))
    return data._replace(**changes) if changes else data


def held_part(needed: Dataset, evaluation: bool = True) -> Dataset:
    """What a streaming block keeps on its devices: its program data without the training split
    (and, ``evaluation=False``, without the validation and test data: evaluated in parts)."""
    x, y = needed.train
    held = needed._replace(train=Split(x[:0], y[:0]), train_traj=None)
    if evaluation:
        return held
    empty = {split: Split(*(a[:0] for a in getattr(needed, split))) for split in EVALUATED}
    return held._replace(**empty, val_traj=None, test_traj=None)


def window_plan(spec: SweepSpec, data: Dataset, budget: int | None = None) -> WindowPlan | None:
    """How ``spec`` streams ``data`` under ``budget`` (default: :func:`~._budget.data_budget`), or
    ``None`` where its data fit.

    Raises:
        SpecError: The budget is too small to stream (:func:`~._windows.plan_windows`).
    """
    t = spec.training
    budget = data_budget(t) if budget is None else budget
    needed = program_data(data, t.unroll > 1, t.rollout_steps)
    if not streams(needed, budget):
        return None
    source = array_source(data, t.unroll)
    return plan_windows(
        source.items,
        source.item_bytes,
        nbytes(held_part(needed)),
        budget,
        t.batch_size,
        source.per_item,
        max(item_bytes(needed)),
    )


def device_data_bytes(spec: SweepSpec, data: Dataset, budget: int | None = None) -> tuple[int, WindowPlan | None]:
    """``(bytes, plan)``: the most a block's data take on its device(s) at a time (its program data
    where they fit ``budget``, else :attr:`~._windows.WindowPlan.device_bytes`) and its
    :class:`~._windows.WindowPlan` (``None`` where the data fit)."""
    t = spec.training
    needed = program_data(data, t.unroll > 1, t.rollout_steps)
    plan = window_plan(spec, data, budget)
    return (nbytes(needed) if plan is None else plan.device_bytes), plan


def data_line(spec: SweepSpec, data: Dataset) -> str | None:
    """One line on how ``spec`` streams ``data``: the size of what its program reads, the
    budget, the windows and shards (``sweep plan`` prints it); ``None`` where the data fit."""
    t = spec.training
    budget = data_budget(t)
    total = nbytes(program_data(data, t.unroll > 1, t.rollout_steps))
    _, plan = device_data_bytes(spec, data, budget)
    if plan is None:
        return None
    default = "" if t.data_memory is not None else " (default: a quarter of the device's or this host's memory)"
    return f"data of {spec.problem.name!r}: {size_text(total)}, budget {size_text(budget)}{default}: {plan}"


@cached(PROGRAMS)
def window_program(structure: str, shapes: tuple, layout: str, num_devices: int):
    """The jitted ``(state, (window, w)) -> (state, mean loss per member)`` of one pass of every
    member over one window (:func:`~._member.window_pass`); one compilation per window shape."""
    program = describe(structure, shapes)
    return members_program(lambda c, h, w: window_pass(program, c, h, w), layout, num_devices)


@cached(PROGRAMS)
def evaluation_program(structure: str, shapes: tuple, layout: str, num_devices: int):
    """The jitted ``(state, held data) -> (state, evaluation per member)``."""
    program = describe(structure, shapes)
    return members_program(lambda c, h, d: (c, member_evaluation(program, c[0], d)), layout, num_devices)


class Stream(NamedTuple):
    """A block's streamed training split: the windows, where they go, the programs, and the
    seconds the trainer waited for the reader (``waited[0]``, over the block's life)."""

    source: Source
    plan: WindowPlan
    data_seed: int
    place: Any
    windows: Any
    evaluation: Any
    batch_size: int
    waited: list[float]
    parts: EvalParts | None = None  # the validation and test data evaluated in parts, else held on the devices


def make_stream(
    spec: SweepSpec,
    data: Dataset,
    structure: str,
    shapes: tuple,
    layout: str,
    devices: int,
    place: Any,
) -> Stream | None:
    """The :class:`Stream` of a block, or ``None`` where its data fit the budget."""
    plan = window_plan(spec, data)
    if plan is None:
        return None
    t = spec.training
    unroll = t.unroll
    parts = None
    if plan.eval_part_bytes:
        needed = program_data(data, unroll > 1, t.rollout_steps)
        in_files = functools.partial(file_reader, spec.problem, data)
        parts = eval_parts(held_part(needed), plan.eval_part_bytes, structure, shapes, layout, devices, place, in_files)
    return Stream(
        file_source(spec.problem, data, unroll) or array_source(data, unroll),
        plan,
        int(spec.problem.options.get("data_seed", 0)),
        place,
        window_program(structure, shapes, layout, devices),
        evaluation_program(structure, shapes, layout, devices),
        spec.training.batch_size,
        [0.0],
        parts,
    )


def _window(stream: Stream, shards: np.ndarray, buffers: WindowBuffers, turn: int):
    """Window ``turn`` of the chunk (its ``shards``), read into set ``turn`` of ``buffers``."""
    return read_window(stream.source, stream.plan, stream.place, shards, functools.partial(buffers.take, turn))


def _compile_windows(stream: Stream, state: TrainState, window: Any, counts: set[int]) -> None:
    """Compile the window program for windows of each of ``counts`` items (shaped and placed as
    ``window``) now (a cached program is only looked up): a chunk's windows come in up to four
    sizes (the shards split over the windows unevenly, the last shard shorter), and compiled as
    they came, the last shape's compiler worked beside two windows, the largest moment of a
    trial that compiles (+122 MiB over the same trial with its programs cached, at a 1 GiB budget)."""
    for count in sorted(counts):
        shaped = jax.tree_util.tree_map(
            lambda a, count=count: jax.ShapeDtypeStruct((count, *a.shape[1:]), a.dtype, sharding=a.sharding), window
        )
        stream.windows.lower(state, (shaped, np.int32(0))).compile()


def _sizes(plan: WindowPlan) -> tuple[int, int]:
    return plan.num_windows, plan.num_shards


class WindowPosition(NamedTuple):
    """Where a streamed block paused inside an epoch (at a window boundary), and what it needs to
    go on bit for bit: the next window of epoch ``epoch``'s order, and that epoch's minibatch
    losses so far (summed in float64 per member, over ``steps`` minibatches; the epoch's
    ``train_loss`` is their mean at its end). ``windows`` and ``shards``: the block's
    :class:`~._windows.WindowPlan` (a block resumed under another plan is refused)."""

    epoch: int
    window: int
    loss_sums: np.ndarray  # float64 [members]
    steps: int
    windows: int
    shards: int

    def check(self, plan: WindowPlan | None, epoch: int) -> None:
        """Raise a :class:`SpecError` where a block streamed by ``plan`` (``None``: its data fit)
        whose state stands at ``epoch`` cannot continue from this position."""
        if epoch != self.epoch:
            raise SpecError(
                f"the checkpoint stopped inside epoch {self.epoch} but its state stands at epoch {epoch}: the "
                f"checkpoint was altered; resume from another one"
            )
        if plan is None or (plan.num_windows, plan.num_shards) != (self.windows, self.shards):
            now = (
                "its data fit the budget" if plan is None else f"{plan.num_windows} windows of {plan.num_shards} shards"
            )
            raise SpecError(
                f"the checkpoint stopped at window {self.window} of {self.windows} ({self.shards} shards) of epoch "
                f"{self.epoch}; this block cannot continue from there ({now}): "
                f"give it the `training.data_memory` it was trained with"
            )


def streamed_chunk(
    stream: Stream,
    state: TrainState,
    held: Dataset,
    num_epochs: int,
    position: WindowPosition | None = None,
    pause: Callable[[], bool] | None = None,
) -> tuple[TrainState, dict[str, Any] | None, WindowPosition | None]:
    """``num_epochs`` streamed epochs of a placed ``state`` (the first continued from
    ``position`` where given), then its evaluation on the ``held`` data: ``(state, evaluation,
    None)``, ``state`` and ``evaluation`` as a chunk program returns them (``"train_loss"``: the
    mean loss of the last epoch's minibatches).

    ``pause``, asked after every window but the chunk's last, stops the chunk there when it
    says so: ``(state, None, position)`` then, ``position`` the :class:`WindowPosition` to go
    on from (``num_epochs`` counted from the epoch in progress, as here)."""
    first = int(np.asarray(state.epoch)[0])
    windows = [
        (epoch, index, len(order), shards)
        for epoch in range(first, first + num_epochs)
        for order in [stream.plan.order(stream.data_seed, epoch)]
        for index, shards in enumerate(order)
    ][0 if position is None else position.window :]
    sums: Any = 0.0 if position is None else position.loss_sums  # the current epoch's minibatch losses summed
    steps = 0 if position is None else position.steps
    reader, buffers = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sweep-reader"), WindowBuffers(stream.plan)
    try:
        pending = reader.submit(_window, stream, windows[0][3], buffers, 0)
        for k, (epoch, index, count, _) in enumerate(windows):
            start = time.perf_counter()
            window = pending.result()
            stream.waited[0] += time.perf_counter() - start
            if k == 0:  # before the next window is read: the compiler beside one window, not two
                _compile_windows(stream, state, window, {stream.plan.items_of(w[3]) for w in windows})
            if k + 1 < len(windows):  # read the next window (across epochs) while this one trains
                pending = reader.submit(_window, stream, windows[k + 1][3], buffers, k + 1)
            state, loss = stream.windows(state, (window, np.int32(index)))
            batches = jax.tree_util.tree_leaves(window)[0].shape[0] * stream.source.per_item // stream.batch_size
            if index == 0:
                sums, steps = 0.0, 0
            # waiting for the loss is required: the reader rewrites this window's buffers two
            # windows on (WindowBuffers), which the devices must be done reading by then
            sums, steps = sums + np.asarray(loss, np.float64) * batches, steps + batches
            if index + 1 == count:  # the epoch's last window
                state = state._replace(epoch=state.epoch + 1)
            if k + 1 < len(windows) and pause is not None and pause():
                plan = stream.plan
                if index + 1 == count:  # between two epochs of the chunk: nothing of the next one yet
                    return state, None, WindowPosition(epoch + 1, 0, np.zeros_like(sums), 0, *_sizes(plan))
                return state, None, WindowPosition(epoch, index + 1, sums, steps, *_sizes(plan))
        del window, pending  # the last window (the future holds it too) goes before the evaluation
    finally:  # the read in flight ends before the chunk returns: never more than two windows at a time
        reader.shutdown(wait=True, cancel_futures=True)
    owners = buffers.owners()
    del buffers
    let_go(stream.place, owners)  # the windows' arrays freed before the evaluation, not at jaxlib's next transfer
    if stream.parts is not None:
        return state, {"train_loss": (sums / steps).astype(np.float32), **evaluate_in_parts(stream.parts, state)}, None
    _, evaluation = stream.evaluation(state, held)
    return state, {"train_loss": (sums / steps).astype(np.float32), **evaluation}, None
