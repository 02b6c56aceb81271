"""Environments hub: get-or-create by (name, team) and owner/name@latest."""

from __future__ import annotations

import httpx

from prime_otel.testing import LocalPlatform


def _resolve(api: httpx.Client, name: str, team: str | None = None) -> str:
    body = {"name": name} if team is None else {"name": name, "team_id": team}
    response = api.post("/api/v1/environmentshub/resolve", json=body)
    assert response.status_code == 200
    return str(response.json()["data"]["id"])


def test_resolve_is_get_or_create_per_name_and_team(api: httpx.Client) -> None:
    first = _resolve(api, "hub-gsm8k", "team_hub")
    assert _resolve(api, "hub-gsm8k", "team_hub") == first
    assert _resolve(api, "hub-gsm8k", "team_other") != first
    assert _resolve(api, "hub-other", "team_hub") != first


def test_a_resolved_name_is_found_by_slug_under_its_team_or_local(api: httpx.Client) -> None:
    with_team = _resolve(api, "hub-slugged", "team_slug")
    without_team = _resolve(api, "hub-slugged")
    assert api.get("/api/v1/environmentshub/team_slug/hub-slugged/@latest").json() == {"data": {"id": with_team}}
    assert api.get("/api/v1/environmentshub/local/hub-slugged/@latest").json() == {"data": {"id": without_team}}


def test_a_published_environment_resolves_by_slug_even_with_slashes_in_its_name(
    api: httpx.Client, server: LocalPlatform
) -> None:
    env_id = server.inspect.publish_environment("primeintellect", "math/gsm8k")
    response = api.get("/api/v1/environmentshub/primeintellect/math/gsm8k/@latest")
    assert response.status_code == 200
    assert response.json()["data"]["id"] == env_id
    assert server.inspect.publish_environment("primeintellect", "math/gsm8k") == env_id


def test_an_unknown_slug_is_404_with_detail(api: httpx.Client) -> None:
    response = api.get("/api/v1/environmentshub/nobody/nothing/@latest")
    assert response.status_code == 404
    assert isinstance(response.json()["detail"], str)


def test_resolve_without_a_name_is_422(api: httpx.Client) -> None:
    assert api.post("/api/v1/environmentshub/resolve", json={"team_id": "t"}).status_code == 422
