"""What a resume may continue: the unfinished trials of the sweep's last run, whose configurations
the spec resumed with must still have (checked on the driver before anything starts)."""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import SpecError
from ..planning import hparams_key
from ..spec import SweepSpec
from ..store import SweepDir

# the parts of a spec's table that do not say which members it trains (more seeds, other
# resources, another block size: a resume takes them)
NOT_DEFINING = ("name", "seeds", "seeds_per_trial", "resources", "search")


def check_resumed_spec(spec: SweepSpec, sweep_dir: SweepDir) -> None:
    """Refuse a resume whose ``spec`` no longer has the configurations (structural config and
    vmapped values) of the last run's unfinished trials: a spec file resumed without the ``--set``
    overrides it ran with would otherwise train its own configurations beside theirs. A search
    proposes its configurations as it goes: its configurations are not checked (its ranking is, by
    :func:`check_ranking`, on every run)."""
    stored = sweep_dir.plan()
    if stored is None or spec.search is not None or stored.spec.search is not None:
        return
    have = {(config.config_id, hparams_key(h)) for config, hsets in spec.expand() for h in hsets}
    done, _ = sweep_dir.done(stored.spec)
    left = [
        t
        for t in stored.trials
        if not set(t.member_ids()) <= done and any((t.config_id, hparams_key(h)) not in have for h in t.hparams)
    ]
    if not left:
        return
    fields = _differing(_dotted(_defining(stored.spec)), _dotted(_defining(spec)))
    what = (
        f"`resume`: {len(left)} unfinished trial(s) of sweep {spec.name!r} train configurations this spec does not have"
    )
    if not fields:  # the same settings, other ids: ids of another seed-sweep version
        raise SpecError(f"{what} (their ids differ, not their settings); run without resume")
    old, new = _dotted(_defining(stored.spec)), _dotted(_defining(spec))
    shown = _compared(old, new, fields)
    # the command line puts back every field the run had (its seeds too), not only those above
    old, new = (
        _dotted({k: v for k, v in s.to_dict().items() if k not in ("name", "search")}) for s in (stored.spec, spec)
    )
    raise SpecError(
        f"{what}: it differs from the spec the sweep was last run with in {shown}; resume with that spec as it ran"
        + _as_it_ran(old, _differing(old, new))
        + ", or run without resume to train this spec's configurations beside them"
    )


# what a race's rounds and levels are computed from, and its promise: its eliminations so far were
# decided at those levels (raising `max` goes on with a finished race, its new rounds at new levels)
RACE_FIELDS = ("start", "step", "confidence", "precision")


def check_ranking(spec: SweepSpec, sweep_dir: SweepDir) -> None:
    """Refuse to go on with a search or a race (a resume, or a run that adds to it) whose metric or
    direction differs from the last run's: its proposals or eliminations so far ranked that metric
    that way; and a race whose rounds or promise differ (:data:`RACE_FIELDS`): its eliminations so
    far were decided at the levels they give, and the promise it states holds only for them."""
    plan = sweep_dir.plan()
    if plan is None:
        return
    old, new = plan.spec.adaptive, spec.adaptive
    changed = [f for f in RACE_FIELDS if old and new and getattr(old, f) != getattr(new, f)]
    if changed:
        shown = ", ".join(f"{f} ({_shown(getattr(new, f))} here, {_shown(getattr(old, f))} there)" for f in changed)
        how = [f"--set seeds.adaptive.{f}={_toml(getattr(old, f))}" for f in changed if getattr(old, f) is not None]
        how += [f"remove seeds.adaptive.{f}" for f in changed if getattr(old, f) is None]
        raise SpecError(
            f"`seeds.adaptive`: the race of sweep {spec.name!r} decided its rounds so far at the levels its settings "
            f"give, and this spec's differ in {shown}. Go on as it ran ({'; '.join(how)}), or give the sweep another "
            f"name to start a new race"
        )
    if old and new:
        _check_race_settings(spec, plan.spec)
    reached = max((s.round for s in plan.race.latest().values()), default=0) if plan.race is not None else 0
    if old and new and reached > new.rounds:
        raise SpecError(
            f"`seeds.adaptive.max`: got {new.max}; the race of sweep {spec.name!r} has raced configurations to round "
            f"{reached} ({old.seeds_through(reached)} seeds each), and max={new.max} ends a race at round "
            f"{new.rounds}. Go on with max >= {old.seeds_through(reached)} (--set seeds.adaptive.max={old.max}), or "
            f"give the sweep another name to start a new race"
        )
    first = {"min": "lowest", "max": "highest"}
    for name, field in (("search", "search"), ("adaptive", "seeds.adaptive")):
        old, new = getattr(plan.spec, name), getattr(spec, name)
        if old is None or new is None or (old.metric, old.direction) == (new.metric, new.direction):
            continue
        raise SpecError(
            f"`{field}`: the {'search' if name == 'search' else 'race'} of sweep {spec.name!r} ranked {old.metric} "
            f"{first[old.direction]} first; this spec ranks {new.metric} {first[new.direction]} first. Go on as it "
            f"ran (--set {field}.metric={old.metric} --set {field}.mode={old.direction}), or give the sweep another "
            f"name to start a new one"
        )


