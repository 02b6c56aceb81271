"""PlatformHTTP: encoding, decoding, error mapping, and which failures may be replayed for which calls."""

from __future__ import annotations

import re
import sys
from datetime import datetime, timezone

import httpx
import pytest
from client_scripts import Script, ok, reply
from opentelemetry import context as otel_context

from prime_otel.client import PlatformHTTP
from prime_otel.client import _http as http_module
from prime_otel.client._failures import retry_after_seconds
from prime_otel.errors import (
    APIError,
    APITimeoutError,
    ForbiddenError,
    LineFormatConflictError,
    NotFoundError,
    PaymentRequiredError,
    RetryableAPIError,
    TraceNotIndexedError,
    TransportError,
    UnauthorizedError,
    ValidationRejectedError,
    is_ambiguous,
)

# --- request encoding -------------------------------------------------------------------------


def test_body_is_compact_utf8_json_with_content_type(make_http) -> None:
    http, script = make_http(ok())
    http.request("POST", "/x", json={"name": "é ü", "n": [1, 2.5], "nested": {"a": None}})
    request = script.requests[0]
    assert request.content == '{"name":"é ü","n":[1,2.5],"nested":{"a":null}}'.encode()
    assert request.headers["content-type"] == "application/json"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_numbers_are_refused_before_any_request(make_http, bad: float) -> None:
    """A body holding NaN or ±inf is refused locally, before any request is sent."""
    http, script = make_http(ok())
    with pytest.raises(ValueError):
        http.request("PUT", "/evaluations/e1", json={"metrics": {"avg": [1.0, bad]}})
    assert script.requests == []
    assert http.requests == 0


@pytest.mark.parametrize("method", ["POST", "PUT"])
def test_empty_body_sends_no_body_and_no_content_type(make_http, method: str) -> None:
    http, script = make_http(ok())
    http.request(method, "/x", json={})
    request = script.requests[0]
    assert request.content == b""
    assert "content-type" not in request.headers


def test_pre_encoded_content_is_sent_verbatim(make_http) -> None:
    http, script = make_http(ok())
    http.request("POST", "/x", content=b'{"samples":[]}')
    assert script.requests[0].content == b'{"samples":[]}'
    assert script.requests[0].headers["content-type"] == "application/json"


def test_auth_and_user_agent_headers_on_the_public_root(make_http) -> None:
    http, script = make_http(ok(), base_url="https://api.test/api/v1/")
    http.request("GET", "/environmentshub/a/b/@latest")
    request = script.requests[0]
    assert str(request.url) == "https://api.test/api/v1/environmentshub/a/b/@latest"
    assert request.headers["authorization"] == "Bearer pit_test_key"
    assert "x-api-key" not in request.headers
    python = ".".join(str(part) for part in sys.version_info[:3])
    assert re.fullmatch(rf"prime-otel/[^ ]+ python/{re.escape(python)}", request.headers["user-agent"])


def test_internal_root_repeats_the_key_in_x_api_key(make_http) -> None:
    http, script = make_http(ok(), base_url="https://api.test/api/internal/rft")
    http.request("POST", "/rft/metrics", json={"run_id": "r"}, idempotent=True)
    request = script.requests[0]
    assert str(request.url) == "https://api.test/api/internal/rft/metrics"
    assert request.headers["x-api-key"] == "pit_test_key"
    assert request.headers["authorization"] == "Bearer pit_test_key"


def test_explicit_base_url_with_api_v1_is_not_doubled(make_http) -> None:
    http, script = make_http(ok(), base_url="https://api.test/api/v1")
    http.request("GET", "/evaluations/e1")
    assert script.requests[0].url.path == "/api/v1/evaluations/e1"


def test_absolute_url_is_not_prefixed(make_http) -> None:
    http, script = make_http(ok())
    http.request("GET", "https://elsewhere.test/thing", absolute_url=True)
    assert str(script.requests[0].url) == "https://elsewhere.test/thing"


