"""Validation of one Prime Traces upload, from the raw multipart body to rows ready to store.

Every check answers 400 with the service's error code (e.g. ``trace_too_large``) and stores nothing.
Limits apply to the uncompressed bytes; the digest is the SHA-256 of those same bytes.
"""

from __future__ import annotations

import hashlib
import re
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ._db import dumps, iso, parse_json
from ._errors import TracesError
from ._multipart import MultipartError, Part, parse_multipart
from ._settings import Settings

LineFormat = Literal["episode", "trace"]

_IDEMPOTENCY_KEY = re.compile(r"sha256:([0-9a-f]{64})")


def _reject(code: str, message: str) -> TracesError:
    return TracesError(400, code, message)


@dataclass(frozen=True)
class TraceRow:
    id: str
    run_id: str
    episode_id: str | None
    position: int
    environment_id: str
    step: int | None
    reward: float | None
    created_at: str
    doc: str


@dataclass(frozen=True)
class EpisodeRow:
    id: str
    run_id: str
    environment_id: str
    doc: str


@dataclass
class Upload:
    """A request whose envelope checked out: digest verified, body decompressed, not yet split into lines."""

    digest: str
    line_format: LineFormat
    team_id: str | None
    metadata: dict[str, Any]
    body: bytes
    traces_part_headers: dict[str, str] = field(default_factory=dict)


def line_format_of(header: str | None) -> LineFormat:
    if header is None or header == "":
        return "trace"
    if header.strip().lower() == "episode":
        return "episode"
    raise _reject("line_format_mismatch", f"unknown X-Prime-Line-Format: {header!r}")


def digest_of(idempotency_key: str | None) -> str:
    match = _IDEMPOTENCY_KEY.fullmatch(idempotency_key or "")
    if match is None:
        raise _reject("invalid_idempotency_key", "Idempotency-Key must be sha256:<64 lowercase hex>")
    return match.group(1)


class UploadReader:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def read(
        self,
        body: bytes,
        *,
        content_type: str | None,
        idempotency_key: str | None,
        line_format: str | None,
        team_id: str | None,
    ) -> Upload:
        digest = digest_of(idempotency_key)
        fmt = line_format_of(line_format)
        try:
            parts = parse_multipart(body, content_type)
        except MultipartError as exc:
            raise _reject("malformed_encoding", f"malformed multipart body: {exc}") from exc
        metadata_part, traces_part = self._two_parts(parts)
        data = self._decode(traces_part)
        if hashlib.sha256(data).hexdigest() != digest:
            raise _reject("digest_mismatch", "Idempotency-Key does not match the SHA-256 of the uncompressed traces")
        return Upload(digest, fmt, team_id or None, _metadata(metadata_part), data, traces_part.headers)

    @staticmethod
    def _two_parts(parts: list[Part]) -> tuple[Part, Part]:
        by_name: dict[str, Part] = {}
        for part in parts:
            if part.name not in ("metadata", "traces") or part.name in by_name:
                raise _reject("invalid_metadata", f"unexpected multipart part {part.name!r}")
            by_name[part.name] = part
        if "metadata" not in by_name:
            raise _reject("invalid_metadata", "missing multipart part 'metadata'")
        if "traces" not in by_name:
            raise _reject("invalid_trace", "missing multipart part 'traces'")
        return by_name["metadata"], by_name["traces"]

    def _decode(self, part: Part) -> bytes:
        limit = self._settings.traces_max_upload_bytes
        encoding = part.headers.get("content-encoding", "identity").strip().lower()
        if encoding in ("", "identity"):
            data = part.content
        elif encoding == "gzip":
            data = _gunzip(part.content, limit)
        else:
            raise _reject("malformed_encoding", f"unsupported Content-Encoding {encoding!r}")
        if len(data) > limit:
            raise _reject("upload_too_large", f"upload exceeds {limit} uncompressed bytes")
        return data

    def rows(self, upload: Upload) -> tuple[list[EpisodeRow], list[TraceRow]]:
        lines = _LineSplitter(self._settings).split(upload.body)
        builder = _RowBuilder(self._settings, upload.line_format)
        for number, line in lines:
            builder.add(number, _parse_line(number, line))
        return builder.episodes, builder.traces


