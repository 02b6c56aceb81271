"""Session-wide verifiers episodes rebuilt from the fixtures. Tests must not edit these; a test that needs an
edited episode builds its own with ``tests._fixtures.episode_from_record``."""

from __future__ import annotations

from typing import Any

import pytest

from tests._fixtures import load_episodes


@pytest.fixture(scope="session")
def eval_episodes() -> list[Any]:
    return load_episodes("eval")


@pytest.fixture(scope="session")
def train_episodes() -> list[Any]:
    return load_episodes("train")
