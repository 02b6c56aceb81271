"""The tee: the run's spans and step metric points also go to an OTLP endpoint the user chose (their Jaeger,
Phoenix, Langfuse or Collector), while the platform sinks run as they would without it.

Everything the tee sends leaves on its own threads through a bounded queue: the platform sinks never wait for
it, and what it cannot take (queue full, endpoint down) is dropped, logged and counted in ``dropped``.
Episode spans carry the GenAI attributes and evaluation events of ``records/_genai_view.py`` beside the record.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.metrics.export import MetricExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from .. import _conventions as conv
from ..client import suppressed_instrumentation
from ..records import PlainRecordSpan, RecordSpan
from .otlp import OtlpMetricsSink, record_span_out

_logger = logging.getLogger(__name__)

PROTOCOLS = ("grpc", "http/protobuf")
_QUEUE_BATCHES = 256
_STOP = object()


def tee_endpoint(argument: str | None) -> str | None:
    """``init(tee_otlp_endpoint=...)``, else ``PRIME_OTEL_TEE_ENDPOINT``; None (no tee) when neither is set."""
    value = argument if argument is not None else os.environ.get(conv.TEE_ENDPOINT_ENV, "")
    return value.strip() or None


def tee_protocol(endpoint: str) -> str:
    """``PRIME_OTEL_TEE_PROTOCOL`` (``grpc`` or ``http/protobuf``); by default gRPC, or OTLP/HTTP for an endpoint
    whose port is 4318 or that has a path."""
    chosen = os.environ.get(conv.TEE_PROTOCOL_ENV, "").strip().lower()
    if chosen:
        if chosen not in PROTOCOLS:
            raise ValueError(f"{conv.TEE_PROTOCOL_ENV} must be one of {PROTOCOLS}, got {chosen!r}")
        return chosen
    rest = endpoint.split("://", 1)[-1]
    return "http/protobuf" if rest.endswith(":4318") or "/" in rest.rstrip("/") else "grpc"


def tee_exporters(endpoint: str, protocol: str) -> tuple[SpanExporter, MetricExporter]:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        insecure = not endpoint.startswith("https://")
        return OTLPSpanExporter(endpoint=endpoint, insecure=insecure), OTLPMetricExporter(
            endpoint=endpoint, insecure=insecure
        )
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter

    base = endpoint.rstrip("/")
    return HttpSpanExporter(endpoint=f"{base}/v1/traces"), HttpMetricExporter(endpoint=f"{base}/v1/metrics")


class _QuietExporter(SpanExporter):
    """The tee's span exporter, counting what the endpoint refused; its requests are never instrumented."""

    def __init__(self, exporter: SpanExporter, tee: OtlpTee) -> None:
        self._exporter = exporter
        self._tee = tee

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with suppressed_instrumentation():
            result = self._exporter.export(spans)
        if result is SpanExportResult.SUCCESS:
            self._tee.sent_spans += len(spans)
        else:
            self._tee.count_dropped(len(spans), "the tee endpoint refused spans")
        return result

    def shutdown(self) -> None:
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._exporter.force_flush(timeout_millis)


class OtlpTee(SpanProcessor):
    """On the run's tracer provider it passes every span on; the records processor hands it the record spans
    (:meth:`records`) and the metrics uploader the step rows (:meth:`rows`)."""

    def __init__(self, span_exporter: SpanExporter, metric_exporter: MetricExporter, resource: Resource) -> None:
        self._resource = resource
        self._spans = BatchSpanProcessor(_QuietExporter(span_exporter, self))
        self._metrics = OtlpMetricsSink(metric_exporter, resource)
        self.sent_spans = 0
        self.sent_rows = 0
        self.dropped = 0
        self._warned: set[str] = set()
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=_QUEUE_BATCHES)
        self._worker = self._start_worker()

    def _start_worker(self) -> threading.Thread:
        worker = threading.Thread(target=self._work, name="prime-otel-tee", daemon=True)
        worker.start()
        return worker

    # -- what the run hands over -----------------------------------------------------------------------------

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        self._spans.on_end(span)

    def records(self, spans: Sequence[ReadableSpan]) -> None:
        self._hand(self._send_records, list(spans))

    def rows(self, rows: Sequence[dict[str, Any]]) -> None:
        self._hand(self._send_rows, list(rows))

    def _hand(self, send: Callable[[list[Any]], None], items: list[Any]) -> None:
        if os.getpid() != self._pid:  # a forked child gets its own worker
            self._pid = os.getpid()
            self._queue = queue.Queue(maxsize=_QUEUE_BATCHES)
            self._worker = self._start_worker()
        try:
            self._queue.put_nowait((send, items))
        except queue.Full:
            self.count_dropped(len(items), "the tee's queue is full")

    def count_dropped(self, count: int, reason: str) -> None:
        with self._lock:
            self.dropped += count
            first = reason not in self._warned
            self._warned.add(reason)
        if first:
            _logger.warning("%s: %d items not teed (further losses are counted in the tee's dropped)", reason, count)

    # -- the worker ------------------------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                send, items = item
                send(items)
            except Exception as error:
                self.count_dropped(len(item[1]), f"teeing failed ({type(error).__name__})")
            finally:
                self._queue.task_done()

    def _send_records(self, spans: list[ReadableSpan]) -> None:
        for span in spans:
            # A span ended through the run's tracer (a plain-API record, an assembled GenAI episode) was teed as
            # it ended; a second copy would repeat its span id.
            if isinstance(span, RecordSpan) and not isinstance(span, PlainRecordSpan):
                self._spans.on_end(record_span_out(span, self._resource))

    def _send_rows(self, rows: list[dict[str, Any]]) -> None:
        self._metrics.write(rows)
        self.sent_rows += len(rows)

    # -- the end ---------------------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """After the records processor drained (it is registered before the tee): send what is queued, then close."""
        with contextlib.suppress(queue.Full):
            self._queue.put(_STOP, timeout=5.0)
        self._worker.join(10.0)
        self._spans.shutdown()
        self._metrics.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._spans.force_flush(timeout_millis)
