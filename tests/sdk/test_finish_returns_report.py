"""``finish()`` (and ``fail()``) always hand back the run's delivery report: online, offline or disabled, the
first call and every later one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import prime_otel as po
from prime_otel.testing import LocalPlatform
from tests._fixtures import fresh_records


def test_an_online_run_reports_its_delivery_and_a_second_finish_returns_the_same_report(
    shared_platform_env: LocalPlatform,
) -> None:
    run = po.init(name="finish-report", environments=["gsm8k"], model="m")
    run.log_episodes(fresh_records("eval", 2))
    report = run.finish()
    assert report.closure is po.Closure.CONFIRMED
    assert {sink.sink: sink.delivered for sink in report.sinks}["traces"] == 2
    assert run.finish() is report
    assert run.fail("too late") is report


@pytest.mark.parametrize("mode", ["offline", "disabled"])
def test_a_run_that_never_reaches_the_platform_still_reports(
    mode: po.RunMode, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRIME_RUNS_DIR", os.fspath(tmp_path))
    run = po.init(name="finish-report", environments=["gsm8k"], mode=mode)
    report = run.fail(RuntimeError("the producer gave up"))
    assert report.status == "failed"
    assert report.closure is (po.Closure.WRITTEN_TO_FOLDER if mode == "offline" else po.Closure.NOT_TRACKED)
    assert run.finish() is report
