"""``SweepSpec``: a whole sweep, frozen and validated, with dict / TOML round trip
(docs: Reference > Spec fields).

Every part validates itself on construction and raises :class:`SpecError` naming the
field, the bad value and what is allowed, so that nothing runs on a bad spec.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._canonical import digest
from .._errors import SpecError
from .._fs import COMPONENT_RULE, name_problem
from ..problems import PDE_PREFIXES, pde_steps_checked
from ._adaptive import KEY as ADAPTIVE_KEY
from ._adaptive import Adaptive, adaptive_from
from ._keys import PARTS, TOP_GRID_KEYS, check_key, hparam_name, vmappable
from ._parts import Model, Optimizer, Problem
from ._resources import check_resources
from ._search import Search
from ._seeds import SEED_LIMIT, seed_tuple
from ._toml import read_toml, toml_text
from ._training import Training
from ._values import is_int, known_fields, listed_twice, plain, refuse_unknown


@known_fields
@dataclasses.dataclass(frozen=True)
class SweepSpec:
    """A whole sweep: one base configuration, a grid over it, the seeds and the resources.

    Frozen and validated on construction. ``to_dict`` / ``from_dict`` and ``to_toml`` /
    ``from_toml`` round-trip exactly.

    Attributes:
        name: The sweep's name; its directory is ``<storage>/<name>``, so it must be one path
            component (no separators, not ``.`` or ``..``).
        problem: The data (:class:`Problem`).
        model: The network of every member (:class:`Model`).
        optimizer: The optax optimizer (:class:`Optimizer`).
        training: Epochs, batch size, reports, loss and metrics (:class:`Training`).
        seeds: An int ``N`` (seeds ``0..N-1``, ``1 <= N <= 2**24``), a list of distinct
            integers in ``0..2**32-1``, or :class:`Adaptive` seeds trained in rounds where the
            comparison of configurations is still undecided (``{"adaptive": {...}}`` in a dict,
            ``[seeds.adaptive]`` in TOML).
        sweep_seed: Base key of every member: a member's key is
            ``fold_in(key(sweep_seed), seed)``. An integer in ``0..2**32-1``.
        seeds_per_trial: Block size: seeds one trial trains together in one compiled program, an
            integer ``>= 1``, or ``"auto"`` (chosen from memory and speed where trials run).
        grid: Dotted spec paths (``"model.depth"``, ``"optimizer.learning_rate"``,
            ``"training.unroll"``, ``"sweep_seed"``) to non-empty lists of values; each value
            must make a valid spec.
        vmap: Grid keys trained side by side inside a block. Default (``None``): every numeric
            optimizer hyperparameter of the grid. Only numeric optimizer keys may be vmapped;
            every other key makes separate trials.
        resources: Per trial: ``{"cpu": c, "gpu": g}``, ``c > 0``; ``g`` is 0 (CPU only), a
            fraction in ``(0, 1]`` or a whole number of GPUs.
        search: A :class:`Search` over configurations in place of a ``grid`` (not beside one):
            a sampler proposes the configurations, each trained with every seed.
        points: Configurations listed one by one (each ``{dotted field: value}``), in place of a
            ``grid``'s product; a search's plan holds those it has proposed so far. Points that
            differ only in numeric optimizer fields train side by side in one program.

    Raises:
        SpecError: A field is invalid; the message names it, the value and what is allowed.

    Examples:
        >>> import sweep
        >>> spec = sweep.SweepSpec(
        ...     name="heat",
        ...     problem=sweep.Problem("heat1d", num_samples=100),
        ...     model=sweep.Model("ConvNet", hidden_channels=8, depth=2),
        ...     optimizer=sweep.Optimizer("adam", learning_rate=1e-3),
        ...     training=sweep.Training(epochs=4, batch_size=16, report_every=2),
        ...     seeds=4,
        ...     grid={"optimizer.learning_rate": [1e-3, 3e-3]},
        ... )
        >>> spec.seed_list
        (0, 1, 2, 3)
        >>> spec.vmap
        ('optimizer.learning_rate',)
        >>> sweep.SweepSpec.from_dict(spec.to_dict()) == spec
        True
    """

    name: str
    problem: Problem
    model: Model
    optimizer: Optimizer
    training: Training = Training()  # noqa: RUF009 (frozen: one shared default is safe)
    seeds: int | tuple[int, ...] | Adaptive = 1
    sweep_seed: int = 0
    seeds_per_trial: int | str = 16
    grid: Mapping[str, tuple[Any, ...]] = dataclasses.field(default_factory=dict)
    vmap: tuple[str, ...] | None = None
    resources: Mapping[str, float] = dataclasses.field(default_factory=lambda: {"cpu": 1, "gpu": 0})
    search: Search | None = None
    points: tuple[Mapping[str, Any], ...] = ()
    if TYPE_CHECKING:  # not a field: __post_init__ sets it
        _seed_list: tuple[int, ...] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        problem = name_problem(self.name)
        if problem is not None:
            raise SpecError(
                f"`name`: got {self.name!r} ({problem}); the sweep's directory is named after it, "
                f"so it must be {COMPONENT_RULE}"
            )
        for field, cls in PARTS.items():
            if not isinstance(getattr(self, field), cls):
                raise SpecError(
                    f"`{field}`: got {getattr(self, field)!r}; expected a sweep.{cls.__name__} (in TOML, a "
                    f'table: [{field}] with name = "..." and its options)'
                )
        seeds: Any = self.seeds  # an int, an iterable of ints, an Adaptive or its table
        adaptive = adaptive_from(seeds)
        if adaptive is not None:
            t = self.training
            adaptive.check_metric(t.validation_columns())
            object.__setattr__(self, "seeds", adaptive)
            object.__setattr__(self, "_seed_list", adaptive.seed_list)
        else:
            seed_list = seed_tuple(seeds)
            object.__setattr__(self, "seeds", int(seeds) if is_int(seeds) else seed_list)
            object.__setattr__(self, "_seed_list", seed_list)
        if not is_int(self.sweep_seed) or not 0 <= self.sweep_seed < SEED_LIMIT:
            raise SpecError(f"`sweep_seed`: got {self.sweep_seed!r}; must be a non-negative integer below 2**32")
        object.__setattr__(self, "sweep_seed", int(self.sweep_seed))
        spt = self.seeds_per_trial
        if spt != "auto" and (not isinstance(spt, int) or isinstance(spt, bool) or spt < 1):
            raise SpecError(f'`seeds_per_trial`: got {spt!r}; must be an integer >= 1 or "auto"')
        if self.training.uses_stepper and not self.problem.name.startswith(PDE_PREFIXES):
            field = "diverted" if self.training.diverted else "correct"
            raise SpecError(
                f"`training.{field}`: needs the problem's exponax stepper, but the problem is "
                f'{self.problem.name!r}; use an "exponax:<Stepper>" or "apebench:<scenario>_<N>d" problem'
            )
        if self.training.uses_stepper:
            field = "diverted" if self.training.diverted else "correct"
            options = self.problem.options
            if options.get("normalize", "none") != "none" or options.get("history", 1) != 1:
                raise SpecError(
                    f"`training.{field}`: the problem's stepper advances one state in physical units, but the problem "
                    f"has normalize={options.get('normalize', 'none')!r}, history={options.get('history', 1)!r}; "
                    f'set normalize="none" and history=1, or train without `{field}`'
                )
        object.__setattr__(self, "resources", check_resources(self.resources))
        object.__setattr__(self, "grid", self._checked_grid())
        object.__setattr__(self, "search", self._checked_search())
        object.__setattr__(self, "points", self._checked_points())
        object.__setattr__(self, "vmap", self._checked_vmap())

    # -- grid ------------------------------------------------------------------------------
    def _checked_grid(self) -> dict[str, tuple[Any, ...]]:
        if not isinstance(self.grid, Mapping):
            raise SpecError(f"`grid`: got {self.grid!r}; give a mapping of dotted spec paths to lists")
        grid = {}
        for key, values in self.grid.items():
            if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
                raise SpecError(f"`grid.{key}`: got {values!r}; give a list of values")
            values = tuple(plain(v, f"grid.{key}") for v in values)
            if not values:
                raise SpecError(f"`grid.{key}`: empty list; give at least one value")
            check_key(key, "grid")
            for value in values:  # each value must make a valid spec
                try:
                    self._apply({key: value})
                except SpecError as e:  # name the grid's value, which the part's error shows as its own
                    raise SpecError(f"`grid.{key}` = {json.dumps(value)}: {e}") from None
            grid[key] = values
        return grid

    def check_new(self) -> None:
        """What a spec about to run or be planned is held to beyond its construction (checks added
        after specs failing them were stored, which stay readable): a grid value listed twice,
        :meth:`Search.check_new`, each configuration's unroll and rollout against a PDE problem's."""
        for key, twice in ((k, listed_twice(v)) for k, v in self.grid.items()):
            if twice is not None:
                raise SpecError(f"`grid.{key}`: lists {json.dumps(twice)} twice; give each value once")
        if self.search is not None:
            self.search.check_new(lambda assignment: pde_steps_checked(self._apply(assignment)))
        vmap = self.vmap or ()
        points = [(f"`points[{i}]`", {k: p[k] for k in p if k not in vmap}) for i, p in enumerate(self.points)]
        for where, assignment in points or [("`grid`", a) for a in self._structural()]:
            try:
                pde_steps_checked(self._apply(assignment))
            except SpecError as e:
                shown = ", ".join(f"{k}={v!r}" for k, v in assignment.items())
                raise SpecError(f"{where} ({shown}): {e}" if assignment else str(e)) from None

    def _checked_search(self) -> Search | None:
        search: Any = self.search  # a Search, its table or None
        if search is None:
            return None
        if isinstance(search, Mapping):
            search = Search.from_dict(search)
        if not isinstance(search, Search):
            raise SpecError(f"`search`: got {search!r}; expected a sweep.Search")
        if self.grid:
            raise SpecError(
                f"`search`: given beside `grid` ({sorted(self.grid)}); a search proposes every configuration "
                f"itself: move the grid's fields into search.space (e.g. sweep.choice([...]))"
            )
        if self.adaptive is not None:
            raise SpecError("`seeds`: a search trains a fixed number of seeds per configuration; give seeds=N")
        search.check_metric(self.training)
        for key in search.space:
            check_key(key, "search.space", searched=True)
        search.check_fields({f: getattr(self, f).to_dict() for f in PARTS}, self._apply)
        return search

    def _checked_points(self) -> tuple[dict[str, Any], ...]:
        if isinstance(self.points, (str, bytes, Mapping)) or not isinstance(self.points, Iterable):
            raise SpecError(f"`points`: got {self.points!r}; give a list of tables of dotted fields to values")
        points = []
        for i, point in enumerate(self.points):
            if not isinstance(point, Mapping) or not point:
                raise SpecError(f"`points[{i}]`: got {point!r}; give a table of dotted fields to values")
            if self.grid:
                raise SpecError("`points`: given beside `grid`; list every configuration as a point, or use a grid")
            if self.search is not None and set(point) != set(self.search.space):
                raise SpecError(
                    f"`points[{i}]`: fields {sorted(point)} are not those of search.space ({sorted(self.search.space)})"
                )
            point = {k: plain(v, f"points[{i}].{k}") for k, v in point.items()}
            for key in point:
                check_key(key, f"points[{i}]")
            self._apply(point)
            points.append(point)
        return tuple(points)

    def _candidates(self) -> dict[str, tuple[Any, ...]]:
        """Every varied key (:attr:`varied`) with the values it takes (a search: the ends of its range)."""
        if self.search is not None:
            return {k: d.values() for k, d in self.search.space.items()}
        if self.points:
            return {k: tuple(p.get(k) for p in self.points) for k in self.varied}
        return dict(self.grid)

    @property
    def varied(self) -> tuple[str, ...]:
        """The dotted fields that differ between configurations: the grid's keys, the search's space,
        or the fields of the points."""
        if self.search is not None:
            return tuple(self.search.space)
        if self.points:
            return tuple(dict.fromkeys(k for p in self.points for k in p))
        return tuple(self.grid)

    def with_points(self, points: Iterable[Mapping[str, Any]]) -> SweepSpec:
        """This spec with ``points`` as its configurations (what a search has proposed so far)."""
        return dataclasses.replace(self, points=tuple(points))

    def _checked_vmap(self) -> tuple[str, ...]:
        candidates = self._candidates()
        if self.vmap is None:
            return tuple(k for k in candidates if vmappable(k, candidates[k]))
        if isinstance(self.vmap, str):
            raise SpecError(f"`vmap`: got {self.vmap!r}; give a list of grid keys")
        vmap = tuple(self.vmap)
        for key in vmap:
            if key not in candidates:
                raise SpecError(f"`vmap`: {key!r} is not a grid key; grid keys: {sorted(candidates)}")
            if not vmappable(key, candidates[key]):
                raise SpecError(
                    f"`vmap`: {key!r} cannot be vmapped; only numeric optimizer hyperparameters can "
                    f"(other keys change the compiled program and become separate trials)"
                )
        return vmap

    def _apply(self, assignment: Mapping[str, Any]) -> SweepSpec:
        """This spec with dotted-path values set, and no grid (validated)."""
        parts = {f: getattr(self, f).to_dict() for f in PARTS}
        top = {}
        for key, value in assignment.items():
            part, _, leaf = key.partition(".")
            if key in TOP_GRID_KEYS:
                top[key] = value
            else:
                parts[part][leaf] = value
        built = {f: cls.from_dict(parts[f]) for f, cls in PARTS.items()}
        return dataclasses.replace(self, grid={}, vmap=(), search=None, points=(), **built, **top)

    @property
    def seed_list(self) -> tuple[int, ...]:
        """The seeds as a tuple (``seeds=4`` -> ``(0, 1, 2, 3)``; :class:`Adaptive` seeds: every seed
        the race may train, ``0..max-1``)."""
        return self._seed_list

    @property
    def adaptive(self) -> Adaptive | None:
        """The :class:`Adaptive` seeds of a race, or None for fixed seeds."""
        return self.seeds if isinstance(self.seeds, Adaptive) else None

    @property
    def vmapped_names(self) -> tuple[str, ...]:
        """The optimizer arguments vmapped inside a block (``("learning_rate",)``)."""
        assert self.vmap is not None  # __post_init__ resolves None to the vmappable grid keys
        return tuple(hparam_name(k) for k in self.vmap)

    def expand(self) -> tuple[tuple[SweepSpec, tuple[dict[str, float], ...]], ...]:
        """Structural configs (grid applied, no grid left) with their vmapped hyperparameter sets.

        Structural keys vary slowest in grid order; each config carries every combination of the
        vmapped keys as optimizer arguments (``({"learning_rate": 0.001}, ...)``; ``({},)`` when
        nothing is vmapped). Computed once per spec.
        """
        return self._expanded

    @functools.cached_property
    def _expanded(self) -> tuple[tuple[SweepSpec, tuple[dict[str, float], ...]], ...]:
        assert self.vmap is not None  # __post_init__ resolves None to the vmappable grid keys
        if self.points or self.search is not None:
            return self._expanded_points()
        names = self.vmapped_names
        hparam_sets = tuple(
            dict(zip(names, map(float, c))) for c in itertools.product(*(self.grid[k] for k in self.vmap))
        )
        return tuple((self._apply(assignment), hparam_sets) for assignment in self._structural())

    def _structural(self) -> list[dict[str, Any]]:
        """Every combination of the structural (not vmapped) grid values, slowest first in grid order."""
        keys = [k for k in self.grid if k not in (self.vmap or ())]
        return [dict(zip(keys, c)) for c in itertools.product(*(self.grid[k] for k in keys))]

    def point_config(self, point: Mapping[str, Any]) -> tuple[SweepSpec, dict[str, float]]:
        """The structural config of one point (``{dotted field: value}``) and its vmapped
        hyperparameter set: points with equal structural values share the config (one program)."""
        assert self.vmap is not None  # __post_init__ resolves None to the vmappable keys
        structural = {k: v for k, v in point.items() if k not in self.vmap}
        return self._apply(structural), {hparam_name(k): float(point[k]) for k in self.vmap}

    def _expanded_points(self) -> tuple[tuple[SweepSpec, tuple[dict[str, float], ...]], ...]:
        """``expand`` of points, grouped by structural config in order of first appearance (equal
        points once); a search without points yet: its base config, to check before work."""
        assert self.vmap is not None  # __post_init__ resolves None to the vmappable keys
        points = self.points
        if not points and self.search is not None:
            base = self.optimizer.to_dict()
            space = self.search.space
            points = ({k: base.get(hparam_name(k), space[k].values()[0]) for k in self.vmap},)
        configs: dict[str, tuple[SweepSpec, dict[str, dict[str, float]]]] = {}
        for point in points:
            config, hparams = self.point_config(point)
            entry = configs.setdefault(config.config_id, (config, {}))
            entry[1].setdefault(digest(hparams), hparams)
        return tuple((config, tuple(hsets.values())) for config, hsets in configs.values())

    # -- identity --------------------------------------------------------------------------
    def structure_dict(self) -> dict[str, Any]:
        """The part of this spec that determines one global ensemble (no seeds, grid, resources)."""
        opt = {k: v for k, v in self.optimizer.to_dict().items() if k not in self.vmapped_names}
        return {
            "problem": self.problem.to_dict(),
            "model": self.model.to_dict(),
            "optimizer": opt,
            "training": self.training.identity(),
            "sweep_seed": self.sweep_seed,
        }

    @functools.cached_property
    def problem_id(self) -> str:
        """Stable 12-hex-digit id of the data (configs with equal problems share a dataset)."""
        return digest(self.problem.to_dict())

    @functools.cached_property
    def config_id(self) -> str:
        """Stable 12-hex-digit id of the structural configuration."""
        return digest(self.structure_dict())

    # -- round trip ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        for field in PARTS:
            out[field] = getattr(self, field).to_dict()
        if isinstance(self.seeds, Adaptive):
            out["seeds"] = {ADAPTIVE_KEY: self.seeds.to_dict()}
        else:
            out["seeds"] = self.seeds if isinstance(self.seeds, int) else list(self.seeds)
        out["sweep_seed"] = self.sweep_seed
        out["seeds_per_trial"] = self.seeds_per_trial
        out["grid"] = {k: list(v) for k, v in self.grid.items()}
        assert self.vmap is not None  # __post_init__ resolves None to the vmappable grid keys
        out["vmap"] = list(self.vmap)
        out["resources"] = dict(self.resources)
        if self.search is not None:
            out["search"] = self.search.to_dict()
        if self.points:
            out["points"] = [dict(p) for p in self.points]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SweepSpec:
        data = dict(data)
        refuse_unknown(data, sorted(f.name for f in dataclasses.fields(cls)), "spec")
        for field in ("name", "problem", "model", "optimizer"):
            if field not in data:
                raise SpecError(f"`{field}`: missing; a sweep spec needs name, problem, model and optimizer")
        for field, part in PARTS.items():
            if field in data and isinstance(data[field], Mapping):
                data[field] = part.from_dict(data[field])
        return cls(**data)

    @classmethod
    def from_toml(cls, path: str | Path) -> SweepSpec:
        return cls.from_dict(read_toml(path))

    def to_toml(self, path: str | Path | None = None) -> str:
        text = toml_text(self.to_dict())
        if path is not None:
            Path(path).write_text(text)
        return text
