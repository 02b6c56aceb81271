"""The ``prime-otel`` command answers a user's mistakes with one line naming what is wrong, never a traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import prime_otel

ROOT = Path(__file__).resolve().parents[1]


def _prime_otel(*args: str, tmp_path: Path, module: str = "prime_otel.cli") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(tmp_path), "PRIME_API_KEY": "pit_test"}
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )


def _one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


def test_version_prints_the_package_version(tmp_path: Path) -> None:
    result = _prime_otel("--version", tmp_path=tmp_path)
    assert result.returncode == 0
    assert result.stdout.strip() == f"prime-otel {prime_otel.__version__}"


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("local", "--port", "99999"), "--port"),
        (("gateway", "--http-port", "70000"), "--http-port"),
        (("gateway", "--grpc-port", "-1"), "--grpc-port"),
    ],
)
def test_an_out_of_range_port_is_a_one_line_error(args: tuple[str, ...], option: str, tmp_path: Path) -> None:
    line = _one_line_error(_prime_otel(*args, tmp_path=tmp_path))
    assert option in line and args[-1] in line and "0 to 65535" in line


def test_local_on_a_taken_port_names_the_port(taken_port: int, tmp_path: Path) -> None:
    result = _prime_otel("local", "--port", str(taken_port), "--data", str(tmp_path / "data"), tmp_path=tmp_path)
    line = _one_line_error(result)
    assert f"port {taken_port}" in line and "in use" in line


def test_gateway_on_a_taken_port_names_the_port(taken_port: int, tmp_path: Path) -> None:
    result = _prime_otel("gateway", "--no-auth", "--http-port", str(taken_port), "--grpc-port", "0", tmp_path=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"127.0.0.1:{taken_port}" in result.stderr and "in use" in result.stderr


def test_sync_of_a_missing_folder_says_it_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "prime-runs" / "no-such-run"
    line = _one_line_error(_prime_otel("sync", str(missing), tmp_path=tmp_path))
    assert line == f"prime-otel sync: {missing} does not exist"


def test_sync_of_a_file_says_it_is_not_a_folder(tmp_path: Path) -> None:
    file = tmp_path / "run.json"
    file.write_text("{}")
    line = _one_line_error(_prime_otel("sync", str(file), tmp_path=tmp_path))
    assert f"{file} is not a folder" in line


def test_the_local_platform_module_entry_refuses_an_out_of_range_port_in_one_line(tmp_path: Path) -> None:
    result = _prime_otel(
        "--port", "70000", "--data", str(tmp_path / "data"), tmp_path=tmp_path, module="prime_otel.local"
    )
    line = _one_line_error(result)
    assert "--port" in line and "70000" in line and "0 to 65535" in line
