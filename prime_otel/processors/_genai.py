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
from ..records._genai import GenAISpan, assemble_episode, has_genai_content, marks_episode

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
        self.assembled = 0

    def on_start(self, span: Span) -> None:
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

    def on_end(self, span: ReadableSpan) -> dict[str, Any] | None:
        """Keeps a span of a trace with an open episode; for an episode span, returns its assembled record (None
        when no GenAI span and no evaluation came with it)."""
        trace_id = span.context.trace_id
        episode = marks_episode(span.name, span.attributes or {})
        with self._lock:
            trace = self._traces.get(trace_id)
            if not episode:
                if trace is None:
                    if conv.GEN_AI_OPERATION not in (span.attributes or {}):
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
        episode_view, views = GenAISpan.of(span), [GenAISpan.of(each) for each in spans]
        if not has_genai_content(episode_view, views):
            return None
        record = assemble_episode(
            episode_view,
            views,
            adopt_orphans=not started,
            spans_dropped=dropped,
        )
        self.assembled += 1
        return record

    def reset_after_fork(self) -> None:
        self._traces = OrderedDict()
        self._lock = threading.Lock()
