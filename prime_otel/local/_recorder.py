"""A recording of every API request for assertions: what was sent, and what the client was answered.

A request is stored *before* its final response bytes leave (or before an injected connection
reset), so a client that has seen the answer always finds the record.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._db import Database, dumps, loads, now_iso, parse_json_leniently, storable
from ._errors import service_for

CAPTURE_LIMIT = 256 * 1024
RESPONSE_CAPTURE_LIMIT = 64 * 1024

_HEADER_SUBSET = (
    "content-type",
    "content-encoding",
    "content-length",
    "user-agent",
    "x-prime-team-id",
    "idempotency-key",
    "x-prime-line-format",
)

RECORD_NOW = "prime_local.record_now"
RECORD_BODY = "prime_local.record_body"
RECORD_RUN_IDS = "prime_local.record_run_ids"
FAULT = "prime_local.fault"


class RequestLog:
    def __init__(self, db: Database, keep: int = 10_000) -> None:
        self._db = db
        self._keep = keep

    def add(self, record: dict[str, Any], run_ids: list[str], route_key: str) -> None:
        with self._db.write() as conn:
            # What was sent is recorded as it came, except lone surrogates (a JSON escape can carry one).
            seq = conn.execute("INSERT INTO requests (record) VALUES (?)", (storable(dumps(record)),)).lastrowid
            assert seq is not None
            conn.executemany(
                "INSERT INTO request_runs (request_seq, run_id, route_key) VALUES (?, ?, ?)",
                [(seq, storable(run_id), storable(route_key)) for run_id in dict.fromkeys(run_ids)],
            )
            if seq % 500 == 0:
                conn.execute("DELETE FROM requests WHERE seq <= ?", (seq - self._keep,))

    def recent(self, limit: int, run_id: str | None = None) -> list[Any]:
        """Newest last."""
        with self._db.read() as conn:
            if run_id is None:
                rows = conn.execute("SELECT seq, record FROM requests ORDER BY seq DESC LIMIT ?", (limit,)).fetchall()
            else:
                rows = conn.execute(
                    "SELECT r.seq, r.record FROM requests r JOIN request_runs rr ON rr.request_seq = r.seq "
                    "WHERE rr.run_id = ? ORDER BY r.seq DESC LIMIT ?",
                    (run_id, limit),
                ).fetchall()
        return [{"seq": row["seq"], **loads(row["record"])} for row in reversed(rows)]

    def counts(self, run_id: str) -> dict[str, int]:
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT route_key, COUNT(*) AS n FROM request_runs WHERE run_id = ? GROUP BY route_key ORDER BY 1",
                (run_id,),
            ).fetchall()
        return {row["route_key"]: row["n"] for row in rows}


def _recorded(method: str, path: str) -> bool:
    if path.startswith("/_local/"):
        return method != "GET"
    return path.startswith(("/api/", "/_objects/"))


def _headers(scope: Scope) -> dict[str, str]:
    raw = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
    headers = {name: raw[name] for name in _HEADER_SUBSET if name in raw}
    if "authorization" in raw:
        scheme = raw["authorization"].split(" ", 1)[0]
        headers["authorization"] = f"{scheme} <redacted>"
    if "x-api-key" in raw:
        headers["x-api-key"] = "<redacted>"
    return headers


def _decode_body(content_type: str, body: bytes, size: int) -> Any:
    if size == 0:
        return None
    kind = content_type.split(";", 1)[0].strip().lower()
    if size <= len(body) and (kind == "application/json" or kind.endswith("+json")):
        try:
            return parse_json_leniently(body)
        except (ValueError, RecursionError):
            return f"<{size} bytes, not JSON>"
    if kind == "application/json":
        return f"<{size} bytes of JSON>"
    if kind == "application/parquet":
        return f"<{size} bytes of Parquet>"
    return f"<{size} bytes of {kind or 'unknown type'}>"


class _Exchange:
    """The request and response of one call, as far as they went."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.started = time.monotonic()
        self.body = bytearray()
        self.size = 0
        self.status: int | None = None
        self.response = bytearray()
        self.response_size = 0
        self.response_type = ""
        self.done = False

    def add_request_bytes(self, chunk: bytes) -> None:
        self.size += len(chunk)
        room = CAPTURE_LIMIT - len(self.body)
        if room > 0:
            self.body += chunk[:room]

    def add_response(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            for name, value in message.get("headers", []):
                if name.lower() == b"content-type":
                    self.response_type = value.decode("latin-1")
        elif message["type"] == "http.response.body":
            chunk = message.get("body", b"")
            self.response_size += len(chunk)
            room = RESPONSE_CAPTURE_LIMIT - len(self.response)
            if room > 0:
                self.response += chunk[:room]

    def record(self) -> tuple[dict[str, Any], list[str], str]:
        scope = self.scope
        state = scope.get("state", {})
        route = scope.get("route")
        template = getattr(route, "path", None)
        headers = _headers(scope)
        body = state.get(RECORD_BODY)
        if body is None:
            body = _decode_body(headers.get("content-type", ""), bytes(self.body), self.size)
        record: dict[str, Any] = {
            "at": now_iso(),
            "service": service_for(scope["path"]),
            "method": scope["method"],
            "path": scope["path"],
            "query": scope.get("query_string", b"").decode("latin-1"),
            "route": template,
            "status": self.status,
            "headers": headers,
            "body": body,
            "response": _decode_body(self.response_type, bytes(self.response), self.response_size),
            "duration_ms": round((time.monotonic() - self.started) * 1000, 3),
        }
        if FAULT in state:
            record["fault"] = state[FAULT]
        params = scope.get("path_params", {})
        run_ids = [params[k] for k in ("evaluation_id", "run_id") if isinstance(params.get(k), str)]
        run_ids += state.get(RECORD_RUN_IDS, [])
        return record, run_ids, f"{scope['method']} {template or scope['path']}"


class RecorderMiddleware:
    def __init__(self, app: ASGIApp, log: RequestLog) -> None:
        self.app = app
        self.log = log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _recorded(scope["method"], scope["path"]):
            await self.app(scope, receive, send)
            return
        exchange = _Exchange(scope)
        scope.setdefault("state", {})[RECORD_NOW] = self._flusher(exchange)

        async def tee_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                exchange.add_request_bytes(message.get("body", b""))
            return message

        async def recording_send(message: Message) -> None:
            exchange.add_response(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                await self._flush(exchange)
            await send(message)

        try:
            await self.app(scope, tee_receive, recording_send)
        except Exception:
            if exchange.status is None:
                exchange.status = 500
            await self._flush(exchange)
            raise
        await self._flush(exchange)

    def _flusher(self, exchange: _Exchange) -> Callable[[], Awaitable[None]]:
        async def flush() -> None:
            await self._flush(exchange)

        return flush

    async def _flush(self, exchange: _Exchange) -> None:
        if exchange.done:
            return
        exchange.done = True
        record, run_ids, route_key = exchange.record()
        await run_in_threadpool(self.log.add, record, run_ids, route_key)


def note_runs(scope: Scope, *run_ids: str) -> None:
    """Associates the current request with runs the URL does not name (body ``run_id``, created ids)."""
    scope.setdefault("state", {}).setdefault(RECORD_RUN_IDS, []).extend(run_ids)


def note_body(scope: Scope, body: Any) -> None:
    """Replaces the recorded request body with a decoded form (multipart uploads)."""
    scope.setdefault("state", {})[RECORD_BODY] = body
