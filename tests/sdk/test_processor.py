"""The records processor: bounded queue, coalescing, barriers, strikes and retirement, loss counting."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

from prime_otel.errors import RetryableAPIError, UnauthorizedError, ValidationRejectedError
from prime_otel.exporters._base import RecordSink
from prime_otel.processors import RecordProcessor, SinkSlot
from prime_otel.processors._spool import RunSpool
from prime_otel.records import record_of

RESOURCE = Resource.create({"run.id": "r1"})


class RecordingSink(RecordSink):
    """Stores every batch it is given; can be told to fail or to hold until released."""

    def __init__(self, name: str = "recording") -> None:
        super().__init__()
        self.name = name
        self.batches: list[list[object]] = []
        self.failures: list[BaseException] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()

    def write(self, spans: Sequence[ReadableSpan]) -> None:
        self.entered.set()
        self.gate.wait(10)
        if self.failures:
            raise self.failures.pop(0)
        self.batches.append([record_of(span) for span in spans])
        self._count(delivered=len(spans), requests=1)


def episode(i: int) -> dict[str, object]:
    return {"id": f"e{i}", "traces": [{"id": f"t{i}"}], "ok": True}


def trace(i: int) -> dict[str, object]:
    return {"id": f"t{i}"}


def test_records_reach_every_sink_in_order_and_become_episode_spans() -> None:
    first, second = RecordingSink("a"), RecordingSink("b")
    processor = RecordProcessor([SinkSlot(first), SinkSlot(second)], RESOURCE)
    processor.submit([episode(1), episode(2)])
    assert processor.flush(5)
    assert first.batches == second.batches == [[episode(1), episode(2)]]
    assert processor.close(5)


def test_a_full_queue_blocks_briefly_then_drops_and_counts_the_new_batch() -> None:
    """The producer is never stalled longer than the put timeout; the dropped batch is counted."""
    exporter = RecordingSink()
    exporter.gate.clear()
    processor = RecordProcessor([SinkSlot(exporter)], RESOURCE, max_queue_batches=1, put_timeout=0.5)
    processor.submit([episode(0)])
    assert exporter.entered.wait(5)
    processor.submit([episode(1)])  # waits behind the sink's write, in its lane
    processor.submit([episode(2)])  # the uploader waits for room in the lane
    processor.submit([episode(3)])  # fills the queue
    assert processor.submit([episode(4), episode(5)]) is False
    assert processor.dropped_records == 2
    exporter.gate.set()
    assert processor.flush(5)
    delivered = [record["id"] for batch in exporter.batches for record in batch]  # type: ignore[index]
    assert delivered == ["e0", "e1", "e2", "e3"]


def test_batches_queued_during_one_request_coalesce_but_kinds_never_mix() -> None:
    """Batches queued during one request coalesce into one dispatch, but episodes and traces never mix."""
    exporter = RecordingSink()
    exporter.gate.clear()
    processor = RecordProcessor([SinkSlot(exporter)], RESOURCE)
    processor.submit([episode(0)])
    assert exporter.entered.wait(5)
    processor.submit([episode(1)])
    processor.submit([episode(2)])
    processor.submit([trace(3)])
    processor.submit([episode(4)])
    exporter.gate.set()
    assert processor.flush(5)
    shapes = [[record["id"] for record in batch] for batch in exporter.batches]  # type: ignore[index]
    assert shapes == [["e0"], ["e1", "e2"], ["t3"], ["e4"]]


def test_three_transient_failures_retire_an_eval_sink_and_later_batches_count_as_failed() -> None:
    """Three transient failures retire an eval sink; batches skipped by a retired sink count as failed."""
    failing, healthy = RecordingSink("failing"), RecordingSink("healthy")
    failing.failures = [RetryableAPIError("503", status_code=503) for _ in range(3)]
    slot = SinkSlot(failing)
    processor = RecordProcessor([slot, SinkSlot(healthy)], RESOURCE)
    for i in range(4):
        processor.submit([episode(i)])
        assert processor.flush(5)
    assert slot.retired and not failing.enabled
    assert slot.failed == 4
    assert len(healthy.batches) == 4


def test_a_success_resets_strikes() -> None:
    """A success resets the sink's strikes."""
    exporter = RecordingSink()
    exporter.failures = [RetryableAPIError("503", status_code=503), RetryableAPIError("503", status_code=503)]
    slot = SinkSlot(exporter)
    processor = RecordProcessor([slot], RESOURCE)
    for i in range(3):
        processor.submit([episode(i)])
        assert processor.flush(5)
    assert slot.strikes == 0 and not slot.retired
    assert slot.failed == 2


