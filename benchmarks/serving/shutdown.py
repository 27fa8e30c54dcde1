"""Benchmark: how long `Service.shutdown` takes, idle and with a request in flight, and whether
that request is answered, for both ingresses.

A store of 8 random members of the reference ConvNet (``_shared/members.py``) is served on
127.0.0.1 by a local Ray Serve (one replica, ``batch_wait_s=1.5``, ``max_batch=4``), ``--repeats``
times per case. Idle: the service answers ``/healthz``, then ``shutdown()`` is timed. In flight:
a request of one row is sent (it waits 1.5 s for a second row in the replica), ``shutdown()``
starts 0.3 s later and is timed, and the request's outcome is printed (200, or the error that
took its place). Printed per ingress: the start-up, the idle and the in-flight shutdowns
(median, min-max) and the in-flight outcomes.

    python -m benchmarks.serving.shutdown [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time

import numpy as np

import sweep
from benchmarks._shared.members import random_store
from benchmarks._shared.ray_local import local_ray

BATCH_WAIT_S = 1.5  # a lone request of one row waits this long for a second in the replica
SENT_BEFORE_S = 0.3  # the request is this long in flight when the shutdown starts


def _healthy(url: str, deadline_s: float = 120.0) -> None:
    import httpx

    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url}/healthz did not answer within {deadline_s} s")


def _one_case(path: str, ingress: str, in_flight: bool) -> tuple[float, float, str]:
    """Start-up seconds, shutdown seconds and (in flight) the request's outcome."""
    import httpx

    options = sweep.ServeOptions(port=0, max_batch=4, batch_wait_s=BATCH_WAIT_S, ingress=ingress)
    start = time.perf_counter()
    service = sweep.serve(path, options)
    _healthy(service.url)
    started_s = time.perf_counter() - start
    outcome: list[str] = []
    sender = None
    if in_flight:
        x = np.zeros((1, 1, 48), np.float32).tolist()

        def send() -> None:
            try:
                outcome.append(str(httpx.post(f"{service.url}/predict", json={"x": x}, timeout=60).status_code))
            except httpx.HTTPError as error:
                outcome.append(type(error).__name__)

        sender = threading.Thread(target=send)
        sender.start()
        time.sleep(SENT_BEFORE_S)
    start = time.perf_counter()
    service.shutdown()
    stopped_s = time.perf_counter() - start
    if sender is not None:
        sender.join(timeout=60)
    return started_s, stopped_s, outcome[0] if outcome else "-"


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    local_ray(2)
    with tempfile.TemporaryDirectory() as tmp:
        path = random_store(tmp, 8)
        for ingress in ("direct", "proxy"):
            starts, idle, busy, outcomes = [], [], [], []
            for _ in range(args.repeats):
                started_s, stopped_s, _ = _one_case(path, ingress, in_flight=False)
                starts.append(started_s)
                idle.append(stopped_s)
                _, stopped_s, outcome = _one_case(path, ingress, in_flight=True)
                busy.append(stopped_s)
                outcomes.append(outcome)
            print(
                f"{ingress:6s} ingress: start {_spread(starts)}, shutdown idle {_spread(idle)}, "
                f"with a request in flight {_spread(busy)}; that request: {', '.join(outcomes)}"
            )


if __name__ == "__main__":
    main()
