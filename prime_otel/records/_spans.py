"""Episodes and bare traces as finished ``episode``/``trace`` spans.

The facade's ``log_episodes`` only enqueues the producer's objects (a span costs ~18 µs to start and end
through a tracer; a queue put ~2 µs). The uploader thread turns them into ``RecordSpan``s, which carry
the producer's object so in-process exporters never encode it into attributes and back.
A record a plain-API producer ended through a tracer is recognised by its span name and attributes and
becomes a ``PlainRecordSpan``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import RandomIdGenerator, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

from .._conventions import (
    CHILD_SPANS,
    CONVERSATION_ID,
    EPISODE_ID,
    EPISODE_OK,
    EPISODE_SPAN,
    RECORD_JSON,
    RECORD_MAP,
    RUN_STEP,
    TRACE_SPAN,
)
from ._encoding import EncodedRecord, is_episode
from ._fields import work_step
from ._models import encode_record

RECORD_SPAN_NAMES = frozenset({EPISODE_SPAN, TRACE_SPAN})

_SCOPE = InstrumentationScope("prime_otel")
_ids = RandomIdGenerator()
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


def record_kind(record: Any) -> str:
    return EPISODE_SPAN if is_episode(record) else TRACE_SPAN


def _flat_attributes(record: Any) -> dict[str, Any]:
    if isinstance(record, Mapping):
        record_id, ok = record.get("id"), record.get("ok")
    else:
        record_id, ok = getattr(record, "id", None), getattr(record, "ok", None)
    attributes: dict[str, Any] = {}
    if isinstance(record_id, str):
        attributes[EPISODE_ID] = record_id
        attributes[CONVERSATION_ID] = record_id
    if isinstance(ok, bool):
        attributes[EPISODE_OK] = ok
    step = work_step(record)
    if step is not None:
        attributes[RUN_STEP] = step
    return attributes


class RecordSpan(ReadableSpan):
    """A finished ``episode`` or ``trace`` span holding the producer's record."""

    def __init__(self, record: Any, resource: Resource, logged_at_ns: int) -> None:
        super().__init__(
            name=record_kind(record),
            context=SpanContext(_ids.generate_trace_id(), _ids.generate_span_id(), False, _SAMPLED),
            resource=resource,
            attributes=_flat_attributes(record),
            kind=SpanKind.INTERNAL,
            start_time=logged_at_ns,
            end_time=logged_at_ns,
            instrumentation_scope=_SCOPE,
        )
        self.record = record
        self._encoded: EncodedRecord | None = None

    def encoded(self) -> EncodedRecord:
        """The record's JSON, computed once (``to_record()`` and one encoding) and shared by every exporter."""
        if self._encoded is None:
            self._encoded = encode_record(self.record)
        return self._encoded


def record_from_attributes(attributes: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The record a plain-API producer put on its span: ``prime.record.json`` (a JSON string) or
    ``prime.record`` (a map attribute, opentelemetry-api >= 1.45)."""
    text = attributes.get(RECORD_JSON)
    if isinstance(text, str):
        try:
            decoded = json.loads(text)
        except ValueError:
            return None
        return decoded if isinstance(decoded, dict) else None
    value = attributes.get(RECORD_MAP)
    return _plain(value) if isinstance(value, Mapping) else None


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def child_summary(span: ReadableSpan) -> dict[str, Any]:
    """A child span of an episode (a model call, a tool call) as it is attached to the episode's record."""
    return {
        "name": span.name,
        "span_id": f"{span.context.span_id:016x}",
        "start_time": span.start_time,
        "end_time": span.end_time,
        "attributes": _plain(dict(span.attributes or {})),
    }


class PlainRecordSpan(RecordSpan):
    """A record span ended through a tracer: the record comes from its attributes (or was assembled from the
    GenAI spans under it; ``name`` then says it is an episode), its context is kept."""

    def __init__(
        self, span: ReadableSpan, record: Mapping[str, Any], children: list[dict[str, Any]], name: str | None = None
    ) -> None:
        if children:
            record = {**record, CHILD_SPANS: [*record.get(CHILD_SPANS, []), *children]}
        ReadableSpan.__init__(
            self,
            name=name or span.name,
            context=span.context,
            parent=span.parent,
            resource=span.resource,
            attributes=span.attributes,
            events=span.events,
            links=span.links,
            kind=span.kind,
            status=span.status,
            start_time=span.start_time,
            end_time=span.end_time,
            instrumentation_scope=span.instrumentation_scope,
        )
        self.record = record
        self._encoded = None


def record_of(span: ReadableSpan) -> Any:
    """The producer's record behind a span: the object for ``RecordSpan``s, else None."""
    return span.record if isinstance(span, RecordSpan) else None
