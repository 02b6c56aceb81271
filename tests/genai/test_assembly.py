"""Standard GenAI spans (made with the real SDK, as the openai-v2 instrumentation writes them) assembled into one
episode record: the record verifiers 0.4.0 reads back unchanged, whatever order the spans come in, with content
captured or not, with failures, several agents, a rewritten history, and the buffers' bounds."""

from __future__ import annotations

import dataclasses
import json
import math
import random
from typing import Any

import pyarrow
import pyarrow.parquet
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.trace import Tracer, use_span

from prime_otel.gateway._genai import EpisodeAssembler, read_span_line, span_line
from prime_otel.processors._genai import GenAIEpisodes
from prime_otel.projection import build_samples, episodes_to_parquet_bytes
from prime_otel.records._genai import GenAISpan, SpanEvent, assemble_episode, marks_episode
from prime_otel.records._genai_view import genai_view
from tests._fixtures import episode_from_record, load_episodes, load_records
from tests.genai._spans import agent, chat, finished_spans, reward, text, tool, tool_call, tool_result

SYSTEM = text("system", "Be brief.")
USER = text("user", "Add 2 and 3.")
CALL = tool_call("c1", "add", {"a": 2, "b": 3})
RESULT = tool_result("c1", "5")
ANSWER = text("assistant", "5.")
MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Add 2 and 3."},
    {
        "role": "assistant",
        "tool_calls": [{"id": "c1", "type": "function", "name": "add", "arguments": '{"a":2,"b":3}'}],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "5"},
    {"role": "assistant", "content": "5."},
]


def two_turns(tracer: Tracer, *, captured: bool = True) -> None:
    with tracer.start_as_current_span("episode", attributes={"prime.task.idx": 4, "prime.task.answer": "5"}) as span:
        chat(
            tracer, [SYSTEM, USER] if captured else None, CALL if captured else None, usage=(20, 8), finish="tool_calls"
        )
        tool(tracer, "c1", "add", "5" if captured else None)
        chat(tracer, [SYSTEM, USER, CALL, RESULT] if captured else None, ANSWER if captured else None, usage=(40, 3))
        reward(span, "correct", 1.0)
        reward(span, "format", 0.5, weight=0.2)


def views(spans: list[ReadableSpan]) -> list[GenAISpan]:
    return [GenAISpan.of(span) for span in spans]


def assembled(spans: list[ReadableSpan], **options: Any) -> dict[str, Any]:
    every = views(spans)
    [episode] = [span for span in every if marks_episode(span.name, span.attributes)]
    return assemble_episode(episode, every, **options)


def assert_verifiers_reads_it_back(record: dict[str, Any]) -> None:
    """verifiers validates the record and writes back the same one (its defaults for the task row and the agent
    configuration aside, which the assembly leaves unset)."""
    again = episode_from_record(record).to_record()
    for copy in (again, record):
        copy.pop("task")
        for trace in copy["traces"]:
            trace.pop("task")
            trace["agent"].pop("config")
    assert again == record


def test_captured_content_becomes_the_message_graph_calls_usage_and_rewards() -> None:
    record = assembled(finished_spans(two_turns))
    [trace] = record["traces"]
    assert [node["message"] for node in trace["nodes"]] == MESSAGES
    assert [node.get("parent") for node in trace["nodes"]] == [None, 0, 1, 2, 3]
    assert [node["sampled"] for node in trace["nodes"]] == [False, False, True, False, True]
    assert [(call["node"], call["finish_reason"], call["usage"]) for call in trace["calls"]] == [
        (2, "tool_calls", {"prompt_tokens": 20, "completion_tokens": 8}),
        (4, "stop", {"prompt_tokens": 40, "completion_tokens": 3}),
    ]
    assert trace["calls"][0]["sampling"] == {"temperature": 0.5}
    assert trace["rewards"] == {"correct": {"score": 1.0, "weight": 1.0}, "format": {"score": 0.5, "weight": 0.2}}
    assert record["task"]["data"] == {"idx": 4, "answer": "5", "prompt": "Add 2 and 3."}
    assert trace["info"]["content_captured"] is True
    assert record["ok"] is True and trace["stop_condition"] == "agent_completed"
    assert (record["num_input_tokens"], record["num_output_tokens"]) == (20 + (40 - 28), 11)
    assert_verifiers_reads_it_back(assembled(finished_spans(two_turns)))
    [row] = build_samples([record])
    assert row["reward"] == 1.0 + 0.5 * 0.2
    assert row["completion"] == MESSAGES
    assert row["example_id"] == 4


