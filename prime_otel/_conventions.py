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
