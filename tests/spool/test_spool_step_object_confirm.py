"""A training step object whose confirm was in flight when an online run's producer was SIGKILLed is settled by
``prime-otel sync`` by confirming the object's key again, the key the live run wrote to its spool before the
confirm went out: confirming a key twice registers it once, so the step's rows end up on the platform once, in
one object, and no second object is uploaded for them. A key the platform refuses was never registered: its rows
go out anew, once, as a fresh object. A confirm no answer can settle leaves the rows possibly missing, with the
reason, never sent again.

The producer is a real subprocess logging three training steps of three episodes each (one object per step); the
second step's upload is held by the local platform while the third step waits in the spool behind it, and the
producer is killed then. A sync runs the ``prime-otel`` command's entry point.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from prime_otel.exporters.rft_samples import SAMPLE_ID_RANGE
from prime_otel.testing import LocalPlatform, start_local_platform
from tests._platform import isolate_sdk
from tests._waiting import wait_for
from tests.lifecycle._producer import Producer, Running
from tests.spool._ledger import in_flight, spooled_lines, sync

WAIT_SECONDS = 60.0
HOLD_SECONDS = 60.0  # the held answer (or the retry wait) outlasts the test: the producer dies waiting
TEAM = "team_step_objects"
CONFIRM = "/api/v1/rft/samples/confirm"
OBJECTS = "/_objects/*"
STEPS, PER_STEP = 3, 3

PRODUCER = f"""
import copy
from tests._fixtures import load_records

fixtures = load_records("train")


logged = {{}}


def step_episodes(step):
    # The next {PER_STEP} episodes of the step: a step logged again gets new ones.
    made = []
    first = logged.get(step, 0)
    logged[step] = first + {PER_STEP}
    for index in range(first, first + {PER_STEP}):
        record = copy.deepcopy(fixtures[index % len(fixtures)])
        record["id"] = f"{{os.environ['TAG']}}ep{{step:03d}}{{index:03d}}"
        for position, trace in enumerate(record["traces"]):
            trace["id"] = f"{{os.environ['TAG']}}tr{{step:03d}}{{index:03d}}{{position}}"
        record["run"]["work"]["step"] = step
        made.append(record)
    return made


run = po.init(kind="train", name="held-step", model="m", environments=["gsm8k"], samples_step_interval=1)
announce(run)
for step in json.loads(os.environ.get("STEPS_LOGGED", "[1, 2, 3]")):
    sys.stdin.readline()
    run.log_episodes(step_episodes(step))
    say("LOGGED", step)
sys.stdin.readline()
"""


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlatform]:
    with start_local_platform(tmp_path_factory.mktemp("step-object-platform"), teams=[TEAM]) as server:
        yield server


@pytest.fixture
def producer(platform: LocalPlatform, tmp_path: Path) -> Iterator[Producer]:
    yield Producer(platform, tmp_path)
    platform.inspect.clear_faults()


@pytest.fixture
def in_process(platform: LocalPlatform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's syncs write under the test's directory and talk to ``platform`` only."""
    isolate_sdk(platform, monkeypatch, tmp_path / "home", tmp_path / "in-process-runs", team=TEAM)


def faulted(platform: LocalPlatform, method: str, path_part: str) -> bool:
    """Whether a request of ``method`` to a path containing ``path_part`` met a fault (recorded once handled)."""
    return any(
        r.get("fault") and r["method"] == method and path_part in r["path"] for r in platform.inspect.requests(limit=50)
    )


def object_puts(platform: LocalPlatform, run_id: str) -> int:
    return sum(
        1
        for r in platform.inspect.requests(limit=10_000)
        if r["method"] == "PUT" and r["path"].startswith(f"/_objects/rft-samples/{run_id}/")
    )


def stored(platform: LocalPlatform, run_id: str) -> dict[int, tuple[int, list[str]]]:
    """Per step with a confirmed object: how many objects, and the episode ids of its rows (sorted)."""
    out: dict[int, tuple[int, list[str]]] = {}
    for entry in platform.inspect.steps(run_id):
        rows = platform.inspect.step_rows(run_id, entry["step"])["items"]
        ids = sorted(json.loads(row["info"])["native_wrapper"]["id"] for row in rows)
        sample_ids = [(row["sample_id"]) for row in rows]
        assert len(set(sample_ids)) == len(sample_ids), f"step {entry['step']}: a sample id twice"
        out[entry["step"]] = (len(entry["objects"]), ids)
    return out


