"""The arrays a sweep trains on: train, validation and test splits, validated once.

Every problem yields the three splits. Where the data do not provide a validation split, it is
carved out of the training samples: ``val_fraction`` of *all* samples (train + test; default
0.1), drawn with the problem's ``data_seed``; ``val_fraction=0`` means no validation set (an
empty split). The training samples keep their order, so ``val_fraction=0`` trains on exactly
the data given.

A problem may also give *trajectories* per split, ``[samples, steps + 1, channels, *spatial]``
(float32; an emulator maps a state to the next, so the channels are the inputs' and outputs'
channels): ``Dataset.train_traj`` feeds unrolled training (``Training(unroll=K)``),
``val_traj`` / ``test_traj`` the rollout metrics (``Training(rollout_steps=T)``); ``None``
where the problem has none. A problem that gives only trajectories gets its one-step pairs
derived from them (every consecutive ``(state, next state)`` of every trajectory, trajectory by
trajectory). A validation split is then carved from the training *trajectories*, never from
pairs, so that no validation state comes from a training trajectory.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
from jaxtyping import Float, Int

from .._errors import SpecError
from ._normalize import Normalization

SPLITS = ("train", "val", "test")
EVALUATED = ("val", "test")  # the splits every report evaluates the loss and metrics on
DEFAULT_VAL_FRACTION = 0.1


class Split(NamedTuple):
    """Inputs ``(samples, channels, *spatial)`` (float32) and targets ``(samples, *target_shape)`` of
    one split: float32, or int32 where the data give integers (class labels). A target has any
    shape: the inputs' (an emulator), a vector or nothing per sample (an inverse problem's
    coefficients, a class label), or another grid (super-resolution, coarse-graining)."""

    x: Float[np.ndarray, "n c *s"]
    y: Float[np.ndarray, "n ..."] | Int[np.ndarray, "n ..."]

    @property
    def size(self) -> int:
        """The number of samples (0 for an empty validation split)."""
        return int(self.x.shape[0])


class Dataset(NamedTuple):
    """The train, validation (possibly empty) and test splits of a problem, and its trajectories.

    Attributes:
        train: The training split, ``(x, y)`` with ``x`` ``[samples, channels, *spatial]`` and ``y``
            ``[samples, *target_shape]``.
        val: The validation split (empty with ``val_fraction=0``).
        test: The test split.
        train_traj: float32 ``[samples, steps + 1, channels, *spatial]`` or ``None`` (no
            trajectories of that split). Channels and spatial shape are the inputs'
            (``sample_shape``), which then equal the targets' (``target_shape``).
        val_traj: The same for the validation split.
        test_traj: The same for the test split.
        normalization: The per-channel statistics the fields were normalised with
            (:class:`~sweep.problems.Normalization`: ``Problem(..., normalize=...)``), or ``None``
            (the fields as the problem gave them).
        history: The states one input stacks as channels (``Problem(..., history=h)``): inputs
            ``(h * channels, *spatial)``, trajectories' states ``(channels, *spatial)``.
        origin: The folder a relative local ``problem.path`` is read from where the splits are
            left in the files (a sweep's trial: the folder the sweep was started in,
            :class:`sweep.problems.ProblemData`); ``None``: the current directory.

    Examples:
        >>> import sweep
        >>> data = sweep.problems.heat1d(num_points=16, num_samples=10, trajectory_steps=5)
        >>> data.train.x.shape, data.val.size, data.test.y.shape
        ((7, 1, 16), 1, (2, 1, 16))
        >>> data.test_traj.shape
        (2, 6, 1, 16)
    """

    train: Split
    val: Split
    test: Split
    train_traj: Float[np.ndarray, "n t c *s"] | None = None
    val_traj: Float[np.ndarray, "n t c *s"] | None = None
    test_traj: Float[np.ndarray, "n t c *s"] | None = None
    normalization: Normalization | None = None
    history: int = 1
    origin: str | None = None

    @property
    def splits(self) -> tuple[Split, Split, Split]:
        """``(train, val, test)``, in :data:`SPLITS` order."""
        return self.train, self.val, self.test

    def trajectories(self, split: str) -> Float[np.ndarray, "n t c *s"] | None:
        """The trajectories of ``split`` (``"train"``, ``"val"``, ``"test"``), or ``None``."""
        return getattr(self, f"{split}_traj")

    @property
    def sample_shape(self) -> tuple[int, ...]:
        return tuple(self.train.x.shape[1:])

    @property
    def target_shape(self) -> tuple[int, ...]:
        """The shape of one target: ``(channels, *spatial)`` for an emulator, ``(k,)`` for a vector,
        ``()`` for one number or class label per sample."""
        return tuple(self.train.y.shape[1:])

    @property
    def num_train(self) -> int:
        return self.train.size

    # shorthands: data.test_x is data.test.x
    @property
    def train_x(self) -> Float[np.ndarray, "n c *s"]:
        return self.train.x

    @property
    def train_y(self) -> Float[np.ndarray, "n o *s"]:
        return self.train.y

    @property
    def val_x(self) -> Float[np.ndarray, "n c *s"]:
        return self.val.x

    @property
    def val_y(self) -> Float[np.ndarray, "n o *s"]:
        return self.val.y

    @property
    def test_x(self) -> Float[np.ndarray, "n c *s"]:
        return self.test.x

    @property
    def test_y(self) -> Float[np.ndarray, "n o *s"]:
        return self.test.y


def check_val_fraction(value: Any) -> None:
    """``problem.val_fraction`` must be a number in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise SpecError(f"`problem.val_fraction`: got {value!r}; must be a number in [0, 1) (0: no validation set)")


