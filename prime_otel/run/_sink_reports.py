"""Each sink's line of the delivery report, read from its slot, its spool ledger and its uploader, and the
warnings a run logs when the report shows a loss."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from ..offline._writer import OfflineRunWriter
from ..processors import SinkSlot, Uploader
from ..processors._spool import DISK_FULL, RunSpool
from ._report import DeliveryReport, SinkReport

_logger = logging.getLogger("prime_otel")

_QUEUE_FULL = "queue full: the producer outran the uploader"


def sink_reports(uploaders: Iterable[Uploader], *, final: bool) -> tuple[list[SinkReport], list[str]]:
    """One report per sink slot of every uploader, and the notes about their spools."""
    sinks: list[SinkReport] = []
    notes: list[str] = []
    for uploader in uploaders:
        spool = uploader.spool
        dropped_reason = spool.refusal_reason if spool is not None and spool.refusal_reason else _QUEUE_FULL
        for slot in uploader.slots:
            sinks.append(_slot_report(slot, uploader.dropped_records, dropped_reason, final))
        if spool is not None:
            notes += _spool_notes(spool)
    return sinks, notes


def offline_sink_report(offline: OfflineRunWriter) -> SinkReport:
    return SinkReport(
        sink="offline",
        delivered=offline.records_written,
        failed=offline.failed,
        dropped=0,
        skipped=0,
        requests=0,
        bytes=offline.bytes_written,
        state=str(offline.folder),
        failure_reasons=offline.failure_reasons,
    )


def warn_losses(run_id: str, dropped_records: int, report: DeliveryReport) -> None:
    if dropped_records:
        _logger.warning("Run %s: %d records reached no sink", run_id, dropped_records)
    for sink in report.sinks:
        if sink.failed or sink.possibly_missing:
            _logger.warning(
                "Run %s: the %s sink could not store %d records",
                run_id,
                sink.sink,
                sink.failed + sink.possibly_missing,
            )
        if sink.pending:
            _logger.warning(
                "Run %s: %d records of the %s sink are still in the spool: %s",
                run_id,
                sink.pending,
                sink.sink,
                report.sync_command,
            )


def _slot_report(slot: SinkSlot, dropped: int, dropped_reason: str, final: bool) -> SinkReport:
    stats = slot.sink.stats
    state = "retired" if slot.retired else ("off" if not slot.sink.enabled else "ok")
    if slot.paused:
        state = "paused"
    reason = slot.sink.quiet_off_reason
    if reason:
        state = reason
    spool = slot.spool
    ledger = spool.sink(slot.name) if spool is not None else None
    waiting = spool.waiting(slot.name) if spool is not None else 0
    failed, reasons = slot.failed, dict(slot.failure_reasons)
    unexplained = failed - sum(reasons.values())
    if unexplained > 0 and spool is not None and spool.refusal_reason:
        # With a spool a sink loses records only when the spool could not keep them (the rest wait in it).
        reasons[spool.refusal_reason] = reasons.get(spool.refusal_reason, 0) + unexplained
    if final and spool is not None and spool.set_aside_to is not None and waiting:
        # No sync can deliver from a spool whose ledger could not be kept: what it still holds is lost here.
        lost_because = spool.refusal_reason or DISK_FULL
        failed += waiting
        reasons[lost_because] = reasons.get(lost_because, 0) + waiting
        waiting = 0
    return SinkReport(
        sink=slot.name,
        delivered=stats.delivered,
        failed=failed,
        dropped=dropped,
        skipped=stats.skipped,
        requests=stats.requests,
        bytes=stats.bytes,
        state=state,
        spooled=ledger.spooled if ledger else 0,
        replayed=ledger.replayed if ledger else 0,
        pending=waiting,
        possibly_missing=len(ledger.missing) if ledger else 0,
        failure_reasons=reasons,
        dropped_reasons={dropped_reason: dropped} if dropped else {},
    )


def _spool_notes(spool: RunSpool) -> list[str]:
    notes = []
    if spool.set_aside_to is not None:
        notes.append(
            f"the spool's ledger could not be saved ({spool.refusal_reason}): its files were moved to "
            f"{spool.set_aside_to}, where no sync reads them (it could resend records already stored)"
        )
    elif spool.refusal_reason is not None:
        notes.append(
            f"the spool at {spool.folder} stopped keeping records ({spool.refusal_reason}); "
            f"{spool.refused} records were not kept in it"
        )
    return notes
