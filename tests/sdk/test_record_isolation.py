"""One bad episode or trace costs only itself: its neighbours in the same call and in the calls coalesced with it
land exactly once on every sink, and the bad one is counted as failed (with why) instead of taking a batch down
silently. What can be checked for free is refused at the call, before anything of that call is queued."""

from __future__ import annotations

import copy
import datetime
import decimal
import itertools
import json
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import prime_otel as po
from prime_otel.exporters import traces as traces_exporter
from prime_otel.testing import LocalPlatform, start_local_platform
from tests._fixtures import episode_from_record, load_records
from tests._platform import point_sdk_at

EVAL_RECORDS = load_records("eval")
TRAIN_RECORDS = load_records("train")
_numbers = itertools.count()
SMALL_LINE_LIMIT = 64 * 1024


def fresh_episode(records: list[dict[str, Any]] = EVAL_RECORDS, index: int = 0) -> dict[str, Any]:
    """A fixture episode record with ids no other record of the session has."""
    number = next(_numbers)
    record = copy.deepcopy(records[index % len(records)])
    record["id"] = f"ep-{os.getpid()}-{number}"
    for position, trace in enumerate(record["traces"]):
        trace["id"] = f"tr-{os.getpid()}-{number}-{position}"
    return record


def fresh_trace() -> dict[str, Any]:
    trace = copy.deepcopy(EVAL_RECORDS[0]["traces"][0])
    trace["id"] = f"bare-{os.getpid()}-{next(_numbers)}"
    return trace


class HeldRecord(dict):  # type: ignore[type-arg]
    """A valid episode whose encoding waits until the test lets it go: the uploader is busy with it while the
    test's next calls queue, so those calls are coalesced into one delivery, deterministically."""

    def __init__(self, record: dict[str, Any]) -> None:
        super().__init__(record)
        self.encoding = threading.Event()
        self.release = threading.Event()

    def items(self) -> Any:
        self.encoding.set()
        self.release.wait(10)
        return super().items()


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


class RaisingToRecord:
    """An episode object whose ``to_record()`` fails."""

    id = "raising-to-record"
    traces: list[Any] = []

    def to_record(self) -> dict[str, Any]:
        raise RuntimeError("the producer's own bug")


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], Any]:
    def make(record: dict[str, Any]) -> Any:
        target = record
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value(record) if callable(value) else value
        return record

    return make


def _episode_object_with_a_lone_surrogate(record: dict[str, Any]) -> Any:
    record["traces"][0]["info"] = {"note": "half a pair: \ud800"}
    return episode_from_record(record)


def _duplicate_member(record: dict[str, Any]) -> dict[str, Any]:
    record["traces"].append(copy.deepcopy(record["traces"][0]))
    return record


def _oversized(record: dict[str, Any]) -> dict[str, Any]:
    record["traces"][0]["info"] = {"transcript": "x" * (SMALL_LINE_LIMIT + 1)}
    return record


def _three_members(record: dict[str, Any]) -> dict[str, Any]:
    for position in (1, 2):
        member = copy.deepcopy(record["traces"][0])
        member["id"] = f"{member['id']}-{position}"
        record["traces"].append(member)
    return record


@dataclass(frozen=True)
class Bad:
    """A way to spoil a valid episode, why it is then refused, and which sinks cannot store it."""

    spoil: Callable[[dict[str, Any]], Any]
    reason: str
    sinks: tuple[str, ...] = ("traces", "eval_samples")
    platform: dict[str, int] = field(default_factory=dict)  # platform limits for the test
    client_limits: traces_exporter.TracesLimits | None = None  # what the SDK is told the limits are


NO_SINK_TAKES = {
    "decimal": Bad(_set(("score",), decimal.Decimal("0.5")), "unencodable record: Decimal"),
    "bytes": Bad(_set(("task", "data", "blob"), b"\x00\x01"), "unencodable record: bytes"),
    "datetime": Bad(_set(("finished_at",), datetime.datetime(2025, 1, 1)), "unencodable record: datetime"),
    "set": Bad(_set(("traces", 0, "info"), {"tags": {"a", "b"}}), "unencodable record: set"),
    "circular reference": Bad(_set(("traces", 0, "info"), lambda record: {"loop": record}), "circular reference"),
    "non-string key": Bad(_set(("task", "data", ("a", "b")), 1), "non-string key"),
    "lone surrogate": Bad(_set(("task", "data", "prompt"), "half a pair: \udc00"), "invalid string (lone surrogate)"),
    "nesting thousands deep": Bad(_set(("traces", 0, "info"), {"deep": nested(5000)}), "nesting too deep"),
    "episode object with a lone surrogate": Bad(
        _episode_object_with_a_lone_surrogate, "invalid string (lone surrogate)"
    ),
    "to_record() raises": Bad(lambda record: RaisingToRecord(), "to_record() raised RuntimeError"),
}

