"""The agent every GenAI test runs: two turns with one tool call inside an ``episode`` span, through the real
``openai`` client (instrumented by the official ``opentelemetry-instrumentation-openai-v2``), the tool as an
``execute_tool`` span from ``opentelemetry-util-genai``, and the reward as a ``gen_ai.evaluation.result`` event.

Run as a module it is the whole producer of a zero-code run: ``CHAT_URL`` names the chat server, and the
global tracer provider (installed by ``opentelemetry-instrument``) takes every span."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

MODEL = "calc-model-1"
SYSTEM = "You are a calculator. Use the add tool."
QUESTION = "What is 2 + 3?"
TASK_IDX = 3
ENVIRONMENT = "calculator"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
        },
    }
]
#: What capturing message content on spans takes (set before the instrumentation is imported).
CONTENT_ON_SPANS = {
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
    "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
}


@contextmanager
def openai_instrumented(tracer_provider: Any) -> Iterator[None]:
    """The official openai-v2 instrumentation on ``tracer_provider`` for the block (imported here: it reads
    ``CONTENT_ON_SPANS`` when it instruments)."""
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider)
    try:
        yield
    finally:
        instrumentor.uninstrument()


def run_agent(base_url: str, tracer: Any, tracer_provider: Any = None) -> str:
    """One episode; returns the final answer."""
    import openai
    from opentelemetry.util.genai.handler import TelemetryHandler

    handler = TelemetryHandler(tracer_provider=tracer_provider)
    client = openai.OpenAI(base_url=base_url, api_key="loopback-test-key")
    attributes = {
        "prime.task.idx": TASK_IDX,
        "prime.task.answer": "5",
        "prime.env.id": ENVIRONMENT,
        "gen_ai.agent.name": "calculator-agent",
    }
    try:
        with tracer.start_as_current_span("episode", attributes=attributes) as episode:
            messages: list[dict[str, Any]] = [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": QUESTION},
            ]
            first = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
            call = first.choices[0].message.tool_calls[0]
            messages.append(first.choices[0].message.model_dump(exclude_none=True))
            with handler.tool(call.function.name, tool_call_id=call.id) as tool:
                arguments = json.loads(call.function.arguments)
                result = str(arguments["a"] + arguments["b"])
                tool.arguments = arguments
                tool.tool_result = result
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
            second = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
            answer = second.choices[0].message.content or ""
            episode.add_event(
                "gen_ai.evaluation.result",
                {"gen_ai.evaluation.name": "correct", "gen_ai.evaluation.score.value": 1.0 if "5" in answer else 0.0},
            )
    finally:
        client.close()
    return answer


if __name__ == "__main__":
    from opentelemetry import trace

    print(run_agent(os.environ["CHAT_URL"], trace.get_tracer("calculator")))
