"""Episodes assembled from the standard GenAI spans a run's producers sent (``records/_genai.py``).

The spans of one trace cross batches, Collectors and retries in any order, so a trace is assembled only once its
``episode`` span arrived and no span of the trace came for ``settle_seconds``, or when the run closes. Bounded:
at most ``max_traces`` traces held (the oldest is given up, counted), ``max_spans`` per trace (later ones counted in
the record's ``info.spans_dropped``), and a trace whose episode span never comes is forgotten after
``window_seconds`` (counted); so is a trace without its episode span when the run closes. ``given_up`` keeps why,
``waiting`` what is held now (both shown in the gateway's ``GET /runs``).

With durable state each span comes with its seq in the run's spool; an :class:`Assembly` hands back the seqs of
its trace, to release once its episodes are logged in their stead (or the trace was given up). The spool keeps a
span as :func:`span_line` writes it, and a restarted gateway adds what :func:`read_span_line` reads of it again.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..records._genai import GenAISpan, SpanEvent, assemble_episode, has_genai_content, marks_episode

_logger = logging.getLogger(__name__)

SETTLE_SECONDS = 2.0
WINDOW_SECONDS = 300.0
MAX_TRACES = 4096
MAX_SPANS_PER_TRACE = 4096

#: Why a trace was given up (``EpisodeAssembler.given_up``; ``/runs`` and the run's summary show them).
OVER_TRACE_CAP = "more traces waiting than the gateway holds"
NO_EPISODE_SPAN = "no episode span within the window"
CLOSED_WITHOUT_EPISODE_SPAN = "the run closed before its episode span arrived"
NO_CONTENT = "an episode span without a record and without GenAI spans"


@dataclass
class _Trace:
    last_arrival: float
    spans: list[GenAISpan] = field(default_factory=list)
    #: The episode spans, each with the rank of the producer that sent it.
    episodes: list[tuple[int, GenAISpan]] = field(default_factory=list)
    dropped: int = 0
    #: Where the trace's spans (dropped ones too) are logged in the run's spool.
    seqs: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Assembly:
    """What became of one trace: its episodes (rank, record), none when it was given up or carried nothing, and
    the spool seqs of its spans."""

    episodes: list[tuple[int, dict[str, Any]]]
    seqs: list[int]


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
        #: Traces given up, by why (over the bound, no episode span within the window or before the close, ...).
        self.given_up: Counter[str] = Counter()
        #: The spans of the traces given up, and the spans past a trace's bound (in its record's
        #: ``info.spans_dropped``).
        self.spans_given_up = 0
        self.spans_dropped = 0
        #: The seqs of traces given up over the bound, handed back by the next :meth:`settled`.
        self._given_up: list[int] = []

    def add(self, rank: int, spans: Sequence[GenAISpan], seqs: Sequence[int] = ()) -> None:
        """``seqs``: each span's place in the run's spool (none without durable state)."""
        now = self._clock()
        with self._lock:
            for position, span in enumerate(spans):
                trace = self._traces.get(span.trace_id)
                if trace is None:
                    trace = self._traces[span.trace_id] = _Trace(now)
                    self._bound()
                trace.last_arrival = now
                self._traces.move_to_end(span.trace_id)
                if seqs:
                    trace.seqs.append(seqs[position])
                if marks_episode(span.name, span.attributes):
                    trace.episodes.append((rank, span))
                elif len(trace.spans) < self._max_spans:
                    trace.spans.append(span)
                else:
                    trace.dropped += 1

    @property
    def abandoned_traces(self) -> int:
        return sum(self.given_up.values())

    def holds(self, trace_id: int) -> bool:
        """Whether spans of the trace wait for its assembly."""
        with self._lock:
            return trace_id in self._traces

    def waiting(self) -> tuple[int, int]:
        """The traces held now and their spans (episode spans and those past the bound included)."""
        with self._lock:
            return len(self._traces), sum(_span_count(trace) for trace in self._traces.values())

    def restore_counts(self, given_up: Mapping[str, int], spans_given_up: int, spans_dropped: int) -> None:
        """The counts as a restarted gateway stored them."""
        with self._lock:
            self.given_up = Counter({str(why): int(count) for why, count in given_up.items()})
            self.spans_given_up, self.spans_dropped = int(spans_given_up), int(spans_dropped)

    def _bound(self) -> None:
        while len(self._traces) > self._max_traces:
            _, trace = self._traces.popitem(last=False)
            self._abandon(trace, OVER_TRACE_CAP)
            self._given_up.extend(trace.seqs)

    def _abandon(self, trace: _Trace, why: str) -> None:
        if not self.given_up:
            _logger.warning(
                "a trace of %d spans was given up (%s); further ones are only counted", _span_count(trace), why
            )
        self.given_up[why] += 1
        self.spans_given_up += _span_count(trace)

    def settled(self) -> list[Assembly]:
        """The traces quiet for the settle time, assembled; and the traces given up (past the window or over the
        bound), without episodes."""
        now = self._clock()
        ready: list[_Trace] = []
        out: list[Assembly] = []
        with self._lock:
            for trace_id, trace in list(self._traces.items()):
                quiet = now - trace.last_arrival
                if trace.episodes and quiet >= self._settle:
                    ready.append(self._traces.pop(trace_id))
                elif not trace.episodes and quiet >= self._window:
                    forgotten = self._traces.pop(trace_id)
                    self._abandon(forgotten, NO_EPISODE_SPAN)
                    out.append(Assembly([], forgotten.seqs))
            if self._given_up:
                out.append(Assembly([], self._given_up))
                self._given_up = []
        return [*map(self._assemble, ready), *out]

    def drain(self) -> list[Assembly]:
        """Every trace now (the run is closing): those with an episode span assembled, the rest given up."""
        with self._lock:
            traces, self._traces = list(self._traces.values()), OrderedDict()
            given_up, self._given_up = self._given_up, []
            for trace in traces:
                if not trace.episodes:
                    self._abandon(trace, CLOSED_WITHOUT_EPISODE_SPAN)
        return [self._assemble(trace) for trace in traces] + ([Assembly([], given_up)] if given_up else [])

    def _assemble(self, trace: _Trace) -> Assembly:
        out = []
        for rank, episode in trace.episodes:
            if not has_genai_content(episode, trace.spans):
                _logger.warning("an episode span without a record and without GenAI spans carries nothing; lost")
                self._count_lost(len(trace.spans), NO_CONTENT)
                continue
            try:
                record = assemble_episode(episode, trace.spans, adopt_orphans=True, spans_dropped=trace.dropped)
            except Exception as exc:
                _logger.exception("assembling the episode of trace %032x failed; it is lost", episode.trace_id)
                self._count_lost(len(trace.spans), f"assembling its episode failed ({type(exc).__name__})")
                continue
            out.append((rank, record))
        if out:
            with self._lock:
                self.spans_dropped += trace.dropped
        return Assembly(out, trace.seqs)

    def _count_lost(self, spans: int, why: str) -> None:
        with self._lock:
            self.given_up[why] += 1
            self.spans_given_up += spans


def _span_count(trace: _Trace) -> int:
    return len(trace.spans) + len(trace.episodes) + trace.dropped


# -- a span as the spool keeps it ------------------------------------------------------------------


def span_line(rank: int, span_id: bytes, span: GenAISpan) -> bytes:
    """The spool's entry for a span ``rank`` sent under ``span_id`` (trace id + span id, the dedupe key): ASCII JSON
    (a lone surrogate an OTLP/JSON string may carry survives), NaN and infinities as Python's JSON reads them."""
    entry = {"rank": rank, "id": span_id.hex(), "span": span_to_json(span)}
    return json.dumps(entry, separators=(",", ":"), allow_nan=True).encode("ascii")


