"""What the figures of one :func:`sweep.plot` call draw from, gathered once: the configurations
best first, a sample of learning curves, the test samples and the ensemble's predictions of
them, an ensemble rollout, the stored ensemble scores; each either there, or why not (a
warning), or a :class:`QueryError` where a kind asked for by name has no data."""

from __future__ import annotations

import inspect
from typing import Any, NamedTuple

import numpy as np

from .._errors import QueryError, SweepError, did_you_mean, warn
from .._import_path import is_import_path
from .._layout import SPLIT_FILES
from ..ensemble import Ensemble, whole_configurations
from ..store import SAMPLE_COUNT
from ._panels import Configs
from ._rollout import rollout_metrics
from ._targets import target_kind


def summary_metric(ens: Ensemble) -> str:
    return inspect.signature(ens.summary).parameters["metric"].default


def best_first(ens: Ensemble, metric: str, mode: str | None) -> list[dict[str, Any]]:
    """Every configuration's grid values, best mean ``metric`` first (as ``sweep show``); a bad
    ``metric`` or ``mode`` is named as the argument of :func:`sweep.plot` it was given to."""
    cols = ens.grid_columns or ["config_id"]
    try:
        rows = ens.summary(metric, mode).to_pylist()
    except QueryError as e:
        raise QueryError(str(e).replace("summary(", "plot(", 1)) from None
    return [{c: row[c] for c in cols} for row in rows]


def curve_sample(ens: Ensemble, keys: list[dict[str, Any]], max_curves: int):
    """Member rows (with histories) of at most ``max_curves`` members per configuration, evenly
    spaced in store order, and the number of members of each configuration."""
    index = ens.index
    groups = Configs(keys, index)
    if all(len(rows) <= max_curves for _, rows, _ in groups):
        return ens.table, groups.totals
    ids = index.column("member_id").to_numpy()
    keep = [ids[rows[np.linspace(0, len(rows) - 1, min(max_curves, len(rows))).astype(int)]] for _, rows, _ in groups]
    return ens.where(member_id=np.concatenate(keep).tolist()).table, groups.totals


def _cannot_run(chosen: Ensemble, spec, trust_code: bool = False) -> str | None:
    """Why figures cannot run ``chosen``'s model (built by a factory, code the store names, and
    ``trust_code`` not given; or a network correcting a coarse stepper, run only inside the
    trainer), or None."""
    config_id = chosen.index["config_id"][0].as_py()
    if spec.training.correct is not None:
        return (
            f"config {config_id} was trained with training.correct={spec.training.correct!r} (a network correcting "
            f"a coarse exponax stepper), whose predictions are made only inside the trainer; its stored rollout "
            f"curves are drawn (--kind rollout_error)"
        )
    if not is_import_path(spec.model.name) or trust_code:
        return None
    return (
        f"the model of config {config_id} is built by {spec.model.name!r}, code the store names, and figures never "
        f"import it unless told to (trust_code=True, `sweep plot --trust-code`) where that factory is installed"
    )


SHOWN_SAMPLES = 3  # test samples drawn with the predictions unless told (`num_samples`, `--samples`)