def _gunzip(content: bytes, limit: int) -> bytes:
    """Decompresses gzip members one after another, never inflating more than ``limit + 1`` bytes."""
    out = bytearray()
    remaining = content
    try:
        while remaining:
            inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            out += inflater.decompress(remaining, limit + 1 - len(out))
            if len(out) > limit:
                raise _reject("upload_too_large", f"upload exceeds {limit} uncompressed bytes")
            if not inflater.eof:
                raise _reject("malformed_encoding", "truncated gzip stream")
            remaining = inflater.unused_data
    except zlib.error as exc:
        raise _reject("malformed_encoding", f"invalid gzip data: {exc}") from exc
    return bytes(out)


def _metadata(part: Part) -> dict[str, Any]:
    try:
        value = parse_json(part.content)
    except (ValueError, RecursionError) as exc:
        raise _reject("invalid_metadata", "metadata part is not a JSON object") from exc
    if not isinstance(value, dict):
        raise _reject("invalid_metadata", "metadata part is not a JSON object")
    if value.get("schema_version") != 1:
        raise TracesError(
            400, "unsupported_schema_version", f"unsupported schema_version {value.get('schema_version')!r}"
        )
    context = value.get("context", {})
    if not isinstance(context, dict) or not all(isinstance(v, str) for v in context.values()):
        raise _reject("invalid_metadata", "metadata.context must map names to strings")
    return value


class _LineSplitter:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def split(self, data: bytes) -> list[tuple[int, bytes]]:
        """Non-blank lines with their 1-based numbers (blank lines still count in the numbering)."""
        lines: list[tuple[int, bytes]] = []
        max_line = self._settings.traces_max_line_bytes
        max_lines = self._settings.traces_max_lines
        for index, line in enumerate(data.split(b"\n"), start=1):
            if not line.strip():
                continue
            if len(line) > max_line:
                raise _reject("trace_too_large", f"line {index} exceeds {max_line} bytes")
            lines.append((index, line))
            if len(lines) > max_lines:
                raise _reject("too_many_traces_in_upload", f"upload has more than {max_lines} lines")
        return lines


def _parse_line(number: int, line: bytes) -> dict[str, Any]:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _reject("malformed_encoding", f"line {number} is not UTF-8") from exc
    try:
        value = parse_json(text)
    except (ValueError, RecursionError) as exc:
        raise _reject("invalid_trace", f"line {number} is not valid JSON") from exc
    if not isinstance(value, dict):
        raise _reject("invalid_trace", f"line {number} is not a JSON object")
    return value


def _nonempty_id(number: int, record: Mapping[str, Any], what: str) -> str:
    value = record.get("id")
    if not isinstance(value, str) or not value:
        raise _reject("invalid_trace", f"line {number}: {what} has no string id")
    return value


def _run_block(record: Mapping[str, Any]) -> Mapping[str, Any]:
    run = record.get("run")
    return run if isinstance(run, Mapping) else {}


def _run_id(record: Mapping[str, Any]) -> str:
    """The join key: this record's own ``run.id`` and nothing else (never an envelope's)."""
    value = _run_block(record).get("id")
    return value if isinstance(value, str) else ""


