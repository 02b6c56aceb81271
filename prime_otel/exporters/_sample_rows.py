"""v0 eval-sample rows for ``POST /evaluations/{id}/samples``: an episode (object or record) projected to
its rows, each encoded once, and rows packed into request bodies under the 25 MiB cap.

Public through :mod:`prime_otel.projection`, whose docstring lists where the output differs from prime-runs 0.1.4.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..records import EncodedRecord, _trace, compact_json, nullify

logger = logging.getLogger(__name__)

#: The platform's per-request ceiling on ``POST /evaluations/{id}/samples``.
MAX_SAMPLES_PAYLOAD_BYTES = 26214400
#: ``len(b'{"samples":[]}')``: the request envelope around the comma-joined rows.
ENVELOPE_BYTES = 14

#: An episode's record as the caller has it: the ``to_record()`` mapping, or its :class:`EncodedRecord`.
RecordInput = Mapping[str, Any] | EncodedRecord

_BODY_OPEN = b'{"samples":['
_BODY_CLOSE = b"]}"
# Stands in for an already encoded native_wrapper while the rest of a row is encoded; random per process, so
# no producer value can equal it, and it never leaves this module.
_WRAPPER_TOKEN = f"prime-otel/native-wrapper/{secrets.token_hex(16)}"
_WRAPPER_TOKEN_JSON = compact_json(_WRAPPER_TOKEN)


class EncodedSample:
    """A v0 row with its compact JSON; ``source`` is the position of its episode in the input. A row whose
    ``native_wrapper`` came encoded (``wrapper``) gets it decoded only when :attr:`row` is first read."""

    __slots__ = ("_row", "_wrapper", "data", "source")

    def __init__(self, row: dict[str, Any], data: bytes, source: int, wrapper: EncodedRecord | None = None) -> None:
        self._row, self._wrapper, self.data, self.source = row, wrapper, data, source

    @property
    def identity(self) -> dict[str, Any]:
        """The row's ``sample_id`` and ``rollout_number`` (what a read-back knows it by); its wrapper stays encoded."""
        return {"sample_id": self._row.get("sample_id"), "rollout_number": self._row.get("rollout_number")}

    @property
    def row(self) -> dict[str, Any]:
        if self._wrapper is not None:
            self._row["info"]["native_wrapper"] = self._wrapper.record
            self._wrapper = None
        return self._row


@dataclass(frozen=True)
class PackedRequest:
    """One ready ``POST …/samples`` body holding ``rows`` rows: the input positions in ``indices``."""

    body: bytes
    rows: int
    indices: range

    @property
    def row_indices(self) -> range:
        """Alias of ``indices``."""
        return self.indices


def summary_trace_index(episode: Any) -> int:
    """Index of the trace that represents the episode: the first trainable one, else 0."""
    if isinstance(episode, Mapping):
        return next((index for index, trace in enumerate(episode_traces(episode)) if _trace.is_trainable(trace)), 0)
    return next((index for index, trace in enumerate(episode.traces) if trace.agent.trainable), 0)


def summary_trace(episode: Any) -> Any:
    """The trace that represents the episode (its row, ``task.data.idx`` and advantage); None without traces."""
    traces = episode_traces(episode)
    return traces[summary_trace_index(episode)] if traces else None


def trace_to_sample(trace: Any, rollout_number: int = 1, episode_id: str | None = None) -> dict[str, Any]:
    """One trace (object, or a member of an episode record) as a v0 sample row, keys in column order; NaN/±inf
    anywhere become null."""
    row = _trace_row(trace, rollout_number, episode_id)
    try:
        compact_json(row)
    except (TypeError, ValueError):
        return nullify(row)
    return row


def episode_to_samples(
    episode: Any, rollout_number: int | MutableMapping[Any, int], *, record: RecordInput | None = None
) -> list[dict[str, Any]]:
    """v0 rows of one episode; see :func:`encode_episode_samples` (``rollout_number`` is its ``rollout_numbers``:
    the number itself, or the per-example counter)."""
    return [sample.row for sample in encode_episode_samples(episode, rollout_number, record=record)]


