"""Episodes from standard GenAI spans, in-process: the spans ended under an open episode span are kept per trace
(bounded), and when the episode span ends they are assembled into its record (``records/_genai.py``)."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, Span

from .. import _conventions as conv
from .._conventions import EPISODE_SPAN
from ..records import PlainRecordSpan, UnencodableRecord
from ..records._genai import GenAISpan, assemble_episode, marks_episode

_logger = logging.getLogger(__name__)

#: Traces with an open episode kept at once; past it the oldest is given up (its episode misses its spans).
DEFAULT_MAX_TRACES = 4096
#: Spans kept per trace; past it the trace's later spans are counted in the record's ``info.spans_dropped``.
DEFAULT_MAX_SPANS_PER_TRACE = 4096


@dataclass
class _TraceSpans:
    #: Episode spans seen starting and not ended; 0 when spans arrive only at their end (another provider's
    #: exporter hands them over), where GenAI spans are kept by their attributes alone.
    open_episodes: int = 0
    spans: list[ReadableSpan] = field(default_factory=list)
    dropped: int = 0


class GenAIEpisodes:
    """The per-trace span buffer behind the records processor's assembled episodes."""

    def __init__(
        self, *, max_traces: int = DEFAULT_MAX_TRACES, max_spans_per_trace: int = DEFAULT_MAX_SPANS_PER_TRACE
    ) -> None:
        self._max_traces = max_traces
        self._max_spans = max_spans_per_trace
        self._traces: OrderedDict[int, _TraceSpans] = OrderedDict()
        self._lock = threading.Lock()
        self.evicted_traces = 0
        #: Spans reach this processor at their start too (it is on a tracer provider): only traces with an open
        #: episode are kept. Spans handed over only at their end (``Run.ingest_span``) are kept by their GenAI
        #: attributes, since no start told which traces hold an episode.
        self._sees_starts = False

    def on_start(self, span: Span) -> None:
        self._sees_starts = True
        if not marks_episode(span.name, span.attributes or {}):
            return
        with self._lock:
            trace = self._traces.get(span.context.trace_id)
            if trace is None:
                trace = self._traces[span.context.trace_id] = _TraceSpans()
                self._evict()
            trace.open_episodes += 1

    def _evict(self) -> None:
        while len(self._traces) > self._max_traces:
            self._traces.popitem(last=False)
            self.evicted_traces += 1
            if self.evicted_traces == 1:
                _logger.warning(
                    "more than %d traces hold an open episode span; the oldest are given up (their episodes "
                    "are assembled without the spans seen so far)",
                    self._max_traces,
                )

    def on_end(self, span: ReadableSpan) -> PendingEpisode | None:
        """Keeps a span of a trace with an open episode; for an episode span, returns it with the spans kept under
        it, to assemble (None when no GenAI span and no evaluation came with it)."""
        trace_id = span.context.trace_id
        episode = marks_episode(span.name, span.attributes or {})
        with self._lock:
            trace = self._traces.get(trace_id)
            if not episode:
                if trace is None:
                    if self._sees_starts or conv.GEN_AI_OPERATION not in (span.attributes or {}):
                        return None
                    trace = self._traces[trace_id] = _TraceSpans()
                    self._evict()
                if len(trace.spans) < self._max_spans:
                    trace.spans.append(span)
                else:
                    trace.dropped += 1
                return None
            started = trace is not None and trace.open_episodes > 0
            spans, dropped = (list(trace.spans), trace.dropped) if trace is not None else ([], 0)
            if trace is not None:
                trace.open_episodes -= 1
                if trace.open_episodes <= 0:
                    self._traces.pop(trace_id, None)
        evaluated = any(event.name == conv.EVALUATION_EVENT for event in span.events)
        if not evaluated and not any(conv.GEN_AI_OPERATION in (each.attributes or {}) for each in spans):
            return None
        return PendingEpisode(span, spans, dropped, adopt_orphans=not started)

    def reset_after_fork(self) -> None:
        self._traces = OrderedDict()
        self._lock = threading.Lock()


class PendingEpisode:
    """An ended episode span and the spans kept under it, assembled on the uploader's thread (a long conversation
    costs milliseconds, which the producer's ``span.end()`` must not pay)."""

    __slots__ = ("_adopt_orphans", "_dropped", "_spans", "span")

    def __init__(self, span: ReadableSpan, spans: list[ReadableSpan], dropped: int, *, adopt_orphans: bool) -> None:
        self.span = span
        self._spans = spans
        self._dropped = dropped
        self._adopt_orphans = adopt_orphans

    def record(self) -> dict[str, Any]:
        """The assembled record; :class:`UnencodableRecord` (counted failed on every sink) when assembly fails."""
        try:
            return assemble_episode(
                GenAISpan.of(self.span),
                [GenAISpan.of(each) for each in self._spans],
                adopt_orphans=self._adopt_orphans,
                spans_dropped=self._dropped,
            )
        except Exception as error:
            _logger.debug("assembling a GenAI episode failed", exc_info=True)
            raise UnencodableRecord(f"GenAI episode not assembled: {type(error).__name__}") from error

    def record_span(self) -> PlainRecordSpan:
        return PlainRecordSpan(self.span, self.record(), [], name=EPISODE_SPAN)
