"""The Ray Serve deployment: each replica holds one generation (:class:`._model.ServedModel`),
batches concurrent ``/predict`` requests (:class:`._batcher.Batcher`: a pass takes what queued
while the previous one ran) and answers the routes of :mod:`._app`.

Replicas agree on the generation through a small named actor (:class:`Board`, owned by the
process that started the service): ``POST /reload`` posts the store's newest generation there,
then loads it on the replica it reaches (and posts the previous one back if it cannot be served);
every replica checks the board a few times a second and switches too, reading it again under its
switch lock, so that a target read just before a reload never switches it back. A replica switches by loading the new generation beside the old one (in a thread,
while the old one keeps serving) and then swapping them, so requests in flight finish on the
old weights. A replica Serve restarts loads the board's generation.
"""

import asyncio
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import ray
from fastapi import Request, Response
from ray import serve

from ._app import app, read_body
from ._batcher import Batcher
from ._codec import decode, encode, is_npy
from ._generations import GenerationLog, switch_to
from ._limits import BadRequest, check_calibrated, check_inputs, check_steps
from ._model import Selection, ServedModel

BOARD_NAMESPACE = "sweep-serve"
POLL_S = 0.25  # how often a replica checks the board


@ray.remote(num_cpus=0)
class Board:
    """The generation every replica should serve (a store root), and what became of each one they
    were asked to serve (:class:`._generations.GenerationLog`)."""

    def __init__(self, root: str):
        self.root = root
        self.log = GenerationLog()

    def target(self) -> str:
        return self.root

    def post(self, root: str) -> None:
        self.root = root

    def note(self, outcome: str, root: str, line: str) -> None:
        self.log.note(outcome, root, line)

    def since(self, count: int) -> list[str]:
        return self.log.since(count)


@dataclass(frozen=True)
class ReplicaConfig:
    """What every replica is built from (the token travels as its sha256 only)."""

    path: str
    selection: Selection
    buckets: tuple[int, ...]
    batch_wait_s: float
    max_rows: int
    max_steps: int
    max_body_bytes: int
    token_sha256: str | None
    watch_s: float | None
    board: str


def _respond(answer: dict[str, np.ndarray], extra: dict[str, Any], request: Request) -> Response:
    body, media, headers = encode(answer, extra, is_npy(request.headers.get("accept")))
    if media == "application/json":
        return Response(body, media_type=media)
    return Response(body, media_type=media, headers=headers)


async def _decoded(request: Request, field: str, others: tuple[str, ...]) -> tuple[np.ndarray, dict]:
    """``(the input array, the other fields)`` of a request to a route taking ``field`` and ``others``."""
    body = await read_body(request)
    return decode(body, request.headers.get("content-type"), field, dict(request.query_params), others)