def _test_pairs(chosen: Ensemble, num_samples: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``num_samples`` test inputs and targets with their names. Where the stored samples are
    consecutive states of one trajectory (an emulator's pairs, trajectory by trajectory; with
    ``history=h``, windows of ``h`` states) and the store keeps test trajectories, the first step of
    different trajectories instead."""
    x, y = chosen.samples()
    config = chosen.one_config("predictions")
    h = chosen.history_of(config)
    latest = chosen.latest_state(config, x)
    consecutive = len(x) > 1 and latest.shape == y.shape and np.array_equal(latest[1], y[0])
    try:
        traj = chosen.trajectories() if consecutive else None
    except QueryError:
        traj = None
    pairs = 0 if traj is None else min(num_samples, len(traj) * (traj.shape[1] - h))
    if traj is None or not pairs:  # the samples as stored
        return x[:num_samples], y[:num_samples], [f"test sample {i}" for i in range(min(num_samples, len(x)))]
    picks = [(i % len(traj), i // len(traj)) for i in range(pairs)]
    names = [f"test trajectory {k}, step {t + h - 1}→{t + h}" for k, t in picks]
    windows = [traj[k, t : t + h].reshape(-1, *traj.shape[3:]) for k, t in picks]  # h states stacked as channels
    return np.stack(windows), np.stack([traj[k, t + h] for k, t in picks]), names


def predicted_samples(ens: Ensemble, config: dict[str, Any], num_samples: int, trust_code: bool = False):
    """``(spec, (test_x, test_y, mean, std), names)`` of the first test samples the store holds
    (:func:`_test_pairs`; every one where the targets are values or classes: a scatter or a
    confusion matrix draws them all), under ``config``'s ensemble; or ``(spec, why not, [])`` (with a
    warning) where the store holds none or the model is built by a factory, code the store names
    that figures import only with ``trust_code``."""
    chosen = ens.where(**config)
    spec = chosen.spec
    reason = _cannot_run(chosen, spec, trust_code)
    if reason is None:
        try:
            x, y = chosen.samples()
        except QueryError as e:
            reason = str(e).removeprefix("samples(): ")
        else:
            mean, std = (np.asarray(a) for a in chosen.mean_std(x))
            if target_kind(x, y, mean) not in ("same_grid", "grid"):  # a scatter or a confusion matrix: all
                return spec, (x, y, mean, std), [f"test sample {i}" for i in range(len(x))]
            x, y, names = _test_pairs(chosen, min(num_samples, SAMPLE_COUNT))
            if num_samples > SHOWN_SAMPLES and len(x) < num_samples:  # (not for the default: no one asked)
                warn(f"predictions of {len(x)} test samples, not {num_samples}: as many as the store holds")
            mean, std = chosen.mean_std(x)
            return spec, (x, y, np.asarray(mean), np.asarray(std)), names
    warn(f"predictions left out: {reason}")
    return spec, reason, []


def ensemble_rollout(
    ens: Ensemble, config: dict[str, Any], named: bool, trust_code: bool = False
) -> tuple | str | None:
    """``(reference, mean, std)`` ``[steps + 1, c, *s]``: ``config``'s ensemble rolled out from the
    first state of the first test trajectory the store holds, against it; why not (with a warning)
    where figures cannot run the model; None where the store holds no trajectories (a
    :class:`QueryError` saying so if the ``"rollout"`` kind was ``named``)."""
    chosen = ens.where(**config)
    try:
        trajectory = chosen.trajectories()[:1]
    except QueryError as e:
        if named:
            raise QueryError(f"plot(kind='rollout'): {str(e).removeprefix('trajectories(): ')}") from None
        return None
    reason = _cannot_run(chosen, chosen.spec, trust_code)
    if reason is None:
        x0, reference = chosen.rollout_start(chosen.one_config("rollout"), trajectory)  # (history=h: h states)
        try:
            mean, std = chosen.rollout_mean_std(x0, reference.shape[1] - 1)
        except QueryError as e:  # a model whose outputs cannot be fed back in
            reason = str(e).removeprefix("rollout_mean_std: ")
        else:
            return reference[0], mean[:, 0], std[:, 0]
    warn(f"ensemble rollout left out: {reason}")
    return reason


def channel_name(ens: Ensemble, config: dict[str, Any]) -> str:
    """What channel 0 of ``config``'s fields holds: its name where the data named it (an HDF5
    problem's ``"density"``), else ``"channel 0"``."""
    try:
        names = list(ens.where(**config).normalization or {})
    except QueryError:  # configurations of several structural configs: no one name
        return "channel 0"
    return names[0] if names and isinstance(names[0], str) else "channel 0"


def drawn_rollout_metric(curves, asked: str | None, explicit: bool) -> str | None:
    """The rollout metric drawn (``asked``, else the first the store holds); None if there is none
    and no rollout figure was asked for by name."""
    held = rollout_metrics(curves)
    if asked is not None and asked not in held or asked is None and not held and explicit:
        have = (
            f"it holds rollout curves of {', '.join(held)}"
            if held
            else (
                "they are the columns val_/test_rollout_<metric>, stored for Training(rollout_steps=T, "
                "rollout_metrics=(...))"
            )
        )
        raise QueryError(
            f"plot(rollout_metric={asked!r}): the store has no rollout curves of that metric"
            f"{did_you_mean(asked, held)}; {have}"
            if asked is not None
            else f"plot(kind='rollout_error'): the store has no rollout curves; {have}"
        )
    return asked or (held[0] if held else None)


def stored_scores(ens: Ensemble, named: str | None = None):
    """The ensemble scores of ``ens``: those the store holds of every member of each configuration,
    or, for a selection of fewer members, computed on its own (:meth:`Ensemble.scores`, on the split
    the figures compare on); where the store holds none of them, None, or for a score figure
    ``named``, computed here (a :class:`QueryError` saying why where they cannot be)."""
    try:
        table, none = ens.stored_scores(), "the store scored none of these configurations"
    except QueryError as e:  # (a store made before the scores)
        table, none = None, str(e).removeprefix("stored_scores(): ")
    split = "val" if SPLIT_FILES["val"][0] in ens.store.manifest["files"] else "test"  # what the figures compare on
    if table is None or not table.num_rows:
        if not named:
            return None
        try:  # (a factory the aggregation did not trust, an older store): scored here, if they can be
            return ens.scores(split)
        except SweepError as e:
            raise QueryError(f"plot(kind={named!r}): {none}, nor can they be scored here: {e}") from None
    if whole_configurations(ens, table).num_rows == table.num_rows:
        return table
    try:
        return ens.scores(split)
    except SweepError as e:  # (a factory not trusted, ...): the stored scores, said to be of every member
        warn(
            f"the score figures draw the stored scores of every member of each configuration, not of the selection: {e}"
        )
        return table


class FigureData(NamedTuple):
    """What the figures of one call draw from."""

    ens: Ensemble
    keys: list[dict[str, Any]]  # configurations, best first
    metric: str
    curves: Any  # member rows with histories (a sample of at most max_curves per configuration)
    totals: Any
    spec: Any  # the best configuration's spec
    samples: tuple | str | None  # predictions, or why there are none
    sample_names: list[str]  # what each predicted sample is
    rollout_metric: str | None
    rolled: tuple | str | None  # an ensemble rollout, why there is none, or None: no trajectories
    scores: Any  # the stored ensemble scores, or None: the store has none
