"""How a run ends (finish, ``with``, signals, atexit, ``on_error``): each exit path leaves one status, written once.

Every producer is a real process: the context manager, atexit, signals and ``on_error`` only mean something
when the interpreter actually unwinds, exits or dies.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from prime_otel.testing import LocalPlatform

from ._producer import PlatformView, Producer

CRASHED_AT_EXIT = "crashed: process exited without finishing the run"
OPEN = 'run = po.init(environments=["gsm8k"], model="m", sinks="traces")\nannounce(run)\n'


@pytest.mark.parametrize(
    "body",
    [
        OPEN + "run.log_episodes(episodes(2))\nrun.finish()\nrun.finish()\n",
        OPEN + "with run:\n    run.log_episodes(episodes(2))\n",
        OPEN + "with run:\n    run.log_episodes(episodes(2))\n    run.finish()\n",
    ],
    ids=["finish-twice", "clean-with", "finish-inside-with"],
)
def test_a_finished_run_is_finalized_once_with_its_episodes(producer: Producer, body: str) -> None:
    """finish (or a clean ``with``) drains the episodes, then finalizes once; repeated finishes are no-ops."""
    outcome = producer.run(body)
    assert outcome.returncode == 0, outcome.describe()
    view = PlatformView(producer.platform, outcome.run_id)
    assert view.status in ("PROCESSING", "COMPLETED")
    assert len(view.finalizes) == 1 and view.status_writes == []
    assert len(view.stored_episode_ids) == 2
    assert view.snapshot["summary"]["prime_runs"]["traces_episodes_written"] == 2


def test_fail_marks_the_run_failed_with_the_described_error(producer: Producer) -> None:
    """``fail(e)`` is ``finish(FAILED, "<Type>: <msg>")``: one FAILED status write carrying that message."""
    outcome = producer.run(OPEN + 'run.log_episodes(episodes(1))\nrun.fail(ValueError("boom"))\n')
    assert outcome.returncode == 0, outcome.describe()
    view = PlatformView(producer.platform, outcome.run_id)
    assert (view.status, view.error_message) == ("FAILED", "ValueError: boom")
    view.assert_closed_once()
    assert view.status_writes[0]["body"] == {"status": "FAILED", "error_message": "ValueError: boom"}
    assert len(view.stored_episode_ids) == 1


def test_an_exception_inside_with_fails_the_run_and_still_propagates(producer: Producer) -> None:
    """The producer's exception is neither swallowed nor replaced; the run is FAILED with "<Type>: <msg>"."""
    outcome = producer.run(
        OPEN + 'with run:\n    run.log_episodes(episodes(1))\n    raise RuntimeError("kaput")\nsay("AFTER")\n'
    )
    assert outcome.returncode == 1
    assert "Traceback" in outcome.stderr and "RuntimeError: kaput" in outcome.stderr
    assert "AFTER" not in outcome.said
    view = PlatformView(producer.platform, outcome.run_id)
    assert (view.status, view.error_message) == ("FAILED", "RuntimeError: kaput")
    view.assert_closed_once()
    assert len(view.stored_episode_ids) == 1


def test_keyboard_interrupt_inside_with_cancels_the_run(producer: Producer) -> None:
    """An interrupt is a decision: CANCELLED, "interrupted", and Python still exits as interrupted."""
    outcome = producer.run(OPEN + "with run:\n    run.log_episodes(episodes(1))\n    raise KeyboardInterrupt\n")
    assert outcome.returncode == -signal.SIGINT
    assert "KeyboardInterrupt" in outcome.stderr
    view = PlatformView(producer.platform, outcome.run_id)
    assert (view.status, view.error_message) == ("CANCELLED", "interrupted")
    view.assert_closed_once()
    assert len(view.stored_episode_ids) == 1


def test_a_real_ctrl_c_inside_with_cancels_the_run(producer: Producer) -> None:
    """SIGINT is left to Python, so Ctrl-C arrives as KeyboardInterrupt inside ``with`` and cancels the run."""
    running = producer.start(
        OPEN
        + 'with run:\n    run.log_episodes(episodes(1))\n    say("READY")\n    while True:\n        time.sleep(0.02)\n'
    )
    run_id = running.wait_for("RUN")
    running.wait_for("READY")
    running.send_signal(signal.SIGINT)
    outcome = running.finish()
    assert outcome.returncode == -signal.SIGINT, outcome.describe()
    view = PlatformView(producer.platform, run_id)
    assert (view.status, view.error_message) == ("CANCELLED", "interrupted")
    view.assert_closed_once()
    assert len(view.stored_episode_ids) == 1