# The class is serialised when it is decorated: every name it uses is defined above it.
# graceful_shutdown_wait_loop_s: a stopping replica looks for requests in flight every 0.5 s (Serve
# waits out its default, 2 s, before the first look even when none is in flight; each look with
# requests in flight logs a line)
@serve.deployment(graceful_shutdown_timeout_s=5, graceful_shutdown_wait_loop_s=0.5, health_check_period_s=2)
@serve.ingress(app)
class EnsembleService:
    """One replica of ``sweep serve``."""

    def __init__(self, config: ReplicaConfig):
        from .._configure import configure

        configure()  # one JAX CPU device per core of this replica (before its first computation)
        self.config = config
        from . import _app  # the module itself (this class travels serialised)

        _app.SETTINGS.update(token_sha256=config.token_sha256, max_body_bytes=config.max_body_bytes)
        self.board = ray.get_actor(config.board, namespace=BOARD_NAMESPACE)
        self.model = ServedModel(str(ray.get(self.board.target.remote())), config.selection, config.buckets)
        self._batcher = Batcher(self._run_batch, config.buckets[-1], config.batch_wait_s)
        context = serve.get_replica_context()
        self.replica = context.replica_id.unique_id
        self.actor_name = context.replica_id.to_full_id_str()
        self._switching = threading.Lock()
        threading.Thread(target=self._follow, daemon=True, name="sweep-serve-follow").start()

    # -- generations ------------------------------------------------------------------------------
    def _switch(self, root: str) -> "ServedModel":
        """Serve ``root`` from now on (loaded and compiled beside the current one first)."""
        with self._switching:
            if root != self.model.root:
                self.model = switch_to(root, self.model, self.config.selection, self.config.buckets, self._note)
            return self.model

    def _note(self, outcome: str, root: str, line: str) -> None:
        self.board.note.remote(outcome, root, line)

    def _switch_to_board(self) -> None:
        """Serve the board's generation, read under the switch lock: a target read before a
        ``/reload`` posted a newer one must not switch this replica back to the older one."""
        with self._switching:
            target = str(ray.get(self.board.target.remote()))
            if target != self.model.root:
                self.model = switch_to(target, self.model, self.config.selection, self.config.buckets, self._note)

    def _newest(self) -> str:
        from ..store import Store

        return Store.open(self.config.path).root

    def _follow(self) -> None:
        """Switch to the board's generation when it changes (and, with ``watch_s``, post the store's
        newest generation there)."""
        checked = time.monotonic()
        while True:
            time.sleep(POLL_S)
            try:
                target = str(ray.get(self.board.target.remote()))
                if self.config.watch_s and time.monotonic() - checked >= self.config.watch_s:
                    checked = time.monotonic()
                    newest = self._newest()
                    if newest != target:
                        self._switch(newest)
                        self.board.post.remote(newest)
                        target = newest
                if target != self.model.root:
                    self._switch_to_board()
            except Exception:  # a generation that cannot be served: keep the current one, try again
                time.sleep(1.0)

    # -- routes -----------------------------------------------------------------------------------
    @app.get("/healthz", summary="Liveness: 200 while this replica serves.")
    async def healthz(self) -> dict[str, Any]:
        return {"status": "ok", "generation": self.model.generation}

    @app.get("/info", summary="The store, generation, members, input shape and dtype, compiled batch sizes.")
    async def info(self) -> dict[str, Any]:
        return {
            **self.model.info(),
            "max_rows": self.config.max_rows,
            "max_steps": self.config.max_steps,
            "max_body_bytes": self.config.max_body_bytes,
            "batch_wait_s": self.config.batch_wait_s,
            "replica": self.replica,
            "replica_actor": self.actor_name,
            "requests_in_flight": self._batcher.in_flight,  # /predict requests waiting for a pass or in one
            "token_required": self.config.token_sha256 is not None,
        }

    @app.get("/members", summary="The served members' rows: config, grid values, seed, status, metrics.")
    async def members(self) -> dict[str, Any]:
        model = self.model
        return {"generation": model.generation, "members": model.members_rows()}

    @app.post(
        "/predict",
        summary="Mean and std over members (and every member's prediction with members=true).",
        description='JSON `{"x": [[...]], "members": false}` or a .npy body (Content-Type: application/x-npy, '
        "`?members=true` in the query); `Accept: application/x-npy` answers with one .npy array stacking mean, "
        "std and the members (header X-Sweep-Layout). A service started with --recalibrate also takes "
        '`"calibrated": true` (the std scaled by the calibration) and `"interval": 0.9` (adds `low` and `high`, '
        "the split-conformal interval).",
    )
    async def predict(self, request: Request) -> Response:
        model = self.model
        x, fields = await _decoded(request, "x", ("members", "calibrated", "interval"))
        x = check_inputs(x, "x", model.sample_shape, self.config.max_rows, model.dtype)
        levels = None if model.held.calibration is None else model.held.calibration.levels
        calibrated, interval = check_calibrated(fields.get("calibrated"), fields.get("interval"), levels)
        served, answer = await self._batcher.submit((x, fields.get("members")))
        if isinstance(answer, BadRequest):
            raise answer
        if calibrated or interval is not None:
            answer = served.calibrated(answer, calibrated, interval)
        extra = {"generation": served.generation, "members_served": len(served.member_ids)}
        if "member_ids" in answer:
            extra["member_ids"] = answer.pop("member_ids").tolist()
        return _respond(answer, extra, request)

    def _run_batch(self, items: list[tuple[np.ndarray, Any]]) -> list[tuple[ServedModel, Any]]:
        model = self.model  # the whole batch on one generation, even if a switch lands meanwhile
        answers = model.predict([x for x, _ in items], [m for _, m in items])
        return [(model, a) for a in answers]

    @app.post(
        "/rollout",
        summary="Mean and std over members at every step of an autoregressive rollout.",
        description='JSON `{"x0": [[...]], "steps": 10}` or a .npy body of x0 with `?steps=10`; answers '
        "`[steps + 1, batch, channels, *spatial]` each (step 0: x0 and zeros). A service started with "
        '--recalibrate also takes `"calibrated": true` (the std of each step scaled by its rollout scale) and '
        '`"interval": 0.9` (adds `low` and `high`, the split-conformal interval of each step), for as many steps '
        "as the validation trajectories have.",
    )
    async def rollout(self, request: Request) -> Response:
        model = self.model
        x0, fields = await _decoded(request, "x0", ("steps", "calibrated", "interval"))
        steps = check_steps(fields.get("steps"), self.config.max_steps)
        x0 = check_inputs(x0, "x0", model.rollout_shape, self.config.max_rows, model.dtype)
        levels = None if model.held.calibration is None else model.held.calibration.levels
        calibrated, interval = check_calibrated(fields.get("calibrated"), fields.get("interval"), levels)
        from .._errors import QueryError

        try:
            answer = await asyncio.to_thread(model.rollout, x0, steps, calibrated, interval)
        except QueryError as e:  # a model whose outputs cannot be fed back in
            raise BadRequest(422, "x0", f"shape {tuple(x0.shape)}", str(e)) from None
        return _respond(answer, {"generation": model.generation, "steps": steps}, request)

    @app.post("/reload", summary="Switch every replica to the store's newest generation.")
    async def reload(self) -> dict[str, Any]:
        if self.config.selection.member_ids is not None:
            raise BadRequest(
                409,
                "reload",
                "a fixed selection of member ids",
                "serve a store path with where/best (not an Ensemble) to follow newer generations",
            )
        previous = self.model
        newest = await asyncio.to_thread(self._newest)
        await self.board.post.remote(newest)  # type: ignore[misc]  # first: the replicas follow the board
        try:
            model = await asyncio.to_thread(lambda: self._switch(newest))
        except Exception as e:  # the newest generation cannot be served: keep the current one
            await self.board.post.remote(previous.root)  # type: ignore[misc]
            raise BadRequest(409, "generation", str(e), "the current generation keeps serving") from None
        return {
            "generation": model.generation,
            "previous": previous.generation,
            "changed": model is not previous,
            "members": len(model.member_ids),
            "replicas_follow_within_s": POLL_S * 2,
        }
