"""The HTTP face of a service: a FastAPI app (OpenAPI at ``/docs``) whose routes the Serve
deployment (:mod:`._deployment`) defines; here: the bearer-token check, the body-size limit and
the error handlers, so that every refusal is a JSON body naming the field, the value and what
is allowed, and no error ever answers with a traceback."""

from __future__ import annotations

import hashlib
import hmac
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from ._limits import BadRequest

OPEN_PATHS = ("/healthz",)  # answered without a token (it tells only that the service is up)

app = FastAPI(
    title="seed-sweep ensemble",
    summary="Mean, spread and members' predictions of a seed ensemble, from a seed-sweep store.",
    version="1",
)
# Set by each replica (one per process) when it starts.
SETTINGS: dict[str, Any] = {"token_sha256": None, "max_body_bytes": 64 * 2**20}
ROUTES = ("/docs", "/healthz", "/info", "/members", "/openapi.json", "/predict", "/reload", "/rollout")

_log = logging.getLogger("sweep.serve")


def token_digest(token: str) -> str:
    """The sha256 (hex) of a bearer token: what replicas hold instead of the token itself."""
    return hashlib.sha256(token.encode()).hexdigest()


@app.middleware("http")
async def _authorize(request: Request, call_next):
    digest = SETTINGS["token_sha256"]
    if digest and request.url.path not in OPEN_PATHS:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token_digest(token.strip()), digest):
            given = "no Authorization header" if "authorization" not in request.headers else "a wrong token"
            error = BadRequest(401, "Authorization", given, "send the header Authorization: Bearer <token>")
            return JSONResponse(error.body(), 401, headers={"WWW-Authenticate": "Bearer"})
    return await call_next(request)


async def read_body(request: Request) -> bytes:
    """The request's body, refused (413) past ``max_body_bytes`` before more of it is read."""
    limit = SETTINGS["max_body_bytes"]
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BadRequest(413, "body", f"{declared} bytes", f"send at most {limit} bytes")
    body = b""
    async for piece in request.stream():
        body += piece
        if len(body) > limit:
            raise BadRequest(413, "body", f"more than {limit} bytes", f"send at most {limit} bytes")
    return body


@app.exception_handler(BadRequest)
async def _bad_request(request: Request, error: BadRequest) -> JSONResponse:
    return JSONResponse(error.body(), error.status)


@app.exception_handler(HTTPException)
async def _http_error(request: Request, error: HTTPException) -> JSONResponse:
    if error.status_code == 404:
        body = BadRequest(404, "path", request.url.path, f"use one of the routes {', '.join(ROUTES)}").body()
    elif error.status_code == 405:
        allowed = getattr(error, "headers", None) or {}
        methods = allowed.get("allow") or allowed.get("Allow") or "another method"
        body = BadRequest(405, "method", request.method, f"{request.url.path} takes {methods}").body()
    else:
        body = BadRequest(error.status_code, "request", str(error.detail), "see /docs").body()
    return JSONResponse(body, error.status_code, headers=getattr(error, "headers", None))


@app.exception_handler(RequestValidationError)
async def _invalid(request: Request, error: RequestValidationError) -> JSONResponse:
    first = (error.errors() or [{}])[0]
    field = ".".join(str(p) for p in first.get("loc", ("request",)))
    return JSONResponse(BadRequest(422, field, first.get("input"), first.get("msg", "see /docs")).body(), 422)


@app.exception_handler(Exception)
async def _unexpected(request: Request, error: Exception) -> JSONResponse:
    _log.exception("sweep serve: %s %s failed", request.method, request.url.path)
    body = {
        "error": {
            "field": None,
            "value": None,
            "allowed": None,
            "message": f"internal error ({type(error).__name__}); the service keeps serving",
        }
    }
    return JSONResponse(body, 500)
