"""Resource detector for pure-OpenTelemetry deployments (``OTEL_EXPERIMENTAL_RESOURCE_DETECTORS=prime_run``)."""

from __future__ import annotations

import os

from opentelemetry.sdk.resources import Resource, ResourceDetector

from ._advertisement import RUN_ID_ENV, RUN_KIND_ENV
from ._identity import RunIdentity, detect_rank


class PrimeRunResourceDetector(ResourceDetector):
    """Adds ``run.*``/``prime.run.*`` from ``PRIME_RUN_ID``/``PRIME_RUN_KIND`` and the launcher's rank variables."""

    def detect(self) -> Resource:
        run_id = os.environ.get(RUN_ID_ENV, "").strip()
        if not run_id:
            return Resource.get_empty()
        rank, world_size = detect_rank()
        kind = os.environ.get(RUN_KIND_ENV, "").strip() or "eval"
        name = os.environ.get("PRIME_RUN_NAME") or None
        identity = RunIdentity(id=run_id, kind=kind, name=name, rank=rank, world_size=world_size)
        return Resource(identity.attributes())
