"""Where an online run keeps its write-ahead log (its spool, ``run.json`` and ``report.json``): a per-user
cache folder, not the working directory, since nobody asked for those files there. ``PRIME_RUNS_DIR`` (the
folder offline runs are written to) moves it too, when set. The folder goes away once the run ended with every
record delivered and its status confirmed; what a later ``prime-otel sync`` needs stays, and the finish line
names it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from .._config import RUNS_DIR_ENV, Settings

CACHE_HOME_ENV = "XDG_CACHE_HOME"
CACHE_SUBFOLDER = Path("prime-otel") / "runs"


def online_runs_dir(settings: Settings, environ: Mapping[str, str] = os.environ) -> Path:
    """``PRIME_RUNS_DIR`` when set, else ``$XDG_CACHE_HOME/prime-otel/runs``, else ``~/.cache/prime-otel/runs``."""
    if environ.get(RUNS_DIR_ENV):
        return settings.runs_dir
    cache = environ.get(CACHE_HOME_ENV)
    base = Path(cache) if cache and Path(cache).is_absolute() else Path.home() / ".cache"
    return base / CACHE_SUBFOLDER