def encode_episode_samples(
    episode: Any,
    rollout_numbers: int | MutableMapping[Any, int],
    *,
    record: RecordInput | None = None,
    source: int = 0,
) -> list[EncodedSample]:
    """Normally one row: the summary trace's, keyed by the episode id, with the producer's (unstamped) record in
    ``info.native_wrapper``. An episode too large for one request falls back to one row per trace (warned).
    A trace-less episode gives none.

    ``episode`` is an episode object or its record (a mapping with ``traces``, which is then its own record).
    ``rollout_numbers`` is the rollout number itself, or a per-example counter (keyed by the summary trace's
    ``task.data.idx``, numbering from 1) that a streaming caller passes on every call. ``record`` is the
    episode's ``to_record()`` (or its :class:`EncodedRecord`) when the caller already has it."""
    traces = episode_traces(episode)
    if not traces:
        return []
    index = summary_trace_index(episode)
    number = next_rollout_number(rollout_numbers, traces[index])
    wrapper = own_record(episode) if record is None else record
    if isinstance(wrapper, EncodedRecord):
        row, data = _encode_with_wrapper(episode_row(episode, index, number, _WRAPPER_TOKEN), wrapper.plain)
        encoded = wrapper
    else:
        (row, data), encoded = encode_row(episode_row(episode, index, number, wrapper)), None
    if fits_one_row(len(data)):
        return [EncodedSample(row, data, source, encoded)]
    return [EncodedSample(*encode_row(row), source) for row in per_trace_rows(episode, number)]


def build_samples(
    episodes: Iterable[Any],
    rollout_numbers: MutableMapping[Any, int] | None = None,
    *,
    records: Sequence[RecordInput | None] | None = None,
) -> list[dict[str, Any]]:
    """v0 rows for ``episodes``; see :func:`encode_samples`."""
    return [sample.row for sample in encode_samples(episodes, rollout_numbers, records=records)]


def encode_samples(
    episodes: Iterable[Any],
    rollout_numbers: MutableMapping[Any, int] | None = None,
    *,
    records: Sequence[RecordInput | None] | None = None,
) -> list[EncodedSample]:
    """v0 rows with their compact JSON, rollouts numbered per example from 1 (pass the same ``rollout_numbers``
    on every call to keep numbering across calls). ``records[i]``, when given, is episode i's record.

    Each item is an episode object, an episode record (a mapping with ``traces``) or a ready v0 row (a mapping
    with ``sample_id``, encoded as it is); any other mapping raises ``TypeError``."""
    counts: MutableMapping[Any, int] = rollout_numbers if rollout_numbers is not None else {}
    samples: list[EncodedSample] = []
    for position, episode in enumerate(episodes):
        if isinstance(episode, Mapping) and "sample_id" in episode:
            samples.append(EncodedSample(*encode_row(as_dict(episode)), position))
            continue
        record = records[position] if records is not None else None
        samples.extend(encode_episode_samples(episode, counts, record=record, source=position))
    return samples


def pack_sample_requests(rows: Sequence[Mapping[str, Any] | EncodedSample]) -> list[PackedRequest]:
    """Greedy packing into bodies of at most ``MAX_SAMPLES_PAYLOAD_BYTES`` (envelope and commas counted).
    A row too large to go alone raises ``ValueError``: refusing beats reporting a complete run missing rows."""
    parts = [row.data if isinstance(row, EncodedSample) else encode_row(as_dict(row))[1] for row in rows]
    requests: list[PackedRequest] = []
    start = 0
    size = ENVELOPE_BYTES
    for position, part in enumerate(parts):
        alone = ENVELOPE_BYTES + len(part)
        if alone > MAX_SAMPLES_PAYLOAD_BYTES:
            raise ValueError(f"sample {position} is too large to upload ({alone} > {MAX_SAMPLES_PAYLOAD_BYTES} bytes)")
        if position == start:
            size = alone
        elif size + 1 + len(part) <= MAX_SAMPLES_PAYLOAD_BYTES:
            size += 1 + len(part)
        else:
            requests.append(_packed(parts, start, position))
            start, size = position, alone
    if parts:
        requests.append(_packed(parts, start, len(parts)))
    return requests


