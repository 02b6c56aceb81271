"""SDK tests run against a real local platform process; the producer's environment points at it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from prime_otel.testing import LocalPlatform
from tests._platform import point_sdk_at


@pytest.fixture
def platform_env(local_platform: LocalPlatform, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> LocalPlatform:
    """A fresh local platform for this test, with the SDK's environment pointing at it."""
    point_sdk_at(local_platform, monkeypatch, tmp_path)
    return local_platform


@pytest.fixture
def shared_platform_env(
    local_platform_session: LocalPlatform, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[LocalPlatform]:
    """The session's local platform (runs are told apart by id); faults and settings are reset afterwards."""
    point_sdk_at(local_platform_session, monkeypatch, tmp_path)
    yield local_platform_session
    local_platform_session.reset()
