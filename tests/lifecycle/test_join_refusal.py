"""A process told to join a run (``PRIME_RUN_ID``) that this machine's run folder shows finished is refused with
a message that says what happened and what to do, also when no owner process is known (a rank started by hand
or by a launcher, not by the owner)."""

from __future__ import annotations

from pathlib import Path

import pytest

from prime_otel.errors import RunFinishedError
from prime_otel.resources._advertisement import RUN_ID_ENV, RUN_OWNER_PID_ENV
from prime_otel.run._membership import WORKERS_DIR
from prime_otel.run._open_runs import find_run_to_join


def _finished_run_folder(runs_dir: Path, run_id: str) -> Path:
    folder = runs_dir / run_id
    (folder / WORKERS_DIR).mkdir(parents=True)  # workers reported into it and its open marker is gone
    return folder


def test_a_rank_without_a_known_owner_is_told_the_run_finished_here_and_how_to_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _finished_run_folder(tmp_path, "eval-finished-1")
    monkeypatch.setenv(RUN_ID_ENV, "eval-finished-1")
    monkeypatch.delenv(RUN_OWNER_PID_ENV, raising=False)
    with pytest.raises(RunFinishedError) as refused:
        find_run_to_join("eval", [tmp_path])
    message = str(refused.value)
    assert "None" not in message
    assert "eval-finished-1" in message and str(folder) in message
    assert "PRIME_RUNS_DIR" in message and "run.handle" in message and "unset PRIME_RUN_ID" in message


def test_a_worker_of_a_known_owner_is_told_which_process_finished_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _finished_run_folder(tmp_path, "eval-finished-2")
    monkeypatch.setenv(RUN_ID_ENV, "eval-finished-2")
    monkeypatch.setenv(RUN_OWNER_PID_ENV, "999999")
    with pytest.raises(RunFinishedError, match=r"its owner \(pid 999999\) has finished"):
        find_run_to_join("eval", [tmp_path])
