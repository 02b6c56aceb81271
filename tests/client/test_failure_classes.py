"""The failure classes the platform defines, for each way a call can fail.

Ambiguous: the server may have acted (502/503/504, a stream broken or timed out after the request went out).
Unambiguous: nothing was applied (connect errors, 429, any other answer, an error before sending). A record
rejection (400, 409, 413, 422, an unencodable record) costs only its records; a transient failure (429, 5xx,
transport) is worth a strike; anything else (401, 402, 403, 404, ...) is permanent for the sink.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from client_scripts import reply
from prime_traces.exceptions import TransportError as TracesTransportError

from prime_otel.client import PlatformHTTP
from prime_otel.errors import (
    TraceTooLargeError,
    failure_reason,
    is_ambiguous,
    is_permanent,
    is_record_rejection,
    is_transient,
)

AMBIGUOUS, UNAMBIGUOUS = True, False
REJECTION, TRANSIENT, PERMANENT = "rejection", "transient", "permanent"


def _kind(error: BaseException) -> str:
    classes = [is_record_rejection(error), is_transient(error), is_permanent(error)]
    assert classes.count(True) == 1, f"{error!r} is in {classes.count(True)} classes"
    return (REJECTION, TRANSIENT, PERMANENT)[classes.index(True)]


def _failure_of(make_http: Callable[..., tuple[PlatformHTTP, object]], outcome: object) -> BaseException:
    """The error a non-idempotent POST raises for ``outcome`` (it is not retried after an ambiguous one)."""
    http, _ = make_http(outcome, max_attempts=1)
    with pytest.raises(Exception) as caught:
        http.request("POST", "/evaluations/e1/samples", json={"samples": [{"sample_id": "s"}]})
    return caught.value


@pytest.mark.parametrize(
    ("outcome", "ambiguous", "kind"),
    [
        (httpx.ConnectError("connection refused"), UNAMBIGUOUS, TRANSIENT),
        (httpx.ConnectTimeout("no connection"), UNAMBIGUOUS, TRANSIENT),
        (httpx.PoolTimeout("no connection free"), UNAMBIGUOUS, TRANSIENT),
        (reply(429, {"detail": "slow down"}, headers={"Retry-After": "0"}), UNAMBIGUOUS, TRANSIENT),
        (reply(400, {"detail": "malformed"}), UNAMBIGUOUS, REJECTION),
        (reply(409, {"detail": "evaluation is not running"}), UNAMBIGUOUS, REJECTION),
        (reply(413, {"detail": "too large"}), UNAMBIGUOUS, REJECTION),
        (reply(422, {"detail": [{"msg": "field required"}]}), UNAMBIGUOUS, REJECTION),
        (reply(401), UNAMBIGUOUS, PERMANENT),
        (reply(402), UNAMBIGUOUS, PERMANENT),
        (reply(403, {"detail": "not your team"}), UNAMBIGUOUS, PERMANENT),
        (reply(404, {"detail": "Not Found"}), UNAMBIGUOUS, PERMANENT),
        (reply(500, {"detail": "boom"}), UNAMBIGUOUS, TRANSIENT),
        (reply(502), AMBIGUOUS, TRANSIENT),
        (reply(503, {"detail": "unavailable"}), AMBIGUOUS, TRANSIENT),
        (reply(504), AMBIGUOUS, TRANSIENT),
        (httpx.ReadTimeout("no answer in time"), AMBIGUOUS, TRANSIENT),
        (httpx.WriteTimeout("body half sent"), AMBIGUOUS, TRANSIENT),
        (httpx.ReadError("connection reset"), AMBIGUOUS, TRANSIENT),
        (httpx.RemoteProtocolError("server closed the stream"), AMBIGUOUS, TRANSIENT),
    ],
    ids=lambda value: getattr(value, "status_code", None) or type(value).__name__,
)
def test_each_failure_has_the_contract_class(make_http, outcome: object, ambiguous: bool, kind: str) -> None:
    error = _failure_of(make_http, outcome)
    assert is_ambiguous(error) is ambiguous
    assert _kind(error) == kind


def test_a_body_refused_before_sending_is_an_unambiguous_rejection(make_http) -> None:
    http, script = make_http(reply(200))
    with pytest.raises(ValueError) as caught:
        http.request("POST", "/evaluations/e1/samples", json={"samples": [{"reward": float("nan")}]})
    assert script.requests == []  # type: ignore[attr-defined]
    assert not is_ambiguous(caught.value) and _kind(caught.value) == REJECTION


def test_a_traces_transport_error_that_does_not_say_when_it_broke_counts_as_ambiguous() -> None:
    error = TracesTransportError("stream broken")
    assert is_ambiguous(error) and _kind(error) == TRANSIENT


def test_a_storage_500_is_retryable_but_unambiguous(make_storage) -> None:
    storage, _ = make_storage(reply(500))
    with pytest.raises(Exception) as caught:
        storage.put("https://storage.test/object?signature=s", b"PAR1")
    assert not is_ambiguous(caught.value) and _kind(caught.value) == TRANSIENT


def test_a_trace_too_large_for_the_service_is_a_record_rejection() -> None:
    error = TraceTooLargeError(line_number=3, size=10, limit=5)
    assert _kind(error) == REJECTION and failure_reason(error) == "trace too large"


@pytest.mark.parametrize(
    ("outcome", "reason"),
    [
        (reply(413, {"detail": "too large"}), "rejected by the platform: 413"),
        (
            reply(400, {"error": {"code": "invalid_trace", "message": "bad"}}),
            "rejected by the platform: 400 invalid_trace",
        ),
        (reply(500, {"detail": "boom"}), "platform error: 500"),
        (reply(404, {"detail": "Not Found"}), "platform error: 404"),
        (httpx.ConnectError("connection refused"), "transport error: ConnectError"),
    ],
    ids=["413", "400-with-code", "500", "404", "connect"],
)
def test_the_failure_reason_names_the_kind_of_problem(make_http, outcome: object, reason: str) -> None:
    assert failure_reason(_failure_of(make_http, outcome)) == reason
