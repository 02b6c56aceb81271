"""Zero-code settings: every ``init()`` argument a zero-code producer needs has an environment variable, offline
zero-code runs keep their records for a later sync, and a wrong or missing variable is named in one line."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import prime_otel
from prime_otel import autoinstrument
from prime_otel.errors import ConfigurationError
from prime_otel.testing import LocalPlatform

PRODUCER = Path(__file__).with_name("producer.py")
INSTRUMENT = Path(sys.executable).with_name("opentelemetry-instrument")
PRIME_OTEL = Path(sys.executable).with_name("prime-otel")
FIXTURE_IDS = {
    json.loads((PRODUCER.parent.parent / "fixtures" / "eval" / f"episode-{n}.json").read_text())["id"]
    for n in (1, 2, 3)
}


def zero_code(home: Path, variables: dict[str, str], ending: str = "clean") -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        "HOME": str(home),
        "PRIME_RUNS_DIR": str(home / "runs"),
        "OTEL_PYTHON_DISTRO": "prime",
        "OTEL_PYTHON_CONFIGURATOR": "prime",
        "PRIME_RUN_KIND": "eval",
        "PRIME_RUN_MODEL": "Qwen/Qwen3-8B",
        "PRIME_RUN_FRAMEWORK": "verifiers",
        **variables,
    }
    return subprocess.run(
        [str(INSTRUMENT), sys.executable, str(PRODUCER), ending], env=env, capture_output=True, text=True, timeout=120
    )


def only_run_named(platform: LocalPlatform, name: str) -> dict[str, Any]:
    [run] = [run for run in platform.inspect.runs() if run["name"] == name]
    return platform.inspect.run(run["id"])


def test_an_offline_zero_code_run_writes_its_episodes_to_the_folder_and_a_sync_delivers_them(
    local_platform_session: LocalPlatform, tmp_path: Path
) -> None:
    result = zero_code(
        tmp_path,
        {"PRIME_RUNS_MODE": "offline", "PRIME_RUN_NAME": "zero-code-offline", "PRIME_RUN_ENVIRONMENTS": "gsm8k"},
    )
    assert result.returncode == 0, result.stderr
    [folder] = [path for path in (tmp_path / "runs").iterdir() if path.is_dir() and not path.name.startswith(".")]
    written = [json.loads(line) for line in (folder / "episodes.jsonl").read_text().splitlines()]
    assert {record["id"] for record in written} == FIXTURE_IDS
    assert json.loads((folder / "run.json").read_text())["status"] == "completed"
    assert "delivered       3" in result.stderr  # the offline line of the report, not "delivered 0"

    synced = subprocess.run(
        [str(PRIME_OTEL), "sync", str(folder)],
        env={**os.environ, "HOME": str(tmp_path), **local_platform_session.env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert synced.returncode == 0, synced.stderr
    snapshot = only_run_named(local_platform_session, "zero-code-offline")
    assert snapshot["num_episodes"] == 3
    assert snapshot["status"] in ("PROCESSING", "COMPLETED")


def test_prime_otel_sinks_chooses_where_a_zero_code_eval_writes(
    local_platform_session: LocalPlatform, tmp_path: Path
) -> None:
    variables = {"PRIME_OTEL_SINKS": "traces", "PRIME_RUN_NAME": "zero-code-sinks", "PRIME_RUN_ENVIRONMENTS": "gsm8k"}
    result = zero_code(tmp_path, {**local_platform_session.env, **variables})
    assert result.returncode == 0, result.stderr
    snapshot = only_run_named(local_platform_session, "zero-code-sinks")
    assert (snapshot["num_episodes"], snapshot["num_samples"]) == (3, 0)  # the default, dual, writes 3 samples too


@pytest.fixture
def platform_environment(
    local_platform_session: LocalPlatform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> pytest.MonkeyPatch:
    """This process pointed at the local platform, as the zero-code entry would see it."""
    for name, value in {**local_platform_session.env, "HOME": str(tmp_path), "PRIME_RUNS_DIR": str(tmp_path)}.items():
        monkeypatch.setenv(name, value)
    for name in list(os.environ):
        if name.startswith(("PRIME_RUN_", "PRIME_OTEL_")) or name == "PRIME_RUNS_MODE":
            monkeypatch.delenv(name)
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # the zero-code entry chains its own
    return monkeypatch


def test_description_tags_and_attach_are_read_from_the_environment(
    local_platform_session: LocalPlatform, platform_environment: pytest.MonkeyPatch
) -> None:
    from tests._fixtures import load_records

    for name, value in {
        "PRIME_RUN_NAME": "zero-code-described",
        "PRIME_RUN_ENVIRONMENTS": "gsm8k",
        "PRIME_RUN_MODEL": "Qwen/Qwen3-8B",
        "PRIME_RUN_DESCRIPTION": "nightly gsm8k check",
        "PRIME_RUN_TAGS": "nightly, gsm8k",
    }.items():
        platform_environment.setenv(name, value)
    described = autoinstrument._open_from_environment()
    assert described is not None
    described.finish()
    snapshot = local_platform_session.inspect.run(described.id)
    assert snapshot["tags"] == ["nightly", "gsm8k"]
    assert "nightly gsm8k check" in json.dumps(snapshot)

    hosted = local_platform_session.inspect.hosted_run("eval", name="zero-code-attached", model="Qwen/Qwen3-8B")
    platform_environment.setenv("PRIME_API_KEY", hosted["token"])
    platform_environment.setenv("PRIME_RUN_ATTACH", hosted["id"])
    attached = autoinstrument._open_from_environment()
    assert attached is not None and attached.id == hosted["id"]
    attached.log_episodes(load_records("eval"))
    attached.finish()
    snapshot = local_platform_session.inspect.run(hosted["id"])
    assert snapshot["status"] in ("PROCESSING", "COMPLETED") and snapshot["num_episodes"] == 3


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        ({}, "environments= is PRIME_RUN_ENVIRONMENTS"),
        ({"PRIME_RUN_ENVIRONMENTS": "gsm8k", "PRIME_OTEL_SINKS": "all"}, "PRIME_OTEL_SINKS='all' is not one of"),
        ({"PRIME_RUN_ENVIRONMENTS": "gsm8k", "PRIME_RUN_MAX_STEPS": "30"}, "set PRIME_RUN_KIND=train"),
        ({"PRIME_RUN_ENVIRONMENTS": "gsm8k", "PRIME_RUN_KIND": "train"}, "model= is PRIME_RUN_MODEL"),
        (
            {"PRIME_RUN_ENVIRONMENTS": "gsm8k", "PRIME_OTEL_SAMPLES_STEP_INTERVAL": "0"},
            "samples_step_interval= is PRIME_OTEL_SAMPLES_STEP_INTERVAL",
        ),
    ],
)
def test_a_missing_or_wrong_variable_is_named_in_one_line_without_a_traceback(
    platform_environment: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    variables: dict[str, str],
    named: str,
) -> None:
    for name, value in {"PRIME_RUN_NAME": "zero-code-misconfigured", **variables}.items():
        platform_environment.setenv(name, value)
    with caplog.at_level(logging.ERROR, logger="prime_otel"):
        assert autoinstrument._open_from_environment() is None
    [line] = [record for record in caplog.records if record.levelno >= logging.ERROR]
    assert named in line.getMessage()
    assert line.exc_info is None


def test_init_reads_the_variables_an_unmodified_producer_cannot_pass_and_an_argument_wins(
    platform_environment: pytest.MonkeyPatch,
) -> None:
    monkeypatch = platform_environment
    monkeypatch.setenv("PRIME_OTEL_SINKS", "legacy")
    monkeypatch.setenv("PRIME_OTEL_FINISH_TIMEOUT", "20")
    from_environment = prime_otel.init(name="env-sinks", environments=["gsm8k"], model="m")
    from_argument = prime_otel.init(name="arg-sinks", environments=["gsm8k"], model="m", sinks="traces")
    from_environment.finish()
    from_argument.finish()
    assert [sink.sink for sink in from_environment.report.sinks] == ["eval_samples"]
    assert [sink.sink for sink in from_argument.report.sinks] == ["traces", "eval_samples"]

    monkeypatch.setenv("PRIME_OTEL_FINISH_TIMEOUT", "soon")
    with pytest.raises(ConfigurationError, match="PRIME_OTEL_FINISH_TIMEOUT='soon' is not a number"):
        prime_otel.init(name="bad-timeout", environments=["gsm8k"], model="m")
