"""An episode record (verifiers 0.4.0 shape) assembled from finished spans that follow the OpenTelemetry GenAI
semantic conventions: an ``episode`` span and the ``invoke_agent``, ``chat`` and ``execute_tool`` spans under it.

Pure: it takes :class:`GenAISpan` views (from SDK spans in-process, from OTLP in the gateway), in any order, and
returns a JSON-safe record. docs/genai.md has the attribute table; ``_conventions`` the names.

- One member trace per agent: each ``invoke_agent`` span, and the episode itself for the model calls under no
  agent (or when there is no agent span at all).
- The message graph is built by prefix: each chat span's input repeats the history so far, so a message becomes
  a node only once per (parent, message, root tools), and a rewritten history forks a branch.
- One model call per chat span; usage from ``gen_ai.usage.*`` (``prompt_tokens`` without cache reads, which the
  GenAI input count includes).
- Rewards from ``gen_ai.evaluation.result`` span events. Where content was not captured, the calls keep their
  usage and timing and ``info.content_captured`` is false.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from .. import _conventions as conv
from ._models import TokenCounts

#: The record shape the assembled records follow.
RECORD_SCHEMA_VERSION = "0.4.0"
SOURCE = "opentelemetry-genai"
_ENDPOINTS = {"chat": "/chat/completions", "text_completion": "/completions"}
_FINISH_REASONS = {
    "stop": "stop",
    "end_turn": "stop",
    "length": "length",
    "max_tokens": "length",
    "tool_call": "tool_calls",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
}
_ZERO_SPAN = {"start": 0.0, "end": 0.0}
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=str)


@dataclass(frozen=True)
class SpanEvent:
    name: str
    time_ns: int
    attributes: Mapping[str, Any]


@dataclass(frozen=True)
class GenAISpan:
    """What the assembly reads of one finished span."""

    trace_id: int
    span_id: int
    parent_id: int | None
    name: str
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Any]
    events: tuple[SpanEvent, ...] = ()
    failed: bool = False
    status_message: str = ""

    @property
    def operation(self) -> str | None:
        value = self.attributes.get(conv.GEN_AI_OPERATION)
        return value if isinstance(value, str) else None

    @classmethod
    def of(cls, span: ReadableSpan) -> GenAISpan:
        context, parent = span.context, span.parent
        return cls(
            trace_id=context.trace_id,
            span_id=context.span_id,
            parent_id=parent.span_id if parent is not None else None,
            name=span.name,
            start_ns=span.start_time or 0,
            end_ns=span.end_time or span.start_time or 0,
            attributes=span.attributes or {},
            events=tuple(SpanEvent(e.name, e.timestamp, e.attributes or {}) for e in span.events),
            failed=span.status.status_code is StatusCode.ERROR,
            status_message=span.status.description or "",
        )


def marks_episode(name: str, attributes: Mapping[str, Any]) -> bool:
    """A span that stands for an episode to assemble: named ``episode`` or marked, and carrying no record."""
    if attributes.get(conv.RECORD_JSON) is not None or attributes.get(conv.RECORD_MAP) is not None:
        return False
    return name == conv.EPISODE_SPAN or attributes.get(conv.EPISODE_MARKER) is True


def has_genai_content(episode: GenAISpan, spans: Iterable[GenAISpan]) -> bool:
    """Whether there is anything to assemble: a GenAI span in the trace or an evaluation on the episode span (an
    episode span with neither is a producer's span that lost its record, not a GenAI episode)."""
    if any(event.name == conv.EVALUATION_EVENT for event in episode.events):
        return True
    return any(span.trace_id == episode.trace_id and span.operation is not None for span in spans)


def assemble_episode(
    episode: GenAISpan, spans: Iterable[GenAISpan], *, adopt_orphans: bool = False, spans_dropped: int = 0
) -> dict[str, Any]:
    """The episode record of ``episode`` from the spans of its trace (any order; spans of other traces and not
    under the episode are ignored). With ``adopt_orphans`` (spans that crossed a network, where an intermediate
    span may be missing), a GenAI span whose parent is not among them is taken as the episode's when the trace
    holds no other episode span."""
    trace_spans = [span for span in spans if span.trace_id == episode.trace_id and span.span_id != episode.span_id]
    members = _descendants(episode, trace_spans, adopt_orphans)
    seats = _seats(episode, members)
    attributes = episode.attributes
    task = _task(attributes, seats)
    traces = [seat.build(task, episode) for seat in seats]
    _assign_rewards(episode, members, seats, traces)
    captured = all(seat.content_captured for seat in seats)
    episode_errors = _span_errors(episode) if seats[0].span is not episode else []
    for trace in traces:
        trace["info"] = {"source": SOURCE, "content_captured": captured, "trace_id": f"{episode.trace_id:032x}"}
        if spans_dropped:
            trace["info"]["spans_dropped"] = spans_dropped
    record: dict[str, Any] = {
        "id": _episode_id(episode),
        "env": _env(attributes),
        "task": task,
    }
    group = attributes.get(conv.GROUP_ID)
    if isinstance(group, str) and group:
        record["group"] = {"id": group}
    step = _count(attributes.get(conv.RUN_STEP))
    if step is not None:
        # A training episode: the SDK stamps the run's id and kind; the dispatch step is the producer's.
        record["run"] = {"type": "train", "id": "", "work": {"type": "train", "step": step}}
    record["ok"] = not episode_errors and all(trace["ok"] for trace in traces)
    record["is_timeout"] = False
    record["errors"] = episode_errors
    record["traces"] = traces
    for name in ("num_input_tokens", "num_output_tokens", "num_total_tokens"):
        record[name] = sum(trace[name] for trace in traces)
    return record


# -- which spans are the episode's, and whose ---------------------------------------------------------------


def _descendants(episode: GenAISpan, spans: list[GenAISpan], adopt_orphans: bool) -> list[GenAISpan]:
    ids = {span.span_id for span in spans} | {episode.span_id}
    children: dict[int | None, list[GenAISpan]] = {}
    for span in spans:
        children.setdefault(span.parent_id, []).append(span)
    orphans: list[GenAISpan] = []
    if adopt_orphans and not any(marks_episode(span.name, span.attributes) for span in spans):
        orphans = [span for span in spans if span.parent_id not in ids and span.operation is not None]
    found = list(orphans)
    queue = [episode.span_id, *(span.span_id for span in orphans)]
    seen = set(queue)
    while queue:
        for child in children.get(queue.pop(), ()):
            if child.span_id in seen or marks_episode(child.name, child.attributes):
                continue
            seen.add(child.span_id)
            found.append(child)
            queue.append(child.span_id)
    return sorted(found, key=lambda span: (span.start_ns, span.end_ns))


def _seats(episode: GenAISpan, members: list[GenAISpan]) -> list[_Seat]:
    agents = {span.span_id: span for span in members if span.operation == conv.INVOKE_AGENT}
    by_id = {span.span_id: span for span in members}
    default = _Seat(episode)
    seats: dict[int, _Seat] = {span_id: _Seat(span) for span_id, span in agents.items()}

    def owner(span: GenAISpan) -> _Seat:
        parent = span.parent_id
        hops = 0
        while parent is not None and hops <= len(by_id):
            if parent in seats:
                return seats[parent]
            ancestor = by_id.get(parent)
            parent = ancestor.parent_id if ancestor is not None else None
            hops += 1
        return default

    for span in members:
        if span.operation in conv.MODEL_CALL_OPERATIONS or span.operation == conv.EXECUTE_TOOL:
            owner(span).spans.append(span)
    ordered = [seats[span_id] for span_id in agents]
    if default.spans or not ordered:
        ordered.insert(0, default)
    return ordered


# -- one member trace -----------------------------------------------------------------------------------------


@dataclass
class _Seat:
    """One agent's spans and the member trace they make."""

    span: GenAISpan
    spans: list[GenAISpan] = field(default_factory=list)
    content_captured: bool = True

    def build(self, task: Mapping[str, Any], episode: GenAISpan) -> dict[str, Any]:
        graph = _Graph()
        calls: list[dict[str, Any]] = []
        tools: dict[tuple[Any, ...], dict[str, Any]] = {}
        model_seconds = tool_seconds = 0.0
        tool_spans: list[GenAISpan] = []
        requested: str | None = None
        errors: list[dict[str, Any]] = []
        for span in self.spans:
            seconds = max(0.0, (span.end_ns - span.start_ns) / 1e9)
            if span.operation == conv.EXECUTE_TOOL:
                tool_seconds += seconds
                tool_spans.append(span)
                continue
            model_seconds += seconds
            requested = requested or _text(span.attributes.get(conv.GEN_AI_REQUEST_MODEL))
            definitions = _tool_definitions(span.attributes.get(conv.GEN_AI_TOOL_DEFINITIONS))
            for tool in definitions:
                tools[(tool.get("namespace"), tool["name"], tool["type"])] = tool
            call, error = self._call(span, graph, definitions)
            calls.append(call)
            if error is not None:
                errors.append(error)
        for span in tool_spans:
            graph.add_tool_result(span)
        errors.extend(_span_errors(self.span))
        stop = _text(self.span.attributes.get(conv.STOP_CONDITION)) or _text(
            episode.attributes.get(conv.STOP_CONDITION)
        )
        if stop is None:
            if calls and "error" in calls[-1]:
                stop = "provider_error"
            elif errors:
                stop = "error"
            else:
                stop = "agent_completed"
        agent_name = _text(self.span.attributes.get(conv.GEN_AI_AGENT_NAME)) or "agent"
        trainable = self.span.attributes.get(conv.AGENT_TRAINABLE)
        config: dict[str, Any] = {"model": requested} if requested else {}
        start, end = self.span.start_ns / 1e9, self.span.end_ns / 1e9
        counts = _token_counts(graph.nodes, calls)
        trace: dict[str, Any] = {
            "version": 1,
            "id": _member_id(self.span),
            "verifiers": {"version": RECORD_SCHEMA_VERSION},
            "task": task,
            "agent": {"config": config, "name": agent_name, "trainable": trainable is not False},
            "tools": list(tools.values()),
            "nodes": graph.nodes,
            "calls": calls,
            "mm_token_type_id_map": {},
            "request_rewrites": [],
            "response_rewrites": [],
            "rewards": {},
            "metrics": {"num_turns": float(len(calls)), "tool_calls": float(len(tool_spans))},
            "info": {},
            "extra_usage": [],
            "is_completed": True,
            "ok": not errors,
            "stop_condition": stop,
            "is_timeout": False,
            "errors": errors,
            "timing": {
                "start": start,
                "boot": dict(_ZERO_SPAN),
                "setup": dict(_ZERO_SPAN),
                "agent": {
                    "start": start,
                    "end": end,
                    "model": {"duration": model_seconds},
                    "harness": {"duration": tool_seconds},
                },
                "finalize": dict(_ZERO_SPAN),
                "scoring": dict(_ZERO_SPAN),
            },
            "num_input_tokens": counts[0],
            "num_output_tokens": counts[1],
            "num_total_tokens": counts[2],
        }
        self.content_captured = graph.content_captured
        return trace

    def _call(
        self, span: GenAISpan, graph: _Graph, definitions: list[dict[str, Any]]
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        attributes = span.attributes
        history = graph.history(attributes.get(conv.GEN_AI_INPUT_MESSAGES))
        outputs = _raw_messages(attributes.get(conv.GEN_AI_OUTPUT_MESSAGES))
        node: int | None = None
        if history is None and outputs is None:
            graph.content_captured = False
        else:
            system = _system_messages(attributes.get(conv.GEN_AI_SYSTEM_INSTRUCTIONS))
            output = None
            if outputs and not span.failed:
                output = {key: value for key, value in outputs[0].items() if key != "finish_reason"}
            node = graph.add_chat([*system, *(history or ())], output, definitions, span.start_ns, span.end_ns)
        call: dict[str, Any] = {}
        if node is not None:
            call["node"] = node
        model = _text(attributes.get(conv.GEN_AI_RESPONSE_MODEL)) or _text(attributes.get(conv.GEN_AI_REQUEST_MODEL))
        if model:
            call["model"] = model
        sampling = {
            key: value
            for name, key in conv.GEN_AI_SAMPLING.items()
            if (value := _number(attributes.get(name))) is not None
        }
        if sampling:
            call["sampling"] = sampling
        endpoint = _ENDPOINTS.get(span.operation or "")
        if endpoint:
            call["endpoint"] = endpoint
        finish = _finish_reason(attributes.get(conv.GEN_AI_FINISH_REASONS))
        if finish is not None:
            call["finish_reason"] = finish
        usage = _usage(attributes)
        if usage is not None:
            call["usage"] = usage
        call["time"] = {"start": span.start_ns / 1e9, "end": span.end_ns / 1e9}
        error = None
        if span.failed:
            error = _provider_error(span)
            call["error"] = error
        return call, error


def _token_counts(nodes: list[dict[str, Any]], calls: list[dict[str, Any]]) -> tuple[int, int, int]:
    """verifiers' computed counts (:class:`TokenCounts`) over the record's nodes and calls; a call's input is its
    prompt tokens plus the cached input it read."""
    usage_at: dict[int, tuple[int, int, int]] = {}
    for call in calls:
        usage = call.get("usage")
        if "node" in call and usage is not None:
            sent = usage["prompt_tokens"] + (usage.get("cached_input_tokens") or 0)
            usage_at[call["node"]] = (sent, sent + usage["completion_tokens"], usage["completion_tokens"])
    completions = [call["usage"]["completion_tokens"] for call in calls if "usage" in call]
    counts = TokenCounts.of_graph([node.get("parent") for node in nodes], usage_at, completions)
    return counts.input, counts.output, counts.total


# -- the message graph ----------------------------------------------------------------------------------------


class _Graph:
    """Nodes deduplicated by (parent, message, root tools)."""

    def __init__(self) -> None:
        self.nodes: list[dict[str, Any]] = []
        self._index: dict[tuple[int | None, str, str], int] = {}
        #: Each chat span repeats the history: a GenAI message is converted once, keyed by its own JSON.
        self._converted: dict[str, list[tuple[dict[str, Any], str]]] = {}
        #: The previous chat span's GenAI messages (history, then output) with the node each one ended at, and its
        #: tools: the next span's history usually starts with them, compared as they are (no encoding).
        self._previous: list[tuple[Mapping[str, Any], int | None]] = []
        self._previous_tools: str | None = None
        #: The previous chat span's input as sent (JSON text) and parsed: the next input repeats it as a prefix.
        self._previous_text: str | None = None
        self._previous_history: list[Mapping[str, Any]] = []
        #: Tool calls by id: the node that asked, and whether a tool node answered; children per node.
        self._asked: dict[str, int] = {}
        self._answered: set[str] = set()
        self._children: dict[int, list[int]] = {}
        self.content_captured = True

    def history(self, value: Any) -> list[Mapping[str, Any]] | None:
        """A chat span's input messages; when its JSON text extends the previous span's, only the new messages
        are parsed (the repeated history would make parsing quadratic in the conversation's length)."""
        previous = self._previous_text
        if isinstance(value, str) and previous is not None and len(previous) > 2:
            prefix = previous[:-1]  # "[m1,...,mk": identical text is identical messages
            if value.startswith(prefix) and value[len(prefix) : len(prefix) + 1] in (",", "]"):
                try:
                    tail = json.loads("[" + value[len(prefix) + 1 :]) if value[len(prefix)] == "," else []
                except ValueError:
                    tail = None
                if isinstance(tail, list):
                    messages = [*self._previous_history, *(m for m in tail if isinstance(m, Mapping))]
                    self._previous_text, self._previous_history = value, messages
                    return messages
        parsed = _raw_messages(value)
        self._previous_text = value if isinstance(value, str) and parsed is not None else None
        self._previous_history = parsed or []
        return parsed

    def add_chat(
        self,
        history: list[Mapping[str, Any]],
        output: Mapping[str, Any] | None,
        tools: list[dict[str, Any]],
        start_ns: int,
        end_ns: int,
    ) -> int | None:
        """One chat span's history (nodes found or added) and output (a sampled node); the output's node."""
        tools_key = _COMPACT.encode(tools) if tools else ""
        path: list[tuple[Mapping[str, Any], int | None]] = []
        parent: int | None = None
        if tools_key == self._previous_tools:
            previous = self._previous
            while len(path) < min(len(history), len(previous)) and history[len(path)] == previous[len(path)][0]:
                parent = previous[len(path)][1]
                path.append(previous[len(path)])
        for raw in history[len(path) :]:
            for message, key in self.converted(raw):
                parent = self.add(parent, message, key, tools, tools_key, start_ns / 1e9, sampled=False)
            path.append((raw, parent))
        node = None
        if output is not None:
            said = self.converted(output)
            if said:
                message, key = said[0]
                node = self.add(parent, message, key, tools, tools_key, end_ns / 1e9, sampled=True)
                path.append((output, node))
        self._previous, self._previous_tools = path, tools_key
        return node

    def converted(self, raw: Mapping[str, Any]) -> list[tuple[dict[str, Any], str]]:
        """The record messages of one GenAI message, each with its JSON (the dedup key)."""
        raw_key = _COMPACT.encode(raw)
        hit = self._converted.get(raw_key)
        if hit is None:
            hit = self._converted[raw_key] = [(message, _COMPACT.encode(message)) for message in _message(raw)]
        return hit

    def add(
        self,
        parent: int | None,
        message: dict[str, Any],
        key: str,
        tools: list[dict[str, Any]],
        tools_key: str,
        timestamp: float,
        *,
        sampled: bool,
    ) -> int:
        root = parent is None
        index_key = (parent, key, tools_key if root else "")
        index = self._index.get(index_key)
        if index is not None:
            if sampled:
                self.nodes[index]["sampled"] = True
            return index
        node: dict[str, Any] = {}
        if parent is not None:
            node["parent"] = parent
        if root and tools:
            node["tools"] = tools
        node.update(
            semantic_parents=[],
            message=message,
            sampled=sampled,
            timestamp=timestamp,
            token_ids=[],
            mask=[],
            is_content=[],
            logprobs=[],
        )
        self.nodes.append(node)
        index = self._index[index_key] = len(self.nodes) - 1
        if parent is not None:
            self._children.setdefault(parent, []).append(index)
        if message["role"] == "tool":
            self._answered.add(message.get("tool_call_id", ""))
        for call in message.get("tool_calls") or ():
            self._asked[call["id"]] = index
        return index

    def add_tool_result(self, span: GenAISpan) -> None:
        """A tool result no later chat span repeated (the agent stopped after the tool): a tool node under the
        assistant message that asked for it."""
        call_id = _text(span.attributes.get(conv.GEN_AI_TOOL_CALL_ID))
        result = span.attributes.get(conv.GEN_AI_TOOL_CALL_RESULT)
        if call_id is None or result is None:
            return
        asked = self._asked.get(call_id)
        if asked is None or call_id in self._answered:
            return
        leaf = asked
        while True:
            children = self._children.get(leaf, [])
            if len(children) != 1 or self.nodes[children[0]]["message"]["role"] != "tool":
                break
            leaf = children[0]
        message: dict[str, Any] = {"role": "tool", "tool_call_id": call_id, "content": _as_text(result)}
        name = _text(span.attributes.get(conv.GEN_AI_TOOL_NAME))
        if name:
            message["name"] = name
        self.add(leaf, message, _COMPACT.encode(message), [], "", span.end_ns / 1e9, sampled=False)


def _json_list(value: Any) -> list[Any] | tuple[Any, ...] | None:
    """An attribute holding a list, given as a JSON string or structured; None when absent or unreadable."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, (list, tuple)) else None


def _raw_messages(value: Any) -> list[Mapping[str, Any]] | None:
    """GenAI messages (a JSON string or structured list); None when absent or unreadable."""
    items = _json_list(value)
    if items is None:
        return None
    return [message for message in items if isinstance(message, Mapping)]


def _system_messages(value: Any) -> list[dict[str, Any]]:
    """``gen_ai.system_instructions`` (parts) as the GenAI system message leading the history."""
    text = "".join(_part_texts(_json_list(value) or ()))
    return [{"role": "system", "parts": [{"type": "text", "content": text}]}] if text else []


def _part_texts(parts: Iterable[Any]) -> list[str]:
    return [str(part.get("content", "")) for part in parts if isinstance(part, Mapping) and part.get("type") == "text"]


def _message(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    role = message.get("role")
    parts = message.get("parts")
    if not isinstance(parts, (list, tuple)):
        content = message.get("content")
        parts = [{"type": "text", "content": content}] if isinstance(content, str) else []
    parts = [part for part in parts if isinstance(part, Mapping)]
    if role in ("system", "developer"):
        return [{"role": "system", "content": "".join(_part_texts(parts))}]
    if role == "user":
        return [{"role": "user", "content": _user_content(parts)}]
    if role == "assistant":
        out: dict[str, Any] = {"role": "assistant"}
        texts = _part_texts(parts)
        if texts:
            out["content"] = "".join(texts)
        reasoning = [str(p.get("content", "")) for p in parts if p.get("type") == "reasoning"]
        if reasoning:
            out["reasoning_content"] = "".join(reasoning)
        calls = [
            {
                "id": str(part.get("id") or ""),
                "type": "function",
                "name": str(part.get("name") or ""),
                "arguments": _as_text(part.get("arguments", {})),
            }
            for part in parts
            if part.get("type") == "tool_call"
        ]
        if calls:
            out["tool_calls"] = calls
        return [out]
    if role == "tool":
        responses = [part for part in parts if part.get("type") == "tool_call_response"]
        if responses:
            return [
                {"role": "tool", "tool_call_id": str(part.get("id") or ""), "content": _as_text(part.get("response"))}
                for part in responses
            ]
        return [{"role": "tool", "tool_call_id": str(message.get("id") or ""), "content": "".join(_part_texts(parts))}]
    return []


def _user_content(parts: list[Mapping[str, Any]]) -> Any:
    if all(part.get("type") == "text" for part in parts):
        return "".join(_part_texts(parts))
    content: list[dict[str, Any]] = []
    for part in parts:
        kind = part.get("type")
        if kind == "text":
            content.append({"type": "text", "text": str(part.get("content", ""))})
        elif kind == "uri" and isinstance(part.get("uri"), str):
            content.append({"type": "image_url", "image_url": {"url": part["uri"]}})
    return content


def _tool_definitions(value: Any) -> list[dict[str, Any]]:
    tools = []
    for item in _json_list(value) or ():
        if not isinstance(item, Mapping):
            continue
        nested = item.get("function")
        function: Mapping[str, Any] = nested if isinstance(nested, Mapping) else item
        name = function.get("name")
        if not isinstance(name, str) or not name:
            continue
        parameters = function.get("parameters")
        tools.append(
            {
                "type": "function",
                "name": name,
                "description": str(function.get("description") or ""),
                "parameters": dict(parameters) if isinstance(parameters, Mapping) else {},
            }
        )
    return tools


# -- values -------------------------------------------------------------------------------------------------


def _usage(attributes: Mapping[str, Any]) -> dict[str, Any] | None:
    given = _count(attributes.get(conv.GEN_AI_INPUT_TOKENS))
    completion = _count(attributes.get(conv.GEN_AI_OUTPUT_TOKENS))
    if given is None and completion is None:
        return None
    cached = _count(attributes.get(conv.GEN_AI_CACHE_READ_TOKENS))
    usage: dict[str, Any] = {
        "prompt_tokens": max(0, (given or 0) - (cached or 0)),
        "completion_tokens": completion or 0,
    }
    if cached is not None:
        usage["cached_input_tokens"] = cached
    reasoning = _count(attributes.get(conv.GEN_AI_REASONING_TOKENS))
    if reasoning is not None:
        usage["reasoning_tokens"] = reasoning
    return usage


def _finish_reason(value: Any) -> str | None:
    if isinstance(value, (list, tuple)):
        value = value[0] if value else None
    return _FINISH_REASONS.get(value) if isinstance(value, str) else None


def _exception(span: GenAISpan) -> Mapping[str, Any] | None:
    return next((event.attributes for event in reversed(span.events) if event.name == "exception"), None)


def _provider_error(span: GenAISpan) -> dict[str, Any]:
    exception = _exception(span) or {}
    kind = _text(exception.get("exception.type")) or _text(span.attributes.get(conv.ERROR_TYPE)) or "error"
    message = _text(exception.get("exception.message")) or span.status_message
    error: dict[str, Any] = {"type": "ProviderError", "message": f"{kind}: {message}" if message else kind}
    status = _count(span.attributes.get(conv.HTTP_STATUS))
    if status is not None:
        error["status_code"] = status
    return error


def _span_errors(span: GenAISpan) -> list[dict[str, Any]]:
    """The error that ended a failed span (its last exception event, else its status), or none."""
    if not span.failed:
        return []
    exception = _exception(span) or {}
    kind = _text(exception.get("exception.type")) or _text(span.attributes.get(conv.ERROR_TYPE)) or "Error"
    error: dict[str, Any] = {
        "type": kind.rsplit(".", 1)[-1],
        "message": _text(exception.get("exception.message")) or span.status_message,
    }
    traceback = _text(exception.get("exception.stacktrace"))
    if traceback:
        error["traceback"] = traceback
    return [error]


def _assign_rewards(
    episode: GenAISpan, members: list[GenAISpan], seats: list[_Seat], traces: list[dict[str, Any]]
) -> None:
    """Each ``gen_ai.evaluation.result`` event scores the trace of the agent its span belongs to; events on the
    episode (or on spans of no agent) score the first trainable trace."""
    seat_of: dict[int, int] = {}
    for index, seat in enumerate(seats):
        seat_of[seat.span.span_id] = index
        for span in seat.spans:
            seat_of[span.span_id] = index
    parents = {span.span_id: span.parent_id for span in members}
    summary = next((i for i, trace in enumerate(traces) if trace["agent"]["trainable"]), 0)
    for span in [episode, *members]:
        for event in span.events:
            if event.name != conv.EVALUATION_EVENT:
                continue
            position = _seat_above(span.span_id, seat_of, parents)
            target = traces[summary if position is None or seats[position].span is episode else position]
            name = _text(event.attributes.get(conv.EVALUATION_NAME)) or "reward"
            score = _number(event.attributes.get(conv.EVALUATION_SCORE))
            weight = _number(event.attributes.get(conv.EVALUATION_WEIGHT))
            target["rewards"][name] = (
                None if score is None else {"score": float(score), "weight": 1.0 if weight is None else float(weight)}
            )


def _seat_above(span_id: int, seat_of: Mapping[int, int], parents: Mapping[int, int | None]) -> int | None:
    current: int | None = span_id
    for _ in range(len(parents) + 1):
        if current is None:
            return None
        if current in seat_of:
            return seat_of[current]
        current = parents.get(current)
    return None


def _task(attributes: Mapping[str, Any], seats: Sequence[_Seat]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    extra = attributes.get(conv.TASK_JSON)
    if isinstance(extra, str):
        try:
            decoded = json.loads(extra)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict):
            data.update(decoded)
    idx = _count(attributes.get(conv.TASK_IDX))
    data["idx"] = idx if idx is not None else int(data.get("idx") or 0)
    for name, key in ((conv.TASK_ID, "id"), (conv.TASK_NAME, "name"), (conv.TASK_ANSWER, "answer")):
        value = attributes.get(name)
        if value is not None:
            data[key] = value if isinstance(value, str) else _as_text(value)
    prompt = attributes.get(conv.TASK_PROMPT)
    if isinstance(prompt, str):
        data["prompt"] = prompt
    elif "prompt" not in data:
        data["prompt"] = _first_user_text(seats)
    return {"type": "Task", "data": data}


def _first_user_text(seats: Sequence[_Seat]) -> str:
    """The first user message any seat's first chat span sent (the prompt when no attribute names it)."""
    for seat in seats:
        for span in seat.spans:
            for raw in _raw_messages(span.attributes.get(conv.GEN_AI_INPUT_MESSAGES)) or ():
                for message in _message(raw):
                    if message["role"] == "user" and isinstance(message.get("content"), str):
                        return str(message["content"])
    return ""


def _env(attributes: Mapping[str, Any]) -> dict[str, Any]:
    env: dict[str, Any] = {"id": _text(attributes.get(conv.ENV_ID)) or ""}
    name = _text(attributes.get(conv.ENV_NAME))
    if name:
        env["name"] = name
    return env


def _episode_id(episode: GenAISpan) -> str:
    for name in (conv.EPISODE_ID, conv.CONVERSATION_ID):
        value = _text(episode.attributes.get(name))
        if value:
            return value
    if episode.parent_id is None:
        return f"{episode.trace_id:032x}"
    return _digest(episode, "episode")


def _member_id(span: GenAISpan) -> str:
    return _digest(span, "trace")


def _digest(span: GenAISpan, what: str) -> str:
    return hashlib.blake2b(f"{span.trace_id:032x}{span.span_id:016x}{what}".encode(), digest_size=16).hexdigest()


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


def _number(value: Any) -> float | int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None
