"""How a process ends decides the run's status, and the SDK respects what the application chose for its signals.

Every producer is a real process: ``sys.exit`` inside ``with``, ignored signals and handlers restored after a
finish on another thread only mean something when the interpreter really unwinds and receives the signal.
"""

from __future__ import annotations

import signal

import pytest

from ._producer import PlatformView, Producer

OPEN = 'run = po.init(environments=["gsm8k"], model="m", sinks="traces")\nannounce(run)\n'


@pytest.mark.parametrize("code", ["0", "None", ""], ids=["exit-0", "exit-None", "exit-no-argument"])
def test_a_clean_sys_exit_inside_with_completes_the_run(producer: Producer, code: str) -> None:
    outcome = producer.run(OPEN + f"with run:\n    run.log_episodes(episodes(2))\n    sys.exit({code})\n")
    assert outcome.returncode == 0, outcome.describe()
    view = PlatformView(producer.platform, outcome.run_id)
    assert view.status in ("PROCESSING", "COMPLETED")
    assert len(view.finalizes) == 1 and view.status_writes == []
    assert len(view.stored_episode_ids) == 2
    assert f"Run {outcome.run_id} completed" in outcome.stderr and "SystemExit" not in outcome.stderr


@pytest.mark.parametrize(
    ("call", "returncode", "message"),
    [("sys.exit(3)", 3, "SystemExit: exit code 3"), ('sys.exit("config missing")', 1, "SystemExit: config missing")],
    ids=["exit-code", "exit-message"],
)
def test_a_failing_sys_exit_inside_with_fails_the_run_naming_the_code(
    producer: Producer, call: str, returncode: int, message: str
) -> None:
    outcome = producer.run(OPEN + f"with run:\n    run.log_episodes(episodes(1))\n    {call}\n")
    assert outcome.returncode == returncode, outcome.describe()
    view = PlatformView(producer.platform, outcome.run_id)
    assert (view.status, view.error_message) == ("FAILED", message)
    view.assert_closed_once()
    assert len(view.stored_episode_ids) == 1


def test_an_ignored_sigterm_stays_ignored_and_the_run_goes_on(producer: Producer) -> None:
    """SIG_IGN set before init is the application's choice: the run installs nothing that would make it fatal."""
    running = producer.start(
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" + OPEN + "run.log_episodes(episodes(1))\n"
        'say("HANDLER_IS_IGN", signal.getsignal(signal.SIGTERM) == signal.SIG_IGN)\n'
        'say("READY")\n'
        "sys.stdin.readline()\n"
        "run.log_episodes(episodes(2))\n"
        "run.finish()\n"
        'say("STATUS", run.status.value)\n'
    )
    run_id = running.wait_for("RUN")
    assert running.wait_for("HANDLER_IS_IGN") is True
    running.wait_for("READY")
    running.send_signal(signal.SIGTERM)
    running.tell()
    outcome = running.finish()
    assert outcome.returncode == 0, outcome.describe()
    assert outcome.one("STATUS") == "completed"
    view = PlatformView(producer.platform, run_id)
    assert view.status in ("PROCESSING", "COMPLETED")
    view.assert_closed_once()
    assert len(view.stored_episode_ids) == 3


FINISH_ON_A_THREAD = OPEN + (
    "run.log_episodes(episodes(1))\n"
    "worker = threading.Thread(target=run.finish)\n"
    "worker.start()\n"
    "worker.join()\n"
    'say("FINISHED", run.status.value)\n'
    'say("READY")\n'
    "while True:\n"
    "    time.sleep(0.02)\n"
)


def test_after_a_finish_on_another_thread_sigterm_only_reaches_the_application_handler(producer: Producer) -> None:
    """The run's handler is disarmed at finish even off the main thread: it closes nothing and chains on."""
    running = producer.start(
        "calls = []\n"
        "def on_term(signum, frame):\n"
        "    calls.append(signum)\n"
        '    say("HANDLER", {"calls": len(calls), "status": run.status.value})\n'
        "    sys.exit(143)\n"
        "signal.signal(signal.SIGTERM, on_term)\n" + FINISH_ON_A_THREAD
    )
    run_id = running.wait_for("RUN")
    assert running.wait_for("FINISHED") == "completed"
    running.wait_for("READY")
    running.send_signal(signal.SIGTERM)
    outcome = running.finish()
    assert outcome.returncode == 143, outcome.describe()
    assert outcome.one("HANDLER") == {"calls": 1, "status": "completed"}
    view = PlatformView(producer.platform, run_id)
    assert view.status in ("PROCESSING", "COMPLETED")
    view.assert_closed_once()  # the signal closed nothing a second time
    assert "crashed" not in outcome.stderr


def test_after_a_finish_on_another_thread_sigterm_ends_the_process_by_default(producer: Producer) -> None:
    running = producer.start(FINISH_ON_A_THREAD)
    run_id = running.wait_for("RUN")
    assert running.wait_for("FINISHED") == "completed"
    running.wait_for("READY")
    running.send_signal(signal.SIGTERM)
    outcome = running.finish()
    assert outcome.returncode == -signal.SIGTERM, outcome.describe()
    view = PlatformView(producer.platform, run_id)
    assert view.status in ("PROCESSING", "COMPLETED")
    view.assert_closed_once()


def test_the_next_init_on_the_main_thread_puts_back_a_handler_left_by_a_finish_on_another_thread(
    producer: Producer,
) -> None:
    outcome = producer.run(
        """\
        def on_term(signum, frame):
            pass
        signal.signal(signal.SIGTERM, on_term)
        first = po.init(environments=["gsm8k"], model="m", sinks="traces")
        worker = threading.Thread(target=first.finish)
        worker.start()
        worker.join()
        second = po.init(environments=["gsm8k"], model="m", sinks="traces")
        say("DURING_SECOND", signal.getsignal(signal.SIGTERM) is not on_term)
        second.finish()
        say("AFTER", signal.getsignal(signal.SIGTERM) is on_term)
        """
    )
    assert outcome.returncode == 0, outcome.describe()
    assert outcome.one("DURING_SECOND") is True
    assert outcome.one("AFTER") is True


def test_an_application_handler_that_returns_keeps_the_run_going(producer: Producer) -> None:
    """A graceful-shutdown handler that only sets a flag decides the run goes on: nothing is closed by the
    signal; the program finishes the run itself and it completes with everything it logged."""
    running = producer.start(
        # The handler only appends to a list: taking a lock (Event.set) in a signal handler can deadlock with
        # the interrupted main thread holding it.
        "stopping = []\n"
        "signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))\n"
        + OPEN
        + "run.log_episodes(episodes(1))\n"
        'say("READY")\n'
        "deadline = time.monotonic() + 30\n"
        "while not stopping and time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
        'say("STOPPING", [run.finished, run.status.value])\n'
        "run.log_episodes(episodes(1))\n"
        "run.finish()\n"
    )
    run_id = running.wait_for("RUN")
    running.wait_for("READY")
    running.send_signal(signal.SIGTERM)
    outcome = running.finish()
    assert outcome.returncode == 0, outcome.describe()
    assert outcome.one("STOPPING") == [False, "running"]
    view = PlatformView(producer.platform, run_id)
    assert view.status in ("PROCESSING", "COMPLETED")
    view.assert_closed_once()
    assert len(view.stored_episode_ids) == 2
