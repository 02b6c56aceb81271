"""The eval samples sink stores each episode's v0 rows as the released SDK sent them, and takes a batch that mixes
episodes with bare traces: the episodes' rows are stored, the bare traces are counted as skipped (they reach
Prime Traces only)."""

from __future__ import annotations

from typing import Any

from prime_otel.client import EvaluationsAPI, PlatformHTTP
from prime_otel.exporters.eval_samples import EvalSamplesSink
from prime_otel.testing import LocalPlatform
from tests._fixtures import load_episodes, load_json
from tests.exporters._platform_runs import open_eval, spans

FIXTURE_ROWS: list[dict[str, Any]] = load_json("eval", "samples.json")["samples"]


def _stored(platform: LocalPlatform, run_id: str) -> list[dict[str, Any]]:
    return list(platform.inspect.samples(run_id)["items"])


def test_a_mixed_batch_stores_the_episodes_rows_and_skips_the_bare_traces(
    platform: LocalPlatform, http: PlatformHTTP
) -> None:
    run_id = open_eval(http)
    episodes = load_episodes("eval")
    bare_trace = episodes[0].traces[0]
    sink = EvalSamplesSink(EvaluationsAPI(http), run_id)

    sink.write(spans([episodes[0], bare_trace, episodes[1], bare_trace, episodes[2]]))

    assert sink.stats.delivered == 3
    assert sink.stats.skipped == 2
    assert sink.stats.requests == 1
    stored = _stored(platform, run_id)
    assert [row["sample_id"] for row in stored] == [row["sample_id"] for row in FIXTURE_ROWS]
    assert stored == FIXTURE_ROWS


def test_a_batch_of_bare_traces_only_sends_nothing(platform: LocalPlatform, http: PlatformHTTP) -> None:
    run_id = open_eval(http)
    traces = [trace for episode in load_episodes("eval") for trace in episode.traces]
    sink = EvalSamplesSink(EvaluationsAPI(http), run_id)

    sink.write(spans(traces))

    assert (sink.stats.delivered, sink.stats.skipped, sink.stats.requests) == (0, len(traces), 0)
    assert _stored(platform, run_id) == []
