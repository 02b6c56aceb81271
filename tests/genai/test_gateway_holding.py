"""What a gateway holds of standard GenAI spans waiting for their episode span, as its operator sees it: ``GET /runs``
counts the traces waiting and their spans, and the traces given up (with why), which the run's summary on the
platform carries too. With ``--state-dir`` a run's spool bounds what it holds: past the bound a sender of GenAI
spans is answered 503 + ``Retry-After`` (gRPC ``UNAVAILABLE``) and nothing is taken, while an episode span still
gets in, so the spans holding the spool can leave it; once they did, the refused spans sent again are taken once
and every acknowledged span is in its episode. A step row is refused the same, never acknowledged unlogged."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from prime_otel import _conventions as conv
from prime_otel.gateway._genai import MAX_TRACES
from prime_otel.testing import LocalPlatform
from tests._waiting import wait_for
from tests.gateway._gateway import Gateway, create_run
from tests.gateway._producer import end_marker, step_metrics
from tests.genai._spans import agent, chat, reward, text

pytestmark = [pytest.mark.slow]

TOKEN = "genai-holding-token-5c1e"
#: The bound given to each run's spool, and the message content that fills it in a few spans.
SPOOL_MIB = 1
TURNS, BIG_CONTENT = 4, 24 * 1024
MAX_TRACES_TO_FILL = 30


def eval_run(platform: LocalPlatform, name: str) -> tuple[str, Resource]:
    run_id = create_run(platform, "eval", name, environment="calculator", team_id=None)
    return run_id, Resource({conv.RUN_ID: run_id, conv.RUN_TYPE: "eval", "service.name": "agent"})


def episode_spans(resource: Resource, turns: int, content: int = 64) -> list[ReadableSpan]:
    """One agent episode of ``turns`` model calls, each answering ``content`` characters, in the order its spans
    ended (the episode span last)."""

    def build(tracer: Tracer) -> None:
        with tracer.start_as_current_span("episode") as episode, agent(tracer, "solver"):
            for turn in range(turns):
                chat(tracer, [text("user", f"question {turn}")], text("assistant", f"{turn}:" + "x" * content))
            reward(episode, "correct", 1.0)

    provider = TracerProvider(resource=resource)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    build(provider.get_tracer("tests.genai"))
    provider.shutdown()
    return list(exporter.get_finished_spans())


def split(spans: list[ReadableSpan]) -> tuple[list[ReadableSpan], ReadableSpan]:
    """The members of an episode and its episode span."""
    [episode] = [span for span in spans if span.name == "episode"]
    return [span for span in spans if span is not episode], episode


def post(gateway: Gateway, spans: list[ReadableSpan]) -> httpx.Response:
    """Sent as one OTLP/HTTP export."""
    return httpx.post(
        f"{gateway.http_url}/v1/traces",
        content=encode_spans(spans).SerializeToString(),
        headers={**gateway.headers, "content-type": "application/x-protobuf"},
        timeout=30,
    )


def genai(gateway: Gateway, run_id: str) -> dict[str, Any]:
    return dict(gateway.runs()[run_id]["genai"])


def taken_once_space_frees(gateway: Gateway, spans: list[ReadableSpan]) -> None:
    """Sent again as an exporter retries after a 503, until the gateway takes them (bounded)."""
    wait_for(lambda: post(gateway, spans).status_code == 200, "the gateway to take the spans sent again")


def test_runs_shows_the_spans_waiting_for_their_episode_span_and_the_summary_the_traces_given_up(
    local_platform: LocalPlatform, tmp_path: Path
) -> None:
    """Five traces whose episode spans have not arrived are listed as waiting with every span held; two of them then
    get their episode span and are assembled; the run ends, and the three still without one are given up with why,
    in ``/runs`` and in the run's summary on the platform."""
    run_id, resource = eval_run(local_platform, "genai-waiting")
    traces = [split(episode_spans(resource, turns=2 + index)) for index in range(5)]
    members = [span for spans, _ in traces for span in spans]
    with Gateway(local_platform, tmp_path / "gateway", "--lease-seconds", "60", tokens=(TOKEN,)) as gateway:
        assert post(gateway, members).status_code == 200
        held = genai(gateway, run_id)
        assert (held["traces_waiting"], held["spans_held"]) == (5, len(members))
        assert held["traces_given_up"] == 0 and held["given_up_reasons"] == {}

        assert post(gateway, [traces[0][1], traces[1][1]]).status_code == 200
        wait_for(lambda: len(local_platform.inspect.episodes(run_id)["items"]) == 2, "the two episodes delivered")
        left = genai(gateway, run_id)
        assert (left["traces_waiting"], left["spans_held"]) == (3, sum(len(spans) for spans, _ in traces[2:]))

        assert post(gateway, [end_marker(resource, episodes=2)]).status_code == 200
        closed = gateway.wait_closed(run_id)
    assert (closed["status"], closed["missing"]) == ("completed", 0), closed
    given_up = {"the run closed before its episode span arrived": 3}
    spans_given_up = sum(len(spans) for spans, _ in traces[2:])
    assert closed["genai"] == {
        "traces_waiting": 0,
        "spans_held": 0,
        "traces_given_up": 3,
        "given_up_reasons": given_up,
        "spans_given_up": spans_given_up,
        "spans_dropped": 0,
    }
    block = local_platform.inspect.run(run_id)["summary"]["prime_runs"]
    assert block["genai_traces_given_up"] == given_up
    assert block["genai_spans_given_up"] == spans_given_up


