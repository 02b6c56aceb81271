"""A Collector sending the wrong bearer token is refused at the gateway: nothing of the run is opened or
delivered, and the Collector reports the refusal (UNAUTHENTICATED) instead of the gateway acting on the data.
Skipped without the Collector binary (``make collector``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from prime_otel.testing import LocalPlatform
from tests.gateway._collector import agent_collector
from tests.gateway._gateway import Gateway, create_run, wait_for
from tests.gateway._producer import end_marker, episode_spans, fresh_episodes, run_resource

pytestmark = [
    pytest.mark.slow,
]


def test_a_collector_with_a_wrong_token_is_refused_at_the_gateway(platform: LocalPlatform, tmp_path: Path) -> None:
    with (
        Gateway(platform, tmp_path / "gateway", "--lease-seconds", "30", tokens=("the-right-token",)) as gateway,
        agent_collector(platform, [gateway], tmp_path, "a-wrong-token") as env,
    ):
        run_id = create_run(platform, "eval", "collector-wrong-token")
        resource = run_resource(run_id, "eval")
        exporter = GrpcSpanExporter(endpoint=env["OTEL_EXPORTER_OTLP_ENDPOINT"], insecure=True)
        try:
            spans = [*episode_spans(fresh_episodes("eval", 2), resource), end_marker(resource, status="failed")]
            assert exporter.export(spans) is SpanExportResult.SUCCESS  # the agent took it
        finally:
            exporter.shutdown()
        log = tmp_path / "collector.log"
        wait_for(lambda: "Unauthenticated" in log.read_text(errors="replace"), "the Collector to report the refusal")
        assert gateway.runs() == {}
    assert platform.inspect.run(run_id)["status"] == "RUNNING"
    assert platform.inspect.episodes(run_id)["items"] == []
