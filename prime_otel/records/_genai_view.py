"""What an episode span made by ``log_episodes`` tells any OpenTelemetry backend in GenAI terms: the attributes
that apply (operation, conversation, agent, models, usage totals) and one ``gen_ai.evaluation.result`` event per
reward. Read from the producer's object or mapping directly (a few attribute reads per call and reward), never by
parsing the encoded record."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import Event

from .. import _conventions as conv


def _key(value: Any, name: str) -> Any:
    return value.get(name) if value is not None else None


def _attribute(value: Any, name: str) -> Any:
    return getattr(value, name, None)


def genai_view(record: Any, event_time_ns: int) -> tuple[dict[str, Any], list[Event]]:
    """The GenAI attributes and evaluation events of an episode (or bare trace) record: a mapping all the way
    down (a record), or objects all the way down (verifiers models) but for the rewards dict."""
    _get = _key if isinstance(record, Mapping) else _attribute
    traces = _get(record, "traces")
    members = list(traces) if isinstance(traces, (list, tuple)) else [record]
    attributes: dict[str, Any] = {conv.GEN_AI_OPERATION: conv.INVOKE_AGENT}
    record_id = _get(record, "id")
    if isinstance(record_id, str):
        attributes[conv.CONVERSATION_ID] = record_id
    if not members:
        return attributes, []
    summary = next((trace for trace in members if _get(_get(trace, "agent"), "trainable") is not False), members[0])
    agent = _get(summary, "agent")
    name = _get(agent, "name")
    if isinstance(name, str) and name:
        attributes[conv.GEN_AI_AGENT_NAME] = name
    calls = _get(summary, "calls") or ()
    requested = _get(_get(agent, "config"), "model")
    if not isinstance(requested, str) and calls:
        requested = _get(calls[0], "model")
    if isinstance(requested, str) and requested:
        attributes[conv.GEN_AI_REQUEST_MODEL] = requested
    if calls:
        last = calls[-1]
        model = _get(last, "model")
        if isinstance(model, str) and model:
            attributes[conv.GEN_AI_RESPONSE_MODEL] = model
        finish = _get(last, "finish_reason")
        if isinstance(finish, str):
            attributes[conv.GEN_AI_FINISH_REASONS] = (finish,)
    given = completion = 0
    seen = False
    for trace in members:
        for call in _get(trace, "calls") or ():
            usage = _get(call, "usage")
            if usage is None:
                continue
            seen = True
            given += (_get(usage, "prompt_tokens") or 0) + (_get(usage, "cached_input_tokens") or 0)
            completion += _get(usage, "completion_tokens") or 0
    if seen:
        attributes[conv.GEN_AI_INPUT_TOKENS] = given
        attributes[conv.GEN_AI_OUTPUT_TOKENS] = completion
    events = []
    for trace in members:
        agent_name = _get(_get(trace, "agent"), "name")
        rewards = _get(trace, "rewards") or {}
        for reward_name, reward in rewards.items():
            event_attributes: dict[str, Any] = {conv.EVALUATION_NAME: str(reward_name)}
            score = _get(reward, "score") if reward is not None else None
            if isinstance(score, (int, float)) and not isinstance(score, bool) and math.isfinite(score):
                event_attributes[conv.EVALUATION_SCORE] = float(score)
                weight = _get(reward, "weight")
                if isinstance(weight, (int, float)) and not isinstance(weight, bool) and math.isfinite(weight):
                    event_attributes[conv.EVALUATION_WEIGHT] = float(weight)
            if isinstance(agent_name, str) and agent_name:
                event_attributes[conv.GEN_AI_AGENT_NAME] = agent_name
            events.append(Event(conv.EVALUATION_EVENT, event_attributes, event_time_ns))
    return attributes, events
