"""Prime Traces upload and reads on the platform's origin."""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any

import httpx
import pytest

from prime_otel.testing import LocalPlatform

from ._helpers import TIMEOUT, create_eval, digest_key, fixture_json, jsonl, upload


def _episodes(run_id: str) -> list[dict[str, Any]]:
    """The eval fixture episodes, stamped for ``run_id`` with fresh ids so tests never share records."""
    records = []
    for n in (1, 2, 3):
        record = copy.deepcopy(fixture_json(f"eval/episode-{n}.stamped.json"))
        record["id"] = uuid.uuid4().hex
        record["run"]["id"] = run_id
        for trace in record["traces"]:
            trace["id"] = uuid.uuid4().hex
            trace["run"]["id"] = run_id
        records.append(record)
    return records


def _trace(run_id: str | None, **extra: Any) -> dict[str, Any]:
    trace: dict[str, Any] = {"version": 1, "id": uuid.uuid4().hex, **extra}
    if run_id is not None:
        trace["run"] = {"type": "eval", "id": run_id}
    return trace


def test_an_episode_upload_is_committed_and_kept_as_uploaded(api: httpx.Client, server: LocalPlatform) -> None:
    run_id = create_eval(api)
    records = _episodes(run_id)
    body = jsonl(records)
    response = upload(api, body, team="team_abc")
    assert response.status_code == 200
    assert response.json() == {"upload_id": digest_key(body).removeprefix("sha256:"), "status": "committed"}
    landed = server.inspect.episodes(run_id)
    assert landed == {"total": 3, "items": records}
    snapshot = server.inspect.run(run_id)
    assert (snapshot["num_episodes"], snapshot["num_traces"]) == (3, 4)
    summary = api.get(f"/api/v1/runs/{run_id}").json()
    assert (summary["episode_count"], summary["trace_count"]) == (3, 4)
    assert summary["avg_reward"] == pytest.approx(1.0)


def test_member_traces_are_stored_as_traces_linked_to_their_episode(api: httpx.Client) -> None:
    run_id = create_eval(api)
    episode = _episodes(run_id)[2]
    upload(api, jsonl([episode]))
    member_ids = [trace["id"] for trace in episode["traces"]]
    raw = api.get(f"/api/v1/episodes/{episode['id']}", params={"raw": "true"}).json()
    assert raw["traces"] == member_ids
    listed = api.get("/api/v1/traces", params={"run_id": run_id}).json()
    assert [item["id"] for item in listed["items"]] == member_ids
    assert {item["episode_id"] for item in listed["items"]} == {episode["id"]}
    assert {item["environment_id"] for item in listed["items"]} == {"agentic-judge+gsm8k"}
    document = api.get(f"/api/v1/traces/{member_ids[0]}", params={"raw": "true"}).json()
    assert document == episode["traces"][0]


def test_a_member_without_its_own_run_block_is_stored_with_an_empty_run_id(
    api: httpx.Client, server: LocalPlatform
) -> None:
    run_id = create_eval(api)
    stamped = _trace(run_id)
    orphan = _trace(None)
    episode = {"id": uuid.uuid4().hex, "run": {"type": "eval", "id": run_id}, "traces": [stamped, orphan]}
    assert upload(api, jsonl([episode])).status_code == 200
    assert api.get(f"/api/v1/traces/{orphan['id']}").json()["run_id"] == ""
    assert api.get(f"/api/v1/traces/{stamped['id']}").json()["run_id"] == run_id
    assert api.get(f"/api/v1/runs/{run_id}").json()["trace_count"] == 1
    assert server.inspect.run(run_id)["num_traces"] == 1
    assert server.inspect.episodes(run_id)["items"] == [episode]


def test_trace_lines_are_each_one_trace(api: httpx.Client, server: LocalPlatform) -> None:
    run_id = create_eval(api)
    traces = [_trace(run_id, rewards={"correct": {"score": 1.0, "weight": 0.5}}), _trace(run_id, rewards={"x": None})]
    assert upload(api, jsonl(traces), episodes=False, compress=False).status_code == 200
    assert server.inspect.episodes(run_id) == {"total": 2, "items": traces}
    summary = api.get(f"/api/v1/runs/{run_id}").json()
    assert (summary["trace_count"], summary["episode_count"], summary["avg_reward"]) == (2, 0, 0.5)


def test_a_replay_returns_the_same_receipt_and_stores_nothing_twice(api: httpx.Client, server: LocalPlatform) -> None:
    run_id = create_eval(api)
    body = jsonl(_episodes(run_id))
    first = upload(api, body)
    assert upload(api, body).json() == first.json()
    assert upload(api, body, compress=False).json() == first.json()
    assert server.inspect.run(run_id)["num_episodes"] == 3
    assert len(api.get("/api/v1/traces", params={"run_id": run_id}).json()["items"]) == 4


