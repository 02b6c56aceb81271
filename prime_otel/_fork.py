"""One process-wide at-fork hook for every object that must reset in a forked child.

A per-instance ``os.register_at_fork`` cannot be undone and would pin every run ever opened; a weak
registry lets finished runs be collected. One object's failing reset never blocks the others.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from typing import Protocol

_logger = logging.getLogger(__name__)


class ForkAware(Protocol):
    def reset_after_fork(self) -> None: ...


_registry: weakref.WeakSet[ForkAware] = weakref.WeakSet()
_lock = threading.Lock()
_installed = False


def _reset_in_child() -> None:
    global _lock
    _lock = threading.Lock()
    for obj in list(_registry):
        try:
            obj.reset_after_fork()
        except Exception:
            _logger.warning("resetting %r after fork failed", obj, exc_info=True)


def register_for_fork_reset(obj: ForkAware) -> None:
    global _installed
    with _lock:
        if not _installed and hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_reset_in_child)
            _installed = True
        _registry.add(obj)
