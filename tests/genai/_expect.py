"""What the calculator agent's episode must look like on the platform, whichever way its spans came in."""

from __future__ import annotations

import json
from typing import Any

from tests.genai._agent import ENVIRONMENT, MODEL, QUESTION, SYSTEM, TASK_IDX
from tests.genai._chat import ANSWER, TOOL_ARGUMENTS, usage_of

# The instrumentation records the arguments as an object: they come back compact.
COMPACT_ARGUMENTS = json.dumps(TOOL_ARGUMENTS, separators=(",", ":"))
TOOL_CALL = {"id": "call_add_1", "type": "function", "name": "add", "arguments": COMPACT_ARGUMENTS}
MESSAGES = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": QUESTION},
    {"role": "assistant", "tool_calls": [TOOL_CALL]},
    {"role": "tool", "tool_call_id": "call_add_1", "content": "5"},
    {"role": "assistant", "content": ANSWER},
]


def _usage(messages: int, completion: int) -> dict[str, int]:
    usage = usage_of(messages, completion)
    return {"prompt_tokens": usage["prompt_tokens"], "completion_tokens": usage["completion_tokens"]}


def check_episode(episode: dict[str, Any], run_id: str) -> None:
    """The stamped episode: one member trace with the five messages, two model calls and the reward."""
    assert episode["env"] == {"id": ENVIRONMENT}
    assert episode["ok"] is True
    assert episode["task"]["data"]["idx"] == TASK_IDX
    assert episode["task"]["data"]["answer"] == "5"
    assert episode["task"]["data"]["prompt"] == QUESTION
    [trace] = episode["traces"]
    assert trace["run"]["id"] == run_id
    assert trace["agent"]["name"] == "calculator-agent"
    assert [node["message"] for node in trace["nodes"]] == MESSAGES
    assert [node.get("parent") for node in trace["nodes"]] == [None, 0, 1, 2, 3]
    assert [node["sampled"] for node in trace["nodes"]] == [False, False, True, False, True]
    calls = trace["calls"]
    assert [(call["node"], call["model"], call["finish_reason"], call["endpoint"]) for call in calls] == [
        (2, MODEL, "tool_calls", "/chat/completions"),
        (4, MODEL, "stop", "/chat/completions"),
    ]
    assert [call["usage"] for call in calls] == [_usage(2, 9), _usage(4, 6)]
    assert all(call["time"]["start"] <= call["time"]["end"] for call in calls)
    assert calls[0]["time"]["end"] <= calls[1]["time"]["start"]
    assert trace["rewards"] == {"correct": {"score": 1.0, "weight": 1.0}}
    assert trace["metrics"] == {"num_turns": 2.0, "tool_calls": 1.0}
    assert trace["ok"] is True and trace["stop_condition"] == "agent_completed"
    assert trace["info"]["content_captured"] is True
    # Input counted once: the first prompt, then what the second call added beyond the first call's total.
    assert trace["num_input_tokens"] == 22 + (44 - (22 + 9))
    assert trace["num_output_tokens"] == 15
    assert episode["num_input_tokens"] == trace["num_input_tokens"]


def check_sample_row(row: dict[str, Any]) -> None:
    """The v0 sample row: the reward, the example, the answer and the whole conversation as completion."""
    assert row["reward"] == 1.0
    assert row["correct"] == 1.0
    assert row["example_id"] == TASK_IDX
    assert row["answer"] == "5"
    assert row["completion"] == MESSAGES
    assert row["token_usage"] == {"prompt_tokens": 66, "completion_tokens": 15}
    assert row["stop_condition"] == "agent_completed"
