"""Benchmark: `sweep.serve` under load against in-process inference, measured in the same run.

A 512-member selection of the reference ConvNet (hidden 16, depth 6, relu, dirichlet, 48 points;
randomly initialised members aggregated into a temporary store, as ``ensemble/predict.py``
builds them: ``_shared/members.py``) is served on 127.0.0.1 by a local Ray Serve (one replica holding the whole
machine, batch sizes up to ``--max-batch`` compiled at start-up). An httpx async client keeps
1, 8 and 64 clients busy, one input per request, for ``--seconds`` (or ``--max-requests``)
each: requests/s, p50 / p99 latency, and served member-inputs/s (requests/s x members) as a
ratio of in-process inference at the batch size equal to the number of clients, timed in the
same process just before: ``Ensemble.predict`` (which reads the members from the store on each
call) and ``HeldEnsemble.predict_mean_std`` (members held in memory, the computation each
replica does); the replica's own counters (``/info``) give its forward passes, rows per pass
and milliseconds per pass under each load. The client shares the machine with the server. Targets (2 cores): at 64 clients
>= 50% of the in-process rate, p99 <= 3x the median.

    python -m benchmarks.serving.load [--members 512] [--clients 1 8 64] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import tempfile
import time

import numpy as np

import sweep
from benchmarks._shared.machine import OtherLoad
from benchmarks._shared.members import random_store
from benchmarks._shared.ray_local import local_ray
from benchmarks._shared.workload import POINTS
from sweep.ensemble import HeldEnsemble, load


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _in_process_rate(fn, members: int, batch: int, seconds: float) -> float:
    """Member-inputs/s of ``fn()`` over one ``batch`` (best of repeated calls for ``seconds``)."""
    fn()  # compile / warm up
    best, end = float("inf"), time.perf_counter() + seconds
    while time.perf_counter() < end:
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return members * batch / best


async def _load(url: str, x: list, clients: int, seconds: float, max_requests: int) -> tuple[list[float], float]:
    """Latencies (s) of every request ``clients`` concurrent clients sent, and the wall time."""
    import httpx

    latencies: list[float] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as c:
        await asyncio.gather(*(c.post("/predict", json={"x": x}) for _ in range(clients)))  # warm connections
        end = time.perf_counter() + seconds

        async def client():
            while time.perf_counter() < end and len(latencies) < max_requests:
                start = time.perf_counter()
                r = await c.post("/predict", json={"x": x})
                if r.status_code != 200:
                    raise RuntimeError(f"/predict answered {r.status_code}: {r.text[:300]}")
                latencies.append(time.perf_counter() - start)

        begin = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        return latencies, time.perf_counter() - begin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=512)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--seconds", type=float, default=10.0, help="load per client count (bounded)")
    parser.add_argument("--max-requests", type=int, default=20000, help="requests per client count, at most")
    parser.add_argument("--max-batch", type=int, default=64)
    parser.add_argument("--batch-wait", type=float, default=0.005)
    args = parser.parse_args()
    sweep.configure()
    import ray

    with tempfile.TemporaryDirectory() as tmp, OtherLoad() as other:
        path = random_store(tmp, args.members)
        ens = load(path)
        held = HeldEnsemble(ens)
        rng = np.random.default_rng(0)
        xs = rng.standard_normal((max(args.clients), 1, POINTS)).astype(np.float32)
        rates = {
            c: (
                _in_process_rate(lambda c=c: ens.predict(xs[:c]), len(ens), c, 3.0),
                _in_process_rate(lambda c=c: held.predict_mean_std(xs[:c]), len(ens), c, 3.0),
            )
            for c in args.clients
        }
        local_ray(None, configure_logging=False)
        options = sweep.ServeOptions(port=_free_port(), cpus=2, max_batch=args.max_batch, batch_wait_s=args.batch_wait)
        started = time.perf_counter()
        service = sweep.serve(path, options)
        start_s = time.perf_counter() - started
        try:
            import httpx

            results, passes = {}, {}
            for c in args.clients:  # the replica's own counters around each load: passes, rows, seconds
                before = httpx.get(f"{service.url}/info", timeout=60).json()
                results[c] = asyncio.run(_load(service.url, xs[:1].tolist(), c, args.seconds, args.max_requests))
                after = httpx.get(f"{service.url}/info", timeout=60).json()
                passes[c] = [after[k] - before[k] for k in ("forward_passes", "rows_run", "forward_seconds")]
        finally:
            service.shutdown()
            ray.shutdown()

    print(
        f"serve load benchmark: {len(ens)} members, ConvNet hidden 16 depth 6 on 48 points, one input per request, "
        f"max batch {args.max_batch}, batch wait {args.batch_wait} s, 1 replica (2 CPUs), client in the same machine; "
        f"service start {start_s:.1f} s (compiles {len(options.buckets)} batch sizes)"
    )
    print(
        f"{'clients':>7}{'requests':>9}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'p99/p50':>8}"
        f"{'served m-in/s':>15}{'predict m-in/s':>16}{'ratio':>7}{'held m-in/s':>13}{'ratio':>7}"
        f"{'passes':>8}{'rows/pass':>10}{'ms/pass':>9}"
    )
    for c, (latencies, wall) in results.items():
        lat = np.asarray(latencies) * 1e3
        p50, p99 = np.percentile(lat, 50), np.percentile(lat, 99)
        served = len(lat) / wall * len(ens)
        predict, kept = rates[c]
        count, rows, seconds = passes[c]
        print(
            f"{c:>7}{len(lat):>9}{len(lat) / wall:>9.1f}{p50:>9.1f}{p99:>9.1f}{p99 / p50:>8.2f}"
            f"{served:>15,.0f}{predict:>16,.0f}{served / predict:>7.2f}{kept:>13,.0f}{served / kept:>7.2f}"
            f"{count:>8}{rows / count:>10.1f}{seconds / count * 1e3:>9.1f}"
        )
    print(other)


if __name__ == "__main__":
    main()
