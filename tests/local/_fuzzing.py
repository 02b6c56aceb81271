"""Hostile requests for every route of the local platform, generated from its own OpenAPI description: path and
query values that are huge or negative integers, lone surrogates or junk; JSON bodies with the route's own field
names holding hostile values; JSONL trace uploads with hostile numbers and strings."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from hypothesis import strategies as st

HUGE_INTS = st.sampled_from([2**63, -(2**63) - 1, 10**30, -1, 0, 2**53 + 1, 10**400])
SURROGATE = st.sampled_from(["\ud800", "a\udfffb", "\udc80" * 3])
TEXT = st.text(max_size=10) | SURROGATE | st.sampled_from(["", "0", "-1", "9" * 40, "1e999", "NaN", "../x"])
NUMBERS = HUGE_INTS | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
SCALARS = st.none() | st.booleans() | NUMBERS | TEXT
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=10,
)


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    path_params: tuple[str, ...]
    query_params: tuple[str, ...]
    body_fields: tuple[str, ...]
    has_body: bool
    multipart: bool = False
    headers: tuple[str, ...] = field(default=())


def routes_of(spec: Mapping[str, Any]) -> list[Route]:
    routes = []
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            parameters = operation.get("parameters", [])
            body = operation.get("requestBody", {}).get("content", {})
            schema = next(iter(body.values()), {}).get("schema", {}) if body else {}
            schema = _resolve(spec, schema)
            routes.append(
                Route(
                    method=method.upper(),
                    path=path,
                    path_params=tuple(p["name"] for p in parameters if p["in"] == "path"),
                    query_params=tuple(p["name"] for p in parameters if p["in"] == "query"),
                    headers=tuple(p["name"] for p in parameters if p["in"] == "header"),
                    body_fields=tuple(schema.get("properties", {})),
                    has_body=bool(body),
                    multipart="multipart/form-data" in body,
                )
            )
    return routes


def _resolve(spec: Mapping[str, Any], schema: Mapping[str, Any]) -> Mapping[str, Any]:
    reference = schema.get("$ref")
    if isinstance(reference, str):
        name = reference.rsplit("/", 1)[-1]
        return _resolve(spec, spec["components"]["schemas"][name])
    return schema


@dataclass
class Call:
    method: str
    url: str
    content: bytes | None
    headers: dict[str, str]


def _url_text(value: str) -> str:
    return quote(value.encode("utf-8", "surrogatepass"), safe="")


@st.composite
def calls(draw: st.DrawFn, route: Route, run_ids: list[str], api_key: str) -> Call:
    path = route.path
    for name in route.path_params:
        value = draw(st.sampled_from(run_ids) | TEXT.map(str) | HUGE_INTS.map(str)) or "x"
        path = path.replace("{" + name + "}", _url_text(value)).replace("{" + name + ":path}", _url_text(value))
    query = []
    for name in (*route.query_params, "expires", "signature", "cursor", "offset", "step"):
        if draw(st.booleans()):
            value = draw(HUGE_INTS.map(str) | TEXT | st.sampled_from(run_ids))
            query.append(f"{name}={_url_text(value)}")
    url = path + ("?" + "&".join(query) if query else "")
    headers = {"Authorization": f"Bearer {draw(st.sampled_from([api_key, api_key, 'forged']))}"}
    for name in route.headers:
        if draw(st.booleans()):
            headers[name] = draw(st.sampled_from(["v1", "episodes", "trace", "x" * 300, "team_x"]))
    content = None
    if route.multipart:
        content, headers["Content-Type"] = draw(trace_uploads())
    elif route.has_body:
        content = draw(json_bodies(route.body_fields, run_ids))
        headers["Content-Type"] = "application/json"
    return Call(route.method, url, content, headers)


@st.composite
def json_bodies(draw: st.DrawFn, fields: tuple[str, ...], run_ids: list[str]) -> bytes:
    keys = st.sampled_from(fields) if fields else TEXT
    body: Any = draw(st.dictionaries(keys | TEXT, VALUES | st.sampled_from(run_ids), max_size=6))
    if draw(st.integers(0, 9)) == 0:
        body = draw(VALUES)
    text = json.dumps(body, allow_nan=False)
    if draw(st.integers(0, 9)) == 0:
        text = "[" * 5000 + "]" * 5000
    return text.encode("utf-8")


TRACE_FIELDS = st.sampled_from(
    ["id", "episode_id", "run_id", "trace_id", "number", "turn", "reward", "step", "example_id", "messages", "env"]
)


@st.composite
def trace_uploads(draw: st.DrawFn) -> tuple[bytes, str]:
    lines = []
    for _ in range(draw(st.integers(1, 3))):
        record = draw(st.dictionaries(TRACE_FIELDS | TEXT, VALUES, max_size=6))
        lines.append(json.dumps(record, allow_nan=False))
    traces = ("\n".join(lines) + "\n").encode("utf-8")
    if draw(st.booleans()):
        traces = gzip.compress(traces)
    metadata = json.dumps(draw(st.dictionaries(TEXT, VALUES, max_size=3) | st.just({"schema_version": 1})))
    boundary = "fuzzboundary"
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="metadata"\r\n\r\n'.encode() + metadata.encode(),
        f'--{boundary}\r\nContent-Disposition: form-data; name="traces"; filename="t.jsonl"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n".encode()
        + traces,
    ]
    body = b"\r\n".join(parts) + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def route_id(route: Route) -> str:
    return re.sub(r"[^a-z0-9]+", "-", f"{route.method} {route.path}".lower()).strip("-")


HOSTILE = HUGE_INTS | SURROGATE | st.sampled_from([None, "", [], {}, 1.5, True, "x" * 5000])


def leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (dict keys and list indexes), containers included."""
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += leaves(item, (*path, index))
    return found


@st.composite
def mutated(draw: st.DrawFn, document: Any, times: int = 2) -> Any:
    """``document`` (a deep copy) with up to ``times`` values replaced by hostile ones."""
    copy = json.loads(json.dumps(document))
    for _ in range(draw(st.integers(1, times))):
        paths = [path for path in leaves(copy) if path]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = copy
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = draw(HOSTILE)
    return copy


def multipart_upload(lines: list[Any], metadata: Any = None) -> tuple[bytes, str]:
    """A Prime Traces upload body (metadata part and a raw JSONL traces part) and its content type."""
    traces = b"".join(json.dumps(line, allow_nan=False).encode("utf-8", "surrogatepass") + b"\n" for line in lines)
    meta = json.dumps(metadata if metadata is not None else {"schema_version": 1, "context": {"source": "fuzz"}})
    boundary = "fuzzboundary"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="metadata"\r\nContent-Type: application/json\r\n\r\n'
            + meta
            + f'\r\n--{boundary}\r\nContent-Disposition: form-data; name="traces"; filename="t.jsonl"\r\n'
            "Content-Type: application/x-ndjson\r\n\r\n"
        ).encode("utf-8", "surrogatepass")
        + traces
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return body, f"multipart/form-data; boundary={boundary}"