def fill_spool(
    gateway: Gateway, resource: Resource
) -> tuple[list[tuple[list[ReadableSpan], ReadableSpan]], list[ReadableSpan]]:
    """Episodes' members sent until the run's spool refuses the next one's: the episodes taken (members, episode
    span), and the spans of the one refused."""
    held: list[tuple[list[ReadableSpan], ReadableSpan]] = []
    for _ in range(MAX_TRACES_TO_FILL):
        members, episode = split(episode_spans(resource, turns=TURNS, content=BIG_CONTENT))
        if post(gateway, members).status_code != 200:
            return held, [*members, episode]
        held.append((members, episode))
    raise AssertionError(f"{MAX_TRACES_TO_FILL} traces did not fill a spool of {SPOOL_MIB} MiB")


def refused_over_grpc(gateway: Gateway, spans: list[ReadableSpan]) -> grpc.StatusCode:
    channel = grpc.insecure_channel(gateway.grpc_endpoint.removeprefix("http://"))
    try:
        with pytest.raises(grpc.RpcError) as refused:
            TraceServiceStub(channel).Export(
                encode_spans(spans), metadata=(("authorization", f"Bearer {TOKEN}"),), timeout=30
            )
        code: grpc.StatusCode = refused.value.code()
        return code
    finally:
        channel.close()


def test_a_full_spool_refuses_genai_spans_until_the_spans_holding_it_left_and_loses_none(
    local_platform: LocalPlatform, tmp_path: Path
) -> None:
    """Episodes' members fill the run's spool while they wait for their episode spans, until the next episode's
    spans are refused whole, over HTTP and gRPC (nothing of them taken: ``/runs`` shows only the traces before it
    held). The episode spans of the held traces still get in, their episodes are assembled and delivered and free
    the spool; the refused episode sent again is taken, sent once more it is a duplicate, and the run ends with
    every episode stored once, every model call in it."""
    run_id, resource = eval_run(local_platform, "genai-spool-full")
    state = tmp_path / "state"
    options = ("--lease-seconds", "60", "--state-dir", str(state), "--max-run-spool-mib", str(SPOOL_MIB))
    with Gateway(local_platform, tmp_path / "gateway", *options, tokens=(TOKEN,)) as gateway:
        held, refused = fill_spool(gateway, resource)
        answer = post(gateway, refused)
        assert answer.status_code == 503, answer.text
        assert answer.headers["Retry-After"] == "1"
        assert "spool is full" in answer.text
        assert refused_over_grpc(gateway, refused) is grpc.StatusCode.UNAVAILABLE
        waiting = genai(gateway, run_id)
        assert (waiting["traces_waiting"], waiting["spans_held"]) == (len(held), sum(len(m) for m, _ in held))

        assert post(gateway, [episode for _, episode in held]).status_code == 200
        wait_for(
            lambda: len(local_platform.inspect.episodes(run_id)["items"]) == len(held), "the held episodes delivered"
        )
        taken_once_space_frees(gateway, refused)
        assert post(gateway, refused).status_code == 200
        assert post(gateway, [end_marker(resource, episodes=len(held) + 1)]).status_code == 200
        closed = gateway.wait_closed(run_id)
    assert (closed["status"], closed["missing"]) == ("completed", 0), closed
    assert closed["duplicates"] == len(refused)
    assert closed["genai"]["traces_given_up"] == 0
    assert closed["invalid"] == 0, closed["invalid_reasons"]
    episodes = local_platform.inspect.episodes(run_id)["items"]
    assert [calls(episode) for episode in episodes] == [TURNS] * (len(held) + 1)


