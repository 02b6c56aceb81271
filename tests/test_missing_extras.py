"""A feature whose optional extra is not installed says which extra to install, when it is asked for, instead of a
bare ModuleNotFoundError later. Each case runs in a subprocess where the extra's modules cannot be imported
(tests/_unimportable/sitecustomize.py blocks them as if their distribution were absent)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from prime_otel.testing import LocalPlatform

ROOT = Path(__file__).resolve().parents[1]
BLOCKER = Path(__file__).resolve().parent / "_unimportable"


def _without(
    modules: str, args: list[str], tmp_path: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        **(env or {}),
        "PYTHONPATH": f"{BLOCKER}{os.pathsep}{ROOT}",
        "PRIME_OTEL_TEST_UNIMPORTABLE": modules,
        "HOME": str(tmp_path),
        "PRIME_RUNS_DIR": str(tmp_path / "prime-runs"),
    }
    environment.setdefault("PRIME_API_KEY", "pit_test")
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=environment, cwd=tmp_path, timeout=60, check=False
    )


def test_the_blocker_really_hides_the_module(tmp_path: Path) -> None:
    result = _without("pyarrow", ["-c", "import pyarrow"], tmp_path)
    assert result.returncode == 1 and "No module named 'pyarrow'" in result.stderr


@pytest.mark.parametrize("module", ["fastapi", "uvicorn", "pyarrow"])
def test_local_without_its_extra_names_the_extra(module: str, tmp_path: Path) -> None:
    result = _without(module, ["-m", "prime_otel.cli", "local", "--port", "0", "--data", str(tmp_path / "d")], tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        f"prime-otel local needs the [local] extra ({module} is not installed): pip install 'prime-otel[local]'"
    )


@pytest.mark.parametrize("module", ["grpc", "opentelemetry.proto", "uvicorn"])
def test_gateway_without_its_extra_names_the_extra(module: str, tmp_path: Path) -> None:
    result = _without(module, ["-m", "prime_otel.cli", "gateway", "--http-port", "0", "--grpc-port", "0"], tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    line = result.stderr.strip()
    assert line.startswith(f"prime-otel gateway needs the [gateway] extra ({module}")
    assert line.endswith("pip install 'prime-otel[gateway]'")


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_otlp_transport_without_its_extra_fails_at_init_naming_the_extra(protocol: str, tmp_path: Path) -> None:
    """init raises before it registers anything (the base URL is a closed port: a request would fail otherwise)."""
    script = textwrap.dedent(
        """
        import prime_otel as po
        from prime_otel.errors import ConfigurationError, MissingExtraError
        try:
            po.init(name="x", model="m", environments=["gsm8k"], transport="otlp")
        except MissingExtraError as error:
            assert isinstance(error, ConfigurationError) and isinstance(error, ImportError)
            print(error)
        """
    )
    env = {"PRIME_API_BASE_URL": "http://127.0.0.1:9", "OTEL_EXPORTER_OTLP_PROTOCOL": protocol}
    result = _without("opentelemetry.exporter", ["-c", script], tmp_path, env)
    assert result.returncode == 0, result.stderr
    message = result.stdout.strip()
    assert message.startswith('transport="otlp" needs the [otlp] extra (opentelemetry.exporter')
    assert message.endswith("pip install 'prime-otel[otlp]'")


def test_a_training_run_without_pyarrow_says_so_at_init(local_platform: LocalPlatform, tmp_path: Path) -> None:
    """The warning names the [train] extra and comes before init returns, not only in the final report."""
    script = textwrap.dedent(
        """
        import sys
        import prime_otel as po
        run = po.init(kind="train", model="m", environments=["gsm8k"], training=po.TrainingSpec(max_steps=1))
        print("init returned", file=sys.stderr, flush=True)
        run.log_metrics({"loss": 1.0}, step=1)
        run.finish()
        """
    )
    env = {**local_platform.env, "PRIME_TEAM_ID": "team_local"}
    result = _without("pyarrow", ["-c", script], tmp_path, env)
    assert result.returncode == 0, result.stderr
    before_init_returned = result.stderr.split("init returned")[0]
    assert "pyarrow is not installed" in before_init_returned
    assert "prime-otel[train]" in before_init_returned
    (trained,) = local_platform.inspect.runs()
    assert local_platform.inspect.run(trained["id"])["metric_rows"][0]["loss"] == 1.0
