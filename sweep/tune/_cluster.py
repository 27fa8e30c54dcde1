"""The Ray this process works on: started or joined once, its nodes, how many trials fit."""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping

from .._errors import SweepError
from .._import_path import workers_import_path
from .._interrupt import starting_ray
from .._reachable import check_reachable


def ensure_ray(address: str | None, quiet: bool = True) -> None:
    """Reuse an initialised Ray; else start a new local one (no address) or join ``address``.

    Without an address Ray starts its own instance (``address="local"``), never joining a
    cluster someone started on this machine with ``ray start`` (which a bare ``ray.init()``
    would do, and whose end would take this sweep's trials with it); its workers get the
    driver's own import path (``workers_import_path``: as ``PYTHONPATH``), so that trials import
    what the driver imports (a model module a script put on ``sys.path``). On a cluster the
    workers import what is installed there or sent with Ray's ``runtime_env``.
    ``quiet``: Ray logs errors only (no banner, no token-authentication notice)."""
    import ray

    with starting_ray():  # a run depends on this Ray now; a SIGTERM meanwhile is its Ctrl-C
        if ray.is_initialized():
            return
        level = logging.ERROR if quiet else logging.WARNING
        with warnings.catch_warnings():  # Ray forks and execs its daemons at once: no JAX state is shared
            warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
            if address is None:
                with workers_import_path():
                    ray.init(address="local", include_dashboard=False, log_to_driver=False, logging_level=level)
            elif address.startswith("ray://"):  # Ray Client: the cluster's own settings apply
                ray.init(address=address)
            else:
                check_reachable(address)  # Ray itself retries for a minute before it says so
                try:
                    ray.init(address=address, log_to_driver=False, logging_level=level)
                except ConnectionError as e:
                    raise SweepError(f"`address`: {address}: {e}{_auth_hint()}") from None


def _auth_hint() -> str:
    """What to try where joining a cluster failed and this shell does not send a token."""
    if os.environ.get("RAY_AUTH_MODE") == "token":
        return ""
    return (
        "; if the cluster was started with token authentication (Ray 2.5x does so where ~/.ray/auth_token "
        "exists), run with RAY_AUTH_MODE=token and its token (RAY_AUTH_TOKEN or ~/.ray/auth_token)"
    )


def alive_nodes() -> list[dict[str, float]]:
    """The ``Resources`` of every alive node."""
    import ray

    return [n["Resources"] for n in ray.nodes() if n.get("Alive")]


def trial_slots(resources: Mapping[str, float], nodes: list[dict[str, float]]) -> int:
    """How many trials with ``resources`` the cluster runs at once."""
    cpu, gpu = float(resources["cpu"]), float(resources["gpu"])
    total = 0
    for node in nodes:
        fit = int(node.get("CPU", 0) // cpu) if cpu else 10**9
        if gpu:
            fit = min(fit, int(node.get("GPU", 0) // gpu))
        total += fit
    return max(1, total)
