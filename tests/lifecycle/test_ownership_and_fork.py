"""Who owns a run's lifecycle across re-inits, spawned and forked processes, and ranks.

The owner creates, advertises and closes the run; a re-init in the same process opens a fresh one; spawned
processes join through ``PRIME_RUN_ID``; forked children keep logging over their own connections. However
many processes take part, the platform sees one evaluation, closed once, with every episode stored once.
"""

from __future__ import annotations

from collections import Counter

import pytest

from ._producer import PlatformView, Producer


def _assert_each_once(view: PlatformView, expected: list[str]) -> None:
    """Every logged episode was uploaded exactly once and stored exactly once; nothing else was."""
    assert Counter(view.uploaded_episode_ids) == Counter(expected)
    assert sorted(view.stored_episode_ids) == sorted(expected)


def test_each_init_opens_a_fresh_run_advertised_while_it_is_the_newest_one_open(producer: Producer) -> None:
    """Each init creates its own run; PRIME_RUN_ID names the newest run still open (finishing a nested run names
    the outer one again), and is withdrawn with the last; the SIGTERM handler is the one found before init."""
    outcome = producer.run(
        """\
        def advertised():
            return [os.environ.get("PRIME_RUN_ID"), os.environ.get("PRIME_RUN_OWNER_PID") == str(os.getpid())]

        found = signal.getsignal(signal.SIGTERM)

        def handler_as_found():
            return signal.getsignal(signal.SIGTERM) is found

        first = po.init(environments=["gsm8k"], model="m", sinks="traces")
        say("FIRST", [first.id, advertised()])
        first.finish()
        say("AFTER_FIRST", [advertised(), handler_as_found()])
        second = po.init(environments=["gsm8k"], model="m", sinks="traces")
        say("SECOND", [second.id, advertised()])
        nested = po.init(environments=["gsm8k"], model="m", sinks="traces")
        say("NESTED", [nested.id, advertised()])
        nested.finish()
        say("AFTER_NESTED", advertised())
        second.finish()
        say("AFTER_SECOND", [advertised(), handler_as_found()])
        """
    )
    assert outcome.returncode == 0, outcome.describe()
    first_id, first_env = outcome.one("FIRST")
    second_id, second_env = outcome.one("SECOND")
    nested_id, nested_env = outcome.one("NESTED")
    assert len({first_id, second_id, nested_id}) == 3
    assert first_env == [first_id, True]
    assert outcome.one("AFTER_FIRST") == [[None, False], True]
    assert second_env == [second_id, True]
    assert nested_env == [nested_id, True]
    assert outcome.one("AFTER_NESTED") == [second_id, True]
    assert outcome.one("AFTER_SECOND") == [[None, False], True]
    for run_id in (first_id, second_id, nested_id):
        view = PlatformView(producer.platform, run_id)
        assert len(view.creates) == 1
        assert view.status in ("PROCESSING", "COMPLETED")
        view.assert_closed_once()


def test_an_explicit_id_overrides_an_inherited_run(producer: Producer) -> None:
    """Attaching with ``id=`` assigns the variables, replacing what this process inherited."""
    created = producer.run('run = po.init(environments=["gsm8k"], model="m", sinks="traces")\nannounce(run)\n')
    outcome = producer.run(
        """\
        run = po.init(id=os.environ["TARGET"], model="m", sinks="traces")
        say("ADVERTISED", [run.id, os.environ["PRIME_RUN_ID"], os.environ["PRIME_RUN_OWNER_PID"] == str(os.getpid())])
        run.finish()
        """,
        TARGET=created.run_id,
        PRIME_RUN_ID="eval-from-elsewhere",
        PRIME_RUN_OWNER_PID="1",
        PRIME_RUN_KIND="eval",
    )
    assert outcome.returncode == 0, outcome.describe()
    assert outcome.one("ADVERTISED") == [created.run_id, created.run_id, True]


def test_a_spawned_child_joins_the_parents_run_and_leaves_closing_to_the_parent(producer: Producer) -> None:
    """A spawn child's own init joins through PRIME_RUN_ID: no second run, and the child never closes it."""
    runs_before = len(producer.platform.inspect.runs())
    outcome = producer.run(
        """\
        import multiprocessing


        def child(records, report):
            run = po.init(environments=["gsm8k"], model="m", sinks="traces")
            report.put([run.id, run.attached])
            run.log_episodes(records)
            run.finish()


        if __name__ == "__main__":
            run = po.init(environments=["gsm8k"], model="m", sinks="traces")
            announce(run)
            mine, theirs = episodes(1), episodes(2)
            run.log_episodes(mine)
            context = multiprocessing.get_context("spawn")
            report = context.Queue()
            worker = context.Process(target=child, args=(theirs, report))
            worker.start()
            say("CHILD_RUN", report.get(timeout=60))
            worker.join(60)
            say("CHILD_EXIT", worker.exitcode)
            say("LOGGED", ids(mine) + ids(theirs))
            run.finish()
        """
    )
    assert outcome.returncode == 0, outcome.describe()
    assert outcome.one("CHILD_RUN") == [outcome.run_id, True]
    assert outcome.one("CHILD_EXIT") == 0
    assert len(producer.platform.inspect.runs()) == runs_before + 1
    view = PlatformView(producer.platform, outcome.run_id)
    assert view.status in ("PROCESSING", "COMPLETED")
    view.assert_closed_once()
    updates = [r for r in view.requests if r["method"] == "PUT" and r["body"] and "metrics" in r["body"]]
    assert len(updates) == 1
    _assert_each_once(view, outcome.one("LOGGED"))


