"""``prime-otel sync`` tells the truth about a run folder and sends it only where the user chose.

Producers run in subprocesses and are SIGKILLed where a crash is needed; a sync runs the ``prime-otel``
command's entry point with its arguments and environment; what a platform received is read back from its
``/_local/`` inspection API.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import prime_otel as po
from prime_otel.cli import main
from prime_otel.client import MAX_ATTEMPTS
from prime_otel.testing import LocalPlatform, start_local_platform
from tests._fixtures import fresh_records, load_episodes, load_json
from tests._waiting import wait_for
from tests.lifecycle._producer import Producer, Running

TEAM = "team_sync"
SHARED_KEY = "pit_local_sync_truth_key"
WAIT_SECONDS = 60.0
HANG_SECONDS = 8.0  # long enough that a request is still in flight when the producer is killed
#: A samples request the server applies this long after it came: after its client was killed, but before a sync
#: may count it as not stored (``RESUME_SETTLE_SECONDS``).
APPLYING_SECONDS = 3.0

TRAINING_PRELUDE = """
_TRAIN = load_records("train")


def training_episode(step, index):
    \"\"\"A fixture training episode record (its to_record() form) dispatched at ``step``, under fresh ids.\"\"\"
    record = copy.deepcopy(_TRAIN[index % len(_TRAIN)])
    record["id"] = f"ep-{step}-{index}-{uuid.uuid4().hex[:8]}"
    for position, trace in enumerate(record["traces"]):
        trace["id"] = f"tr-{step}-{index}-{position}-{uuid.uuid4().hex[:8]}"
    record["run"]["work"]["step"] = step
    return record


run = po.init(kind="train", name=os.environ["RUN_NAME"], model="m", environments=["gsm8k"], samples_step_interval=1)
announce(run)
"""


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlatform]:
    with start_local_platform(
        tmp_path_factory.mktemp("sync-platform"), api_key=SHARED_KEY, processing_delay=0.2
    ) as server:
        yield server


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlatform]:
    """A second platform accepting the same key: what a sync must not reach unless it is pointed there."""
    with start_local_platform(tmp_path_factory.mktemp("sync-elsewhere"), api_key=SHARED_KEY) as server:
        yield server


@pytest.fixture
def runs_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """In-process runs write under the test's directory; no run or setting is inherited from the environment."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PRIME_RUNS_DIR", str(tmp_path / "runs"))
    for name in [name for name in os.environ if name.startswith("PRIME_") and name != "PRIME_RUNS_DIR"]:
        monkeypatch.delenv(name)
    return tmp_path / "runs"


@pytest.fixture
def producer(platform: LocalPlatform, tmp_path: Path) -> Iterator[Producer]:
    yield Producer(platform, tmp_path)
    platform.reset()