PAIR_LAYOUT = "(samples, channels, *spatial)"
TARGET_LAYOUT = "(samples, *target_shape)"
TRAJ_LAYOUT = "(samples, steps + 1, channels, *spatial)"
EXPECTED = (
    'four arrays (train_x, train_y, test_x, test_y) as a tuple, or a mapping {"train": (x, y), "test": '
    f'(x, y)}} with an optional "val": (x, y); inputs x {PAIR_LAYOUT}, targets y {TARGET_LAYOUT}'
)


def described(value: Any) -> str:
    """What a data source gave, in words: ``None``, ``an array of shape (3, 4)``, ``a tuple of 3
    values``, ``a dict with keys ['train']``."""
    if value is None:
        return "None"
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"an array of shape {tuple(np.shape(value))} ({value.dtype})"
    if isinstance(value, Mapping):
        return f"a {type(value).__name__} with keys {sorted(map(str, value))}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} value(s)"
    return f"a {type(value).__name__}"


def _pairs(arrays: Any, source: str) -> dict[str, tuple[Any, Any]]:
    """``{"train": (x, y), "test": (x, y)[, "val": (x, y)]}`` from four arrays or a mapping."""
    if isinstance(arrays, Mapping):
        unknown = set(arrays) - set(SPLITS)
        missing = {"train", "test"} - set(arrays)
        if unknown or missing:
            raise SpecError(f"{source}: got {described(arrays)}; expected {EXPECTED}")
        pairs = {}
        for split, pair in arrays.items():
            try:
                x, y = pair
            except (TypeError, ValueError):
                raise SpecError(
                    f"{source}: split {split!r} holds {described(pair)}; it must be an (x, y) pair of arrays, "
                    f"x {PAIR_LAYOUT} and y {TARGET_LAYOUT}"
                ) from None
            pairs[split] = (x, y)
        return pairs
    if not isinstance(arrays, (tuple, list)) or len(arrays) != 4:
        raise SpecError(f"{source}: got {described(arrays)}; expected {EXPECTED}")
    train_x, train_y, test_x, test_y = arrays
    return {"train": (train_x, train_y), "test": (test_x, test_y)}


INT32 = np.iinfo(np.int32)


def checked_array(
    a: Any, field: str, source: str, layout: str = PAIR_LAYOUT, *, keep_integers: bool = False
) -> np.ndarray:
    """``a`` as float32 NumPy (``keep_integers``: integers and booleans as int32, e.g. class
    labels): real numbers of shape ``layout`` (:data:`PAIR_LAYOUT`, :data:`TARGET_LAYOUT` or
    :data:`TRAJ_LAYOUT`: at least the dimensions it names before the starred part), no NaN or infinity.
    Errors name ``source`` and ``field`` (``train_x``, ``test_traj``, ...)."""
    a = np.asarray(a)
    if a.ndim < layout.count(",") or a.ndim == 0:
        raise SpecError(f"{source}: `{field}` has shape {a.shape}; need {layout}")
    if not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating) or a.dtype == bool):
        raise SpecError(f"{source}: `{field}` has dtype {a.dtype}; need real numbers (integers or floats)")
    if keep_integers and (np.issubdtype(a.dtype, np.integer) or a.dtype == bool):
        if a.size and (a.min() < INT32.min or a.max() > INT32.max):
            raise SpecError(
                f"{source}: `{field}` holds integers from {a.min()} to {a.max()}; integer targets must fit "
                f"int32 ({INT32.min}..{INT32.max}); give floats instead"
            )
        return a.astype(np.int32)
    with np.errstate(over="ignore", invalid="ignore"):
        a = a.astype(np.float32)
    if not np.isfinite(a.sum(dtype=np.float64)):  # a float64 sum of finite float32 values is finite
        bad = ~np.isfinite(a)
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        raise SpecError(
            f"{source}: `{field}` holds {int(bad.sum())} NaN or infinite value(s) as float32 (first at "
            f"index {at}: {a[at]}); every input and target must be a finite number"
        )
    return a


