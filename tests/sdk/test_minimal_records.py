"""A hand-made JSON eval episode needs no more than an id and its traces: one without a task still lands on the
sample table and Prime Traces, instead of retiring the sample sink for the rest of the run."""

from __future__ import annotations

import prime_otel as po
from prime_otel.testing import LocalPlatform


def test_json_episodes_without_a_task_land_on_every_sink(platform_env: LocalPlatform) -> None:
    episodes = [
        {"id": f"episode-{i}", "ok": True, "traces": [{"id": f"trace-{i}", "rewards": {"correct": {"score": 1.0}}}]}
        for i in range(3)
    ]
    with po.init(name="minimal-records", environments=["gsm8k"], model="m") as run:
        run.log_episodes(episodes)
    assert run.report.complete, run.report.render()
    assert platform_env.inspect.samples(run.id)["total"] == 3
    assert {episode["id"] for episode in platform_env.inspect.episodes(run.id)["items"]} == {
        f"episode-{i}" for i in range(3)
    }
