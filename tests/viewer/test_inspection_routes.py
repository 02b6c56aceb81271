"""The inspection reads the viewer sorts, filters and summarises with, over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from prime_otel.testing import LocalPlatform

from ._seed import PlatformAPI, fixture_json, stamped, varied


@pytest.fixture(scope="module")
def local(platform: LocalPlatform) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=platform.url, headers={"Authorization": f"Bearer {platform.api_key}"}) as client:
        yield client


def page(local: httpx.Client, run_id: str, table: str, **params: Any) -> dict[str, Any]:
    response = local.get(f"/_local/runs/{run_id}/{table}", params=params)
    assert response.status_code == 200, response.text
    return dict(response.json())


def eval_with_episodes(api: PlatformAPI, tag: str) -> tuple[str, list[dict[str, Any]]]:
    """An evaluation holding the three fixture episodes (rewards 1, unscored, 1; the second one failed)."""
    eval_id = str(api.create_eval(f"inspect-{tag}", {"rollouts_per_example": 1})["evaluation_id"])
    episodes = [
        stamped(varied(fixture_json(f"eval/episode-{n}.stamped.json"), tag), eval_id, "eval") for n in (1, 2, 3)
    ]
    api.upload_episodes(episodes, "eval")
    return eval_id, episodes


def test_episode_pages_sort_by_reward_and_filter_by_outcome_and_environment(
    api: PlatformAPI, local: httpx.Client
) -> None:
    eval_id, episodes = eval_with_episodes(api, "episodes")
    ids = [e["id"] for e in episodes]

    assert set(page(local, eval_id, "episodes")) == {"total", "items"}  # unchanged without the new parameters
    lowest = page(local, eval_id, "episodes", sort="reward")
    # Unscored rewards count as 0, like verifiers' own `reward`; ties keep the upload order.
    assert [e["id"] for e in lowest["items"]] == [ids[1], ids[0], ids[2]]
    highest = page(local, eval_id, "episodes", sort="-reward")
    assert [e["id"] for e in highest["items"]] == [ids[0], ids[2], ids[1]]
    failed = page(local, eval_id, "episodes", outcome="error")
    assert (failed["total"], [e["id"] for e in failed["items"]]) == (1, [ids[1]])
    assert page(local, eval_id, "episodes", outcome="ok")["total"] == 2
    judged = page(local, eval_id, "episodes", environment="agentic-judge+gsm8k")
    assert [e["id"] for e in judged["items"]] == [ids[2]]
    assert len(judged["items"][0]["traces"]) == 2  # member traces inline, as on the unfiltered page
    second = page(local, eval_id, "episodes", sort="-reward", offset=1, limit=1)
    assert (second["total"], [e["id"] for e in second["items"]]) == (3, [ids[2]])


def test_sample_pages_sort_and_filter_over_every_row(api: PlatformAPI, local: httpx.Client) -> None:
    eval_id = str(api.create_eval("inspect-samples", {"rollouts_per_example": 1})["evaluation_id"])
    template = fixture_json("eval/samples.json")["samples"]
    rows = [{**template[i % 3], "sample_id": f"s{i}", "reward": (i * 7 % 10) / 10} for i in range(30)]
    api.push_samples(eval_id, rows)

    highest = page(local, eval_id, "samples", sort="-reward", limit=5)
    assert highest["total"] == 30
    assert [r["reward"] for r in highest["items"]] == sorted((r["reward"] for r in rows), reverse=True)[:5]
    errors = page(local, eval_id, "samples", outcome="error", limit=100)
    assert {r["sample_id"] for r in errors["items"]} == {r["sample_id"] for r in rows if r["error"]}
    bash = page(local, eval_id, "samples", environment="bash-tasks", limit=100)
    assert bash["total"] == 10


def test_stats_summarise_the_run_and_follow_new_and_replaced_records(api: PlatformAPI, local: httpx.Client) -> None:
    eval_id, episodes = eval_with_episodes(api, "stats")
    stats = local.get(f"/_local/runs/{eval_id}/stats").json()["episodes"]
    assert (stats["count"], stats["errors"], stats["rewarded"]) == (3, 1, 3)
    assert stats["avg_reward"] == pytest.approx(2 / 3)
    assert sum(b["count"] for b in stats["reward_histogram"]) == 3
    tokens = sum(t["num_input_tokens"] for e in episodes for t in e["traces"])
    assert stats["tokens"]["input"] == tokens
    assert {e["id"]: e["count"] for e in stats["environments"]} == {
        "gsm8k": 1,
        "bash-tasks": 1,
        "agentic-judge+gsm8k": 1,
    }
    assert stats["avg_metrics"]["correct"] == 1.0  # scored rewards count as metrics; unscored ones are left out

    # A second upload adds to what was read; a re-upload of the same episode replaces it.
    more = stamped(varied(fixture_json("eval/episode-1.stamped.json"), "stats-more", score=0.0), eval_id, "eval")
    rescored = {**episodes[0], "traces": [{**episodes[0]["traces"][0], "rewards": {"correct": {"score": 0.0}}}]}
    api.upload_episodes([more, rescored], "eval")
    stats = local.get(f"/_local/runs/{eval_id}/stats").json()["episodes"]
    assert (stats["count"], stats["avg_reward"]) == (4, pytest.approx(1 / 4))

    # Records that move to another run leave this one's numbers.
    other = str(api.create_eval("inspect-stats-other", {"rollouts_per_example": 1})["evaluation_id"])
    api.upload_episodes([stamped(more, other, "eval")], "eval")
    assert local.get(f"/_local/runs/{eval_id}/stats").json()["episodes"]["count"] == 3
    assert local.get(f"/_local/runs/{other}/stats").json()["episodes"]["count"] == 1


def test_the_extended_runs_list_carries_reward_error_tags_and_environment_names(
    api: PlatformAPI, local: httpx.Client
) -> None:
    reported = str(api.create_eval("inspect-reported", {"rollouts_per_example": 1})["evaluation_id"])
    api.call("PUT", f"/evaluations/{reported}", {"metrics": {"avg_reward": 0.25}})
    computed, _ = eval_with_episodes(api, "listed")
    api.call("PUT", f"/evaluations/{computed}", {"status": "FAILED", "error_message": "crashed: oom"})

    plain = local.get("/_local/runs").json()
    assert "avg_reward" not in plain[0]  # the list without ?extended keeps its keys
    listed = {run["id"]: run for run in local.get("/_local/runs", params={"extended": "true"}).json()}
    assert listed[reported]["avg_reward"] == 0.25
    assert listed[computed]["avg_reward"] == pytest.approx(2 / 3)
    assert listed[computed]["error_message"] == "crashed: oom"
    assert listed[computed]["tags"] == ["viewer", "gsm8k"]
    detail = local.get(f"/_local/runs/{computed}").json()
    assert detail["environments"][0]["id"].startswith("env_")  # the hub's id, as the platform stores it
    assert listed[computed]["environment_names"] == detail["environment_names"] == ["gsm8k"]


def test_one_record_is_read_inline_and_only_from_its_own_run(api: PlatformAPI, local: httpx.Client) -> None:
    eval_id, episodes = eval_with_episodes(api, "one")
    record = local.get(f"/_local/runs/{eval_id}/episodes/{episodes[2]['id']}").json()
    assert [t["agent"]["name"] for t in record["traces"]] == ["solver", "judge"]
    other = str(api.create_eval("inspect-one-other", {"rollouts_per_example": 1})["evaluation_id"])
    assert local.get(f"/_local/runs/{other}/episodes/{episodes[2]['id']}").status_code == 404
    member = episodes[2]["traces"][0]["id"]
    assert local.get(f"/_local/runs/{eval_id}/episodes/{member}").status_code == 404  # a member, not a record


@pytest.mark.parametrize("params", [{"sort": "step"}, {"outcome": "maybe"}, {"limit": 0}])
def test_unknown_sorts_and_filters_are_refused(api: PlatformAPI, local: httpx.Client, params: dict[str, Any]) -> None:
    eval_id = str(api.create_eval("inspect-refused", {"rollouts_per_example": 1})["evaluation_id"])
    for table in ("samples", "episodes"):
        assert local.get(f"/_local/runs/{eval_id}/{table}", params=params).status_code == 422
