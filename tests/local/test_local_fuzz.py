"""Fuzzing every route of the local platform over real HTTP (hypothesis, bounded and seeded): hostile path and
query values (integers past 64 bits, lone surrogates, junk), JSON bodies with each route's own field names
holding hostile values, fixture episodes with hostile values put anywhere in them. No answer is a server error,
and the server answers normally afterwards. The fault and settings controls are left out: injecting a 5xx is
what they are for."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings

from prime_otel.testing import LocalPlatform

from ._fuzzing import HUGE_INTS, TEXT, Call, Route, calls, multipart_upload, mutated, route_id, routes_of
from ._helpers import TIMEOUT, create_eval, create_train, fixture_json

EXAMPLES = settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
CONTROLS = {("POST", "/_local/faults"), ("DELETE", "/_local/faults"), ("POST", "/_local/settings")}


@pytest.fixture(scope="module")
def routes(server: LocalPlatform) -> list[Route]:
    spec = httpx.get(f"{server.url}/openapi.json", timeout=TIMEOUT).json()
    return [route for route in routes_of(spec) if (route.method, route.path) not in CONTROLS]


@pytest.fixture(scope="module")
def runs(server: LocalPlatform) -> dict[str, str]:
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.api_key}"}) as client:
        return {"eval": create_eval(client), "train": create_train(client)}


@pytest.fixture
def client(server: LocalPlatform) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=TIMEOUT) as session:
        yield session


def send(client: httpx.Client, call: Call) -> None:
    answer = client.request(call.method, call.url, content=call.content, headers=call.headers)
    assert answer.status_code < 500, (call.method, call.url[:300], answer.status_code, answer.text[:300])


def test_every_route_answers_hostile_requests_without_a_server_error(
    routes: list[Route], runs: dict[str, str], client: httpx.Client, server: LocalPlatform
) -> None:
    assert len(routes) > 30
    run_ids = list(runs.values())
    for route in routes:

        @EXAMPLES
        @given(call=calls(route, run_ids, server.api_key))
        def hostile(call: Call) -> None:
            send(client, call)

        try:
            hostile()
        except AssertionError as failure:
            raise AssertionError(f"{route_id(route)}: {failure}") from None


@EXAMPLES
@given(document=mutated(fixture_json("eval/episode-1.stamped.json"), times=3))
def test_hostile_values_anywhere_in_an_uploaded_episode_are_refused_or_stored(
    document: Any, client: httpx.Client, server: LocalPlatform, runs: dict[str, str]
) -> None:
    if isinstance(document, dict) and not isinstance(document.get("id"), int):
        document["id"] = uuid.uuid4().hex
    body, content_type = multipart_upload([document])
    headers = {
        "Authorization": f"Bearer {server.api_key}",
        "Content-Type": content_type,
        "X-Prime-Line-Format": "episode",
        "Idempotency-Key": f"fuzz-{uuid.uuid4().hex}",
    }
    send(client, Call("POST", "/api/v1/traces", body, headers))


@EXAMPLES
@given(number=HUGE_INTS.map(str) | TEXT, value=HUGE_INTS | TEXT)
def test_huge_or_broken_numbers_in_reads_and_writes_are_not_server_errors(
    number: str, value: Any, client: httpx.Client, server: LocalPlatform, runs: dict[str, str]
) -> None:
    auth = {"Authorization": f"Bearer {server.api_key}"}
    q = quote(number.encode("utf-8", "surrogatepass"), safe="")
    evaluation, train = runs["eval"], runs["train"]
    reads = [
        f"/_local/runs/{evaluation}/samples?offset={q}",
        f"/_local/runs/{evaluation}/episodes?offset={q}&limit={q}",
        f"/_local/runs/{train}/steps/{q}/rows",
        f"/_local/runs/{train}/steps/1/rows?offset={q}",
        f"/api/v1/traces?cursor={q}",
        f"/api/v1/episodes?cursor={q}",
        f"/api/v1/evaluations/{evaluation}/samples?page={q}&limit={q}",
        f"/_local/requests?limit={q}",
        f"/api/v1/traces/{q}",
        f"/_objects/rft-samples/{train}/x.parquet?expires={q}&signature={q}",
    ]
    for url in reads:
        send(
            client,
            Call("PUT" if url.startswith("/_objects/") else "GET", url, b"" if "_objects" in url else None, auth),
        )
    json_auth = {**auth, "Content-Type": "application/json"}
    writes = [
        ("/api/v1/rft/metrics", {"run_id": train, "metrics": {"step": value, "loss": value, "_timestamp": value}}),
        ("/api/v1/rft/samples/presign", {"run_id": train, "step": value}),
        (f"/api/v1/evaluations/{evaluation}/samples", {"samples": [{"example_id": value, "reward": value}]}),
    ]
    for path, body in writes:
        send(client, Call("POST", path, json.dumps(body).encode(), json_auth))


def test_the_server_still_answers_after_the_fuzzing(api: httpx.Client, runs: dict[str, str]) -> None:
    assert api.get(f"/_local/runs/{runs['eval']}").status_code == 200
    assert api.get("/_local/requests", params={"limit": 5}).status_code == 200
    assert create_eval(api)