def test_a_record_rejection_costs_only_its_batch() -> None:
    """A record rejection loses only its batch: the sink stays enabled and its strikes are unchanged."""
    exporter = RecordingSink()
    exporter.failures = [ValidationRejectedError("bad", status_code=400)]
    slot = SinkSlot(exporter)
    processor = RecordProcessor([slot], RESOURCE)
    processor.submit([episode(1), episode(2)])
    processor.flush(5)
    processor.submit([episode(3)])
    processor.flush(5)
    assert slot.failed == 2 and slot.strikes == 0 and exporter.enabled
    assert exporter.batches == [[episode(3)]]


def test_a_permanent_failure_retires_at_once_even_for_a_training_sink() -> None:
    """A permanent failure retires the sink at once, with no cooldown even for training."""
    exporter = RecordingSink()
    exporter.failures = [UnauthorizedError("no", status_code=401)]
    slot = SinkSlot(exporter, pause_seconds=300)
    processor = RecordProcessor([slot], RESOURCE)
    processor.submit([episode(1)])
    processor.flush(5)
    assert slot.retired and not slot.paused
    assert slot.failed == 1 and exporter.batches == []


def test_a_paused_training_sink_revives_after_its_cooldown() -> None:
    """Three transient failures pause a training sink; it revives at the first dispatch after the cooldown."""
    now = [0.0]
    exporter = RecordingSink()
    exporter.failures = [RetryableAPIError("503", status_code=503) for _ in range(3)]
    slot = SinkSlot(exporter, pause_seconds=300, clock=lambda: now[0])
    processor = RecordProcessor([slot], RESOURCE)
    for i in range(4):
        processor.submit([episode(i)])
        processor.flush(5)
    assert slot.paused and slot.failed == 4
    now[0] = 301.0
    processor.submit([episode(9)])
    processor.flush(5)
    assert not slot.paused and exporter.batches == [[episode(9)]]


def test_the_uploader_survives_an_exporter_that_raises_anything() -> None:
    """The uploader thread survives any exception an exporter raises: the batch it raised on is counted failed,
    the sink (an unknown error being no transient one) is retired, and later batches are counted failed too."""
    exporter = RecordingSink()
    exporter.failures = [RuntimeError("boom")]
    slot = SinkSlot(exporter)
    processor = RecordProcessor([slot], RESOURCE)
    processor.submit([episode(1), episode(2)])
    assert processor.flush(5)
    assert processor._thread is not None and processor._thread.is_alive()
    assert slot.failed == 2 and slot.retired
    processor.submit([episode(3)])
    assert processor.flush(5)
    assert exporter.batches == [] and slot.failed == 3


def test_episode_spans_from_a_plain_tracer_carry_their_record_and_child_spans() -> None:
    """Plain OpenTelemetry APIs: the record rides in ``prime.record.json``; child spans attach to the episode."""
    exporter = RecordingSink()
    processor = RecordProcessor([SinkSlot(exporter)], RESOURCE)
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    record_attributes = {"prime.record.json": json.dumps(episode(1))}
    with (
        tracer.start_as_current_span("episode", attributes=record_attributes),
        tracer.start_as_current_span("chat qwen", attributes={"gen_ai.usage.input_tokens": 12}),
    ):
        pass
    with tracer.start_as_current_span("episode"):  # no record: counted, reaches no sink
        pass
    with tracer.start_as_current_span("not-a-record"):
        pass
    assert processor.flush(5)
    [[record]] = exporter.batches
    assert record["id"] == "e1"
    [child] = record["otel_spans"]
    assert child["name"] == "chat qwen" and child["attributes"] == {"gen_ai.usage.input_tokens": 12}


