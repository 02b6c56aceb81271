"""OTLP export requests opened one item at a time, so one bad span (or metric, or log record) costs only itself.

The three export requests share one shape: field 1 holds the resource groups; in each group field 1 is the
resource and field 2 the scope groups; in each scope group field 2 holds the items (spans, metrics, log
records). Only that envelope is walked here, on the wire (protobuf) or in the parsed document (OTLP/JSON); every
resource and item is then decoded on its own. An item that does not decode (malformed, nested deeper than the
parser goes, a string that is not UTF-8, an OTLP/JSON id that is not hex) becomes an ``Invalid`` with a short
reason; only a broken envelope refuses the whole request (400).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from ._decode import PROTOBUF, RequestError, hex_ids_to_base64, malformed

M = TypeVar("M", bound=Message)

_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5
# A varint is at most 10 bytes; the wire walker never reads past the buffer it was given.
_MAX_VARINT_BYTES = 10
# What an item's decoding may raise on hostile input.
_DECODE_ERRORS = (
    DecodeError,
    ValueError,
    TypeError,
    AttributeError,
    KeyError,
    RecursionError,
    RuntimeWarning,
    OverflowError,
)


@dataclass(frozen=True)
class Invalid:
    """An item (or resource) that could not be read, and a short reason naming the kind of problem."""

    reason: str


@dataclass
class Envelope(Generic[M]):
    """One resource group: its decoded resource (or why not) and its items, each decoded or ``Invalid``."""

    resource: Resource | Invalid
    items: list[M | Invalid] = field(default_factory=list)


@dataclass(frozen=True)
class Shape:
    """An export request's names: the JSON keys of its resource groups, scope groups and items."""

    item_name: str
    groups_keys: tuple[str, str]
    scopes_keys: tuple[str, str]
    items_keys: tuple[str, str]


TRACES = Shape("span", ("resourceSpans", "resource_spans"), ("scopeSpans", "scope_spans"), ("spans", "spans"))
METRICS = Shape(
    "metric", ("resourceMetrics", "resource_metrics"), ("scopeMetrics", "scope_metrics"), ("metrics", "metrics")
)
LOGS = Shape(
    "log record", ("resourceLogs", "resource_logs"), ("scopeLogs", "scope_logs"), ("logRecords", "log_records")
)


def split_request(body: bytes, kind: str, item_type: type[M], shape: Shape) -> list[Envelope[M]]:
    """The resource groups of an OTLP/HTTP body (``kind``: ``PROTOBUF`` or ``JSON``)."""
    return split_protobuf(body, item_type, shape) if kind == PROTOBUF else split_json(body, item_type, shape)


def split_protobuf(body: bytes, item_type: type[M], shape: Shape) -> list[Envelope[M]]:
    envelopes: list[Envelope[M]] = []
    for group in _messages(memoryview(body), 1, "export request"):
        resource = bytearray()
        items: list[M | Invalid] = []
        for number, value in _length_delimited(group, "resource group"):
            if number == 1:
                resource += value  # repeated occurrences of a message field merge, as a parser would
            elif number == 2:
                for item in _messages(value, 2, "scope group"):
                    items.append(_decode_item(item_type, bytes(item), shape.item_name))
        envelopes.append(Envelope(_decode_resource(bytes(resource)), items))
    return envelopes


def split_json(body: bytes, item_type: type[M], shape: Shape) -> list[Envelope[M]]:
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise malformed(f"the body is not valid JSON: {type(exc).__name__}") from None
    if not isinstance(document, dict):
        raise malformed("an OTLP/JSON body is a JSON object")
    envelopes: list[Envelope[M]] = []
    for group in _json_list(document, shape.groups_keys, "the request"):
        if not isinstance(group, dict):
            raise malformed("a resource group is not a JSON object")
        items: list[M | Invalid] = []
        for scope in _json_list(group, shape.scopes_keys, "a resource group"):
            if not isinstance(scope, dict):
                raise malformed("a scope group is not a JSON object")
            for item in _json_list(scope, shape.items_keys, "a scope group"):
                items.append(_parse_json_item(item_type, item, shape.item_name))
        resource = group.get("resource")
        envelopes.append(Envelope(_parse_json_item(Resource, {} if resource is None else resource, "resource"), items))
    return envelopes


def _decode_resource(data: bytes) -> Resource | Invalid:
    return _decode_item(Resource, data, "resource")


def _decode_item(item_type: type[M], data: bytes, name: str) -> M | Invalid:
    try:
        return item_type.FromString(data)
    except _DECODE_ERRORS:
        return Invalid(f"undecodable {name} (malformed, too deeply nested or not UTF-8)")


def _parse_json_item(item_type: type[M], item: Any, name: str) -> M | Invalid:
    if not isinstance(item, dict):
        return Invalid(f"OTLP/JSON {name} is not an object")
    try:
        return json_format.ParseDict(hex_ids_to_base64(item), item_type(), ignore_unknown_fields=True)
    except RequestError:
        return Invalid(f"OTLP/JSON {name} with an id that is not an 8- or 16-byte hex string")
    except (json_format.ParseError, *_DECODE_ERRORS):
        return Invalid(f"invalid OTLP/JSON {name} (wrong types, too deeply nested or not UTF-8)")


def _json_list(parent: dict[str, Any], keys: tuple[str, str], where: str) -> list[Any]:
    value = next((parent[key] for key in keys if key in parent), None)
    if value is None:
        return []
    if not isinstance(value, list):
        raise malformed(f"{keys[0]} in {where} is not a list")
    return value


def _messages(data: memoryview, number: int, where: str) -> Iterator[memoryview]:
    """The length-delimited values of field ``number``."""
    for found, value in _length_delimited(data, where):
        if found == number:
            yield value


def _length_delimited(data: memoryview, where: str) -> Iterator[tuple[int, memoryview]]:
    """Each length-delimited field of one message as (number, bytes); other wire types are skipped."""
    position, end = 0, len(data)
    while position < end:
        key, position = _varint(data, position, where)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise malformed(f"the {where} has a field number 0")
        if wire_type == _LEN:
            length, position = _varint(data, position, where)
            if length > end - position:
                raise malformed(f"the {where} is truncated")
            yield number, data[position : position + length]
            position += length
        elif wire_type == _VARINT:
            _, position = _varint(data, position, where)
        elif wire_type in (_FIXED64, _FIXED32):
            position += 8 if wire_type == _FIXED64 else 4
            if position > end:
                raise malformed(f"the {where} is truncated")
        else:
            raise malformed(f"the {where} has a field of wire type {wire_type}")


def _varint(data: memoryview, position: int, where: str) -> tuple[int, int]:
    value = shift = 0
    for offset in range(_MAX_VARINT_BYTES):
        if position + offset >= len(data):
            break
        byte = data[position + offset]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position + offset + 1
        shift += 7
    raise malformed(f"the {where} holds a broken varint")
