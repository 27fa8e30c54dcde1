"""`sweep.serve` on Ray Serve: served mean/std are `Ensemble.predict`'s bit for bit (JSON and
.npy), concurrent requests share forward passes and get their own rows, every bad input is a 4xx
naming its field while the service keeps serving, the bearer token, /members and /info, rollouts,
/reload switching to a newer generation without dropping requests, and the calibration fitted on
the validation split of each generation it opens (`recalibrate=True`): the calibrated std and
conformal intervals of `Ensemble.mean_std(calibrated=True)` and `predict_interval`, and a 422
naming the field for a level it was not fitted at."""

from __future__ import annotations

import asyncio
import io
import json
import os
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import numpy as np
import pytest
from _fresh_imports import fresh_import
from _serving import MORE, free_port, listener, tiny_store, wait_healthy
from helpers import tiny_spec

import sweep
from sweep import QueryError, SpecError, StoreError
from sweep.planning import make_plan
from sweep.serving import ServeOptions

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
NPY = "application/x-npy"


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    return tiny_store(tmp_path_factory.mktemp("serve"), samples=True)


@pytest.fixture(scope="module")
def first(sweep_dir):
    """The generation the service starts with, opened in-process."""
    return sweep.load(sweep_dir)


@pytest.fixture(scope="module")
def service(ray_session, sweep_dir, tmp_path_factory):  # noqa: F811
    token_file = tmp_path_factory.mktemp("token") / "token"
    token_file.write_text(TOKEN + "\n")
    options = ServeOptions(
        port=free_port(),
        max_batch=8,
        batch_wait_s=0.3,
        cpus=1,
        token_file=token_file,
        max_body_bytes=200_000,
        recalibrate=True,
    )
    svc = sweep.serve(sweep_dir, options)
    try:
        wait_healthy(svc.url)
        yield svc
    finally:
        svc.shutdown()


@pytest.fixture(scope="module")
def client(service):
    with httpx.Client(base_url=service.url, headers=AUTH, timeout=60) as c:
        yield c


def _inputs(rows: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, 1, 16)).astype(np.float32)


def _npy(a: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, a)
    return buffer.getvalue()


def _padded(x: np.ndarray, size: int) -> np.ndarray:
    """``x`` padded with zero rows to a compiled batch size, as the replica runs it."""
    return np.concatenate([x, np.zeros((size - len(x), *x.shape[1:]), x.dtype)])


def _answer(response: httpx.Response) -> dict[str, np.ndarray]:
    assert response.status_code == 200, response.text
    if response.headers["content-type"] == NPY:
        stacked = np.load(io.BytesIO(response.content), allow_pickle=False)
        assert response.headers["x-sweep-layout"].split(",")[:2] == ["mean", "std"]
        out = {"mean": stacked[0], "std": stacked[1]}
        if len(stacked) > 2:
            out["members"] = stacked[2:]
        return out
    body = response.json()
    return {k: np.asarray(body[k], np.float32) for k in ("mean", "std", "members") if k in body}


@pytest.mark.parametrize("request_as", ["json", "npy"])
@pytest.mark.parametrize("answer_as", ["json", "npy"])
def test_served_mean_std_and_members_equal_ensemble_predict_bit_for_bit(client, first, request_as, answer_as):
    x = _inputs(4)  # a compiled batch size: the replica runs exactly x
    headers = {"Accept": NPY} if answer_as == "npy" else {}
    if request_as == "json":
        r = client.post("/predict", json={"x": x.tolist(), "members": True}, headers=headers)
    else:
        r = client.post("/predict?members=TRUE", content=_npy(x), headers={**headers, "Content-Type": NPY})
    got = _answer(r)
    mean, std = first.mean_std(x)
    assert got["mean"].dtype == got["std"].dtype == np.float32
    np.testing.assert_array_equal(got["mean"], mean)
    np.testing.assert_array_equal(got["std"], std)
    np.testing.assert_array_equal(got["members"], first.predict(x))
    np.testing.assert_array_equal(got["std"], first.predict(x).astype(np.float64).std(0).astype(np.float32))


