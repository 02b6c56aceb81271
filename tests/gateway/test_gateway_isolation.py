"""In the gateway too, one bad received record costs only itself: JSON nested deeper than a parser goes, or a
record no sink can encode (a lone surrogate), is counted, and the other records of the request are delivered."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource

from prime_otel._sink import SinkStats
from prime_otel.gateway._spans import GatewayRecordProcessor, ReceivedRecord
from prime_otel.processors import SinkSlot
from prime_otel.records import record_of


class KeepingSink:
    name = "keeping"
    replay_safe = False
    reports_requests = False
    quiet_off_reason = None

    def __init__(self) -> None:
        self.enabled = True
        self.stats = SinkStats()
        self.written: list[Any] = []

    def write(self, items: Sequence[Any]) -> None:
        self.written.extend(record_of(item) for item in items)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        return None

    def reset_after_fork(self) -> None:
        return None


def _received(record_json: str) -> ReceivedRecord:
    return ReceivedRecord(name="episode", record_json=record_json, samples_json=None, end_time_ns=0)


def test_a_deep_or_unencodable_received_record_costs_only_itself() -> None:
    sink = KeepingSink()
    slot = SinkSlot(sink)
    processor = GatewayRecordProcessor([slot], Resource.create({}))
    valid = [{"id": f"e{i}", "traces": []} for i in range(2)]
    deep = '{"id": "deep", "traces": [], "info": ' + "[" * 100_000 + "]" * 100_000 + "}"
    surrogate = '{"id": "surrogate", "traces": [], "note": "\\ud800"}'
    received = [_received(json.dumps(valid[0])), _received(deep), _received(surrogate), _received(json.dumps(valid[1]))]
    assert processor.offer("episode", received)
    assert processor.flush(10)

    assert sink.written == valid
    assert processor.invalid_reasons == {"episode record JSON nested too deeply": 1}
    assert slot.failed == 1 and slot.failure_reasons == {"invalid string (lone surrogate)": 1}
    assert not processor.saturated
    assert processor.close(5)
