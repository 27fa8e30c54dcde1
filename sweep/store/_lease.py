"""The writer lease of a store on object storage: one aggregation writes at a time.

Object storage has no file locks, so the lock is an object (``.ensembles/.lock``) that its
holder keeps renewing::

    {"holder": "<random id>", "host": "node-3", "pid": 4242, "since": "2026-...", "ttl_s": 60, "renewal": 7}

- Taking it: create the object only if the key is free (S3 ``PutObject`` with
  ``If-None-Match: *``: of two aggregations starting at once, exactly one gets it).
- Holding it: a thread rewrites it every ``ttl_s / 4`` seconds, each time only if it is
  still the version the holder wrote (``If-Match``); a new ``renewal`` count makes a new version.
- Waiting: another aggregation finding the object says so and polls it. A holder that stops
  renewing (a crash, a lost network) leaves the same version in place; once a waiter has seen
  that version unchanged for ``ttl_s`` seconds *by its own clock* (no clocks are compared
  between machines), it takes the lease over by replacing exactly that version.
- Committing: the holder renews once more just before it writes ``CURRENT``; if the lease
  was taken over meanwhile (it stalled for longer than ``ttl_s``), it commits nothing.
- Releasing: delete the object if it is still the holder's version.

Content that is no lease (the empty file ``flock`` uses on local disks, copied along with a
sweep) is replaced at once.

The conditional requests (:mod:`._objects`) make taking and taking over atomic on S3. The first
time a lease is taken, the holder also checks that the store refuses a second create of the
same key (some S3-compatible stores ignore the headers); where it does not, or where boto3 is
missing or the store is not S3, the same protocol runs on checks before writes: then two
aggregations starting within one request of each other may both write, and a warning says so.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import pyarrow.fs as pafs

from .._errors import StoreError, warn
from ._objects import Objects, PlainObjects, objects_for

DEFAULT_TTL_S = 60.0  # a crashed holder keeps others waiting this long


def _describe(body: dict[str, Any]) -> str:
    where = f"{body.get('host', '?')} pid {body.get('pid', '?')}"
    return f"{where}, since {body['since']}" if "since" in body else where


def _parse(raw: bytes) -> dict[str, Any] | None:
    """What a lease object says, or None for other content (the empty file that ``flock`` uses on
    local disks, copied along with a sweep): no lease, to be replaced at once."""
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(body, dict) or "holder" not in body:
        return None
    ttl = body.get("ttl_s")
    if not isinstance(ttl, (int, float)) or isinstance(ttl, bool) or not 0 < ttl <= 24 * 3600:
        body = {**body, "ttl_s": DEFAULT_TTL_S}
    return body


class Lease:
    """The writer lease at ``key`` of ``objects`` (``what``: the store it guards, for messages).

    ```python
    with Lease(objects, "bucket/runs/heat/.ensembles/.lock", "s3://bucket/runs/heat/ensembles") as lease:
        ...                 # write the generation
        lease.check()       # still ours: commit
    ```
    """

    def __init__(
        self, objects: Objects, key: str, what: str, ttl_s: float = DEFAULT_TTL_S, fallback: Objects | None = None
    ):
        if not ttl_s > 0:
            raise ValueError(f"`ttl_s`: got {ttl_s!r}; must be > 0 seconds")
        self.objects, self.key, self.what, self.ttl_s = objects, key, what, float(ttl_s)
        self.poll_s = max(0.05, min(2.0, self.ttl_s / 10))
        self._fallback = fallback if objects.atomic else None  # plain requests, should the store ignore conditions
        self._body = {
            "holder": uuid.uuid4().hex,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
            "ttl_s": self.ttl_s,
            "renewal": 0,
        }
        self.version: str | None = None
        self.lost: str | None = None  # why the lease is no longer ours
        self._lock = threading.Lock()  # one request on the lease object at a time
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _encoded(self) -> bytes:
        return json.dumps(self._body, sort_keys=True).encode()

    # -- taking it ----------------------------------------------------------------------------
    def acquire(self) -> Lease:
        """Take the lease, waiting for (or taking over from) another holder; start renewing."""
        watched, seen_at, told = None, 0.0, False
        while True:
            self.version = self.objects.create(self.key, self._encoded())
            if self.version is not None:
                self._check_refusal()  # may find that another writer won after all
            if self.version is not None:
                break
            now = self.objects.read(self.key)
            if now is None:  # released meanwhile
                continue
            raw, version = now
            other = _parse(raw)
            if other is None:  # not a lease: take its place
                self.version = self.objects.replace(self.key, self._encoded(), version)
                if self.version is not None:
                    break
                continue
            if version != watched:  # a new holder, or a renewal: it is alive
                watched, seen_at = version, time.monotonic()
                if not told:
                    warn(f"another aggregation ({_describe(other)}) is writing {self.what!r}; waiting for it to finish")
                    told = True
            elif time.monotonic() - seen_at >= other["ttl_s"]:
                self.version = self.objects.replace(self.key, self._encoded(), version)
                if self.version is not None:
                    warn(
                        f"took over the writer lease of {self.what!r} from {_describe(other)}: not renewed for "
                        f"{other['ttl_s']:g} s (that aggregation crashed or lost its connection)"
                    )
                    break
                watched = None  # someone else changed it first: watch again
                continue
            time.sleep(self.poll_s)
        self._thread = threading.Thread(target=self._renew_loop, name="sweep-lease", daemon=True)
        self._thread.start()
        return self

    def _check_refusal(self) -> None:
        """With conditional requests, a second create of the taken key must be refused; else the
        store ignores them and the protocol continues on plain requests (with a warning)."""
        if self._fallback is None:
            return
        if self.objects.create(self.key, self._encoded()) is not None:
            warn(
                f"{self.what!r}: the object store ignores conditional writes (If-None-Match), so two aggregations "
                f"starting within one request of each other could both write; run one aggregation of a store at a time"
            )
            self.objects = self._fallback
            now = self.objects.read(self.key)
            self.version = now[1] if now is not None and now[0] == self._encoded() else None
        self._fallback = None

    # -- holding it ---------------------------------------------------------------------------
    def _renew(self) -> None:
        """Write the next renewal over our version; sets :attr:`lost` when it is not ours any more."""
        assert self.version is not None
        self._body["renewal"] += 1
        version = self.objects.replace(self.key, self._encoded(), self.version)
        if version is None:
            now = self.objects.read(self.key)
            holder = _parse(now[0]) if now is not None else None
            other = f" by {_describe(holder)}" if holder is not None else ""
            self.lost = (
                f"the writer lease was taken over{other} after this aggregation did not renew it for {self.ttl_s:g} s"
            )
        else:
            self.version = version

    def _renew_loop(self) -> None:
        last_ok = time.monotonic()
        while not self._stop.wait(self.ttl_s / 4):
            with self._lock:
                if self.lost is not None:
                    return
                try:
                    self._renew()
                    last_ok = time.monotonic()
                except OSError as e:  # keep trying until the lease would have expired
                    if time.monotonic() - last_ok >= self.ttl_s:
                        self.lost = f"the writer lease could not be renewed for {self.ttl_s:g} s ({e})"
                        return

    def check(self) -> None:
        """Renew now; :class:`StoreError` if the lease is not ours any more (commit nothing then)."""
        with self._lock:
            if self.lost is None:
                self._renew()
            if self.lost is not None:
                raise StoreError(
                    f"{self.what!r}: {self.lost}, so this aggregation commits nothing (another one may be "
                    f"writing); the committed store is unchanged. Aggregate again"
                )

    # -- releasing it -------------------------------------------------------------------------
    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            if self.lost is None and self.version is not None:
                try:
                    self.objects.delete(self.key, self.version)
                except OSError as e:  # it expires on its own
                    warn(
                        f"{self.what!r}: the writer lease was not released ({e}); the next aggregation waits "
                        f"{self.ttl_s:g} s for it to expire"
                    )
            self.version = None

    def __enter__(self) -> Lease:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


_TOLD: set[str] = set()  # reasons already warned about in this process


def writer_lease(fs: pafs.FileSystem, key: str, what: str, ttl_s: float | None = None) -> Lease:
    """The (not yet taken) writer lease at ``key`` of ``fs``, through conditional requests where
    possible; says once per process why not where an S3 store gets only plain ones."""
    objects, why = objects_for(fs)
    if why is not None and why not in _TOLD:
        _TOLD.add(why)
        warn(
            f"{what!r}: concurrent aggregations are excluded by a lease object checked before each write, not by "
            f"S3's conditional writes: {why}"
        )
    return Lease(objects, key, what, DEFAULT_TTL_S if ttl_s is None else ttl_s, fallback=PlainObjects(fs))
