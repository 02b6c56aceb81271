"""The spool bounds the backlog, not the history: what every sink has is freed while the run goes on, the cap
counts only what is not delivered yet, and a fully delivered run leaves nothing of its spool on disk."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

import prime_otel as po
from prime_otel.testing import LocalPlatform, start_local_platform
from tests._fixtures import numbered_record
from tests._platform import point_sdk_at

CAP = 2_000_000
BATCH = 50


@pytest.fixture
def fast_platform(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    platform = start_local_platform(tmp_path / "platform", samples_rate_limit=1_000_000, metrics_rate_limit=1_000_000)
    point_sdk_at(platform, monkeypatch, tmp_path)
    yield platform
    platform.stop()


def spool_bytes(run: po.Run) -> int:
    folder = Path(os.environ["PRIME_RUNS_DIR"]) / run.id
    return sum(path.stat().st_size for path in folder.glob("spool*/log-*.jsonl"))


def spool_folders(run: po.Run) -> list[Path]:
    return sorted((Path(os.environ["PRIME_RUNS_DIR"]) / run.id).glob("spool*"))


def log_healthy(run: po.Run, start: int, stop: int) -> int:
    """Log episodes ``start`` to ``stop`` a batch at a time, each delivered before the next; the spool's largest
    size on disk after a batch."""
    peak = 0
    for first in range(start, stop, BATCH):
        run.log_episodes([numbered_record(i) for i in range(first, min(first + BATCH, stop))])
        assert run.flush(timeout=30)
        peak = max(peak, spool_bytes(run))
    return peak


def test_a_healthy_run_logging_many_times_the_cap_keeps_every_record_and_leaves_no_spool(
    fast_platform: LocalPlatform,
) -> None:
    total = 1_200  # about 7 MB of episodes: more than three times the cap
    run = po.init(name="past-the-cap", environments=["gsm8k"], model="m", spool_max_bytes=CAP)
    peak = log_healthy(run, 0, total)
    report = run.finish()

    assert report is not None and report.complete, report.render()
    assert [(sink.sink, sink.delivered, sink.dropped, sink.failed) for sink in report.sinks] == [
        ("traces", total, 0, 0),
        ("eval_samples", total, 0, 0),
    ]
    assert "spool full" not in report.render()
    assert peak <= CAP
    assert spool_folders(run) == []
    snapshot = fast_platform.inspect.run(run.id)
    assert snapshot["num_episodes"] == total and snapshot["num_samples"] == total


def test_an_outage_after_the_run_logged_past_the_cap_is_still_kept_whole(fast_platform: LocalPlatform) -> None:
    """Before the outage the run logged three times the cap, all delivered; the outage's backlog (well under the
    cap) is kept and replayed, every record lands once."""
    healthy, outage = 1_000, 100
    run = po.init(name="outage-past-the-cap", environments=["gsm8k"], model="m", spool_max_bytes=CAP)
    log_healthy(run, 0, healthy)
    for path in ("/api/v1/evaluations/*/samples", "/api/v1/traces"):
        fast_platform.inspect.add_fault(
            method="POST", path=path, action="fail_before", status=429, retry_after=0, times=None
        )
    ends = threading.Timer(3.0, fast_platform.inspect.clear_faults)
    ends.start()
    for first in range(healthy, healthy + outage, 10):
        run.log_episodes([numbered_record(i) for i in range(first, first + 10)])
    ends.join()
    report = run.finish()

    total = healthy + outage
    assert report is not None and report.complete, report.render()
    assert all(sink.delivered == total and sink.dropped == 0 for sink in report.sinks), report.render()
    snapshot = fast_platform.inspect.run(run.id)
    assert snapshot["num_episodes"] == total and snapshot["num_samples"] == total
    assert spool_folders(run) == []


def test_a_run_that_ends_with_records_undelivered_keeps_them_in_its_spool(fast_platform: LocalPlatform) -> None:
    fast_platform.inspect.add_fault(method="POST", path="/api/v1/traces", action="fail_before", status=503, times=None)
    run = po.init(name="kept-for-sync", environments=["gsm8k"], model="m", spool_max_bytes=CAP)
    run.log_episodes([numbered_record(i) for i in range(20)])
    report = run.finish(timeout=2)

    assert report is not None and not report.complete
    assert [folder.name for folder in spool_folders(run)] == ["spool-records"]
    assert spool_bytes(run) > 0


def test_an_online_run_keeps_its_write_ahead_log_in_the_user_cache_and_removes_it_once_delivered(
    fast_platform: LocalPlatform,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Without PRIME_RUNS_DIR an online run writes nothing where it runs: its log lives in the per-user cache,
    goes away when everything was delivered, and stays (named in the finish line) when something was not."""
    cache, workdir = tmp_path / "cache", tmp_path / "workdir"
    workdir.mkdir()
    monkeypatch.delenv("PRIME_RUNS_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.chdir(workdir)
    delivered = po.init(name="cache-delivered", environments=["gsm8k"], model="m")
    delivered.log_episodes([numbered_record(i, "a") for i in range(5)])
    assert (cache / "prime-otel" / "runs" / delivered.id / "spool-records").is_dir()
    report = delivered.finish()
    assert report is not None and report.complete, report.render()
    assert not (cache / "prime-otel" / "runs" / delivered.id).exists()

    fast_platform.inspect.add_fault(method="POST", path="/api/v1/traces", action="fail_before", status=503, times=None)
    kept = po.init(name="cache-kept", environments=["gsm8k"], model="m")
    kept.log_episodes([numbered_record(i, "b") for i in range(5)])
    capsys.readouterr()
    kept.finish(timeout=2)

    folder = cache / "prime-otel" / "runs" / kept.id
    assert (folder / "spool-records").is_dir() and (folder / "run.json").is_file()
    assert f"prime-otel sync {folder}" in capsys.readouterr().err
    assert list(workdir.iterdir()) == []
