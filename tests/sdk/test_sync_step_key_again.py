"""A resumed ``prime-otel sync`` of an offline training run confirms again the step object key an earlier sync
recorded before its confirm: a key that confirms is the step's one object (nothing uploaded again); a key the
platform refuses was never registered, so the step is uploaded afresh, once. Either way each step's rows are on the
platform once. Syncs run the ``prime-otel`` command's entry point against the local platform over HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import prime_otel as po
from prime_otel.cli import main
from prime_otel.testing import LocalPlatform, start_local_platform
from tests._fixtures import fresh_records
from tests._platform import isolate_sdk

TEAM = "team_key_again"
CONFIRM = "/api/v1/rft/samples/confirm"
STEPS, PER_STEP = 2, 3


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlatform]:
    with start_local_platform(tmp_path_factory.mktemp("key-again"), teams=[TEAM]) as server:
        yield server


@pytest.fixture(autouse=True)
def runs_dir(platform: LocalPlatform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    isolate_sdk(platform, monkeypatch, tmp_path / "home", tmp_path / "runs", team=TEAM)
    yield
    platform.inspect.clear_faults()


def offline_training(name: str) -> Path:
    run = po.init(mode="offline", kind="train", name=name, environments=["gsm8k"], model="m", samples_step_interval=1)
    for step in range(1, STEPS + 1):
        records = fresh_records("train", PER_STEP)
        for record in records:
            record["run"]["work"]["step"] = step
        run.log_episodes(records)
    run.finish()
    return Path(run.folder or "")


def sync(folder: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    returncode = main(["sync", str(folder)])
    captured = capsys.readouterr()
    return returncode, captured.out + captured.err


def first_sync_dies_before_any_confirm(
    platform: LocalPlatform, folder: Path, capsys: pytest.CaptureFixture[str]
) -> str:
    """Every confirm of the first sync fails with a 503 (nothing registered): step 1's key stays recorded."""
    platform.inspect.add_fault(method="POST", path=CONFIRM, action="fail_before", status=503, retry_after=0, times=None)
    returncode, output = sync(folder, capsys)
    platform.inspect.clear_faults()
    assert returncode != 0, output
    steps = json.loads((folder / "sync.json").read_text())["steps"]
    assert steps["1"]["confirmed"] is False and steps["1"]["key"], steps
    run_id = json.loads((folder / "sync.json").read_text())["platform_id"]
    assert platform.inspect.steps(run_id) == []
    return str(run_id)


def puts(platform: LocalPlatform, run_id: str) -> int:
    return sum(
        1
        for r in platform.inspect.requests(limit=10_000)
        if r["method"] == "PUT" and r["path"].startswith(f"/_objects/rft-samples/{run_id}/")
    )


def one_object_per_step(platform: LocalPlatform, run_id: str) -> list[tuple[int, int, int]]:
    return [(entry["step"], entry["num_rows"], len(entry["objects"])) for entry in platform.inspect.steps(run_id)]


def test_a_recorded_key_is_confirmed_again_and_the_step_is_not_uploaded_twice(
    platform: LocalPlatform, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = offline_training("key-again-confirmed")
    run_id = first_sync_dies_before_any_confirm(platform, folder, capsys)
    before = puts(platform, run_id)

    returncode, output = sync(folder, capsys)

    assert returncode == 0, output
    assert puts(platform, run_id) == before + 1  # step 2 only: step 1's recorded object is confirmed as it is
    assert one_object_per_step(platform, run_id) == [(step, PER_STEP, 1) for step in range(1, STEPS + 1)]


def test_a_recorded_key_the_platform_refuses_is_uploaded_afresh_once(
    platform: LocalPlatform, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = offline_training("key-again-refused")
    run_id = first_sync_dies_before_any_confirm(platform, folder, capsys)
    platform.inspect.add_fault(method="POST", path=CONFIRM, action="fail_before", status=400, message="Unknown key")
    before = puts(platform, run_id)

    returncode, output = sync(folder, capsys)

    assert returncode == 0, output
    assert "refused" not in output, output
    assert puts(platform, run_id) == before + 2  # step 1 afresh, and step 2
    assert one_object_per_step(platform, run_id) == [(step, PER_STEP, 1) for step in range(1, STEPS + 1)]
