"""One SDK, one workload, in a fresh process: ``python -m benchmarks._child '<spec as JSON>'``.

Prints one JSON line on stdout with what this process measured about itself: CPU (user+sys of every
thread, from just before ``init()`` to just after ``finish()`` returned), wall time over the same span,
peak RSS, and the producer-side latency of every logging call. The episodes are built (and frozen out of
the garbage collector's reach) before the measured span starts, so building them is never measured.
"""

from __future__ import annotations

import cProfile
import gc
import json
import os
import pstats
import resource
import sys
import threading
import time
from array import array
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._stats import latency_summary
from benchmarks._workload import eval_episodes, json_episode, train_batch, train_steps

EVAL_RUN = {"name": "bench-eval", "environments": ["gsm8k"], "model": "Qwen/Qwen3-8B", "framework": "verifiers"}
TRAIN_MODEL = "Qwen/Qwen3-4B"
TEAM_ID = "bench-team"


@dataclass(frozen=True)
class ChildSpec:
    sdk: str  # "ours" or "prime-runs"
    workload: str  # "eval" or "train"
    episodes: int = 2000
    steps: int = 60
    per_step: int = 16
    sinks: str | None = None  # ours only
    profile: str | None = None  # a cProfile output path for the measured span
    window: int = 10_000  # spool: calls per progress sample; memory: steps per sample
    finish_timeout: float | None = None  # spool: finish(timeout=)
    pause_s: float = 0.0  # memory: the trainer's own work per step (a sleep)
    rate: float = 0.0  # paced_eval, spool_disk: log_episodes calls per second (spool_disk 0: as fast as it can)
    threads: int = 4  # threaded_train: trainer threads, each logging its own keys every step
    batch: int = 100  # spool_disk: episodes per log_episodes call

    @classmethod
    def parse(cls, text: str) -> ChildSpec:
        return cls(**json.loads(text))


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def sdk_init(spec: ChildSpec) -> Callable[..., Any]:
    if spec.sdk == "prime-runs":
        import prime_runs

        return prime_runs.init
    import prime_otel

    extra: dict[str, Any] = {} if spec.sinks is None else {"sinks": spec.sinks}
    return lambda **kwargs: prime_otel.init(**extra, **kwargs)


def training_spec(spec: ChildSpec) -> Any:
    import prime_runs

    import prime_otel

    spec_type = prime_runs.TrainingSpec if spec.sdk == "prime-runs" else prime_otel.TrainingSpec
    return spec_type(max_steps=spec.steps, batch_size=spec.per_step)


def metrics_row(step: int) -> dict[str, Any]:
    return {"loss": 1.0 / step, "reward": 0.5, "entropy": 0.3, "lr": 1e-5, "perf/tokens_per_s": 1234.5}


