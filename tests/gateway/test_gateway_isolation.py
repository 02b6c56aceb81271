"""In the gateway too, one bad received record costs only itself: JSON nested deeper than a parser goes, or a
record no sink can encode (a lone surrogate), is counted, and the other records of the request are delivered."""

from __future__ import annotations

import json

from opentelemetry.sdk.resources import Resource

from prime_otel.gateway._spans import GatewayRecordProcessor, ReceivedRecord
from prime_otel.processors import SinkSlot
from tests.gateway._sinks import GatedSink


def _received(record_json: str) -> ReceivedRecord:
    return ReceivedRecord(name="episode", record_json=record_json, samples_json=None, end_time_ns=0)


def test_a_deep_or_unencodable_received_record_costs_only_itself() -> None:
    sink = GatedSink(opened=True)
    slot = SinkSlot(sink)
    processor = GatewayRecordProcessor([slot], Resource.create({}))
    valid = [{"id": f"e{i}", "traces": []} for i in range(2)]
    deep = '{"id": "deep", "traces": [], "info": ' + "[" * 100_000 + "]" * 100_000 + "}"
    surrogate = '{"id": "surrogate", "traces": [], "note": "\\ud800"}'
    received = [_received(json.dumps(valid[0])), _received(deep), _received(surrogate), _received(json.dumps(valid[1]))]
    assert processor.offer("episode", received)
    assert processor.flush(10)

    assert sink.records == valid
    assert processor.invalid_reasons == {"episode record JSON nested too deeply": 1}
    assert slot.failed == 1 and slot.failure_reasons == {"invalid string (lone surrogate)": 1}
    assert not processor.saturated
    assert processor.close(5)
