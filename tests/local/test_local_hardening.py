"""The local platform takes hostile input like the real one would: an integer past 64 bits or a lone surrogate is
a 4xx (and still recorded), a forged or unsigned object PUT is refused before its body is read, a hosted run's
token uploads traces only for its own run, and the database that holds run tokens is the owner's alone (0600)."""

from __future__ import annotations

import json
import socket
import stat
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from prime_otel.testing import LocalPlatform, start_local_platform

from ._helpers import create_eval, create_train, jsonl, upload

HUGE = str(2**63)


def _trace(run_id: str) -> dict[str, object]:
    return {"version": 1, "id": uuid.uuid4().hex, "run": {"type": "train", "id": run_id}}


def test_integers_past_64_bits_are_refused_with_4xx(api: httpx.Client) -> None:
    run_id = create_eval(api)
    train_id = create_train(api)
    answers = {
        "offset": api.get(f"/_local/runs/{run_id}/samples", params={"offset": HUGE}),
        "episodes offset": api.get(f"/_local/runs/{run_id}/episodes", params={"offset": "9" * 40}),
        "step": api.get(f"/_local/runs/{train_id}/steps/{HUGE}/rows"),
        "presign step": api.post("/api/v1/rft/samples/presign", json={"run_id": train_id, "step": 10**30}),
        "cursor": api.get("/api/v1/traces", params={"cursor": "9" * 400}),
        "page": api.get(f"/api/v1/evaluations/{run_id}/samples", params={"page": HUGE}),
        "expires": api.put(
            f"/_objects/rft-samples/{train_id}/x.parquet", params={"expires": "9" * 5000, "signature": "a"}
        ),
    }
    assert {name: answer.status_code // 100 for name, answer in answers.items()} == dict.fromkeys(answers, 4)


def test_a_lone_surrogate_in_a_body_is_a_400_and_the_request_is_still_recorded(
    api: httpx.Client, server: LocalPlatform
) -> None:
    run_id = create_eval(api)
    body = json.dumps({"samples": [{"example_id": 1, "reward": 1.0, "answer": "\ud800"}]})  # ASCII-escaped
    answer = api.post(
        f"/api/v1/evaluations/{run_id}/samples", content=body, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 400
    recorded = api.get("/_local/requests", params={"run_id": run_id}).json()
    assert recorded[-1]["status"] == 400 and recorded[-1]["method"] == "POST"
    assert api.get(f"/_local/runs/{run_id}/samples").json()["total"] == 0


def _put_without_body(url: str, declared: int) -> bytes:
    """A PUT that announces ``declared`` body bytes and sends none: only an answer given before reading the
    body comes back."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=10) as connection:
        request = (
            f"PUT {parts.path}?{parts.query} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            f"Content-Type: application/parquet\r\nContent-Length: {declared}\r\n\r\n"
        )
        connection.sendall(request.encode())
        return connection.recv(4096)


def test_a_forged_or_unsigned_object_put_is_refused_before_its_body_is_read(
    api: httpx.Client, server: LocalPlatform
) -> None:
    train_id = create_train(api)
    presigned = api.post("/api/v1/rft/samples/presign", json={"run_id": train_id, "step": 1}).json()
    url = presigned.get("url") or presigned["data"]["presignedUrl"]
    forged = url.rsplit("signature=", 1)[0] + "signature=" + "0" * 64
    unsigned = url.split("?", 1)[0] + "?expires=1"
    for refused in (forged, unsigned):
        answer = _put_without_body(refused, declared=1024**3)  # socket timeout if the server waited for the body
        assert answer.startswith(b"HTTP/1.1 403"), answer[:200]
    # The genuine URL still stores what is sent to it.
    assert httpx.put(url, content=b"PAR1", headers={"Content-Type": "application/parquet"}).status_code == 200


def test_a_hosted_runs_token_uploads_traces_only_for_its_own_run(
    anonymous: httpx.Client, server: LocalPlatform
) -> None:
    own = server.inspect.hosted_run("train")
    other = server.inspect.hosted_run("train")
    headers = {"Authorization": f"Bearer {own['token']}"}
    mine = upload(anonymous, jsonl([_trace(own["id"])]), episodes=False, headers=headers)
    assert mine.status_code == 200, mine.text
    theirs = upload(anonymous, jsonl([_trace(other["id"])]), episodes=False, headers=headers)
    assert theirs.status_code == 403 and "its own run" in theirs.json()["error"]["message"]
    mixed = upload(anonymous, jsonl([_trace(own["id"]), _trace(other["id"])]), episodes=False, headers=headers)
    assert mixed.status_code == 403
    assert server.inspect.episodes(other["id"])["total"] == 0
    assert server.inspect.episodes(own["id"])["total"] == 1


def test_the_database_and_its_wal_are_readable_by_the_owner_only(tmp_path: Path) -> None:
    folder = tmp_path / "platform"
    folder.mkdir()
    database = folder / "platform.sqlite3"
    database.touch(mode=0o644)
    database.chmod(0o644)  # left readable by an earlier release
    with start_local_platform(folder) as platform, httpx.Client(base_url=platform.url, timeout=30) as client:
        client.headers["Authorization"] = f"Bearer {platform.api_key}"
        create_eval(client)
        companions = [folder / "platform.sqlite3", folder / "platform.sqlite3-wal", folder / "platform.sqlite3-shm"]
        modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in companions if path.exists()}
    assert "platform.sqlite3-wal" in modes
    assert modes == dict.fromkeys(modes, 0o600)
