"""Tiny stores and HTTP helpers shared by the serving tests."""

from __future__ import annotations

import contextlib
import os
import random
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
from _blocks import datasets_of, trained_blocks
from helpers import tiny_spec

import sweep
from sweep.planning import make_plan
from sweep.store import aggregate_blocks

PLAN = make_plan(tiny_spec(seeds=4, seeds_per_trial=2))  # 4 members of one config, 16 points
MORE = make_plan(tiny_spec(seeds=6, seeds_per_trial=2))  # the same 4 members and 2 more


def tiny_store(root: Path, plan=PLAN, samples: bool = False) -> str:
    """A sweep directory whose store holds the plan's trained members (a new generation each
    call); ``samples``: with the plan's datasets, whose validation split a service recalibrates on."""
    aggregate_blocks(
        root / "ensembles", trained_blocks(plan), plan=plan, datasets=datasets_of(plan) if samples else None
    )
    return str(root)


def free_port() -> int:
    """A free port below the ephemeral range (32768 on Linux) and above Ray's worker ports
    (10002-19999) and the cluster test's (20000-30049): a port the system hands out (bind to 0)
    may be taken by any outgoing connection (Ray's, the other test worker's) before the service
    binds it, and Serve then finds "no available ports" for its replica."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(30100, 32700)
        with socket.socket() as s, contextlib.suppress(OSError):
            s.bind(("127.0.0.1", port))
            return port
    raise RuntimeError("no free port in 30100-32699")


def wait_healthy(url: str, deadline_s: float = 120.0, headers: dict | None = None) -> dict:
    """Poll ``/healthz`` until it answers 200 (or fail after ``deadline_s``); its JSON."""
    end, last = time.monotonic() + deadline_s, None
    while time.monotonic() < end:
        try:
            r = httpx.get(f"{url}/healthz", timeout=5, headers=headers)
            if r.status_code == 200:
                return r.json()
            last = r.status_code
        except httpx.HTTPError as e:
            last = e
        time.sleep(0.2)
    raise AssertionError(f"{url}/healthz did not answer 200 within {deadline_s} s (last: {last!r})")


def port_closed(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) != 0


def listener(port: int) -> str:
    """The command line (a Ray process's title) of the process listening on TCP ``port`` here."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":  # 0A: LISTEN
                inodes.add(f"socket:[{fields[9]}]")
    for fd in Path("/proc").glob("[0-9]*/fd/*"):
        try:
            if os.readlink(fd) in inodes:
                return (fd.parent.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            continue
    raise AssertionError(f"no process listens on port {port}")


@contextlib.contextmanager
def served(target, **options) -> Iterator[httpx.Client]:
    """A client of ``sweep.serve(target)`` on a free port of 127.0.0.1, once healthy; the service
    is shut down on the way out."""
    service = sweep.serve(target, sweep.ServeOptions(port=free_port(), **options))
    try:
        wait_healthy(service.url)
        with httpx.Client(base_url=service.url, timeout=60) as c:
            yield c
    finally:
        service.shutdown()
