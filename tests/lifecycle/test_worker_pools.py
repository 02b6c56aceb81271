"""Runs in programs with worker processes: every start method, Process and Pool, long-lived pools that serve
several runs, an eval inside a training run. What a worker logs lands in the run it meant, once, while that run
is open; a worker never opens a run of its own by accident; the owner's report counts what workers sent.

Each producer is a real program using ``multiprocessing`` as applications do; what landed where is read back
from the local platform.
"""

from __future__ import annotations

from collections import Counter

import pytest

from ._producer import PlatformView, Producer

START_METHODS = ["fork", "forkserver", "spawn"]

WORKERS = """\
import multiprocessing


def open_eval():
    return po.init(environments=["gsm8k"], model="m", sinks="traces")


def log_by_init(count):
    \"\"\"A worker as applications write them: init() (joins its owner's run), log, return; no finish().\"\"\"
    run = open_eval()
    made = episodes(count)
    run.log_episodes(made)
    return [run.id, run.attached, ids(made)]


def log_by_handle(handle, count):
    run = po.join(handle)
    made = episodes(count)
    run.log_episodes(made)
    return [run.id, ids(made)]


def into_queue(results, count):
    results.put(log_by_init(count))


def workers_line(run):
    tally = run.report.workers
    return {"processes": tally.processes, "logged": tally.logged, "delivered": tally.delivered, "lost": tally.lost}


"""


def _assert_each_once(view: PlatformView, expected: list[str]) -> None:
    assert Counter(view.uploaded_episode_ids) == Counter(expected)
    assert sorted(view.stored_episode_ids) == sorted(expected)


@pytest.mark.parametrize("start_method", START_METHODS)
@pytest.mark.parametrize("shape", ["process", "pool"])
def test_workers_that_join_and_return_without_finishing_deliver_everything(
    producer: Producer, start_method: str, shape: str
) -> None:
    """Workers join with init(), log and return (a pool is left by ``with``, which terminates it): every episode
    is stored once in the owner's run, no worker opens a run, and the owner's report counts them as workers'."""
    runs_before = len(producer.platform.inspect.runs())
    outcome = producer.run(
        WORKERS
        + f"""\
if __name__ == "__main__":
    context = multiprocessing.get_context({start_method!r})
    run = open_eval()
    announce(run)
    if {shape!r} == "pool":
        with context.Pool(2) as pool:
            results = pool.map(log_by_init, [5] * 4)
    else:
        queue = context.Queue()
        workers = [context.Process(target=into_queue, args=(queue, 5)) for _ in range(2)]
        for worker in workers:
            worker.start()
        results = [queue.get(timeout=60) for _ in workers]
        for worker in workers:
            worker.join(60)
        say("EXITS", [worker.exitcode for worker in workers])
    say("JOINED", sorted({{(run_id, attached) for run_id, attached, _ in results}}))
    say("LOGGED", [i for _, _, made in results for i in made])
    run.finish()
    say("WORKERS", workers_line(run))
"""
    )
    assert outcome.returncode == 0, outcome.describe()
    assert outcome.one("JOINED") == [[outcome.run_id, True]]
    if shape == "process":
        assert outcome.one("EXITS") == [0, 0]
    logged = outcome.one("LOGGED")
    assert len(producer.platform.inspect.runs()) == runs_before + 1
    view = PlatformView(producer.platform, outcome.run_id)
    assert view.status in ("PROCESSING", "COMPLETED")
    view.assert_closed_once()
    _assert_each_once(view, logged)
    tally = outcome.one("WORKERS")
    assert (tally["logged"], tally["delivered"], tally["lost"]) == (len(logged), len(logged), 0), outcome.describe()
    assert "workers:" in outcome.stderr and f"logged {len(logged)} records" in outcome.stderr


