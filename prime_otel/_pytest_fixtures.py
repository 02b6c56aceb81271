"""The pytest side of :mod:`prime_otel.testing`: its fixtures and marker, imported only under pytest."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .testing import LocalPlatform, start_local_platform


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "local_platform(**options): options for the local_platform fixture's server (prime_otel)"
    )


@pytest.fixture
def local_platform(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LocalPlatform]:
    """A fresh local platform for one test."""
    marker = request.node.get_closest_marker("local_platform")
    platform = start_local_platform(tmp_path / "prime-local", **(marker.kwargs if marker else {}))
    try:
        yield platform
    finally:
        platform.stop()


@pytest.fixture(scope="session")
def local_platform_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlatform]:
    """One local platform shared by the session; call ``reset()`` after changing its faults or settings."""
    platform = start_local_platform(tmp_path_factory.mktemp("prime-local"))
    try:
        yield platform
    finally:
        platform.stop()
