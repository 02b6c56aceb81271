"""``PRIME_RUN_ID`` advertisement with the exporting PID (published by ``prime_otel.run._open_runs``).

An id exported by another process is inherited (a forked child or a rank joins); an id exported by
this very process is a previous run's (a second ``init()`` opens a fresh run).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

RUN_ID_ENV = "PRIME_RUN_ID"
RUN_OWNER_PID_ENV = "PRIME_RUN_OWNER_PID"
RUN_KIND_ENV = "PRIME_RUN_KIND"


@dataclass(frozen=True)
class InheritedRun:
    id: str
    kind: str | None
    owner_pid: int | None


def inherited_run(environ: Mapping[str, str] | None = None, pid: int | None = None) -> InheritedRun | None:
    """The run this process should join, or None when there is none or it was exported by this process."""
    env = os.environ if environ is None else environ
    run_id = env.get(RUN_ID_ENV, "").strip()
    if not run_id:
        return None
    owner = env.get(RUN_OWNER_PID_ENV, "").strip()
    owner_pid = int(owner) if owner.isdigit() else None
    if owner_pid is not None and owner_pid == (os.getpid() if pid is None else pid):
        return None
    kind = env.get(RUN_KIND_ENV, "").strip() or None
    return InheritedRun(id=run_id, kind=kind, owner_pid=owner_pid)
