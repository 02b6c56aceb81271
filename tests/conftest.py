"""Every test's per-user cache (where online runs keep their write-ahead log unless PRIME_RUNS_DIR says
otherwise) is a temporary folder: no test writes into the checkout, the working directory or the real home."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _temporary_cache_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path_factory.mktemp("cache-home")
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    return cache
