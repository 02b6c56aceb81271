"""Settings that point at something unusable give a clear ``ConfigurationError`` at ``init()``, before any run is
registered: a FIFO or folder as ``config=`` (reading a FIFO would block forever), and a ``PRIME_RUNS_DIR`` that is a
file, cannot be created, is read-only or sits on a full disk. A FIFO as the settings file is skipped with a warning
(an unreadable settings file counts as empty), never read."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import prime_otel as po
from prime_otel.testing import LocalPlatform
from tests._disk import fill, tmpfs

INIT_SECONDS = 20.0


def init_in_a_thread(**arguments: Any) -> BaseException | None:
    """``po.init(**arguments)``, given at most INIT_SECONDS, on a daemon thread: a hang fails the test instead of
    stalling it. Returns what init raised (None if it returned)."""
    outcome: list[BaseException | None] = []

    def call() -> None:
        try:
            po.init(**arguments).finish()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(INIT_SECONDS)
    assert outcome, f"init() did not return within {INIT_SECONDS:g} s"
    return outcome[0]


def release_blocked_readers(fifo: Path) -> None:
    """If a reader is stuck opening ``fifo`` (the defect under test), opening the other end lets it go."""
    try:
        descriptor = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return  # no reader waiting
    os.close(descriptor)


def registered_runs(platform: LocalPlatform) -> int:
    return len(platform.inspect.runs())


def test_a_fifo_as_config_is_refused_at_once_and_registers_nothing(
    shared_platform_env: LocalPlatform, tmp_path: Path
) -> None:
    fifo = tmp_path / "eval.toml"
    os.mkfifo(fifo)
    before = registered_runs(shared_platform_env)
    try:
        error = init_in_a_thread(environments=["gsm8k"], model="m", config=fifo)
    finally:
        release_blocked_readers(fifo)
    assert isinstance(error, po.ConfigurationError), error
    assert str(fifo) in str(error) and "FIFO" in str(error)
    assert registered_runs(shared_platform_env) == before


def test_a_folder_as_config_is_refused_naming_it(shared_platform_env: LocalPlatform, tmp_path: Path) -> None:
    folder = tmp_path / "configs"
    folder.mkdir()
    with pytest.raises(po.ConfigurationError, match="is a folder, not a regular file"):
        po.init(environments=["gsm8k"], model="m", config=folder)


def test_a_fifo_as_the_settings_file_is_skipped_at_once_with_a_warning(
    shared_platform_env: LocalPlatform,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Like an unreadable settings file it counts as empty, but it is never opened in a way that blocks, and the
    warning names it: without the key it held the run is disabled, and nothing reaches the platform."""
    settings = tmp_path / ".prime" / "config.json"  # HOME is tmp_path
    settings.parent.mkdir()
    os.mkfifo(settings)
    monkeypatch.delenv("PRIME_API_KEY")
    before = registered_runs(shared_platform_env)
    try:
        error = init_in_a_thread(environments=["gsm8k"], model="m")
    finally:
        release_blocked_readers(settings)
    assert error is None
    assert any(str(settings) in message and "FIFO" in message for message in caplog.messages)
    assert registered_runs(shared_platform_env) == before


def _a_file(tmp_path: Path) -> Path:
    path = tmp_path / "runs"
    path.write_text("not a folder")
    return path


def _under_a_file(tmp_path: Path) -> Path:
    (tmp_path / "plain-file").write_text("")
    return tmp_path / "plain-file" / "runs"


@pytest.mark.parametrize(
    ("make_runs_dir", "says"),
    [(_a_file, "is not a folder"), (_under_a_file, "cannot be created")],
    ids=["a-file", "parent-is-a-file"],
)
@pytest.mark.parametrize("mode", ["online", "offline"])
def test_a_runs_dir_that_cannot_be_a_folder_is_refused_before_registering(
    shared_platform_env: LocalPlatform,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    make_runs_dir: Callable[[Path], Path],
    says: str,
    mode: str,
) -> None:
    runs_dir = make_runs_dir(tmp_path)
    monkeypatch.setenv("PRIME_RUNS_DIR", str(runs_dir))
    before = registered_runs(shared_platform_env)
    with pytest.raises(po.ConfigurationError, match=says) as raised:
        po.init(environments=["gsm8k"], model="m", mode=mode)
    assert str(runs_dir) in str(raised.value)
    assert registered_runs(shared_platform_env) == before


@pytest.mark.parametrize("below", ["", "missing/runs"], ids=["the-folder", "a-missing-parent"])
def test_a_runs_dir_on_a_read_only_disk_is_refused_before_registering(
    shared_platform_env: LocalPlatform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, below: str
) -> None:
    with tmpfs(tmp_path / "read-only", 64, read_only=True) as mount:
        runs_dir = mount / below if below else mount
        monkeypatch.setenv("PRIME_RUNS_DIR", str(runs_dir))
        before = registered_runs(shared_platform_env)
        with pytest.raises(po.ConfigurationError, match="Read-only file system") as raised:
            po.init(environments=["gsm8k"], model="m")
        assert str(runs_dir) in str(raised.value)
        assert registered_runs(shared_platform_env) == before


def test_a_runs_dir_on_a_full_disk_is_refused_before_registering(
    shared_platform_env: LocalPlatform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with tmpfs(tmp_path / "full", 64) as mount:
        fill(mount)
        monkeypatch.setenv("PRIME_RUNS_DIR", str(mount / "runs"))
        before = registered_runs(shared_platform_env)
        with pytest.raises(po.ConfigurationError, match=r"not writable|cannot be created") as raised:
            po.init(environments=["gsm8k"], model="m")
        assert str(mount / "runs") in str(raised.value)
        assert registered_runs(shared_platform_env) == before


def test_without_a_spool_the_runs_dir_is_not_needed(
    shared_platform_env: LocalPlatform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder check guards the spool; a run that keeps none is not refused for a folder it never uses."""
    monkeypatch.setenv("PRIME_RUNS_DIR", str(_a_file(tmp_path)))
    run = po.init(environments=["gsm8k"], model="m", spool=False)
    report = run.finish()
    assert report is not None and report.complete
    assert shared_platform_env.inspect.run(run.id)["status"] in ("PROCESSING", "COMPLETED")
