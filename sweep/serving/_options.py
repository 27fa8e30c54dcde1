"""The settings of a service, in one object (as Ray Tune's config objects hold theirs)."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from typing import Any

from .._errors import SpecError

LEVELS = (0.5, 0.9)  # the interval levels a recalibrated service answers
INGRESSES = ("direct", "proxy")  # how HTTP reaches a replica (see ServeOptions.ingress)


@dataclass(frozen=True)
class ServeOptions:
    """How :func:`sweep.serve` selects members, where it listens and how it batches.

    Args:
        where: keep the members whose columns take these values (as :meth:`sweep.Ensemble.where`).
        best: keep the ``best`` members by ``metric`` (as :meth:`sweep.Ensemble.best`).
        metric: the column ``best`` ranks by (a validation column by default).
        mode: ``"min"`` (lower ``metric`` is better) or ``"max"``; ``None`` (default): ``"max"`` for
            a built-in score (``val_accuracy``, ``val_correlation``), else ``"min"``.
        pool: ``False``: refuse a selection whose members take several values of a grid column
            ``where`` leaves free (members trained with different settings pooled into one
            ensemble), in the generation served first and in every newer one (``watch_s``,
            ``POST /reload``; the current one keeps serving); ``sweep serve`` without ``--pool``.
            Not checked with ``greedy``, which blends configurations by design.
        greedy: serve the :class:`~sweep.ensemble.Blend` of this many steps of greedy selection
            (:meth:`sweep.Ensemble.select_greedy`, CRPS on the validation split) over the members
            ``where`` and ``best`` select, structural configs of one problem mixed.
        recalibrate: fit a recalibration on the validation split of each generation served
            (:meth:`sweep.Ensemble.recalibrate`, levels :data:`LEVELS`): ``/predict`` then answers
            ``"calibrated": true`` (the calibrated std) and ``"interval": 0.9`` (``low`` and ``high``),
            and ``/rollout`` too (per rollout step, for as many steps as the validation
            trajectories have).
        trust_code: serve a model the store names by import path (your own model factory: code
            the store names, see :func:`sweep.load`), imported from this environment only; without
            it such a store is refused before Ray starts. Built-in architectures need no trust.
        host: the address to bind; ``127.0.0.1`` serves this machine only.
        port: the HTTP port.
        replicas: replicas of the model, each holding every selected member.
        cpus: CPUs reserved per replica.
        gpus: GPUs reserved per replica.
        ingress: ``"direct"``: with one replica on a one-node Ray, the replica answers HTTP on
            ``port`` itself (Ray Serve's direct ingress: no proxy hop per request); several
            replicas, a multi-node cluster or a Serve that already runs there go through
            ``"proxy"``: Serve's HTTP proxy, which spreads requests over the replicas.
        max_batch: the most input rows one forward pass takes; batch sizes are the powers of two
            up to it, each compiled at start-up.
        batch_wait_s: how long a forward pass waits for more requests to batch with when fewer
            than ``max_batch`` are queued (0: none; a pass takes the requests that arrived while
            the previous one ran, see :mod:`sweep.serving._batcher`).
        max_rows: the most rows one request may send (default: ``max_batch``).
        max_steps: the most steps one ``/rollout`` request may ask for.
        max_body_bytes: the largest request body accepted.
        token_file: a file holding a bearer token; requests without it get 401 (``/healthz`` stays open).
        watch_s: check the store for a newer generation every ``watch_s`` seconds and switch to it
            (None: only on ``POST /reload``).
        address: a Ray cluster to run on (None: a local Ray started for the service).
        name: the Serve application's name.

    Raises:
        SpecError: on a value out of range (the message names the field, the value and what is allowed).
    """

    where: dict[str, Any] = field(default_factory=dict)
    best: int | None = None
    greedy: int | None = None
    metric: str = "val_loss"
    mode: str | None = None
    pool: bool = True
    recalibrate: bool = False
    trust_code: bool = False
    host: str = "127.0.0.1"
    port: int = 8000
    replicas: int = 1
    cpus: float = 1.0
    gpus: float = 0.0
    ingress: str = "direct"
    max_batch: int = 64
    batch_wait_s: float = 0.0
    max_rows: int | None = None
    max_steps: int = 1000
    max_body_bytes: int = 64 * 2**20
    token_file: str | os.PathLike | None = None
    watch_s: float | None = None
    address: str | None = None
    name: str = "sweep"

    def __post_init__(self):
        _integer("best", self.best, 1, optional=True)
        _integer("greedy", self.greedy, 1, optional=True)
        _integer("port", self.port, 0, 65535)
        _integer("replicas", self.replicas, 1)
        _integer("max_batch", self.max_batch, 1, 4096)
        _integer("max_rows", self.max_rows, 1, optional=True)
        _integer("max_steps", self.max_steps, 1)
        _integer("max_body_bytes", self.max_body_bytes, 1)
        _number("cpus", self.cpus, 0)
        _number("gpus", self.gpus, 0)
        _number("batch_wait_s", self.batch_wait_s, 0)
        _number("watch_s", self.watch_s, 0.1, optional=True)
        if self.ingress not in INGRESSES:
            raise SpecError(
                f"ServeOptions.ingress: got {self.ingress!r}; choose one of {', '.join(map(repr, INGRESSES))}"
            )
        if not isinstance(self.pool, bool):
            raise SpecError(f"ServeOptions.pool: got {self.pool!r}; give True or False")
        for flag in ("recalibrate", "trust_code"):
            if not isinstance(getattr(self, flag), bool):
                raise SpecError(f"ServeOptions.{flag}: got {getattr(self, flag)!r}; give True or False")
        if self.mode not in (None, "min", "max"):
            raise SpecError(f'ServeOptions.mode: got {self.mode!r}; choose "min" or "max" (None: by the metric)')
        if not isinstance(self.where, dict):
            raise SpecError(f"ServeOptions.where: got {self.where!r}; give a dict of column -> value(s)")
        if not isinstance(self.host, str) or not self.host:
            raise SpecError(f"ServeOptions.host: got {self.host!r}; give an address such as '127.0.0.1'")
        if self.token_file is not None and not os.path.isfile(self.token_file):
            raise SpecError(f"ServeOptions.token_file: {str(self.token_file)!r} is not a file")

    @property
    def rows_limit(self) -> int:
        """The most rows one request may send."""
        return self.max_rows if self.max_rows is not None else self.max_batch

    @property
    def buckets(self) -> tuple[int, ...]:
        """The batch sizes compiled at start-up: powers of two below ``max_batch``, and ``max_batch``."""
        powers = [2**i for i in range(int(math.log2(self.max_batch)) + 1) if 2**i < self.max_batch]
        return (*powers, self.max_batch)

    def replace(self, **changes: Any) -> ServeOptions:
        """A copy with ``changes`` (checked again)."""
        return dataclasses.replace(self, **changes)


def _integer(name: str, value: Any, low: int, high: int | None = None, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        allowed = f"an integer in {low}..{high}" if high is not None else f"an integer >= {low}"
        raise SpecError(f"ServeOptions.{name}: got {value!r}; give {allowed}" + (" or None" if optional else ""))


def _number(name: str, value: Any, low: float, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < low:
        raise SpecError(
            f"ServeOptions.{name}: got {value!r}; give a number >= {low}" + (" or None" if optional else "")
        )