@pytest.mark.parametrize("start_method", START_METHODS)
@pytest.mark.parametrize("join", ["init", "handle"])
def test_a_pool_made_before_the_first_run_serves_two_runs_each_getting_its_own_episodes(
    producer: Producer, start_method: str, join: str
) -> None:
    """A long-lived pool, created before any init(), logs for one eval and then for the next: each run holds
    exactly its own episodes and closes COMPLETED with them; the first run gets nothing after it finished."""
    outcome = producer.run(
        WORKERS
        + f"""\
if __name__ == "__main__":
    context = multiprocessing.get_context({start_method!r})
    pool = context.Pool(2)
    for name in ("FIRST", "SECOND"):
        run = open_eval()
        if {join!r} == "init":
            results = [made for _, _, made in pool.map(log_by_init, [3] * 4)]
        else:
            results = [made for _, made in pool.starmap(log_by_handle, [(run.handle, 3)] * 4)]
        say(name, [run.id, [i for made in results for i in made]])
        run.finish()
        say(name + "_WORKERS", workers_line(run))
    pool.close()
    pool.join()
"""
    )
    assert outcome.returncode == 0, outcome.describe()
    for name in ("FIRST", "SECOND"):
        run_id, logged = outcome.one(name)
        assert len(logged) == 12
        view = PlatformView(producer.platform, run_id)
        assert view.status in ("PROCESSING", "COMPLETED")
        view.assert_closed_once()
        _assert_each_once(view, logged)
        assert outcome.one(name + "_WORKERS")["lost"] == 0
    assert "409" not in outcome.stderr


def test_a_long_lived_worker_holding_a_finished_run_is_refused_and_the_run_keeps_its_episodes(
    producer: Producer,
) -> None:
    """A worker that kept the handle of a run its owner finished gets RunFinishedError for its next log call,
    and joining the finished run is refused too: records never land in a finished run."""
    outcome = producer.run(
        WORKERS
        + """\
def keep_and_log(handle, count):
    global kept
    kept = po.join(handle)
    made = episodes(count)
    kept.log_episodes(made)
    return ids(made)


def log_into_kept(count):
    try:
        kept.log_episodes(episodes(count))
    except po.RunFinishedError as refused:
        return ["refused", str(refused)]
    return ["accepted", None]


def join_again(handle):
    try:
        po.join(handle)
    except po.RunFinishedError as refused:
        return ["refused", str(refused)]
    return ["joined", None]


if __name__ == "__main__":
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        run = open_eval()
        announce(run)
        say("LOGGED", pool.apply(keep_and_log, (run.handle, 3)))
        run.finish()
        say("AFTER_FINISH", pool.apply(log_into_kept, (2,)))
        say("JOIN_FINISHED", pool.apply(join_again, (run.handle,)))
"""
    )
    assert outcome.returncode == 0, outcome.describe()
    verdict, message = outcome.one("AFTER_FINISH")
    assert verdict == "refused" and "finished by its owner" in message
    verdict, message = outcome.one("JOIN_FINISHED")
    assert verdict == "refused" and "not open" in message
    view = PlatformView(producer.platform, outcome.run_id)
    view.assert_closed_once()
    _assert_each_once(view, outcome.one("LOGGED"))


def test_a_child_forked_with_the_run_and_ending_the_multiprocessing_way_delivers_what_it_logged(
    producer: Producer,
) -> None:
    """A fork-method Process logging through the run it inherited (no init, no finish) ends with os._exit:
    its records still arrive, counted as the worker's in the owner's report."""
    outcome = producer.run(
        WORKERS
        + """\
def log_inherited(count, results):
    made = episodes(count)
    run.log_episodes(made)
    results.put(ids(made))


if __name__ == "__main__":
    context = multiprocessing.get_context("fork")
    run = open_eval()
    announce(run)
    results = context.Queue()
    worker = context.Process(target=log_inherited, args=(6, results))
    worker.start()
    logged = results.get(timeout=60)
    worker.join(60)
    say("EXIT", worker.exitcode)
    say("LOGGED", logged)
    run.finish()
    say("WORKERS", workers_line(run))
"""
    )
    assert outcome.returncode == 0, outcome.describe()
    assert outcome.one("EXIT") == 0
    view = PlatformView(producer.platform, outcome.run_id)
    view.assert_closed_once()
    _assert_each_once(view, outcome.one("LOGGED"))
    assert outcome.one("WORKERS") == {"processes": 1, "logged": 6, "delivered": 6, "lost": 0}


