"""GenAI spans a gateway with ``--state-dir`` acknowledged but had not assembled into an episode yet outlive a
SIGKILL of the gateway: started again on the same folder, it assembles the episode from them once, with every
member, model call and tool call, delivers it once, and the run completes with nothing missing. The spans are
those the official openai-v2 instrumentation writes for the calculator agent."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from prime_otel import _conventions as conv
from prime_otel.gateway._genai import EpisodeAssembler, read_span_line
from prime_otel.gateway._run import GENAI_SPAN_KIND
from prime_otel.gateway._state import GatewayState
from prime_otel.testing import LocalPlatform
from tests.gateway._gateway import Gateway, create_run
from tests.gateway._producer import end_marker
from tests.genai._agent import MODEL, openai_instrumented, run_agent
from tests.genai._chat import ChatServer
from tests.genai._expect import check_episode, check_sample_row

pytestmark = [pytest.mark.slow]

TOKEN = "genai-restart-token-3b7d"


def agent_spans(chat: ChatServer, resource: Resource) -> list[ReadableSpan]:
    """One calculator episode's spans, in the order they ended (the episode span last)."""
    provider = TracerProvider(resource=resource)
    spans = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    with openai_instrumented(provider):
        run_agent(chat.base_url, provider.get_tracer("calculator"), provider)
    provider.shutdown()
    return list(spans.get_finished_spans())


def start(platform: LocalPlatform, folder: Path, state: Path) -> Gateway:
    return Gateway(platform, folder, "--lease-seconds", "60", "--state-dir", str(state), tokens=(TOKEN,))


def export(gateway: Gateway, spans: list[ReadableSpan]) -> None:
    """Sent as an OTLP exporter sends them; SUCCESS means the gateway acknowledged them."""
    exporter = OTLPSpanExporter(endpoint=f"{gateway.http_url}/v1/traces", headers={"authorization": f"Bearer {TOKEN}"})
    try:
        assert exporter.export(spans) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()


def kill(gateway: Gateway) -> None:
    gateway.process.send_signal(signal.SIGKILL)
    gateway.process.wait(10)
    gateway.stop()


def eval_run(platform: LocalPlatform, name: str) -> tuple[str, Resource]:
    run_id = create_run(platform, "eval", name, environment="calculator", model=MODEL, team_id=None)
    return run_id, Resource({conv.RUN_ID: run_id, conv.RUN_TYPE: "eval", "service.name": "calculator"})


def check_one_full_episode(platform: LocalPlatform, run_id: str, closed: dict[str, object]) -> None:
    assert (closed["status"], closed["missing"]) == ("completed", 0), closed
    [episode] = platform.inspect.episodes(run_id)["items"]
    check_episode(episode, run_id)
    [row] = platform.inspect.samples(run_id)["items"]
    check_sample_row(row)


@pytest.mark.parametrize("stop", [kill, Gateway.stop], ids=["sigkill", "sigterm"])
def test_spans_acknowledged_before_their_episode_span_came_are_assembled_after_a_restart(
    local_platform: LocalPlatform,
    chat: ChatServer,
    content_on_spans: None,
    tmp_path: Path,
    stop: Callable[[Gateway], None],
) -> None:
    """The model, tool and agent spans reach the gateway while the episode is still running (its span ends last);
    the gateway dies (or is stopped). The episode span and the exporter's retry of the earlier request reach the
    restarted gateway: the episode is assembled from the spans held across the restart, and the retry is a
    duplicate."""
    run_id, resource = eval_run(local_platform, "genai-restart-members")
    spans = agent_spans(chat, resource)
    members = [span for span in spans if span.name != "episode"]
    [episode_span] = [span for span in spans if span.name == "episode"]
    assert {span.attributes["gen_ai.operation.name"] for span in members if span.attributes} >= {"chat", "execute_tool"}
    state = tmp_path / "state"
    first = start(local_platform, tmp_path / "first", state)
    try:
        export(first, members)  # acknowledged: no episode span yet, so nothing can be assembled before the stop
        stop(first)
    finally:
        first.stop()
    with start(local_platform, tmp_path / "again", state) as again:
        export(again, members)
        export(again, [episode_span, end_marker(resource, episodes=1)])
        closed = again.wait_closed(run_id)
    check_one_full_episode(local_platform, run_id, closed)
    assert closed["duplicates"] == len(members)


def test_a_whole_episode_killed_within_its_quiet_window_is_assembled_once_after_the_restart(
    local_platform: LocalPlatform, chat: ChatServer, content_on_spans: None, tmp_path: Path
) -> None:
    """Every span of the episode, its episode span too, is acknowledged and the gateway is killed at once (the trace
    must stay quiet for 2 s before it is assembled): the restarted gateway assembles and delivers it once."""
    run_id, resource = eval_run(local_platform, "genai-restart-whole")
    spans = agent_spans(chat, resource)
    state = tmp_path / "state"
    first = start(local_platform, tmp_path / "first", state)
    try:
        export(first, spans)
        kill(first)
    finally:
        first.stop()
    with start(local_platform, tmp_path / "again", state) as again:
        export(again, [end_marker(resource, episodes=1)])
        closed = again.wait_closed(run_id)
    check_one_full_episode(local_platform, run_id, closed)


def test_an_episode_logged_but_not_yet_counted_when_the_gateway_died_is_delivered_once(
    local_platform: LocalPlatform, chat: ChatServer, content_on_spans: None, tmp_path: Path
) -> None:
    """The gateway died between logging the assembled episode to the spool and the write that counts it and
    settles its spans (left on disk here as that instant leaves it): the restarted gateway assembles the spans
    again and drops the logged copy, so the episode is stored once and counted once."""
    run_id, resource = eval_run(local_platform, "genai-restart-uncounted")
    state = tmp_path / "state"
    first = start(local_platform, tmp_path / "first", state)
    try:
        export(first, agent_spans(chat, resource))
        kill(first)
    finally:
        first.stop()
    spool = GatewayState(state).spool(run_id)
    logged = [entry for entry in spool.read(range(10_000)) if entry.kind == GENAI_SPAN_KIND]
    assert logged, "the acknowledged spans are in the run's spool"
    assembler = EpisodeAssembler()
    for entry in logged:
        rank, _, view = read_span_line(entry.record)
        assembler.add(rank, [view], [entry.seq])
    [assembly] = assembler.drain()
    [(_, record)] = assembly.episodes
    wrapper = {"record": json.dumps(record), "samples": None, "end": time.time_ns(), "from": assembly.seqs}
    assert spool.append(conv.EPISODE_SPAN, [json.dumps(wrapper).encode()]) is not None
    with start(local_platform, tmp_path / "again", state) as again:
        export(again, [end_marker(resource, episodes=1)])
        closed = again.wait_closed(run_id)
    check_one_full_episode(local_platform, run_id, closed)
    assert closed["received"]["0"]["episodes"] == 1
