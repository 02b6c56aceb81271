"""Bounded polling for tests: wait until something observable happened, never sleep a guessed time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

WAIT_SECONDS = 60.0


def wait_for(predicate: Callable[[], T], what: str, timeout: float = WAIT_SECONDS, interval: float = 0.05) -> T:
    """Poll ``predicate`` until it returns something truthy and return that; fail the test naming ``what`` when
    ``timeout`` seconds passed first."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)
