"""The run folder's advisory lock (``run.lock``): one sync of a folder at a time, and none while its producer writes.

Producers hold the lock shared (every process of an offline run may write the folder at once); a sync holds it
exclusively, so it neither starts while a producer writes nor runs beside another sync. The kernel drops a lock
with the last descriptor of its holder, so a producer or a sync that died (even by SIGKILL) holds nothing. The
file itself says who took it last (pid, host, since), for the message a refused sync prints.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError

LOCK_FILE = "run.lock"


class RunFolderBusy(ConfigurationError):
    """The folder's lock is held: a producer is still writing it, or another sync is delivering it."""


class FolderLock:
    """An ``flock`` on ``<folder>/run.lock``: shared for producers, exclusive for a sync. Never blocks."""

    def __init__(self, folder: Path, *, role: str) -> None:
        self.path = folder / LOCK_FILE
        self.role = role
        self._descriptor: int | None = None

    def acquire(self, *, exclusive: bool) -> bool:
        """Take the lock without waiting; False when someone else holds it in a conflicting way."""
        descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            return False
        except BaseException:
            os.close(descriptor)
            raise
        self._descriptor = descriptor
        self._write_holder(descriptor)
        return True

    def release(self) -> None:
        descriptor, self._descriptor = self._descriptor, None
        if descriptor is not None:
            os.close(descriptor)  # closing the last descriptor drops the lock

    def holder(self) -> dict[str, Any]:
        """Who took the lock last, as the file says (empty when it says nothing readable)."""
        try:
            value = json.loads(self.path.read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}

    def _write_holder(self, descriptor: int) -> None:
        text = json.dumps({"role": self.role, "pid": os.getpid(), "host": socket.gethostname(), "since": time.time()})
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, text.encode(), 0)


def held_by(lock: FolderLock) -> str:
    """Who holds the lock, in words: ``still being written by its producer (process 123 on host h, since …)``."""
    holder = lock.holder()
    doing = {
        "producer": "still being written by its producer",
        "sync": "being delivered by another prime-otel sync",
    }.get(str(holder.get("role")), "in use by another process")
    since = holder.get("since")
    when = time.strftime(", since %Y-%m-%d %H:%M:%S UTC", time.gmtime(since)) if isinstance(since, float) else ""
    if holder.get("pid"):
        return f"{doing} (process {holder['pid']} on {holder.get('host') or 'an unknown host'}{when})"
    return doing
