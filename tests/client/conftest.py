"""Fixtures for the platform client tests: scripted transports and a recorded sleep."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from client_scripts import Outcome, Script, Sleeps

from prime_otel.client import ObjectStorage, PlatformHTTP


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def make_http(sleeps: Sleeps) -> Callable[..., tuple[PlatformHTTP, Script]]:
    def build(*outcomes: Outcome, base_url: str = "https://api.test", **options: Any) -> tuple[PlatformHTTP, Script]:
        script = Script(*outcomes)
        options.setdefault("random", lambda: 0.5)
        http = PlatformHTTP(api_key="pit_test_key", base_url=base_url, transport=script, sleep=sleeps, **options)
        return http, script

    return build


@pytest.fixture
def make_storage(sleeps: Sleeps) -> Callable[..., tuple[ObjectStorage, Script]]:
    def build(*outcomes: Outcome) -> tuple[ObjectStorage, Script]:
        script = Script(*outcomes)
        return ObjectStorage(transport=script, sleep=sleeps, random=lambda: 0.5), script

    return build
