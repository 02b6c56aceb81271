"""What a request came to: records refused (OTLP ``partial_success``, with why), or ``Saturated`` (503 /
``UNAVAILABLE``: the sender retries the whole request; what was taken is then recognised as a replay)."""

from __future__ import annotations

from dataclasses import dataclass, field

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

RETRY_AFTER_SECONDS = 1
_MAX_MESSAGE_CHARS = 1000


class Saturated(Exception):
    """The gateway cannot take the request now (a queue is full, a cap is reached, it is stopping): retry later."""

    def __init__(self, reason: str, retry_after: int = RETRY_AFTER_SECONDS) -> None:
        super().__init__(f"{reason}; retry after {retry_after} s")
        self.retry_after = retry_after


@dataclass
class Outcome:
    """What became of one request: records rejected (OTLP ``partial_success``) and why; ``retry`` when some of
    its records could not be queued (the request is answered 503 so the sender sends it again)."""

    rejected: int = 0
    reasons: list[str] = field(default_factory=list)
    retry: str | None = None

    def reject(self, count: int, reason: str) -> None:
        if count:
            self.rejected += count
            if reason not in self.reasons:
                self.reasons.append(reason)

    @property
    def message(self) -> str:
        # Reasons can quote what the sender sent; the answer must encode whatever it was.
        text = "; ".join(self.reasons)[:_MAX_MESSAGE_CHARS]
        return text.encode("utf-8", "replace").decode("utf-8")

    def trace_response(self) -> ExportTraceServiceResponse:
        """The answer to a traces export, over HTTP or gRPC: ``partial_success`` names the rejected spans."""
        response = ExportTraceServiceResponse()
        if self.rejected:
            response.partial_success.rejected_spans = self.rejected
            response.partial_success.error_message = self.message
        return response

    def metrics_response(self) -> ExportMetricsServiceResponse:
        """The answer to a metrics export: ``partial_success`` names the rejected data points."""
        response = ExportMetricsServiceResponse()
        if self.rejected:
            response.partial_success.rejected_data_points = self.rejected
            response.partial_success.error_message = self.message
        return response