def read_span_line(entry: Mapping[str, Any]) -> tuple[int, bytes, GenAISpan]:
    """The rank, span id and span of a decoded :func:`span_line`."""
    return int(entry["rank"]), bytes.fromhex(entry["id"]), span_from_json(entry["span"])


#: A one-key mapping with one of these keys stands for a value JSON has no form of (bytes) or for a mapping that
#: would read as one.
_BYTES, _MAPPING = "$bytes", "$map"


def span_to_json(span: GenAISpan) -> dict[str, Any]:
    """``span`` as JSON-ready data (attribute values of any OTLP type: bytes, arrays, maps, non-finite floats)."""
    return {
        "trace": span.trace_id,
        "span": span.span_id,
        "parent": span.parent_id,
        "name": span.name,
        "start": span.start_ns,
        "end": span.end_ns,
        "attributes": _value_to_json(dict(span.attributes)),
        "events": [[event.name, event.time_ns, _value_to_json(dict(event.attributes))] for event in span.events],
        "failed": span.failed,
        "status": span.status_message,
    }


def span_from_json(data: Mapping[str, Any]) -> GenAISpan:
    return GenAISpan(
        trace_id=int(data["trace"]),
        span_id=int(data["span"]),
        parent_id=None if data["parent"] is None else int(data["parent"]),
        name=str(data["name"]),
        start_ns=int(data["start"]),
        end_ns=int(data["end"]),
        attributes=_value_from_json(data["attributes"]),
        events=tuple(SpanEvent(str(name), int(at), _value_from_json(attrs)) for name, at, attrs in data["events"]),
        failed=bool(data["failed"]),
        status_message=str(data["status"]),
    )


def _value_to_json(value: Any) -> Any:
    if isinstance(value, bytes):
        return {_BYTES: base64.b64encode(value).decode("ascii")}
    if isinstance(value, Mapping):
        mapping = {str(key): _value_to_json(item) for key, item in value.items()}
        return {_MAPPING: mapping} if len(mapping) == 1 and next(iter(mapping)) in (_BYTES, _MAPPING) else mapping
    if isinstance(value, (list, tuple)):
        return [_value_to_json(item) for item in value]
    return value


def _value_from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1 and _BYTES in value:
            return base64.b64decode(value[_BYTES])
        if len(value) == 1 and _MAPPING in value:
            return {key: _value_from_json(item) for key, item in value[_MAPPING].items()}
        return {key: _value_from_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_value_from_json(item) for item in value]
    return value
