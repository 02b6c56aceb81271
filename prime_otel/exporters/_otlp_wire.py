"""Our own record spans as OTLP protobuf bytes, written directly (standard ``ExportTraceServiceRequest`` wire
format, the fields the SDK's encoder writes for them), so an already encoded record goes into the request as the
bytes it is: no ``str`` copy, no protobuf objects, one join.

Field numbers are those of ``opentelemetry/proto/{collector/trace,trace,common,resource}/v1``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: An attribute value: ``bytes`` are UTF-8 text (sent as a string), a tuple is an array of such values.
WireValue = str | bytes | bool | int | float | tuple[Any, ...]

_LEN, _VARINT, _FIXED64 = 2, 0, 1
_SPAN_KIND_INTERNAL = 1
_MAX_INT64 = (1 << 63) - 1
_MIN_INT64 = -(1 << 63)
_SMALL = [bytes((value,)) for value in range(0x80)]
# Attribute keys repeat on every span: each one's encoded KeyValue.key field, kept once (a bounded cache).
_KEYS: dict[str, bytes] = {}
_KEYS_LIMIT = 1024


def _varint(value: int) -> bytes:
    if value < 0x80:
        return _SMALL[value]
    if value < 0x4000:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _tag(number: int, wire_type: int) -> bytes:
    return _varint((number << 3) | wire_type)


def _field(number: int, payload: bytes) -> bytes:
    return _tag(number, _LEN) + _varint(len(payload)) + payload


def _fields(number: int, payloads: Iterable[bytes]) -> list[bytes]:
    """Length-delimited fields as pieces to join (a large payload is never copied into a prefix)."""
    tag = _tag(number, _LEN)
    out: list[bytes] = []
    for payload in payloads:
        out += (tag, _varint(len(payload)), payload)
    return out


_VALUE_TAG = _tag(2, _LEN)
_STRING_TAG = _tag(1, _LEN)


def any_value(value: WireValue) -> bytes:
    """An ``AnyValue`` message."""
    if isinstance(value, bytes):
        return b"".join((_STRING_TAG, _varint(len(value)), value))
    if isinstance(value, str):
        return _field(1, value.encode("utf-8"))
    if isinstance(value, bool):
        return _tag(2, _VARINT) + _varint(int(value))
    if isinstance(value, int):
        if not _MIN_INT64 <= value <= _MAX_INT64:
            raise ValueError("an integer attribute outside int64")
        return _tag(3, _VARINT) + _varint(value & 0xFFFFFFFFFFFFFFFF)
    if isinstance(value, float):
        return _tag(4, _FIXED64) + struct.pack("<d", value)
    if isinstance(value, tuple):
        return _field(5, b"".join(_field(1, any_value(item)) for item in value))
    raise TypeError(f"an attribute of type {type(value).__name__}")


def key_values(attributes: Mapping[str, WireValue]) -> list[bytes]:
    """Repeated ``KeyValue`` payloads."""
    out: list[bytes] = []
    _key_value_fields(out, None, attributes)
    return out


def _key_value_fields(out: list[bytes], tag: bytes | None, attributes: Mapping[str, WireValue]) -> None:
    """``attributes`` as ``KeyValue`` fields appended to ``out`` as pieces (``tag`` and length before each one), or
    as whole ``KeyValue`` payloads when ``tag`` is None. A text value is never copied before the final join."""
    for key, value in attributes.items():
        encoded_key = _KEYS.get(key)
        if encoded_key is None:
            encoded_key = _field(1, key.encode("utf-8")) + _VALUE_TAG
            if len(_KEYS) < _KEYS_LIMIT:
                _KEYS[key] = encoded_key
        if type(value) is str:
            value = value.encode("utf-8")
        if type(value) is bytes:
            text_length = _varint(len(value))
            value_length = 1 + len(text_length) + len(value)
            head = b"".join((encoded_key, _varint(value_length), _STRING_TAG, text_length))
            if tag is None:
                out.append(head + value)
            else:
                out += (tag, _varint(len(head) + len(value)), head, value)
            continue
        encoded = b"".join((encoded_key, *_length_prefixed(any_value(value))))
        if tag is None:
            out.append(encoded)
        else:
            out += (tag, _varint(len(encoded)), encoded)


def _length_prefixed(payload: bytes) -> tuple[bytes, bytes]:
    return _varint(len(payload)), payload


def resource_message(attributes: Mapping[str, Any]) -> bytes:
    """A ``Resource`` with ``attributes`` (values of the types ``any_value`` takes; others are left out)."""
    kept = {key: value for key, value in attributes.items() if isinstance(value, (str, bool, int, float))}
    return b"".join(_fields(1, key_values(kept)))


def scope_message(name: str, version: str | None = None) -> bytes:
    out = _field(1, name.encode("utf-8"))
    return out + _field(2, version.encode("utf-8")) if version else out


@dataclass(frozen=True)
class WireSpan:
    """What one record span writes: ids as integers (as the SDK's ``SpanContext`` has them), times in ns."""

    trace_id: int
    span_id: int
    name: str
    start_time_ns: int
    end_time_ns: int
    attributes: Mapping[str, WireValue]
    #: Span events as (name, time in ns, attributes): the GenAI evaluation events of an episode.
    events: Sequence[tuple[str, int, Mapping[str, WireValue]]] = ()


# Span.flags (fixed32): the parent's is-remote bit is known (no parent), as the SDK's encoder writes it.
_FLAGS = _tag(16, 5) + struct.pack("<I", 0x100)


_ATTRIBUTE_TAG = _tag(9, _LEN)
_EVENT_TAG = _tag(11, _LEN)
_EVENT_ATTRIBUTE_TAG = _tag(3, _LEN)
_KIND = _tag(6, _VARINT) + _varint(_SPAN_KIND_INTERNAL)
_TRACE_ID_FIELD = _tag(1, _LEN) + _varint(16)
_SPAN_ID_FIELD = _tag(2, _LEN) + _varint(8)
_TIMES = struct.Struct("<BQBQ")


def span_message(span: WireSpan) -> bytes:
    return b"".join(span_pieces(span))


def span_pieces(span: WireSpan) -> list[bytes]:
    """A ``Span`` message as pieces to join (its large attribute values are not copied here)."""
    name = span.name.encode("utf-8")
    parts = [
        _TRACE_ID_FIELD,
        span.trace_id.to_bytes(16, "big"),
        _SPAN_ID_FIELD,
        span.span_id.to_bytes(8, "big"),
        _tag(5, _LEN),
        _varint(len(name)),
        name,
        _KIND,
        _TIMES.pack(0x39, span.start_time_ns, 0x41, span.end_time_ns),
    ]
    _key_value_fields(parts, _ATTRIBUTE_TAG, span.attributes)
    for event in span.events:
        parts += (_EVENT_TAG, *_length_prefixed(_event_message(*event)))
    parts.append(_FLAGS)
    return parts


def _event_message(name: str, time_ns: int, attributes: Mapping[str, WireValue]) -> bytes:
    """A ``Span.Event``: time (fixed64 1), name (2), attributes (3)."""
    parts = [_tag(1, _FIXED64) + struct.pack("<Q", time_ns), _field(2, name.encode("utf-8"))]
    _key_value_fields(parts, _EVENT_ATTRIBUTE_TAG, attributes)
    return b"".join(parts)


def export_request(resource: bytes, scope: bytes, spans: Sequence[bytes | Sequence[bytes]]) -> bytes:
    """An ``ExportTraceServiceRequest`` of one resource and one scope holding the encoded ``spans`` (each a message,
    or a message's pieces as ``span_pieces`` gives them), joined once."""
    span_tag = _tag(2, _LEN)
    span_fields: list[bytes] = []
    spans_length = 0
    for span in spans:
        length = len(span) if isinstance(span, bytes) else sum(map(len, span))
        prefix = span_tag + _varint(length)
        spans_length += len(prefix) + length
        span_fields.append(prefix)
        if isinstance(span, bytes):
            span_fields.append(span)
        else:
            span_fields += span
    scope_field = _field(1, scope)
    scope_spans_length = len(scope_field) + spans_length
    resource_field = _field(1, resource) + _tag(2, _LEN) + _varint(scope_spans_length)
    resource_spans_length = len(resource_field) + scope_spans_length
    head = b"".join((_tag(1, _LEN), _varint(resource_spans_length), resource_field, scope_field))
    return b"".join((head, *span_fields))
