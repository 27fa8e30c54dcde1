"""Members of global ensembles before any leaves are read: their order, their grid value
columns, and the planned members that have no checkpoint (used by :mod:`._aggregate`).

A member is (structural config, vmapped hyperparameters, seed). Inside its config's global
ensemble it is ordered by its hyperparameter values (names sorted) and then by seed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import pyarrow as pa

from .._canonical import canonical_json
from .._errors import StoreError
from ..metrics import metric_name, rollout_summary_names
from ..planning import Plan, TrialPlan, grid_names
from ..spec import SweepSpec, hparam_name
from ._schema import Column, fixed_columns


class Source(NamedTuple):
    """One trial's block, before its leaves are read."""

    trial_id: str
    spec: SweepSpec
    seeds: tuple[int, ...]
    hparams: tuple[dict[str, float], ...]
    shapes: tuple  # sweep.training.Shapes (sample_shape, target_shape, num_train, target_dtype) of its data
    load: Callable[[], tuple[Any, Any]]  # -> (stacked parameters as NumPy leaves, History); picklable for Ray


class Member(NamedTuple):
    key: tuple  # (hyperparameter values, seed): the order inside a global ensemble
    source: int  # index into the sources
    index: int  # position in its block
    hparams: dict[str, float]


def _normalised(hparams: dict, names: tuple[str, ...], spec: SweepSpec, trial: str) -> dict[str, float]:
    """Every hyperparameter in ``names``, taking those a block did not vmap from its spec."""
    out = {}
    for name in names:
        value = hparams.get(name, spec.optimizer.options.get(name))
        if value is None:
            raise StoreError(f"trial {trial!r}: hyperparameter {name!r} is neither in its block nor in its spec")
        out[name] = float(value)
    return out


def hparam_names(sources: list[Source], plan: Plan | None) -> dict[str, tuple[str, ...]]:
    """Per config id, the sorted names of every hyperparameter some block or planned trial vmapped."""
    sets = [(s.spec.config_id, h) for s in sources for h in s.hparams]
    sets += [(t.config_id, h) for t in (plan.trials if plan else ()) for h in t.hparams]
    names: dict[str, set] = {}
    for cid, h in sets:
        names.setdefault(cid, set()).update(h)
    return {cid: tuple(sorted(n)) for cid, n in names.items()}


def ordered(sources: list[tuple[int, Source]], names: tuple[str, ...]) -> list[Member]:
    """The members of one config's blocks in ensemble order; a member twice is an error."""
    members = []
    for i, src in sources:
        for j, (h, seed) in enumerate((h, s) for h in src.hparams for s in src.seeds):
            full = _normalised(h, names, src.spec, src.trial_id)
            members.append(Member((tuple(full.values()), seed), i, j, full))
    members.sort()
    trials = dict(sources)
    for a, b in zip(members, members[1:]):
        if a.key == b.key:
            raise StoreError(
                f"duplicate member: seed {a.key[1]} with {a.hparams or 'no vmapped hyperparameters'} of config "
                f"{trials[a.source].spec.config_id} is in trial {trials[a.source].trial_id!r} and in trial "
                f"{trials[b.source].trial_id!r}; remove one of the two checkpoints"
            )
    return members


def metric_names(sources: list[Source]) -> list[str]:
    """Stored names of every metric some block evaluates, in the order first seen, then of the
    summaries of every rollout metric (``rollout_gmean_<m>`` or ``rollout_valid_steps_<m>``, and
    ``rollout_window_<a>_<b>_<m>``, see :func:`sweep.metrics.rollout_summary_names`: columns
    ``test_rollout_gmean_<m>``, ..., beside the curves ``test_rollout_<m>``)."""
    trainings = [s.spec.training for s in sources]
    return list(
        dict.fromkeys(
            [
                *(metric_name(m) for t in trainings for m in t.metrics),
                *(
                    name
                    for t in trainings
                    if t.rollout_steps
                    for m in t.rollout_metrics
                    for name in rollout_summary_names(metric_name(m), t.rollout_steps)
                ),
            ]
        )
    )


def grid_value_columns(sources: list[Source], plan: Plan | None, metrics: list[str]) -> list[Column]:
    """The plan's grid keys, else the keys whose values differ between blocks plus vmapped ones."""
    if plan is not None:
        assert plan.spec.vmap is not None  # __post_init__ resolves None to the vmappable grid keys
        keys = [(k, k in plan.spec.vmap) for k in plan.spec.varied]
    else:
        names = sorted({k for s in sources for h in s.hparams for k in h})
        flat = [_flatten(s.spec.structure_dict()) for s in sources]
        every = dict.fromkeys(k for f in flat for k in f)
        varying = [k for k in every if len({canonical_json(f.get(k)) for f in flat}) > 1]
        keys = [(k, False) for k in varying if hparam_name(k) not in names]
        keys += [(f"optimizer.{n}", True) for n in names]
    names = grid_names([k for k, _ in keys], reserved=fixed_columns(metrics))
    return [Column(names[k], k, v) for k, v in keys]


def _flatten(structure: dict) -> dict[str, Any]:
    """``{"model": {"depth": 2}, "sweep_seed": 0}`` -> ``{"model.depth": 2, "sweep_seed": 0}``."""
    out = {}
    for part, value in structure.items():
        out |= {f"{part}.{k}": v for k, v in value.items()} if isinstance(value, dict) else {part: value}
    return out


def value(column: Column, spec_dict: dict, hparams: dict[str, float]) -> Any:
    """A member's value of a grid column (from its hyperparameters or its config's spec)."""
    part, _, leaf = column.key.partition(".")
    if column.vmapped:
        return hparams.get(leaf)
    return spec_dict.get(part, {}).get(leaf) if leaf else spec_dict.get(part)


def column_types(
    columns: list[Column], sources: list[Source], specs: list[dict], names: dict[str, tuple[str, ...]]
) -> dict[str, tuple[pa.DataType, Callable[[Any], Any]]]:
    """Per column, its Arrow type and how to encode a value (JSON text unless plain scalars)."""
    hsets = [[_normalised(h, names.get(s.spec.config_id, ()), s.spec, s.trial_id) for h in s.hparams] for s in sources]
    out = {}
    for c in columns:
        values = [value(c, spec, h) for spec, hs in zip(specs, hsets) for h in hs]
        out[c.name] = pa.string(), canonical_json
        if all(v is None or isinstance(v, (bool, int, float, str)) for v in values):
            try:
                out[c.name] = pa.array(values).type, _plain
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                pass
    return out


def _plain(value: Any) -> Any:
    """A scalar stored as itself (the encoder of a column of plain values; picklable, unlike a lambda)."""
    return value


def missing(trials: list[TrialPlan], found: set[tuple], names: tuple[str, ...], columns: list[Column]) -> list[dict]:
    """Planned members of one config's ``trials`` whose key is not ``found``, by trial
    (``{"trial_id", "config_id", "members": [{"seed", <vmapped grid columns>}, ...]}``)."""
    rename = {c.key.partition(".")[2]: c.name for c in columns if c.vmapped}
    out = []
    for trial in trials:
        members = []
        for h, seed in trial.members():
            if (tuple(_normalised(h, names, trial.spec, trial.trial_key).values()), seed) not in found:
                members.append({"seed": seed, **{rename.get(k, k): v for k, v in h.items()}})
        if members:
            out.append({"trial_id": trial.trial_key, "config_id": trial.config_id, "members": members})
    return out
