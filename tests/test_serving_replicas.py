"""Two replicas of `sweep.serve`: one killed by its actor id mid-load is restarted by Serve while
the endpoint keeps answering; a service of an `Ensemble` serves exactly its members and refuses
/reload."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit

import httpx
import numpy as np
import pytest
from _serving import free_port, listener, tiny_store, wait_healthy

import sweep
from sweep.serving import ServeOptions


@pytest.fixture(scope="module")
def chosen(tmp_path_factory):
    """The 2 best members of a tiny store, as an Ensemble."""
    return sweep.load(tiny_store(tmp_path_factory.mktemp("replicas"))).best(2)


@pytest.fixture(scope="module")
def service(ray_session, chosen):  # noqa: F811
    svc = sweep.serve(chosen, ServeOptions(port=free_port(), replicas=2, cpus=0.5, max_batch=4))
    try:
        wait_healthy(svc.url)
        yield svc
    finally:
        svc.shutdown()


def _replicas(url: str, count: int, deadline_s: float = 60) -> dict[str, str]:
    """Replica id -> actor name of ``count`` distinct replicas seen through /info."""
    seen: dict[str, str] = {}
    end = time.monotonic() + deadline_s
    while len(seen) < count and time.monotonic() < end:
        info = httpx.get(f"{url}/info", timeout=30).json()
        seen[info["replica"]] = info["replica_actor"]
    assert len(seen) >= count, seen
    return seen


# The load on the endpoint: 4 clients, each sending its next request as soon as its last is answered,
# from before the kill until FULL_LOAD_AFTER_KILL_S after it and again once the replacement answers;
# in between, while Serve starts the replacement (a fresh replica process: 10-30 s on a busy 2-core
# machine), each waits PACE_S between requests: unpaced, that wait sent 600-900 requests through
# Serve's proxy and the surviving replica, 5-12 CPU-seconds taken from the replacement's start.
FULL_LOAD_AFTER_KILL_S = 2.0
PACE_S = 0.25


def _status(answer: httpx.Response | httpx.TransportError) -> int | str:
    """The HTTP status of an answer, or the name of the transport error that took its place."""
    return answer.status_code if isinstance(answer, httpx.Response) else type(answer).__name__


def test_an_ensemble_is_served_as_it_is_and_refuses_reload(service, chosen):
    x = np.random.default_rng(0).standard_normal((2, 1, 16)).astype(np.float32)
    r = httpx.post(f"{service.url}/predict", json={"x": x.tolist(), "members": True}, timeout=60)
    assert r.status_code == 200, r.text
    mean, _ = chosen.mean_std(x)
    np.testing.assert_array_equal(np.asarray(r.json()["mean"], np.float32), mean)
    assert r.json()["member_ids"] == chosen.index["member_id"].to_pylist()  # in the Ensemble's (ranked) order
    np.testing.assert_array_equal(np.asarray(r.json()["members"], np.float32), chosen.predict(x))
    r = httpx.post(f"{service.url}/reload", timeout=60)
    assert r.status_code == 409 and r.json()["error"]["field"] == "reload", r.text


def test_several_replicas_answer_through_serves_proxy(service):
    assert service.ingress == "proxy"  # one address that spreads requests over the replicas
    assert "ProxyActor" in listener(urlsplit(service.url).port)


def test_a_killed_replica_is_restarted_and_the_endpoint_keeps_answering(service, chosen):
    import ray

    x = np.random.default_rng(1).standard_normal((1, 1, 16)).astype(np.float32)
    mean, _ = chosen.mean_std(x)
    before = _replicas(service.url, 2)
    victim_id, victim = next(iter(before.items()))

    async def send(c: httpx.AsyncClient) -> tuple[float, httpx.Response | httpx.TransportError]:
        sent = time.monotonic()
        try:  # the proxy may drop the connection of a request the dying replica held
            return sent, await c.post("/predict", json={"x": x.tolist()})
        except httpx.TransportError as error:
            return sent, error

    async def load(
        stop: asyncio.Event, paced: asyncio.Event
    ) -> list[tuple[float, httpx.Response | httpx.TransportError]]:
        answers = []

        async def client(c: httpx.AsyncClient) -> None:  # one after another; a lost request stalls only its client
            while not stop.is_set():
                answers.append(await send(c))
                if paced.is_set():
                    await asyncio.sleep(PACE_S)

        async with httpx.AsyncClient(base_url=service.url, timeout=30) as c:
            await asyncio.gather(*(client(c) for _ in range(4)))  # 4 clients, each with one request at a time
        return answers

    async def kill_mid_load() -> tuple[list[httpx.Response], dict[str, str]]:
        stop, paced = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(load(stop, paced))
        await asyncio.sleep(0.5)  # load is running
        ray.kill(ray.get_actor(victim, namespace="serve"), no_restart=True)
        killed[0] = time.monotonic()
        await asyncio.sleep(FULL_LOAD_AFTER_KILL_S)  # full load while the proxy finds the victim gone
        paced.set()  # then paced while Serve starts a replacement (PACE_S, above)
        end, fresh = time.monotonic() + 120, {}
        while time.monotonic() < end and not fresh:  # until Serve has started a replacement
            await asyncio.sleep(0.5)
            async with httpx.AsyncClient(base_url=service.url, timeout=60) as c:
                info = (await c.get("/info")).json()
            fresh = {info["replica"]: info["replica_actor"]} if info["replica"] not in before else {}
        paced.clear()
        await asyncio.sleep(1.0)  # and full load goes on against it
        stop.set()
        return await task, fresh

    killed = [0.0]
    answers, fresh = asyncio.run(kill_mid_load())
    assert fresh, "Serve started no replacement replica within 120 s"
    assert victim_id not in fresh
    # Only requests in flight on the victim when it died may fail (its process held them; the kill
    # lands within moments of the call); every later one is answered, by the survivor or the new replica.
    settled = killed[0] + 0.1
    after = [r for t, r in answers if t > settled]
    lost = [(t - killed[0], _status(r)) for t, r in answers if _status(r) != 200]
    assert len(after) >= 8 and all(t <= 0.1 for t, _ in lost) and len(lost) <= 4, lost
    for r in after:  # batched with the other requests of its moment: equal up to the last bit
        assert isinstance(r, httpx.Response) and r.status_code == 200, r
        np.testing.assert_allclose(np.asarray(r.json()["mean"], np.float32), mean, rtol=1e-6, atol=1e-7)
