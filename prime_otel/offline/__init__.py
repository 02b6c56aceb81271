"""Offline runs and ``prime-otel sync``: the run folder a producer writes, the ``run.json`` document, and the
sync that later delivers a folder (or what an online run left in its spool) through the same sinks."""

from ._run_document import RunDocument, RunDocumentError
from ._sync import SyncOptions, sync_run_folder
from ._writer import OfflineRunWriter

__all__ = ["OfflineRunWriter", "RunDocument", "RunDocumentError", "SyncOptions", "sync_run_folder"]