class ThreadProfiles:
    """cProfile of the calling thread and of every thread started while enabled (the SDKs' uploaders)."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._profiles: list[cProfile.Profile] = []

    def enable(self) -> None:
        threading.setprofile(self._enable_in_new_thread)
        self._enable_here()

    def _enable_in_new_thread(self, frame: Any, event: str, arg: Any) -> None:
        sys.setprofile(None)
        self._enable_here()

    def _enable_here(self) -> None:
        profile = cProfile.Profile()
        self._profiles.append(profile)
        profile.enable()

    def dump(self) -> None:
        threading.setprofile(None)
        self._profiles[0].disable()
        stats = pstats.Stats(self._profiles[0])
        for profile in self._profiles[1:]:
            stats.add(profile)
        stats.dump_stats(self._path)


class Measured:
    """The measured span: CPU and wall from ``start()`` to ``stop()``, optionally under cProfile."""

    def __init__(self, profile_path: str | None) -> None:
        self._profiles = ThreadProfiles(profile_path) if profile_path else None
        self._cpu = 0.0
        self._wall = 0.0

    def start(self) -> None:
        self._cpu, self._wall = cpu_seconds(), time.perf_counter()
        if self._profiles is not None:
            self._profiles.enable()

    def elapsed_cpu(self) -> float:
        return cpu_seconds() - self._cpu

    def elapsed_wall(self) -> float:
        return time.perf_counter() - self._wall

    def stop(self) -> dict[str, float]:
        measured = {"cpu_s": cpu_seconds() - self._cpu, "wall_s": time.perf_counter() - self._wall}
        if self._profiles is not None:
            self._profiles.dump()
        return measured


def _finish_measured(run: Any, span: Measured, build_cpu: float, init_cpu: float) -> dict[str, Any]:
    """Finishes ``run``, ends the measured span and gives what every eval and training child reports."""
    finish_began = time.perf_counter()
    run.finish()
    finish_s = time.perf_counter() - finish_began
    return {
        **span.stop(),
        "run_id": run.id,
        "build_cpu_s": build_cpu,
        "init_cpu_s": init_cpu,
        "finish_s": finish_s,
        "errors": list(run.errors),
    }


def run_eval(spec: ChildSpec) -> dict[str, Any]:
    init = sdk_init(spec)
    build_start = cpu_seconds()
    episodes = eval_episodes(spec.episodes)
    build_cpu = cpu_seconds() - build_start
    settle()
    span = Measured(spec.profile)
    span.start()
    run = init(**EVAL_RUN)
    init_cpu = span.elapsed_cpu()
    latencies = []
    for episode in episodes:
        began = time.perf_counter_ns()
        run.log_episodes([episode])
        latencies.append(time.perf_counter_ns() - began)
    return {
        **_finish_measured(run, span, build_cpu, init_cpu),
        "logged": len(episodes),
        "log_episodes_ns": latency_summary(latencies),
    }


def run_train(spec: ChildSpec) -> dict[str, Any]:
    init = sdk_init(spec)
    build_start = cpu_seconds()
    batches = train_steps(spec.steps, spec.per_step)
    build_cpu = cpu_seconds() - build_start
    rows = [metrics_row(step) for step in range(1, spec.steps + 1)]
    settle()
    span = Measured(spec.profile)
    span.start()
    run = init(kind="train", model=TRAIN_MODEL, team_id=TEAM_ID, training=training_spec(spec))
    init_cpu = span.elapsed_cpu()
    episode_latencies, metric_latencies = [], []
    for step, (batch, row) in enumerate(zip(batches, rows, strict=True), start=1):
        began = time.perf_counter_ns()
        run.log_episodes(batch)
        episode_latencies.append(time.perf_counter_ns() - began)
        began = time.perf_counter_ns()
        run.log_metrics(row, step=step)
        metric_latencies.append(time.perf_counter_ns() - began)
    return {
        **_finish_measured(run, span, build_cpu, init_cpu),
        "logged": sum(len(batch) for batch in batches),
        "steps": spec.steps,
        "log_episodes_ns": latency_summary(episode_latencies),
        "log_metrics_ns": latency_summary(metric_latencies),
    }


def run_paced_eval(spec: ChildSpec) -> dict[str, Any]:
    """One episode per call at ``spec.rate`` calls a second (as verifiers logs finished rollouts); how long
    ``finish()`` takes after the last call."""
    init = sdk_init(spec)
    episodes = eval_episodes(spec.episodes)
    settle()
    run = init(**{**EVAL_RUN, "name": "bench-paced-eval"})
    began = time.perf_counter()
    for index, episode in enumerate(episodes):
        pause = began + index / spec.rate - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        run.log_episodes([episode])
    logging_s = time.perf_counter() - began
    finish_began = time.perf_counter()
    run.finish()
    return {
        "run_id": run.id,
        "logged": len(episodes),
        "logging_s": logging_s,
        "finish_s": time.perf_counter() - finish_began,
        "errors": list(run.errors),
    }


def run_threaded_train(spec: ChildSpec) -> dict[str, Any]:
    """``spec.threads`` trainer threads each log their own keys for every one of ``spec.steps`` steps."""
    init = sdk_init(spec)
    settle()
    run = init(kind="train", model=TRAIN_MODEL, team_id=TEAM_ID, training=training_spec(spec))
    began = time.perf_counter()

    def trainer(index: int) -> None:
        for step in range(1, spec.steps + 1):
            run.log_metrics({f"thread_{index}/loss": 1.0 / step, f"thread_{index}/tokens": 1000 * step}, step=step)

    threads = [threading.Thread(target=trainer, args=(index,)) for index in range(spec.threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    logging_s = time.perf_counter() - began
    finish_began = time.perf_counter()
    run.finish()
    return {
        "run_id": run.id,
        "steps": spec.steps,
        "logging_s": logging_s,
        "finish_s": time.perf_counter() - finish_began,
        "errors": list(run.errors),
    }


SLOW_CALL_NS = 10_000_000
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024


def rss_kib() -> int:
    """Resident set size now (``ru_maxrss`` only ever grows)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE_KIB


def spool_bytes(run_folder: Path) -> int:
    """Bytes of every spool of a run folder (the owner's and forked processes'); 0 without one (prime-runs)."""
    total = 0
    for spool in run_folder.glob("spool*"):
        for entry in os.scandir(spool) if spool.is_dir() else ():
            try:
                total += entry.stat().st_size if entry.is_file() else 0
            except FileNotFoundError:
                continue  # removed while we looked
    return total


