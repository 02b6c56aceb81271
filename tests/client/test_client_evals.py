"""EvaluationsAPI: hub resolution, create body, update, status, samples, finalize, and what may be replayed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from client_scripts import ok, reply

from prime_otel._types import EnvironmentRef, RunStatus
from prime_otel.client import EvaluationsAPI, build_create_body
from prime_otel.errors import APIError, EnvironmentResolutionError, NotFoundError, RetryableAPIError, TransportError

WIRE = Path(__file__).parent.parent / "fixtures" / "wire"


def wire_request(name: str, method: str, path_suffix: str) -> dict[str, Any]:
    entries = json.loads((WIRE / name).read_text())
    return next(e for e in entries if e["method"] == method and e["url"].endswith(path_suffix))


def compact(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


@pytest.fixture
def make_api(make_http):
    def build(*outcomes: Any, **options: Any) -> tuple[EvaluationsAPI, Any]:
        http, script = make_http(*outcomes, **options)
        return EvaluationsAPI(http), script

    return build


# --- environment resolution -------------------------------------------------------------------


def test_ref_with_id_makes_no_request(make_api) -> None:
    api, script = make_api(ok())
    refs = [EnvironmentRef(id="env_1"), EnvironmentRef(id="env_2", version_id="v7")]
    assert api.resolve_environments(refs, "team_abc") == [{"id": "env_1"}, {"id": "env_2", "version_id": "v7"}]
    assert script.requests == []


def test_name_resolves_through_get_or_create_like_the_released_sdk(make_api) -> None:
    """A bare environment name resolves through get-or-create; the request is byte-identical to 0.1.4's."""
    expected = wire_request("eval-traces.json", "POST", "/environmentshub/resolve")
    api, script = make_api(ok(expected["response"]["body"]))
    assert api.resolve_environments([EnvironmentRef(name="gsm8k")], "team_abc") == [{"id": "env_gsm8k_01"}]
    assert script.paths == ["POST /api/v1/environmentshub/resolve"]
    assert script.requests[0].content == compact(expected["body"])


@pytest.mark.parametrize(("team", "body"), [(None, {"name": "gsm8k"}), ("", {"name": "gsm8k", "team_id": ""})])
def test_name_resolution_team_id_omitted_only_when_none(make_api, team: str | None, body: dict[str, str]) -> None:
    api, script = make_api(ok({"data": {"id": "e"}}))
    api.resolve_environments([EnvironmentRef(name="gsm8k")], team)
    assert script.body() == body


@pytest.mark.parametrize("response", [{"data": {"id": "env_9"}}, {"id": "env_9"}, {"data": None, "id": "env_9"}])
def test_slug_resolves_through_latest_version_lookup(make_api, response: dict[str, Any]) -> None:
    api, script = make_api(ok(response))
    assert api.resolve_environments([EnvironmentRef(slug="primeintellect/gsm8k")], None) == [{"id": "env_9"}]
    assert script.paths == ["GET /api/v1/environmentshub/primeintellect/gsm8k/@latest"]


def test_slug_name_may_contain_slashes(make_api) -> None:
    api, script = make_api(ok({"data": {"id": "e"}}))
    api.resolve_environments([EnvironmentRef(slug="owner/group/env")], None)
    assert script.paths == ["GET /api/v1/environmentshub/owner/group/env/@latest"]


def test_pinned_version_survives_hub_resolution(make_api) -> None:
    """A pinned ``version_id`` reaches the create body, also after hub resolution."""
    api, _ = make_api(ok({"data": {"id": "env_1"}}))
    refs = [EnvironmentRef(name="gsm8k", version_id="ver_3"), EnvironmentRef(slug="o/n", version_id="ver_4")]
    assert api.resolve_environments(refs, None) == [
        {"id": "env_1", "version_id": "ver_3"},
        {"id": "env_1", "version_id": "ver_4"},
    ]


def test_hub_error_raises_resolution_error_chaining_the_cause(make_api) -> None:
    """A hub failure raises EnvironmentResolutionError, chaining the cause."""
    api, _ = make_api(reply(404, {"detail": "Environment not found"}))
    with pytest.raises(EnvironmentResolutionError, match="o/missing") as caught:
        api.resolve_environments([EnvironmentRef(slug="o/missing")], None)
    assert isinstance(caught.value.__cause__, NotFoundError)


def test_hub_transport_failure_raises_resolution_error(make_api) -> None:
    api, script = make_api(httpx.ConnectError("refused"))
    with pytest.raises(EnvironmentResolutionError) as caught:
        api.resolve_environments([EnvironmentRef(name="gsm8k")], None)
    assert isinstance(caught.value.__cause__, TransportError)
    assert len(script.requests) == 5