def _check_race_settings(spec: SweepSpec, old: SweepSpec) -> None:
    """Refuse to go on with a race under settings other than its last run's outside the grid (the
    data, model, training, a vmapped field's base value): their configurations would race beside
    the old ones as newcomers, told apart by config id alone, compared across settings."""
    made_of = [_dotted({k: v for k, v in _defining(s).items() if k != "points"}) for s in (old, spec)]
    structural = (set(old.grid) | set(spec.grid)) - set(old.vmap or ()) - set(spec.vmap or ())
    fields = [k for k in _differing(*made_of) if not k.startswith("grid.") and k not in structural]
    if fields:
        raise SpecError(
            f"`seeds.adaptive`: the race of sweep {spec.name!r} compares configurations trained with its last run's "
            f"settings, and this spec differs in {_compared(made_of[0], made_of[1], fields)}; go on with the "
            f"settings it ran with{_as_it_ran(made_of[0], fields)}, or give the sweep another name to start a new "
            f"race (a value added to the grid joins the race at round 1)"
        )


def check_same_problem(spec: SweepSpec, sweep_dir: SweepDir) -> None:
    """Refuse a run that would add members trained on other data to a sweep (a problem that
    differs, outside the grid, from one its trials trained on): the store ranks configurations as
    if on one problem, and no column would say what differs."""
    plan = sweep_dir.plan()
    if plan is None:
        return
    varied = set(plan.spec.varied) | set(spec.varied)
    new = _dotted({"problem": spec.problem.to_dict()})
    for trained in dict.fromkeys(json.dumps(t.spec.problem.to_dict(), sort_keys=True) for t in plan.trials):
        old = _dotted({"problem": json.loads(trained)})
        fields = [k for k in _differing(old, new) if k not in varied]
        if fields:
            shown = _compared(old, new, fields)
            raise SpecError(
                f"`problem`: sweep {spec.name!r} holds members trained on a problem written otherwise: this spec "
                f"differs in {shown}. Its store compares configurations as on one problem (the same data written "
                f"another way is another problem to it): write the problem as the sweep did"
                f"{_as_it_ran(old, fields)}, give this spec another name, or vary the field in the grid"
            )