def test_without_captured_content_the_record_says_so_and_keeps_usage_timing_and_rewards() -> None:
    record = assembled(finished_spans(lambda tracer: two_turns(tracer, captured=False)))
    [trace] = record["traces"]
    assert trace["nodes"] == []
    assert trace["info"]["content_captured"] is False
    assert [call["usage"] for call in trace["calls"]] == [
        {"prompt_tokens": 20, "completion_tokens": 8},
        {"prompt_tokens": 40, "completion_tokens": 3},
    ]
    assert all("node" not in call and call["time"]["start"] <= call["time"]["end"] for call in trace["calls"])
    assert trace["timing"]["agent"]["model"]["duration"] > 0
    assert trace["rewards"]["correct"] == {"score": 1.0, "weight": 1.0}
    assert_verifiers_reads_it_back(assembled(finished_spans(lambda tracer: two_turns(tracer, captured=False))))
    [row] = build_samples([record])
    assert row["token_usage"] == {"prompt_tokens": 60, "completion_tokens": 11}
    assert row["reward"] == 1.1
    assert row["completion"] == []


def test_spans_in_any_order_give_the_same_record() -> None:
    spans = finished_spans(two_turns)
    expected = assembled(spans)
    shuffler = random.Random(7)
    for _ in range(5):
        shuffled = list(spans)
        shuffler.shuffle(shuffled)
        assert assembled(shuffled) == expected


def test_the_gateway_assembles_a_trace_once_its_episode_arrived_and_it_settled() -> None:
    spans = views(finished_spans(two_turns))
    now = [100.0]
    assembler = EpisodeAssembler(settle_seconds=2.0, window_seconds=60.0, clock=lambda: now[0])
    episode = next(span for span in spans if span.name == "episode")
    expected = assemble_episode(episode, spans, adopt_orphans=True)
    others = [span for span in spans if span is not episode]
    random.Random(3).shuffle(others)
    assembler.add(0, [episode, *others[:2]])
    now[0] += 1.5
    assembler.add(0, others[2:])
    assert assembler.settled() == []  # a span arrived 0 s ago
    now[0] += 2.5
    [assembly] = assembler.settled()
    [(rank, record)] = assembly.episodes
    assert rank == 0
    assert record == expected
    assert assembler.settled() == []


def test_the_gateway_forgets_a_trace_whose_episode_span_never_came_and_drains_the_rest_at_close() -> None:
    now = [0.0]
    assembler = EpisodeAssembler(settle_seconds=2.0, window_seconds=10.0, clock=lambda: now[0])
    assembler.add(0, [span for span in views(finished_spans(two_turns)) if span.name != "episode"])
    late = views(finished_spans(two_turns))
    assembler.add(1, late)
    now[0] += 11.0
    assert [rank for assembly in assembler.settled() for rank, _ in assembly.episodes] == [1]
    assert assembler.abandoned_traces == 1
    assembler.add(0, views(finished_spans(two_turns)))
    [closing] = assembler.drain()
    assert len(closing.episodes) == 1  # closing does not wait for the trace to settle


def test_a_missing_intermediate_span_is_bridged_only_for_spans_that_crossed_a_network() -> None:
    def with_turn_spans(tracer: Tracer) -> None:
        with tracer.start_as_current_span("episode"), tracer.start_as_current_span("turn 1"):
            chat(tracer, [USER], ANSWER)

    spans = [span for span in finished_spans(with_turn_spans) if span.name != "turn 1"]
    assert len(assembled(spans, adopt_orphans=True)["traces"][0]["calls"]) == 1
    assert assembled(spans)["traces"][0]["calls"] == []


