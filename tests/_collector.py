"""The Collector binary the fleet tests run. ``make test`` builds it before the tests (visibly); a test that needs
it asks here at setup, never at collection time, so a binary built earlier in the same session counts. The build
is a no-op when the binary matches collector-config/manifest.yaml."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

CONFIG_DIR = Path(__file__).resolve().parents[1] / "collector-config"
BINARY = CONFIG_DIR / "dist" / "otelcol-prime"
BUILD_TIMEOUT_S = 1700  # from nothing: about 10 minutes on 2 cores


def built_collector() -> Path:
    """The built binary, building it when go is installed; skips the test otherwise."""
    if shutil.which("go") is None:
        pytest.skip("go is not installed, so collector-config/build.sh cannot build the Collector")
    result = subprocess.run(
        ["bash", str(CONFIG_DIR / "build.sh")],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, f"collector-config/build.sh failed:\n{result.stderr[-4000:]}"
    return BINARY