def test_the_same_bytes_under_the_other_line_format_are_a_409_conflict(api: httpx.Client) -> None:
    run_id = create_eval(api)
    body = jsonl([_trace(run_id)])
    assert upload(api, body, episodes=False).status_code == 200
    response = upload(api, body, episodes=True)
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "line_format_conflict"


@pytest.mark.parametrize(
    ("key", "code"),
    [
        ("sha256:" + "0" * 64, "digest_mismatch"),
        ("sha256:ABC", "invalid_idempotency_key"),
        ("md5:" + "0" * 32, "invalid_idempotency_key"),
    ],
)
def test_the_idempotency_key_must_be_the_digest_of_the_uncompressed_bytes(
    api: httpx.Client, key: str, code: str
) -> None:
    response = upload(api, jsonl([_trace("run-digest")]), episodes=False, key=key)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code


def test_a_missing_idempotency_key_is_invalid(api: httpx.Client) -> None:
    files = {"metadata": (None, b'{"schema_version": 1}', "application/json"), "traces": ("t.jsonl", b"{}\n")}
    response = api.post("/api/v1/traces", files=files)
    assert response.json()["error"]["code"] == "invalid_idempotency_key"


def _limited(api: httpx.Client, server: LocalPlatform, setting: str, value: int, records: list[Any]) -> str:
    server.inspect.settings(**{setting: value})
    response = upload(api, jsonl(records), episodes=False)
    assert response.status_code == 400
    return str(response.json()["error"]["code"])


def test_limits_answer_400_with_their_codes(api: httpx.Client, server: LocalPlatform) -> None:
    small = [_trace("r1"), _trace("r1"), _trace("r1")]
    assert _limited(api, server, "traces_max_upload_bytes", 100, small) == "upload_too_large"
    server.reset()
    assert _limited(api, server, "traces_max_line_bytes", 40, small) == "trace_too_large"
    server.reset()
    assert _limited(api, server, "traces_max_lines", 2, small) == "too_many_traces_in_upload"


def test_nothing_of_a_rejected_upload_is_stored(api: httpx.Client, server: LocalPlatform) -> None:
    run_id = create_eval(api)
    server.inspect.settings(traces_max_lines=1)
    assert upload(api, jsonl([_trace(run_id), _trace(run_id)]), episodes=False).status_code == 400
    assert server.inspect.run(run_id)["num_traces"] == 0


def test_blank_lines_are_skipped_and_do_not_count(api: httpx.Client, server: LocalPlatform) -> None:
    run_id = create_eval(api)
    server.inspect.settings(traces_max_lines=1)
    body = b"\n\n" + jsonl([_trace(run_id)]) + b"\n  \n"
    assert upload(api, body, episodes=False).status_code == 200
    assert server.inspect.run(run_id)["num_traces"] == 1


def test_duplicate_ids_within_one_upload_are_refused(api: httpx.Client) -> None:
    trace = _trace("r-dup")
    response = upload(api, jsonl([trace, trace]), episodes=False)
    assert response.json()["error"]["code"] == "duplicate_trace_id"
    episode = {"id": uuid.uuid4().hex, "traces": [_trace("r-dup")]}
    again = {**episode, "traces": [_trace("r-dup")]}
    assert upload(api, jsonl([episode, again])).json()["error"]["code"] == "duplicate_episode_id"
    shared = _trace("r-dup")
    pair = [{"id": uuid.uuid4().hex, "traces": [shared]}, {"id": uuid.uuid4().hex, "traces": [shared]}]
    assert upload(api, jsonl(pair)).json()["error"]["code"] == "duplicate_trace_id"


@pytest.mark.parametrize(
    ("body", "episodes", "code"),
    [
        (b'{"id": "e1"}\n', True, "line_format_mismatch"),
        (b'{"id": "e1", "traces": []}\n', False, "line_format_mismatch"),
        (b"not json\n", False, "invalid_trace"),
        (b'["a list"]\n', False, "invalid_trace"),
        (b'{"no_id": 1}\n', False, "invalid_trace"),
        (b'{"id": "t", "reward": NaN}\n', False, "invalid_trace"),
        (b'{"id": "t", "reward": 1e999}\n', False, "invalid_trace"),
        (b'{"id": "\xff"}\n', False, "malformed_encoding"),
        (b'{"id": "e", "traces": [1]}\n', True, "invalid_trace"),
        (json.dumps({"id": "e" * 300, "traces": []}).encode() + b"\n", True, "episode_id_too_long"),
        (json.dumps({"id": "t", "env": {"id": "x" * 300}}).encode() + b"\n", False, "environment_id_too_long"),
    ],
)
def test_invalid_lines_are_400_with_their_codes(api: httpx.Client, body: bytes, episodes: bool, code: str) -> None:
    response = upload(api, body, episodes=episodes)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code


