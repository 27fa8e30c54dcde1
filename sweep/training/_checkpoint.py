"""A trained (or half-trained) block on disk: Equinox leaves of its state plus a small JSON.

Layout of a block directory (written aside and renamed into place, never pickled)::

    block.json   format, structural spec, seeds, hyperparameter sets, shapes, trial id, the size
                 of state.eqx ("state_bytes"), and the history: epochs, train loss, {"val": {"loss": ..., <metric>: ...}, "test": {...}},
                 and the latest rollout curves {"val_rollout": {<metric>: ...}, "test_rollout": ...};
                 a streamed block saved inside an epoch (format 3) also its "position": the
                 epoch, the next window, the epoch's loss sums (float64) and steps so far
    state.eqx    eqx.tree_serialise_leaves(TrainState) of the block (leading member axis)

Trials write one per report (Ray Tune stores it as a ``tune.Checkpoint`` under
``<sweep>/<experiment>/<trial>/checkpoint_NNNNNN/``); :func:`find_blocks` finds the newest
one of every trial without reading any leaves, and :func:`load_block` reads one back.
"""

from __future__ import annotations

import functools
import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import equinox as eqx
import jax
import numpy as np
import pyarrow.fs as pafs
from jaxtyping import PyTree

from .._errors import SpecError, StoreError
from .._fs import ONE_COMPONENT, confined, files_under, flush_dir, read_text, regular_size, synced
from .._layout import BLOCK_META, BLOCK_STATE
from .._leaves import read_arrays
from ..metrics import summarised_metric
from ..problems import EVALUATED
from ..spec import SweepSpec, is_number, seed_tuple
from ._block import state_skeleton
from ._loop import History
from ._program import Shapes, TrainState
from ._stream import WindowPosition

FORMAT = 3  # 3: a streamed block saved inside an epoch, with its window position (a block saved at
# a report is written in format 2, as before); 2: validation and test curves of the loss and every
# metric (format 1: test loss only)
OLDEST = 2  # the oldest format this seed-sweep reads


class SavedBlock(NamedTuple):
    spec: SweepSpec
    seeds: tuple[int, ...]
    hparams: tuple[dict[str, float], ...]
    shapes: Shapes
    state: TrainState
    history: History
    trial_id: str
    stopped_early: bool


def _floats(curve: np.ndarray) -> list:
    return np.asarray(curve, np.float64).tolist()


def _history_json(history: History) -> dict[str, Any]:
    return {
        "epoch": history.epoch.tolist(),
        "train_loss": _floats(history.train_loss),
        **{split: {name: _floats(c) for name, c in getattr(history, split).items()} for split in EVALUATED},
        "diverged": np.asarray(history.diverged).tolist(),
        **{
            f"{split}_rollout": {name: _floats(c) for name, c in getattr(history, f"{split}_rollout").items()}
            for split in EVALUATED
        },
    }


def _position_json(position: WindowPosition) -> dict[str, Any]:
    return {**position._asdict(), "loss_sums": _floats(position.loss_sums)}  # float64: exact in JSON


def _position(meta: dict[str, Any]) -> WindowPosition | None:
    saved = meta.get("position")
    if saved is None:
        return None
    return WindowPosition(**{**saved, "loss_sums": np.asarray(saved["loss_sums"], np.float64)})


