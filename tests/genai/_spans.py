"""GenAI spans made with the real OpenTelemetry SDK, attribute for attribute as the official openai-v2
instrumentation writes them (message content as JSON strings of role + parts)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span, Status, StatusCode, Tracer


def finished_spans(build: Callable[[Tracer], None]) -> list[ReadableSpan]:
    """The spans ``build`` ended, in the order they ended."""
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    build(provider.get_tracer("tests.genai"))
    provider.shutdown()
    return list(exporter.get_finished_spans())


def text(role: str, content: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": content}]}


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "parts": [{"type": "tool_call", "id": call_id, "name": name, "arguments": arguments}]}


def tool_result(call_id: str, response: str) -> dict[str, Any]:
    return {"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id, "response": response}]}


def chat(
    tracer: Tracer,
    inputs: list[dict[str, Any]] | None,
    output: dict[str, Any] | None,
    *,
    usage: tuple[int, int] = (10, 5),
    finish: str = "stop",
    model: str = "test-model",
    cached: int | None = None,
    failure: Exception | None = None,
) -> None:
    """One chat span; ``inputs``/``output`` None: content not captured."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        "gen_ai.provider.name": "openai",
        "gen_ai.request.temperature": 0.5,
    }
    with tracer.start_as_current_span(f"chat {model}", attributes=attributes, record_exception=False) as span:
        if failure is not None:
            span.record_exception(failure)
            span.set_attribute("error.type", type(failure).__qualname__)
            span.set_status(Status(StatusCode.ERROR, str(failure)))
            if inputs is not None:
                span.set_attribute("gen_ai.input.messages", json.dumps(inputs))
            return
        span.set_attributes(
            {
                "gen_ai.response.model": model,
                "gen_ai.response.finish_reasons": (finish,),
                "gen_ai.usage.input_tokens": usage[0],
                "gen_ai.usage.output_tokens": usage[1],
            }
        )
        if cached is not None:
            span.set_attribute("gen_ai.usage.cache_read.input_tokens", cached)
        if inputs is not None:
            span.set_attribute("gen_ai.input.messages", json.dumps(inputs))
        if output is not None:
            span.set_attribute("gen_ai.output.messages", json.dumps([{**output, "finish_reason": finish}]))


def tool(tracer: Tracer, call_id: str, name: str, result: str | None = None) -> None:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
    }
    if result is not None:
        attributes["gen_ai.tool.call.result"] = result
    tracer.start_span(f"execute_tool {name}", attributes=attributes).end()


def reward(span: Span, name: str, score: float | None, weight: float | None = None) -> None:
    attributes: dict[str, Any] = {"gen_ai.evaluation.name": name}
    if score is not None:
        attributes["gen_ai.evaluation.score.value"] = score
    if weight is not None:
        attributes["prime.evaluation.weight"] = weight
    span.add_event("gen_ai.evaluation.result", attributes)


@contextmanager
def agent(tracer: Tracer, name: str, **attributes: Any) -> Iterator[Span]:
    with tracer.start_as_current_span(
        f"invoke_agent {name}",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name, **attributes},
    ) as span:
        yield span