def test_a_failed_model_call_ends_the_trace_as_a_provider_error() -> None:
    def failing(tracer: Tracer) -> None:
        with tracer.start_as_current_span("episode"):
            chat(tracer, [USER], CALL, finish="tool_calls")
            chat(tracer, [USER, CALL, RESULT], None, failure=RuntimeError("upstream returned 503"))

    record = assembled(finished_spans(failing))
    [trace] = record["traces"]
    failed = trace["calls"][-1]
    assert "node" not in failed and "usage" not in failed
    assert failed["error"] == {"type": "ProviderError", "message": "RuntimeError: upstream returned 503"}
    assert trace["errors"] == [failed["error"]]
    assert trace["stop_condition"] == "provider_error"
    assert trace["ok"] is False and record["ok"] is False
    # The failed call's input is in the graph: the conversation up to the failure.
    assert [node["message"]["role"] for node in trace["nodes"]] == ["user", "assistant", "tool"]
    assert_verifiers_reads_it_back(assembled(finished_spans(failing)))


def test_an_exception_out_of_the_episode_is_the_trace_error() -> None:
    def raising(tracer: Tracer) -> None:
        try:
            with tracer.start_as_current_span("episode"):
                chat(tracer, [USER], ANSWER)
                raise ValueError("the sandbox died")
        except ValueError:
            pass

    [trace] = assembled(finished_spans(raising))["traces"]
    [error] = trace["errors"]
    assert (error["type"], error["message"]) == ("ValueError", "the sandbox died")
    assert "ValueError" in error["traceback"]
    assert trace["stop_condition"] == "error"


def test_each_agent_span_is_a_member_trace_with_its_own_rewards() -> None:
    def judged(tracer: Tracer) -> None:
        with tracer.start_as_current_span("episode") as episode:
            with agent(tracer, "solver"):
                chat(tracer, [USER], ANSWER, model="solver-model")
            with agent(tracer, "judge", **{"prime.agent.trainable": False}) as judge:
                chat(tracer, [text("user", "Is 5. right?")], text("assistant", "yes"), model="judge-model")
                reward(judge, "judge_agrees", 1.0)
            reward(episode, "correct", 1.0)

    record = assembled(finished_spans(judged))
    solver, judge = record["traces"]
    assert (solver["agent"]["name"], solver["agent"]["trainable"]) == ("solver", True)
    assert (judge["agent"]["name"], judge["agent"]["trainable"]) == ("judge", False)
    assert [call["model"] for call in solver["calls"]] == ["solver-model"]
    assert [call["model"] for call in judge["calls"]] == ["judge-model"]
    assert solver["rewards"] == {"correct": {"score": 1.0, "weight": 1.0}}
    assert judge["rewards"] == {"judge_agrees": {"score": 1.0, "weight": 1.0}}
    [row] = build_samples([record])
    assert row["agent"] == "solver"
    assert_verifiers_reads_it_back(assembled(finished_spans(judged)))


def test_a_rewritten_history_forks_a_branch_instead_of_repeating_the_prefix() -> None:
    def rewritten(tracer: Tracer) -> None:
        with tracer.start_as_current_span("episode"):
            chat(tracer, [SYSTEM, USER], ANSWER, usage=(20, 2))
            chat(tracer, [SYSTEM, text("user", "Add 2 and 3, in words.")], text("assistant", "five"), usage=(21, 1))

    [trace] = assembled(finished_spans(rewritten))["traces"]
    assert [node.get("parent") for node in trace["nodes"]] == [None, 0, 1, 0, 3]
    assert [call["node"] for call in trace["calls"]] == [2, 4]
    assert trace["num_input_tokens"] == 41
    assert_verifiers_reads_it_back(assembled(finished_spans(rewritten)))