def test_timeouts_default_and_per_call(make_http) -> None:
    http, script = make_http(ok())
    http.request("GET", "/a")
    http.request("POST", "/b", json={"x": 1}, timeout=httpx.Timeout(300.0, connect=10.0))
    default, upload = (r.extensions["timeout"] for r in script.requests)
    assert (default["read"], default["connect"]) == (60.0, 10.0)
    assert (upload["read"], upload["connect"]) == (300.0, 10.0)


def test_redirects_are_followed(make_http) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/old":
            return httpx.Response(307, headers={"Location": "https://api.test/api/v1/new"})
        return ok({"moved": True})

    http, script = make_http(answer)
    assert http.request("PUT", "/old", json={"a": 1}) == {"moved": True}
    assert script.paths == ["PUT /api/v1/old", "PUT /api/v1/new"]


# --- response decoding ------------------------------------------------------------------------


def test_empty_response_is_an_empty_object(make_http) -> None:
    http, _ = make_http(httpx.Response(200))
    assert http.request("GET", "/x") == {}


def test_non_object_json_is_wrapped_in_data(make_http) -> None:
    http, _ = make_http(ok([1, 2]))
    assert http.request("GET", "/x") == {"data": [1, 2]}


def test_non_json_success_is_a_permanent_error_without_status(make_http) -> None:
    http, script = make_http(httpx.Response(200, text="<html>gateway</html>"))
    with pytest.raises(APIError) as caught:
        http.request("GET", "/x")
    assert type(caught.value) is APIError
    assert caught.value.status_code is None
    assert "non-JSON" in str(caught.value)
    assert len(script.requests) == 1


# --- error mapping ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "error_type"),
    [
        (400, ValidationRejectedError),
        (401, UnauthorizedError),
        (402, PaymentRequiredError),
        (403, ForbiddenError),
        (404, NotFoundError),
        (409, LineFormatConflictError),
    ],
)
def test_status_maps_to_the_typed_error(make_http, code: int, error_type: type[APIError]) -> None:
    """Each error status maps to its typed error (403 to ForbiddenError), sent once."""
    http, script = make_http(reply(code, {"detail": "nope"}))
    with pytest.raises(error_type) as caught:
        http.request("PUT", "/x", json={"a": 1})
    assert caught.value.status_code == code
    assert len(script.requests) == 1


def test_unauthorized_message_points_at_the_api_key(make_http) -> None:
    http, _ = make_http(reply(401))
    with pytest.raises(UnauthorizedError, match="PRIME_API_KEY"):
        http.request("GET", "/x")


def test_trace_not_indexed_conflict(make_http) -> None:
    http, _ = make_http(reply(409, {"error": {"code": "trace_not_indexed", "message": "later"}}))
    with pytest.raises(TraceNotIndexedError) as caught:
        http.request("GET", "/x")
    assert caught.value.code == "trace_not_indexed"


def test_forbidden_keeps_code_and_message(make_http) -> None:
    body = {"error": {"code": "service_not_enabled", "message": "Prime Traces is not enabled"}}
    http, _ = make_http(reply(403, body))
    with pytest.raises(ForbiddenError) as caught:
        http.request("GET", "/x")
    assert caught.value.code == "service_not_enabled"
    assert str(caught.value) == "Prime Traces is not enabled"


@pytest.mark.parametrize("code", [413, 422])
def test_record_rejection_statuses_are_plain_api_errors(make_http, code: int) -> None:
    http, script = make_http(reply(code, {"detail": [{"loc": ["body", "name"], "msg": "field required"}]}))
    with pytest.raises(APIError) as caught:
        http.request("POST", "/evaluations/e/samples", json={"samples": []})
    assert type(caught.value) is APIError
    assert caught.value.status_code == code
    assert "field required" in str(caught.value)
    assert len(script.requests) == 1


