"""What every GenAI agent test runs against: the loopback chat server, and message content captured on spans."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.genai._agent import CONTENT_ON_SPANS
from tests.genai._chat import ChatServer


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


@pytest.fixture
def content_on_spans(monkeypatch: pytest.MonkeyPatch) -> None:
    """The instrumentation puts message content on its spans (read when it instruments the client)."""
    for name, value in CONTENT_ON_SPANS.items():
        monkeypatch.setenv(name, value)
