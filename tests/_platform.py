"""Pointing the SDK of this test process at a local platform (its environment, a fresh home and runs folder)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from prime_otel.testing import LocalPlatform

_RUN_VARIABLES = ("PRIME_RUN_ID", "PRIME_RUN_OWNER_PID", "PRIME_RUN_KIND", "PRIME_TEAM_ID", "PRIME_RUNS_MODE")


def point_sdk_at(platform: LocalPlatform, monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PRIME_RUNS_DIR", str(home / "prime-runs"))
    for name, value in platform.env.items():
        monkeypatch.setenv(name, value)
    for name in _RUN_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def isolate_sdk(
    platform: LocalPlatform, monkeypatch: pytest.MonkeyPatch, home: Path, runs: Path, *, team: str | None = None
) -> None:
    """This process's runs and syncs talk to ``platform`` only and write under the test's directory: every
    ``PRIME_`` variable of the environment cleared, then ``HOME``, ``PRIME_RUNS_DIR``, the platform's variables and
    (when given) the team set."""
    for name in [name for name in os.environ if name.startswith("PRIME_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PRIME_RUNS_DIR", str(runs))
    if team is not None:
        monkeypatch.setenv("PRIME_TEAM_ID", team)
    for name, value in platform.env.items():
        monkeypatch.setenv(name, value)
