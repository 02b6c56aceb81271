"""The Prime Traces sink: a line the service refuses costs only itself. Lines it would refuse for what they are
stay out before sending; an upload it still rejects is split and resent until only the rejected lines are left;
a failure of the request as a whole is never split; episodes and bare traces each go out in their own format."""

from __future__ import annotations

import collections
import copy
import itertools
import os
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.resources import Resource
from prime_traces import LineFormat

from prime_otel._sink import SinkWriteError
from prime_otel.exporters.traces import PrimeTracesSink, TracesLimits, refusal
from prime_otel.records import RecordSpan
from prime_otel.testing import LocalPlatform
from tests._fixtures import episode_from_record, load_records

RECORDS = load_records("eval")
LIMITS = TracesLimits()
_numbers = itertools.count()


def episode(index: int = 0) -> dict[str, Any]:
    number = next(_numbers)
    record = copy.deepcopy(RECORDS[index % len(RECORDS)])
    record["id"] = f"xep-{os.getpid()}-{number}"
    for position, trace in enumerate(record["traces"]):
        trace["id"] = f"xtr-{os.getpid()}-{number}-{position}"
    return record


def bare_trace() -> dict[str, Any]:
    trace = copy.deepcopy(RECORDS[0]["traces"][0])
    trace["id"] = f"xbare-{os.getpid()}-{next(_numbers)}"
    return trace


@pytest.fixture
def platform(local_platform_session: LocalPlatform) -> Iterator[LocalPlatform]:
    yield local_platform_session
    local_platform_session.reset()


class Sink:
    """A traces exporter for a fresh run id, with what it refused counted by reason."""

    def __init__(self, platform: LocalPlatform) -> None:
        self.platform = platform
        self.run_id = f"exporter-run-{os.getpid()}-{next(_numbers)}"
        self.exporter = PrimeTracesSink.for_run(
            run_id=self.run_id,
            run_kind="eval",
            context={"source": "prime-otel-tests"},
            api_key=platform.api_key,
            traces_url=platform.url,
            team_id=None,
        )
        self.rejected: collections.Counter[str] = collections.Counter()
        self.exporter.on_rejected = lambda count, reason: self.rejected.update({reason: count})

    def write(self, records: list[dict[str, Any]]) -> None:
        self.exporter.write([RecordSpan(record, Resource.create({}), time.time_ns()) for record in records])

    def stored(self, what: str) -> list[str]:
        response = httpx.get(
            f"{self.platform.url}/api/v1/{what}",
            params={"run_id": self.run_id, "limit": 1000},
            headers={"Authorization": f"Bearer {self.platform.api_key}"},
        )
        response.raise_for_status()
        return sorted(item["id"] for item in response.json()["items"])

    def uploads(self) -> list[dict[str, Any]]:
        return [r for r in self.platform.inspect.requests(limit=1000) if r["path"] == "/api/v1/traces"]


def test_an_upload_the_platform_rejects_is_split_until_only_the_rejected_lines_fail(platform: LocalPlatform) -> None:
    """Fixture episode 3 (about 9 kB as a line) is over the platform's line limit, which the sink was not told."""
    platform.inspect.settings(traces_max_line_bytes=7_000)
    records = [episode(i) for i in range(9)]
    sink = Sink(platform)
    sink.write(records)

    assert sink.rejected == {"rejected by the platform: 400 trace_too_large": 3}
    kept = sorted(record["id"] for index, record in enumerate(records) if index % 3 != 2)
    assert sink.stored("episodes") == kept
    assert sink.exporter.stats.delivered == sink.exporter.episodes_written == 6


def test_a_rejection_the_resent_halves_no_longer_get_costs_nothing(platform: LocalPlatform) -> None:
    platform.inspect.add_fault(
        method="POST", path="/api/v1/traces", action="fail_before", status=400, code="invalid_trace"
    )
    records = [episode(i) for i in range(4)]
    sink = Sink(platform)
    sink.write(records)

    assert sink.rejected == {}
    assert sink.stored("episodes") == sorted(record["id"] for record in records)


def test_a_rejection_of_the_request_as_a_whole_is_not_split(platform: LocalPlatform) -> None:
    before = len(Sink(platform).uploads())
    platform.inspect.add_fault(
        method="POST", path="/api/v1/traces", action="fail_before", status=400, code="invalid_metadata"
    )
    sink = Sink(platform)
    with pytest.raises(SinkWriteError) as failed:
        sink.write([episode(i) for i in range(4)])

    assert failed.value.lost_positions(4) == [0, 1, 2, 3]
    assert len(sink.uploads()) == before + 1
    assert sink.rejected == {}


