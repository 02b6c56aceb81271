"""The run handle and everything about its life: ``init()``, ``Run``, exit paths, containment, the status
line and the delivery report."""

from ._init import init
from ._join import RunHandle, join
from ._report import Closure, DeliveryReport, SinkReport, WorkerTally
from ._run import Run

__all__ = ["Closure", "DeliveryReport", "Run", "RunHandle", "SinkReport", "WorkerTally", "init", "join"]
