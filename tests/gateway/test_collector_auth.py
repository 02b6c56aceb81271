"""A Collector sending the wrong bearer token, or none (its ``GATEWAY_TOKEN`` left empty), is refused at the
gateways: nothing of the run is opened or delivered on either of the two gateways it balances onto, and the
Collector reports the refusal (UNAUTHENTICATED) instead of a gateway acting on the data. Skipped without the
Collector binary (``make collector``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from prime_otel.testing import LocalPlatform
from tests._waiting import wait_for
from tests.gateway._collector import agent_collector
from tests.gateway._gateway import Gateway, create_run
from tests.gateway._producer import end_marker, episode_spans, fresh_episodes, run_resource

pytestmark = [
    pytest.mark.slow,
]


@pytest.mark.parametrize("token", ["a-wrong-token", ""], ids=["wrong-token", "missing-token"])
def test_a_collector_with_a_wrong_or_missing_token_is_refused_at_the_gateways(
    platform: LocalPlatform, tmp_path: Path, token: str
) -> None:
    gateways = [
        Gateway(platform, tmp_path / f"gateway-{n}", "--lease-seconds", "30", tokens=("the-right-token",))
        for n in range(2)
    ]
    try:
        with agent_collector(platform, gateways, tmp_path, token) as env:
            run_ids = [create_run(platform, "eval", f"collector-{token or 'no'}-token-{n}") for n in range(4)]
            exporter = GrpcSpanExporter(endpoint=env["OTEL_EXPORTER_OTLP_ENDPOINT"], insecure=True)
            try:
                for run_id in run_ids:  # four runs, so that load balancing sends to both gateways
                    resource = run_resource(run_id, "eval")
                    spans = [*episode_spans(fresh_episodes("eval", 2), resource), end_marker(resource, status="failed")]
                    assert exporter.export(spans) is SpanExportResult.SUCCESS  # the agent took it
            finally:
                exporter.shutdown()
            log = tmp_path / "collector.log"
            every_span = len(run_ids) * 3
            wait_for(lambda: _refused_spans(log) == every_span, "the Collector to report every span refused")
            assert [gateway.runs() for gateway in gateways] == [{}, {}]
    finally:
        for gateway in gateways:
            gateway.stop()
    for run_id in run_ids:
        assert platform.inspect.run(run_id)["status"] == "RUNNING"
        assert platform.inspect.episodes(run_id)["items"] == []


def _refused_spans(log: Path) -> int:
    """Spans the Collector's log says a gateway refused as unauthenticated (it drops them: a permanent error)."""
    refused = 0
    for line in log.read_text(errors="replace").splitlines():
        if "code = Unauthenticated" in line:
            found = re.search(r'"dropped_items": (\d+)', line)
            refused += int(found.group(1)) if found else 0
    return refused
