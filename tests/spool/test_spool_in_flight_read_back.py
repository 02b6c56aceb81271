"""A samples POST in flight when an online eval's producer was SIGKILLed is settled by ``prime-otel sync`` from the
rows the evaluation stored, the way an offline sync settles its own: proven stored counts as delivered and is not
sent again, proven absent (two reads a settle apart) is sent once, and only what no read can decide stays possibly
missing, with the reason. Every row keeps the rollout number a run without the kill gives it.

The producer is a real subprocess logging three batches of three episodes (three examples, one rollout each per
batch); the second batch's POST is held by the local platform (applied or refused) while the third batch waits in
the spool behind it, and the producer is killed then. A sync runs the ``prime-otel`` command's entry point.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import prime_otel as po
from prime_otel.testing import LocalPlatform, start_local_platform
from tests._fixtures import numbered_record
from tests._platform import isolate_sdk
from tests._waiting import wait_for
from tests.lifecycle._producer import Producer, Running
from tests.spool._ledger import in_flight, spooled_lines, sync

WAIT_SECONDS = 60.0
HOLD_SECONDS = 60.0  # the held answer outlasts the test: the producer dies waiting for it
SAMPLES = "/api/v1/evaluations/*/samples"
BATCHES, PER_BATCH = 3, 3
DEFAULT_SAMPLES_MAX_BYTES = 25 * 1024 * 1024

PRODUCER = f"""
from tests._fixtures import numbered_record

run = po.init(name="held-samples", environments=["gsm8k"], model="m")
announce(run)
for batch in range({BATCHES}):
    sys.stdin.readline()
    first = batch * {PER_BATCH}
    run.log_episodes([numbered_record(index, os.environ["TAG"]) for index in range(first, first + {PER_BATCH})])
    say("LOGGED", batch)
sys.stdin.readline()
"""


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlatform]:
    with start_local_platform(
        tmp_path_factory.mktemp("in-flight-platform"), processing_delay=0.1, samples_rate_limit=1_000_000
    ) as server:
        yield server


@pytest.fixture
def producer(platform: LocalPlatform, tmp_path: Path) -> Iterator[Producer]:
    yield Producer(platform, tmp_path)
    platform.inspect.clear_faults()
    platform.inspect.settings(samples_max_bytes=DEFAULT_SAMPLES_MAX_BYTES)


@pytest.fixture
def in_process(platform: LocalPlatform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's runs and syncs write under the test's directory and talk to ``platform`` only."""
    isolate_sdk(platform, monkeypatch, tmp_path / "home", tmp_path / "in-process-runs")


def sample_posts(platform: LocalPlatform, run_id: str) -> list[dict[str, Any]]:
    return [
        r
        for r in platform.inspect.requests(limit=10_000, run_id=run_id)
        if r["method"] == "POST" and r["path"].endswith("/samples")
    ]


def held_post(platform: LocalPlatform, run_id: str) -> dict[str, Any] | None:
    """The run's samples POST whose answer the platform holds (recorded once it was handled)."""
    return next(
        (
            r
            for r in platform.inspect.requests(limit=50)
            if r.get("fault") and r["method"] == "POST" and run_id in r["path"] and r["path"].endswith("/samples")
        ),
        None,
    )


def stored_keys(platform: LocalPlatform, run_id: str) -> list[tuple[str, int]]:
    rows = platform.inspect.samples(run_id, limit=1000)["items"]
    return sorted((str(row["sample_id"]), int(row["rollout_number"])) for row in rows)


def clean_run_keys(platform: LocalPlatform, tag: str) -> list[tuple[str, int]]:
    """What a run of the same batches stores when nothing goes wrong."""
    run = po.init(name="clean", environments=["gsm8k"], model="m")
    for batch in range(BATCHES):
        run.log_episodes([numbered_record(index, tag) for index in range(batch * PER_BATCH, (batch + 1) * PER_BATCH)])
    report = run.finish()
    assert report is not None and report.complete, report.render() if report else None
    return stored_keys(platform, run.id)


def kill_with_second_batch_held(
    platform: LocalPlatform, producer: Producer, tag: str, *, before_second: Callable[[], None]
) -> tuple[str, Path]:
    """Batch 1 is delivered; ``before_second`` sets up how the platform holds batch 2's POST; batch 3 is logged
    while that POST waits for its answer; then the producer is SIGKILLed."""
    runs = producer.workdir / "runs"
    running: Running = producer.start(PRODUCER, PRIME_RUNS_DIR=str(runs), TAG=tag)
    run_id = str(running.wait_for("RUN"))
    folder = runs / run_id
    running.tell()
    wait_for(lambda: platform.inspect.samples(run_id)["total"] == PER_BATCH, "the first batch's rows")
    before_second()
    running.tell()
    wait_for(
        lambda: held_post(platform, run_id) is not None and in_flight(folder, "eval_samples") == PER_BATCH,
        "the second batch's POST held, its records marked in flight",
    )
    running.tell()
    wait_for(lambda: spooled_lines(folder) == BATCHES * PER_BATCH, "the third batch in the spool")
    running.send_signal(signal.SIGKILL)
    outcome = running.finish()
    assert outcome.returncode == -signal.SIGKILL, outcome.describe()
    return run_id, folder


