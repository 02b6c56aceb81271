"""Runs opened directly through the platform client, for a sink under test to write into (no ``init()``)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource

from prime_otel._types import EnvironmentRef
from prime_otel.client import EvaluationsAPI, PlatformHTTP, TrainingRunsAPI, build_create_body
from prime_otel.records import RecordSpan

RESOURCE = Resource.create({})


def open_eval(http: PlatformHTTP) -> str:
    api = EvaluationsAPI(http)
    environments = api.resolve_environments([EnvironmentRef(name="gsm8k")], None)
    body = build_create_body(f"sink-test-{secrets.token_hex(4)}", environments, ["sink-test"])
    return str(api.create(body)["evaluation_id"])


def open_training(http: PlatformHTTP) -> str:
    api = TrainingRunsAPI(http)
    body = api.build_create_body(base_model="m", environments=[EnvironmentRef(name="gsm8k")], team_id="team_abc")
    return str(api.create(body)["id"])


def spans(records: Sequence[Any]) -> list[RecordSpan]:
    """The record spans the records processor would hand a sink for ``records``."""
    logged_at = time.time_ns()
    return [RecordSpan(record, RESOURCE, logged_at) for record in records]