def test_too_many_traces_in_one_episode(api: httpx.Client, server: LocalPlatform) -> None:
    server.inspect.settings(traces_max_per_episode=1)
    episode = {"id": uuid.uuid4().hex, "traces": [_trace("r"), _trace("r")]}
    assert upload(api, jsonl([episode])).json()["error"]["code"] == "too_many_traces_in_episode"


@pytest.mark.parametrize(
    ("files", "headers", "code"),
    [
        (None, {"Content-Type": "application/json"}, "malformed_encoding"),
        ({"traces": ("t.jsonl", b"{}\n")}, {}, "invalid_metadata"),
        ({"metadata": (None, b'{"schema_version": 1}')}, {}, "invalid_trace"),
        ({"metadata": (None, b'{"schema_version": 2}'), "traces": ("t.jsonl", b"")}, {}, "unsupported_schema_version"),
        ({"metadata": (None, b"[1]"), "traces": ("t.jsonl", b"")}, {}, "invalid_metadata"),
        (
            {"metadata": (None, b"{}"), "traces": ("t.jsonl", b"", "x", {"Content-Encoding": "br"})},
            {},
            "malformed_encoding",
        ),
        (
            {"metadata": (None, b"{}"), "traces": ("t.jsonl", b"junk", "x", {"Content-Encoding": "gzip"})},
            {},
            "malformed_encoding",
        ),
    ],
)
def test_malformed_requests_are_400_never_500(
    api: httpx.Client, files: dict[str, Any] | None, headers: dict[str, str], code: str
) -> None:
    sent = {"Idempotency-Key": digest_key(b""), **headers}
    response = (
        api.post("/api/v1/traces", files=files, headers=sent)
        if files
        else api.post("/api/v1/traces", content=b"{}", headers=sent)
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code


def test_uploads_are_refused_with_service_not_enabled_when_traces_are_off(
    api: httpx.Client, server: LocalPlatform
) -> None:
    server.inspect.settings(traces="disabled")
    response = upload(api, jsonl([_trace("r-off")]), episodes=False)
    assert response.status_code == 403
    assert response.json() == {
        "error": {"code": "service_not_enabled", "message": "Prime Traces is not enabled for this account"}
    }


def test_a_hosted_run_token_may_upload_but_not_read(server: LocalPlatform) -> None:
    hosted = server.inspect.hosted_run("eval")
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {hosted['token']}"}, timeout=TIMEOUT
    ) as client:
        assert upload(client, jsonl([_trace(hosted["id"])]), episodes=False).status_code == 200
        refused = client.get("/api/v1/traces", params={"run_id": hosted["id"]})
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "forbidden"
    assert server.inspect.run(hosted["id"])["num_traces"] == 1


def test_lists_page_with_a_cursor(api: httpx.Client) -> None:
    run_id = create_eval(api)
    traces = [_trace(run_id) for _ in range(5)]
    upload(api, jsonl(traces), episodes=False)
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        params = {"run_id": run_id, "limit": 2, **({"cursor": cursor} if cursor else {})}
        page = api.get("/api/v1/traces", params=params).json()
        seen += [item["id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [trace["id"] for trace in traces]
    bad = api.get("/api/v1/traces", params={"cursor": "not-a-cursor"})
    assert (bad.status_code, bad.json()["error"]["code"]) == (400, "invalid_cursor")
    assert api.get("/api/v1/traces", params={"limit": 0}).json()["error"]["code"] == "invalid_filter"


def test_episode_lists_and_unknown_ids(api: httpx.Client) -> None:
    run_id = create_eval(api)
    records = _episodes(run_id)
    upload(api, jsonl(records))
    listed = api.get("/api/v1/episodes", params={"run_id": run_id}).json()
    assert [item["id"] for item in listed["items"]] == [record["id"] for record in records]
    assert api.get(f"/api/v1/episodes/{records[0]['id']}").json()["trace_count"] == 1
    for path, code in [
        ("/api/v1/traces/missing", "trace_not_found"),
        ("/api/v1/episodes/missing", "episode_not_found"),
        ("/api/v1/runs/missing", "run_not_found"),
    ]:
        response = api.get(path)
        assert (response.status_code, response.json()["error"]["code"]) == (404, code)
