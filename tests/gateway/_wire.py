"""Hand-built OTLP protobuf: fields on the wire, and spans nested deeper than any protobuf parser goes."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan

from prime_otel import _conventions as conv

DEPTH = 100_000


def field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def deep_span(depth: int) -> bytes:
    """An ``episode`` span whose one attribute is a map nested ``depth`` levels (protobuf parsers stop at 100)."""
    key = field(1, b"k")
    prefixes: list[bytes] = []
    inner = 0  # bytes of the value nested inside the current level
    for _ in range(depth):  # AnyValue.kvlist_value(6) -> KeyValueList.values(1) -> KeyValue{key(1), value(2)}
        value_head = varint(2 << 3 | 2) + varint(inner)
        pair = len(key) + len(value_head) + inner
        pair_head = varint(1 << 3 | 2) + varint(pair)
        kvlist = len(pair_head) + pair
        kvlist_head = varint(6 << 3 | 2) + varint(kvlist)
        prefixes.append(kvlist_head + pair_head + key + value_head)
        inner = len(kvlist_head) + kvlist
    value = b"".join(reversed(prefixes))
    attribute = field(1, b"deep") + field(2, value)
    ids = field(1, b"\x01" * 16) + field(2, b"\x02" * 8)
    return ids + field(5, conv.EPISODE_SPAN.encode()) + field(9, attribute)


def request_with_deep_span(spans: list[ReadableSpan]) -> bytes:
    """The spans' export request with a too-deep span added to the same resource and scope."""
    (resource_spans,) = encode_spans(spans).resource_spans
    (scope_spans,) = resource_spans.scope_spans
    scope = scope_spans.SerializeToString() + field(2, deep_span(DEPTH))
    return field(1, field(1, resource_spans.resource.SerializeToString()) + field(2, scope))