def point_at(platform: LocalPlatform, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in platform.env.items():
        monkeypatch.setenv(name, value)


@dataclass
class Synced:
    returncode: int
    stdout: str
    stderr: str


Sync = Callable[..., Synced]


@pytest.fixture
def sync(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Sync:
    """``prime-otel sync FOLDER [flags]`` with the environment pointing at ``env_platform`` (an empty HOME)."""

    def run(folder: Path, env_platform: LocalPlatform, *flags: str) -> Synced:
        monkeypatch.setenv("HOME", str(tmp_path / "sync-home"))
        for name, value in env_platform.env.items():
            monkeypatch.setenv(name, value)
        capsys.readouterr()
        returncode = main(["sync", str(folder), *flags])
        captured = capsys.readouterr()
        return Synced(returncode, captured.out, captured.err)

    return run


def last_seq(platform: LocalPlatform) -> int:
    requests = platform.inspect.requests(limit=1)
    return int(requests[-1]["seq"]) if requests else 0


def requests_after(platform: LocalPlatform, seq: int) -> list[dict[str, Any]]:
    return [r for r in platform.inspect.requests(limit=10_000) if r["seq"] > seq]


def spooled_lines(folder: Path, spool: str) -> int:
    return sum(path.read_bytes().count(b"\n") for path in (folder / spool).glob("log-*.jsonl"))


def kill(running: Running) -> None:
    running.send_signal(signal.SIGKILL)
    outcome = running.finish()
    assert outcome.returncode == -signal.SIGKILL, outcome.describe()


def status_writes(platform: LocalPlatform, run_id: str) -> list[dict[str, Any]]:
    return [
        r
        for r in platform.inspect.requests(limit=10_000, run_id=run_id)
        if r["method"] == "PUT" and r["path"].endswith(f"/rft/external-runs/{run_id}/status")
    ]


def start_training(producer: Producer, body: str, name: str) -> tuple[Running, str, Path]:
    runs = producer.workdir / "runs"
    running = producer.start(TRAINING_PRELUDE + body, PRIME_RUNS_DIR=str(runs), PRIME_TEAM_ID=TEAM, RUN_NAME=name)
    run_id = str(running.wait_for("RUN"))
    return running, run_id, runs / run_id


def test_a_killed_training_run_is_closed_as_crashed_once_and_what_never_left_is_delivered(
    sync: Sync, platform: LocalPlatform, producer: Producer
) -> None:
    """The producer dies while its first uploads hang: the steps it logged never reached the sample objects
    or the metrics table. Sync delivers them, closes the run as crashed, and a second sync changes nothing."""
    platform.inspect.add_fault(method="POST", path="/api/v1/traces", action="delay", delay_s=HANG_SECONDS, times=None)
    # Each sink sends on its own: the sample objects hang at their own first request, not behind Prime Traces.
    platform.inspect.add_fault(
        method="POST", path="/api/v1/rft/samples/presign", action="delay", delay_s=HANG_SECONDS, times=None
    )
    platform.inspect.add_fault(
        method="POST", path="/api/v1/rft/metrics", action="delay", delay_s=HANG_SECONDS, times=None
    )
    running, run_id, folder = start_training(
        producer,
        """
run.log_episodes([training_episode(step, index) for step in (1, 2, 3) for index in range(2)])
loss = run.meter().create_gauge("loss")
for step in (1, 2, 3):
    loss.set(1.0 / step, {"prime.run.step": step})
run.flush(timeout=0.2)  # collects the three steps' row into one upload, which hangs
say("LOGGED")
sys.stdin.readline()
""",
        "killed-training",
    )
    running.wait_for("LOGGED")
    wait_for(lambda: spooled_lines(folder, "spool-records") == 6, "the six episodes in the spool")
    wait_for(lambda: spooled_lines(folder, "spool-metrics") == 3, "the three metric rows in the spool")
    kill(running)
    platform.inspect.clear_faults()
    before = platform.inspect.run(run_id)
    assert before["status"] == "RUNNING" and before["objects"] == []

    first = sync(folder, platform)

    assert first.returncode == 0, first.stdout + first.stderr
    assert "closed it as crashed" in first.stdout and "may be missing" not in first.stdout
    after = platform.inspect.run(run_id)
    assert after["status"] == "FAILED" and "crashed" in (after["error_message"] or "")
    assert sorted({row["step"]: row["loss"] for row in after["metric_rows"]}.items()) == [
        (1, 1.0),
        (2, 0.5),
        (3, pytest.approx(1 / 3)),
    ]
    assert sorted(entry["step"] for entry in platform.inspect.steps(run_id)) == [1, 2, 3]
    assert all(platform.inspect.step_rows(run_id, step)["total"] == 2 for step in (1, 2, 3))
    assert len(status_writes(platform, run_id)) == 1

    seen = last_seq(platform)
    second = sync(folder, platform)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "nothing new" in second.stdout and "closed it" not in second.stdout
    assert requests_after(platform, seen) == []
    assert len(status_writes(platform, run_id)) == 1


def sink_ledger(folder: Path, spool: str, sink: str) -> dict[str, Any]:
    """What the spool's ledger on disk says of ``sink``: what a crash of the producer now would leave."""
    try:
        document = json.loads((folder / spool / "ledger.json").read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return dict(document.get("sinks", {}).get(sink, {}))


def in_flight(folder: Path, sink: str) -> int:
    """How many records of ``sink`` the ledger on disk has in flight (a crash now reports them possibly missing)."""
    return sum(stop - start for start, stop in sink_ledger(folder, "spool-records", sink).get("inflight", []))


@pytest.mark.parametrize(
    "episodes",
    [
        "[training_episode(step, index) for step in (1, 2, 3) for index in range(2)]",
        "[training_episode(step, index) for index in range(2) for step in (3, 1, 2)]",
    ],
    ids=["logged in step order", "steps interleaved"],
)
def test_steps_queued_behind_the_one_in_flight_when_the_producer_died_are_sent(
    sync: Sync, platform: LocalPlatform, producer: Producer, episodes: str
) -> None:
    """One batch holds steps 1 to 3; the producer dies during step 1's confirm. Sync confirms step 1's object
    again by the key the spool recorded (registered once, however the hung confirm ends) and uploads no second
    object for it; steps 2 and 3 were never attempted: sync sends those two, once each."""
    platform.inspect.add_fault(
        method="POST", path="/api/v1/rft/samples/confirm", action="delay", delay_s=HANG_SECONDS, times=None
    )
    running, run_id, folder = start_training(
        producer,
        f"""
run.log_episodes({episodes})
say("LOGGED")
sys.stdin.readline()
""",
        "queued-steps",
    )
    running.wait_for("LOGGED")
    wait_for(lambda: in_flight(folder, "rft_samples") == 2, "step 1's confirm")
    kill(running)
    platform.inspect.clear_faults()

    result = sync(folder, platform)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "rft_samples 4;" in result.stdout, result.stdout
    assert "may be missing" not in result.stdout, result.stdout
    assert "2 records in flight when the producer died were found stored" in result.stdout, result.stdout
    # The hung confirm may still be applied by the server after its client died: confirming the key a second
    # time registers nothing more, so every step keeps its rows once, in one object.
    wait_for_hung_confirms(platform, run_id, 1)
    assert [(entry["step"], entry["num_rows"], len(entry["objects"])) for entry in platform.inspect.steps(run_id)] == [
        (1, 2, 1),
        (2, 2, 1),
        (3, 2, 1),
    ]


def wait_for_hung_confirms(platform: LocalPlatform, run_id: str, count: int) -> None:
    """Until the platform handled the ``count`` confirms a delay fault hung (or long after it would have)."""
    settled_by = time.monotonic() + HANG_SECONDS + 2

    def handled() -> int:
        requests = platform.inspect.requests(limit=1000, run_id=run_id)
        return sum(1 for r in requests if r.get("fault") and r["path"].endswith("/rft/samples/confirm"))

    wait_for(lambda: handled() >= count or time.monotonic() > settled_by, "the hung confirm to be handled")


def test_a_step_whose_confirm_failed_ambiguously_stays_in_flight_behind_the_next_one(
    sync: Sync, platform: LocalPlatform, producer: Producer
) -> None:
    """Step 1's confirm answers 502 on every attempt (it may be registered); the producer dies during step 2's.
    Sync confirms both objects again by their recorded keys instead of uploading them a second time (which would
    double their rows); step 3 is sent, and every step ends up with its rows once."""
    confirm = "/api/v1/rft/samples/confirm"
    platform.inspect.add_fault(
        method="POST", path=confirm, action="fail_after", status=502, retry_after=0, times=MAX_ATTEMPTS
    )
    platform.inspect.add_fault(method="POST", path=confirm, action="delay", delay_s=HANG_SECONDS, times=None)
    running, run_id, folder = start_training(
        producer,
        """
run.log_episodes([training_episode(step, index) for step in (1, 2, 3) for index in range(2)])
say("LOGGED")
sys.stdin.readline()
""",
        "ambiguous-step",
    )
    running.wait_for("LOGGED")
    wait_for(lambda: in_flight(folder, "rft_samples") == 4, "step 2's confirm behind step 1's")
    kill(running)
    platform.inspect.clear_faults()

    result = sync(folder, platform)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "rft_samples 2;" in result.stdout, result.stdout
    assert "may be missing" not in result.stdout, result.stdout
    assert "4 records in flight when the producer died were found stored" in result.stdout, result.stdout
    wait_for_hung_confirms(platform, run_id, MAX_ATTEMPTS + 1)
    assert [(entry["step"], entry["num_rows"], len(entry["objects"])) for entry in platform.inspect.steps(run_id)] == [
        (1, 2, 1),
        (2, 2, 1),
        (3, 2, 1),
    ]


EVAL_PRELUDE = """
ANSWER_CHARS = 9 * 2**19  # its v0 row holds the answer about three times: over half of a sample request (25 MiB)


def large_episodes(count):
    \"\"\"Fixture episodes each too large to share a sample request with another: one POST per episode.\"\"\"
    made = episodes(count)
    for number, record in enumerate(made):
        answer = next(node for node in record["traces"][0]["nodes"] if node["message"]["role"] == "assistant")
        answer["message"]["content"] = f"episode-{number} " + "x" * ANSWER_CHARS
    return made


run = po.init(name="packed-eval", environments=["gsm8k"], model="m")
announce(run)
"""


def test_sample_rows_packed_behind_the_post_in_flight_when_the_producer_died_land_once(
    sync: Sync, platform: LocalPlatform, producer: Producer
) -> None:
    """One batch of three episodes goes to the sample table in three POSTs; the producer dies during the second,
    which the server is still working on when the sync starts (or never got whole: the kill may cut its body
    short). The first is stored and the third was never sent: the sync waits until the second request is old
    enough for the server to be done with it, then finds its rows stored (and does not send them again) or absent
    (and sends them), and sends the third. Every episode's rows end up in the table once."""
    samples_path = "/api/v1/evaluations/*/samples"
    platform.inspect.add_fault(method="POST", path=samples_path, action="delay", delay_s=0, times=1)
    platform.inspect.add_fault(method="POST", path=samples_path, action="delay", delay_s=APPLYING_SECONDS, times=None)
    runs = producer.workdir / "runs"
    running = producer.start(
        EVAL_PRELUDE
        + """
run.log_episodes(large_episodes(3))
say("LOGGED")
sys.stdin.readline()
""",
        PRIME_RUNS_DIR=str(runs),
    )
    run_id = str(running.wait_for("RUN"))
    folder = runs / run_id
    running.wait_for("LOGGED")

    def second_post_in_flight() -> bool:
        return sink_ledger(folder, "spool-records", "eval_samples").get("delivered") == 1 and bool(
            in_flight(folder, "eval_samples")
        )

    wait_for(second_post_in_flight, "the second sample POST in flight")
    kill(running)
    platform.inspect.clear_faults()

    result = sync(folder, platform)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "may be missing" not in result.stdout, result.stdout
    found_stored = "1 records in flight when the producer died were found stored (eval_samples 1)" in result.stdout
    assert f"eval_samples {1 if found_stored else 2};" in result.stdout, result.stdout
    rows = platform.inspect.samples(run_id, limit=10)["items"]
    stored = sorted(str(row["completion"])[:400].split("episode-")[1].split(" ")[0] for row in rows)
    assert stored == ["0", "1", "2"]


def test_a_spool_is_delivered_to_the_platform_its_run_folder_names_and_nowhere_else(
    sync: Sync, platform: LocalPlatform, elsewhere: LocalPlatform, producer: Producer
) -> None:
    """The run lives on one platform; the sync's environment points at another. Every request (platform
    calls, Prime Traces, the printed link) follows the run folder, and the other platform gets nothing."""
    platform.inspect.add_fault(method="POST", path="/api/v1/traces", action="delay", delay_s=HANG_SECONDS, times=None)
    running, run_id, folder = start_training(
        producer,
        """
run.log_episodes([training_episode(1, index) for index in range(2)])
say("LOGGED")
sys.stdin.readline()
""",
        "recorded-destination",
    )
    running.wait_for("LOGGED")
    wait_for(lambda: spooled_lines(folder, "spool-records") == 2, "the two episodes in the spool")
    kill(running)
    platform.inspect.clear_faults()
    seen_elsewhere = last_seq(elsewhere)

    result = sync(folder, elsewhere)

    assert result.returncode == 0, result.stdout + result.stderr
    assert requests_after(elsewhere, seen_elsewhere) == []
    uploads = [r for r in platform.inspect.requests(limit=1000, run_id=run_id) if r["path"] == "/api/v1/traces"]
    assert uploads and all(r["status"] == 200 for r in uploads)
    assert platform.inspect.run(run_id)["num_episodes"] == 2
    assert "(None)" not in result.stdout and f"({platform.url}/" in result.stdout


@pytest.mark.parametrize(
    ("made_at", "sync_env", "flags_to", "expected"),
    [
        ("home", "elsewhere", None, "home"),  # the run folder beats the sync's environment
        ("home", "home", "elsewhere", "elsewhere"),  # explicit flags beat the run folder
        (None, "elsewhere", None, "elsewhere"),  # a folder made with nothing chosen follows the sync's environment
    ],
    ids=["run folder over environment", "flags over run folder", "environment when nothing was chosen"],
)
def test_an_offline_run_goes_to_the_platform_chosen_for_it(
    sync: Sync,
    platform: LocalPlatform,
    elsewhere: LocalPlatform,
    runs_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    made_at: str | None,
    sync_env: str,
    flags_to: str | None,
    expected: str,
) -> None:
    platforms = {"home": platform, "elsewhere": elsewhere}
    if made_at is not None:
        point_at(platforms[made_at], monkeypatch)
    name = f"offline-{made_at}-{sync_env}-{flags_to}"
    run = po.init(mode="offline", name=name, environments=["gsm8k"], model="m")
    run.log_episodes(load_episodes("eval"))
    run.finish()
    recorded = json.loads(Path(run.folder or "", "run.json").read_text())
    assert ("base_url" in recorded) is (made_at is not None)
    flags: tuple[str, ...] = ()
    if flags_to is not None:
        url = platforms[flags_to].url
        flags = ("--base-url", url, "--traces-url", url, "--frontend-url", url)
    chosen, other = platforms[expected], platforms["home" if expected == "elsewhere" else "elsewhere"]
    seen_other = last_seq(other)

    result = sync(Path(run.folder or ""), platforms[sync_env], *flags)

    assert result.returncode == 0, result.stdout + result.stderr
    assert requests_after(other, seen_other) == []
    synced = [r for r in chosen.inspect.runs() if r["name"] == name]
    assert len(synced) == 1 and synced[0]["num_samples"] == 3 and synced[0]["num_episodes"] == 3
    assert "(None)" not in result.stdout and f"({chosen.url}/" in result.stdout


def _offline_eval_folder(platform: LocalPlatform, monkeypatch: pytest.MonkeyPatch, name: str) -> Path:
    point_at(platform, monkeypatch)
    run = po.init(mode="offline", name=name, environments=["gsm8k"], model="m")
    run.log_episodes(load_episodes("eval"))
    run.finish(summary={"avg_reward": 0.5})
    return Path(run.folder or "")


def _without(field: str) -> Callable[[str], str]:
    def damage(text: str) -> str:
        document = json.loads(text)
        del document[field]
        return json.dumps(document)

    return damage


def _with(field: str, value: Any) -> Callable[[str], str]:
    def damage(text: str) -> str:
        return json.dumps({**json.loads(text), field: value})

    return damage


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (_without("kind"), "field 'kind' is missing"),
        (_without("status"), "field 'status' is missing"),
        (lambda text: text[: len(text) // 2], "is not valid JSON (line"),
        (_with("status", "exploded"), "field 'status' must be one of"),
        (_with("environments", "gsm8k"), "field 'environments' must be a list"),
        (_with("base_url", 42), "field 'base_url' must be a string"),
    ],
    ids=["missing kind", "missing status", "truncated", "unknown status", "environments not a list", "bad url"],
)
def test_a_damaged_run_json_is_one_clear_error_before_anything_is_registered(
    sync: Sync,
    platform: LocalPlatform,
    runs_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    damage: Callable[[str], str],
    expected: str,
) -> None:
    folder = _offline_eval_folder(platform, monkeypatch, "damaged")
    run_file = folder / "run.json"
    run_file.write_text(damage(run_file.read_text()))
    seen = last_seq(platform)

    result = sync(folder, platform)

    assert result.returncode == 1
    message = result.stderr.strip()
    assert "\n" not in message and "Traceback" not in message, message
    assert str(run_file) in message and expected in message, message
    assert requests_after(platform, seen) == []


def test_a_garbage_line_costs_only_itself_and_is_reported_with_its_line_number(
    sync: Sync, platform: LocalPlatform, runs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _offline_eval_folder(platform, monkeypatch, "garbage-lines")
    for name, garbage in (("episodes.jsonl", b'{"id": "torn\n'), ("samples.jsonl", b"[1, 2, 3]\n")):
        lines = (folder / name).read_bytes().splitlines(keepends=True)
        (folder / name).write_bytes(b"".join([lines[0], garbage, *lines[1:]]))

    first = sync(folder, platform)

    assert first.returncode == 2, first.stdout + first.stderr
    assert "2 unreadable lines skipped" in first.stdout
    assert "skipped episodes.jsonl line 2: not JSON" in first.stdout
    assert "skipped samples.jsonl line 2: not a JSON object" in first.stdout
    run_id = next(r["id"] for r in platform.inspect.runs() if r["name"] == "garbage-lines")
    snapshot = platform.inspect.run(run_id)
    assert snapshot["status"] in ("PROCESSING", "COMPLETED") and snapshot["num_episodes"] == 3
    assert platform.inspect.samples(run_id)["items"] == load_json("eval", "samples.json")["samples"]

    seen = last_seq(platform)
    second = sync(folder, platform)
    assert second.returncode == 2 and "nothing new" in second.stdout and "samples.jsonl line 2" in second.stdout
    assert requests_after(platform, seen) == []


def test_a_run_whose_producer_is_still_running_is_left_alone(
    sync: Sync, platform: LocalPlatform, producer: Producer
) -> None:
    """Closing a live run as crashed, or replaying a spool its producer is still replaying, would be a lie."""
    runs = producer.workdir / "runs"
    running = producer.start(
        """
run = po.init(mode="offline", name="still-running", environments=["gsm8k"], model="m")
announce(run)
run.log_episodes(episodes(2))
say("LOGGED")
sys.stdin.readline()
run.finish()
""",
        PRIME_RUNS_DIR=str(runs),
    )
    folder = runs / str(running.wait_for("RUN"))
    running.wait_for("LOGGED")
    seen = last_seq(platform)

    alive = sync(folder, platform)

    assert alive.returncode == 1 and "still being written by its producer (process" in alive.stderr, alive.stderr
    assert requests_after(platform, seen) == []
    running.tell()
    assert running.finish().returncode == 0
    ended = sync(folder, platform)
    assert ended.returncode == 0, ended.stdout + ended.stderr
    assert "closed it as completed" in ended.stdout


def test_a_killed_offline_run_is_closed_as_crashed_once(
    sync: Sync, platform: LocalPlatform, producer: Producer
) -> None:
    runs = producer.workdir / "runs"
    running = producer.start(
        """
run = po.init(mode="offline", name="killed-offline", environments=["gsm8k"], model="m")
announce(run)
run.log_episodes(episodes(2))
say("LOGGED")
sys.stdin.readline()
""",
        PRIME_RUNS_DIR=str(runs),
    )
    folder = runs / str(running.wait_for("RUN"))
    running.wait_for("LOGGED")
    kill(running)

    first = sync(folder, platform)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "closed it as crashed" in first.stdout and "(None)" not in first.stdout
    run_id = next(r["id"] for r in platform.inspect.runs() if r["name"] == "killed-offline")
    snapshot = platform.inspect.run(run_id)
    assert snapshot["status"] == "FAILED" and snapshot["num_episodes"] == 2

    seen = last_seq(platform)
    second = sync(folder, platform)
    assert second.returncode == 0 and "closed it" not in second.stdout
    assert requests_after(platform, seen) == []


def test_a_spooled_record_the_platform_refuses_during_a_sync_is_counted_and_named_not_dropped_silently(
    sync: Sync, platform: LocalPlatform, runs_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Prime Traces was down for the whole run; by the time of the sync it refuses one of the spooled episodes
    for good (over its line limit). The sync delivers the others, says which sink refused how many records and
    why, and exits 2 (something is not on the platform)."""
    point_at(platform, monkeypatch)
    platform.inspect.add_fault(method="POST", path="/api/v1/traces", action="fail_before", status=503, times=None)
    records = fresh_records("eval", 3)
    records[1]["task"]["data"]["padding"] = "x" * 40_000
    try:
        run = po.init(environments=["gsm8k"], model="m")
        run.log_episodes(records)
        run.finish(timeout=2)
        platform.inspect.clear_faults()
        platform.inspect.settings(traces_max_line_bytes=20_000)

        result = sync(runs_dir / run.id, platform)
    finally:
        platform.reset()

    assert result.returncode == 2, result.stdout + result.stderr
    landed = {episode["id"] for episode in platform.inspect.episodes(run.id)["items"]}
    assert landed == {records[0]["id"], records[2]["id"]}
    assert "the traces sink refused 1 records for good (rejected by the platform: 400" in result.stdout
