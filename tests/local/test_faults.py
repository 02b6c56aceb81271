"""Fault injection: each action, counting down, ordering, and the commit-then-fail variants."""

from __future__ import annotations

import httpx
import pytest

from prime_otel.testing import LocalPlatform

from ._helpers import TIMEOUT, create_eval, create_train, jsonl, upload, wait_until

CREATE = "/api/v1/evaluations/"
BODY = {"name": "faulted", "environments": [{"id": "e"}]}


def _count(server: LocalPlatform) -> int:
    return len(server.inspect.runs())


def test_fail_before_answers_the_status_and_does_nothing(api: httpx.Client, server: LocalPlatform) -> None:
    server.inspect.add_fault(method="POST", path=CREATE, action="fail_before", status=503, retry_after=2)
    before = _count(server)
    response = api.post(CREATE, json=BODY)
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "2"
    assert "detail" in response.json()
    assert _count(server) == before
    assert api.post(CREATE, json=BODY).status_code == 201


def test_fail_after_does_the_work_then_answers_502(api: httpx.Client, server: LocalPlatform) -> None:
    server.inspect.add_fault(method="POST", path=CREATE, action="fail_after")
    before = _count(server)
    response = api.post(CREATE, json=BODY)
    assert response.status_code == 502
    assert _count(server) == before + 1
    recorded = server.inspect.requests(limit=50)
    faulted = [r for r in recorded if r["path"] == CREATE and r.get("fault")][-1]
    assert faulted["status"] == 502
    assert faulted["fault"] == {"action": "fail_after", "handled_status": 201}


def test_fail_after_can_answer_504(api: httpx.Client, server: LocalPlatform) -> None:
    evaluation_id = create_eval(api)
    path = f"/api/v1/evaluations/{evaluation_id}/samples"
    server.inspect.add_fault(path="/api/v1/evaluations/*/samples", action="fail_after", status=504)
    assert api.post(path, json={"samples": [{"a": 1}]}).status_code == 504
    assert server.inspect.samples(evaluation_id)["total"] == 1


def test_reset_after_does_the_work_then_drops_the_connection(api: httpx.Client, server: LocalPlatform) -> None:
    server.inspect.add_fault(method="POST", path=CREATE, action="reset_after")
    before = _count(server)
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        api.post(CREATE, json=BODY)
    assert _count(server) == before + 1
    assert api.post(CREATE, json=BODY).status_code == 201
    dropped = [r for r in server.inspect.requests(limit=50) if r.get("fault", {}).get("action") == "reset_after"]
    assert dropped[-1]["status"] is None
    assert dropped[-1]["fault"]["handled_status"] == 201


def test_hold_after_does_the_work_records_it_then_holds_the_answer(api: httpx.Client, server: LocalPlatform) -> None:
    """The request is applied and in the request log while its answer is still held back, then answered."""
    evaluation_id = create_eval(api)
    path = f"/api/v1/evaluations/{evaluation_id}/samples"
    server.inspect.add_fault(path="/api/v1/evaluations/*/samples", action="hold_after", delay_s=1.0)
    with pytest.raises(httpx.ReadTimeout):
        api.post(path, json={"samples": [{"a": 1}]}, timeout=httpx.Timeout(5, read=0.2))
    held = [r for r in server.inspect.requests(limit=50) if r.get("fault", {}).get("action") == "hold_after"]
    assert held[-1]["fault"]["handled_status"] == 200
    assert held[-1]["status"] is None  # recorded before any answer left
    assert server.inspect.samples(evaluation_id)["total"] == 1
    server.inspect.add_fault(path="/api/v1/evaluations/*/samples", action="hold_after", delay_s=0.3)
    answered = api.post(path, json={"samples": [{"a": 2}]}, timeout=TIMEOUT)
    assert answered.status_code == 200 and answered.json()["samples_pushed"] == 1
    assert server.inspect.samples(evaluation_id)["total"] == 2