def test_close_writes_what_was_queued_then_refuses_new_records() -> None:
    """Close writes what was queued before it; a submit after close is refused and not counted as dropped."""
    exporter = RecordingSink()
    processor = RecordProcessor([SinkSlot(exporter)], RESOURCE)
    processor.submit([episode(1)])
    assert processor.close(5)
    assert exporter.batches == [[episode(1)]]
    assert processor.submit([episode(2)]) is False
    assert processor.dropped_records == 0


@pytest.mark.parametrize("timeout", [0.0, 0.05])
def test_flush_returns_false_when_the_deadline_passes_first(timeout: float) -> None:
    exporter = RecordingSink()
    exporter.gate.clear()
    processor = RecordProcessor([SinkSlot(exporter)], RESOURCE)
    processor.submit([episode(1)])
    assert exporter.entered.wait(5)
    assert processor.flush(timeout) is False
    exporter.gate.set()
    assert processor.flush(5)


class SlowToEncode:
    """An episode object whose ``to_record()`` takes a while: the uploader is busy encoding, not sending."""

    def __init__(self, index: int, started: threading.Event) -> None:
        self.index = index
        self.traces = [{"id": f"t{index}"}]
        self._started = started

    def to_record(self) -> dict[str, object]:
        self._started.set()
        time.sleep(0.3)
        return episode(self.index)


def _ids(exporter: RecordingSink) -> list[str]:
    return [r["id"] if isinstance(r, dict) else f"e{r.index}" for b in exporter.batches for r in b]  # type: ignore[attr-defined]


def test_with_a_spool_a_full_queue_spills_while_the_uploader_waits_on_the_platform(tmp_path: Path) -> None:
    """Issue 6: a platform that holds a request never stalls the producer; the batch waits on disk, and lands once."""
    exporter = RecordingSink()
    exporter.gate.clear()
    spool = RunSpool(tmp_path, sinks=[exporter.name])
    processor = RecordProcessor([SinkSlot(exporter, spool=spool)], RESOURCE, max_queue_batches=1, spool=spool)
    slot = processor.slots[0]
    processor.submit([episode(0)])
    assert exporter.entered.wait(5)
    processor.submit([episode(1)])  # waits in the sink's lane, which is then full
    assert processor.submit([episode(2)]) is True
    deadline = time.monotonic() + 5
    while slot.pending < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert slot.pending == 1 and processor.dropped_records == 0  # e2 waits on disk for the sink
    exporter.gate.set()
    assert processor.flush(10, drain_spool=True)
    assert sorted(_ids(exporter)) == ["e0", "e1", "e2"]
    assert processor.close(5)


def test_with_a_spool_a_full_queue_waits_for_an_uploader_that_is_encoding(tmp_path: Path) -> None:
    """The uploader takes the whole queue as soon as it has encoded what it holds: waiting costs less than writing
    the batch to disk and reading it back, so nothing is spilled."""
    exporter = RecordingSink()
    started = threading.Event()
    spool = RunSpool(tmp_path, sinks=[exporter.name])
    processor = RecordProcessor([SinkSlot(exporter, spool=spool)], RESOURCE, max_queue_batches=1, spool=spool)
    processor.submit([SlowToEncode(0, started)])
    assert started.wait(5)
    processor.submit([episode(1)])  # fills the queue while record 0 is being encoded
    assert processor.submit([episode(2)]) is True
    assert processor.spilled_records == 0
    assert processor.flush(10)
    assert _ids(exporter) == ["e0", "e1", "e2"]
    assert processor.close(5)
