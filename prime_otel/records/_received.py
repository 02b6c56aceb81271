"""A record received as JSON text (a gateway's), decoded and split for stamping in one pass over the text: the
record's :class:`EncodedRecord` is cut from the bytes it arrived as instead of being encoded again.

The JSON scanner decodes each member value; the walk here only notes where each ``"key":value`` of the record and
of its member traces stands. Text the cut could get wrong (NaN/Infinity, a repeated key, a ``\\uD800``-style
escape) is left to the ordinary path: decoded, then encoded by :class:`EncodedRecord` as any mapping is.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ._encoding import RUN_KEY, TRACES_KEY, EncodedMember, EncodedRecord, compact_json

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_NULL = compact_json(None)
_SPACE = frozenset(" \t\n\r")


class _LeftToEncoder(Exception):
    """The text holds something the cut does not reproduce faithfully."""


def _refuse_constant(name: str) -> Any:
    raise _LeftToEncoder(name)


_scan_string = json.decoder.scanstring  # type: ignore[attr-defined]
_scan_once = json.scanner.make_scanner(json.JSONDecoder(parse_constant=_refuse_constant))  # type: ignore[attr-defined]

# (key, where its '"' stands, where its value starts, where its value ends, the value)
_Member = tuple[str, int, int, int, Any]


def decode_received(text: str) -> tuple[dict[str, Any], EncodedRecord | None]:
    """The record ``text`` holds and, when the text could be cut as it is, its encoding. Raises as ``json.loads``
    does (``json.JSONDecodeError``, ``RecursionError``), and ``TypeError`` for JSON that is not an object."""
    if ("\\u" in text and ("\\ud" in text or "\\uD" in text)) or not text.startswith("{", _skip(text, 0)):
        return _decoded(text), None
    try:
        return _cut(text)
    except _LeftToEncoder:
        return _decoded(text), None


def _decoded(text: str) -> dict[str, Any]:
    record = json.loads(text)
    if not isinstance(record, dict):
        raise TypeError("not a JSON object")
    return record


def _cut(text: str) -> tuple[dict[str, Any], EncodedRecord]:
    members, end = _members(text, _skip(text, 0))
    if _skip(text, end) != len(text):
        raise json.JSONDecodeError("Extra data", text, _skip(text, end))
    record: dict[str, Any] = {}
    pieces: list[bytes | str] = []
    run_json = _NULL
    encoded_members: list[EncodedMember] = []
    run_start: int | None = None
    for index, (key, key_start, value_start, value_end, value) in enumerate(members):
        record[key] = value
        if key in (RUN_KEY, TRACES_KEY):
            if run_start is not None:
                pieces.append(text[run_start : members[index - 1][3]].encode("utf-8"))
                run_start = None
            pieces.append(key)
            if key == RUN_KEY:
                run_json = text[value_start:value_end].encode("utf-8")
            elif isinstance(value, tuple):
                record[key], encoded_members = value
            else:
                # Not a list: encoded whole as a piece, as EncodedRecord does for a record without member traces.
                pieces[-1] = text[key_start:value_end].encode("utf-8")
        elif run_start is None:
            run_start = key_start
    if run_start is not None:
        pieces.append(text[run_start : members[-1][3]].encode("utf-8"))
    if len(record) != len(members):
        raise _LeftToEncoder("a repeated key")
    return record, EncodedRecord.from_parts(pieces, run_json, encoded_members, record=record)


def _members(text: str, position: int) -> tuple[list[_Member], int]:
    """The members of the object at ``text[position]`` and where it ends; a ``traces`` list's value is
    ``(list, [EncodedMember, ...])``. Compact JSON (no whitespace) takes the short way at every step."""
    members: list[_Member] = []
    position = _skip(text, position + 1)
    if text.startswith("}", position):
        return members, position + 1
    while True:
        if not text.startswith('"', position):
            raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, position)
        key_start = position
        key, position = _scan_string(text, position + 1)
        if not text.startswith(":", position):
            position = _skip(text, position)
            if not text.startswith(":", position):
                raise json.JSONDecodeError("Expecting ':' delimiter", text, position)
        position += 1
        if text[position : position + 1] in _SPACE:
            position = _skip(text, position)
        value_start = position
        value: Any
        if key == TRACES_KEY and text.startswith("[", position):
            value, position = _traces(text, position)
        else:
            try:
                value, position = _scan_once(text, position)
            except StopIteration as stop:
                raise json.JSONDecodeError("Expecting value", text, stop.value) from None
        members.append((key, key_start, value_start, position, value))
        position, closed = _after_item(text, position, "}")
        if closed:
            return members, position


def _traces(text: str, position: int) -> tuple[tuple[list[Any], list[EncodedMember]], int]:
    """A ``traces`` list: each member decoded whole by the scanner; one without a ``run`` block (it inherits the
    envelope's, the usual case) keeps the bytes it arrived as, one with its own is encoded again."""
    values: list[Any] = []
    encoded: list[EncodedMember] = []
    position = _skip(text, position + 1)
    if text.startswith("]", position):
        return (values, encoded), position + 1
    while True:
        start = position
        try:
            value, position = _scan_once(text, position)
        except StopIteration as stop:
            raise json.JSONDecodeError("Expecting value", text, stop.value) from None
        if type(value) is dict and RUN_KEY not in value and text.startswith("{", start):
            encoded.append(EncodedMember.from_json(text[start:position].encode("utf-8") if value else b"{}"))
        else:
            encoded.append(EncodedMember(value))
        values.append(value)
        position, closed = _after_item(text, position, "]")
        if closed:
            return (values, encoded), position


def _after_item(text: str, position: int, closer: str) -> tuple[int, bool]:
    """Past an object member or list item: where the next one starts (False), or past ``closer`` (True)."""
    if text.startswith(",", position):
        position += 1
        if text[position : position + 1] in _SPACE:
            position = _skip(text, position)
        return position, False
    position = _skip(text, position)
    if text.startswith(closer, position):
        return position + 1, True
    if not text.startswith(",", position):
        raise json.JSONDecodeError("Expecting ',' delimiter", text, position)
    return _skip(text, position + 1), False


def _value(text: str, position: int) -> tuple[Any, int]:
    try:
        value, end = _scan_once(text, position)
    except StopIteration as stop:
        raise json.JSONDecodeError("Expecting value", text, stop.value) from None
    return value, end


def _skip(text: str, position: int) -> int:
    if text[position : position + 1] not in _SPACE:
        return position
    match = _WHITESPACE.match(text, position)
    return match.end() if match else position
