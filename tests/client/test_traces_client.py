"""The Prime Traces client every upload goes through, against the local platform:
uploads are gzipped by ISA-L instead of prime-traces' zlib level 9, land exactly as sent, and replay safely."""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path
from typing import Any

import httpx
from prime_traces import LineFormat, TracesAPIClient

from prime_otel.client import traces_client
from prime_otel.client._traces import USE_ISAL, IsalGzipTracesAPIClient, gzip_hooks_fit
from prime_otel.testing import LocalPlatform

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _eval_run(platform: LocalPlatform) -> str:
    response = httpx.post(
        f"{platform.url}/api/v1/evaluations/",
        json={"name": "gzip", "environments": [{"id": "env_1"}], "tags": []},
        headers={"Authorization": f"Bearer {platform.api_key}"},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["evaluation_id"])


def _episodes(run_id: str, copies: int) -> list[dict[str, Any]]:
    records = []
    for n in range(copies):
        record = copy.deepcopy(json.loads((FIXTURES / f"eval/episode-{n % 3 + 1}.stamped.json").read_text()))
        record["id"] = uuid.uuid4().hex
        record["run"]["id"] = run_id
        for trace in record["traces"]:
            trace["id"], trace["run"]["id"] = uuid.uuid4().hex, run_id
        records.append(record)
    return records


def _lines(records: list[dict[str, Any]]) -> list[bytes]:
    return [json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in records]


def test_uploads_are_gzipped_with_isal_and_land_exactly_as_sent(local_platform: LocalPlatform) -> None:
    run_id = _eval_run(local_platform)
    records = _episodes(run_id, 30)
    lines = _lines(records)
    client = traces_client(api_key=local_platform.api_key, base_url=local_platform.traces_url, team_id=None)
    assert USE_ISAL and isinstance(client.client, IsalGzipTracesAPIClient)

    receipts = client.upload_lines(lines, line_format=LineFormat.EPISODE)

    assert [r.status for r in receipts] == ["committed"]
    assert local_platform.inspect.episodes(run_id) == {"total": 30, "items": records}
    (sent,) = [r for r in local_platform.inspect.requests(run_id=run_id) if r["path"].endswith("/traces")]
    assert int(sent["headers"]["content-length"]) < sum(map(len, lines)) / 3  # the body went compressed


def test_a_repeated_upload_is_replayed_not_stored_twice(local_platform: LocalPlatform) -> None:
    run_id = _eval_run(local_platform)
    lines = _lines(_episodes(run_id, 3))
    client = traces_client(api_key=local_platform.api_key, base_url=local_platform.traces_url, team_id="team_a")

    first = client.upload_lines(lines, line_format=LineFormat.EPISODE)
    again = client.upload_lines(lines, line_format=LineFormat.EPISODE)

    assert [r.upload_id for r in again] == [r.upload_id for r in first]
    assert local_platform.inspect.episodes(run_id)["total"] == 3


def test_a_prime_traces_client_without_the_overridden_hooks_keeps_its_own_gzip() -> None:
    class Reshaped(TracesAPIClient):
        def _multipart_files(self, body: bytes, *, metadata: dict[str, Any]) -> dict[str, Any]:  # type: ignore[override]
            return {}

    class Missing:
        def upload_batch(self, body: bytes, idempotency_key: str, *, compress: bool = True) -> None: ...

    assert gzip_hooks_fit(TracesAPIClient)
    assert not gzip_hooks_fit(Reshaped)
    assert not gzip_hooks_fit(Missing)
