"""Episodes assembled from the standard GenAI spans a run's producers sent (``records/_genai.py``).

The spans of one trace cross batches, Collectors and retries in any order, so a trace is assembled only once its
``episode`` span arrived and no span of the trace came for ``settle_seconds``, or when the run closes. Bounded:
at most ``max_traces`` traces held (the oldest is given up, counted), ``max_spans`` per trace (later ones counted in
the record's ``info.spans_dropped``), and a trace whose episode span never comes is forgotten after
``window_seconds`` (counted).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..records._genai import GenAISpan, assemble_episode, has_genai_content, marks_episode

_logger = logging.getLogger(__name__)

SETTLE_SECONDS = 2.0
WINDOW_SECONDS = 300.0
MAX_TRACES = 4096
MAX_SPANS_PER_TRACE = 4096


@dataclass
class _Trace:
    last_arrival: float
    spans: list[GenAISpan] = field(default_factory=list)
    #: The episode spans, each with the rank of the producer that sent it.
    episodes: list[tuple[int, GenAISpan]] = field(default_factory=list)
    dropped: int = 0


class EpisodeAssembler:
    def __init__(
        self,
        *,
        settle_seconds: float = SETTLE_SECONDS,
        window_seconds: float = WINDOW_SECONDS,
        max_traces: int = MAX_TRACES,
        max_spans: int = MAX_SPANS_PER_TRACE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settle = settle_seconds
        self._window = window_seconds
        self._max_traces = max_traces
        self._max_spans = max_spans
        self._clock = clock
        self._traces: OrderedDict[int, _Trace] = OrderedDict()
        self._lock = threading.Lock()
        #: Traces given up: over the bound, or without an episode span within the window.
        self.abandoned_traces = 0

    def add(self, rank: int, spans: Iterable[GenAISpan]) -> None:
        now = self._clock()
        with self._lock:
            for span in spans:
                trace = self._traces.get(span.trace_id)
                if trace is None:
                    trace = self._traces[span.trace_id] = _Trace(now)
                    self._bound()
                trace.last_arrival = now
                self._traces.move_to_end(span.trace_id)
                if marks_episode(span.name, span.attributes):
                    trace.episodes.append((rank, span))
                elif len(trace.spans) < self._max_spans:
                    trace.spans.append(span)
                else:
                    trace.dropped += 1

    def _bound(self) -> None:
        while len(self._traces) > self._max_traces:
            _, trace = self._traces.popitem(last=False)
            self._abandon(trace, "more traces are waiting than the gateway holds")

    def _abandon(self, trace: _Trace, why: str) -> None:
        self.abandoned_traces += 1
        if self.abandoned_traces == 1:
            _logger.warning(
                "a trace of %d spans was given up (%s); further ones are only counted", len(trace.spans), why
            )

    def settled(self) -> list[tuple[int, dict[str, Any]]]:
        """The episodes of traces quiet for the settle time (rank, record); forgets traces past the window."""
        now = self._clock()
        ready: list[_Trace] = []
        with self._lock:
            for trace_id, trace in list(self._traces.items()):
                quiet = now - trace.last_arrival
                if trace.episodes and quiet >= self._settle:
                    ready.append(self._traces.pop(trace_id))
                elif not trace.episodes and quiet >= self._window:
                    self._abandon(self._traces.pop(trace_id), "its episode span never arrived")
        return _assemble(ready)

    def drain(self) -> list[tuple[int, dict[str, Any]]]:
        """Every episode that can be assembled now (the run is closing); the rest is forgotten."""
        with self._lock:
            traces, self._traces = list(self._traces.values()), OrderedDict()
        return _assemble([trace for trace in traces if trace.episodes])


def _assemble(traces: list[_Trace]) -> list[tuple[int, dict[str, Any]]]:
    out = []
    for trace in traces:
        for rank, episode in trace.episodes:
            if not has_genai_content(episode, trace.spans):
                _logger.warning("an episode span without a record and without GenAI spans carries nothing; it is lost")
                continue
            try:
                record = assemble_episode(episode, trace.spans, adopt_orphans=True, spans_dropped=trace.dropped)
            except Exception:
                _logger.exception("assembling the episode of trace %032x failed; it is lost", episode.trace_id)
                continue
            out.append((rank, record))
    return out
