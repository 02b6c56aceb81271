"""Through the real Collector (the one ``make collector`` builds): a plain OpenTelemetry producer's GenAI spans
reach a prime-otel gateway, which assembles the platform episode from the spans of the trace; and a run's tee
sends its episode spans, with GenAI attributes and evaluation events, to a Collector of the user's choice.
Skipped without the Collector binary."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import prime_otel as po
from prime_otel import _conventions as conv
from prime_otel.testing import LocalPlatform, start_local_platform
from tests._collector import Collector, agent
from tests._fixtures import load_episodes
from tests._platform import point_sdk_at
from tests._waiting import wait_for
from tests.gateway._gateway import Gateway, create_run
from tests.genai._agent import MODEL, openai_instrumented, run_agent
from tests.genai._chat import ChatServer
from tests.genai._expect import check_episode, check_sample_row

pytestmark = [
    pytest.mark.slow,
]

DEBUG_CONFIG = """
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:${env:AGENT_OTLP_GRPC_PORT}
exporters:
  debug:
    verbosity: detailed
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [debug]
    metrics:
      receivers: [otlp]
      exporters: [debug]
"""
TEAM = "team_genai"


def test_a_plain_opentelemetry_producer_through_the_collector_and_gateway_lands_one_full_episode(
    local_platform: LocalPlatform, chat: ChatServer, content_on_spans: None, tmp_path: Path
) -> None:
    """No prime-otel in the producer: the run is named on the resource, the episode is its GenAI spans, and a
    ``run.end`` span announcing one episode closes the run once the gateway assembled it."""
    run_id = create_run(
        local_platform, "eval", "genai-through-the-collector", environment="calculator", model=MODEL, team_id=None
    )
    with (
        Gateway(local_platform, tmp_path / "gateway", "--lease-seconds", "60") as gateway,
        agent([gateway.grpc_port], tmp_path / "collector.log") as collector,
    ):
        resource = Resource({conv.RUN_ID: run_id, conv.RUN_TYPE: "eval", "service.name": "calculator"})
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=collector.endpoint, insecure=True)))
        try:
            with openai_instrumented(provider):
                tracer = provider.get_tracer("calculator")
                run_agent(chat.base_url, tracer, provider)
                end = {conv.END_STATUS: "completed", conv.END_OWNER: True, conv.END_EPISODES: 1}
                tracer.start_span(conv.RUN_END_SPAN, attributes=end).end()
        finally:
            provider.shutdown()
        closed = gateway.wait_closed(run_id)
    assert closed["status"] == "completed", closed
    assert closed["missing"] == 0
    [episode] = local_platform.inspect.episodes(run_id)["items"]
    check_episode(episode, run_id)
    [row] = local_platform.inspect.samples(run_id)["items"]
    check_sample_row(row)


def _go_number(value: float) -> str:
    """A float as the debug exporter (Go) prints it: 1 for 1.0."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def _debug_spans(output: str) -> list[str]:
    """The debug exporter's detailed text, one block per span."""
    return re.split(r"\n(?=Span #\d+)", output)[1:]


def test_the_tee_sends_episode_spans_with_genai_attributes_and_evaluation_events(
    local_platform: LocalPlatform, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The platform gets every episode as without the tee; the tee's Collector gets one episode span per episode
    with the GenAI attributes and one evaluation event per reward, and the spans of the run's tracer."""
    point_sdk_at(local_platform, monkeypatch, tmp_path)
    config = tmp_path / "debug.yaml"
    config.write_text(DEBUG_CONFIG)
    with Collector(config, tmp_path / "tee-collector.log", {}) as collector:
        monkeypatch.setenv(conv.TEE_ENDPOINT_ENV, collector.endpoint)
        episodes = load_episodes("eval")
        run = po.init(name="genai-tee", environments=["gsm8k"], model="Qwen/Qwen3-8B")
        run.log_episodes(episodes)
        tracer = run.tracer("producer")
        assert tracer is not None
        tracer.start_span("judge call", attributes={"gen_ai.operation.name": "chat"}).end()
        report = run.finish()
        assert report is not None and report.complete
        rewards = sum(len(trace.rewards) for episode in episodes for trace in episode.traces)
        wait_for(
            lambda: (
                collector.output().count("Name: gen_ai.evaluation.result") >= rewards
                and "judge call" in collector.output()
            ),
            "the teed spans",
        )
        output = collector.output()
    assert len(local_platform.inspect.episodes(run.id)["items"]) == len(episodes)
    blocks = _debug_spans(output)
    episode_blocks = [block for block in blocks if re.search(r"Name\s+: episode\n", block)]
    assert len(episode_blocks) == len(episodes)
    by_id = {}
    for block in episode_blocks:
        conversation = re.search(r"-> gen_ai\.conversation\.id: Str\((\w+)\)", block)
        assert conversation is not None, block
        by_id[conversation.group(1)] = block
    assert sorted(by_id) == sorted(episode.id for episode in episodes)
    for episode in episodes:
        block = by_id[episode.id]
        trace = next(t for t in episode.traces if t.agent.trainable)
        assert "-> gen_ai.operation.name: Str(invoke_agent)" in block
        assert f"-> gen_ai.agent.name: Str({trace.agent.name})" in block
        assert f"-> gen_ai.response.model: Str({trace.calls[-1].model})" in block
        expected_input = sum(
            c.usage.prompt_tokens + (c.usage.cached_input_tokens or 0)
            for t in episode.traces
            for c in t.calls
            if c.usage
        )
        assert f"-> gen_ai.usage.input_tokens: Int({expected_input})" in block
        assert "-> prime.record.json: Str(" in block
        rewards = [(name, r) for t in episode.traces for name, r in t.rewards.items()]
        assert block.count("-> Name: gen_ai.evaluation.result") == len(rewards)
        for name, reward in rewards:
            assert f"-> gen_ai.evaluation.name: Str({name})" in block
            if reward is not None:
                assert f"-> gen_ai.evaluation.score.value: Double({_go_number(reward.score)})" in block
    assert any(re.search(r"Name\s+: judge call\n", block) for block in blocks)


def test_the_tee_sends_a_training_runs_step_metrics_as_points_carrying_the_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every logged step reaches the platform's metrics and, as a gauge point with ``prime.run.step``, the tee."""
    config = tmp_path / "debug.yaml"
    config.write_text(DEBUG_CONFIG)
    with (
        start_local_platform(tmp_path / "platform", teams=[TEAM]) as platform,
        Collector(config, tmp_path / "tee-collector.log", {}) as collector,
    ):
        point_sdk_at(platform, monkeypatch, tmp_path)
        monkeypatch.setenv("PRIME_TEAM_ID", TEAM)
        run = po.init(
            kind="train", model="m", environments=["gsm8k"], sinks="legacy", tee_otlp_endpoint=collector.endpoint
        )
        for step in (1, 2):
            run.log_metrics({"genai_tee_loss": 0.5 / step}, step=step)
        report = run.finish()
        assert report is not None and report.complete
        wait_for(lambda: collector.output().count("genai_tee_loss") >= 2, "the teed metric points")
        output = collector.output()
    platform_rows = next(sink for sink in report.sinks if sink.sink == "rft_metrics")
    assert (platform_rows.delivered, platform_rows.failed) == (2, 0)
    points = re.findall(r"-> prime\.run\.step: Int\((\d+)\)[\s\S]*?Value: ([\d.]+)", output)
    assert sorted(points) == [("1", "0.500000"), ("2", "0.250000")]
