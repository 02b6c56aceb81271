from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from prime_otel.testing import LocalPlatform, start_local_platform

from ._helpers import TIMEOUT


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlatform]:
    """One server for the tests that leave no lasting change behind (see ``_restore``)."""
    with start_local_platform(tmp_path_factory.mktemp("local-server"), processing_delay=0.2) as platform:
        yield platform


@pytest.fixture(autouse=True)
def _restore(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "server" in request.fixturenames:
        request.getfixturevalue("server").reset()


@pytest.fixture
def api(server: LocalPlatform) -> Iterator[httpx.Client]:
    """The account key, as the SDK sends it."""
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {server.api_key}"}, timeout=TIMEOUT
    ) as client:
        yield client


@pytest.fixture
def anonymous(server: LocalPlatform) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=TIMEOUT) as client:
        yield client
