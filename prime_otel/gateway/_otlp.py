"""Decoded OTLP export requests as what the gateway acts on: per resource (one run, one rank), the spans and the
step rows it carried. Only the fields the conventions use are read; no ``ReadableSpan`` is rebuilt here."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from .. import _conventions as conv
from .._types import RunKind, run_kind_of
from ..records import histogram_value, point_value, step_number
from ..records._genai import GenAISpan, SpanEvent, marks_episode
from ._envelope import Envelope, Invalid

# What reading decoded values may raise on hostile input (a value nested as deep as the decoder allowed).
_READ_ERRORS = (ValueError, TypeError, RecursionError, OverflowError, MemoryError)
#: Run ids are ASCII in every platform route; anything longer or stranger is refused with its resource.
MAX_RUN_ID_CHARS = 200
# Decimal digits of the largest int64: a longer string is no count any OTLP producer meant.
_MAX_INT_DIGITS = 19


def any_value(value: AnyValue) -> Any:
    """An ``AnyValue`` as Python: kvlist → dict, array → list, bytes → bytes, unset → None."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "kvlist_value":
        return attributes(value.kvlist_value.values)
    if which == "array_value":
        return [any_value(item) for item in value.array_value.values]
    return getattr(value, which)


def attributes(pairs: Iterable[KeyValue]) -> dict[str, Any]:
    return {pair.key: any_value(pair.value) for pair in pairs}


def _resource_int(attributes: Mapping[str, Any], key: str, default: int) -> int:
    """A non-negative integer resource attribute (``default`` when absent): an ``int_value``, or a string of at most
    19 decimal digits, as ``OTEL_RESOURCE_ATTRIBUTES`` makes every value (and as the SDK reads ``RANK``). A
    double, a bool, a sign or any other string raises ``ValueError`` naming the attribute."""
    value = attributes.get(key)
    if value is None:
        return default
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= _MAX_INT_DIGITS:
        value = int(value)
    if type(value) is not int or value < 0:
        raise ValueError(f"a {key} that is not a non-negative integer")
    return value