class Progress:
    """Every ``window`` calls: RSS, the spool on disk, and that window's call latencies."""

    def __init__(self, window: int, began: float) -> None:
        self.samples: list[dict[str, Any]] = []
        self.latencies = array("q")
        self._window = max(1, window)
        self._began = began
        self._run_folder: Path | None = None

    def watch(self, run_folder: Path) -> None:
        self._run_folder = run_folder

    def add(self, nanoseconds: int) -> None:
        self.latencies.append(nanoseconds)
        if len(self.latencies) % self._window == 0:
            self._sample()

    def halves(self) -> list[dict[str, Any]]:
        """The latencies of the first and the second half of the calls (a trend robust to bursts)."""
        middle = len(self.latencies) // 2
        parts = (self.latencies[:middle], self.latencies[middle:]) if middle else ()
        return [{**latency_summary(part), "slow_calls": sum(1 for ns in part if ns >= SLOW_CALL_NS)} for part in parts]

    def _sample(self) -> None:
        window = self.latencies[-self._window :]
        self.samples.append(
            {
                "calls": len(self.latencies),
                "elapsed_s": time.perf_counter() - self._began,
                "rss_kib": rss_kib(),
                "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                "spool_bytes": spool_bytes(self._run_folder) if self._run_folder else 0,
                "latency": latency_summary(window),
                "slow_calls": sum(1 for ns in window if ns >= SLOW_CALL_NS),
            }
        )


def run_spool(spec: ChildSpec) -> dict[str, Any]:
    """``spec.episodes`` JSON records, one ``log_episodes`` call each, made one at a time (never all in memory)."""
    init = sdk_init(spec)
    json_episode(0)  # the fixture files are read before the span
    settle()
    rss_before = rss_kib()
    span = Measured(spec.profile)
    span.start()
    began = time.perf_counter()
    progress = Progress(spec.window, began)
    run = init(**{**EVAL_RUN, "name": "bench-spool"})
    init_s = time.perf_counter() - began
    run_folder = Path(os.environ["PRIME_RUNS_DIR"]) / run.id
    progress.watch(run_folder)
    for index in range(spec.episodes):
        record = json_episode(index)
        call_began = time.perf_counter_ns()
        run.log_episodes([record])
        progress.add(time.perf_counter_ns() - call_began)
    finish_began = time.perf_counter()
    run.finish(timeout=spec.finish_timeout)
    finish_s = time.perf_counter() - finish_began
    measured = span.stop()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # before summarising every latency
    report = getattr(run, "report", None)
    return {
        **measured,
        "run_id": run.id,
        "peak_rss_kib": peak,
        "rss_before_init_kib": rss_before,
        "init_s": init_s,
        "logging_s": finish_began - began - init_s,
        "finish_s": finish_s,
        "logged": spec.episodes,
        "windows": progress.samples,
        "log_episodes_ns": latency_summary(progress.latencies),
        "halves": progress.halves(),
        "slow_calls": sum(1 for ns in progress.latencies if ns >= SLOW_CALL_NS),
        "slow_calls_s": sum(ns for ns in progress.latencies if ns >= SLOW_CALL_NS) / 1e9,
        "spool_bytes_at_end": spool_bytes(run_folder),
        "dropped_records": run.dropped_records,
        "failed_records": dict(run.failed_records),
        "report": report.to_dict() if report is not None else None,
        "errors": list(run.errors),
    }


def folder_bytes(folder: Path) -> int:
    """Bytes of every file under ``folder`` (0 when it is gone)."""
    total = 0
    for path in folder.rglob("*") if folder.exists() else ():
        try:
            total += path.stat().st_size if path.is_file() else 0
        except FileNotFoundError:
            continue
    return total


def run_spool_disk(spec: ChildSpec) -> dict[str, Any]:
    """``spec.episodes`` JSON records in calls of ``spec.batch``, paced at ``spec.rate`` calls per second; the
    spool's bytes on disk sampled every 0.1 s (peak), the run folder after ``finish()``, and the records' own size
    (their compact JSON)."""
    run = sdk_init(spec)(**{**EVAL_RUN, "name": "bench-spool-disk"})
    runs_dir = Path(os.environ["PRIME_RUNS_DIR"])
    run_folder = runs_dir / run.id
    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.wait(0.1):
            peak = max(peak, spool_bytes(run_folder))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    record_bytes = 0
    began = time.perf_counter()
    for call, first in enumerate(range(0, spec.episodes, spec.batch)):
        records = [json_episode(index) for index in range(first, min(first + spec.batch, spec.episodes))]
        record_bytes += sum(len(json.dumps(r, separators=(",", ":")).encode()) for r in records)
        run.log_episodes(records)
        if spec.rate > 0:
            time.sleep(max(0.0, began + (call + 1) / spec.rate - time.perf_counter()))
    logging_s = time.perf_counter() - began
    report = run.finish(timeout=spec.finish_timeout)
    stop.set()
    sampler.join()
    peak = max(peak, spool_bytes(run_folder))
    return {
        "run_id": run.id,
        "logged": spec.episodes,
        "logging_s": logging_s,
        "record_bytes": record_bytes,
        "peak_spool_bytes": peak,
        "spool_bytes_at_end": spool_bytes(run_folder),
        "run_folder_bytes_at_end": folder_bytes(run_folder),
        "complete": bool(report is not None and report.complete),
        "dropped_records": run.dropped_records,
        "failed_records": dict(run.failed_records),
        "report": report.to_dict() if report is not None else None,
    }