def every_step_once(tag: str, steps: int = STEPS) -> dict[int, tuple[int, list[str]]]:
    return {step: (1, [f"{tag}ep{step:03d}{index:03d}" for index in range(PER_STEP)]) for step in range(1, steps + 1)}


def kill_with_second_step_held(
    platform: LocalPlatform,
    producer: Producer,
    tag: str,
    *,
    hold: Callable[[], None],
    held: Callable[[Path], bool],
    third_step: bool = True,
    steps_logged: str = "[1, 2, 3]",
) -> tuple[str, Path]:
    """Step 1 is delivered; ``hold`` sets up how the platform holds step 2's upload and ``held(folder)`` says it is
    held; step 3 is logged (when ``third_step``) while step 2 waits; then the producer is SIGKILLed."""
    runs = producer.workdir / "runs"
    running: Running = producer.start(
        PRODUCER, PRIME_RUNS_DIR=str(runs), PRIME_TEAM_ID=TEAM, TAG=tag, STEPS_LOGGED=steps_logged
    )
    run_id = str(running.wait_for("RUN"))
    folder = runs / run_id
    running.tell()
    wait_for(lambda: [entry["step"] for entry in platform.inspect.steps(run_id)] == [1], "step 1's object")
    hold()
    running.tell()
    wait_for(lambda: held(folder), "step 2's upload held")
    if third_step:
        running.tell()
        wait_for(lambda: spooled_lines(folder) == STEPS * PER_STEP, "step 3 in the spool")
    running.send_signal(signal.SIGKILL)
    outcome = running.finish()
    assert outcome.returncode == -signal.SIGKILL, outcome.describe()
    platform.inspect.clear_faults()
    return run_id, folder


def hold_confirm_applied(platform: LocalPlatform) -> Callable[[], None]:
    """Step 2's confirm is applied (the object registered) and its answer held."""
    return lambda: platform.inspect.add_fault(method="POST", path=CONFIRM, action="hold_after", delay_s=HOLD_SECONDS)


def confirm_unapplied(platform: LocalPlatform) -> Callable[[], None]:
    """Step 2's confirm is answered 503 without being applied, and the producer waits a minute to retry it."""
    return lambda: platform.inspect.add_fault(
        method="POST", path=CONFIRM, action="fail_before", status=503, retry_after=HOLD_SECONDS, times=None
    )


def confirm_in_flight(platform: LocalPlatform) -> Callable[[Path], bool]:
    return lambda folder: faulted(platform, "POST", CONFIRM) and in_flight(folder, "rft_samples") == PER_STEP