def test_delay_holds_the_request_then_proceeds(server: LocalPlatform) -> None:
    server.inspect.add_fault(method="POST", path=CREATE, action="delay", delay_s=1.0)
    before = _count(server)
    headers = {"Authorization": f"Bearer {server.api_key}"}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{server.url}{CREATE}", json=BODY, headers=headers, timeout=httpx.Timeout(5, read=0.2))
    assert wait_until(lambda: _count(server) == before + 1)


def test_rate_limit_answers_429_with_retry_after_in_the_service_shape(api: httpx.Client, server: LocalPlatform) -> None:
    server.inspect.add_fault(path="/api/v1/traces", action="rate_limit", retry_after=7)
    response = upload(api, jsonl([{"id": "t-rate"}]), episodes=False)
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "7"
    assert response.json()["error"]["code"] == "rate_limited"
    assert upload(api, jsonl([{"id": "t-rate"}]), episodes=False).status_code == 200


def test_times_counts_down_and_null_means_unlimited(api: httpx.Client, server: LocalPlatform) -> None:
    run_id = create_train(api)
    server.inspect.add_fault(path="/api/v1/rft/metrics", action="fail_before", status=500, times=2)
    body = {"run_id": run_id, "metrics": {"step": 1}}
    assert [api.post("/api/v1/rft/metrics", json=body).status_code for _ in range(3)] == [500, 500, 200]
    assert server.inspect.faults()[0]["remaining"] == 0
    server.inspect.clear_faults()
    server.inspect.add_fault(path="/api/v1/rft/metrics", action="fail_before", status=503, times=None)
    assert {api.post("/api/v1/rft/metrics", json=body).status_code for _ in range(4)} == {503}
    assert server.inspect.faults()[0]["remaining"] is None


def test_rules_match_in_order_and_by_method(api: httpx.Client, server: LocalPlatform) -> None:
    evaluation_id = create_eval(api)
    server.inspect.add_fault(method="GET", path="/api/v1/evaluations/*", action="fail_before", status=404)
    server.inspect.add_fault(path="/api/v1/evaluations/*", action="fail_before", status=409)
    server.inspect.add_fault(path="/api/v1/evaluations/*", action="fail_before", status=401)
    assert api.put(f"/api/v1/evaluations/{evaluation_id}", json={}).status_code == 409
    assert api.get(f"/api/v1/evaluations/{evaluation_id}").status_code == 404
    assert api.get(f"/api/v1/evaluations/{evaluation_id}").status_code == 401
    assert api.get(f"/api/v1/evaluations/{evaluation_id}").status_code == 200


def test_the_rules_are_listed_and_cleared(server: LocalPlatform) -> None:
    rules = server.inspect.add_fault(path="/api/v1/traces", action="fail_before", code="ingest_unavailable")
    assert rules[0]["action"] == "fail_before"
    assert (rules[0]["status"], rules[0]["remaining"]) == (503, 1)
    response = httpx.post(
        f"{server.url}/_local/faults",
        json={"rules": [{"action": "delay", "delay_s": 0.1}, {"action": "rate_limit", "times": 3}]},
        headers={"Authorization": f"Bearer {server.api_key}"},
        timeout=TIMEOUT,
    )
    assert [rule["action"] for rule in response.json()] == ["fail_before", "delay", "rate_limit"]
    server.inspect.clear_faults()
    assert server.inspect.faults() == []


def test_an_invalid_rule_is_422(server: LocalPlatform) -> None:
    with pytest.raises(httpx.HTTPStatusError) as refused:
        server.inspect.add_fault(action="explode")
    assert refused.value.response.status_code == 422


def test_faults_never_touch_the_local_api(api: httpx.Client, server: LocalPlatform) -> None:
    """A fault on every path fails the platform API, while the inspection API still answers in full."""
    evaluation_id = create_eval(api)
    server.inspect.add_fault(path="*", action="fail_before", times=None)
    assert api.post(CREATE, json=BODY).status_code == 503
    assert evaluation_id in [run["id"] for run in server.inspect.runs()]
    assert server.inspect.run(evaluation_id)["id"] == evaluation_id
    server.inspect.clear_faults()
