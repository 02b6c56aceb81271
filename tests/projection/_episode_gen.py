"""Seeded random episode records in verifiers 0.4.0's shape, for property-style tests: multi-turn
chains, graph forks from rewritten histories and second roots, semantic edges, tool calls, failed calls, length
finishes, null and weighted rewards, several agents (some not trainable), NaN metrics and omitted optional
fields. Every record validates as a verifiers ``WireEpisode``."""

from __future__ import annotations

import copy
import random
from typing import Any

from tests._fixtures import load_records

NAN = float("nan")
INF = float("inf")
STOPS = [
    "agent_completed",
    "user_closed",
    "max_turns",
    "max_input_tokens",
    "max_output_tokens",
    "max_total_tokens",
    "compaction_failed",
    "provider_error",
    "agent_timeout",
    "error",
    None,
]
TOOL = {
    "type": "function",
    "name": "bash",
    "description": "Run a command.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
}


class EpisodeGenerator:
    """``record()`` gives the next random episode record; the same seed gives the same records."""

    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)
        eval_template, train_template = load_records("eval")[0], load_records("train")[0]
        self._agent = eval_template["traces"][0]["agent"]
        self._runs = [eval_template["run"], train_template["run"], None]
        self._count = 0

    def record(self) -> dict[str, Any]:
        rnd = self._random
        self._count += 1
        task = self._task()
        traces = [self._trace(task, seat) for seat in range(rnd.choice([0, 1, 1, 1, 2, 3]))]
        record: dict[str, Any] = {"id": f"{self._count:032x}", "task": copy.deepcopy(task), "traces": traces}
        if rnd.random() < 0.8:
            record["env"] = {"id": rnd.choice(["gsm8k", "agentic-judge+gsm8k", ""])}
        run = rnd.choice(self._runs)
        if run is not None:
            record["run"] = copy.deepcopy(run)
        if rnd.random() < 0.5:
            record["ok"] = rnd.random() < 0.5
        if rnd.random() < 0.2:
            record["errors"] = [{"type": "HookError", "message": "finalize hook failed"}]
        return record

    def _task(self) -> dict[str, Any]:
        rnd = self._random
        data: dict[str, Any] = {"prompt": rnd.choice(["What is 2+2?", 'Über ☃ \u2028 "quoted"'])}
        if rnd.random() < 0.9:
            data["idx"] = rnd.randrange(4)
        if rnd.random() < 0.7:
            data["answer"] = rnd.choice(["4", "10", ""])
        if rnd.random() < 0.3:
            data["system_prompt"] = "Be brief."
        if rnd.random() < 0.3:
            data["extra"] = {"nested": None, "values": [1, None, "x"]}
        if rnd.random() < 0.2:
            data["unset_extra"] = None
        return {"type": "MathTask", "data": data}

    def _trace(self, task: dict[str, Any], seat: int) -> dict[str, Any]:
        rnd = self._random
        nodes, calls = self._graph()
        trace: dict[str, Any] = {
            "id": f"{self._count:016x}{seat:016x}",
            "task": copy.deepcopy(task),
            "agent": {**copy.deepcopy(self._agent), "name": ["solver", "judge", "user"][seat]},
            "nodes": nodes,
            "calls": calls,
            "is_completed": rnd.random() < 0.9,
        }
        if seat or rnd.random() < 0.1:
            trace["agent"]["trainable"] = rnd.random() < 0.3
        if rnd.random() < 0.5:
            trace["tools"] = [copy.deepcopy(TOOL)] if rnd.random() < 0.8 else []
        if rnd.random() < 0.9:
            trace["rewards"] = self._rewards()
        if rnd.random() < 0.9:
            trace["metrics"] = {
                "num_turns": rnd.choice([1.0, 2.0, NAN, INF, None]),
                **({"latency": rnd.random()} if rnd.random() < 0.5 else {}),
            }
        if rnd.random() < 0.8:
            trace["info"] = self._info()
        stop = rnd.choice(STOPS)
        if stop is not None:
            trace["stop_condition"] = stop
        if rnd.random() < 0.3:
            trace["errors"] = [
                {"type": "ProviderError", "message": "upstream returned 503", "status_code": 503},
                {"type": "RuntimeError", "message": "boom", "traceback": "Traceback ..."},
            ][: rnd.choice([1, 2])]
        if rnd.random() < 0.8:
            trace["timing"] = {"start": 1787342400.5, "agent": {"start": 1787342401.0, "end": rnd.random() * 10}}
        return trace

    def _rewards(self) -> dict[str, Any]:
        rnd = self._random
        rewards: dict[str, Any] = {}
        for name in rnd.sample(["correct", "format", "reward", "length"], rnd.randrange(4)):
            if rnd.random() < 0.3:
                rewards[name] = None
            else:
                rewards[name] = {"score": rnd.choice([0.0, 1.0, 0.5, -0.0, NAN])}
                if rnd.random() < 0.5:
                    rewards[name]["weight"] = rnd.choice([1.0, 0.25, 2.0])
        return rewards

    def _info(self) -> dict[str, Any]:
        rnd = self._random
        info: dict[str, Any] = {}
        if rnd.random() < 0.6:
            info["advantage"] = rnd.choice([0.25, -1.5, 0, NAN, INF, None])
        if rnd.random() < 0.3:
            info["judge_calls"] = [{"name": "judge", "request": {"x": (1, 2)}}]
        return info

    def _graph(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """A chain of turns from one or two roots, with forks (an earlier node re-used as parent) and
        semantic edges; each sampled node may have a committed call, and failed calls sit between them."""
        rnd = self._random
        nodes: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        if rnd.random() < 0.05:
            return nodes, calls
        tip = self._add(nodes, None, {"role": "system", "content": "You are helpful."}, tools=rnd.random() < 0.4)
        tip = self._add(nodes, tip, {"role": "user", "content": self._content()})
        for _ in range(rnd.randrange(5)):
            roll = rnd.random()
            if roll < 0.15 and len(nodes) > 2:
                tip = rnd.randrange(len(nodes) - 1)  # a rewritten history continues from an earlier node
            elif roll < 0.2:
                tip = self._add(nodes, None, {"role": "user", "content": "A fresh context."})
            if rnd.random() < 0.15:
                calls.append(self._call(None, failed=True))
            assistant = self._assistant()
            tip = self._add(nodes, tip, assistant, sampled=True)
            if rnd.random() < 0.2 and len(nodes) > 1:
                link_type = rnd.choice(["compaction", "subagent_return", "compaction_attempt"])
                nodes[tip]["semantic_parents"].append({"node": rnd.randrange(tip), "type": link_type})
            if rnd.random() < 0.9:
                calls.append(self._call(tip, failed=False))
            for call in assistant.get("tool_calls", []):
                tip = self._add(nodes, tip, {"role": "tool", "tool_call_id": call["id"], "content": "13\n"})
        if rnd.random() < 0.15:
            calls.append(self._call(None, failed=True))
        return nodes, calls

    def _add(self, nodes: list[dict[str, Any]], parent: int | None, message: dict[str, Any], **fields: Any) -> int:
        node: dict[str, Any] = {"semantic_parents": [], "message": message, "sampled": fields.get("sampled", False)}
        if parent is not None:
            node["parent"] = parent
        if fields.get("tools"):
            node["tools"] = [copy.deepcopy(TOOL)]
        if node["sampled"] and self._random.random() < 0.5:
            node.update(token_ids=[1, 2, 3], mask=[False, True, True], logprobs=[-0.5, -0.25])
            if self._random.random() < 0.5:
                node["advantages"] = [0.5, 0.5]
        nodes.append(node)
        return len(nodes) - 1

    def _content(self) -> Any:
        if self._random.random() < 0.3:
            return [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "data:x"}}]
        return "What is 2+2?"

    def _assistant(self) -> dict[str, Any]:
        rnd = self._random
        message: dict[str, Any] = {"role": "assistant"}
        if rnd.random() < 0.8:
            message["content"] = rnd.choice(["4", "\\boxed{10}", ""])
        if rnd.random() < 0.3:
            message["reasoning_content"] = "thinking"
        if rnd.random() < 0.3:
            message["tool_calls"] = [
                {"id": f"call_{index}", "type": "function", "name": "bash", "arguments": '{"command": "ls"}'}
                for index in range(rnd.choice([1, 2]))
            ]
        return message

    def _call(self, node: int | None, *, failed: bool) -> dict[str, Any]:
        rnd = self._random
        call: dict[str, Any] = {"model": "m", "endpoint": "/chat/completions", "time": {"start": 1.0, "end": 2.0}}
        if node is not None:
            call["node"] = node
        if failed:
            call["error"] = {"type": "ProviderError", "message": "503", "status_code": 503}
            if rnd.random() < 0.3:
                call["finish_reason"] = "length"
            return call
        call["finish_reason"] = rnd.choice(["stop", "length", "tool_calls", None])
        if rnd.random() < 0.85:
            usage: dict[str, Any] = {"prompt_tokens": rnd.randrange(300), "completion_tokens": rnd.randrange(60)}
            for name, value in (
                ("cached_input_tokens", rnd.randrange(50)),
                ("reasoning_tokens", rnd.randrange(20)),
                ("cost", rnd.choice([0.001, -0.0, 0.0, 1e-7])),
            ):
                if rnd.random() < 0.4:
                    usage[name] = value
            call["usage"] = usage
        return call
