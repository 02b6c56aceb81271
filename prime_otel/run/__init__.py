"""The run handle and everything about its life: ``init()``, ``Run``, exit paths, containment, the status
line and the delivery report. Also prime-runs 0.1.4's ``prime_runs.run`` names."""

from .._config import MODE_ENV
from ..processors import TRAINING_PAUSE_SECONDS
from ._init import init
from ._join import RunHandle, join
from ._report import Closure, DeliveryReport, SinkReport, WorkerTally
from ._run import DEFAULT_FINISH_TIMEOUT_SECONDS, Run

#: How long ``finish()`` lets queued uploads drain by default (``finish_timeout=`` changes it).
DEFAULT_FINISH_TIMEOUT = DEFAULT_FINISH_TIMEOUT_SECONDS
#: A training sink that failed transiently three times in a row pauses this long, then is tried again.
TRAIN_RETIRE_COOLDOWN = TRAINING_PAUSE_SECONDS

__all__ = [
    "DEFAULT_FINISH_TIMEOUT",
    "MODE_ENV",
    "TRAIN_RETIRE_COOLDOWN",
    "Closure",
    "DeliveryReport",
    "Run",
    "RunHandle",
    "SinkReport",
    "WorkerTally",
    "init",
    "join",
]