@pytest.mark.parametrize("response", [{}, {"data": {}}, {"data": {"id": ""}}, {"data": "env"}])
def test_hub_answer_without_id_raises_resolution_error(make_api, response: dict[str, Any]) -> None:
    api, _ = make_api(ok(response))
    with pytest.raises(EnvironmentResolutionError, match="no id"):
        api.resolve_environments([EnvironmentRef(name="gsm8k")], None)


def test_name_resolution_is_replayed_after_an_ambiguous_failure(make_api) -> None:
    """Name resolution is replayed after an ambiguous failure: get-or-create answers the same id twice."""
    api, script = make_api(reply(502), ok({"data": {"id": "env_1"}}))
    assert api.resolve_environments([EnvironmentRef(name="gsm8k")], None) == [{"id": "env_1"}]
    assert len(script.requests) == 2


# --- create -----------------------------------------------------------------------------------


def test_create_body_matches_the_released_sdk_byte_for_byte(make_api) -> None:
    """The create body's keys come in the platform's documented order, byte for byte as 0.1.4 sent them."""
    expected = wire_request("eval-traces.json", "POST", "/evaluations/")
    sent = expected["body"]
    body = build_create_body(
        name=sent["name"],
        environments=sent["environments"],
        tags=[],
        model=sent["model_name"],
        dataset=sent["dataset"],
        framework=sent["framework"],
        description=None,
        metadata=sent["metadata"],
        team_id="team_abc",
    )
    api, script = make_api(ok(expected["response"]["body"], 201))
    created = api.create(body)
    assert created["evaluation_id"] == "eval-3f9c2a71d4"
    assert script.paths == ["POST /api/v1/evaluations/"]
    assert script.requests[0].content == compact(sent)


def test_create_body_key_order_with_every_key() -> None:
    body = build_create_body("n", [{"id": "e", "version_id": "v"}], ["t"], "m", "d", "f", "desc", {"a": 1}, "team")
    assert list(body) == [
        "name",
        "environments",
        "tags",
        "model_name",
        "dataset",
        "framework",
        "description",
        "metadata",
        "team_id",
    ]


def test_create_body_omits_none_but_keeps_empty_team_and_tags() -> None:
    body = build_create_body("n", [{"id": "e"}], [], team_id="")
    assert body == {"name": "n", "environments": [{"id": "e"}], "tags": [], "team_id": ""}


def test_create_without_evaluation_id_is_an_error(make_api) -> None:
    api, _ = make_api(ok({"name": "n"}, 201))
    with pytest.raises(APIError, match="evaluation_id"):
        api.create({"name": "n"})


def test_create_is_not_replayed_after_an_ambiguous_failure(make_api) -> None:
    """Create is not replayed after an ambiguous failure: a replay could leave an orphaned second evaluation."""
    api, script = make_api(reply(504), ok({"evaluation_id": "e2"}, 201))
    with pytest.raises(RetryableAPIError):
        api.create({"name": "n"})
    assert len(script.requests) == 1


# --- update, status, samples, finalize ---------------------------------------------------------


def test_update_sends_the_whole_documents(make_api) -> None:
    expected = wire_request("eval-traces.json", "PUT", "/evaluations/eval-3f9c2a71d4")
    api, script = make_api(ok(expected["response"]["body"]))
    api.update("eval-3f9c2a71d4", metadata=expected["body"]["metadata"], metrics=expected["body"]["metrics"])
    assert script.paths == ["PUT /api/v1/evaluations/eval-3f9c2a71d4"]
    assert script.requests[0].content == compact(expected["body"])


@pytest.mark.parametrize(("metadata", "metrics"), [(None, None), ({}, {}), (None, {})])
def test_update_with_nothing_to_send_makes_no_request(make_api, metadata: Any, metrics: Any) -> None:
    api, script = make_api(ok())
    api.update("e1", metadata=metadata, metrics=metrics)
    assert script.requests == []


def test_update_with_only_metrics(make_api) -> None:
    api, script = make_api(ok())
    api.update("e1", metadata={}, metrics={"avg_reward": 0.5})
    assert script.body() == {"metrics": {"avg_reward": 0.5}}


@pytest.mark.parametrize(
    ("status", "error", "body"),
    [
        (RunStatus.FAILED, "ValueError: bad", {"status": "FAILED", "error_message": "ValueError: bad"}),
        (RunStatus.CANCELLED, "interrupted", {"status": "CANCELLED", "error_message": "interrupted"}),
        (RunStatus.CANCELLED, None, {"status": "CANCELLED"}),
        (RunStatus.CRASHED, "signal 15", {"status": "FAILED", "error_message": "crashed: signal 15"}),
        (RunStatus.CRASHED, None, {"status": "FAILED", "error_message": "crashed"}),
        ("FAILED", "", {"status": "FAILED"}),
    ],
)
def test_status_put_bodies(make_api, status: Any, error: str | None, body: dict[str, str]) -> None:
    """FAILED and CANCELLED are sent as such, a crash as FAILED with "crashed"; a message only when non-empty."""
    api, script = make_api(ok({"evaluation_id": "e1", "status": "FAILED"}))
    assert api.set_status("e1", status, error) is True
    assert script.paths == ["PUT /api/v1/evaluations/e1"]
    assert script.body() == body


