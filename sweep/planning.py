"""The sweep plan: which trials (structural config + block of seeds) run, before anything runs.

No Ray here: the plan is plain data, printable, deterministic, and stored as
``<sweep>/plan.json`` (read and written here only) so that the aggregator knows every planned
member and a later run knows what is done.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import pyarrow.fs as pafs

from ._canonical import canonical_json, digest
from ._errors import StoreError
from ._fs import ONE_COMPONENT, confined, exists, read_text, write_text_atomic
from ._layout import PLAN
from ._text_table import text_table, wrapped
from ._words import counted
from .racing import Key, Race, headline, rule_of
from .spec import SweepSpec, hparam_name, is_number, seed_tuple

__all__ = [
    "MemberId",
    "NextRound",
    "Plan",
    "TrialPlan",
    "Wanted",
    "config_label",
    "grid_names",
    "hparams_key",
    "make_plan",
    "merge_plans",
    "read_plan",
    "write_plan",
]

Wanted = dict[Key, tuple[int, ...]] | None  # seeds per configuration; None: every member of the spec


class NextRound(NamedTuple):
    """What a round policy of ``sweep.run`` wants trained next (``sweep/tune/_policy.py``)."""

    planned: SweepSpec  # the spec to plan from: the run's, or a search's with the points it proposed
    wanted: Wanted


PLAN_FORMAT = 1


class MemberId(NamedTuple):
    """What names a member across runs: its structural config, seed and hyperparameter set
    (as :func:`hparams_key` text, so that it can be hashed and compared)."""

    config_id: str
    seed: int
    hparams: str

    @classmethod
    def of(cls, config_id: str, seed: int, hparams: Mapping[str, float]) -> MemberId:
        """The id of the member of ``config_id`` with ``seed`` and the hyperparameter set ``hparams``."""
        return cls(config_id, int(seed), hparams_key(hparams))


@dataclasses.dataclass(frozen=True)
class TrialPlan:
    """One Ray Tune trial: one structural config, one block of seeds x every hyperparameter set.

    Attributes:
        trial_key: Stable key of the trial (config id and a digest of its seeds and hyperparameter
            sets), its directory name.
        config_id: The structural config's id.
        spec: The structural config's spec (grid applied, no grid left).
        seeds: The block's seeds.
        hparams: Its vmapped hyperparameter sets.
    """

    trial_key: str
    config_id: str
    spec: SweepSpec
    seeds: tuple[int, ...]
    hparams: tuple[dict[str, float], ...]

    @property
    def num_members(self) -> int:
        return len(self.seeds) * len(self.hparams)

    def members(self) -> list[tuple[dict[str, float], int]]:
        """(hyperparameter set, seed) of every member, in block order (hparams-major)."""
        return [(h, s) for h in self.hparams for s in self.seeds]

    def member_ids(self) -> list[MemberId]:
        """The :class:`MemberId` of every member, in block order."""
        return [MemberId.of(self.config_id, s, h) for h, s in self.members()]

    def grid_values(self, grid_keys: Iterable[str], hparams: Mapping[str, float]) -> dict[str, Any]:
        """``{grid key: value}`` of this trial's members with hyperparameter set ``hparams``
        (vmapped keys from ``hparams``, the others from the trial's structural config)."""
        spec = self.spec.to_dict()
        out = {}
        for key in grid_keys:
            part, _, leaf = key.partition(".")
            if part == "optimizer" and hparam_name(key) in hparams:
                out[key] = hparams[hparam_name(key)]
            else:
                out[key] = spec[part].get(leaf) if leaf else spec[part]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "trial_key": self.trial_key,
            "config_id": self.config_id,
            "spec": self.spec.to_dict(),
            "seeds": list(self.seeds),
            "hparams": [dict(h) for h in self.hparams],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrialPlan:
        """A trial read back from ``plan.json``: its key names its directory, so it must be one name."""
        key = confined(data["trial_key"], f"{PLAN} `trial_key`", ONE_COMPONENT, "one path component")
        spec, seeds, hparams = SweepSpec.from_dict(data["spec"]), data["seeds"], data["hparams"]
        if not isinstance(seeds, list):
            raise ValueError(f"trial {key}: `seeds` is {str(seeds)[:60]}; expected a list of seeds")
        seed_tuple(seeds)  # (a SpecError naming what is wrong with them)
        if not (
            isinstance(hparams, list) and all(isinstance(h, dict) and all(map(is_number, h.values())) for h in hparams)
        ):
            raise ValueError(f"trial {key}: `hparams` is {str(hparams)[:60]}; expected a list of {{name: number}}")
        if data["config_id"] != spec.config_id:
            raise ValueError(
                f"trial {key}: `config_id` {str(data['config_id'])[:20]!r} is not the id this seed-sweep gives its "
                f"spec ({spec.config_id}): written by an older seed-sweep (run the sweep again), or altered"
            )
        return cls(key, spec.config_id, spec, tuple(seeds), tuple(dict(h) for h in hparams))


@dataclasses.dataclass(frozen=True)
class Plan:
    """Every trial of a sweep, with the resources each one asks for; saved as ``plan.json``.

    Attributes:
        spec: The sweep specification.
        trials: One :class:`TrialPlan` per trial: structural configs x blocks of seeds.
        seeds_per_trial: The block size (``"auto"`` resolved).
        stopped_trials: Trial keys a scheduler stopped early.
        race: With :class:`sweep.Adaptive` seeds, the race's evaluations so far (intervals and
            decisions, round by round); None otherwise.
        data: One line per problem whose training split is streamed, when planned by
            :func:`sweep.plan`: the size of its data, the trial's data budget, the windows and
            shards (shown, not saved).

    Examples:
        ```python
        plan = sweep.plan(spec)
        print(plan)  # one row per trial: grid values, config id, seeds, vmapped values
        plan.num_members
        ```
    """

    spec: SweepSpec
    trials: tuple[TrialPlan, ...]
    seeds_per_trial: int
    stopped_trials: frozenset[str] = frozenset()  # trial keys a scheduler stopped early
    race: Race | None = None  # the evaluations of a race (Adaptive seeds)
    data: tuple[str, ...] = dataclasses.field(default=(), compare=False)  # streamed problems (shown, not saved)

    @property
    def num_members(self) -> int:
        return sum(t.num_members for t in self.trials)

    @property
    def config_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t.config_id for t in self.trials))

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": PLAN_FORMAT,
            "spec": self.spec.to_dict(),
            "seeds_per_trial": self.seeds_per_trial,
            "trials": [t.to_dict() for t in self.trials],
            "stopped_trials": sorted(self.stopped_trials),
            **({} if self.race is None else {"race": self.race.to_dict()}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Plan:
        trials = tuple(TrialPlan.from_dict(t) for t in data["trials"])
        return cls(
            SweepSpec.from_dict(data["spec"]),
            trials,
            data["seeds_per_trial"],
            frozenset(data.get("stopped_trials", ())),
            None if data.get("race") is None else Race.from_dict(data["race"]),
        )

    def with_stopped(self, trial_keys: Iterable[str]) -> Plan:
        """This plan with ``trial_keys`` added to the trials a scheduler stopped early."""
        return dataclasses.replace(self, stopped_trials=self.stopped_trials | frozenset(trial_keys))

    def __repr__(self) -> str:
        """The table :meth:`__str__` prints, also where a REPL or notebook shows the plan (its fields
        spelt out would be the whole spec once per trial)."""
        return str(self)

    def __str__(self) -> str:
        return self.format()

    def format(self, width: int | None = None) -> str:
        """What ``print(plan)`` shows: a line of counts and resources, then one row per trial (its
        grid values, config id, trial key, seeds and vmapped values; the first 50), fitted to
        ``width`` characters (a terminal's columns: lines wrapped, and the table in blocks of
        columns, each led by the configuration) or, with None, whole lines.

        Example:
            ``print(plan.format(width=80))``
        """
        res = self.spec.resources
        gpu = f", {res['gpu']:g} GPU" if res["gpu"] else ""
        names = grid_names(self.spec.varied)
        assert self.spec.vmap is not None  # __post_init__ resolves None to the vmappable grid keys
        structural = [k for k in self.spec.varied if k not in self.spec.vmap]
        vmapped = [k for k in self.spec.varied if k in self.spec.vmap]
        rows = []
        for t in self.trials[:50]:
            first, last = t.seeds[0], t.seeds[-1]
            seeds = f"{first}..{last} ({len(t.seeds)})" if len(t.seeds) > 1 else str(first)
            config = config_label(t.grid_values(structural, {}), names) or "-"
            values = [t.grid_values(vmapped, h) for h in t.hparams]
            sets = " ".join(f"{names[k]}=" + ",".join(dict.fromkeys(f"{v[k]:g}" for v in values)) for k in vmapped)
            rows.append((config, t.config_id, t.trial_key, seeds, sets or "-", str(t.num_members)))
        header = ("config", "config_id", "trial", "seeds", "vmapped", "members")
        adaptive = self.spec.adaptive  # a race's blocks: a round's seeds
        block = max(adaptive.start, adaptive.step) if adaptive else len(self.spec.seed_list)
        counts = (
            f"{counted(len(self.trials), 'trial')}, {counted(self.num_members, 'member')}, "
            f"{counted(len(self.config_ids), 'structural config')}"
            if self.trials or self.spec.search is None
            else "its trials planned as the search proposes them"
        )
        lines = [
            f"sweep {self.spec.name!r}: {counts}; each trial: {res['cpu']:g} CPU{gpu}, "
            f"up to {counted(min(self.seeds_per_trial, block), 'seed')} per block",
            *self._race_lines(),
            *self.data,
            *self._search_lines(),
        ]
        text = wrapped("\n".join(lines), width)
        if rows:
            text += "\n" + text_table(header, rows, width, keys=1, left=True)
        if len(self.trials) > 50:
            text += f"\n... and {len(self.trials) - 50} more trials"
        return text

    def _race_lines(self) -> list[str]:
        """With adaptive seeds: the race's promise and the seeds from which it can decide."""
        adaptive = self.spec.adaptive
        if adaptive is None:
            return []
        num_configs = sum(len(hsets) for _, hsets in self.spec.expand())
        race = self.race or Race()
        return [headline(adaptive, num_configs, rule_of(adaptive, race))]

    def _search_lines(self) -> list[str]:
        """With a search: what it will train, since its trials are planned as it proposes them."""
        search = self.spec.search
        if search is None:
            return []
        seeds = len(self.spec.seed_list)
        return [
            f"{search.algorithm} search of {counted(search.configurations, 'configuration')} on {search.metric} ({search.direction}), "
            f"{search.batch} per round, {seeds} seeds each: at most {search.configurations * seeds} members, "
            f"planned round by round as the search proposes them ({len(self.spec.points)} so far)"
        ]


def grid_names(grid_keys: Iterable[str], reserved: Iterable[str] = ()) -> dict[str, str]:
    """Short name of every grid key: its last part when that is unique and not ``reserved``,
    else the whole dotted key (``{"model.depth": "depth", "optimizer.learning_rate": "learning_rate"}``).
    The store names its grid value columns so; progress and plans show configurations so."""
    keys = list(grid_keys)
    leaves = [k.rpartition(".")[2] for k in keys]
    reserved = set(reserved)
    return {k: leaf if leaves.count(leaf) == 1 and leaf not in reserved else k for k, leaf in zip(keys, leaves)}


def config_label(values: Mapping[str, Any], names: Mapping[str, str] | None = None) -> str:
    """``"depth=6 learning_rate=0.0003"``: grid values by short name (floats as ``:g``)."""
    return " ".join(
        f"{(names or {}).get(k, k)}={v:g}" if isinstance(v, float) else f"{(names or {}).get(k, k)}={v}"
        for k, v in values.items()
    )


def hparams_key(hparams: Mapping[str, float]) -> str:
    """Canonical text of one hyperparameter set (optimizer argument name -> float)."""
    return canonical_json({k: float(v) for k, v in hparams.items()})


def make_plan(
    spec: SweepSpec,
    seeds_per_trial: int | None = None,
    done: Iterable[tuple[str, int] | tuple[str, int, str | Mapping[str, float]]] = (),
    wanted: Mapping[Key, Iterable[int]] | None = None,
    unfinished: Iterable[TrialPlan] = (),
) -> Plan:
    """Split every structural config's seeds into blocks of ``seeds_per_trial``.

    ``wanted``: the seeds to plan per configuration ``(config_id, hparams_key)`` (a round of a
    race); configurations it leaves out get none, and each one gets blocks of its own, so a
    block's shape (and its compiled program) stays the same round after round while the
    configurations leave. Default: every seed of ``spec``.

    ``done``: members already trained, left out so that extending ``seeds`` plans only the new
    members. Either ``(config_id, seed)`` pairs (every hyperparameter set of that seed) or
    ``(config_id, seed, hparams)`` triples (one set, e.g. ``{"learning_rate": 1e-3}``).
    Hyperparameter sets left with different seeds to train become separate trials; when all
    sets have the same seeds left (the usual case) a trial holds every set, as without ``done``.

    ``unfinished``: trials trained part way (a checkpoint short of their epochs). One whose
    members are all to be planned keeps its block, to go on from its checkpoint, and the other
    seeds are split around it: regrouped, a seed of it would be trained again in another trial.
    """
    block = seeds_per_trial or (spec.seeds_per_trial if isinstance(spec.seeds_per_trial, int) else 16)
    pairs, triples = set(), set()
    for item in done:
        if len(item) == 2:
            pairs.add((item[0], item[1]))
        else:
            triples.add((item[0], item[1], item[2] if isinstance(item[2], str) else hparams_key(item[2])))
    expanded = list(spec.expand())
    todo: dict[tuple[str, str], set[int]] = {}  # the seeds to plan, by (config id, hyperparameter set)
    for config, hparams in expanded:
        cid = config.config_id
        for h in hparams:
            hk = hparams_key(h)
            seeds = spec.seed_list if wanted is None else tuple(wanted.get((cid, hk), ()))
            todo[cid, hk] = {s for s in seeds if (cid, s) not in pairs and (cid, s, hk) not in triples}
    configs = {config.config_id: config for config, _ in expanded}
    trials = [  # each under this spec's config (its resources, say), its key and members as they were
        dataclasses.replace(t, spec=dataclasses.replace(configs[t.config_id], seeds=t.seeds))
        for t in unfinished
        if all(m.seed in todo.get((m.config_id, m.hparams), ()) for m in t.member_ids())
    ]
    kept = {MemberId(*m) for t in trials for m in t.member_ids()}
    for config, hparams in expanded:
        cid = config.config_id
        groups: dict[tuple[tuple[int, ...], str], list[dict[str, float]]] = {}
        for h in hparams:
            hk = hparams_key(h)
            seeds = spec.seed_list if wanted is None else tuple(wanted.get((cid, hk), ()))
            left = tuple(s for s in seeds if s in todo[cid, hk] and MemberId(cid, s, hk) not in kept)
            groups.setdefault((left, "" if wanted is None else hk), []).append(h)
        for (left, _), group in groups.items():
            for start in range(0, len(left), block):
                seeds = tuple(left[start : start + block])
                key = f"{cid}-{digest([seeds, list(group)], 8)}"
                # the trial's spec names its own seeds, not the sweep's: a trial's plan and its
                # checkpoints stay the size of its block however many seeds the sweep has
                trials.append(TrialPlan(key, cid, dataclasses.replace(config, seeds=seeds), seeds, tuple(group)))
    return Plan(spec, tuple(trials), block)


def merge_plans(old: Plan | None, new: Plan) -> Plan:
    """Every trial of ``old`` and ``new`` (by trial key, old ones first) under ``new``'s spec."""
    if old is None:
        return new
    trials = {t.trial_key: t for t in old.trials}
    for t in new.trials:
        trials.setdefault(t.trial_key, t)
    stopped = old.stopped_trials | new.stopped_trials
    return Plan(new.spec, tuple(trials.values()), new.seeds_per_trial, stopped, new.race or old.race)


def read_plan(filesystem: pafs.FileSystem, sweep_path: str) -> Plan | None:
    """``<sweep_path>/plan.json``, or None if the sweep has none yet."""
    path = f"{sweep_path}/{PLAN}"
    if not exists(filesystem, path):
        return None
    try:
        return Plan.from_dict(json.loads(read_text(filesystem, path)))
    except (
        ValueError,
        KeyError,
        TypeError,
        AttributeError,
        RecursionError,
        StoreError,
    ) as e:  # (SpecError: a ValueError)
        raise StoreError(f"{path!r}: not a readable sweep plan ({str(e)[:300]})") from None


def write_plan(filesystem: pafs.FileSystem, sweep_path: str, plan: Plan) -> None:
    """Write ``<sweep_path>/plan.json`` atomically."""
    write_text_atomic(filesystem, f"{sweep_path}/{PLAN}", json.dumps(plan.to_dict(), indent=1))
