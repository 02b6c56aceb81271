"""Request body caps, enforced before a body is parsed: 413 for platform calls, 400 for Prime Traces."""

from __future__ import annotations

import fnmatch

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._errors import error_response, service_for
from ._settings import MIB, SettingsHolder

_MULTIPART_SLACK = MIB
_DEFAULT_LIMIT = 64 * MIB
_OBJECT_LIMIT = 1024 * MIB


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, settings: SettingsHolder) -> None:
        self.app = app
        self.settings = settings

    def _limit(self, method: str, path: str) -> int | None:
        if method in ("GET", "HEAD", "OPTIONS", "DELETE"):
            return None
        settings = self.settings.current
        if fnmatch.fnmatchcase(path, "/api/*/evaluations/*/samples"):
            return settings.samples_max_bytes
        if path == "/api/v1/traces":
            return settings.traces_max_upload_bytes + _MULTIPART_SLACK
        if path.startswith("/_objects/"):
            return _OBJECT_LIMIT
        if path.startswith(("/api/", "/_local/")):
            return _DEFAULT_LIMIT
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self._limit(scope.get("method", ""), scope.get("path", "")) if scope["type"] == "http" else None
        if limit is None:
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        too_large = declared.isdigit() and int(declared) > limit
        if scope["path"].startswith("/_objects/"):
            await self._stream_object(scope, receive, send, declared, too_large, limit)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before sending its body
            chunk = message.get("body", b"")
            size += len(chunk)
            too_large = too_large or size > limit
            if not too_large:
                chunks.append(chunk)
            if not message.get("more_body", False):
                break
        if too_large:
            await self._reject(scope, receive, send, limit)
            return
        await self.app(scope, replay_body(b"".join(chunks), receive), send)

    async def _stream_object(
        self, scope: Scope, receive: Receive, send: Send, declared: bytes, too_large: bool, limit: int
    ) -> None:
        """An object PUT is not read here: the route checks its signature before it reads a byte of the body.
        Like object storage, a PUT needs a ``Content-Length`` (which bounds the body) within the limit."""
        if not declared.isdigit():
            await error_response("objects", 411, "A PUT needs a Content-Length header")(scope, receive, send)
        elif too_large:
            await self._reject(scope, receive, send, limit)
        else:
            await self.app(scope, receive, send)

    @staticmethod
    async def _reject(scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        path = scope["path"]
        if service_for(path) == "traces":
            response = error_response("traces", 400, f"upload exceeds {limit} bytes", code="upload_too_large")
        else:
            response = error_response(service_for(path), 413, f"Request body exceeds {limit} bytes")
        await response(scope, receive, send)


async def read_body(receive: Receive) -> bytes:
    """The whole request body, read now (empty when the client went away first)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b""
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def replay_body(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands ``body`` over once, then defers to the original."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