def test_status_message_is_capped_at_4096_characters(make_api) -> None:
    api, script = make_api(ok())
    api.set_status("e1", RunStatus.FAILED, "x" * 10_000)
    assert script.body()["error_message"] == "x" * 4096


def test_status_409_means_already_closed(make_api) -> None:
    """A 409 from the status write means someone closed the evaluation already: not an error."""
    api, _ = make_api(reply(409, {"detail": "Evaluation is not running"}))
    assert api.set_status("e1", RunStatus.FAILED, "boom") is False


def test_status_404_propagates_so_the_caller_can_latch(make_api) -> None:
    """A 404 (an older deployment without the status field) propagates so the caller can fall back."""
    api, _ = make_api(reply(404, {"detail": "Not Found"}))
    with pytest.raises(NotFoundError):
        api.set_status("e1", RunStatus.FAILED, "boom")


def test_status_put_is_replayed_and_a_replayed_409_that_finds_this_status_is_success(make_api) -> None:
    """The first attempt took effect: the replay's 409 and the status read back say it was this call."""
    api, script = make_api(
        httpx.ReadTimeout("lost"), reply(409, {"detail": "already closed"}), ok({"status": "CANCELLED"})
    )
    assert api.set_status("e1", RunStatus.CANCELLED, "interrupted") is True
    assert script.paths == ["PUT /api/v1/evaluations/e1"] * 2 + ["GET /api/v1/evaluations/e1"]


def test_a_409_that_finds_another_status_means_someone_else_closed_the_run(make_api) -> None:
    api, _ = make_api(reply(409, {"detail": "already closed"}), ok({"status": "COMPLETED"}))
    assert api.set_status("e1", RunStatus.FAILED, "boom") is False


@pytest.mark.parametrize("status", [RunStatus.COMPLETED, RunStatus.RUNNING])
def test_status_put_refuses_non_failure_statuses(make_api, status: RunStatus) -> None:
    api, script = make_api(ok())
    with pytest.raises(ValueError):
        api.set_status("e1", status, None)
    assert script.requests == []


def test_append_samples_rows_with_upload_timeout(make_api) -> None:
    rows = [{"sample_id": 1, "reward": 1.0}, {"sample_id": 2, "reward": 0.0}]
    api, script = make_api(ok({"evaluation_id": "e1", "samples_pushed": 2, "status": "RUNNING"}))
    assert api.append_samples("e1", rows)["samples_pushed"] == 2
    request = script.requests[0]
    assert f"{request.method} {request.url.path}" == "POST /api/v1/evaluations/e1/samples"
    assert request.content == compact({"samples": rows})
    assert request.extensions["timeout"]["read"] == 300.0


def test_append_samples_pre_encoded_body_is_sent_verbatim(make_api) -> None:
    body = b'{"samples":[{"sample_id":1}]}'
    api, script = make_api(ok())
    api.append_samples("e1", body)
    assert script.requests[0].content == body
    assert script.requests[0].headers["content-type"] == "application/json"


def test_append_samples_is_not_replayed_after_an_ambiguous_failure(make_api) -> None:
    """Samples are append-only, so they are not replayed after an ambiguous failure: rows would duplicate."""
    api, script = make_api(httpx.ReadTimeout("lost"), ok())
    with pytest.raises(TransportError):
        api.append_samples("e1", [{"sample_id": 1}])
    assert len(script.requests) == 1


def test_finalize_sends_metrics_and_is_not_replayed(make_api) -> None:
    """Finalize posts the summary as metrics and is never replayed (it enqueues work)."""
    expected = wire_request("eval-traces.json", "POST", "/finalize")
    api, script = make_api(ok(expected["response"]["body"]))
    assert api.finalize("eval-3f9c2a71d4", expected["body"]["metrics"])["status"] == "PROCESSING"
    assert script.requests[0].content == compact(expected["body"])

    api, script = make_api(reply(502), ok())
    with pytest.raises(RetryableAPIError):
        api.finalize("e1", {"avg_reward": 1.0})
    assert len(script.requests) == 1


@pytest.mark.parametrize("metrics", [None, {}])
def test_finalize_with_no_metrics_sends_an_empty_object(make_api, metrics: Any) -> None:
    api, script = make_api(ok())
    api.finalize("e1", metrics)
    assert script.requests[0].content == b'{"metrics":{}}'


def test_ids_cannot_reroute_a_request(make_api) -> None:
    api, script = make_api(ok())
    api.update("a/../b?x=1", metrics={"m": 1})
    assert script.requests[0].url.raw_path == b"/api/v1/evaluations/a%2F..%2Fb%3Fx%3D1"