@pytest.mark.parametrize(
    ("response", "message"),
    [
        (reply(500, {"error": {"code": "boom", "message": "exploded"}}), "HTTP 500: exploded"),
        (reply(500, {"detail": "db down"}), "HTTP 500: db down"),
        (httpx.Response(500, text="plain failure"), "HTTP 500: plain failure"),
        (httpx.Response(500), "HTTP 500: HTTP 500"),
    ],
)
def test_error_message_extraction_order(make_http, response: httpx.Response, message: str) -> None:
    http, _ = make_http(response)
    with pytest.raises(APIError) as caught:
        http.request("GET", "/x")
    assert str(caught.value) == message


# --- retry matrix -----------------------------------------------------------------------------


def test_429_is_retried_even_for_a_non_idempotent_post(make_http, sleeps) -> None:
    """A 429 is a refusal before any work, so even a POST is retried."""
    http, script = make_http(reply(429, {"detail": "slow down"}), ok({"evaluation_id": "e1"}, 201))
    assert http.request("POST", "/evaluations/", json={"name": "n"}) == {"evaluation_id": "e1"}
    assert len(script.requests) == 2
    assert len(sleeps) == 1


@pytest.mark.parametrize("code", [502, 503, 504])
def test_gateway_errors_are_retried_for_put(make_http, code: int) -> None:
    http, script = make_http(reply(code), ok({"ok": 1}))
    assert http.request("PUT", "/evaluations/e1", json={"status": "FAILED"}) == {"ok": 1}
    assert len(script.requests) == 2


@pytest.mark.parametrize("code", [502, 503, 504])
def test_gateway_errors_are_not_replayed_for_a_non_idempotent_post(make_http, sleeps, code: int) -> None:
    """A create POST is not replayed after a gateway error: the server may have created the run already."""
    http, script = make_http(reply(code), ok({"evaluation_id": "e2"}))
    with pytest.raises(RetryableAPIError) as caught:
        http.request("POST", "/evaluations/", json={"name": "n"})
    assert caught.value.status_code == code
    assert is_ambiguous(caught.value)
    assert len(script.requests) == 1
    assert sleeps == []


def test_post_that_opts_in_is_replayed_after_a_gateway_error(make_http) -> None:
    http, script = make_http(reply(502), ok({"data": {"id": "env1"}}))
    response = http.request("POST", "/environmentshub/resolve", json={"name": "g"}, idempotent=True)
    assert response == {"data": {"id": "env1"}}
    assert len(script.requests) == 2


def test_put_that_opts_out_is_not_replayed(make_http) -> None:
    http, script = make_http(reply(504), ok())
    with pytest.raises(RetryableAPIError):
        http.request("PUT", "/x", json={"a": 1}, idempotent=False)
    assert len(script.requests) == 1


def test_read_timeout_is_ambiguous(make_http) -> None:
    http, script = make_http(httpx.ReadTimeout("read timed out"), ok())
    with pytest.raises(APITimeoutError) as caught:
        http.request("POST", "/evaluations/e1/samples", json={"samples": [{"a": 1}]})
    assert is_ambiguous(caught.value)
    assert isinstance(caught.value.__cause__, httpx.ReadTimeout)
    assert len(script.requests) == 1


def test_read_timeout_is_retried_for_an_idempotent_call(make_http) -> None:
    http, script = make_http(httpx.ReadTimeout("read timed out"), ok({"v": 1}))
    assert http.request("GET", "/x") == {"v": 1}
    assert len(script.requests) == 2


@pytest.mark.parametrize(
    "failure",
    [httpx.ConnectError("refused"), httpx.ConnectTimeout("connect timed out"), httpx.PoolTimeout("pool")],
)
def test_unambiguous_transport_failures_are_replayed_for_a_post(make_http, failure: Exception) -> None:
    """A connect failure is replayed even for a POST: nothing reached the server."""
    http, script = make_http(failure, ok({"evaluation_id": "e1"}))
    assert http.request("POST", "/evaluations/", json={"name": "n"}) == {"evaluation_id": "e1"}
    assert len(script.requests) == 2