def _step(record: Mapping[str, Any]) -> int | None:
    work = _run_block(record).get("work")
    step = work.get("step") if isinstance(work, Mapping) else None
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def _environment_id(record: Mapping[str, Any]) -> str | None:
    env = record.get("env")
    value = env.get("id") if isinstance(env, Mapping) else None
    return value if isinstance(value, str) else None


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def trace_reward(trace: Mapping[str, Any]) -> float | None:
    """Sum of score * weight over the scores that ran; None when nothing was scored."""
    explicit = _number(trace.get("reward"))
    if explicit is not None:
        return explicit
    rewards = trace.get("rewards")
    if not isinstance(rewards, Mapping):
        return None
    total, scored = 0.0, False
    for entry in rewards.values():
        score = _number(entry.get("score")) if isinstance(entry, Mapping) else None
        if score is None:
            continue
        weight = _number(entry.get("weight"))
        total += score * (1.0 if weight is None else weight)
        scored = True
    return total if scored else None


def _created_at(trace: Mapping[str, Any]) -> str:
    timing = trace.get("timing")
    start = _number(timing.get("start")) if isinstance(timing, Mapping) else None
    return iso(start if start is not None and 0 < start < 1e11 else time.time())


class _RowBuilder:
    def __init__(self, settings: Settings, line_format: LineFormat) -> None:
        self._settings = settings
        self._format = line_format
        self.episodes: list[EpisodeRow] = []
        self.traces: list[TraceRow] = []
        self._episode_ids: set[str] = set()
        self._trace_ids: set[str] = set()

    def add(self, number: int, record: dict[str, Any]) -> None:
        has_members = isinstance(record.get("traces"), list)
        if self._format == "episode" and not has_members:
            raise _reject("line_format_mismatch", f"line {number} is not an episode (no 'traces' list)")
        if self._format == "trace" and has_members:
            raise _reject("line_format_mismatch", f"line {number} is an episode; send X-Prime-Line-Format: episode")
        environment_id = self._checked_environment(number, record)
        if self._format == "episode":
            self._add_episode(number, record, environment_id)
        else:
            self._add_trace(number, record, None, 0, environment_id)

    def _checked_environment(self, number: int, record: Mapping[str, Any]) -> str:
        environment_id = _environment_id(record) or ""
        if len(environment_id) > self._settings.traces_max_id_length:
            raise _reject("environment_id_too_long", f"line {number}: env.id is longer than allowed")
        return environment_id

    def _add_episode(self, number: int, record: dict[str, Any], environment_id: str) -> None:
        episode_id = _nonempty_id(number, record, "episode")
        if len(episode_id) > self._settings.traces_max_id_length:
            raise _reject("episode_id_too_long", f"line {number}: episode id is longer than allowed")
        if episode_id in self._episode_ids:
            raise _reject("duplicate_episode_id", f"line {number}: episode {episode_id} appears twice")
        self._episode_ids.add(episode_id)
        members = record["traces"]
        if len(members) > self._settings.traces_max_per_episode:
            raise _reject("too_many_traces_in_episode", f"line {number}: episode has {len(members)} traces")
        member_ids = []
        for position, member in enumerate(members):
            if not isinstance(member, dict):
                raise _reject("invalid_trace", f"line {number}: member trace {position} is not an object")
            own_environment = self._checked_environment(number, member)
            member_ids.append(self._add_trace(number, member, episode_id, position, own_environment or environment_id))
        # Stored the way the service reads it back raw: member ids in place of inline traces.
        envelope = {key: (member_ids if key == "traces" else value) for key, value in record.items()}
        self.episodes.append(EpisodeRow(episode_id, _run_id(record), environment_id, dumps(envelope)))

    def _add_trace(
        self, number: int, trace: dict[str, Any], episode_id: str | None, position: int, environment_id: str
    ) -> str:
        trace_id = _nonempty_id(number, trace, "trace")
        if trace_id in self._trace_ids:
            raise _reject("duplicate_trace_id", f"line {number}: trace {trace_id} appears twice")
        self._trace_ids.add(trace_id)
        self.traces.append(
            TraceRow(
                id=trace_id,
                run_id=_run_id(trace),
                episode_id=episode_id,
                position=position,
                environment_id=environment_id,
                step=_step(trace),
                reward=trace_reward(trace),
                created_at=_created_at(trace),
                doc=dumps(trace),
            )
        )
        return trace_id
