"""Resource detector for pure-OpenTelemetry deployments (``OTEL_EXPERIMENTAL_RESOURCE_DETECTORS=prime_run``)."""

from __future__ import annotations

import os

from opentelemetry.sdk.resources import Resource, ResourceDetector

from .._conventions import PRIME_RUN_KIND, RUN_TYPE
from .._types import run_kind_of
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
        known = run_kind_of(kind)
        identity = RunIdentity(id=run_id, kind=known or "eval", name=name, rank=rank, world_size=world_size)
        attributes = identity.attributes()
        if known is None:
            # Passed on as the environment names it, so the receiver refuses the run by that name.
            attributes.update({RUN_TYPE: kind, PRIME_RUN_KIND: kind})
        return Resource(attributes)
