"""prime-otel logs under ``prime_otel`` (and ``prime_otel.<module>``); prime-runs 0.1.4 logged under
``prime_runs.<module>``. The ``prime_otel`` logger is made a child of the ``prime_runs`` logger, so a level,
handler or filter a producer set on ``prime_runs`` also applies to prime-otel's records (their names stay
``prime_otel...``). A ``logging.config.dictConfig`` that names only ``prime_runs`` and keeps the default
``disable_existing_loggers=True`` would still disable already created ``prime_otel`` loggers: name both there.
"""

from __future__ import annotations

import logging

PRIME_RUNS_LOGGER = "prime_runs"
PRIME_OTEL_LOGGER = "prime_otel"


def nest_under_prime_runs() -> None:
    """Idempotent; leaves a ``prime_otel`` logger alone whose parent someone else already changed."""
    ours = logging.getLogger(PRIME_OTEL_LOGGER)
    if ours.parent is logging.getLogger():
        ours.parent = logging.getLogger(PRIME_RUNS_LOGGER)
