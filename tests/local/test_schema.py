"""Property-based fuzzing of every documented operation: no input makes the app answer 5xx.

The app runs in-process (ASGI) over its own temporary data directory; the schema is its own
OpenAPI document, loaded at collection time so that each operation is a test of its own.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from prime_otel.local import create_app

_DATA = tempfile.TemporaryDirectory(prefix="prime-local-fuzz-")
_APP = create_app(_DATA.name, api_key="pit_fuzz_key")
_AUTH = {"Authorization": "Bearer pit_fuzz_key"}

schemathesis.serializer.alias("application/parquet", "application/octet-stream")

# Fault rules and settings would make later answers what a test asked for, not what the app does.
schema = schemathesis.openapi.from_asgi("/openapi.json", _APP).exclude(path_regex="^/_local/(faults|settings)$")


@pytest.fixture(scope="module", autouse=True)
def _remove_data() -> Iterator[None]:
    yield
    _DATA.cleanup()


@schema.parametrize()
@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_no_operation_answers_a_server_error(case: Any) -> None:
    response = case.call(headers=_AUTH)
    assert response.status_code < 500, f"{case.method} {case.formatted_path}: {response.status_code} {response.text}"