def _usable_run_id(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= MAX_RUN_ID_CHARS and value.isprintable() and value.isascii()


@dataclass(frozen=True)
class Origin:
    """The producer behind a resource: its run (``run.id``, else ``prime.run.id``), kind, rank and world size."""

    run_id: str | None
    kind: str | None
    rank: int
    world_size: int
    attributes: Mapping[str, Any]

    @property
    def run_kind(self) -> RunKind | None:
        """The kind the producer named, when it is one (``eval`` or ``train``)."""
        return run_kind_of(self.kind)

    @classmethod
    def of(cls, resource_attributes: Mapping[str, Any]) -> Origin:
        """``ValueError`` (naming the problem) for a run id no platform path could carry, or a rank or world size
        that is not a non-negative integer."""
        run_id = resource_attributes.get(conv.RUN_ID) or resource_attributes.get(conv.PRIME_RUN_ID)
        if run_id and not _usable_run_id(run_id):
            raise ValueError(f"a run.id that is not a printable string of at most {MAX_RUN_ID_CHARS} characters")
        kind = resource_attributes.get(conv.RUN_TYPE) or resource_attributes.get(conv.PRIME_RUN_KIND)
        rank = _resource_int(resource_attributes, conv.RUN_RANK, 0)
        world_size = _resource_int(resource_attributes, conv.RUN_WORLD_SIZE, 1)
        return cls(
            run_id=str(run_id) if run_id else None,
            kind=str(kind) if kind else None,
            rank=rank,
            # 0 is an unknown world size, as the SDK reads WORLD_SIZE; the ranks seen always fit.
            world_size=max(world_size, rank + 1),
            attributes=dict(resource_attributes),
        )


@dataclass(frozen=True)
class ReceivedSpan:
    span_id: bytes
    name: str
    attributes: Mapping[str, Any]
    end_time_ns: int
    #: For a span that is no record and no end marker: what the GenAI episode assembly reads of it.
    genai: GenAISpan | None = None


@dataclass
class ResourceSpans:
    """One resource's spans, each read or ``Invalid``; ``origin`` None (with ``problem``) when the resource itself
    could not be read."""

    origin: Origin | None
    spans: list[ReceivedSpan | Invalid] = field(default_factory=list)
    problem: str | None = None


def spans_by_resource(envelopes: list[Envelope[Span]]) -> list[ResourceSpans]:
    groups = []
    for envelope in envelopes:
        origin = _origin(envelope.resource)
        if isinstance(origin, Invalid):
            groups.append(ResourceSpans(None, list(envelope.items), problem=origin.reason))
            continue
        groups.append(ResourceSpans(origin, [_received_span(span) for span in envelope.items]))
    return groups


def _origin(resource: Resource | Invalid) -> Origin | Invalid:
    if isinstance(resource, Invalid):
        return resource
    try:
        resource_attributes = attributes(resource.attributes)
    except _READ_ERRORS:
        return Invalid("resource attributes that cannot be read")
    try:
        return Origin.of(resource_attributes)
    except ValueError as exc:
        return Invalid(str(exc))


def _received_span(span: Span | Invalid) -> ReceivedSpan | Invalid:
    if isinstance(span, Invalid):
        return span
    if len(span.trace_id) != 16 or len(span.span_id) != 8:
        return Invalid("span without a 16-byte trace id and an 8-byte span id")
    try:
        decoded = attributes(span.attributes)
        return ReceivedSpan(
            span_id=span.trace_id + span.span_id,
            name=span.name,
            attributes=decoded,
            end_time_ns=span.end_time_unix_nano or span.start_time_unix_nano,
            genai=_genai_view(span, decoded),
        )
    except _READ_ERRORS:
        return Invalid("span attributes that cannot be read")


_STATUS_CODE_ERROR = 2
_RECORD_SPANS = frozenset({conv.EPISODE_SPAN, conv.TRACE_SPAN, conv.RUN_END_SPAN, conv.HEARTBEAT_SPAN})


def _genai_view(span: Span, decoded: Mapping[str, Any]) -> GenAISpan | None:
    """The assembly's view of a span that carries no record: episode spans and GenAI spans whole, any other span
    only as a link between them (its content is not kept)."""
    episode = marks_episode(span.name, decoded)
    if not episode and span.name in _RECORD_SPANS:
        return None
    whole = episode or conv.GEN_AI_OPERATION in decoded
    parent = int.from_bytes(span.parent_span_id, "big") if span.parent_span_id else None
    return GenAISpan(
        trace_id=int.from_bytes(span.trace_id, "big"),
        span_id=int.from_bytes(span.span_id, "big"),
        parent_id=parent,
        name=span.name,
        start_ns=span.start_time_unix_nano,
        end_ns=span.end_time_unix_nano or span.start_time_unix_nano,
        attributes=decoded if whole else {},
        events=tuple(SpanEvent(e.name, e.time_unix_nano, attributes(e.attributes)) for e in span.events)
        if whole
        else (),
        failed=span.status.code == _STATUS_CODE_ERROR,
        status_message=span.status.message if whole else "",
    )


@dataclass
class StepRow:
    """The values one collection of the producer measured for one step (``step`` None: no step attribute)."""

    step: int | None
    time_ns: int
    values: dict[str, int | float] = field(default_factory=dict)


@dataclass
class ResourceRows:
    origin: Origin | None
    rows: list[StepRow] = field(default_factory=list)
    invalid: list[Invalid] = field(default_factory=list)
    problem: str | None = None


def rows_by_resource(envelopes: list[Envelope[Metric]]) -> list[ResourceRows]:
    """Gauge, sum and histogram points (a histogram contributes its mean), grouped into rows by step and time. A
    point whose ``prime.run.step`` is no step (``records.step_number``) is ``Invalid``, alone."""
    groups = []
    for envelope in envelopes:
        origin = _origin(envelope.resource)
        if isinstance(origin, Invalid):
            groups.append(ResourceRows(None, problem=origin.reason, invalid=[origin] * len(envelope.items)))
            continue
        group = ResourceRows(origin)
        rows: dict[tuple[int | None, int], StepRow] = {}
        for metric in envelope.items:
            if isinstance(metric, Invalid):
                group.invalid.append(metric)
                continue
            try:
                points = _points(metric)
            except _READ_ERRORS:
                group.invalid.append(Invalid("metric points that cannot be read"))
                continue
            for point in points:
                if isinstance(point, Invalid):
                    group.invalid.append(point)
                    continue
                step, time_ns, value = point
                row = rows.get((step, time_ns))
                if row is None:
                    row = rows[(step, time_ns)] = StepRow(step, time_ns)
                row.values[metric.name] = value
        group.rows.extend(rows.values())
        groups.append(group)
    return groups


def _points(metric: Metric) -> list[tuple[int | None, int, int | float] | Invalid]:
    """``(step, time, value)`` of each point, its value as the run's own collection keeps it (``point_value``); a
    point with an impossible step is ``Invalid`` (whatever its value), one whose value is left out is skipped."""
    which = metric.WhichOneof("data")
    points: list[tuple[int | Invalid | None, int, int | float | None]] = []
    if which in ("gauge", "sum"):
        for point in getattr(metric, which).data_points:
            number = point.WhichOneof("value")
            value = point_value(point.as_double if number == "as_double" else point.as_int)
            points.append((_step(point.attributes), point.time_unix_nano, value))
    elif which == "histogram":
        for point in metric.histogram.data_points:
            value = histogram_value(point.sum, point.count)
            points.append((_step(point.attributes), point.time_unix_nano, value))
    kept: list[tuple[int | None, int, int | float] | Invalid] = []
    for step, time_ns, value in points:
        if isinstance(step, Invalid):
            kept.append(step)
        elif value is not None:
            kept.append((step, time_ns, value))
    return kept


def _step(pairs: Iterable[KeyValue]) -> int | Invalid | None:
    """The point's step by the in-process rule (``step_number``): None without a step attribute, ``Invalid`` when
    the attribute is not an ``int_value`` from 0 to 2**53 - 1. OTLP/JSON's ``{"intValue": "7"}`` is an
    ``int_value``; ``{"doubleValue": 7.0}`` and ``{"stringValue": "7"}`` are not, as in-process such a point
    belongs to no step."""
    for pair in pairs:
        if pair.key == conv.METRIC_STEP:
            step = step_number(any_value(pair.value))
            if step is not None:
                return step
            return Invalid(f"a metric point whose {conv.METRIC_STEP} is {_step_problem(pair.value)}")
    return None


def _step_problem(value: AnyValue) -> str:
    which = value.WhichOneof("value")
    if which == "int_value":
        return "an integer outside 0 .. 2**53 - 1"
    kind = _VALUE_KINDS.get(which or "", "empty")
    return f"{kind}, not an integer from 0 to 2**53 - 1"


_VALUE_KINDS = {
    "double_value": "a double",
    "string_value": "a string",
    "bool_value": "a bool",
    "bytes_value": "bytes",
    "array_value": "an array",
    "kvlist_value": "a map",
}