def save_block(
    directory: str | os.PathLike[str],
    *,
    spec: SweepSpec,
    state: TrainState,
    history: History,
    shapes: Shapes,
    trial_id: str = "",
    stopped_early: bool = False,
    flush: bool = True,
) -> Path:
    """Write a block directory atomically (a sibling temp dir, flushed to the disk unless not ``flush``, renamed
    over ``directory``); a ``history`` paused inside an epoch (:attr:`History.position`) saves where, to go on."""
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    position = history.position
    meta = {
        "format": OLDEST if position is None else FORMAT,  # a report's checkpoint is as it always was
        "spec": spec.to_dict(),
        "config_id": spec.config_id,
        "seeds": list(history.seeds),
        "hparams": [dict(h) for h in history.hparams],
        "hparam_names": sorted(state.hparams),
        "shapes": Shapes.of(shapes).stored(),
        "history": _history_json(history),
        "trial_id": trial_id,
        "stopped_early": stopped_early,
        **({} if position is None else {"position": _position_json(position)}),
    }
    eqx.tree_serialise_leaves(tmp / BLOCK_STATE, state)
    meta["state_bytes"] = (tmp / BLOCK_STATE).stat().st_size  # a copy of the block torn short is told apart
    (tmp / BLOCK_META).write_text(json.dumps(meta))
    if flush:
        synced(str(tmp))  # on the disk before it takes the place of the checkpoint it replaces
    old = None
    if directory.exists():
        old = directory.with_name(f".{directory.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        directory.rename(old)
    tmp.rename(directory)
    if flush:
        flush_dir(directory.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return directory


class BlockRef:
    """A block checkpoint's ``block.json``, read once: where it lies and what it holds."""

    path: str  # the block's directory
    meta: dict[str, Any]  # its block.json

    def __init__(self, path: str, meta: dict[str, Any]):
        self.path, self.meta = path, meta

        def name(field: str) -> str:  # an id that may name a directory: one path component, or none
            value = meta.get(field, "")
            return value and confined(value, f"{path}/{BLOCK_META} `{field}`", ONE_COMPONENT, "one path component")

        self.trial_key: str = name("trial_id")
        self.config_id: str = name("config_id")
        self.seeds: tuple[int, ...] = tuple(meta["seeds"])
        self.hparams: tuple[dict[str, float], ...] = tuple(dict(h) for h in meta["hparams"])
        epochs = meta["history"]["epoch"]
        self.epoch: int = epochs[-1] if epochs else 0  # of the last report
        self.position: WindowPosition | None = _position(meta)

    @property
    def progress(self) -> tuple[int, int]:
        """``(epoch, window)`` reached: the block's next window (0 at a report); orders checkpoints."""
        return (self.epoch, 0) if self.position is None else (self.position.epoch, self.position.window)

    def __repr__(self) -> str:
        inside = (
            "" if self.position is None else f", paused at window {self.position.window} of epoch {self.position.epoch}"
        )
        return f"BlockRef({self.path!r}, trial {self.trial_key!r}, epoch {self.epoch}{inside})"

    @functools.cached_property
    def spec(self) -> SweepSpec:
        """The block's structural spec (parsed and validated once)."""
        return SweepSpec.from_dict(self.meta["spec"])

    @property
    def shapes(self) -> Shapes:
        return Shapes.of(self.meta["shapes"])

    @property
    def history(self) -> History:
        h, m = self.meta["history"], len(self.seeds) * len(self.hparams)

        def curve(values, name: str = "") -> np.ndarray:  # rollout summaries are float64, the rest float32
            return np.asarray(values, np.float64 if summarised_metric(name) else np.float32).reshape(m, -1)

        return History(
            seeds=self.seeds,
            hparams=self.hparams,
            epoch=np.asarray(h["epoch"], np.int32),
            train_loss=curve(h["train_loss"]),
            **{split: {name: curve(c, name) for name, c in h[split].items()} for split in EVALUATED},
            diverged=np.asarray(h["diverged"], bool),
            **{
                f"{split}_rollout": {name: curve(c) for name, c in h.get(f"{split}_rollout", {}).items()}
                for split in EVALUATED
            },
            position=self.position,
        )

    def skeleton(self) -> TrainState:
        """Shapes and dtypes of the block's state (nothing read or computed)."""
        return state_skeleton(self.spec, len(self.seeds) * len(self.hparams), self.meta["hparam_names"], self.shapes)

    def load(self, directory: str | os.PathLike[str] | None = None) -> SavedBlock:
        """The whole block, its state (NumPy leaves) read from ``directory`` (default: :attr:`path`, local)."""
        path = Path(self.path if directory is None else directory) / BLOCK_STATE
        leaves, treedef = jax.tree_util.tree_flatten(self.skeleton())
        try:
            size = regular_size(pafs.LocalFileSystem(), str(path))  # (a FIFO in its place: refused, not opened)
            with open(path, "rb") as f:
                arrays = read_arrays(f, leaves, str(path), f"the state of trial {self.trial_key!r}", size)
                if f.read(1):
                    raise StoreError(
                        f"{str(path)!r}: data past the block's {len(leaves)} state leaves; it is not this block's state"
                    )
        except OSError as e:
            raise StoreError(f"{str(path)!r}: cannot be read ({e})") from None
        return SavedBlock(
            self.spec,
            self.seeds,
            self.hparams,
            self.shapes,
            jax.tree_util.tree_unflatten(treedef, arrays),
            self.history,
            self.trial_key,
            bool(self.meta["stopped_early"]),
        )

    def read_params(self, filesystem: pafs.FileSystem) -> PyTree:
        """The block's parameters (NumPy leaves with a leading member axis), streamed from its
        ``state.eqx`` on ``filesystem``: only the leading records, the optimizer state after
        them is not read."""
        path = f"{self.path}/{BLOCK_STATE}"
        leaves, treedef = jax.tree_util.tree_flatten(self.skeleton().params)
        try:
            size = regular_size(filesystem, path)  # (a FIFO in its place: refused before it is opened)
            size = filesystem.get_file_info(path).size if size is None else size
            with filesystem.open_input_stream(path) as f:
                arrays = read_arrays(f, leaves, path, f"the parameters of trial {self.trial_key!r}", size)
        except OSError as e:
            raise StoreError(
                f"{path!r}: cannot be read ({e}); if a newer checkpoint replaced it meanwhile, aggregate again"
            ) from None
        return jax.tree_util.tree_unflatten(treedef, arrays)


def _torn(ref: BlockRef, size: int | None) -> str | None:
    """Why ``ref``'s ``state.eqx`` (``size`` bytes; None: no regular file) is not what its block.json records."""
    expected = ref.meta.get("state_bytes")
    if size is None:
        return f"its {BLOCK_STATE} is missing or not a regular file"
    if expected is not None and size != expected:
        return f"its {BLOCK_STATE} holds {size} bytes, its {BLOCK_META} says {expected} (a copy stopped part way)"
    return None


def _check_meta(meta: Any, where: str) -> None:
    """A :class:`StoreError` naming the field unless ``meta`` holds what :func:`save_block` writes,
    of its kinds (a torn upload, or a forged file, fails here rather than deep in a reader)."""

    def need(ok: bool, field: str, want: str) -> None:
        if not ok:
            value = meta.get(field) if isinstance(meta, dict) else meta
            raise StoreError(f"{where!r}: `{field}` is {str(value)[:80]!r}; expected {want}; not a block checkpoint")

    seeds, hparams = meta.get("seeds"), meta.get("hparams")
    need(isinstance(seeds, list) and _seeds(seeds), "seeds", "distinct seeds in [0, 2**32)")
    need(
        isinstance(hparams, list) and all(isinstance(h, dict) and all(map(_finite, h.values())) for h in hparams),
        "hparams",
        "a list of {name: finite number}",
    )
    for field, kind in (("spec", dict), ("history", dict), ("shapes", list), ("hparam_names", list)):
        need(isinstance(meta.get(field), kind), field, f"a JSON {'object' if kind is dict else 'list'}")
    members, history = len(seeds) * len(hparams), meta["history"]
    epochs = history.get("epoch")
    reports = len(epochs) if isinstance(epochs, list) and all(type(e) is int for e in epochs) else -1
    need(reports >= 0 and epochs == sorted(set(epochs)), "history", "increasing report epochs")
    need(all(isinstance(history.get(k), dict) for k in EVALUATED), "history", f"curves of {', '.join(EVALUATED)}")
    kept = [history.get("train_loss"), *(c for k in EVALUATED for c in history[k].values())]
    rollouts = [c for k in EVALUATED for c in (history.get(f"{k}_rollout") or {}).values()]
    need(
        _curves(kept, (members, reports)) and _curves(rollouts, (members, -1)), "history", f"{members} members' curves"
    )
    need(_curves([history.get("diverged")], (members,), lambda x: isinstance(x, bool)), "history", "diverged flags")
    size = meta.get("state_bytes")
    need(size is None or (type(size) is int and size > 0), "state_bytes", "the size of state.eqx in bytes")
    position = meta.get("position")
    if position is not None:
        fields = set(WindowPosition._fields)
        need(
            isinstance(position, dict)
            and set(position) == fields
            and all(type(position[f]) is int for f in fields - {"loss_sums"})
            and _curves([position["loss_sums"]], (members,)),
            "position",
            f"a window position ({', '.join(WindowPosition._fields)})",
        )


def _curves(curves: list, shape: tuple[int, ...], kind: Callable[[Any], bool] = is_number) -> bool:
    """Whether each of ``curves`` (JSON lists) is an array of ``shape`` (-1: any length) of numbers
    (NaN and infinity among them: a diverged member's)."""
    if not all(isinstance(c, list) and all(kind(x) for x in _flat(c)) for c in curves):
        return False
    try:
        arrays = [np.asarray(c) for c in curves]
    except (ValueError, TypeError, OverflowError):
        return False
    return all(
        a.ndim == len(shape) and all(n == -1 or n == m for n, m in zip(shape, a.shape, strict=True)) for a in arrays
    )


def _flat(value: Any) -> list:
    return [x for v in value for x in _flat(v)] if isinstance(value, list) else [value]


def _finite(value: Any) -> bool:
    try:
        return is_number(value) and math.isfinite(value)
    except OverflowError:  # (an int past float's range)
        return False


def _seeds(seeds: list) -> bool:
    try:
        return bool(seed_tuple(seeds))
    except SpecError:
        return False


def _read_meta(text: str, where: str) -> dict[str, Any]:
    try:
        meta = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as e:
        raise StoreError(f"{where!r}: not valid JSON ({str(e)[:200]})") from None
    if not isinstance(meta, dict):
        raise StoreError(f"{where!r}: a JSON {type(meta).__name__}; expected an object; not a block checkpoint")
    if type(meta.get("format", 0)) is not int:
        raise StoreError(
            f"{where!r}: `format` is {str(meta['format'])[:20]!r}; expected an integer; not a block checkpoint"
        )
    if meta.get("format", 0) > FORMAT:
        raise StoreError(
            f"{where!r}: format {meta['format']} is newer than this seed-sweep reads ({FORMAT}); upgrade seed-sweep"
        )
    if meta.get("format", 0) < OLDEST:
        raise StoreError(
            f"{where!r}: format {meta.get('format')} was written by an older seed-sweep (trained without a "
            f"validation split; this one reads formats {OLDEST}-{FORMAT}); train the block again"
        )
    _check_meta(meta, where)
    return meta


def read_block(directory: str | os.PathLike[str]) -> BlockRef:
    """A local block directory's ``block.json`` (written by :func:`save_block`), nothing else read
    and nothing built: check that it is the block you expect before :meth:`BlockRef.load`, whose
    spec builds its model (a block.json may name any factory)."""
    meta_path = Path(directory) / BLOCK_META
    try:
        text = meta_path.read_text()
    except FileNotFoundError:
        raise StoreError(f"{str(meta_path)!r}: missing; {str(directory)!r} is not a block checkpoint") from None
    return BlockRef(str(directory), _read_meta(text, str(meta_path)))


def load_block(directory: str | os.PathLike[str]) -> SavedBlock:
    """Read a local block directory written by :func:`save_block` (no pickle)."""
    return read_block(directory).load()


def find_blocks(
    sweep_dir: str,
    filesystem: pafs.FileSystem,
    known: dict[str, BlockRef] | None = None,
    reported: bool = False,
    passed_over: dict[str, str] | None = None,
) -> dict[str, BlockRef]:
    """The newest block checkpoint of every trial under ``sweep_dir``, by trial key (``reported``:
    the newest at a report, leaving out those of a streamed block paused inside an epoch, whose
    weights are past its history's last report: what a store aggregates).

    Hidden directories are skipped, and so is a ``block.json`` that cannot be read (being
    written, a torn upload) or whose ``state.eqx`` is not a regular file of the size it records
    (a copy stopped part way: Tune copies a checkpoint's files in no set order): an older
    checkpoint of that trial stands (``passed_over``, where given, gets such a checkpoint's path
    and why). ``known`` (``block.json`` path -> its checkpoint, updated here) holds files read
    before: a checkpoint directory is never rewritten, so those are not read again.
    """
    known = {} if known is None else known
    try:
        paths = files_under(filesystem, sweep_dir)
    except OSError as e:
        raise StoreError(f"{sweep_dir!r}: cannot list ({e})") from None
    found: dict[str, BlockRef] = {}
    for path in paths:
        relative = path[len(sweep_dir.rstrip("/")) :]
        if path.rsplit("/", 1)[-1] != BLOCK_META or "/." in relative:
            continue
        ref = known.get(path)
        if ref is None:
            try:
                ref = BlockRef(path.rsplit("/", 1)[0], _read_meta(read_text(filesystem, path), path))
                torn = _torn(ref, paths.get(f"{ref.path}/{BLOCK_STATE}"))
                if torn is not None:
                    if passed_over is not None:
                        passed_over[ref.path] = torn
                    continue  # looked at again at the next listing: the copy may be going on
            except (OSError, StoreError, KeyError):
                continue
            known[path] = ref
        if reported and ref.position is not None:
            continue
        if ref.trial_key not in found or ref.progress > found[ref.trial_key].progress:
            found[ref.trial_key] = ref
    return found