PRIME_TRACES_REFUSES = {
    "duplicate member trace id": Bad(_duplicate_member, "rejected before sending: duplicate_trace_id", ("traces",)),
    "episode id too long": Bad(_set(("id",), "e" * 300), "rejected before sending: episode_id_too_long", ("traces",)),
    "member trace without an id": Bad(
        _set(("traces", 0, "id"), None), "rejected before sending: invalid_trace", ("traces",)
    ),
    "oversized episode": Bad(
        _oversized,
        "rejected before sending: trace_too_large",
        ("traces",),
        platform={"traces_max_line_bytes": SMALL_LINE_LIMIT},
        client_limits=traces_exporter.TracesLimits(line_bytes=SMALL_LINE_LIMIT),
    ),
    "oversized episode the SDK was not told about": Bad(
        _oversized,
        "rejected by the platform: 400 trace_too_large",
        ("traces",),
        platform={"traces_max_line_bytes": SMALL_LINE_LIMIT},
    ),
    "too many member traces": Bad(
        _three_members,
        "rejected before sending: too_many_traces_in_episode",
        ("traces",),
        platform={"traces_max_per_episode": 2},
        client_limits=traces_exporter.TracesLimits(traces_per_episode=2),
    ),
}


def _landed_episode_ids(platform: LocalPlatform, run_id: str) -> list[str]:
    return sorted(item["id"] for item in platform.inspect.episodes(run_id)["items"])


def _sample_episode_ids(platform: LocalPlatform, run_id: str) -> list[str]:
    return sorted(row["episode_id"] for row in platform.inspect.samples(run_id)["items"])


def _committed_uploads(platform: LocalPlatform, run_id: str) -> list[list[str]]:
    """The ids each committed Prime Traces upload of the run carried, in the order they were sent."""
    uploads = [
        request
        for request in platform.inspect.requests(limit=1000, run_id=run_id)
        if request["path"] == "/api/v1/traces" and request["status"] == 200
    ]
    return [[line["id"] for line in upload["body"]["traces"]["jsonl_lines"]] for upload in uploads]


def _spooled_ids(run_id: str) -> list[str]:
    """The ids of the records the run's spool logged (every record it took, before sending)."""
    folder = Path(os.environ["PRIME_RUNS_DIR"]) / run_id / "spool-records"
    lines = [line for log in folder.glob("log-*.jsonl") for line in log.read_text(encoding="utf-8").splitlines()]
    return sorted(json.loads(line)["r"]["id"] for line in lines)


def _log_coalesced(run: po.Run, calls: list[list[Any]]) -> HeldRecord:
    """Logs a held episode, then ``calls`` while the uploader is busy with it: they reach the sinks as one batch."""
    held = HeldRecord(fresh_episode())
    run.log_episodes([held])
    assert held.encoding.wait(10)
    for call in calls:
        run.log_episodes(call)
    held.release.set()
    return held