@pytest.mark.parametrize(
    "failure",
    [
        httpx.ReadError("reset"),
        httpx.WriteError("broken pipe"),
        httpx.WriteTimeout("write timed out"),
        httpx.RemoteProtocolError("server disconnected"),
        httpx.CloseError("close"),
        httpx.DecodingError("bad gzip"),
    ],
)
def test_ambiguous_transport_failures_are_not_replayed_for_a_post(make_http, failure: Exception) -> None:
    http, script = make_http(failure, ok())
    with pytest.raises(TransportError) as caught:
        http.request("POST", "/rft/external-runs", json={"base_model": "m"})
    assert is_ambiguous(caught.value)
    assert len(script.requests) == 1


def test_connect_error_is_a_transport_error_not_a_timeout(make_http) -> None:
    http, _ = make_http(httpx.ConnectError("refused"), max_attempts=1)
    with pytest.raises(TransportError) as caught:
        http.request("GET", "/x")
    assert not isinstance(caught.value, APITimeoutError)
    assert not is_ambiguous(caught.value)


def test_plain_500_is_never_retried(make_http, sleeps) -> None:
    http, script = make_http(reply(500, {"detail": "boom"}), ok())
    with pytest.raises(APIError) as caught:
        http.request("GET", "/x")
    assert not isinstance(caught.value, RetryableAPIError)
    assert len(script.requests) == 1
    assert sleeps == []


def test_at_most_five_attempts(make_http, sleeps) -> None:
    http, script = make_http(reply(503))
    with pytest.raises(RetryableAPIError):
        http.request("GET", "/x")
    assert len(script.requests) == 5
    assert len(sleeps) == 4


def test_redirect_loop_is_permanent_not_transient(make_http, sleeps) -> None:
    """Too many redirects is not worth retrying (0.1.4 retried it five times)."""
    http, _ = make_http(httpx.Response(302, headers={"Location": "https://api.test/api/v1/x"}))
    with pytest.raises(APIError, match="too many redirects") as caught:
        http.request("GET", "/x")
    assert not isinstance(caught.value, TransportError)
    assert sleeps == []


# --- backoff ----------------------------------------------------------------------------------


def test_backoff_doubles_with_jitter(make_http, sleeps) -> None:
    http, _ = make_http(reply(503), random=lambda: 0.0)
    with pytest.raises(RetryableAPIError):
        http.request("GET", "/x")
    assert sleeps == [0.5, 1.0, 2.0, 4.0]


def test_backoff_jitter_upper_end(make_http, sleeps) -> None:
    http, _ = make_http(reply(503), random=lambda: 0.75)
    with pytest.raises(RetryableAPIError):
        http.request("GET", "/x")
    assert sleeps == [1.25, 2.5, 5.0, 10.0]


@pytest.mark.parametrize(
    ("header", "expected"),
    [("2.5", 2.5), ("0", 0.0), ("-3", 0.0), ("NaN", 0.0), ("600", 60.0), ("inf", 60.0)],
)
def test_retry_after_seconds_are_honoured_and_capped(make_http, sleeps, header: str, expected: float) -> None:
    http, _ = make_http(reply(429, headers={"Retry-After": header}), ok())
    http.request("POST", "/rft/metrics", json={"run_id": "r"})
    assert sleeps == [expected]


def test_retry_after_http_date_is_honoured_and_capped(make_http, sleeps) -> None:
    far = "Fri, 01 Jan 2100 00:00:00 GMT"
    past = "Thu, 01 Jan 1970 00:00:00 GMT"
    http, _ = make_http(
        reply(429, headers={"Retry-After": far}), reply(503, headers={"Retry-After": past}), ok({"done": 1})
    )
    assert http.request("GET", "/x") == {"done": 1}
    assert sleeps == [60.0, 0.0]