def check_search_continued(spec: SweepSpec, sweep_dir: SweepDir, asked: Sequence[Mapping[str, Any]]) -> None:
    """Refuse to go on with a search (a resume, or a run that adds configurations) whose spec
    differs from the last run's in what each configuration's observation is made of (its seeds,
    data, model, training: the search told the sampler means over those), or whose space leaves
    out a configuration it has ``asked``."""
    plan = sweep_dir.plan()
    old = None if plan is None else plan.spec
    if old is None or old.search is None or spec.search is None or not asked:
        return
    made_of = [
        _dotted({k: v for k, v in _defining(s).items() if k != "points"} | {"seeds": s.seed_list}) for s in (old, spec)
    ]
    # a point sets the searched fields, but a vmapped one's base value is part of its config id
    searched = (set(old.search.space) | set(spec.search.space)) - set(old.vmap or ()) - set(spec.vmap or ())
    fields = [k for k in _differing(*made_of) if k not in searched]
    if fields:
        raise SpecError(
            f"`search`: the search of sweep {spec.name!r} observed {len(asked)} configuration(s) as blocks of seeds "
            f"trained with its last run's settings, and this spec differs in {_compared(made_of[0], made_of[1], fields)}; "
            f"go on with the settings it ran with{_as_it_ran(made_of[0], fields)}, or give the sweep another name to "
            f"start a new search (a grid of the best configuration trains more seeds of it)"
        )
    for point in asked:
        outside = [k for k, d in spec.search.space.items() if k not in point or not d.holds(point[k])]
        if outside or set(point) - set(spec.search.space):
            key = (outside or sorted(set(point) - set(spec.search.space)))[0]
            where = repr(spec.search.space[key].to_dict()) if key in spec.search.space else "not searched here"
            raise SpecError(
                f"`search.space`: the search of sweep {spec.name!r} asked {key}={point.get(key)!r} in an earlier run, "
                f"outside this space ({key}: {where}); go on with a space that holds every configuration it asked, or "
                f"give the sweep another name to start a new search"
            )


def asked_so_far(spec: SweepSpec, sweep_dir: SweepDir) -> SweepSpec:
    """A search's ``spec`` with every configuration it has asked so far (``search.json``): what
    earlier calls of this sweep planned and trained, and its members counted as done; refused
    where ``spec`` would not go on with them (:func:`check_search_continued`)."""
    from ..search import read_record  # (sweep.search imports matplotlib: not in trial processes)

    points = read_record(sweep_dir).points
    check_search_continued(spec, sweep_dir, points)
    return spec.with_points(points) if points else spec


def _compared(old: Mapping[str, Any], new: Mapping[str, Any], fields: Sequence[str]) -> str:
    """``k (value here, value there), ...`` of the dotted ``fields`` of two tables."""
    return ", ".join(f"{k} ({_shown(new.get(k))} here, {_shown(old.get(k))} there)" for k in fields)


def _as_it_ran(old: Mapping[str, Any], fields: Sequence[str]) -> str:
    """`` (on the command line: --set k=v ...; remove k2)``: what puts ``fields`` back to
    their values in ``old`` (a dotted table), or ``""`` where an inline value cannot say one of them."""
    sets = [shlex.quote(f"{k}={_toml(old[k])}") for k in fields if old.get(k) is not None and _toml(old[k])]
    removed = [k for k in fields if old.get(k) is None]
    if len(sets) + len(removed) < len(fields):  # a value no --set can write (a list of tables): no half command
        return ""
    how = [*(["--set " + " --set ".join(sets)] if sets else []), *([f"remove {', '.join(removed)}"] if removed else [])]
    return f" (on the command line: {'; '.join(how)})" if how else ""


def _differing(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The dotted fields whose values differ; ``vmap`` left out where the grid differs (it follows
    the grid unless set: the grid says it)."""
    fields = [k for k in sorted(old.keys() | new.keys()) if old.get(k) != new.get(k)]
    return [k for k in fields if k != "vmap"] if any(k.startswith("grid.") for k in fields) else fields


def _defining(spec: SweepSpec) -> dict[str, Any]:
    """The part of ``spec``'s table that says which members it trains."""
    table = {k: v for k, v in spec.to_dict().items() if k not in NOT_DEFINING}
    return table | {"training": spec.training.identity()}


def _dotted(tree: Mapping, prefix: str = "") -> dict[str, Any]:
    """``{dotted field: value}`` of a spec's table, tables opened (an empty one is no field)."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, Mapping):
            out.update(_dotted(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _toml(value: Any) -> str:
    """``value`` as ``--set`` takes it (TOML), or ``""`` where an inline value cannot say it (a
    list of tables)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, list) and any(isinstance(v, Mapping) for v in value):
        return ""
    return json.dumps(value)


def _shown(value: Any) -> str:
    return "unset" if value is None else (_toml(value) or repr(value))