def test_a_tool_result_no_later_call_repeated_is_added_from_the_tool_span() -> None:
    def stops_after_tool(tracer: Tracer) -> None:
        with tracer.start_as_current_span("episode"):
            chat(tracer, [USER], CALL, finish="tool_calls")
            tool(tracer, "c1", "add", "5")

    [trace] = assembled(finished_spans(stops_after_tool))["traces"]
    assert trace["nodes"][-1]["message"] == {"role": "tool", "tool_call_id": "c1", "content": "5", "name": "add"}
    assert trace["nodes"][-1]["parent"] == 1


class _Collecting(SpanProcessor):
    def __init__(self, episodes: GenAIEpisodes) -> None:
        self.episodes = episodes
        self.records: list[dict[str, Any]] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.episodes.on_start(span)

    def on_end(self, span: ReadableSpan) -> None:
        pending = self.episodes.on_end(span)
        if pending is not None:
            self.records.append(pending.record())


def test_in_process_a_trace_keeps_at_most_its_bound_of_spans_and_the_record_counts_the_rest() -> None:
    collecting = _Collecting(GenAIEpisodes(max_spans_per_trace=2))
    provider = TracerProvider()
    provider.add_span_processor(collecting)
    tracer = provider.get_tracer("tests.genai")
    two_turns(tracer)
    chat(tracer, [USER], ANSWER)  # outside any episode: not kept
    [record] = collecting.records
    [trace] = record["traces"]
    assert trace["info"]["spans_dropped"] == 1
    assert len(trace["calls"]) + trace["metrics"]["tool_calls"] == 2


def test_in_process_the_oldest_open_episode_trace_is_given_up_past_the_bound() -> None:
    collecting = _Collecting(GenAIEpisodes(max_traces=1))
    provider = TracerProvider()
    provider.add_span_processor(collecting)
    tracer = provider.get_tracer("tests.genai")
    first = tracer.start_span("episode")
    with use_span(first):
        chat(tracer, [USER], ANSWER)
    reward(first, "correct", 1.0)
    with tracer.start_as_current_span("episode"):  # a second trace with an open episode: the first one's spans go
        chat(tracer, [USER], ANSWER)
    first.end()
    assert collecting.episodes.evicted_traces == 1
    second_record, first_record = collecting.records
    assert len(second_record["traces"][0]["calls"]) == 1
    assert first_record["traces"][0]["calls"] == []
    assert first_record["traces"][0]["rewards"] == {"correct": {"score": 1.0, "weight": 1.0}}


def test_log_episodes_spans_tell_the_same_genai_story_from_objects_and_from_their_records() -> None:
    for episode, record in zip(load_episodes("eval"), load_records("eval"), strict=True):
        from_object, object_events = genai_view(episode, 1)
        from_record, record_events = genai_view(record, 1)
        assert from_object == from_record
        assert [(e.name, dict(e.attributes or {})) for e in object_events] == [
            (e.name, dict(e.attributes or {})) for e in record_events
        ]
        assert from_record["gen_ai.conversation.id"] == record["id"]
        assert len(record_events) == sum(len(trace["rewards"]) for trace in record["traces"])


def test_a_training_episode_names_its_step_and_becomes_a_parquet_row() -> None:
    def at_step(tracer: Tracer) -> None:
        with tracer.start_as_current_span("episode", attributes={"prime.run.step": 7, "prime.group.id": "g1"}):
            chat(tracer, [USER], ANSWER)

    record = assembled(finished_spans(at_step))
    assert record["run"]["work"] == {"type": "train", "step": 7}
    assert record["group"] == {"id": "g1"}
    assert_verifiers_reads_it_back(assembled(finished_spans(at_step)))
    table = pyarrow.parquet.read_table(pyarrow.BufferReader(episodes_to_parquet_bytes([record], "run-1", 7)))
    assert table.num_rows == 1


