"""Fault injection per route: fixed answers, latency, rate limits, and "commit then fail".

``fail_after`` and ``reset_after`` let the request do its work and then lose the answer (a 502/504,
or a dropped connection), which is how a client's no-replay rules are proven. ``hold_after`` does the work,
records the request, then holds the answer: a test can kill the client while it waits for an answer to a
request already applied.
"""

from __future__ import annotations

import asyncio
import fnmatch
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._bodylimit import read_body, replay_body
from ._errors import error_response, service_for
from ._recorder import FAULT, RECORD_NOW

Action = Literal["fail_before", "fail_after", "reset_after", "hold_after", "delay", "rate_limit"]

_DEFAULT_STATUS = {"fail_before": 503, "fail_after": 502, "rate_limit": 429}


class FaultRuleIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    method: str = Field(default="*", description="HTTP method, or * for any")
    path: str = Field(default="*", description="fnmatch glob on the URL path, e.g. /api/v1/evaluations/*/samples")
    action: Action
    times: int | None = Field(default=1, ge=1, description="how many requests it hits; null = unlimited")
    status: int | None = Field(default=None, ge=400, le=599)
    retry_after: float | None = Field(default=None, ge=0, le=3600)
    delay_s: float = Field(default=0.0, ge=0, le=300, description="for delay and hold_after")
    code: str | None = Field(default=None, max_length=200, description="error code (Prime Traces routes)")
    message: str | None = Field(default=None, max_length=2000)


class FaultRulesIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rules: list[FaultRuleIn]


@dataclass
class FaultRule:
    spec: FaultRuleIn
    remaining: int | None

    @property
    def status(self) -> int:
        if self.spec.action == "rate_limit":
            return 429
        return self.spec.status or _DEFAULT_STATUS.get(self.spec.action, 503)

    def matches(self, method: str, path: str) -> bool:
        if self.remaining == 0:
            return False
        if self.spec.method != "*" and self.spec.method.upper() != method.upper():
            return False
        return fnmatch.fnmatchcase(path, self.spec.path)

    def to_json(self) -> dict[str, Any]:
        return {**self.spec.model_dump(), "status": self.status, "remaining": self.remaining}


class FaultBook:
    def __init__(self) -> None:
        self._rules: list[FaultRule] = []
        self._lock = threading.Lock()

    def add(self, specs: list[FaultRuleIn]) -> None:
        with self._lock:
            self._rules.extend(FaultRule(spec, spec.times) for spec in specs)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def rules(self) -> list[dict[str, Any]]:
        with self._lock:
            return [rule.to_json() for rule in self._rules]

    def take(self, method: str, path: str) -> FaultRule | None:
        """The first matching rule, with one use counted down."""
        with self._lock:
            for rule in self._rules:
                if rule.matches(method, path):
                    if rule.remaining is not None:
                        rule.remaining -= 1
                    return rule
        return None


class ConnectionRegistry:
    """Finds the TCP connection of a request so that ``reset_after`` can drop it without an answer."""

    def __init__(self) -> None:
        self._connections: set[Any] | None = None

    def attach(self, connections: set[Any]) -> None:
        """``connections``: the server's live protocol objects (uvicorn's ``server_state.connections``)."""
        self._connections = connections

    async def abort(self, client: Any) -> None:
        if self._connections is None:
            raise RuntimeError("reset_after needs the server started by prime_otel.local")
        peer = tuple(client) if client else None
        for protocol in list(self._connections):
            if getattr(protocol, "client", None) == peer:
                protocol.transport.abort()
                # Let the loop deliver connection_lost, so the server sends nothing in its place.
                for _ in range(1000):
                    if protocol not in self._connections:
                        return
                    await asyncio.sleep(0.001)
                return


class FaultMiddleware:
    def __init__(self, app: ASGIApp, book: FaultBook, connections: ConnectionRegistry) -> None:
        self.app = app
        self.book = book
        self.connections = connections

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        rule = None
        if scope["type"] == "http" and path.startswith(("/api/", "/_objects/")):
            rule = self.book.take(scope["method"], path)
        if rule is None:
            await self.app(scope, receive, send)
            return
        action = rule.spec.action
        note: dict[str, Any] = {"action": action}
        scope.setdefault("state", {})[FAULT] = note
        if action == "delay":
            # The body is taken first: a client that gives up during the delay has still sent it,
            # and the server acts on it, which is what makes a read timeout ambiguous.
            body = await read_body(receive)
            await asyncio.sleep(rule.spec.delay_s)
            await self.app(scope, replay_body(body, receive), send)
            return
        if action in ("fail_before", "rate_limit"):
            await read_body(receive)
            await self._answer(rule, scope, receive, send)
            return
        if action == "hold_after":
            await self._hold_answer(rule, scope, receive, send, note)
            return
        note["handled_status"] = await self._handle_silently(scope, receive)
        if action == "fail_after":
            await self._answer(rule, scope, receive, send)
            return
        record_now: Callable[[], Awaitable[None]] | None = scope["state"].get(RECORD_NOW)
        if record_now is not None:
            await record_now()
        await self.connections.abort(scope.get("client"))

    async def _hold_answer(
        self, rule: FaultRule, scope: Scope, receive: Receive, send: Send, note: dict[str, Any]
    ) -> None:
        """Runs the request to completion and records it (with the status it answers), then sends the answer only
        after ``delay_s``, or never if the client went away meanwhile."""
        answer: list[Message] = []

        async def keep(message: Message) -> None:
            answer.append(message)
            if message["type"] == "http.response.start":
                note["handled_status"] = message["status"]

        await self.app(scope, receive, keep)
        record_now: Callable[[], Awaitable[None]] | None = scope["state"].get(RECORD_NOW)
        if record_now is not None:
            await record_now()

        async def client_gone() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        try:
            await asyncio.wait_for(client_gone(), rule.spec.delay_s)
        except asyncio.TimeoutError:
            for message in answer:
                await send(message)

    async def _handle_silently(self, scope: Scope, receive: Receive) -> int | None:
        """Runs the request to completion and keeps only the status it would have answered."""
        status: list[int] = []

        async def swallow(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])

        await self.app(scope, receive, swallow)
        return status[0] if status else None

    @staticmethod
    async def _answer(rule: FaultRule, scope: Scope, receive: Receive, send: Send) -> None:
        headers: dict[str, str] = {}
        retry_after = rule.spec.retry_after
        if retry_after is None and rule.spec.action == "rate_limit":
            retry_after = 1
        if retry_after is not None:
            headers["Retry-After"] = f"{retry_after:g}"
        message = rule.spec.message or f"Injected {rule.spec.action} fault"
        response = error_response(
            service_for(scope["path"]), rule.status, message, code=rule.spec.code, headers=headers
        )
        await response(scope, receive, send)
