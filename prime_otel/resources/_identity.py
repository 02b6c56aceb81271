"""Run identity and its Resource attributes (our semantic conventions, see the README table)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from opentelemetry.sdk.resources import SERVICE_NAME, Resource

from .._conventions import PRIME_RUN_ID, PRIME_RUN_KIND, RUN_ID, RUN_NAME, RUN_RANK, RUN_TYPE, RUN_WORLD_SIZE
from .._types import RunKind

_RANK_VARIABLES = ("RANK", "SLURM_PROCID", "LOCAL_RANK")
_WORLD_SIZE_VARIABLES = ("WORLD_SIZE", "SLURM_NTASKS")


@dataclass(frozen=True)
class RunIdentity:
    id: str
    kind: RunKind
    name: str | None = None
    rank: int = 0
    world_size: int = 1

    def attributes(self) -> dict[str, str | int]:
        attributes: dict[str, str | int] = {
            RUN_ID: self.id,
            RUN_TYPE: self.kind,
            PRIME_RUN_ID: self.id,
            PRIME_RUN_KIND: self.kind,
            RUN_RANK: self.rank,
            RUN_WORLD_SIZE: self.world_size,
        }
        if self.name:
            attributes[RUN_NAME] = self.name
        return attributes


def _first_int(environ: Mapping[str, str], names: tuple[str, ...]) -> int | None:
    for name in names:
        value = environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return None


def detect_rank(environ: Mapping[str, str] | None = None) -> tuple[int, int]:
    """(rank, world size) from the launcher's variables (torchrun, SLURM); (0, 1) for a single process."""
    env = os.environ if environ is None else environ
    rank = _first_int(env, _RANK_VARIABLES) or 0
    world_size = _first_int(env, _WORLD_SIZE_VARIABLES) or 1
    return rank, max(world_size, rank + 1)


def run_resource(identity: RunIdentity, service_name: str | None = None) -> Resource:
    """One run, one Resource: ``run.*`` and ``prime.run.*`` attributes plus ``service.name``."""
    attributes: dict[str, str | int] = {SERVICE_NAME: service_name or f"prime-{identity.kind}"}
    attributes.update(identity.attributes())
    return Resource.create(attributes)
