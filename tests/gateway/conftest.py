"""One local platform and one gateway subprocess for the package (runs are told apart by id)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from prime_otel.testing import LocalPlatform, start_local_platform
from tests.gateway._gateway import FAST_LIMITS, LEASE_SECONDS, Gateway


@pytest.fixture(scope="package")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlatform]:
    with start_local_platform(
        tmp_path_factory.mktemp("gateway-platform"), processing_delay=0.1, **FAST_LIMITS
    ) as server:
        yield server


@pytest.fixture(scope="package")
def gateway(platform: LocalPlatform, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    folder = tmp_path_factory.mktemp("gateway")
    with Gateway(platform, folder, "--lease-seconds", str(LEASE_SECONDS), "--samples-step-interval", "1") as server:
        yield server