def test_sigterm_crashes_the_run_and_the_process_still_dies_by_sigterm(producer: Producer) -> None:
    """On SIGTERM the run closes as crashed, then the default action runs: the process ends by SIGTERM."""
    running = producer.start(OPEN + 'run.log_episodes(episodes(1))\nsay("READY")\nwhile True:\n    time.sleep(0.02)\n')
    run_id = running.wait_for("RUN")
    running.wait_for("READY")
    running.send_signal(signal.SIGTERM)
    outcome = running.finish()
    assert outcome.returncode == -signal.SIGTERM, outcome.describe()
    view = PlatformView(producer.platform, run_id)
    assert view.status == "FAILED"
    assert view.error_message is not None and view.error_message.startswith("crashed: signal SIGTERM")
    view.assert_closed_once()
    assert len(view.stored_episode_ids) == 1


def test_an_application_sigterm_handler_runs_first_and_its_exit_decides_how_the_run_ends(producer: Producer) -> None:
    """A SIGTERM handler installed before init runs first, with the run still open; the ``sys.exit(143)`` it
    raises ends the process, and the run still open at exit ends as that exit says."""
    running = producer.start(
        "def on_term(signum, frame):\n"
        '    say("HANDLER", {"signal": signum, "finished": run.finished, "status": run.status.value})\n'
        "    sys.exit(143)\n"
        "signal.signal(signal.SIGTERM, on_term)\n" + OPEN + 'say("READY")\nwhile True:\n    time.sleep(0.02)\n'
    )
    run_id = running.wait_for("RUN")
    running.wait_for("READY")
    running.send_signal(signal.SIGTERM)
    outcome = running.finish()
    assert outcome.returncode == 143, outcome.describe()
    assert outcome.one("HANDLER") == {"signal": int(signal.SIGTERM), "finished": False, "status": "running"}
    view = PlatformView(producer.platform, run_id)
    assert (view.status, view.error_message) == ("FAILED", "SystemExit: exit code 143")
    view.assert_closed_once()


@pytest.mark.parametrize(
    ("ending", "returncode"),
    [("", 0), ("sys.exit(3)\n", 3)],
    ids=["falls-off-the-end", "sys-exit"],
)
def test_exiting_without_finishing_reports_a_crash_once(producer: Producer, ending: str, returncode: int) -> None:
    """atexit closes an unfinished run as crashed, with a warning, after draining its records;
    the process still ends the way the producer made it end."""
    outcome = producer.run(OPEN + "run.log_episodes(episodes(2))\n" + ending)
    assert outcome.returncode == returncode, outcome.describe()
    assert "was never finished" in outcome.stderr
    view = PlatformView(producer.platform, outcome.run_id)
    assert (view.status, view.error_message) == ("FAILED", CRASHED_AT_EXIT)
    view.assert_closed_once()
    assert len(view.stored_episode_ids) == 2


def test_an_uncaught_keyboard_interrupt_outside_with_cancels_the_run_at_exit(producer: Producer) -> None:
    """An interrupt ends the run as it does inside ``with``: CANCELLED "interrupted", once, after draining;
    Python still exits as interrupted."""
    outcome = producer.run(OPEN + "run.log_episodes(episodes(2))\nraise KeyboardInterrupt\n")
    assert outcome.returncode == -signal.SIGINT, outcome.describe()
    view = PlatformView(producer.platform, outcome.run_id)
    assert (view.status, view.error_message) == ("CANCELLED", "interrupted")
    view.assert_closed_once()
    assert len(view.stored_episode_ids) == 2


def test_on_error_raise_surfaces_the_cause_at_flush_and_finish_stays_clean(producer: Producer) -> None:
    """Under raise the held failure is the original exception, raised once at flush; finish then raises nothing."""
    producer.platform.inspect.add_fault(method="POST", path="/api/v1/traces", action="fail_before", status=401)
    outcome = producer.run(
        """\
        run = po.init(environments=["gsm8k"], model="m", sinks="traces", on_error="raise")
        announce(run)
        run.log_episodes(episodes(1))
        try:
            run.flush()
        except Exception as exc:
            say("FLUSH", [type(exc).__name__, isinstance(exc, po.UnauthorizedError), exc.status_code])
        say("AGAIN", run.flush())
        run.finish()
        say("ERRORS", run.errors)
        """
    )
    assert outcome.returncode == 0, outcome.describe()
    assert outcome.one("FLUSH") == ["UnauthorizedError", True, 401]
    assert outcome.one("AGAIN") is True
    assert outcome.one("ERRORS")[0].startswith("writing to the traces sink failed: UnauthorizedError")
    assert "Traceback" not in outcome.stderr
    view = PlatformView(producer.platform, outcome.run_id)
    assert view.status in ("PROCESSING", "COMPLETED")
    view.assert_closed_once()


