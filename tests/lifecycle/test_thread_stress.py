"""Threads logging, flushing and finishing one run at random moments (seeded): every call ``log_episodes``
accepted is delivered exactly once, every refused call raised ``RunFinishedError`` and none of its episodes
arrives, and no flush or finish waits past its bound. Repeated "did not drain" warnings are throttled."""

from __future__ import annotations

from collections import Counter

import pytest

from ._producer import PlatformView, Producer

STRESS = """\
import random

SEED, THREADS, STEPS = {seed}, 6, 40
FINISH_BUDGET = 30.0
# A bound is "timeout + slack": the slack covers scheduling on a loaded machine, never a whole request.
SLACK = 3.0
lock = threading.Lock()
accepted, refused, overruns = [], [], []
run = po.init(environments=["gsm8k"], model="m", sinks="traces", finish_timeout=FINISH_BUDGET)
announce(run)
go = threading.Event()


def timed(name, bound, call, *args, **kwargs):
    started = time.monotonic()
    result = call(*args, **kwargs)
    took = time.monotonic() - started
    if bound is not None and took > bound + SLACK:
        with lock:
            overruns.append([name, bound, round(took, 2)])
    return result


def producer(index):
    rng = random.Random(SEED * 1000 + index)
    finish_at = rng.randrange(STEPS // 2, STEPS) if index == 0 else None
    go.wait()
    for step in range(STEPS):
        roll = rng.random()
        if step == finish_at:
            timed("finish", FINISH_BUDGET, run.finish, timeout=FINISH_BUDGET)
        elif roll < 0.65:
            made = episodes(rng.randint(1, 3))
            try:
                run.log_episodes(made)
            except po.RunFinishedError:
                with lock:
                    refused.extend(ids(made))
            else:
                with lock:
                    accepted.extend(ids(made))
        else:
            timeout = rng.choice([0.0, 0.05, 0.5, None])
            # flush(None) while a finish runs is bounded by that finish's budget
            timed("flush", FINISH_BUDGET if timeout is None else timeout, run.flush, timeout=timeout)
        time.sleep(rng.random() * 0.005)


threads = [threading.Thread(target=producer, args=(i,)) for i in range(THREADS)]
for thread in threads:
    thread.start()
go.set()
for thread in threads:
    thread.join(120)
say("STUCK", [thread.name for thread in threads if thread.is_alive()])
run.finish()
say("ACCEPTED", accepted)
say("REFUSED", refused)
say("OVERRUNS", overruns)
"""


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_threads_racing_log_flush_and_finish_lose_nothing_and_wait_within_bounds(producer: Producer, seed: int) -> None:
    outcome = producer.run(STRESS.format(seed=seed), timeout=180)
    assert outcome.returncode == 0, outcome.describe()
    assert outcome.one("STUCK") == []
    assert outcome.one("OVERRUNS") == []
    accepted, refused = outcome.one("ACCEPTED"), outcome.one("REFUSED")
    assert accepted and refused  # the seeds make both happen: a finish lands mid-way through the producers
    view = PlatformView(producer.platform, outcome.run_id)
    view.assert_closed_once()
    assert Counter(view.uploaded_episode_ids) == Counter(accepted)
    assert sorted(view.stored_episode_ids) == sorted(accepted)
    assert not set(refused) & set(view.stored_episode_ids)


def test_a_flush_loop_on_a_slow_platform_warns_a_few_times_not_once_per_call(producer: Producer) -> None:
    """2000 ``flush(timeout=0)`` calls while an upload is slow: each returns False, the warning is throttled."""
    producer.platform.inspect.add_fault(method="POST", path="/api/v1/traces", action="delay", delay_s=2)
    outcome = producer.run(
        """\
        run = po.init(environments=["gsm8k"], model="m", sinks="traces")
        announce(run)
        run.log_episodes(episodes(1))
        say("RESULTS", sorted({run.flush(timeout=0) for _ in range(2000)}))
        run.finish()
        """
    )
    assert outcome.returncode == 0, outcome.describe()
    assert outcome.one("RESULTS") == [False]
    warnings = outcome.stderr.count("flush did not drain")
    assert 1 <= warnings <= 3, outcome.stderr


def test_a_log_call_waiting_on_a_full_queue_when_finish_starts_is_delivered_or_refused(producer: Producer) -> None:
    """A producer thread blocked on a full queue (slow platform) while another thread finishes: the call it is
    in is waited for and delivered; its next call is refused. Nothing returns normally and then vanishes."""
    producer.platform.inspect.add_fault(method="POST", path="/api/v1/traces", action="delay", delay_s=1, times=3)
    outcome = producer.run(
        """\
        from prime_otel.processors import _uploader

        run = po.init(environments=["gsm8k"], model="m", sinks="traces", spool=False)
        announce(run)
        run._parts.processor._max_queue_batches = 2  # a queue the producer fills at once
        accepted, refused = [], []

        def produce():
            while True:
                made = episodes(2)
                try:
                    run.log_episodes(made)
                except po.RunFinishedError:
                    refused.extend(ids(made))
                    return
                accepted.extend(ids(made))

        thread = threading.Thread(target=produce)
        thread.start()
        time.sleep(0.5)  # the producer is now waiting for room behind the slow upload
        run.finish()
        thread.join(60)
        say("ACCEPTED", accepted)
        say("REFUSED", refused)
        say("DROPPED", run.dropped_records)
        """
    )
    assert outcome.returncode == 0, outcome.describe()
    accepted = outcome.one("ACCEPTED")
    assert len(outcome.one("REFUSED")) == 2
    assert outcome.one("DROPPED") == 0
    view = PlatformView(producer.platform, outcome.run_id)
    assert Counter(view.uploaded_episode_ids) == Counter(accepted)


def test_flushes_on_other_threads_while_finish_runs_return_drained(producer: Producer) -> None:
    """Threads calling ``flush(timeout=None)`` and ``flush(timeout=30)`` over and over while another thread's
    ``finish()`` uploads and closes: every call returns (none is left waiting on a stopped uploader), and the last
    answers True, everything delivered; five runs over."""
    producer.platform.inspect.add_fault(method="POST", path="/api/v1/traces", action="delay", delay_s=0.3, times=None)
    outcome = producer.run(
        """\
        results = []
        for attempt in range(5):
            run = po.init(environments=["gsm8k"], model="m", sinks="traces")
            made = episodes(2)
            run.log_episodes(made)
            finisher = threading.Thread(target=run.finish)
            answers = {}

            def keep_flushing(timeout):
                calls = 0
                while finisher.is_alive() or not calls:
                    answers[timeout] = run.flush(timeout=timeout)
                    calls += 1

            flushers = [threading.Thread(target=keep_flushing, args=(t,), daemon=True) for t in (None, 30.0)]
            finisher.start()
            for flusher in flushers:
                flusher.start()
            finisher.join(60)
            for flusher in flushers:
                flusher.join(60)
            results.append([run.id, ids(made), [flusher.is_alive() for flusher in flushers], answers])
        say("RESULTS", results)
        """
    )
    assert outcome.returncode == 0, outcome.describe()
    for run_id, logged, stuck, answers in outcome.one("RESULTS"):
        assert stuck == [False, False]
        assert answers == {"null": True, "30.0": True}
        view = PlatformView(producer.platform, run_id)
        view.assert_closed_once()
        assert sorted(view.stored_episode_ids) == sorted(logged)