def test_a_rank_without_a_run_to_join_logs_nothing_instead_of_opening_a_second_run(producer: Producer) -> None:
    """A non-zero rank with no id to join is a disabled handle, with a warning."""
    runs_before = len(producer.platform.inspect.runs())
    outcome = producer.run(
        'run = po.init(environments=["gsm8k"], model="m")\nsay("MODE", run.mode)\nrun.finish()\n',
        RANK="1",
        WORLD_SIZE="2",
    )
    assert outcome.returncode == 0, outcome.describe()
    assert outcome.one("MODE") == "disabled"
    assert "rank 1 has no run to join" in outcome.stderr
    assert len(producer.platform.inspect.runs()) == runs_before


@pytest.mark.slow
def test_forked_children_log_into_the_parents_run_once_and_never_close_it(producer: Producer) -> None:
    """A forked child that exits normally drains at exit; one that ``os._exit``s after a flush
    keeps what it flushed; neither uploads the parent's records nor closes the run. Real verifiers objects
    go to both sinks, so both tables must hold each episode once."""
    running = producer.start(
        """\
        from tests._fixtures import episode_from_record

        run = po.init(environments=["gsm8k"], model="m")
        announce(run)
        made = [episode_from_record(record) for record in episodes(4)]
        run.log_episodes(made[:1])


        def in_child(work):
            signal.alarm(30)
            work()


        def exits_normally():
            run.log_episodes(made[1:2])
            sys.exit(0)


        def exits_abruptly():
            run.log_episodes(made[2:3])
            run.flush()
            os._exit(0)


        for name, work in (("NORMAL", exits_normally), ("ABRUPT", exits_abruptly)):
            pid = os.fork()
            if pid == 0:
                in_child(work)
            say(name, os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        say("CHILDREN_DONE", [run.finished, run.status.value])
        sys.stdin.readline()
        run.log_episodes(made[3:])
        say("LOGGED", ids(made))
        run.finish()
        """
    )
    run_id = running.wait_for("RUN")
    assert running.wait_for("CHILDREN_DONE") == [False, "running"]
    midway = PlatformView(producer.platform, run_id)
    assert midway.status == "RUNNING"
    assert midway.finalizes == [] and midway.status_writes == []
    running.tell()
    outcome = running.finish()
    assert outcome.returncode == 0, outcome.describe()
    assert (outcome.one("NORMAL"), outcome.one("ABRUPT")) == (0, 0)
    assert "was never finished" not in outcome.stderr
    assert f"Run {run_id} crashed" not in outcome.stderr
    view = PlatformView(producer.platform, run_id)
    assert view.status in ("PROCESSING", "COMPLETED")
    view.assert_closed_once()
    logged = outcome.one("LOGGED")
    _assert_each_once(view, logged)
    samples = producer.platform.inspect.samples(run_id)["items"]
    assert len(samples) == len(logged)
    assert len({sample["sample_id"] for sample in samples}) == len(logged)


def test_a_child_forked_during_an_upload_uses_its_own_connection_and_lock(producer: Producer) -> None:
    """Forked while an upload is in flight and the processor's lock is held, the child neither
    deadlocks (an alarm would kill it) nor touches the parent's connection; every episode lands once."""
    producer.platform.inspect.add_fault(method="POST", path="/api/v1/traces", action="delay", delay_s=2)
    outcome = producer.run(
        """\
        run = po.init(environments=["gsm8k"], model="m", sinks="traces")
        announce(run)
        processor = run._parts.processor
        first, childs, last = episodes(2), episodes(1), episodes(1)
        run.log_episodes(first)
        deadline = time.monotonic() + 30
        while not (processor._queue.empty() and processor._undelivered) and time.monotonic() < deadline:
            time.sleep(0.01)
        say("IN_FLIGHT", processor._queue.empty() and processor._undelivered > 0)

        held, release = threading.Event(), threading.Event()

        def hold_the_lock():
            with processor._lock:
                held.set()
                release.wait(30)

        threading.Thread(target=hold_the_lock, daemon=True).start()
        held.wait(30)
        pid = os.fork()
        if pid == 0:
            signal.alarm(30)
            run.log_episodes(childs)
            sys.exit(0)
        release.set()
        say("CHILD", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        run.log_episodes(last)
        say("LOGGED", ids(first + childs + last))
        run.finish()
        """
    )
    assert outcome.returncode == 0, outcome.describe()
    assert outcome.one("IN_FLIGHT") is True
    assert outcome.one("CHILD") == 0
    assert "was never finished" not in outcome.stderr
    view = PlatformView(producer.platform, outcome.run_id)
    view.assert_closed_once()
    _assert_each_once(view, outcome.one("LOGGED"))
    assert all(request["status"] in (200, 201) for request in view.requests), view.requests