def test_what_a_killed_worker_could_not_send_is_counted_lost_by_that_worker(producer: Producer) -> None:
    """A worker killed (SIGKILL) while its upload waits on a slow platform: the owner's report names the worker
    and the records it lost, and the run is not reported complete."""
    producer.platform.inspect.add_fault(method="POST", path="/api/v1/traces", action="delay", delay_s=3, times=None)
    outcome = producer.run(
        WORKERS
        + """\
def log_and_die(handle, count, results):
    run = po.join(handle)
    run.log_episodes(episodes(count))
    results.put(os.getpid())
    time.sleep(0.3)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    context = multiprocessing.get_context("spawn")
    run = open_eval()
    announce(run)
    results = context.Queue()
    worker = context.Process(target=log_and_die, args=(run.handle, 4, results))
    worker.start()
    pid = results.get(timeout=60)
    worker.join(60)
    say("KILLED", [pid, worker.exitcode])
    run.finish()
    say("WORKERS", workers_line(run))
    say("LOST_BY", {str(k): v for k, v in run.report.workers.lost_by_worker.items()})
    say("COMPLETE", run.report.records_complete)
"""
    )
    assert outcome.returncode == 0, outcome.describe()
    pid, exitcode = outcome.one("KILLED")
    assert exitcode == -9
    assert outcome.one("WORKERS") == {"processes": 1, "logged": 4, "delivered": 0, "lost": 4}
    assert outcome.one("LOST_BY") == {str(pid): 4}
    assert outcome.one("COMPLETE") is False
    assert f"pid {pid}: 4" in outcome.stderr


def test_helpers_of_an_eval_inside_training_join_the_run_of_their_kind(producer: Producer) -> None:
    """Training opens, an eval opens inside it and closes: helpers started before, during and after the eval
    each join the open run of the kind they ask for; no second training run is opened, nothing is refused."""
    runs_before = len(producer.platform.inspect.runs())
    outcome = producer.run(
        """\
import multiprocessing


def helper(kinds, step, results):
    joined = {}
    for kind in kinds:
        run = po.init(kind=kind, environments=["gsm8k"], model="m", sinks="traces")
        if kind == "train":
            run.log_metrics({"helper_loss": 1.0}, step=step)
        else:
            made = episodes(2)
            run.log_episodes(made)
            joined["episodes"] = ids(made)
        joined[kind] = [run.id, run.attached]
    results.put(joined)


if __name__ == "__main__":
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    train = po.init(kind="train", model="m")
    say("TRAIN", train.id)

    def started(kinds, step):
        process = context.Process(target=helper, args=(kinds, step, results))
        process.start()
        return process

    before = started(["train"], 1)
    first = results.get(timeout=60)
    evaluation = po.init(environments=["gsm8k"], model="m", sinks="traces")
    say("EVAL", evaluation.id)
    during = started(["train", "eval"], 2)
    second = results.get(timeout=60)
    evaluation.finish()
    after = started(["train"], 3)
    third = results.get(timeout=60)
    for process in (before, during, after):
        process.join(60)
    say("BEFORE", first)
    say("DURING", second)
    say("AFTER", third)
    say("ADVERTISED_AFTER_EVAL", os.environ.get("PRIME_RUN_ID"))
    train.finish()
""",
        PRIME_TEAM_ID="team_helpers",
    )
    assert outcome.returncode == 0, outcome.describe()
    train_id, eval_id = outcome.one("TRAIN"), outcome.one("EVAL")
    assert outcome.one("BEFORE") == {"train": [train_id, True]}
    during = outcome.one("DURING")
    assert during["train"] == [train_id, True] and during["eval"] == [eval_id, True]
    assert outcome.one("AFTER") == {"train": [train_id, True]}
    assert outcome.one("ADVERTISED_AFTER_EVAL") == train_id
    assert len(producer.platform.inspect.runs()) == runs_before + 2  # the training run and the eval, no other
    eval_view = PlatformView(producer.platform, eval_id)
    eval_view.assert_closed_once()
    _assert_each_once(eval_view, during["episodes"])
    posted = [
        r
        for r in producer.platform.inspect.requests(limit=1000, run_id=train_id)
        if r["path"].endswith("/rft/metrics") and r["status"] in (200, 201)
    ]
    steps = {row.get("step") for r in posted for row in _metric_rows(r["body"])}
    assert {1, 2, 3} <= steps