def _split(pair: tuple[Any, Any], split: str, source: str) -> Split:
    x = checked_array(pair[0], f"{split}_x", source)
    y = checked_array(pair[1], f"{split}_y", source, TARGET_LAYOUT, keep_integers=True)
    if x.shape[0] != y.shape[0]:
        raise SpecError(
            f"{source}: inputs and targets have different sample counts ({split} {x.shape[0]} vs {y.shape[0]})"
        )
    return Split(x, y)


def _traj_splits(trajectories: Mapping[str, Any] | None, source: str) -> dict[str, np.ndarray]:
    """The given trajectories, checked: float32, finite, at least two states each."""
    if trajectories is None:
        return {}
    unknown = set(trajectories) - set(SPLITS)
    if unknown:
        raise SpecError(f"{source}: trajectories of unknown split(s) {sorted(unknown)}; splits: {', '.join(SPLITS)}")
    out = {}
    for split in SPLITS:
        if trajectories.get(split) is None:
            continue
        a = checked_array(trajectories[split], f"{split}_traj", source, TRAJ_LAYOUT)
        if a.shape[1] < 2:
            raise SpecError(
                f"{source}: `{split}_traj` has shape {a.shape}: {a.shape[1]} state(s) per trajectory; "
                f"need at least 2 (steps + 1 along axis 1 of {TRAJ_LAYOUT})"
            )
        out[split] = a
    return out


