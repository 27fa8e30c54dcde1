"""Benchmark: `sweep.serve` under load against in-process inference, measured in the same run.

A 512-member selection of the reference ConvNet (hidden 16, depth 6, relu, dirichlet, 48 points;
randomly initialised members aggregated into a temporary store, as ``ensemble/predict.py``
builds them: ``_shared/members.py``) is served on 127.0.0.1 by a local Ray Serve (one replica holding the whole
machine, batch sizes up to ``--max-batch`` compiled at start-up; ``--ingress direct``, the
default, lets the replica answer HTTP itself, ``proxy`` sends every request through Serve's HTTP
proxy). 1, 8 and 64 clients stay busy, one input per request (JSON, or ``--encoding npy``), for
``--seconds`` (or ``--max-requests``) each, over HTTP/1.1 keep-alive connections: a small
asyncio client by default (it costs the machine ~0.1 ms of CPU per request), or httpx
(``--client httpx``, ~0.5-1 ms). Printed per client count: requests/s, p50 / p99 latency, and
served member-inputs/s (requests/s x members) as a ratio of in-process inference at the batch
size equal to the number of clients, timed in the same process just before:
``Ensemble.predict`` (which reads the members from the store on each call) and
``HeldEnsemble.predict_mean_std`` (members held in memory, the computation each replica does);
the replica's own counters (``/info``: forward passes, rows per pass, milliseconds per pass);
the cores other processes used meanwhile (``OtherLoad``); and the CPU milliseconds per request
of each process of the service (client, Serve's proxy, the replica, Ray's other processes),
which do not depend on the other processes' load. The client shares the machine with the server.
Targets (2 cores): at 64 clients >= 50% of the in-process rate, p99 <= 3x the median.

    python -m benchmarks.serving.load [--members 512] [--clients 1 8 64] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import io
import json
import os
import tempfile
import time
from urllib.parse import urlsplit

import numpy as np

import sweep
from benchmarks._shared.machine import HZ, OtherLoad, _processes
from benchmarks._shared.members import random_store
from benchmarks._shared.ray_local import local_ray
from benchmarks._shared.workload import POINTS
from sweep.ensemble import HeldEnsemble, load

ROLES = (("ServeReplica", "replica"), ("ProxyActor", "proxy"))  # process title -> role; the rest: "ray"


def _in_process_rate(fn, members: int, batch: int, seconds: float) -> float:
    """Member-inputs/s of ``fn()`` over one ``batch`` (best of repeated calls for ``seconds``)."""
    fn()  # compile / warm up
    best, end = float("inf"), time.perf_counter() + seconds
    while time.perf_counter() < end:
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return members * batch / best


def _tree_ticks() -> dict[int, tuple[int, str]]:
    """pid -> (CPU ticks, command line) of this process and every descendant (Ray's processes)."""
    procs, children = _processes(), collections.defaultdict(list)
    for pid, (ppid, _, _) in procs.items():
        children[ppid].append(pid)
    out, todo = {}, [os.getpid()]
    while todo:
        pid = todo.pop()
        todo += children[pid]
        if pid in procs:
            out[pid] = procs[pid][1:]
    return out


def _cpu_by_role(before: dict, after: dict) -> dict[str, float]:
    """CPU seconds per role (client: this process) between two :func:`_tree_ticks`."""
    seconds = collections.Counter({"client": 0.0, "proxy": 0.0, "replica": 0.0, "ray": 0.0})
    for pid, (ticks, cmd) in after.items():
        role = "client" if pid == os.getpid() else next((r for key, r in ROLES if key in cmd), "ray")
        seconds[role] += (ticks - before.get(pid, (0, ""))[0]) / HZ
    return dict(seconds)


class Connection:
    """One HTTP/1.1 keep-alive connection (asyncio streams): a request written, its answer read
    whole (Content-Length or chunked), as any HTTP client does, with little CPU of its own."""

    def __init__(self, url: str):
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80

    async def open(self) -> Connection:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def post(self, path: str, body: bytes, content_type: str) -> tuple[int, bytes]:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        self.writer.write(head.encode() + body)
        status = int((await self.reader.readline()).split()[1])
        length, chunked = 0, False
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
        if not chunked:
            return status, await self.reader.readexactly(length)
        pieces = []
        while size := int((await self.reader.readline()).split(b";")[0], 16):
            pieces.append(await self.reader.readexactly(size))
            await self.reader.readline()
        await self.reader.readline()
        return status, b"".join(pieces)

    def close(self) -> None:
        self.writer.close()


async def _raw_clients(url: str, count: int):
    connections = await asyncio.gather(*(Connection(url).open() for _ in range(count)))
    try:
        yield [c.post for c in connections]
    finally:
        for c in connections:
            c.close()


async def _httpx_clients(url: str, count: int):
    import httpx

    limits = httpx.Limits(max_connections=count, max_keepalive_connections=count)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as c:

        async def post(path: str, body: bytes, content_type: str) -> tuple[int, bytes]:
            r = await c.post(path, content=body, headers={"Content-Type": content_type})
            return r.status_code, r.content

        yield [post] * count


async def _load(url: str, client: str, body: bytes, content_type: str, clients: int, seconds: float, limit: int):
    """Latencies (s) of every request ``clients`` concurrent clients sent, and the wall time."""
    latencies: list[float] = []
    opened = (_raw_clients if client == "raw" else _httpx_clients)(url, clients)
    posts = await anext(opened)
    try:
        answers = await asyncio.gather(*(post("/predict", body, content_type) for post in posts))  # warm up
        if any(status != 200 for status, _ in answers):
            raise RuntimeError(f"/predict answered {answers[0][0]}: {answers[0][1][:300]!r}")
        end = time.perf_counter() + seconds

        async def one_client(post):
            while time.perf_counter() < end and len(latencies) < limit:
                start = time.perf_counter()
                status, answer = await post("/predict", body, content_type)
                if status != 200:
                    raise RuntimeError(f"/predict answered {status}: {answer[:300]!r}")
                latencies.append(time.perf_counter() - start)

        begin = time.perf_counter()
        await asyncio.gather(*(one_client(post) for post in posts))
        return latencies, time.perf_counter() - begin
    finally:
        await opened.aclose()


def _request(x: np.ndarray, encoding: str) -> tuple[bytes, str]:
    if encoding == "json":
        return json.dumps({"x": x.tolist()}).encode(), "application/json"
    buffer = io.BytesIO()
    np.save(buffer, x)
    return buffer.getvalue(), "application/x-npy"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=512)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--seconds", type=float, default=10.0, help="load per client count (bounded)")
    parser.add_argument("--max-requests", type=int, default=20000, help="requests per client count, at most")
    parser.add_argument("--max-batch", type=int, default=64)
    parser.add_argument("--batch-wait", type=float, default=0.0)
    parser.add_argument("--ingress", choices=("direct", "proxy"), default="direct")
    parser.add_argument("--client", choices=("raw", "httpx"), default="raw")
    parser.add_argument("--encoding", choices=("json", "npy"), default="json")
    args = parser.parse_args()
    sweep.configure()
    import httpx
    import ray

    with tempfile.TemporaryDirectory() as tmp:
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
        options = sweep.ServeOptions(
            port=0, cpus=2, max_batch=args.max_batch, batch_wait_s=args.batch_wait, ingress=args.ingress
        )
        started = time.perf_counter()
        service = sweep.serve(path, options)
        start_s = time.perf_counter() - started
        body, content_type = _request(xs[:1], args.encoding)
        rows = {}
        try:
            for c in args.clients:  # the replica's counters and every process's CPU around each load
                before = httpx.get(f"{service.url}/info", timeout=60).json()
                with OtherLoad() as other:
                    ticks = _tree_ticks()
                    latencies, wall = asyncio.run(
                        _load(service.url, args.client, body, content_type, c, args.seconds, args.max_requests)
                    )
                    cpu = _cpu_by_role(ticks, _tree_ticks())
                after = httpx.get(f"{service.url}/info", timeout=60).json()
                passes = [after[k] - before[k] for k in ("forward_passes", "rows_run", "forward_seconds")]
                rows[c] = latencies, wall, passes, cpu, other
        finally:
            service.shutdown()
            ray.shutdown()

    print(
        f"serve load benchmark: {len(ens)} members, ConvNet hidden 16 depth 6 on 48 points, one input per request "
        f"({args.encoding}), max batch {args.max_batch}, batch wait {args.batch_wait} s, 1 replica (2 CPUs), "
        f"{service.ingress} ingress, {args.client} client on the same machine; "
        f"service start {start_s:.1f} s (compiles {len(options.buckets)} batch sizes)"
    )
    print(
        f"{'clients':>7}{'requests':>9}{'req/s':>8}{'p50 ms':>8}{'p99 ms':>8}{'p99/p50':>8}"
        f"{'served m-in/s':>14}{'predict m-in/s':>15}{'ratio':>6}{'held m-in/s':>12}{'ratio':>6}"
        f"{'passes':>7}{'rows/pass':>10}{'ms/pass':>8}{'other cores':>12}"
    )
    for c, (latencies, wall, (count, run, seconds), _, other) in rows.items():
        lat = np.asarray(latencies) * 1e3
        p50, p99 = np.percentile(lat, 50), np.percentile(lat, 99)
        served = len(lat) / wall * len(ens)
        predict, kept = rates[c]
        print(
            f"{c:>7}{len(lat):>9}{len(lat) / wall:>8.1f}{p50:>8.1f}{p99:>8.1f}{p99 / p50:>8.2f}"
            f"{served:>14,.0f}{predict:>15,.0f}{served / predict:>6.2f}{kept:>12,.0f}{served / kept:>6.2f}"
            f"{count:>7}{run / max(count, 1):>10.1f}{seconds / max(count, 1) * 1e3:>8.1f}{other.cores:>12.2f}"
        )
    print("CPU ms per request, by process (the service's tree; client: this process):")
    print(f"{'clients':>7}{'client':>8}{'proxy':>8}{'replica':>9}{'ray':>7}{'total':>8}{'cores used':>11}")
    for c, (latencies, wall, _, cpu, _) in rows.items():
        per = {role: seconds / len(latencies) * 1e3 for role, seconds in cpu.items()}
        print(
            f"{c:>7}{per['client']:>8.2f}{per['proxy']:>8.2f}{per['replica']:>9.2f}{per['ray']:>7.2f}"
            f"{sum(per.values()):>8.2f}{sum(cpu.values()) / wall:>11.2f}"
        )


if __name__ == "__main__":
    main()