def test_unreadable_genai_attributes_cost_the_content_not_the_episode() -> None:
    def garbled(tracer: Tracer) -> None:
        with tracer.start_as_current_span("episode", attributes={"prime.task.idx": "three"}) as episode:
            attributes = {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": "[{not json",
                "gen_ai.output.messages": '[{"role": "assistant", "parts": "not a list"}, 7]',
                "gen_ai.usage.input_tokens": -4,
                "gen_ai.usage.output_tokens": 3,
                "gen_ai.response.finish_reasons": ("content_filter",),
                "gen_ai.tool.definitions": '[{"name": 5}, "x"]',
            }
            tracer.start_span("chat garbled", attributes=attributes).end()
            episode.add_event("gen_ai.evaluation.result", {"gen_ai.evaluation.name": "correct"})

    record = assembled(finished_spans(garbled))
    [trace] = record["traces"]
    [call] = trace["calls"]
    assert call["usage"] == {"prompt_tokens": 0, "completion_tokens": 3}
    assert "finish_reason" not in call and trace["tools"] == []
    assert trace["rewards"] == {"correct": None}  # no numeric score: scoring did not run
    assert record["task"]["data"]["idx"] == 0
    assert_verifiers_reads_it_back(assembled(finished_spans(garbled)))


def test_spans_handed_over_only_at_their_end_still_assemble_the_episode() -> None:
    """The stock configurator's exporter route (``Run.ingest_span``): no span start is seen, GenAI spans are kept
    by their attributes, and intermediate spans never kept are bridged."""
    episodes = GenAIEpisodes()
    records = []
    for span in finished_spans(two_turns):
        pending = episodes.on_end(span)
        if pending is not None:
            records.append(pending.record())
    [record] = records
    assert [node["message"] for node in record["traces"][0]["nodes"]] == MESSAGES


def test_on_a_tracer_provider_model_calls_outside_any_episode_are_not_kept() -> None:
    collecting = _Collecting(GenAIEpisodes(max_traces=1))
    provider = TracerProvider()
    provider.add_span_processor(collecting)
    tracer = provider.get_tracer("tests.genai")
    with tracer.start_as_current_span("episode"):
        chat(tracer, [USER], ANSWER)
        for _ in range(3):
            with tracer.start_as_current_span("other request", context=Context()):
                chat(tracer, [USER], ANSWER)  # other traces, no episode: nothing held, nothing evicted
    assert collecting.episodes.evicted_traces == 0
    [record] = collecting.records
    assert len(record["traces"][0]["calls"]) == 1


def test_a_genai_span_the_gateway_logs_for_a_restart_reads_back_as_the_same_span() -> None:
    """Every OTLP attribute type survives the spool's JSON: bytes, arrays, maps (also one that looks like the
    spool's own tagging), big integers, a lone surrogate from OTLP/JSON, and non-finite doubles."""
    odd: dict[str, Any] = {
        "bytes": b"\x00\xffraw",
        "array": [1, "two", [3.5, None, True]],
        "map": {"$bytes": "not bytes"},
        "nested": {"$map": {"x": b"y"}},
        "big": 2**63 - 1,
        "surrogate": "\ud800 alone",
    }
    span = GenAISpan(
        trace_id=2**127 + 5,
        span_id=2**63 + 1,
        parent_id=None,
        name="chat m",
        start_ns=1,
        end_ns=2,
        attributes={**odd, "gen_ai.operation.name": "chat", "inf": float("inf")},
        events=(SpanEvent("gen_ai.evaluation.result", 3, {"score": float("nan"), "raw": b"z"}),),
        failed=True,
        status_message="upstream 503",
    )
    line = span_line(2, b"\x01" * 24, span)
    line.decode("ascii")  # the log line is plain ASCII whatever the strings held
    rank, span_id, back = read_span_line(json.loads(line))
    assert (rank, span_id) == (2, b"\x01" * 24)
    assert {key: back.attributes[key] for key in odd} == odd
    assert back.attributes["inf"] == float("inf") and math.isnan(back.events[0].attributes["score"])
    assert back.events[0].attributes["raw"] == b"z"
    same = {"attributes": span.attributes, "events": span.events}
    assert dataclasses.replace(back, **same) == span
