"""A gateway killed with SIGKILL in the middle of a run, and started again on the same state folder, ends the run
with every record once and the owner's status: behind the real Collector (two gateways, load balancing on
run.id), the records it had acknowledged come back from its spool, what the Collector had not got through is
retried and deduplicated, and the arrivals and markers it counted before the kill still count. Skipped without
the Collector binary (``make collector``)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.metrics.export import MetricExportResult
from opentelemetry.sdk.trace.export import SpanExportResult

from prime_otel import _conventions as conv
from prime_otel.testing import LocalPlatform
from tests._collector import free_port
from tests._waiting import wait_for
from tests.gateway._collector import agent_collector
from tests.gateway._gateway import Gateway, create_run
from tests.gateway._producer import end_marker, episode_spans, fresh_episodes, run_resource, step_metrics
from tests.gateway._rank_process import Rank

pytestmark = [
    pytest.mark.slow,
]

TOKEN = "restart-token-8c1f"
LEASE_SECONDS = 30
AUTH = {"authorization": f"Bearer {TOKEN}"}


def start_gateway(platform: LocalPlatform, folder: Path, state: Path, grpc_port: int) -> Gateway:
    options = ("--lease-seconds", str(LEASE_SECONDS), "--state-dir", str(state), "--grpc-port", str(grpc_port))
    return Gateway(platform, folder, *options, tokens=(TOKEN,))


def test_a_gateway_killed_mid_run_and_restarted_ends_the_run_with_every_record_once(
    platform: LocalPlatform, tmp_path: Path
) -> None:
    ports = [free_port(), free_port()]
    states = [tmp_path / "state-1", tmp_path / "state-2"]
    gateways = [start_gateway(platform, tmp_path / f"gateway-{n}", states[n], ports[n]) for n in range(2)]
    try:
        with agent_collector(platform, gateways, tmp_path, TOKEN) as env:
            rank = Rank({**env, conv.HEARTBEAT_SECONDS_ENV: "1"}, tmp_path / "rank0.log")
            try:
                run_id = rank.expect("RUN")
                rank.tell("log 6")
                logged = list(rank.expect("LOGGED"))
                # A one-element list, so that gateway 0 holding the run counts as found.
                [holder] = wait_for(
                    lambda: next(([n] for n, g in enumerate(gateways) if run_id in g.runs()), None),
                    "the run to reach a gateway",
                )
                held = wait_for(
                    lambda: gateways[holder].runs()[run_id]["received"].get("0", {}).get("episodes") == 6,
                    "the first records to arrive",
                )
                assert held
                gateways[holder].process.send_signal(signal.SIGKILL)
                gateways[holder].process.wait(10)
                rank.tell("log 4")  # the Collector holds these and retries while the gateway is down
                logged += rank.expect("LOGGED")
                gateways[holder] = start_gateway(
                    platform, tmp_path / f"gateway-{holder}-again", states[holder], ports[holder]
                )
                rank.tell("finish")
                rank.expect("DONE")
                closed = gateways[holder].wait_closed(run_id, timeout=120)
            finally:
                rank.stop()
    finally:
        for gateway in gateways:
            gateway.stop()
    assert closed["status"] == "completed"
    assert closed["missing"] == 0 and closed["reason"] == "every rank's records and end marker arrived"
    assert closed["received"]["0"]["episodes"] == 10
    landed = [episode["id"] for episode in platform.inspect.episodes(run_id)["items"]]
    assert sorted(landed) == sorted(logged)  # every record once, none twice
    assert platform.inspect.run(run_id)["status"] in ("PROCESSING", "COMPLETED")


def test_a_training_run_taken_up_after_a_sigkill_keeps_its_step_rows_and_records(
    platform: LocalPlatform, tmp_path: Path
) -> None:
    """Straight to one gateway (no Collector): records and step rows acknowledged before the kill are counted and
    delivered after the restart, so the run completes with nothing missing and one metrics row per step."""
    state = tmp_path / "state"
    options = ("--lease-seconds", str(LEASE_SECONDS), "--state-dir", str(state), "--samples-step-interval", "1")
    run_id = create_run(platform, "train", "restart-train")
    resource = run_resource(run_id, "train")
    episodes = fresh_episodes("train", 3, step=4)
    first = Gateway(platform, tmp_path / "first", *options, tokens=(TOKEN,))
    try:
        exporter = HttpSpanExporter(endpoint=f"{first.http_url}/v1/traces", headers=AUTH)
        metrics = OTLPMetricExporter(endpoint=f"{first.http_url}/v1/metrics", headers=AUTH)
        assert exporter.export(episode_spans(episodes, resource)) is SpanExportResult.SUCCESS
        for step, values in ((4, {"loss": 0.5}), (5, {"loss": 0.25})):
            assert metrics.export(step_metrics(resource, step, values)) is MetricExportResult.SUCCESS
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(10)
    finally:
        first.stop()
    with Gateway(platform, tmp_path / "again", *options, tokens=(TOKEN,)) as again:
        exporter = HttpSpanExporter(endpoint=f"{again.http_url}/v1/traces", headers=AUTH)
        assert exporter.export([end_marker(resource, episodes=3, metric_rows=2)]) is SpanExportResult.SUCCESS
        closed = again.wait_closed(run_id, timeout=120)
    assert closed["status"] == "completed" and closed["missing"] == 0
    snapshot = platform.inspect.run(run_id)
    assert sorted((row["step"], row["loss"]) for row in snapshot["metric_rows"]) == [(4, 0.5), (5, 0.25)]
    landed = [episode["id"] for episode in platform.inspect.episodes(run_id)["items"]]
    assert sorted(landed) == sorted(episode.id for episode in episodes)