def test_episodes_and_bare_traces_go_out_in_their_own_format_and_a_failure_costs_only_what_was_not_sent(
    platform: LocalPlatform,
) -> None:
    """The episodes' upload goes first and lands; the bare traces' upload is refused: only their positions are lost."""
    platform.inspect.add_fault(method="POST", path="/api/v1/traces", action="delay", delay_s=0)
    platform.inspect.add_fault(method="POST", path="/api/v1/traces", action="fail_before", status=401)
    batch = [episode(0), bare_trace(), episode(1), bare_trace()]
    sink = Sink(platform)
    with pytest.raises(SinkWriteError) as failed:
        sink.write(batch)

    assert failed.value.lost_positions(len(batch)) == [1, 3]
    assert sink.stored("episodes") == sorted([batch[0]["id"], batch[2]["id"]])
    sent = [(u["headers"].get("x-prime-line-format"), u["status"]) for u in sink.uploads()[-2:]]
    assert sent == [("episode", 200), (None, 401)]


def test_lines_over_a_limit_stay_out_before_sending(platform: LocalPlatform) -> None:
    records = [episode(0), episode(1), episode(2)]
    records[1]["traces"].append(copy.deepcopy(records[1]["traces"][0]))
    sink = Sink(platform)
    sink.write(records)

    assert sink.rejected == {"rejected before sending: duplicate_trace_id": 1}
    assert sink.stored("episodes") == sorted([records[0]["id"], records[2]["id"]])
    assert [len(upload["body"]["traces"]["jsonl_lines"]) for upload in sink.uploads()[-1:]] == [2]


def _member(record: dict[str, Any], **changes: Any) -> dict[str, Any]:
    member = copy.deepcopy(record["traces"][0])
    member.update(changes)
    return member


def _refusal_cases() -> dict[str, tuple[dict[str, Any], LineFormat, int, str | None]]:
    base = episode(0)
    member = base["traces"][0]
    return {
        "a valid episode": (base, LineFormat.EPISODE, 6_000, None),
        "a valid bare trace": (member, LineFormat.TRACE, 6_000, None),
        "a line over the line limit": (base, LineFormat.EPISODE, LIMITS.line_bytes + 1, "trace_too_large"),
        "no id": ({**base, "id": None}, LineFormat.EPISODE, 10, "invalid_trace"),
        "an empty id": ({**member, "id": ""}, LineFormat.TRACE, 10, "invalid_trace"),
        "an episode id over the length limit": (
            {**base, "id": "e" * 257},
            LineFormat.EPISODE,
            10,
            "episode_id_too_long",
        ),
        "an env id over the length limit": (
            {**base, "env": {"id": "v" * 257}},
            LineFormat.EPISODE,
            10,
            "environment_id_too_long",
        ),
        "an episode whose traces are no list": (
            {**base, "traces": None},
            LineFormat.EPISODE,
            10,
            "line_format_mismatch",
        ),
        "a bare trace with a traces list": ({**member, "traces": []}, LineFormat.TRACE, 10, "line_format_mismatch"),
        "too many member traces": (
            {**base, "traces": [_member(base, id=f"m{i}") for i in range(LIMITS.traces_per_episode + 1)]},
            LineFormat.EPISODE,
            10,
            "too_many_traces_in_episode",
        ),
        "a member without an id": (
            {**base, "traces": [_member(base, id=None)]},
            LineFormat.EPISODE,
            10,
            "invalid_trace",
        ),
        "a member that is no object": ({**base, "traces": ["t1"]}, LineFormat.EPISODE, 10, "invalid_trace"),
        "two members with one id": ({**base, "traces": [member, member]}, LineFormat.EPISODE, 10, "duplicate_trace_id"),
        "a member env id over the length limit": (
            {**base, "traces": [_member(base, env={"id": "v" * 257})]},
            LineFormat.EPISODE,
            10,
            "environment_id_too_long",
        ),
    }


REFUSALS = _refusal_cases()


@pytest.mark.parametrize("case", REFUSALS.values(), ids=REFUSALS.keys())
def test_refusal_names_the_code_prime_traces_would_answer(
    case: tuple[dict[str, Any], LineFormat, int, str | None],
) -> None:
    record, line_format, size, code = case
    assert refusal(record, line_format, size, LIMITS) == code


def test_refusal_reads_a_verifiers_episode_object_like_its_record() -> None:
    record = episode(2)
    record["traces"][1]["id"] = record["traces"][0]["id"]
    assert refusal(episode_from_record(record), LineFormat.EPISODE, 10, LIMITS) == "duplicate_trace_id"
    assert refusal(episode_from_record(episode(2)), LineFormat.EPISODE, 10, LIMITS) is None
