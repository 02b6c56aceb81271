"""One local platform and one gateway subprocess for the package (runs are told apart by id)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from prime_otel._backends import EvalBackend, RunSpec, TrainingBackend
from prime_otel._types import EnvironmentRef
from prime_otel.client import EvaluationsAPI, PlatformHTTP, TrainingRunsAPI
from prime_otel.testing import LocalPlatform, start_local_platform
from tests.gateway._gateway import Gateway

TEAM = "team_gateway"
LEASE_SECONDS = 2
FAST_LIMITS = {"metrics_rate_limit": 100_000, "samples_rate_limit": 100_000}


@pytest.fixture(scope="package")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlatform]:
    with start_local_platform(
        tmp_path_factory.mktemp("gateway-platform"), processing_delay=0.1, **FAST_LIMITS
    ) as server:
        yield server


@pytest.fixture(scope="package")
def gateway(platform: LocalPlatform, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    folder = tmp_path_factory.mktemp("gateway")
    with Gateway(platform, folder, "--lease-seconds", str(LEASE_SECONDS), "--samples-step-interval", "1") as server:
        yield server


def create_run(platform: LocalPlatform, kind: str, name: str) -> str:
    """Registers a run the way a producer does before sending over OTLP."""
    http = PlatformHTTP(api_key=platform.api_key, base_url=platform.url)
    try:
        spec = RunSpec(
            kind=kind,
            name=name,
            environments=[EnvironmentRef.coerce("gsm8k")],
            model="Qwen/Qwen3-8B",
            framework="verifiers",
            description=None,
            tags=[],
            config={},
            team_id=TEAM,
        )
        backend = EvalBackend(EvaluationsAPI(http)) if kind == "eval" else TrainingBackend(TrainingRunsAPI(http))
        return backend.create(spec).id
    finally:
        http.close()