def test_unparseable_retry_after_falls_back_to_backoff(make_http, sleeps) -> None:
    http, _ = make_http(reply(429, headers={"Retry-After": "soon"}), ok())
    http.request("GET", "/x")
    assert sleeps == [1.0]  # 2^0 x (0.5 + 0.5)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("Wed, 21 Oct 2026 07:28:00 GMT", 30.0),
        ("Wed, 21 Oct 2026 07:28:00 -0000", 30.0),  # naive dates are read as UTC
        ("Wed, 21 Oct 2026 07:27:00 GMT", 0.0),
        ("not a date", None),
    ],
)
def test_retry_after_http_date_parsing(header: str, seconds: float | None) -> None:
    now = datetime(2026, 10, 21, 7, 27, 30, tzinfo=timezone.utc)
    response = httpx.Response(429, headers={"Retry-After": header})
    assert retry_after_seconds(response, now=now) == seconds


# --- counters, fork, lifecycle, instrumentation -----------------------------------------------


def test_counters_count_attempts_and_body_bytes(make_http) -> None:
    http, _ = make_http(reply(429), ok(), ok())
    http.request("POST", "/a", json={"k": "v"})  # 9 bytes, sent twice
    http.request("GET", "/b")
    assert http.requests == 3
    assert http.bytes_sent == 18


def test_reset_after_fork_drops_the_client_without_closing_it(make_http) -> None:
    """A forked child drops the client unclosed: closing would send close_notify down the parent's socket."""
    http, script = make_http(ok({"n": 1}))
    http.request("GET", "/before")
    http.reset_after_fork()
    assert not script.closed
    assert http.request("GET", "/after") == {"n": 1}
    http.close()
    assert script.closed


def test_close_then_use_builds_a_fresh_client(make_http) -> None:
    http, script = make_http(ok())
    http.request("GET", "/a")
    http.close()
    http.request("GET", "/b")
    assert script.paths == ["GET /api/v1/a", "GET /api/v1/b"]


def _suppression_seen(script_key: str) -> tuple[Script, list[object]]:
    seen: list[object] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(otel_context.get_value(script_key))
        return ok()

    return Script(answer), seen


@pytest.mark.parametrize("with_instrumentation_package", [True, False])
def test_requests_run_with_instrumentation_suppressed(monkeypatch, with_instrumentation_package: bool) -> None:
    """Our uploads must not become spans that are uploaded again."""
    if not with_instrumentation_package:
        monkeypatch.setattr(http_module, "_suppress_instrumentation", None)
    script, seen = _suppression_seen(otel_context._SUPPRESS_INSTRUMENTATION_KEY)
    http = PlatformHTTP(api_key="k", base_url="https://api.test", transport=script)
    http.request("GET", "/x")
    assert seen == [True]
    assert otel_context.get_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY) is None


# --- the attempt listener ---------------------------------------------------------------------


def _listened(http: PlatformHTTP, method: str) -> list[bool]:
    heard: list[bool] = []
    token = http_module.ATTEMPT_LISTENER.set(heard.append)
    try:
        with pytest.raises(RetryableAPIError):
            http.request(method, "/x", json={"a": 1})
    finally:
        http_module.ATTEMPT_LISTENER.reset(token)
    return heard


def test_the_attempt_listener_hears_that_a_refused_call_reached_no_server(make_http) -> None:
    http, _ = make_http(reply(429), reply(429), max_attempts=2)
    assert _listened(http, "PUT") == [True, False, True, False]


def test_after_an_ambiguous_attempt_the_listener_never_hears_that_the_call_reached_no_server(make_http) -> None:
    """The first attempt may have been acted on (502): a later refusal does not make the call certainly unapplied."""
    http, _ = make_http(reply(502), reply(429), reply(429), max_attempts=3)
    assert _listened(http, "PUT") == [True, True, True]