@pytest.mark.parametrize(
    "bad", [*NO_SINK_TAKES.values(), *PRIME_TRACES_REFUSES.values()], ids=[*NO_SINK_TAKES, *PRIME_TRACES_REFUSES]
)
def test_a_bad_episode_costs_only_itself_and_is_counted_once_per_sink_with_why(
    bad: Bad, shared_platform_env: LocalPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    if bad.platform:
        shared_platform_env.inspect.settings(**bad.platform)
    if bad.client_limits is not None:
        monkeypatch.setattr(traces_exporter, "DEFAULT_LIMITS", bad.client_limits)
    valid = [fresh_episode(index=i) for i in range(6)]
    spoiled = bad.spoil(fresh_episode(index=1))
    run = po.init(environments=["gsm8k"], model="m")
    held = _log_coalesced(run, [valid[0:2], [valid[2], spoiled, valid[3]], valid[4:6]])
    assert run.flush(timeout=30)
    spooled = _spooled_ids(run.id)  # read before finish: a spool whose records were all delivered is removed
    report = run.finish()

    assert report is not None and not report.complete
    expected = sorted([held["id"], *(record["id"] for record in valid)])
    spoiled_id = spoiled["id"] if isinstance(spoiled, dict) else spoiled.id
    assert _landed_episode_ids(shared_platform_env, run.id) == expected
    in_samples = expected if "eval_samples" in bad.sinks else sorted([*expected, spoiled_id])
    assert _sample_episode_ids(shared_platform_env, run.id) == in_samples
    assert spooled == in_samples, "the spool never holds a record no sink can take"
    assert run.failed_records == dict.fromkeys(bad.sinks, 1)
    reasons = {sink.sink: sink.failure_reasons for sink in report.sinks}
    assert reasons == {sink: ({bad.reason: 1} if sink in bad.sinks else {}) for sink in ("traces", "eval_samples")}
    if not bad.reason.startswith("rejected by the platform"):
        # The three calls after the held one went out in one upload (Prime Traces packs what waits behind a
        # request, the held one too): the bad record never took its batch down.
        uploads = _committed_uploads(shared_platform_env, run.id)
        valid_ids = [record["id"] for record in valid]
        assert [record_id for upload in uploads for record_id in upload] == [held["id"], *valid_ids]
        assert any(set(valid_ids) <= set(upload) for upload in uploads)


def test_what_is_not_a_record_is_refused_at_the_call_and_nothing_of_that_call_is_queued(
    shared_platform_env: LocalPlatform,
) -> None:
    run = po.init(environments=["gsm8k"], model="m")
    refused = [fresh_episode() for _ in range(4)]
    with pytest.raises(TypeError, match=r"log_episodes\(\): record 1 is of type str, not a record"):
        run.log_episodes([refused[0], "episode-7", refused[1]])
    with pytest.raises(ValueError, match=r"log_episodes\(\): record 1 has no string 'id' \(found none\)"):
        run.log_episodes([refused[2], {"traces": []}])
    with pytest.raises(ValueError, match=r"record 0 has no string 'id' \(found int\)"):
        run.log_episodes([{**refused[3], "id": 7}])
    with pytest.raises(TypeError, match="got a single dict: wrap it in a list"):
        run.log_episodes(refused[3])
    with pytest.raises(TypeError, match=r"log_traces\(\): record 0 is of type int"):
        run.log_traces([42])
    kept = [fresh_episode(index=i) for i in range(2)]
    run.log_episodes(kept)  # the run goes on
    report = run.finish()

    assert report is not None and report.complete, report.render()
    assert run.failed_records == {}
    assert _landed_episode_ids(shared_platform_env, run.id) == sorted(record["id"] for record in kept)
    assert _sample_episode_ids(shared_platform_env, run.id) == sorted(record["id"] for record in kept)


def test_episodes_and_bare_traces_of_one_call_each_go_out_in_their_own_line_format(
    shared_platform_env: LocalPlatform,
) -> None:
    episodes = [fresh_episode(index=i) for i in range(2)]
    bare = [fresh_trace() for _ in range(2)]
    run = po.init(environments=["gsm8k"], model="m")
    run.log_episodes([episodes[0], bare[0], episodes[1], bare[1]])
    report = run.finish()

    assert report is not None and report.complete, report.render()
    landed = {item["id"]: item for item in shared_platform_env.inspect.episodes(run.id)["items"]}
    assert sorted(landed) == sorted(record["id"] for record in [*episodes, *bare])
    assert all("traces" in landed[record["id"]] for record in episodes)
    assert not any("traces" in landed[record["id"]] for record in bare)
    formats = sorted(
        (request["body"]["traces"]["line_format"], len(request["body"]["traces"]["jsonl_lines"]))
        for request in shared_platform_env.inspect.requests(limit=1000, run_id=run.id)
        if request["path"] == "/api/v1/traces"
    )
    assert formats == [("episode", 2), ("trace", 2)]


def test_an_offline_run_refuses_an_unencodable_record_at_the_call_and_writes_nothing_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRIME_RUNS_DIR", str(tmp_path / "runs"))
    run = po.init(mode="offline", environments=["gsm8k"], model="m")
    bad = fresh_episode()
    bad["score"] = decimal.Decimal("1")
    with pytest.raises(ValueError, match=r"record 1 cannot be encoded \(unencodable record: Decimal\)"):
        run.log_episodes([fresh_episode(), bad])
    kept = fresh_episode()
    run.log_episodes([kept])
    run.finish()
    lines = (Path(run.folder or "") / "episodes.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == [kept["id"]]


TEAM = "team_isolation"


@pytest.fixture
def train_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalPlatform]:
    platform = start_local_platform(tmp_path / "platform", teams=[TEAM], metrics_rate_limit=100_000)
    point_sdk_at(platform, monkeypatch, tmp_path)
    monkeypatch.setenv("PRIME_TEAM_ID", TEAM)
    yield platform
    platform.stop()


def test_in_a_training_run_the_valid_episodes_of_a_step_land_in_its_parquet_rows(train_env: LocalPlatform) -> None:
    valid = [episode_from_record(fresh_episode(TRAIN_RECORDS, i)) for i in range(4)]
    bad = fresh_episode(TRAIN_RECORDS, 1)
    bad["advantage"] = decimal.Decimal("0.25")
    run = po.init(kind="train", model="m", environments=["gsm8k"])
    run.log_episodes([valid[0], bad, valid[1]])
    run.log_episodes(valid[2:])
    run.log_metrics({"loss": 0.5}, step=10)
    report = run.finish()

    assert report is not None and not report.complete
    assert run.failed_records == {"traces": 1, "rft_samples": 1}
    reasons = {sink.sink: sink.failure_reasons for sink in report.sinks if sink.failure_reasons}
    assert reasons == {"traces": {"unencodable record: Decimal": 1}, "rft_samples": {"unencodable record: Decimal": 1}}
    rows = train_env.inspect.step_rows(run.id, 10)["items"]
    assert sorted(json.loads(row["info"])["native_wrapper"]["id"] for row in rows) == sorted(e.id for e in valid)
    assert _landed_episode_ids(train_env, run.id) == sorted(e.id for e in valid)
