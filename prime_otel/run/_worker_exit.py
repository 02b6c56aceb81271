"""A joined worker drains what it logged on every normal exit path of ``multiprocessing``.

Spawned children end through ``sys.exit`` (atexit runs); fork and forkserver children end with ``os._exit``
right after the process's finalizers, so atexit never runs there: a joined run registers a
``multiprocessing.util.Finalize`` as well. A run a child inherits by fork is followed into the child with
``register_after_fork`` (multiprocessing clears the finalizers a child inherits, then runs those hooks).
A pool's ``terminate()`` sends SIGTERM: the signal router drains joined runs before the default action.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from multiprocessing import util
from typing import Any

#: Above multiprocessing's own (a pool's finalizer has 15): records go before the worker's queues close.
_EXIT_PRIORITY = 100


def drain_at_worker_exit(on_exit: Callable[[], None]) -> None:
    """In a multiprocessing child: ``on_exit`` runs when the child ends normally, whatever its start method."""
    if multiprocessing.parent_process() is not None:
        util.Finalize(None, on_exit, exitpriority=_EXIT_PRIORITY)


def follow_into_forked_workers(run: Any, on_exit: Callable[[Any], None]) -> None:
    """``on_exit(run)`` runs when a multiprocessing child forked from this process (holding ``run``) ends."""
    util.register_after_fork(run, lambda inherited: drain_at_worker_exit(lambda: on_exit(inherited)))
