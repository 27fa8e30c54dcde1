"""The training loop, written once: :func:`fit` runs a block chunk by chunk and keeps its history.

``train_block``, the Ray trainable (which saves and reports at every yield) and the tests all
train through :func:`fit`; a block resumed from a checkpoint continues the same loop from its
saved state and history.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import NamedTuple, Unpack

import equinox as eqx
import jax
import numpy as np
from jaxtyping import Bool, Float, Int

from .._errors import SpecError
from ..metrics import rollout_summaries
from ..problems import EVALUATED
from ..spec import SweepSpec, Training
from ._block import Block, BlockOptions, HParams, chunk_until, hparam_sets, init_block, model_of
from ._program import TrainState
from ._stream import WindowPosition


class History(NamedTuple):
    """Per-member values at each report (end of every chunk), in block member order.

    Attributes:
        seeds: The block's seeds.
        hparams: Its hyperparameter sets; member ``i`` is ``(hparams[i // len(seeds)],
            seeds[i % len(seeds)])``.
        epoch: The epoch of every report.
        train_loss: ``[members, reports]`` mean training loss of each report's last epoch.
        val: ``"loss"`` and every metric name -> its ``[members, reports]`` curve on the validation
            set; empty without a validation set. With rollouts (``Training(rollout_steps=T)``) also
            the summaries of each rollout metric's curve at every report (float64,
            :func:`sweep.metrics.rollout_summary_names`): ``"rollout_gmean_<m>"``, the geometric
            mean over steps ``1..min(T, 100)``, and ``"rollout_window_6_12_<m>"``, ... (for
            ``correlation``: ``"rollout_valid_steps_correlation"``).
        test: The same on the test set.
        diverged: ``[members]``: the member's loss or weights became NaN/inf (it stopped updating).
        val_rollout: Each rollout metric -> its ``[members, T]`` curve at the latest report (entry
            ``t - 1``: after ``t`` steps, averaged over the split's trajectories).
        test_rollout: The same on the test trajectories.
        position: ``None`` at a report. Where a streamed block paused inside an epoch since its
            last report (:func:`fit` with ``pause``), the :class:`~._stream.WindowPosition` it
            goes on from (saved with its checkpoint); the reports stay those of the last report.

    Examples:
        ```python
        model, history = sweep.train_block(spec, seeds=[0, 1, 2])
        history.val_loss[:, -1]  # each member's latest validation loss
        ```
    """

    seeds: tuple[int, ...]
    hparams: tuple[dict[str, float], ...]
    epoch: Int[np.ndarray, " r"]
    train_loss: Float[np.ndarray, "m r"]
    val: dict[str, Float[np.ndarray, "m r"]]
    test: dict[str, Float[np.ndarray, "m r"]]
    diverged: Bool[np.ndarray, " m"]
    val_rollout: Mapping[str, Float[np.ndarray, "m t"]] = MappingProxyType({})
    test_rollout: Mapping[str, Float[np.ndarray, "m t"]] = MappingProxyType({})
    position: WindowPosition | None = None

    @property
    def paused(self) -> bool:
        """Whether this history stands inside an epoch (a pause, not a report)."""
        return self.position is not None

    @property
    def val_loss(self) -> Float[np.ndarray, "m r"] | None:
        """The validation loss curves (``None`` without a validation set)."""
        return self.val.get("loss")

    @property
    def test_loss(self) -> Float[np.ndarray, "m r"]:
        return self.test["loss"]

    @classmethod
    def empty(cls, block: Block) -> History:
        """The history of a block before its first report."""
        m = block.num_members
        return cls(
            block.seeds, block.hparams, np.zeros(0, np.int32), np.zeros((m, 0), np.float32), {}, {}, np.zeros(m, bool)
        )

    def reported(self, state: TrainState, evaluation: Mapping) -> History:
        """This history with the report of a chunk that ended in ``state`` appended
        (``evaluation``: what :func:`sweep.run_chunk` returned with it)."""
        none = np.zeros((len(self.train_loss), 0), np.float32)

        def grown(curve, value):
            value = np.asarray(value)
            value = value if value.dtype == np.float64 else value.astype(np.float32)
            return np.concatenate([curve, value[:, None]], axis=1)

        latest = {
            f"{split}_rollout": {name: np.asarray(c, np.float32) for name, c in evaluation[f"{split}_rollout"].items()}
            for split in EVALUATED
            if f"{split}_rollout" in evaluation
        }
        values = {
            split: {
                **evaluation.get(split, {}),
                **{
                    name: summary
                    for m, c in latest.get(f"{split}_rollout", {}).items()
                    for name, summary in rollout_summaries(m, c).items()
                },
            }
            for split in EVALUATED
        }
        curves = {
            split: {name: grown(getattr(self, split).get(name, none), value) for name, value in values[split].items()}
            for split in EVALUATED
        }
        return self._replace(
            epoch=np.append(self.epoch, np.int32(state.epoch[0])),
            train_loss=grown(self.train_loss, evaluation["train_loss"]),
            diverged=np.asarray(state.diverged),
            **curves,
            **latest,
            position=None,
        )


def chunks(training: Training, done_epochs: int = 0) -> list[int]:
    """Epochs per compiled call after ``done_epochs``: up to each multiple of ``report_every``,
    the last one possibly shorter (``Training(epochs=5, report_every=2)`` -> ``[2, 2, 1]``)."""
    ends = [*range(training.report_every, training.epochs, training.report_every), training.epochs]
    starts = [0, *ends[:-1]]
    return [end - max(start, done_epochs) for start, end in zip(starts, ends) if end > done_epochs]


def fit(
    block: Block, state: TrainState, history: History | None = None, pause: Callable[[], bool] | None = None
) -> Iterator[tuple[TrainState, History]]:
    """Train ``block`` from ``state`` to its spec's epochs, one compiled chunk at a time.

    Args:
        block: The block's program (:func:`init_block`).
        state: Its state: the initial one, or one saved by a checkpoint.
        history: The history so far of a resumed block (with its :attr:`History.position`
            where it was saved inside an epoch); ``None`` for a new one.
        pause: Asked after every window of a streamed block (``Training(data_memory=...)``
            smaller than its data) but a chunk's last: where it says so, the block stops at
            that window boundary and ``(state, history)`` is yielded with ``history.position``
            (a :class:`~sweep.training.WindowPosition`) saying where (no report added:
            :attr:`History.paused`). Saved there (:func:`save_block`) and resumed, or iterated
            further, the block goes on bit for bit as if it had not paused. A block whose data
            fit is never asked, nor one without ``Training(data_memory=...)`` (its windows depend
            on the machine's default budget, so a checkpoint inside an epoch could not resume on
            another machine).

    Returns:
        An iterator of ``(state, history)`` after every chunk of ``report_every`` epochs, and
        at every pause. A block that already reached its epochs yields nothing.

    Raises:
        SpecError: ``history`` is not the one saved with ``state`` (of other members, or its last
            report not at the state's epoch), or it stands inside an epoch that this block cannot
            continue (its window plan is not the one it was saved with).

    Examples:
        ```python
        block, state = sweep.init_block(spec, seeds=[0, 1])
        for state, history in sweep.fit(block, state):
            print(history.epoch[-1], history.val_loss[:, -1])
        ```
    """
    history = History.empty(block) if history is None else history
    _check_resumed(block, state, history)
    position = history.position
    for num_epochs in chunks(block.spec.training, int(state.epoch[0])):
        end = int(state.epoch[0]) + num_epochs
        while True:
            state, evaluation, position = chunk_until(block, state, end - int(state.epoch[0]), position, pause)
            if evaluation is not None:
                break
            yield state, history._replace(position=position)
        history = history.reported(state, evaluation)
        yield state, history


def _check_resumed(block: Block, state: TrainState, history: History) -> None:
    """A :class:`SpecError` unless ``history`` is the one saved with ``state`` for ``block``: its
    members (seeds, hyperparameter sets), and its last report at the state's epoch (paused inside
    an epoch: that epoch the state's, its last report at most as far)."""
    reported, reached = (int(history.epoch[-1]) if len(history.epoch) else 0), int(state.epoch[0])
    paused = history.position
    if (tuple(history.seeds), tuple(map(dict, history.hparams))) != (block.seeds, tuple(map(dict, block.hparams))):
        raise SpecError(
            f"`history`: of seeds {list(history.seeds)} and hyperparameter sets {list(history.hparams)}, the block's "
            f"are {list(block.seeds)} and {list(block.hparams)}; give the history saved with this block's state"
        )
    if (reported != reached) if paused is None else (paused.epoch != reached or reported > reached):
        raise SpecError(
            f"`history`: its last report is at epoch {reported}, the state is at epoch {reached}; give the history "
            f"saved with this state (load_block returns both), or none for a state not trained yet"
        )


def train_block(
    spec: SweepSpec, seeds: Sequence[int], hparams: HParams = None, **options: Unpack[BlockOptions]
) -> tuple[eqx.Module, History]:
    """Train one block of seeds in-process (no Ray): the pure function every trial calls.

    Members are ordered hyperparameter-set-major, then seed: member ``i`` is
    ``(hparams[i // len(seeds)], seeds[i % len(seeds)])``, as in ``history.seeds`` /
    ``history.hparams`` repeated.

    Args:
        spec: The sweep specification.
        seeds: The block's seeds.
        hparams: A dict or a list of dicts of optimizer hyperparameters (``"learning_rate"`` or
            ``"optimizer.learning_rate"``); ``None`` takes the spec's vmapped grid (or nothing).
        **options: ``data=``, the spec's dataset if already loaded (:func:`load_data`), and
            ``layout=``: ``"map"`` or ``"vmap"``, as :func:`init_block` takes them.

    Returns:
        ``(stacked_model, history)``, one ``eqx.Module`` whose array leaves have a leading member
        axis, and the :class:`History` with ``[members, reports]`` curves.

    Raises:
        SpecError: The data or the model do not fit the spec (named before training).

    Examples:
        ```python
        model, history = sweep.train_block(spec, seeds=[0, 1, 2], hparams=[{"learning_rate": 1e-3}])
        history.test_loss.shape  # (3, number of reports)
        ```
    """
    block, state = init_block(spec, seeds, hparams, **options)
    state, history = collections.deque(fit(block, state), maxlen=1).pop()  # a new block trains >= 1 chunk
    return model_of(block, state), history


def train(
    spec: SweepSpec, seed: int, hparams: Mapping[str, float] | None = None, **options: Unpack[BlockOptions]
) -> tuple[eqx.Module, History]:
    """Train one member in-process; the model has no member axis and the history arrays one row.

    Args:
        spec: The sweep specification.
        seed: The member's seed (its key is ``fold_in(key(spec.sweep_seed), seed)``).
        hparams: One set of optimizer hyperparameters (``{"learning_rate": 1e-3}``), needed when
            the spec vmaps several; ``None`` takes the spec's.
        **options: ``data=``, ``layout=``, as :func:`train_block` takes them.

    Returns:
        ``(model, history)``, a plain ``eqx.Module`` for one sample and its :class:`History`.

    Raises:
        SpecError: The data or the model do not fit the spec (named before training).

    Examples:
        ```python
        net, history = sweep.train(spec, seed=4)  # the same network as seed 4 in any block
        ```
    """
    if hparams is None and len(hparam_sets(spec, None)) > 1:
        assert spec.vmap is not None  # __post_init__ resolves None to the vmappable grid keys
        raise SpecError(
            f"`hparams`: the spec vmaps {list(spec.vmap)}; pass one set, e.g. hparams={{'learning_rate': 1e-3}}"
        )
    model, history = train_block(spec, [seed], None if hparams is None else [hparams], **options)
    params, static = eqx.partition(model, eqx.is_array)
    return eqx.combine(jax.tree_util.tree_map(lambda a: a[0], params), static), history
