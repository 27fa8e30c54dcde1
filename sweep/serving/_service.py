"""``sweep.serve``: start a service for a selection of a store on Ray Serve, and stop it."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import uuid
import warnings
from typing import Any

from .._errors import SpecError, warn
from .._import_path import workers_import_path
from .._reachable import check_reachable
from ..ensemble import Blend, Ensemble, load
from ._app import token_digest
from ._model import Selection, generation_of
from ._options import ServeOptions

SERVE_LOG_LEVEL = "WARNING"  # of Serve's own logs, in its actors and in this process


class Service:
    """A running service (what :func:`serve` returns); a context manager that shuts it down.

    Attributes:
        url: where it answers, e.g. ``http://127.0.0.1:8000``.
        generation: the generation it started with.
        members: how many members it serves.
        ingress: how HTTP reaches the replicas: ``"direct"`` (the replica answers ``url`` itself)
            or ``"proxy"`` (Serve's HTTP proxy answers ``url``; see :attr:`ServeOptions.ingress`).
        options: its settings.
    """

    def __init__(
        self,
        url: str,
        generation: str,
        members: int,
        options: ServeOptions,
        board: Any,
        started_ray: bool,
        ingress: str = "proxy",
    ):
        self.url, self.generation, self.members, self.options = url, generation, members, options
        self.ingress = ingress
        self._board, self._started_ray, self._running = board, started_ray, True
        self._changes_read = 0

    def __repr__(self) -> str:
        return (
            f"Service({self.url}, {self.members} members, generation {self.generation or '-'}, {self.ingress} ingress)"
        )

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def changes(self) -> list[str]:
        """What the service did with the generations it was asked to serve since the last call
        (a newer one found by ``watch_s``, or by ``POST /reload``): a line per generation it
        switched to (``"serving generation 000002: 8 members"``) or refused, saying why and which
        generation keeps serving. ``sweep serve`` prints them as they come.

        Examples:
            ```python
            service = sweep.serve("runs/heat", sweep.ServeOptions(best=8, watch_s=30))
            ...
            for line in service.changes():
                print(line)
            ```
        """
        if not self._running:
            return []
        import ray

        lines = ray.get(self._board.since.remote(self._changes_read))
        self._changes_read += len(lines)
        return lines

    def shutdown(self) -> None:
        """Stop Serve (its controller, proxies and replicas; only this application where the
        cluster's Serve runs others too) and the Ray that :func:`serve` started for it (a Ray it
        joined keeps running). The requests in flight are answered first (for at most 5 s);
        later ones are refused. Calling it again does nothing."""
        if not self._running:
            return
        self._running = False
        import ray
        from ray import serve as ray_serve

        try:
            app_names = set(ray_serve.status().applications)  # empty where no Serve runs
        except Exception:  # Serve's controller cannot be reached: stop what is left of it below
            app_names = set()
        with _logs_at("ray.serve", SERVE_LOG_LEVEL):
            if self.options.name in app_names:
                # first, while the proxy still answers: the replicas finish the requests in flight
                # (serve.shutdown alone stops the proxy at once, dropping them)
                try:
                    ray_serve.delete(self.options.name)
                except Exception as error:  # Serve's controller died or timed out
                    warn(f"Serve did not delete the application {self.options.name!r}: {error}")
            # where this service joined a Ray whose Serve runs other applications, they stay
            if self._started_ray or not app_names - {self.options.name}:
                ray_serve.shutdown()
        try:
            ray.kill(self._board)
        except Exception:  # already gone with its owner
            pass
        if self._started_ray:
            ray.shutdown()


def serve(path_or_ensemble: str | os.PathLike | Ensemble, options: ServeOptions | None = None) -> Service:
    """Serve the mean, spread and members' predictions of an ensemble over HTTP, on Ray Serve.

    Args:
        path_or_ensemble: a sweep or store directory (local or ``s3://``), whose selection
            (``options.where`` / ``best`` / ``metric`` / ``greedy``) is applied again to each newer
            generation, or an :class:`~sweep.Ensemble` or a :class:`~sweep.ensemble.Blend` (a
            greedy selection, of several structural configs maybe) whose members are served as
            they are (no reload).
        options: the settings (:class:`ServeOptions`; default: 127.0.0.1:8000, one replica).

    Returns:
        The running :class:`Service`; it serves until :meth:`Service.shutdown` (or the end of
        this process). On a cluster where Serve already runs, that Serve's HTTP host and port
        stay as they are (Serve has one HTTP proxy per node).

    Raises:
        SpecError: on bad options.
        QueryError: if the selection matches nothing, (not a blend) spans several structural configs,
            or, with ``pool=False``, pools members trained with different settings.
        StoreError: if the store cannot be read.

    ```python
    service = sweep.serve("runs/heat", sweep.ServeOptions(best=64, port=8000))
    # curl -X POST localhost:8000/predict -d '{"x": [[[0.0, 0.1, ...]]]}'
    service.shutdown()
    ```
    """
    options = ServeOptions() if options is None else options
    if not isinstance(options, ServeOptions):
        raise SpecError(f"options: got {type(options).__name__}; give a sweep.ServeOptions")
    if isinstance(path_or_ensemble, (Ensemble, Blend)):
        if options.where or options.best is not None or options.greedy is not None or not options.pool:
            raise SpecError(
                "options.where / options.best / options.greedy / options.pool=False: select on the Ensemble itself "
                "(an Ensemble is served as it is, pooled or not), or serve a path with them"
            )
        ens = path_or_ensemble
        path = ens.store.root
        counts = tuple(ens.counts.tolist()) if isinstance(ens, Blend) else None
        ids = tuple(ens.index["member_id"].to_pylist())
        selection = Selection(
            member_ids=ids,
            recalibrate=options.recalibrate,
            counts=counts,
            calibration=ens.calibration,
            trust_code=options.trust_code or ens.store.trust_code,
        )
    else:
        path = str(path_or_ensemble)
        selection = Selection(
            dict(options.where),
            options.best,
            options.metric,
            options.mode,
            pool=options.pool,
            recalibrate=options.recalibrate,
            greedy=options.greedy,
            trust_code=options.trust_code,
        )
        ens = selection.apply(load(path, trust_code=options.trust_code))
    if not isinstance(ens, Blend):  # a blend may span structural configs, run config by config
        ens.spec  # noqa: B018  (one structural config, or a QueryError now, before Ray starts)
    store = ens.store.trusting() if selection.trust_code else ens.store
    for config_id in dict.fromkeys(ens.index["config_id"].to_pylist()):
        store.template(config_id)  # every model can be built (trusted, if named by import path), or an error now
    if options.recalibrate:
        ens.split_samples("val", "serve(recalibrate=True)")  # validation samples to fit on, or a QueryError now
    ens.store.check_leaves(ens.index["member_id"].to_pylist())  # now: a StoreError, not a replica's failure
    root = ens.store.root
    token = _token(options.token_file)

    import ray
    from ray import serve as ray_serve

    from ._deployment import BOARD_NAMESPACE, Board, EnsembleService, ReplicaConfig

    if options.address and not options.address.startswith("ray://"):
        check_reachable(options.address)
    started_ray = not ray.is_initialized()
    if started_ray and not options.address:  # a Ray of ours: the host is this machine's, the port free there
        _check_free(options.host, options.port)
    if started_ray:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
            # Ray's logger untouched after (configure_logging=False), at errors only while it starts:
            # no token-authentication notice
            # a local Ray's workers: this process's import path, as sweep.run's local Ray
            with _logs_at("ray", "ERROR"), contextlib.nullcontext() if options.address else workers_import_path():
                ray.init(address=options.address or "local", include_dashboard=False, configure_logging=False)
    ingress = _ingress(options)
    port = options.port or _free_port(options.host)
    board_name = f"{options.name}-{uuid.uuid4().hex[:12]}"
    board = Board.options(name=board_name, namespace=BOARD_NAMESPACE).remote(root)
    config = ReplicaConfig(
        path=path,
        selection=selection,
        buckets=options.buckets,
        batch_wait_s=options.batch_wait_s,
        max_rows=options.rows_limit,
        max_steps=options.max_steps,
        max_body_bytes=options.max_body_bytes,
        token_sha256=token_digest(token) if token else None,
        watch_s=options.watch_s,
        board=board_name,
    )
    actor_options: dict[str, Any] = {"num_cpus": options.cpus, "num_gpus": options.gpus}
    start_options: dict[str, Any] = {"http_options": {"host": options.host, "port": port}}
    if ingress == "direct":  # the replica listens on `port`; Serve's proxy (unused) on another one
        env = {"env_vars": direct_ingress_env(port)}
        actor_options["runtime_env"] = env
        start_options = {
            "http_options": {"host": options.host, "port": _free_port(options.host)},
            "controller_options": {"runtime_env": env},
        }
    deployment = EnsembleService.options(
        name=options.name,
        num_replicas=options.replicas,
        ray_actor_options=actor_options,
        max_ongoing_requests=max(100, 4 * options.max_batch),
    )
    try:
        # Serve's controller, proxy and replicas log warnings and errors only (no access log line
        # per request, no "ready at" line naming the unused proxy's port): the service prints
        # its own address
        with _logs_at("ray.serve", SERVE_LOG_LEVEL):
            ray_serve.start(**start_options, logging_config={"log_level": SERVE_LOG_LEVEL})
            ray_serve.run(
                deployment.bind(config),
                name=options.name,
                route_prefix="/",
                logging_config={"enable_access_log": False, "log_level": SERVE_LOG_LEVEL},
            )
    except BaseException:
        service = Service("", "", 0, options, board, started_ray)
        service.shutdown()
        raise
    host = f"[{options.host}]" if ":" in options.host else options.host
    return Service(f"http://{host}:{port}", generation_of(root), len(ens), options, board, started_ray, ingress)


def direct_ingress_env(port: int) -> dict[str, str]:
    """The settings (environment variables that Ray Serve's controller and replicas read when they
    start) for a replica that answers HTTP on ``port`` itself: direct ingress on, its port range
    that one port, a restarted replica free to take the port again at once, no draining period
    on shutdown (no load balancer in front has to deregister it), and the routes on the replica's
    main event loop. The forward pass runs in a worker thread, so that loop stays free."""
    return {
        "RAY_SERVE_ENABLE_DIRECT_INGRESS": "1",
        "RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT": str(port),
        "RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT": str(port + 1),  # the end of the range, excluded
        "RAY_SERVE_PORT_QUARANTINE_S": "0",
        "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S": "0",
        # the replica runs the routes on the event loop that reads the sockets (no hop to a second
        # thread's loop per request): requests reach the batch queue sooner, batches fill (measured:
        # 64 of 64 rows per pass at 64 clients against 40-53)
        "RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0",
    }


def _ingress(options: ServeOptions) -> str:
    """``"direct"`` where the replica can answer ``options.port`` itself: one replica, a one-node
    Ray (the replica binds ``options.host`` on the node it runs on) and no Serve running yet (a
    running Serve keeps the settings it started with); ``"proxy"`` otherwise."""
    import ray
    from ray.serve._private.constants import SERVE_CONTROLLER_NAME, SERVE_NAMESPACE

    if options.ingress == "proxy" or options.replicas > 1:
        return "proxy"
    if sum(1 for node in ray.nodes() if node["Alive"]) > 1:
        return "proxy"
    try:
        ray.get_actor(SERVE_CONTROLLER_NAME, namespace=SERVE_NAMESPACE)
    except ValueError:
        return "direct"
    return "proxy"


def _free_port(host: str) -> int:
    """A port no one listens on at ``host`` now."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _check_free(host: str, port: int) -> None:
    """A :class:`SpecError` naming ``port`` where it cannot be bound at ``host`` now (in use), before
    Ray starts: Serve would retry it for half a minute and fail without naming it."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Serve binds: a closed connection's port is free
        try:
            s.bind((host, port))
        except socket.gaierror as e:
            raise SpecError(f"`host`: got {host!r} ({e.strerror or e}); give an address of this machine") from None
        except OSError as e:
            raise SpecError(
                f"`port`: {port} cannot be bound at {host} ({e.strerror or e}); stop what listens there, or choose "
                f"another port (0: a free one)"
            ) from None


def _token(token_file: str | os.PathLike | None) -> str | None:
    if token_file is None:
        return None
    with open(token_file, encoding="utf-8") as f:
        token = f.read().strip()
    if not token or any(c.isspace() for c in token):
        raise SpecError(
            f"ServeOptions.token_file: {str(token_file)!r} must hold one token (no spaces), not {'nothing' if not token else 'several words'}"
        )
    return token


@contextlib.contextmanager
def _logs_at(name: str, level: str):
    """The logger ``name`` of this process at ``level`` for a while, as it was after."""
    logger = logging.getLogger(name)
    before = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(before)