def batch_samples(samples: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The rows split the way :func:`pack_sample_requests` packs them (0.1.4's API)."""
    return [[samples[index] for index in request.indices] for request in pack_sample_requests(samples)]


def json_bytes(value: Any) -> int:
    """Size of ``value`` as the compact JSON a sample request carries (NaN/±inf counted as the ``null`` sent)."""
    try:
        return len(compact_json(value))
    except (TypeError, ValueError):
        return len(compact_json(nullify(value)))


def episode_traces(episode: Any) -> Sequence[Any]:
    if isinstance(episode, Mapping):
        if "traces" not in episode:
            raise TypeError("a mapping episode needs a 'traces' key (a ready v0 row needs 'sample_id')")
        return episode["traces"] or ()
    traces: Sequence[Any] = episode.traces
    return traces


def own_record(episode: Any) -> Mapping[str, Any]:
    return episode if isinstance(episode, Mapping) else episode.to_record()


def _episode_id(episode: Any) -> Any:
    return episode.get("id") if isinstance(episode, Mapping) else episode.id


def trace_info(trace: Any) -> Any:
    return trace.get("info") if isinstance(trace, Mapping) else trace.info


def environment_name(episode: Any) -> str:
    if isinstance(episode, Mapping):
        return str((episode.get("env") or {}).get("id") or "")
    return str(getattr(getattr(episode, "env", None), "id", None) or "")


def next_rollout_number(rollout_numbers: int | MutableMapping[Any, int], summary: Any) -> int:
    if isinstance(rollout_numbers, int):
        return rollout_numbers
    key = _example_key(summary)
    rollout_numbers[key] = number = rollout_numbers.get(key, 0) + 1
    return number


def rollout_counter_key(episode: Any) -> Any:
    """The key of the per-example counter that numbers the episode's rollout (its summary trace's example)."""
    return _example_key(episode_traces(episode)[summary_trace_index(episode)])


def _example_key(summary: Any) -> Any:
    return _trace.task_data(summary).get("idx") if isinstance(summary, Mapping) else summary.task.data.idx


def fits_one_row(row_bytes: int) -> bool:
    return ENVELOPE_BYTES + row_bytes <= MAX_SAMPLES_PAYLOAD_BYTES


def episode_row(episode: Any, index: int, rollout_number: int, record: Any) -> dict[str, Any]:
    episode_id = _episode_id(episode)
    row = _trace_row(episode_traces(episode)[index], rollout_number, episode_id)
    row["sample_id"] = episode_id
    row["info"] = {**(row["info"] or {}), "native_wrapper": record, "native_trace_index": index}
    return row


def per_trace_rows(episode: Any, rollout_number: int) -> list[dict[str, Any]]:
    episode_id = _episode_id(episode)
    logger.warning("Episode %s exceeds the platform sample limit; uploading projected traces", episode_id)
    return [_trace_row(trace, rollout_number, episode_id) for trace in episode_traces(episode)]


def _trace_row(trace: Any, rollout_number: int, episode_id: str | None) -> dict[str, Any]:
    """The v0 row before the encoder's non-finite check. The producer's own containers (``metrics``, ``info``,
    reward scores) are nullified here, which also turns their tuples into lists."""
    if isinstance(trace, Mapping):
        return _record_trace_row(trace, rollout_number, episode_id)
    return _object_trace_row(trace, rollout_number, episode_id)


def _object_trace_row(trace: Any, rollout_number: int, episode_id: str | None) -> dict[str, Any]:
    """The model dumps are fresh; each message is dumped once per trace."""
    data = trace.task.data
    dumped: dict[int, Any] = {}
    tools = trace.tools
    last_error = trace.last_error
    usage = trace.usage
    agent = trace.agent
    return _row(
        trace_id=trace.id,
        task=data.model_dump(mode="json", exclude_none=True),
        example_id=data.idx,
        rollout_number=rollout_number,
        episode_id=episode_id,
        agent=agent.name,
        trainable=agent.trainable,
        trajectory=[
            _branch(_dump_messages(branch.messages, dumped), branch.num_input_tokens, branch.num_output_tokens)
            for branch in trace.branches
        ],
        tool_defs=[tool.model_dump(mode="json", exclude_none=True) for tool in tools] if tools else None,
        reward=trace.reward,
        timing=trace.timing.model_dump(mode="json", exclude_none=True),
        is_completed=trace.is_completed,
        is_truncated=trace.is_truncated,
        metrics=trace.metrics,
        error=last_error.model_dump(mode="json", exclude_none=True) if last_error else None,
        stop_condition=trace.stop_condition,
        token_usage=usage.model_dump(mode="json", exclude_none=True) if usage else None,
        info=trace.info,
        scores=[(name, reward.score) for name, reward in trace.rewards.items() if reward is not None],
    )


def _record_trace_row(trace: Mapping[str, Any], rollout_number: int, episode_id: str | None) -> dict[str, Any]:
    """The record's own dumps (messages, tools, timing, error) go into the row as they are."""
    task = _trace.task_data(trace)
    agent = trace.get("agent") or {}
    return _row(
        trace_id=trace.get("id"),
        task=task,
        example_id=task.get("idx"),
        rollout_number=rollout_number,
        episode_id=episode_id,
        agent=agent.get("name", "agent"),
        trainable=agent.get("trainable", True),
        trajectory=[_branch(*branch) for branch in _trace.branches(trace)],
        tool_defs=trace.get("tools") or None,
        reward=_trace.reward(trace),
        timing=trace.get("timing"),
        is_completed=trace.get("is_completed", False),
        is_truncated=_trace.is_truncated(trace),
        metrics=trace.get("metrics") or {},
        error=_trace.last_error(trace),
        stop_condition=trace.get("stop_condition"),
        token_usage=_trace.usage(trace),
        info=trace.get("info"),
        scores=_trace.scores(trace),
    )


def _branch(messages: list[Any], num_input_tokens: int, num_output_tokens: int) -> dict[str, Any]:
    return {"messages": messages, "num_input_tokens": num_input_tokens, "num_output_tokens": num_output_tokens}


def _row(
    *,
    trace_id: Any,
    task: dict[str, Any],
    example_id: Any,
    rollout_number: int,
    episode_id: str | None,
    agent: Any,
    trainable: Any,
    trajectory: list[dict[str, Any]],
    tool_defs: Any,
    reward: Any,
    timing: Any,
    is_completed: Any,
    is_truncated: bool,
    metrics: Mapping[str, Any],
    error: Any,
    stop_condition: Any,
    token_usage: Any,
    info: Any,
    scores: Iterable[tuple[str, Any]],
) -> dict[str, Any]:
    """The one place that decides the row's keys and their order, whichever form the trace came in."""
    row: dict[str, Any] = {
        "sample_id": trace_id,
        "example_id": example_id,
        "rollout_number": rollout_number,
        "episode_id": episode_id,
        "agent": agent,
        "trainable": trainable,
        "task": task,
        "prompt": [],
        "completion": list(trajectory[-1]["messages"]) if trajectory else [],
        "answer": task.get("answer"),
        "tool_defs": tool_defs,
        "reward": nullify(reward),
        "timing": timing,
        "is_completed": is_completed,
        "is_truncated": is_truncated,
        "metrics": nullify(dict(metrics)),
        "error": error,
        "stop_condition": stop_condition,
        "trajectory": trajectory,
        "token_usage": token_usage,
        "info": nullify(dict(info)) if info else None,
    }
    # Sub-rewards become top-level columns the way v0 had them, never over an existing column.
    for name, score in scores:
        if name not in row:
            row[name] = nullify(score)
    return row


def _dump_messages(messages: Iterable[Any], dumped: dict[int, Any]) -> list[Any]:
    out = []
    for message in messages:
        dump = dumped.get(id(message))
        if dump is None:
            dump = dumped[id(message)] = message.model_dump(mode="json", exclude_none=True)
        out.append(dump)
    return out


def encode_row(row: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    """The row and its compact JSON; a row holding NaN/±inf is nullified first (the row survives)."""
    try:
        return row, compact_json(row)
    except ValueError:
        row = nullify(row)
        return row, compact_json(row)


def _encode_with_wrapper(row: dict[str, Any], wrapper: bytes) -> tuple[dict[str, Any], bytes]:
    """:func:`encode_row` for a row whose ``info.native_wrapper`` holds the stand-in token, the record being
    already encoded as ``wrapper``."""
    stand_in, data = encode_row(row)
    return {**stand_in, "info": dict(stand_in["info"])}, data.replace(_WRAPPER_TOKEN_JSON, wrapper, 1)


def as_dict(row: Mapping[str, Any]) -> dict[str, Any]:
    return row if isinstance(row, dict) else dict(row)


def _packed(parts: list[bytes], start: int, stop: int) -> PackedRequest:
    body = b"".join((_BODY_OPEN, b",".join(parts[start:stop]), _BODY_CLOSE))
    return PackedRequest(body, stop - start, range(start, stop))
