"""Error bodies in each service's own shape, and the handlers that keep malformed input out of 500s.

Platform and local routes answer FastAPI-style ``{"detail": ...}``; Prime Traces routes answer
``{"error": {"code", "message"}}``, as the real services do.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Literal

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from ._db import parse_json

Service = Literal["platform", "traces", "objects", "local"]

_TRACES_PREFIXES = ("/api/v1/traces", "/api/v1/episodes", "/api/v1/runs")

_TRACES_CODES = {
    400: "invalid_trace",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    409: "line_format_conflict",
    429: "rate_limited",
    502: "bad_gateway",
    503: "ingest_unavailable",
    504: "gateway_timeout",
}


def service_for(path: str) -> Service:
    if any(path == prefix or path.startswith(prefix + "/") for prefix in _TRACES_PREFIXES):
        return "traces"
    if path.startswith("/_objects/"):
        return "objects"
    if path.startswith("/_local/"):
        return "local"
    return "platform"


class PlatformError(Exception):
    """An answer ``{"detail": ...}`` with ``status`` (platform, local and object routes)."""

    def __init__(self, status: int, detail: Any, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = dict(headers or {})


class TracesError(Exception):
    """An answer ``{"error": {"code", "message"}}`` with ``status`` (Prime Traces routes)."""

    def __init__(self, status: int, code: str, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})


def error_response(
    service: Service,
    status: int,
    message: str,
    *,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    if service == "traces":
        body: dict[str, Any] = {"error": {"code": code or _TRACES_CODES.get(status, "error"), "message": message}}
    else:
        body = {"detail": message}
    return JSONResponse(body, status_code=status, headers=dict(headers or {}))


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(PlatformError, _platform_error)
    app.add_exception_handler(TracesError, _traces_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    # Input that only fails where it meets SQLite or an encoder (an integer past 64 bits, a lone surrogate in a
    # header-decoded or form string) is the sender's error, not the server's.
    app.add_exception_handler(OverflowError, _unstorable_input)
    app.add_exception_handler(UnicodeEncodeError, _unstorable_input)


async def _platform_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, PlatformError)
    return JSONResponse({"detail": exc.detail}, status_code=exc.status, headers=exc.headers)


async def _traces_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, TracesError)
    return error_response("traces", exc.status, exc.message, code=exc.code, headers=exc.headers)


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    if service_for(request.url.path) == "traces":
        first = errors[0] if errors else {}
        return error_response(
            "traces", 400, f"{_location(first)}: {first.get('msg', 'invalid')}", code="invalid_filter"
        )
    if any(error.get("type") == "json_invalid" for error in errors):
        return JSONResponse({"detail": "Request body is not valid JSON"}, status_code=400)
    # Only type/loc/msg: an error's ``input`` may be undecodable bytes.
    detail = [{"type": e.get("type"), "loc": list(e.get("loc", ())), "msg": e.get("msg")} for e in errors]
    return JSONResponse({"detail": detail}, status_code=422)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    return error_response(service_for(request.url.path), exc.status_code, str(exc.detail), headers=exc.headers)


async def _unstorable_input(request: Request, exc: Exception) -> Response:
    if isinstance(exc, OverflowError):
        message = "a number in the request does not fit a 64-bit integer"
    else:
        message = "a string in the request is not valid UTF-8 (a lone surrogate)"
    return error_response(service_for(request.url.path), 400, message)


def _location(error: Mapping[str, Any]) -> str:
    return ".".join(str(part) for part in error.get("loc", ()))


class _StrictJSONRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = parse_json(await self.body())
        return self._json


class StrictJSONRoute(APIRoute):
    """Refuses bare ``NaN``/``Infinity`` and overflowing numbers with 400 like any other malformed body."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(_StrictJSONRequest(request.scope, request.receive))

        return strict
