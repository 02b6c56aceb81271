"""Scripted httpx transports and response builders for the platform client tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

Outcome = httpx.Response | Exception | Callable[[httpx.Request], httpx.Response]


class Script(httpx.MockTransport):
    """Answers with the given outcomes in order (the last one repeats) and records every request."""

    def __init__(self, *outcomes: Outcome) -> None:
        super().__init__(self._answer)
        self.outcomes = list(outcomes) or [httpx.Response(200, json={})]
        self.requests: list[httpx.Request] = []
        self.closed = False

    def _answer(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.requests.append(request)
        outcome = self.outcomes.pop(0) if len(self.outcomes) > 1 else self.outcomes[0]
        if isinstance(outcome, Exception):
            raise outcome
        if isinstance(outcome, httpx.Response):
            return outcome
        return outcome(request)

    def close(self) -> None:
        self.closed = True

    def body(self, index: int = -1) -> Any:
        return json.loads(self.requests[index].content)

    @property
    def paths(self) -> list[str]:
        return [f"{r.method} {r.url.path}" for r in self.requests]


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def ok(body: Any = None, code: int = 200, **kwargs: Any) -> httpx.Response:
    return httpx.Response(code, json=body if body is not None else {}, **kwargs)


def reply(code: int, body: Any = None, **kwargs: Any) -> httpx.Response:
    if body is None:
        return httpx.Response(code, **kwargs)
    return httpx.Response(code, json=body, **kwargs)