def test_rows_between_batch_sizes_are_those_of_the_padded_batch(client, first):
    x = _inputs(3, seed=1)  # padded to 4 rows
    r = client.post("/predict", json={"x": x.tolist(), "members": [2, 0]})
    assert r.json()["member_ids"] == [2, 0]
    got = _answer(r)
    mean, std = first.mean_std(_padded(x, 4))
    np.testing.assert_array_equal(got["mean"], mean[:3])
    np.testing.assert_array_equal(got["std"], std[:3])
    np.testing.assert_array_equal(got["members"], first.predict(_padded(x, 4))[[2, 0], :3])
    np.testing.assert_allclose(got["mean"], first.mean_std(x)[0], rtol=1e-6, atol=1e-7)


def test_concurrent_requests_share_forward_passes_and_get_their_own_rows(service, client, first):
    inputs = [_inputs(1, seed=10 + i) for i in range(8)]

    async def send_all():
        async with httpx.AsyncClient(base_url=service.url, headers=AUTH, timeout=60) as c:
            return await asyncio.gather(*(c.post("/predict", json={"x": x.tolist()}) for x in inputs))

    before = client.get("/info").json()["forward_passes"]
    answers = [_answer(r) for r in asyncio.run(send_all())]
    passes = client.get("/info").json()["forward_passes"] - before
    assert 1 <= passes < len(inputs), passes  # counted by the replica: fewer passes than requests
    for x, got in zip(inputs, answers, strict=True):
        mean, std = first.mean_std(x)
        np.testing.assert_allclose(got["mean"], mean, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(got["std"], std, rtol=1e-5, atol=1e-7)
    means = np.stack([a["mean"] for a in answers])
    assert len({m.tobytes() for m in means}) == len(inputs)  # each got its own rows


BAD = {
    "wrong shape": (json.dumps({"x": [[[0.0] * 15]]}), "application/json", 422, "x", "(batch, 1, 16)"),
    "wrong dtype": (json.dumps({"x": [[["a"] * 16]]}), "application/json", 422, "x", "real numbers"),
    "bool dtype": (json.dumps({"x": [[[True] * 16]]}), "application/json", 422, "x", "real numbers"),
    "nan": (json.dumps({"x": [[[float("nan")] * 16]]}), "application/json", 422, "x", "finite"),
    "ragged": (json.dumps({"x": [[[0.0] * 16], [[0.0] * 3]]}), "application/json", 422, "x", "one array"),
    "too many rows": (json.dumps({"x": [[[0.0] * 16]] * 9}), "application/json", 413, "x", "at most 8 rows"),
    "float32 overflow": (json.dumps({"x": [[[1e39] * 16]]}), "application/json", 422, "x", "float32's range"),
    "float32 overflow in npy": (_npy(np.full((1, 1, 16), -1e39)), NPY, 422, "x", "float32's range"),
    "deeply nested json": ('{"x": ' + "[" * 50_000 + "]" * 50_000 + "}", "application/json", 400, "body", "deeper"),
    "malformed json": ('{"x": [[[0.0', "application/json", 400, "body", "JSON object"),
    "no x": (json.dumps({"inputs": []}), "application/json", 400, "body", '"x"'),
    "malformed npy": (b"\x93NUMPY garbage", NPY, 400, "body", ".npy"),
    "not npy at all": (b"hello world", NPY, 400, "body", "send an array saved with numpy.save (.npy)"),
    "a member twice": (
        json.dumps({"x": [[[0.0] * 16]], "members": [1, 1]}),
        "application/json",
        422,
        "members",
        "once",
    ),
    "a string in json": (
        json.dumps({"x": [[[0.0] * 16]], "members": "yes"}),
        "application/json",
        422,
        "members",
        "give true, false or a list of member ids, not a string",
    ),
    "inf in npy": (_npy(np.full((1, 1, 16), np.inf, np.float32)), NPY, 422, "x", "finite"),
    "unknown member": (
        json.dumps({"x": [[[0.0] * 16]], "members": [99]}),
        "application/json",
        422,
        "members",
        "0, 1, 2, 3",
    ),
    "bad member filter": (
        json.dumps({"x": [[[0.0] * 16]], "members": [True]}),
        "application/json",
        422,
        "members",
        "member ids",
    ),
    "body too large": (b"0" * 300_000, "application/json", 413, "body", "at most 200000 bytes"),
    "misspelt field": (
        json.dumps({"x": [[[0.0] * 16]], "memebrs": True}),
        "application/json",
        422,
        "memebrs",
        "give x and any of members, calibrated, interval (did you mean 'members'?)",
    ),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_inputs_get_a_4xx_naming_the_field_and_the_service_keeps_serving(client, case):
    body, content_type, status, field, allowed = BAD[case]
    r = client.post("/predict", content=body, headers={"Content-Type": content_type})
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["field"] == field and allowed in error["allowed"], error
    assert "Traceback" not in r.text
    assert client.post("/predict", json={"x": _inputs(1).tolist()}).status_code == 200


def test_bad_rollout_steps_unknown_routes_and_methods(client):
    x0 = _inputs(1).tolist()
    for steps in (0, 1001, "many", None, 2.5):
        r = client.post("/rollout", json={"x0": x0, "steps": steps})
        assert r.status_code == 422 and r.json()["error"]["field"] == "steps", r.text
    r = client.post("/rollout", json={"x0": x0, "steps": "3"})  # JSON's types, not a query string's words
    assert r.status_code == 422 and r.json()["error"]["allowed"] == "give an integer, not a string", r.text
    r = client.get("/nowhere")
    assert r.status_code == 404 and r.json()["error"]["field"] == "path" and "/predict" in r.json()["error"]["allowed"]
    r = client.post("/rollout", json={"x0": x0, "step": 5})  # misspelt: said, not read as no steps
    assert r.status_code == 422 and r.json()["error"]["field"] == "step", r.text
    assert "did you mean 'steps'?" in r.json()["error"]["allowed"]
    r = client.get("/predict")
    assert r.status_code == 405 and r.json()["error"]["field"] == "method"
    assert r.json()["error"]["allowed"] == "/predict takes POST", r.text


def test_a_token_is_needed_everywhere_but_healthz(service):
    x = {"x": _inputs(1).tolist()}
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        for method, route in (
            ("POST", "/predict"),
            ("GET", "/info"),
            ("GET", "/members"),
            ("GET", "/docs"),
            ("POST", "/reload"),
        ):
            r = httpx.request(method, f"{service.url}{route}", json=x, headers=headers, timeout=60)
            assert r.status_code == 401, (route, headers, r.text)
            assert r.json()["error"]["field"] == "Authorization" and r.headers["www-authenticate"] == "Bearer"
    assert httpx.get(f"{service.url}/healthz", timeout=60).json()["status"] == "ok"
    assert httpx.get(f"{service.url}/openapi.json", headers=AUTH, timeout=60).json()["paths"].keys() >= {
        "/predict",
        "/rollout",
        "/members",
        "/info",
        "/healthz",
        "/reload",
    }


def test_one_replica_answers_http_itself_with_no_proxy_hop(service):
    assert service.ingress == "direct" and "direct ingress" in repr(service)
    assert "ServeReplica" in listener(urlsplit(service.url).port), "the replica itself should listen on the port"


def test_members_and_info_describe_the_selection(client, first, service):
    rows = client.get("/members").json()["members"]
    expected = first.index.to_pylist()
    assert [r["member_id"] for r in rows] == [r["member_id"] for r in expected]
    for got, row in zip(rows, expected, strict=True):
        assert got["seed"] == row["seed"] and got["config_id"] == row["config_id"] and got["status"] == row["status"]
        assert got["val_loss"] == pytest.approx(row["val_loss"]) and got["test_loss"] == pytest.approx(row["test_loss"])
    info = client.get("/info").json()
    assert info["members"] == 4 and info["generation"] == service.generation == "000001"
    assert info["input_shape"] == ["batch", 1, 16] and info["input_dtype"] == "float32"
    assert "normalization" in info and info["normalization"] is None  # its problem's fields were not normalised
    assert info["compiled_batch_sizes"] == [1, 2, 4, 8] and info["max_rows"] == 8
    assert info["requests_in_flight"] == 0  # this request is not a /predict (test_serving_cli.py: one held)
    assert info["directory"] == str(first._store.directory) and info["token_required"] is True


def test_rollout_equals_rollout_mean_std_bit_for_bit(client, first):
    x0 = _inputs(2, seed=3)
    r = client.post("/rollout", json={"x0": x0.tolist(), "steps": 5})
    got = _answer(r)
    mean, std = first.rollout_mean_std(x0, 5)
    assert got["mean"].shape == (6, 2, 1, 16) and r.json()["steps"] == 5
    np.testing.assert_array_equal(got["mean"], mean)
    np.testing.assert_array_equal(got["std"], std)
    r = client.post("/rollout?steps=5", content=_npy(x0), headers={"Content-Type": NPY, "Accept": NPY})
    np.testing.assert_array_equal(_answer(r)["mean"], mean)


def test_reload_switches_without_dropping_requests_and_says_what_became_of_each_generation(
    service, client, first, sweep_dir
):
    x = _inputs(4, seed=5)
    assert client.post("/reload").json()["changed"] is False  # nothing newer yet
    assert service.changes() == []
    tiny_store(Path(sweep_dir), MORE, samples=True)  # generation 2: 6 members
    second = sweep.load(sweep_dir)
    assert len(second) == 6

    async def load_during_reload():
        async with httpx.AsyncClient(base_url=service.url, headers=AUTH, timeout=120) as c:
            during = [c.post("/predict", json={"x": x.tolist()}) for _ in range(6)]
            answers = await asyncio.gather(c.post("/reload"), *during)
            return answers[0], answers[1:]

    reload, during = asyncio.run(load_during_reload())
    assert reload.status_code == 200 and reload.json()["generation"] == "000002", reload.text
    assert reload.json()["previous"] == "000001" and reload.json()["members"] == 6
    expected = {"000001": first.mean_std(x), "000002": second.mean_std(x)}
    for r in during:  # each finished on the weights of the generation it names
        mean, std = expected[r.json()["generation"]]
        np.testing.assert_array_equal(_answer(r)["mean"], mean)
        np.testing.assert_array_equal(_answer(r)["std"], std)
    r = client.post("/predict", json={"x": x.tolist()})
    assert r.json()["generation"] == "000002" and r.json()["members_served"] == 6
    np.testing.assert_array_equal(_answer(r)["mean"], expected["000002"][0])
    assert client.get("/info").json()["members"] == 6
    # a generation without the validation samples the service recalibrates on: refused, the
    # current one keeps serving, and the service says so once (a second reload adds no line)
    tiny_store(Path(sweep_dir), MORE)
    for _ in range(2):
        refused = client.post("/reload")
        assert refused.status_code == 409 and "the current generation keeps serving" in refused.text, refused.text
    assert client.post("/predict", json={"x": x.tolist()}).json()["generation"] == "000002"
    serving, refusal = service.changes()
    assert serving == "serving generation 000002: 6 members"
    assert refusal.startswith("generation 000003 refused, 000002 keeps serving: ") and "validation" in refusal
    assert service.changes() == []  # each line once
    tiny_store(Path(sweep_dir), MORE, samples=True)  # the newest generation servable again, for the tests after
    assert client.post("/reload").json()["generation"] == "000004"


def test_calibrated_std_and_intervals_are_the_ensembles(client, sweep_dir):
    fitted = sweep.load(sweep_dir).recalibrate("val")  # the generation served (a reload may have come first)
    x = fitted.samples()[0][:4]
    body = client.post("/predict", json={"x": x.tolist(), "calibrated": True, "interval": 0.9}).json()
    mean, std = fitted.mean_std(x, calibrated=True)
    low, high = fitted.predict_interval(x, level=0.9)
    np.testing.assert_allclose(np.asarray(body["std"], np.float32), std, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(body["low"], np.float32), low, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(body["high"], np.float32), high, rtol=1e-5, atol=1e-6)
    plain = client.post("/predict", json={"x": x.tolist()}).json()
    np.testing.assert_array_equal(np.asarray(plain["std"], np.float32), fitted.mean_std(x)[1])
    assert "low" not in plain
    info = client.get("/info").json()["calibration"]
    assert info["split"] == "val" and info["levels"] == [0.5, 0.9]
    assert fitted.calibration is not None and info["scale"] == pytest.approx(fitted.calibration.scale.tolist())


@pytest.mark.parametrize(
    ("fields", "field", "allowed"),
    [({"interval": 0.8}, "interval", "[0.5, 0.9]"), ({"calibrated": "yes please"}, "calibrated", "true or false")],
)
def test_a_level_not_fitted_is_a_422_naming_the_field(client, fields, field, allowed):
    r = client.post("/predict", json={"x": _inputs(1).tolist(), **fields})
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == field and allowed in error["allowed"]


def test_without_validation_samples_recalibrate_is_refused_before_ray_starts(tmp_path):
    with pytest.raises(QueryError, match="no val samples"):
        sweep.serve(tiny_store(tmp_path), ServeOptions(recalibrate=True))  # no datasets: no samples


def test_a_local_ray_started_to_serve_hands_its_replicas_this_processs_import_path(tmp_path, monkeypatch):
    """A script that put its model module on sys.path serves it: the local Ray a service starts
    inherits the driver's own import path as PYTHONPATH, as sweep.run's does."""
    import ray

    own = tmp_path / "project"
    own.mkdir()
    monkeypatch.syspath_prepend(str(own))
    started = {}

    def init(**kwargs):
        started.update(kwargs, pythonpath=os.environ.get("PYTHONPATH"))
        raise RuntimeError("stop here")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    with pytest.raises(RuntimeError, match="stop here"):
        sweep.serve(tiny_store(tmp_path / "s"))
    assert started["address"] == "local" and "runtime_env" not in started  # inherited by Ray's processes
    assert str(own) in started["pythonpath"].split(os.pathsep)


def test_bad_options_and_selections_fail_before_ray_starts(tmp_path, sweep_dir):
    with pytest.raises(SpecError, match=r"ServeOptions.port: got -1; give an integer in 0..65535"):
        ServeOptions(port=-1)
    with pytest.raises(SpecError, match=r"ServeOptions.max_batch: got 0"):
        ServeOptions(max_batch=0)
    with pytest.raises(SpecError, match=r"ServeOptions.ingress: got 'haproxy'; choose one of 'direct', 'proxy'"):
        ServeOptions(ingress="haproxy")
    with pytest.raises(SpecError, match=r"ServeOptions.token_file: .* is not a file"):
        ServeOptions(token_file=tmp_path / "missing")
    with pytest.raises(StoreError, match="not a seed-sweep store"):
        sweep.serve(tmp_path)
    with pytest.raises(QueryError, match="no member matches"):
        sweep.serve(sweep_dir, ServeOptions(where={"seed": 77}))
    with pytest.raises(SpecError, match="select on the Ensemble itself"):
        sweep.serve(sweep.load(sweep_dir), ServeOptions(best=2))
    (tmp_path / "empty").write_text("  \n")
    with pytest.raises(SpecError, match="must hold one token"):
        sweep.serve(sweep_dir, ServeOptions(token_file=tmp_path / "empty"))
    with pytest.raises(SpecError, match=r"ServeOptions.pool: got 'no'; give True or False"):
        ServeOptions(pool="no")
    # pool=False (`sweep serve` without --pool): a selection pooling two learning rates is refused
    # (here the first generation; a newer one goes through the same Selection.apply in the replica)
    grid = tiny_store(tmp_path / "grid", make_plan(tiny_spec(seeds=2, grid={"optimizer.learning_rate": [1e-3, 3e-3]})))
    with pytest.raises(
        QueryError, match=r"ServeOptions\(where=\{\}\): learning_rate takes \[0\.001, 0\.003\]: .*pool=True"
    ):
        sweep.serve(grid, ServeOptions(pool=False))
    with pytest.raises(SpecError, match=r"options.pool=False: select on the Ensemble itself"):
        sweep.serve(sweep.load(grid), ServeOptions(pool=False))  # an Ensemble is served as it is


def test_import_sweep_loads_no_serving_stack_and_no_import_shadows_serve():
    assert fresh_import("serving_stack") == []  # in a fresh process, after `import sweep`
    assert fresh_import("serve_not_shadowed") == ["function", "ServeOptions"]  # then sweep.serving._deployment


def test_held_ensemble_answers_as_the_streamed_one_without_reading_the_store_again(tmp_path):
    from sweep.ensemble import HeldEnsemble

    ens = sweep.load(tiny_store(tmp_path)).best(3)
    held = HeldEnsemble(ens, chunk_size=2)  # two chunks: the streamed statistics' merge order matters
    x = _inputs(5, seed=7)
    expected = (*ens.mean_std(x, chunk_size=2), ens.predict(x, chunk_size=2))
    for leaves in (tmp_path / ".ensembles").glob("*/*.eqx"):
        leaves.unlink()  # the parameters are held: the store's leaves are no longer needed
    ens._store._cached = None  # the store's own cache of its last leaves file (shared with held)
    with pytest.raises((StoreError, OSError)):
        ens.predict(x, chunk_size=2)  # the streamed ensemble reads them
    mean, std, members = held.predict_mean_std(x, members=True)
    for got, want in zip((mean, std, members), expected, strict=True):
        np.testing.assert_array_equal(got, want)
    assert held.predict_mean_std(x)[2] is None and held.sample_shape == (1, 16) and held.dtype == np.float32