def hold_applied(platform: LocalPlatform) -> Callable[[], None]:
    def arm() -> None:
        platform.inspect.add_fault(method="POST", path=SAMPLES, action="hold_after", delay_s=HOLD_SECONDS)

    return arm


def hold_refused(platform: LocalPlatform) -> Callable[[], None]:
    """The POST is refused before anything is stored (its body exceeds the table's cap) and the answer is held."""

    def arm() -> None:
        platform.inspect.settings(samples_max_bytes=1)
        platform.inspect.add_fault(method="POST", path=SAMPLES, action="hold_after", delay_s=HOLD_SECONDS)

    return arm


def test_a_post_applied_before_the_kill_is_found_stored_and_every_row_keeps_its_rollout_number(
    platform: LocalPlatform, producer: Producer, in_process: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """The held POST was applied: sync reads its rows back, counts them delivered and does not send them again; the
    third batch is sent once, numbered after the rollouts already stored. The table ends up as a run without the
    kill leaves it."""
    run_id, folder = kill_with_second_batch_held(platform, producer, "applied-", before_second=hold_applied(platform))
    platform.inspect.clear_faults()
    posts_before = len(sample_posts(platform, run_id))

    returncode, output = sync(folder, capsys)

    assert returncode == 0, output
    assert "may be missing" not in output, output
    assert f"{PER_BATCH} records in flight when the producer died were found stored" in output, output
    assert len(sample_posts(platform, run_id)) == posts_before + 1  # the third batch, once
    assert stored_keys(platform, run_id) == clean_run_keys(platform, "applied-")
    assert not (folder / "spool-records").exists()  # everything delivered: nothing left for another sync


def test_a_post_refused_before_the_kill_is_sent_once_by_sync_with_the_numbers_it_had(
    platform: LocalPlatform, producer: Producer, in_process: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """The held POST stored nothing: two reads a settle apart find none of its rows, so sync sends them once (with
    the third batch), under the rollout numbers the producer gave them."""
    run_id, folder = kill_with_second_batch_held(platform, producer, "refused-", before_second=hold_refused(platform))
    platform.inspect.clear_faults()
    platform.inspect.settings(samples_max_bytes=DEFAULT_SAMPLES_MAX_BYTES)
    assert platform.inspect.samples(run_id)["total"] == PER_BATCH

    returncode, output = sync(folder, capsys)

    assert returncode == 0, output
    assert "may be missing" not in output and "found stored" not in output, output
    assert f"eval_samples {2 * PER_BATCH}" in output, output
    assert stored_keys(platform, run_id) == clean_run_keys(platform, "refused-")


def test_rows_in_flight_that_no_read_can_decide_stay_possibly_missing_with_the_reason_and_are_not_resent(
    platform: LocalPlatform, producer: Producer, in_process: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """The sample table cannot be read during the sync: the held batch is reported possibly missing, saying why,
    and never sent again; the third batch is sent, numbered after the rollouts the producer gave out."""
    run_id, folder = kill_with_second_batch_held(platform, producer, "unread-", before_second=hold_applied(platform))
    platform.inspect.clear_faults()
    platform.inspect.add_fault(method="GET", path=SAMPLES, action="fail_before", status=503, retry_after=0, times=None)

    returncode, output = sync(folder, capsys)
    platform.inspect.clear_faults()

    assert returncode == 2, output
    assert f"{PER_BATCH} records may be missing" in output, output
    assert "the sample table could not be read (platform error: 503)" in output, output
    sent = [post["body"]["samples"] for post in sample_posts(platform, run_id)]
    resent = [row["sample_id"] for body in sent[2:] for row in body]
    assert sorted(resent) == [f"unread-ep{index:08d}" for index in range(2 * PER_BATCH, 3 * PER_BATCH)]
    # Stored as a run without the kill stores them: the held POST was applied, and the third batch continues the
    # numbering after it.
    assert stored_keys(platform, run_id) == clean_run_keys(platform, "unread-")

    again, output = sync(folder, capsys)
    assert again == 2 and f"{PER_BATCH} records may be missing" in output and "could not be read" in output, output
    assert len(sample_posts(platform, run_id)) == len(sent)
