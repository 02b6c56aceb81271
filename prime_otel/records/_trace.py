"""What verifiers 0.4.0 derives from a trace, computed over a trace record as it appears in
``Episode.to_record()``'s ``traces``: plain JSON, no models. Values nested in the record are returned as they
are (shared, not copied)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

# Stop conditions that are framework limits: the trace is truncated whatever its last call reported.
_LIMIT_STOPS = frozenset(
    {"max_turns", "max_input_tokens", "max_output_tokens", "max_total_tokens", "compaction_failed"}
)


class Branch(NamedTuple):
    """One root-to-leaf path of the message graph: its messages and the token counts of its model calls."""

    messages: list[Any]
    num_input_tokens: int
    num_output_tokens: int


def branches(trace: Mapping[str, Any]) -> list[Branch]:
    """One branch per leaf (a node no node names as ``parent``), in node order. ``semantic_parents`` imply no
    token prefix, so they take no part. A branch's input tokens are each committed call's prompt beyond the
    previous call's whole sequence (clamped at 0); its output tokens are its calls' completion tokens."""
    nodes = trace.get("nodes") or ()
    parents = [node.get("parent") for node in nodes]
    committed: dict[Any, Mapping[str, Any]] = {}
    for call in trace.get("calls") or ():
        node = call.get("node")
        if node is not None:
            committed[node] = call
    has_child = set(parents)
    out: list[Branch] = []
    for leaf in range(len(nodes)):
        if leaf in has_child:
            continue
        path = _path(parents, leaf)
        new_input = output = previous_total = 0
        for index in path:
            call = committed.get(index)
            usage = call.get("usage") if call is not None else None
            if usage is None:
                continue
            completion = usage["completion_tokens"]
            sent = usage["prompt_tokens"] + (usage.get("cached_input_tokens") or 0)
            new_input += max(0, sent - previous_total)
            previous_total = sent + completion
            output += completion
        out.append(Branch([nodes[index]["message"] for index in path], new_input, output))
    return out


def _path(parents: list[Any], leaf: int) -> list[int]:
    path: list[int] = []
    index: Any = leaf
    while index is not None:
        if len(path) > len(parents):
            raise ValueError("the message graph has a parent cycle")
        path.append(index)
        index = parents[index]
    path.reverse()
    return path


def reward(trace: Mapping[str, Any]) -> float:
    """Σ score * weight over the non-null rewards; the integer 0 when there is none."""
    total: float = 0
    for value in (trace.get("rewards") or {}).values():
        if value is not None:
            total += float(value["score"]) * float(value.get("weight", 1.0))
    return total


def scores(trace: Mapping[str, Any]) -> list[tuple[str, float]]:
    """``(name, score)`` of each non-null reward, in record order."""
    return [(name, float(value["score"])) for name, value in (trace.get("rewards") or {}).items() if value is not None]


def usage(trace: Mapping[str, Any]) -> dict[str, Any] | None:
    """The sum of the calls' usage, dumped without unset fields (an optional field is set when any call set it);
    None when no call has usage."""
    prompt = completion = 0
    cached: int | None = None
    reasoning: int | None = None
    cost: float | None = None
    seen = False
    for call in trace.get("calls") or ():
        each = call.get("usage")
        if each is None:
            continue
        seen = True
        prompt += each["prompt_tokens"]
        completion += each["completion_tokens"]
        if (value := each.get("cached_input_tokens")) is not None:
            cached = (cached or 0) + value
        if (value := each.get("reasoning_tokens")) is not None:
            reasoning = (reasoning or 0) + value
        if (value := each.get("cost")) is not None:
            # From the integer 0 the way sum() starts, so a lone -0.0 sums to 0.0 as verifiers' does.
            cost = (0 if cost is None else cost) + float(value)
    if not seen:
        return None
    dump: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion}
    for name, value in (("cached_input_tokens", cached), ("reasoning_tokens", reasoning), ("cost", cost)):
        if value is not None:
            dump[name] = value
    return dump


def is_truncated(trace: Mapping[str, Any]) -> bool:
    """A framework-limit stop, or the last call without an error finished for ``length``."""
    if trace.get("stop_condition") in _LIMIT_STOPS:
        return True
    last = next((call for call in reversed(trace.get("calls") or ()) if call.get("error") is None), None)
    return last is not None and last.get("finish_reason") == "length"


def last_error(trace: Mapping[str, Any]) -> Any:
    """The newest of the trace's errors, or None."""
    errors = trace.get("errors")
    return errors[-1] if errors else None


def task_data(trace: Mapping[str, Any]) -> dict[str, Any]:
    """The task row without unset fields (a record already omits them; a hand-made one may hold nulls, or have
    no task at all: an empty row)."""
    data: dict[str, Any] = (trace.get("task") or {}).get("data") or {}
    if any(value is None for value in data.values()):
        return {key: value for key, value in data.items() if value is not None}
    return data


def is_trainable(trace: Mapping[str, Any]) -> bool:
    """``agent.trainable``, true when unset."""
    return bool((trace.get("agent") or {}).get("trainable", True))