def test_a_confirm_applied_before_the_kill_is_confirmed_again_and_the_step_is_stored_once(
    platform: LocalPlatform, producer: Producer, in_process: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """Step 2's confirm was applied and its answer never came: sync confirms the same key again, counts its records
    delivered and uploads no second object for them; step 3 is sent once. Every step holds its rows once, in one
    object, and the run is closed."""
    run_id, folder = kill_with_second_step_held(
        platform, producer, "applied-", hold=hold_confirm_applied(platform), held=confirm_in_flight(platform)
    )
    puts_before = object_puts(platform, run_id)

    returncode, output = sync(folder, capsys)

    assert returncode == 0, output
    assert "may be missing" not in output, output
    assert f"{PER_STEP} records in flight when the producer died were found stored" in output, output
    assert object_puts(platform, run_id) == puts_before + 1  # step 3's object, once
    assert stored(platform, run_id) == every_step_once("applied-")
    assert platform.inspect.run(run_id)["status"] != "RUNNING"
    assert not (folder / "spool-records").exists()  # everything delivered: nothing left for another sync


def test_a_put_applied_but_unanswered_leaves_no_key_to_confirm_and_the_step_is_sent_once_by_sync(
    platform: LocalPlatform, producer: Producer, in_process: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """Step 2's object was stored but the producer died before its confirm went out: nothing is in flight, the
    stored object stays unregistered (invisible), and sync uploads the step as a fresh object, once."""
    run_id, folder = kill_with_second_step_held(
        platform,
        producer,
        "put-",
        hold=lambda: platform.inspect.add_fault(method="PUT", path=OBJECTS, action="hold_after", delay_s=HOLD_SECONDS),
        held=lambda _: faulted(platform, "PUT", "/_objects/"),
    )
    assert in_flight(folder, "rft_samples") == 0
    puts_before = object_puts(platform, run_id)

    returncode, output = sync(folder, capsys)

    assert returncode == 0, output
    assert "may be missing" not in output and "found stored" not in output, output
    assert object_puts(platform, run_id) == puts_before + 2  # steps 2 and 3
    assert stored(platform, run_id) == every_step_once("put-")


def test_a_confirm_the_platform_never_applied_is_confirmed_by_sync_without_a_second_object(
    platform: LocalPlatform, producer: Producer, in_process: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """Step 2's confirm was answered 503 and the producer died waiting to retry it: sync confirms the recorded key
    (the object is already uploaded) instead of uploading the step again."""
    run_id, folder = kill_with_second_step_held(
        platform, producer, "unapplied-", hold=confirm_unapplied(platform), held=confirm_in_flight(platform)
    )
    assert [entry["step"] for entry in platform.inspect.steps(run_id)] == [1]
    puts_before = object_puts(platform, run_id)

    returncode, output = sync(folder, capsys)

    assert returncode == 0, output
    assert f"{PER_STEP} records in flight when the producer died were found stored" in output, output
    assert object_puts(platform, run_id) == puts_before + 1  # step 3's object only
    assert stored(platform, run_id) == every_step_once("unapplied-")


def test_a_key_the_platform_refuses_was_never_registered_and_its_records_go_out_once_as_a_fresh_object(
    platform: LocalPlatform, producer: Producer, in_process: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """Step 2's confirm never took effect and the platform refuses its key when sync confirms it again (as it
    refuses a key it does not know): the records are uploaded anew as one fresh object, numbered in a sample id
    range after the one the refused object used, and every step holds its rows once."""
    run_id, folder = kill_with_second_step_held(
        platform, producer, "refused-", hold=confirm_unapplied(platform), held=confirm_in_flight(platform)
    )
    platform.inspect.add_fault(method="POST", path=CONFIRM, action="fail_before", status=400, message="Unknown key")
    puts_before = object_puts(platform, run_id)

    returncode, output = sync(folder, capsys)

    assert returncode == 0, output
    assert "may be missing" not in output and "found stored" not in output, output
    assert object_puts(platform, run_id) == puts_before + 2  # step 2 anew, and step 3
    assert stored(platform, run_id) == every_step_once("refused-")
    step_two = platform.inspect.step_rows(run_id, 2)["items"]
    assert all(int(row["sample_id"]) >= SAMPLE_ID_RANGE for row in step_two), step_two


def test_a_confirm_no_answer_settles_leaves_the_step_possibly_missing_with_the_reason_and_never_resends_it(
    platform: LocalPlatform, producer: Producer, in_process: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """Step 2's confirm was applied, and every confirm during the sync fails with a 503: sync cannot tell, so the
    records are reported possibly missing, saying why, and no second object is uploaded, by this sync or the next."""
    run_id, folder = kill_with_second_step_held(
        platform,
        producer,
        "unknown-",
        hold=hold_confirm_applied(platform),
        held=confirm_in_flight(platform),
        third_step=False,
    )
    platform.inspect.add_fault(method="POST", path=CONFIRM, action="fail_before", status=503, retry_after=0, times=None)
    puts_before = object_puts(platform, run_id)

    returncode, output = sync(folder, capsys)

    assert returncode == 2, output
    assert f"{PER_STEP} records may be missing" in output, output
    assert "could not be confirmed again (platform error: 503)" in output, output
    platform.inspect.clear_faults()
    again, output = sync(folder, capsys)
    assert again == 2 and f"{PER_STEP} records may be missing" in output, output
    assert object_puts(platform, run_id) == puts_before
    assert stored(platform, run_id) == every_step_once("unknown-", steps=2)  # the held confirm did register it


def test_a_step_logged_again_after_its_object_was_registered_gets_a_fresh_sample_id_range_from_sync(
    platform: LocalPlatform, producer: Producer, in_process: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """Step 1 is logged twice: its first object is registered, and the producer dies while the second is uploaded.
    Sync uploads the second call's episodes as a new object of step 1, numbered in a sample id range after the one
    the registered object used, so no ``(step, sample_id)`` appears twice."""
    run_id, folder = kill_with_second_step_held(
        platform,
        producer,
        "again-",
        hold=lambda: platform.inspect.add_fault(method="PUT", path=OBJECTS, action="hold_after", delay_s=HOLD_SECONDS),
        held=lambda _: faulted(platform, "PUT", "/_objects/"),
        third_step=False,
        steps_logged="[1, 1]",
    )

    returncode, output = sync(folder, capsys)

    assert returncode == 0, output
    expected = sorted(f"again-ep001{index:03d}" for index in range(2 * PER_STEP))
    assert stored(platform, run_id) == {1: (2, expected)}  # and every sample id once (``stored`` checks)