def test_a_full_spool_refuses_step_rows_until_it_has_room_and_the_row_sent_again_is_stored_once(
    local_platform: LocalPlatform, tmp_path: Path
) -> None:
    """A training run's spool is full of GenAI spans waiting for their episode spans: a step row is refused with
    503 (not acknowledged without being logged, which a restart would lose); once the episodes left the spool the
    row sent again is taken, a repeat is a duplicate, and the platform holds the row."""
    run_id = create_run(local_platform, "train", "genai-spool-full-rows")
    resource = Resource({conv.RUN_ID: run_id, conv.RUN_TYPE: "train", "service.name": "agent"})
    state = tmp_path / "state"
    options = ("--lease-seconds", "60", "--state-dir", str(state), "--max-run-spool-mib", str(SPOOL_MIB))

    row = encode_metrics(step_metrics(resource, 3, {"loss": 0.5})).SerializeToString()

    def send_row(gateway: Gateway) -> httpx.Response:
        """The same request each time, as an exporter retries it."""
        return httpx.post(
            f"{gateway.http_url}/v1/metrics",
            content=row,
            headers={**gateway.headers, "content-type": "application/x-protobuf"},
            timeout=30,
        )

    with Gateway(local_platform, tmp_path / "gateway", *options, tokens=(TOKEN,)) as gateway:
        held, _ = fill_spool(gateway, resource)
        refused = send_row(gateway)
        assert refused.status_code == 503, refused.text
        assert refused.headers["Retry-After"] == "1"
        received = gateway.runs()[run_id]["received"]
        assert all(counts.get("metric_rows", 0) == 0 for counts in received.values()), received
        assert post(gateway, [episode for _, episode in held]).status_code == 200
        wait_for(lambda: send_row(gateway).status_code == 200, "the gateway to take the row sent again")
        assert send_row(gateway).status_code == 200
        assert post(gateway, [end_marker(resource, episodes=len(held), metric_rows=1)]).status_code == 200
        closed = gateway.wait_closed(run_id)
    assert (closed["status"], closed["missing"]) == ("completed", 0), closed
    assert closed["duplicates"] == 1
    rows = local_platform.inspect.run(run_id)["metric_rows"]
    assert [(row["step"], row["loss"]) for row in rows] == [(3, 0.5)]


def calls(episode: dict[str, Any]) -> int:
    """The model calls the stored episode holds."""
    return sum(len(trace["calls"]) for trace in episode["traces"])


def lone_model_calls(resource: Resource, count: int) -> list[ReadableSpan]:
    """``count`` model calls, each the only span of its own trace (no episode span will come for any)."""
    provider = TracerProvider(resource=resource)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests.genai")
    for turn in range(count):
        chat(tracer, [text("user", f"question {turn}")], text("assistant", str(turn)))
    provider.shutdown()
    return list(exporter.get_finished_spans())


def test_traces_given_up_over_the_cap_are_still_counted_after_a_restart_and_in_the_summary(
    local_platform: LocalPlatform, tmp_path: Path
) -> None:
    """One more trace than the gateway holds arrives: the oldest is given up, counted with why. The gateway is
    killed and started again on its state folder: the count is still there, the other traces held again; when
    the run ends they are given up too, and the summary carries both reasons."""
    run_id, resource = eval_run(local_platform, "genai-given-up-restart")
    spans = lone_model_calls(resource, MAX_TRACES + 1)
    state = tmp_path / "state"
    options = ("--lease-seconds", "60", "--state-dir", str(state))
    over_cap = {"more traces waiting than the gateway holds": 1}
    first = Gateway(local_platform, tmp_path / "first", *options, tokens=(TOKEN,))
    try:
        assert post(first, spans).status_code == 200
        before = genai(first, run_id)
        assert (before["traces_waiting"], before["given_up_reasons"], before["spans_given_up"]) == (
            MAX_TRACES,
            over_cap,
            1,
        )
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(10)
    finally:
        first.stop()
    with Gateway(local_platform, tmp_path / "again", *options, tokens=(TOKEN,)) as again:
        after = genai(again, run_id)
        assert (after["traces_waiting"], after["spans_held"]) == (MAX_TRACES, MAX_TRACES)
        assert (after["given_up_reasons"], after["spans_given_up"]) == (over_cap, 1)
        assert post(again, [end_marker(resource)]).status_code == 200
        closed = again.wait_closed(run_id)
    given_up = {**over_cap, "the run closed before its episode span arrived": MAX_TRACES}
    assert closed["genai"]["given_up_reasons"] == given_up
    block = local_platform.inspect.run(run_id)["summary"]["prime_runs"]
    assert (block["genai_traces_given_up"], block["genai_spans_given_up"]) == (given_up, MAX_TRACES + 1)
