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
    out = []
    for key, value in attributes.items():
        encoded_key = _KEYS.get(key)
        if encoded_key is None:
            encoded_key = _field(1, key.encode("utf-8")) + _VALUE_TAG
            if len(_KEYS) < _KEYS_LIMIT:
                _KEYS[key] = encoded_key
        encoded = any_value(value)
        out.append(b"".join((encoded_key, _varint(len(encoded)), encoded)))
    return out


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


def span_message(span: WireSpan) -> bytes:
    parts = [
        _field(1, span.trace_id.to_bytes(16, "big")),
        _field(2, span.span_id.to_bytes(8, "big")),
        _field(5, span.name.encode("utf-8")),
        _tag(6, _VARINT) + _varint(_SPAN_KIND_INTERNAL),
        _tag(7, _FIXED64) + struct.pack("<Q", span.start_time_ns),
        _tag(8, _FIXED64) + struct.pack("<Q", span.end_time_ns),
        *_fields(9, key_values(span.attributes)),
        *_fields(11, (_event_message(*event) for event in span.events)),
        _FLAGS,
    ]
    return b"".join(parts)


def _event_message(name: str, time_ns: int, attributes: Mapping[str, WireValue]) -> bytes:
    """A ``Span.Event``: time (fixed64 1), name (2), attributes (3)."""
    return b"".join(
        (
            _tag(1, _FIXED64) + struct.pack("<Q", time_ns),
            _field(2, name.encode("utf-8")),
            *_fields(3, key_values(attributes)),
        )
    )


def export_request(resource: bytes, scope: bytes, spans: Sequence[bytes]) -> bytes:
    """An ``ExportTraceServiceRequest`` of one resource and one scope holding the encoded ``spans``."""
    scope_spans = b"".join((_field(1, scope), *_fields(2, spans)))
    resource_spans = b"".join((_field(1, resource), _field(2, scope_spans)))
    return _field(1, resource_spans)
