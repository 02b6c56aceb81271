"""The eval samples sink splits a request the platform refused, so that only the refused rows fail.

A 400/413/422 answer refuses the whole request and stores nothing; halving it until the refused rows are alone
costs about two requests per halving instead of one per row. The server here is scripted (it refuses any body
holding a row marked bad); the HTTP client and the sink are the real ones.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.resources import Resource

from prime_otel._sink import SinkWriteError
from prime_otel.client import EvaluationsAPI, PlatformHTTP
from prime_otel.exporters.eval_samples import EvalSamplesSink
from prime_otel.records import RecordSpan
from tests.client.client_scripts import Script


def _rows(count: int, bad: set[int]) -> list[dict[str, Any]]:
    return [{"sample_id": f"s{i}", "rollout_number": 1, "reward": 1.0, "bad": i in bad} for i in range(count)]


def _refusing(status: int) -> Script:
    def answer(request: httpx.Request) -> httpx.Response:
        rows = json.loads(request.content)["samples"]
        if any(row["bad"] for row in rows):
            return httpx.Response(status, json={"detail": "refused"})
        return httpx.Response(200, json={"evaluation_id": "e1", "samples_pushed": len(rows), "status": "RUNNING"})

    return Script(answer)


def _write(script: Script, rows: list[dict[str, Any]]) -> tuple[EvalSamplesSink, SinkWriteError | None]:
    http = PlatformHTTP(api_key="pit_test_key", base_url="https://api.test", transport=script, sleep=lambda _: None)
    sink = EvalSamplesSink(EvaluationsAPI(http), "e1")
    try:
        sink.write([RecordSpan(row, Resource.create({}), time.time_ns()) for row in rows])
    except SinkWriteError as error:
        return sink, error
    return sink, None


def _sent(script: Script) -> list[list[str]]:
    return [[row["sample_id"] for row in json.loads(r.content)["samples"]] for r in script.requests]


def _stored(script: Script) -> list[str]:
    """The sample ids of the requests the scripted server accepted."""
    accepted = [r for r in script.requests if b'"bad":true' not in r.content]
    return sorted(row["sample_id"] for r in accepted for row in json.loads(r.content)["samples"])


def test_one_refused_row_fails_alone_and_the_request_is_halved_until_it_is_found() -> None:
    script = _refusing(413)
    sink, error = _write(script, _rows(8, bad={5}))
    assert error is not None and error.failed_positions == {5: "rejected by the platform: 413"}
    assert error.lost_positions(8) == [] and error.ambiguous_positions == []
    assert sink.stats.delivered == 7
    assert [len(ids) for ids in _sent(script)] == [8, 4, 4, 2, 1, 1, 2]
    assert _stored(script) == sorted(f"s{i}" for i in range(8) if i != 5)


@pytest.mark.parametrize("status", [400, 422])
def test_two_refused_rows_fail_with_the_reason_and_every_other_row_is_stored_once(status: int) -> None:
    script = _refusing(status)
    sink, error = _write(script, _rows(16, bad={1, 14}))
    assert error is not None and set(error.failed_positions) == {1, 14}
    assert set(error.failed_positions.values()) == {f"rejected by the platform: {status}"}
    assert sink.stats.delivered == 14
    assert _stored(script) == sorted(f"s{i}" for i in range(16) if i not in {1, 14})
    assert len(script.requests) < 16


def test_a_409_is_not_split_the_closed_evaluation_refuses_every_row() -> None:
    script = Script(httpx.Response(409, json={"detail": "evaluation is not running"}))
    sink, error = _write(script, _rows(8, bad=set()))
    assert error is not None and set(error.failed_positions) == set(range(8))
    assert set(error.failed_positions.values()) == {"rejected by the platform: 409"}
    assert len(script.requests) == 1 and sink.stats.delivered == 0
