from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from prime_otel.testing import LocalPlatform, start_local_platform

from ._producer import Producer


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlatform]:
    """One platform per module: runs never interfere (each test reads its own run ids)."""
    with start_local_platform(tmp_path_factory.mktemp("lifecycle-platform"), processing_delay=0.2) as server:
        yield server


@pytest.fixture
def producer(platform: LocalPlatform, tmp_path: Path) -> Iterator[Producer]:
    yield Producer(platform, tmp_path)
    platform.reset()
