"""The session's local platform (runs told apart by id; faults and settings reset after each test) and a client
for it. Its rate limits are raised: what a sink sends, not how the platform paces it, is under test here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from prime_otel.client import PlatformHTTP
from prime_otel.testing import LocalPlatform


@pytest.fixture
def platform(local_platform_session: LocalPlatform) -> Iterator[LocalPlatform]:
    local_platform_session.inspect.settings(metrics_rate_limit=100_000, samples_rate_limit=100_000)
    yield local_platform_session
    local_platform_session.reset()


@pytest.fixture
def http(platform: LocalPlatform) -> Iterator[PlatformHTTP]:
    client = PlatformHTTP(api_key=platform.api_key, base_url=platform.url, sleep=lambda _: None)
    yield client
    client.close()