def arrow_pool() -> dict[str, Any]:
    """Arrow's default memory pool: its backend, the bytes it holds now and its peak (zeros before pyarrow is
    imported)."""
    pyarrow = sys.modules.get("pyarrow")
    if pyarrow is None:
        return {"arrow_pool": None, "arrow_bytes": 0, "arrow_peak_bytes": 0}
    pool = pyarrow.default_memory_pool()
    return {
        "arrow_pool": pool.backend_name,
        "arrow_bytes": pool.bytes_allocated(),
        "arrow_peak_bytes": pool.max_memory(),
    }


def uploader_backlog(run: Any) -> dict[str, int]:
    """Ours: what the uploaders hold (records accepted, not yet delivered; their estimated bytes)."""
    parts = getattr(run, "_parts", None)
    uploaders = [u for u in (getattr(parts, "processor", None), getattr(parts, "metrics", None)) if u is not None]
    return {
        "spilled_records": sum(u.spilled_records for u in uploaders),
        "queued_records": sum(u.queued_records for u in uploaders),
        "held_bytes": sum(u.held_bytes for u in uploaders),
    }


def run_memory(spec: ChildSpec) -> dict[str, Any]:
    """A training loop: every step makes ``per_step`` fresh episodes (as a trainer does), logs them and one
    metrics row, then sleeps ``pause_s``; every ``window`` steps (and at the last) it samples RSS, peak RSS,
    Arrow's pool and (ours) the uploaders' backlog. Fresh objects per step: a backlog keeps them alive."""
    init = sdk_init(spec)
    train_batch(0, spec.per_step)  # imports and the seed records, before the span
    settle()
    rss_before = rss_kib()
    span = Measured(spec.profile)
    span.start()
    run = init(kind="train", model=TRAIN_MODEL, team_id=TEAM_ID, training=training_spec(spec))
    samples = []
    episode_latencies, metric_latencies = array("q"), array("q")
    for step in range(1, spec.steps + 1):
        batch = train_batch(step, spec.per_step)
        began = time.perf_counter_ns()
        run.log_episodes(batch)
        episode_latencies.append(time.perf_counter_ns() - began)
        row = metrics_row(step)
        began = time.perf_counter_ns()
        run.log_metrics(row, step=step)
        metric_latencies.append(time.perf_counter_ns() - began)
        del batch
        if spec.pause_s:
            time.sleep(spec.pause_s)
        if step % spec.window == 0 or step == spec.steps:
            samples.append(
                {
                    "step": step,
                    "elapsed_s": span.elapsed_wall(),
                    "rss_kib": rss_kib(),
                    "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                    **arrow_pool(),
                    **uploader_backlog(run),
                }
            )
    result = _finish_measured(run, span, 0.0, 0.0)
    result.update(
        {
            "spool_bytes_at_end": spool_bytes(Path(os.environ["PRIME_RUNS_DIR"]) / run.id),
            "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            "rss_before_init_kib": rss_before,
            "arrow_after_finish": arrow_pool(),
            "logged": spec.steps * spec.per_step,
            "steps": spec.steps,
            "windows": samples,
            "log_episodes_ns": latency_summary(episode_latencies),
            "log_metrics_ns": latency_summary(metric_latencies),
            "logging_s": (sum(episode_latencies) + sum(metric_latencies)) / 1e9,
            "dropped_records": run.dropped_records,
            "failed_records": dict(getattr(run, "failed_records", {})),
        }
    )
    return result


def settle() -> None:
    """Move the prebuilt workload out of the collector's generations: scanning it is part of building it."""
    gc.collect()
    gc.freeze()


WORKLOADS: Mapping[str, Callable[[ChildSpec], dict[str, Any]]] = {
    "eval": run_eval,
    "train": run_train,
    "spool": run_spool,
    "spool_disk": run_spool_disk,
    "memory": run_memory,
    "paced_eval": run_paced_eval,
    "threaded_train": run_threaded_train,
}


def main(argv: list[str]) -> int:
    spec = ChildSpec.parse(argv[1])
    result = WORKLOADS[spec.workload](spec)
    result.setdefault("peak_rss_kib", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
