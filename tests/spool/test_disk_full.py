"""A disk that fills during the run: the spool stops keeping records, with the loss counted and its reason named;
the producer's calls never raise ``OSError``, the uploader keeps delivering, ``finish()`` never raises, and a later
sync never resends a record a sink already has."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import prime_otel as po
from prime_otel.processors import _spool
from prime_otel.run import _init
from prime_otel.testing import LocalPlatform
from tests._disk import tmpfs
from tests._fixtures import fresh_records
from tests._platform import point_sdk_at

ROOT = Path(__file__).resolve().parents[2]
TRACES = "/api/v1/traces"
SAMPLES = "/api/v1/evaluations/*/samples"
DISK_FULL = "spool disk full"


def sink(report: po.DeliveryReport, name: str) -> po.SinkReport:
    return next(s for s in report.sinks if s.sink == name)


def no_space(*_: object, **__: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def sync(folder: Path, platform: LocalPlatform) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **platform.env, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "prime_otel.cli", "sync", str(folder)]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def platform(local_platform_session: LocalPlatform, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    point_sdk_at(local_platform_session, monkeypatch, tmp_path)
    yield local_platform_session
    local_platform_session.reset()


def test_a_disk_that_fills_mid_run_costs_only_counted_records_and_sync_never_resends(
    platform: LocalPlatform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real 256 KiB filesystem as PRIME_RUNS_DIR, Prime Traces refusing every upload: what the spool kept waits
    for a sync, what it could not keep is counted failed; the sample table gets every record, once."""
    total = 60  # about 360 kB of log: the disk fills part way
    with tmpfs(tmp_path / "small-disk", 256) as mount:
        monkeypatch.setenv("PRIME_RUNS_DIR", str(mount))
        platform.inspect.add_fault(
            method="POST", path=TRACES, action="fail_before", status=429, retry_after=0, times=None
        )
        run = po.init(environments=["gsm8k"], model="m")
        for _ in range(0, total, 5):
            run.log_episodes(fresh_records("eval", 5))
            assert run.flush(30)
        report = run.finish(timeout=3)
        copied = tmp_path / "copied" / run.id
        shutil.copytree(mount / run.id, copied)

    assert report is not None and not report.complete
    traces, samples = sink(report, "traces"), sink(report, "eval_samples")
    assert traces.delivered == 0 and traces.failed > 0 and traces.failed + traces.pending == total
    assert traces.failure_reasons == {DISK_FULL: traces.failed}
    assert samples.delivered == total and samples.complete  # the uploader kept going after the disk filled
    assert run.failed_records == {"traces": total}
    assert any(DISK_FULL in note for note in report.notes)
    assert report.closure is po.Closure.CONFIRMED  # the full disk did not keep the run from closing
    assert platform.inspect.run(run.id)["status"] in ("PROCESSING", "COMPLETED")
    assert DISK_FULL in capsys.readouterr().err
    assert platform.inspect.run(run.id)["num_samples"] == total

    platform.inspect.clear_faults()
    synced = sync(copied, platform)
    assert synced.returncode == 0, synced.stdout + synced.stderr
    snapshot = platform.inspect.run(run.id)
    assert snapshot["num_episodes"] == traces.pending  # what the spool kept, delivered by the sync
    assert snapshot["num_samples"] == total  # and nothing resent to the append-only table


def test_a_ledger_that_cannot_be_saved_sets_the_spool_aside_and_counts_its_records_lost(
    platform: LocalPlatform, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without a ledger on disk a sync could resend what the sample table already has: the spool is moved out of
    every sync's reach and what it still held for Prime Traces counts as failed, 'spool disk full'."""
    monkeypatch.setattr(_spool, "write_json_atomically", no_space)
    platform.inspect.add_fault(method="POST", path=TRACES, action="fail_before", status=429, retry_after=0, times=None)
    run = po.init(environments=["gsm8k"], model="m")
    run.log_episodes(fresh_records("eval", 4))
    report = run.finish(timeout=3)

    assert report is not None and report.folder is not None
    traces = sink(report, "traces")
    assert (traces.failed, traces.pending, traces.failure_reasons.get(DISK_FULL)) == (4, 0, 4)
    assert run.failed_records == {"traces": 4}
    assert "4 failed (" in traces.line() and DISK_FULL in traces.line()
    folder = Path(report.folder)
    assert not list(folder.glob("spool*")) and (folder / "unsynced-spool-records").is_dir()
    assert "unsynced-spool-records" in capsys.readouterr().err

    platform.inspect.clear_faults()
    monkeypatch.undo()
    synced = sync(folder, platform)
    assert synced.returncode == 0, synced.stdout + synced.stderr
    snapshot = platform.inspect.run(run.id)
    assert snapshot["num_episodes"] == 0 and snapshot["num_samples"] == 4


def test_records_the_producer_spills_onto_a_full_disk_are_dropped_with_that_reason(
    platform: LocalPlatform, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The uploader is held up by a slow platform (the sinks' lanes are full and the spool takes nothing), the queue
    fills and the producer spills: with no space left every spilled batch is dropped and counted, and the
    producer's calls still return normally."""
    monkeypatch.setattr(_spool, "_append_whole", no_space)
    platform.inspect.add_fault(method="POST", path=SAMPLES, action="delay", delay_s=1.0, times=None)
    platform.inspect.add_fault(method="POST", path="/api/v1/traces", action="delay", delay_s=1.0, times=None)
    total = 2000  # more than the sinks' lanes and the queue hold while delayed requests are out
    run = po.init(environments=["gsm8k"], model="m")
    for record in fresh_records("eval", total):
        run.log_episodes([record])
    report = run.finish(timeout=60)

    assert report is not None
    dropped = run.dropped_records
    assert dropped > 0
    for name in ("traces", "eval_samples"):
        entry = sink(report, name)
        assert (entry.dropped, entry.dropped_reasons) == (dropped, {DISK_FULL: dropped})
        assert entry.delivered == total - dropped
    assert f"{dropped} dropped ({DISK_FULL}: {dropped})" in capsys.readouterr().err
    snapshot = platform.inspect.run(run.id)
    assert snapshot["num_samples"] == total - dropped and snapshot["num_episodes"] == total - dropped


def test_a_spool_that_cannot_be_opened_after_registering_leaves_the_run_going_without_one(
    platform: LocalPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder passed its check, then failed (the disk filled in between): the run is registered already, so
    it goes on without a spool and says why, instead of leaving a registered run behind an OSError."""
    monkeypatch.setattr(_init, "RunSpool", no_space)
    run = po.init(environments=["gsm8k"], model="m")
    run.log_episodes(fresh_records("eval", 3))
    report = run.finish()

    assert report is not None and report.complete
    assert any("opening the run's spool" in error and "No space left" in error for error in run.errors)
    snapshot = platform.inspect.run(run.id)
    assert snapshot["status"] in ("PROCESSING", "COMPLETED") and snapshot["num_samples"] == 3