def pairs_of(traj: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every ``(state, next state)`` of ``traj`` ``[n, steps + 1, c, *s]``: ``n * steps`` pairs,
    trajectory by trajectory."""
    states = traj.shape[2:]
    return traj[:, :-1].reshape(-1, *states), traj[:, 1:].reshape(-1, *states)


def held_out(size: int, count: int, data_seed: int) -> np.ndarray:
    """The mask of ``count`` of ``size`` samples drawn with ``data_seed`` (the validation samples)."""
    held = np.zeros(size, bool)
    held[np.random.default_rng(data_seed).permutation(size)[:count]] = True
    return held


def carve(train: Split, count: int, data_seed: int) -> tuple[Split, Split]:
    """``(train, val)``: ``count`` training samples drawn with ``data_seed`` become the validation
    split; both keep the samples' order."""
    held = held_out(train.size, count, data_seed)
    return Split(train.x[~held], train.y[~held]), Split(train.x[held], train.y[held])


def val_count(fraction: float, train: int, test: int, what: str, source: str) -> int:
    """How many of ``train`` training samples (or trajectories) ``fraction`` of all holds out."""
    count = max(1, round(fraction * (train + test))) if fraction > 0 else 0
    if count >= train:
        raise SpecError(
            f"`problem.val_fraction`: got {fraction!r}: {count} validation {what} would leave none of "
            f"the {train} training {what} of {source} to train on; lower it"
        )
    return count


def as_dataset(
    arrays: Any,
    source: str,
    *,
    val_fraction: float | None = None,
    data_seed: int = 0,
    trajectories: Mapping[str, Any] | None = None,
) -> Dataset:
    """Validate a problem's arrays and complete its splits; errors name ``source``.

    ``arrays``: ``(train_x, train_y, test_x, test_y)``, or ``{"train": (x, y), "test": (x, y)}``
    with an optional ``"val": (x, y)``; or ``None`` to derive the pairs from ``trajectories``
    (:func:`pairs_of`), which then needs ``"train"`` and ``"test"``. ``trajectories``:
    ``{"train": traj, "val": traj, "test": traj}``, any of them left out or ``None``.

    Without a validation split one is carved from the training samples (``val_fraction`` of all
    samples, default 0.1, drawn with ``data_seed``), or, where there are training trajectories,
    from those (``val_fraction`` of all trajectories, drawn with ``data_seed``) with their pairs:
    pairs given beside them must be theirs, one per trajectory (heat1d's first steps) or every
    consecutive pair, so that no validation state is a training one. Giving both a validation
    split and ``val_fraction`` is an error.
    """
    traj = _traj_splits(trajectories, source)
    derived = arrays is None
    if derived:
        if not traj:
            raise SpecError(f"{source}: got None; expected {EXPECTED}")
        if not {"train", "test"} <= set(traj):
            raise SpecError(
                f"{source}: without (x, y) pairs, give training and test trajectories to derive them from "
                f"(got trajectories of {', '.join(sorted(traj))} only)"
            )
        arrays = {split: pairs_of(t) for split, t in traj.items()}
    pairs = _pairs(arrays, source)
    splits = {name: _split(pair, name, source) for name, pair in pairs.items()}
    if "val" in splits and val_fraction is not None:
        raise SpecError(
            f"`problem.val_fraction`: got {val_fraction!r}, but {source} has its own validation split; "
            f"remove val_fraction, or the validation split from the data"
        )
    if "val" not in splits:
        fraction = DEFAULT_VAL_FRACTION if val_fraction is None else val_fraction
        check_val_fraction(fraction)
        if "train" in traj and "val" not in traj:
            whole = traj["train"]
            count = val_count(fraction, len(whole), len(traj.get("test", ())), "trajectories", source)
            held = held_out(len(whole), count, data_seed)
            traj["train"], traj["val"] = whole[~held], whole[held]
            if not derived:  # the pairs held out with their trajectories, or validation would share their states
                splits["train"], splits["val"] = _carved_with(splits["train"], whole, held, source)
        elif not derived:
            count = val_count(fraction, splits["train"].size, splits["test"].size, "samples", source)
            splits["train"], splits["val"] = carve(splits["train"], count, data_seed)
        if derived:
            splits |= {split: Split(*pairs_of(traj[split])) for split in ("train", "val")}
    kept = [traj[s] if s in traj and len(traj[s]) else None for s in SPLITS]  # none of a split: None
    data = Dataset(
        splits["train"], splits["val"], splits["test"], train_traj=kept[0], val_traj=kept[1], test_traj=kept[2]
    )
    _check_shapes(data, source)
    return data


def _carved_with(train: Split, traj: np.ndarray, held: np.ndarray, source: str) -> tuple[Split, Split]:
    """``(train, val)`` pairs of the training trajectories ``traj`` of which ``held`` are the
    validation ones: the pairs must be the trajectories' own, one per trajectory (its first step,
    heat1d's) or every consecutive pair (:func:`pairs_of`), else a :class:`SpecError`."""
    if not held.any():  # val_fraction=0
        return train, Split(train.x[:0], train.y[:0])
    if train.size == len(traj) and np.array_equal(train.x, traj[:, 0]) and np.array_equal(train.y, traj[:, 1]):
        return Split(train.x[~held], train.y[~held]), Split(train.x[held], train.y[held])
    x, y = pairs_of(traj)
    if train.size == len(x) and np.array_equal(train.x, x) and np.array_equal(train.y, y):
        return Split(*pairs_of(traj[~held])), Split(*pairs_of(traj[held]))
    raise SpecError(
        f"{source}: training pairs beside training trajectories that they are not the pairs of (every consecutive "
        f"pair, trajectory by trajectory), and no validation split: validation pairs drawn apart from the "
        f"validation trajectories would share states with the training trajectories; give the validation split "
        f"(val_x, val_y and val_traj), or only the trajectories (the pairs are derived from them)"
    )


def _check_shapes(data: Dataset, source: str) -> None:
    sample, target = data.train.x.shape[1:], data.train.y.shape[1:]
    for name, split in zip(SPLITS, data.splits):
        if split.x.shape[1:] != sample or split.y.shape[1:] != target:
            raise SpecError(
                f"{source}: {name} and train shapes differ (x {split.x.shape[1:]} vs {sample}, "
                f"y {split.y.shape[1:]} vs {target})"
            )
    kinds = {name: "integers" if split.y.dtype.kind == "i" else "floats" for name, split in zip(SPLITS, data.splits)}
    if len(set(kinds.values())) > 1:
        raise SpecError(
            f"{source}: the targets of some splits are integers and of others floats ({kinds}); give every "
            f"split's targets one kind (integers for class labels)"
        )
    if data.train.size == 0 or data.test.size == 0:
        raise SpecError(f"{source}: needs at least one training and one test sample")
    given = [s for s in SPLITS if data.trajectories(s) is not None]
    state = (sample[0] // data.history, *sample[1:])  # the inputs stack `history` states
    if given and state != target:
        raise SpecError(
            f"{source}: has trajectories, so it must map a state to the next state: inputs {sample} and "
            f"targets {target} must have the same shape"
        )
    for split in given:
        trajectories = data.trajectories(split)
        assert trajectories is not None  # `given` holds the splits that have trajectories
        if trajectories.shape[2:] != state:
            raise SpecError(
                f"{source}: `{split}_traj` holds states of shape {trajectories.shape[2:]}; "
                f"they must have the inputs' shape {sample} (channels, *spatial)"
            )