def test_on_error_raise_surfaces_a_later_failure_at_the_end_of_finish(producer: Producer) -> None:
    """Under raise a teardown failure does not stop the teardown; it is raised after the run is closed out."""
    inspect = producer.platform.inspect
    inspect.add_fault(method="POST", path="/api/v1/traces", action="fail_before", status=401)
    inspect.add_fault(method="PUT", path="/api/v1/evaluations/*", action="fail_before", status=500)
    outcome = producer.run(
        """\
        run = po.init(environments=["gsm8k"], model="m", sinks="traces", on_error="raise")
        announce(run)
        run.log_episodes(episodes(1))
        try:
            run.flush()
        except po.UnauthorizedError:
            say("FLUSH")
        try:
            run.finish()
        except Exception as exc:
            say("FINISH", [type(exc).__name__, exc.status_code, run.finished])
        """
    )
    assert outcome.returncode == 0, outcome.describe()
    assert "FLUSH" in outcome.said
    assert outcome.one("FINISH") == ["APIError", 500, True]
    view = PlatformView(producer.platform, outcome.run_id)
    assert view.status in ("PROCESSING", "COMPLETED")
    assert len(view.finalizes) == 1


def test_on_error_raise_is_swallowed_on_the_atexit_path(producer: Producer) -> None:
    """An unfinished run under raise still closes as crashed at exit, with no traceback: atexit swallows it."""
    producer.platform.inspect.add_fault(method="POST", path="/api/v1/traces", action="fail_before", status=401)
    outcome = producer.run(
        OPEN.replace('sinks="traces"', 'sinks="traces", on_error="raise"') + "run.log_episodes(episodes(1))\n"
    )
    assert outcome.returncode == 0, outcome.describe()
    assert "was never finished" in outcome.stderr
    assert "Traceback" not in outcome.stderr
    view = PlatformView(producer.platform, outcome.run_id)
    assert (view.status, view.error_message) == ("FAILED", CRASHED_AT_EXIT)
    view.assert_closed_once()


@pytest.mark.local_platform(status_endpoint="absent")
def test_a_platform_without_the_status_write_records_the_failure_in_metadata(
    local_platform: LocalPlatform, tmp_path: Path
) -> None:
    """A 404 from the status write latches; the status lands under metadata.prime_runs, merged into the config."""
    producer = Producer(local_platform, tmp_path)
    outcome = producer.run(
        """\
        config = {"lr": 0.5, "prime_runs": {"launcher": "cli"}}
        run = po.init(environments=["gsm8k"], model="m", sinks="traces", config=config)
        announce(run)
        try:
            with run:
                run.log_episodes(episodes(1))
                run.fail(ValueError("boom"))
                raise RuntimeError("after the failure was reported")
        except RuntimeError:
            say("RAISED")
        # The latch itself: a later status write of the same run goes straight to the metadata fallback.
        run._parts.backend.finalize(
            run.id, po.RunStatus.CANCELLED, summary=None, error="interrupted", config=dict(config)
        )
        """
    )
    assert outcome.returncode == 0, outcome.describe()
    assert "RAISED" in outcome.said
    assert "keep showing as running" in outcome.stderr
    assert f"Run {outcome.run_id} failed" not in outcome.stderr  # the report never claims what the platform lacks
    assert "recorded under metadata.prime_runs" in outcome.stderr
    view = PlatformView(local_platform, outcome.run_id)
    assert view.status == "RUNNING"
    assert [write["status"] for write in view.status_writes] == [404]
    assert view.finalizes == []
    metadata_writes = [
        r["body"]["metadata"] for r in view.requests if r["method"] == "PUT" and r["body"].get("metadata")
    ]
    fallbacks = [document for document in metadata_writes if "status" in document["prime_runs"]]
    assert [block["prime_runs"] for block in fallbacks] == [
        {"launcher": "cli", "status": "failed", "error": "ValueError: boom"},
        {"launcher": "cli", "status": "cancelled", "error": "interrupted"},
    ]
    assert fallbacks[0]["lr"] == 0.5
    assert view.snapshot["metadata"] == fallbacks[-1]
