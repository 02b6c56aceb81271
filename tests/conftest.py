"""Every test's per-user cache (where online runs keep their write-ahead log unless PRIME_RUNS_DIR says
otherwise) is a temporary folder: no test writes into the checkout, the working directory or the real home.

Ctrl-C reaches the test processes as it reaches a user's program: a shell that starts the suite in the background
sets SIGINT to "ignored", which every child would inherit (Python then installs no KeyboardInterrupt handler), so
the tests that send SIGINT to a producer, a sync or the demo would test a state no user's terminal is in."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest


def pytest_configure(config: pytest.Config) -> None:
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _temporary_cache_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path_factory.mktemp("cache-home")
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    return cache
