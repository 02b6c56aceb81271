"""Our semantic conventions: how a run, its records, its step metrics and its end travel as OpenTelemetry data.

In-process exporters read the producer's objects directly; these names matter wherever records leave the
process (OTLP to a Collector and a prime-otel gateway) and for producers that use plain OpenTelemetry APIs.
The README has the table.
"""

from __future__ import annotations

# Resource (one run, one Resource).
RUN_ID = "run.id"
RUN_TYPE = "run.type"
RUN_NAME = "run.name"
PRIME_RUN_ID = "prime.run.id"
PRIME_RUN_KIND = "prime.run.kind"
RUN_RANK = "prime.run.rank"
RUN_WORLD_SIZE = "prime.run.world_size"

# Record spans: one span per episode (``episode``) or bare trace (``trace``).
EPISODE_SPAN = "episode"
TRACE_SPAN = "trace"
EPISODE_ID = "prime.episode.id"
EPISODE_OK = "prime.episode.ok"
RUN_STEP = "prime.run.step"
CONVERSATION_ID = "gen_ai.conversation.id"
#: The producer's whole record (``to_record()``), unstamped, as compact JSON: a string costs ~0.5 ms to
#: encode into OTLP where a nested map costs ~20 ms for a large episode.
RECORD_JSON = "prime.record.json"
#: The same record as a map attribute (opentelemetry-api >= 1.45 keeps nested maps), for plain-API producers.
RECORD_MAP = "prime.record"
#: Where a record span's child spans (model calls, tool calls from instrumented code) are attached.
CHILD_SPANS = "otel_spans"
#: The record's v0 sample rows (a JSON list), projected by the producer (a training producer: its rollout numbers);
#: without it the gateway projects an episode's rows from the record (the same rows for verifiers episodes).
SAMPLES_JSON = "prime.samples.json"

# Step metrics over OTLP: gauge points carrying the step.
METRIC_STEP = RUN_STEP

# The end of one process's part of a run: a ``run.end`` span.
RUN_END_SPAN = "run.end"
END_STATUS = "prime.run.status"
END_ERROR = "prime.run.error"
END_SUMMARY_JSON = "prime.run.summary.json"
END_EPISODES = "prime.run.records.episodes"
END_TRACES = "prime.run.records.traces"
END_METRIC_ROWS = "prime.run.records.metric_rows"
END_OWNER = "prime.run.owner"

# GenAI semantic conventions in: an episode assembled from standard GenAI spans (records/_genai.py,
# docs/genai.md has the table). An episode is a span named ``episode`` (or any span with ``prime.episode``
# true given at its start) without a record attribute; its descendants follow the GenAI conventions.
EPISODE_MARKER = "prime.episode"
GEN_AI_OPERATION = "gen_ai.operation.name"
#: ``gen_ai.operation.name`` values of one model call each.
MODEL_CALL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
EXECUTE_TOOL = "execute_tool"
INVOKE_AGENT = "invoke_agent"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_REASONING_TOKENS = "gen_ai.usage.reasoning.output_tokens"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
GEN_AI_SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
GEN_AI_TOOL_DEFINITIONS = "gen_ai.tool.definitions"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_PROVIDER = "gen_ai.provider.name"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"
#: Request settings that become a model call's ``sampling`` (attribute -> sampling key).
GEN_AI_SAMPLING = {
    "gen_ai.request.temperature": "temperature",
    "gen_ai.request.top_p": "top_p",
    "gen_ai.request.max_tokens": "max_tokens",
    "gen_ai.request.seed": "seed",
    "gen_ai.request.frequency_penalty": "frequency_penalty",
    "gen_ai.request.presence_penalty": "presence_penalty",
}
ERROR_TYPE = "error.type"
HTTP_STATUS = "http.response.status_code"
#: Rewards: one span event per score, on the episode span or any span under it.
EVALUATION_EVENT = "gen_ai.evaluation.result"
EVALUATION_NAME = "gen_ai.evaluation.name"
EVALUATION_SCORE = "gen_ai.evaluation.score.value"
EVALUATION_LABEL = "gen_ai.evaluation.score.label"
#: The reward's weight (default 1.0); not a GenAI convention.
EVALUATION_WEIGHT = "prime.evaluation.weight"
# The task and placement of an assembled episode: attributes of the episode span.
TASK_IDX = "prime.task.idx"
TASK_ID = "prime.task.id"
TASK_NAME = "prime.task.name"
TASK_PROMPT = "prime.task.prompt"
TASK_ANSWER = "prime.task.answer"
#: Further task fields, a JSON object merged into ``task.data``.
TASK_JSON = "prime.task.json"
ENV_ID = "prime.env.id"
ENV_NAME = "prime.env.name"
GROUP_ID = "prime.group.id"
#: On an agent (or the episode) span: the seat is not trainable (a judge, a modelled user).
AGENT_TRAINABLE = "prime.agent.trainable"
#: On an agent (or the episode) span: the trace's ``stop_condition``, overriding the one derived from statuses.
STOP_CONDITION = "prime.stop_condition"

#: Where the run's spans and metric points are also exported (OTLP/HTTP base URL or gRPC endpoint).
TEE_ENDPOINT_ENV = "PRIME_OTEL_TEE_ENDPOINT"
TEE_PROTOCOL_ENV = "PRIME_OTEL_TEE_PROTOCOL"

# Liveness of a producer process on the OTLP path, sent while it lives (``PRIME_OTEL_HEARTBEAT_SECONDS``, default
# 30, 0: off): a ``run.heartbeat`` span with the run's resource and no attributes. A gateway counts a run's lease
# from the last data, marker or heartbeat of any of its ranks, so only a dead producer is closed as crashed; a
# heartbeat is not a record (not counted, not deduplicated, never delivered).
HEARTBEAT_SPAN = "run.heartbeat"
HEARTBEAT_SECONDS_ENV = "PRIME_OTEL_HEARTBEAT_SECONDS"
DEFAULT_HEARTBEAT_SECONDS = 30.0