def _metric_rows(body: object) -> list[dict[str, object]]:
    """The metrics row of one ``/rft/metrics`` request body."""
    metrics = body.get("metrics") if isinstance(body, dict) else None
    return [metrics] if isinstance(metrics, dict) else []


def test_two_overlapping_evals_keep_their_own_workers_whichever_finishes_first(producer: Producer) -> None:
    """Two evals open at once, one pool logging for both through their handles: finishing the first leaves the
    second's workers untouched, and a plain init() in a worker afterwards joins the one still open."""
    outcome = producer.run(
        WORKERS
        + """\
if __name__ == "__main__":
    context = multiprocessing.get_context("forkserver")
    with context.Pool(2) as pool:
        first, second = open_eval(), open_eval()
        tasks = [(run.handle, 2) for run in (first, second) for _ in range(3)]
        logged = {first.id: [], second.id: []}
        for run_id, made in pool.starmap(log_by_handle, tasks):
            logged[run_id] += made
        first.finish()
        say("ADVERTISED", os.environ.get("PRIME_RUN_ID"))
        for run_id, made in pool.starmap(log_by_handle, [(second.handle, 2)] * 2):
            logged[run_id] += made
        for run_id, attached, made in pool.map(log_by_init, [2] * 2):
            logged[run_id] += made
        second.finish()
        say("RUNS", [first.id, second.id])
        say("LOGGED", logged)
"""
    )
    assert outcome.returncode == 0, outcome.describe()
    first_id, second_id = outcome.one("RUNS")
    logged = outcome.one("LOGGED")
    assert outcome.one("ADVERTISED") == second_id
    assert (len(logged[first_id]), len(logged[second_id])) == (6, 14)
    for run_id in (first_id, second_id):
        view = PlatformView(producer.platform, run_id)
        assert view.status in ("PROCESSING", "COMPLETED")
        view.assert_closed_once()
        _assert_each_once(view, logged[run_id])


def test_workers_of_an_offline_run_write_into_its_folder(producer: Producer) -> None:
    """An offline owner's pool workers join offline too (whatever their own default mode would be): every episode
    is in the run's folder once, and the owner's report counts the workers' records."""
    outcome = producer.run(
        WORKERS
        + """\
if __name__ == "__main__":
    run = po.init(environments=["gsm8k"], model="m", mode="offline")
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        results = pool.map(log_by_init, [3] * 4)
    run.finish()
    say("JOINED", sorted({run_id for run_id, _, _ in results}) == [run.id])
    say("LOGGED", [i for _, _, made in results for i in made])
    with open(os.path.join(run.folder, "episodes.jsonl")) as written:
        say("WRITTEN", [json.loads(line)["id"] for line in written])
    say("WORKERS", workers_line(run))
""",
        PRIME_RUNS_DIR=str(producer.workdir / "runs"),
    )
    assert outcome.returncode == 0, outcome.describe()
    assert outcome.one("JOINED") is True
    logged = outcome.one("LOGGED")
    assert Counter(outcome.one("WRITTEN")) == Counter(logged)
    assert outcome.one("WORKERS")["delivered"] == len(logged) == 12


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_a_pool_terminated_while_its_workers_still_send_delivers_what_they_hold(
    producer: Producer, start_method: str
) -> None:
    """Leaving ``with Pool(...)`` terminates the workers (SIGTERM) while their uploads wait on a slow platform:
    each worker drains before it dies, so every episode is stored once and none is counted lost."""
    producer.platform.inspect.add_fault(method="POST", path="/api/v1/traces", action="delay", delay_s=1, times=2)
    outcome = producer.run(
        WORKERS
        + f"""\
if __name__ == "__main__":
    run = open_eval()
    announce(run)
    with multiprocessing.get_context({start_method!r}).Pool(2) as pool:
        results = pool.map(log_by_init, [4] * 2, chunksize=1)
    say("LOGGED", [i for _, _, made in results for i in made])
    run.finish()
    say("WORKERS", workers_line(run))
"""
    )
    assert outcome.returncode == 0, outcome.describe()
    logged = outcome.one("LOGGED")
    view = PlatformView(producer.platform, outcome.run_id)
    view.assert_closed_once()
    _assert_each_once(view, logged)
    assert outcome.one("WORKERS")["lost"] == 0, outcome.describe()
