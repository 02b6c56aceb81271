"""``PRIME_RUN_ID`` advertisement with the exporting PID.

An id exported by another process is inherited (a forked child or a rank joins); an id exported by
this very process is a previous run's (a second ``init()`` opens a fresh run).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass

from .._types import RunKind

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


class RunAdvertisement:
    """Assigns the run id (and the owner's PID) in the process environment, and withdraws it at finish."""

    def __init__(self, run_id: str, kind: RunKind, environ: MutableMapping[str, str] | None = None) -> None:
        self._run_id = run_id
        self._kind = kind
        self._environ = os.environ if environ is None else environ
        self._pid = os.getpid()

    def publish(self) -> None:
        self._environ[RUN_ID_ENV] = self._run_id
        self._environ[RUN_OWNER_PID_ENV] = str(self._pid)
        self._environ[RUN_KIND_ENV] = self._kind

    def withdraw(self) -> None:
        """Removes the variables only while they still name this run (a later run may have replaced them)."""
        if self._environ.get(RUN_ID_ENV) != self._run_id or self._environ.get(RUN_OWNER_PID_ENV) != str(self._pid):
            return
        for name in (RUN_ID_ENV, RUN_OWNER_PID_ENV, RUN_KIND_ENV):
            self._environ.pop(name, None)
