"""A standard-instrumented agent (the real openai client, the official openai-v2 instrumentation, util-genai's
tool span) inside ``po.init()``: its GenAI spans become one platform episode, with nothing Prime-specific in the
agent beyond naming the episode and recording its reward."""

from __future__ import annotations

from pathlib import Path

import pytest

import prime_otel as po
from prime_otel.testing import LocalPlatform
from tests._platform import point_sdk_at
from tests.genai._agent import openai_instrumented, run_agent
from tests.genai._chat import ANSWER, ChatServer
from tests.genai._expect import check_episode, check_sample_row


@pytest.fixture
def platform_env(local_platform: LocalPlatform, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> LocalPlatform:
    point_sdk_at(local_platform, monkeypatch, tmp_path)
    return local_platform


def test_an_instrumented_agent_in_an_episode_span_lands_as_one_full_episode(
    platform_env: LocalPlatform, chat: ChatServer, content_on_spans: None
) -> None:
    run = po.init(name="genai-in-process", environments=["calculator"], model="calc-model-1")
    assert run.tracer_provider is not None
    with openai_instrumented(run.tracer_provider):
        answer = run_agent(chat.base_url, run.tracer("calculator"), run.tracer_provider)
    report = run.finish()

    assert answer == ANSWER
    assert report is not None and report.complete
    [episode] = platform_env.inspect.episodes(run.id)["items"]
    check_episode(episode, run.id)
    [row] = platform_env.inspect.samples(run.id)["items"]
    check_sample_row(row)
    assert row["episode_id"] == episode["id"]
