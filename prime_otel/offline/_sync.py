"""``prime-otel sync FOLDER``: upload an offline run, or deliver what an online run left in its spool, then
close the run with the status it recorded (as crashed when its producer died while it was running).

Where the data goes: an explicit flag, else the URL the run folder recorded, else the environment and
``~/.prime/config.json``, else the default. The folder's ``run.json`` is checked before anything is sent.

A ledger (``sync.json`` in the folder) makes every step of an offline sync resumable at any instant and a
second sync a no-op: the platform id is saved as soon as the run is registered, byte offsets advance only past
what the platform acknowledged, and the intent of every request that is not safe to repeat is written before
it goes out. Prime Traces uploads are content-addressed and metric rows are kept one per step, so replaying
those is always safe; a sample request left in flight is settled by reading the evaluation's rows back
(``_sample_upload``); a step object is recorded by its key before its confirm, which is confirmed again
(``_step_objects``); a finalize of a run already closed with that status is a success. A line that cannot be
read costs only itself, reported with its line number.

One sync per folder: a sync holds the folder's lock (``_lock``) exclusively, so it refuses to start while a
producer still writes the folder (producers hold it shared) or another sync delivers it, and sends nothing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from prime_traces import LineFormat

from .._backends import EvalBackend, RunSpec, TrainingBackend, close_run
from .._config import Settings, resolve_settings
from .._files import write_json_atomically
from .._sink import Sink
from .._types import RunStatus
from ..client import (
    EvaluationsAPI,
    ObjectStorage,
    PlatformHTTP,
    TrainingRunsAPI,
    eval_dashboard_url,
    traces_client,
    training_dashboard_url,
)
from ..client._urls import normalize_traces_url
from ..errors import ConfigurationError, ForbiddenError, PrimeRunsError, is_ambiguous
from ..exporters.eval_samples import EvalSamplesSink
from ..exporters.rft_samples import DEFAULT_STEP_INTERVAL, RftSamplesSink
from ..exporters.traces import upload_context
from ..processors._spool import RunSpool, SpooledRecord
from ..projection import ENVELOPE_BYTES, MAX_SAMPLES_PAYLOAD_BYTES, EncodedSample, pack_sample_requests
from ..records import compact_json, stamp_run
from ._lock import FolderLock, RunFolderBusy, held_by
from ._progress import SyncProgress, interrupted_line
from ._run_document import RunDocument
from ._sample_upload import SampleRequest, SampleUploader, row_key
from ._spool_in_flight import InFlightOutcome, InFlightSamples
from ._spool_step_objects import InFlightStepObjects
from ._step_objects import StepEpisodes, StepObjectUploader
from ._writer import EPISODES_FILE, METRICS_FILE, RUN_FILE, SAMPLES_FILE, TRACES_FILE

_logger = logging.getLogger("prime_otel")

LEDGER_FILE = "sync.json"
_SERVICE_NOT_ENABLED = "service_not_enabled"
_SHOWN_UNREADABLE_LINES = 20
#: The ledger's count of episodes Prime Traces acknowledged (the summary's ``traces_episodes_written``).
_EPISODES_WRITTEN = "traces_episodes"
CRASHED_ERROR = "the producer stopped while the run was running (closed by prime-otel sync)"


@dataclass(frozen=True)
class SyncOptions:
    """What the user passed to ``prime-otel sync``; every value given here wins over the run folder."""

    api_key: str | None = None
    base_url: str | None = None
    traces_url: str | None = None
    frontend_url: str | None = None
    team_id: str | None = None


@dataclass
class SyncLedger:
    platform_id: str | None = None
    url: str | None = None
    create_attempted: bool = False
    offsets: dict[str, int] = field(default_factory=dict)
    possibly_missing: list[dict[str, Any]] = field(default_factory=list)
    unreadable: list[dict[str, Any]] = field(default_factory=list)
    traces_not_enabled: bool = False
    closed: bool = False
    #: The sample request that may be in flight: its file range and row keys (see ``_sample_upload``).
    sample_intent: dict[str, Any] | None = None
    #: Per training step (as text): the sample object's key, and whether its confirm was answered.
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Per sink, records the platform refused for good: reason -> count.
    refused: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Per sink, records delivered by every sync of the folder so far.
    delivered: dict[str, int] = field(default_factory=dict)

    @classmethod
    def load(cls, folder: Path) -> SyncLedger:
        path = folder / LEDGER_FILE
        if not path.exists():
            return cls()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigurationError(
                f"{path} (what earlier syncs did) cannot be read: {exc}; it is safe to delete only if the run was "
                "never registered on the platform"
            ) from None
        if not isinstance(data, dict):
            raise ConfigurationError(f"{path} must hold a JSON object")
        known = {spec.name for spec in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})

    def save(self, folder: Path) -> None:
        write_json_atomically(folder / LEDGER_FILE, self.__dict__)

    def note_unreadable(self, name: str, number: int, problem: str) -> None:
        entry = {"file": name, "line": number, "problem": problem}
        if entry not in self.unreadable:
            self.unreadable.append(entry)
            _logger.warning("%s line %d cannot be sent (%s); it is skipped", name, number, problem)


@dataclass
class SyncResult:
    run_id: str
    url: str | None
    requests: int
    uploaded: dict[str, int]
    possibly_missing: list[dict[str, Any]]
    unreadable: list[dict[str, Any]] = field(default_factory=list)
    #: How this sync closed the run ("crashed", ...), or None when it did not close it.
    closed_as: str | None = None
    #: Where the platform calls went (the API base URL the sync used).
    destination: str | None = None
    #: Per sink, records the platform refused for good: reason -> count (an offline folder's every sync reports
    #: all of them; a spool's sync those refused during it).
    failed: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Requests sent again after a failure (counted in ``requests`` too).
    retries: int = 0
    #: Per sink, records a crashed producer's request had in flight that a read-back found stored (not sent again).
    confirmed: dict[str, int] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Nothing the folder holds is possibly missing, refused or unreadable."""
        return not self.possibly_missing and not self.unreadable and not self.failed

    def render(self) -> str:
        parts = ", ".join(f"{name} {count}" for name, count in self.uploaded.items()) or "nothing new"
        where = f" ({self.url})" if self.url else ""
        retried = f" ({self.retries} retried)" if self.retries else ""
        text = f"Synced run {self.run_id}{where}: {parts}; {self.requests} requests{retried}"
        if self.destination:
            text += f" to {self.destination}"
        if self.closed_as:
            text += f"; closed it as {self.closed_as}"
        if self.confirmed:
            listed = ", ".join(f"{name} {count}" for name, count in self.confirmed.items())
            text += (
                f"; {sum(self.confirmed.values())} records in flight when the producer died were found stored "
                f"({listed}), not sent again"
            )
        if self.possibly_missing:
            missing: dict[tuple[str, str | None], int] = {}
            for entry in self.possibly_missing:
                name = (str(entry.get("file") or entry.get("sink")), entry.get("reason"))
                missing[name] = missing.get(name, 0) + int(entry["rows"])
            listed = ", ".join(
                f"{name} {count}" + (f" ({reason})" if reason else "") for (name, reason), count in missing.items()
            )
            text += f"; {sum(missing.values())} records may be missing (ambiguous failure, never resent): {listed}"
        for sink, reasons in self.failed.items():
            why = ", ".join(f"{reason} {count}" for reason, count in reasons.items())
            text += f"; the {sink} sink refused {sum(reasons.values())} records for good ({why})"
        if self.unreadable:
            text += f"; {len(self.unreadable)} unreadable lines skipped"
            lines = [text]
            for entry in self.unreadable[:_SHOWN_UNREADABLE_LINES]:
                lines.append(f"  skipped {entry['file']} line {entry['line']}: {entry['problem']}")
            if len(self.unreadable) > _SHOWN_UNREADABLE_LINES:
                lines.append(f"  … and {len(self.unreadable) - _SHOWN_UNREADABLE_LINES} more (listed in {LEDGER_FILE})")
            return "\n".join(lines)
        return text


# -- the offline record files ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Line:
    number: int  # 1-based, as an editor shows it
    end: int  # the offset just past the line
    data: bytes


class _Unreadable(ValueError):
    """A line that cannot be sent; the message says why."""


def _lines_from(path: Path, offset: int) -> Iterator[_Line]:
    """Lines after ``offset``, numbered. A torn last line is yielded too: a sync runs once the producer stopped
    writing (it ended the run, or it is gone), so nothing will complete it."""
    if not path.exists():
        return
    with path.open("rb") as handle:
        number = 0
        while handle.tell() < offset:
            chunk = handle.read(min(1 << 20, offset - handle.tell()))
            if not chunk:
                break
            number += chunk.count(b"\n")
        position = offset
        for line in handle:
            number += 1
            position += len(line)
            if line.strip():
                yield _Line(number, position, line)


def _json_object(line: _Line) -> tuple[dict[str, Any], bool]:
    """The line's JSON object, with NaN and infinities as null, and whether there were any."""
    non_finite: list[str] = []

    def as_null(constant: str) -> None:
        non_finite.append(constant)

    complete = line.data.endswith(b"\n")
    try:
        value = json.loads(line.data, parse_constant=as_null)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        if not complete:
            raise _Unreadable("not JSON: an incomplete line (the producer stopped while writing it)") from None
        where = f": {exc.msg} at column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ": not UTF-8"
        raise _Unreadable(f"not JSON{where}") from None
    if not isinstance(value, dict):
        raise _Unreadable(f"not a JSON object but {type(value).__name__}")
    return value, bool(non_finite)


class SyncInterrupted(PrimeRunsError):
    """Ctrl-C or SIGTERM stopped a sync; :attr:`line` says what was sent and how to resume."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line


class OfflineRunSync:
    def __init__(self, document: RunDocument, settings: Settings) -> None:
        self.document = document
        self.folder = document.path.parent
        self.settings = settings
        self.kind = document.kind
        self.ledger = SyncLedger.load(self.folder)
        self.http = PlatformHTTP(api_key=settings.api_key, base_url=settings.base_url)
        self.storage = ObjectStorage()
        self.uploaded: dict[str, int] = {}
        self._traces_requests = 0
        self._closed_as: str | None = None
        self._progress = SyncProgress(str(self.folder))
        # Per file, the offset past the last line read (sent or skipped as unreadable) by this sync.
        self._read_to: dict[str, int] = {}

    def run(self) -> SyncResult:
        try:
            url = self._register()
            assert self.ledger.platform_id is not None
            self._upload_records(EPISODES_FILE, LineFormat.EPISODE)
            self._upload_records(TRACES_FILE, LineFormat.TRACE)
            if self.kind == "eval":
                self._upload_samples()
            else:
                self._upload_step_objects()
                self._upload_metrics()
            self._close()
        except KeyboardInterrupt:
            raise SyncInterrupted(interrupted_line(str(self.folder), self.uploaded, self._requests())) from None
        finally:
            self.http.close()
            self.storage.close()
        return SyncResult(
            run_id=self.ledger.platform_id,
            url=url,
            requests=self._requests(),
            uploaded=self.uploaded,
            possibly_missing=self.ledger.possibly_missing,
            unreadable=self.ledger.unreadable,
            closed_as=self._closed_as,
            destination=self.settings.base_url,
            # Refusals are final: every sync of the folder reports them, like unreadable lines.
            failed={sink: dict(reasons) for sink, reasons in self.ledger.refused.items()},
            retries=self.http.retries,
        )

    def _requests(self) -> int:
        return self.http.requests + self._traces_requests + self.storage.requests

    def _count(self, name: str, records: int, *, sink: str | None = None) -> None:
        """``records`` of file ``name`` reached the platform (through ``sink``, counted across syncs)."""
        if records:
            self.uploaded[name] = self.uploaded.get(name, 0) + records
            if sink is not None:
                self.ledger.delivered[sink] = self.ledger.delivered.get(sink, 0) + records
        self._progress.update(self.uploaded, self._requests(), self.http.retries)

    # -- steps ---------------------------------------------------------------------------------

    def _spec(self) -> RunSpec:
        document = self.document
        return RunSpec(
            kind=self.kind,
            name=document.name,
            environments=document.environments,
            model=document.model,
            framework=document.framework,
            description=document.description,
            tags=document.tags,
            config=document.config,
            team_id=self.settings.team_id,
            training=document.training,
            frontend_url=self.settings.frontend_url,
        )

    def _backend(self) -> EvalBackend | TrainingBackend:
        if self.kind == "eval":
            return EvalBackend(EvaluationsAPI(self.http))
        return TrainingBackend(TrainingRunsAPI(self.http))

    def _register(self) -> str | None:
        spec = self._spec()
        if self.ledger.platform_id is not None:
            return self.ledger.url or self._backend().attach(self.ledger.platform_id, spec).url
        if self.ledger.create_attempted:
            raise ConfigurationError(
                f"an earlier sync of {self.folder} may have registered this run already (its create request failed "
                f"ambiguously); check the platform, then delete {LEDGER_FILE} to register it again"
            )
        self.ledger.create_attempted = True
        self.ledger.save(self.folder)
        try:
            opened = self._backend().create(spec)
        except Exception as exc:
            if not is_ambiguous(exc):
                self.ledger.create_attempted = False
                self.ledger.save(self.folder)
            raise
        self.ledger.platform_id = opened.id
        self.ledger.url = opened.url
        self.ledger.save(self.folder)
        return opened.url

    def _readable(self, name: str, offset: int | None = None) -> Iterator[tuple[_Line, dict[str, Any], bool]]:
        """The lines of ``name`` not synced yet (or from ``offset``) that hold a JSON object; the others are
        noted in the ledger."""
        start = self.ledger.offsets.get(name, 0) if offset is None else offset
        for line in _lines_from(self.folder / name, start):
            if offset is None:
                self._read_to[name] = line.end
            try:
                value, nullified = _json_object(line)
            except _Unreadable as exc:
                self.ledger.note_unreadable(name, line.number, str(exc))
                continue
            yield line, value, nullified

    def _upload_records(self, name: str, line_format: LineFormat) -> None:
        if self.ledger.traces_not_enabled or not (self.folder / name).exists():
            return
        assert self.ledger.platform_id is not None
        pending = list(self._readable(name))
        lines = [compact_json(stamp_run(value, self.ledger.platform_id, self.kind)) + b"\n" for _, value, _ in pending]
        committed = 0
        if lines:
            committed = self._send_traces(name, lines, line_format, [line.end for line, _, _ in pending])
        if committed == len(lines) and not self.ledger.traces_not_enabled:
            self._advance(name, self._read_to.get(name, 0))

    def _send_traces(self, name: str, lines: list[bytes], line_format: LineFormat, ends: list[int]) -> int:
        client = traces_client(
            api_key=self.settings.api_key, base_url=self.settings.traces_url, team_id=self.settings.team_id
        )
        committed = 0

        def on_batch(batch: Any, receipt: Any) -> None:
            nonlocal committed
            committed += batch.num_lines
            self._traces_requests += 1
            self.ledger.offsets[name] = max(self.ledger.offsets.get(name, 0), ends[committed - 1])
            self._count(name, batch.num_lines, sink="traces")
            if line_format is LineFormat.EPISODE:
                self.ledger.delivered[_EPISODES_WRITTEN] = self.ledger.delivered.get(_EPISODES_WRITTEN, 0) + (
                    batch.num_lines
                )
            self.ledger.save(self.folder)

        try:
            client.upload_lines(lines, line_format=line_format, context=self._context(), on_batch=on_batch)
        except ForbiddenError as exc:
            if exc.code != _SERVICE_NOT_ENABLED:
                raise
            _logger.info("Prime Traces is not enabled for this account; syncing the sample tables only")
            self.ledger.traces_not_enabled = True
            self.ledger.save(self.folder)
        finally:
            client.client.close()
        return committed

    def _advance(self, name: str, offset: int) -> None:
        if offset > self.ledger.offsets.get(name, 0):
            self.ledger.offsets[name] = offset
        self.ledger.save(self.folder)

    def _context(self) -> dict[str, str]:
        return upload_context(self.kind, framework=self.document.framework, model=self.document.model)

    def _upload_samples(self) -> None:
        assert self.ledger.platform_id is not None
        uploader = SampleUploader(
            EvaluationsAPI(self.http),
            self.ledger.platform_id,
            self.ledger,
            save=lambda: self.ledger.save(self.folder),
            advance=lambda end: self._advance(SAMPLES_FILE, end),
        )
        uploader.resume()
        for request in self._sample_requests():
            before = uploader.stored
            uploader.send(request)
            self._count(SAMPLES_FILE, uploader.stored - before)
        self._advance(SAMPLES_FILE, self._read_to.get(SAMPLES_FILE, 0))

    def _sample_requests(self) -> Iterator[SampleRequest]:
        """The rows not yet sent, packed like the live sink packs them, each request with its file range."""
        lines: list[_Line] = []
        samples: list[EncodedSample] = []
        start = self.ledger.offsets.get(SAMPLES_FILE, 0)
        for line, value, nullified in self._readable(SAMPLES_FILE):
            data = compact_json(value) if nullified else line.data.rstrip(b"\n")
            if ENVELOPE_BYTES + len(data) > MAX_SAMPLES_PAYLOAD_BYTES:
                self.ledger.note_unreadable(SAMPLES_FILE, line.number, f"too large to upload ({len(data)} bytes)")
                continue
            samples.append(EncodedSample(row=value, data=data, source=len(lines)))
            lines.append(line)
        for request in pack_sample_requests(samples):
            rows = [samples[index] for index in request.indices]
            ends = [lines[index].end for index in request.indices]
            yield SampleRequest(start, [row.data for row in rows], [row_key(row.row) for row in rows], ends)
            start = ends[-1]

    def _upload_step_objects(self) -> None:
        """One Parquet object per sampled step, built from every episode of the step the folder holds."""
        assert self.ledger.platform_id is not None
        uploader = StepObjectUploader(
            TrainingRunsAPI(self.http),
            self.storage,
            self.ledger.platform_id,
            self.ledger,
            save=lambda: self.ledger.save(self.folder),
        )
        if not uploader.available:
            _logger.warning(
                "pyarrow is not installed, so training samples are not uploaded as Parquet (install prime-otel[train])"
            )
            return
        steps = StepEpisodes(self.document.samples_step_interval or DEFAULT_STEP_INTERVAL)
        for _, value, _ in self._readable(EPISODES_FILE, offset=0):
            steps.add(stamp_run(value, self.ledger.platform_id, self.kind))
        uploader.upload(steps, on_step=lambda: self._count("step objects", 1))

    def _upload_metrics(self) -> None:
        assert self.ledger.platform_id is not None
        api = TrainingRunsAPI(self.http)
        for line, row, _ in self._readable(METRICS_FILE):
            api.post_metrics(self.ledger.platform_id, row)
            self.ledger.offsets[METRICS_FILE] = line.end
            self._count(METRICS_FILE, 1, sink="rft_metrics")
            self.ledger.save(self.folder)
        self._advance(METRICS_FILE, self._read_to.get(METRICS_FILE, 0))

    def _platform_summary(self) -> dict[str, Any] | None:
        """The recorded summary with the blocks a live eval run adds: the receipt-backed episode count and
        what each sink delivered (as the run's delivery report counts it)."""
        summary = dict(self.document.summary)
        if self.kind != "eval":
            return summary or None
        existing = summary.get("prime_runs")
        block = dict(existing) if isinstance(existing, dict) else {}
        block["traces_episodes_written"] = self.ledger.delivered.get(_EPISODES_WRITTEN, 0)
        missing = sum(int(entry.get("rows", 0)) for entry in self.ledger.possibly_missing)
        sinks = {"traces": 0, SampleUploader.sink: missing}
        block["delivery"] = {
            sink: {
                "delivered": self.ledger.delivered.get(sink, 0),
                "failed": sum(self.ledger.refused.get(sink, {}).values()),
                "dropped": 0,
                "spooled": 0,
                "replayed": 0,
                "still_spooled": 0,
                "possibly_missing": possibly_missing,
            }
            for sink, possibly_missing in sinks.items()
        }
        summary["prime_runs"] = block
        return summary

    def _close(self) -> None:
        if self.ledger.closed:
            return
        assert self.ledger.platform_id is not None
        status, error = self.document.status, self.document.error
        if status is RunStatus.RUNNING:
            status, error = RunStatus.CRASHED, CRASHED_ERROR
        close_run(
            self._backend(),
            self.ledger.platform_id,
            status,
            summary=self._platform_summary(),
            error=error,
            config=self.document.config,
        )
        self.ledger.closed = True
        self.ledger.save(self.folder)
        self._closed_as = status.value


class SpoolSync:
    """Delivers what an online run kept in its spool(s), then closes the run if its own finish could not."""

    def __init__(self, document: RunDocument, settings: Settings) -> None:
        assert document.id is not None
        self.document = document
        self.folder = document.path.parent
        self.settings = settings
        self.run_id: str = document.id
        self.kind = document.kind
        self.http = PlatformHTTP(api_key=settings.api_key, base_url=settings.base_url)

    def run(self) -> SyncResult:
        from opentelemetry.sdk.resources import Resource

        from ..processors._slot import SinkSlot
        from ..records import RecordSpan

        resource = Resource.create({"run.id": self.run_id})
        uploaded: dict[str, int] = {}
        missing: list[dict[str, Any]] = []
        confirmed: dict[str, int] = {}
        failed: dict[str, dict[str, int]] = {}
        closed_as: str | None = None
        closing_requests = 0
        streams = self._sinks()
        sinks = {sink.name: sink for stream in streams.values() for sink in stream}
        progress = SyncProgress(str(self.folder))
        try:
            for spool in _open_spools(self.folder):
                # A spool whose ledger was never written (the producer died before its first outcome) declares
                # no sinks: it feeds the sinks of its stream, exactly as the live run's spool did.
                declared = spool.sinks or [sink.name for sink in streams[_stream_of(spool)]]
                names = [name for name in declared if name in sinks and not sinks[name].quiet_off_reason]
                for name, outcome in _settle_in_flight_samples(spool, [sinks[name] for name in names]).items():
                    confirmed[name] = confirmed.get(name, 0) + outcome.stored
                spool.recover(names)
                for name in names:
                    slot = SinkSlot(sinks[name], spool=spool)
                    before = spool.sink(name).replayed

                    def build(records: list[SpooledRecord], metrics: bool = name == "rft_metrics") -> list[Any]:
                        if metrics:
                            return [record.record for record in records]
                        return [RecordSpan(record.record, resource, 0) for record in records]

                    while slot.pending and slot.replay(build, force=True):
                        sent_so_far = {**uploaded, name: spool.sink(name).replayed - before}
                        requests = sum(sink.stats.requests for sink in sinks.values())
                        progress.update(sent_so_far, requests, self.http.retries)
                    spool.save()
                    sent = spool.sink(name).replayed - before
                    if sent:
                        uploaded[name] = uploaded.get(name, 0) + sent
                    unexplained = slot.failed - sum(slot.failure_reasons.values())
                    refusals = {**slot.failure_reasons, **({"refused": unexplained} if unexplained > 0 else {})}
                    for reason, count in refusals.items():
                        reasons = failed.setdefault(name, {})
                        reasons[reason] = reasons.get(reason, 0) + count
                    missing.extend(_possibly_missing(spool, name))
                    if slot.pending:
                        raise ConfigurationError(
                            f"the {name} sink could not take {slot.pending} spooled records now; run sync again later"
                        )
                spool.discard_if_delivered()  # every record reached every sink: nothing of it stays on disk
            before_close = self.http.requests
            closed_as = self._close()
            closing_requests = self.http.requests - before_close
        except KeyboardInterrupt:
            sent = sum(sink.stats.requests for sink in sinks.values()) + self.http.requests
            raise SyncInterrupted(interrupted_line(str(self.folder), uploaded, sent)) from None
        finally:
            for sink in sinks.values():
                sink.close()
            self.http.close()
        return SyncResult(
            run_id=self.run_id,
            url=self._url(),
            # What the sinks sent (Prime Traces and object storage included), then the closing calls.
            requests=sum(sink.stats.requests for sink in sinks.values()) + closing_requests,
            uploaded=uploaded,
            possibly_missing=missing,
            closed_as=closed_as,
            destination=self.settings.base_url,
            failed=failed,
            retries=self.http.retries,
            confirmed={name: count for name, count in confirmed.items() if count},
        )

    def _url(self) -> str:
        if self.document.url:
            return self.document.url
        link = eval_dashboard_url if self.kind == "eval" else training_dashboard_url
        return link(self.settings.frontend_url, self.run_id)

    def _sinks(self) -> dict[str, list[Sink]]:
        """The sinks of each spooled stream, made the way the live run made them (sink policy, opt-out)."""
        from .._assembly import sdk_record_sinks, step_metric_sinks
        from ..exporters.rft_samples import DEFAULT_STEP_INTERVAL

        document = self.document
        context = upload_context(self.kind, framework=document.framework, model=document.model)
        records = sdk_record_sinks(
            run_id=self.run_id,
            kind=self.kind,
            settings=self.settings,
            context=context,
            http=self.http,
            policy=document.sinks,
            opted_out=document.traces_opt_out,
            step_interval=document.samples_step_interval or DEFAULT_STEP_INTERVAL,
        )
        metrics = step_metric_sinks(self.http, self.run_id, self.kind)
        return {"records": records, "metrics": metrics}

    def _close(self) -> str | None:
        """Close the run the way its producer could not: with the recorded status, or as crashed when the
        producer died while the run was running. Recorded in ``run.json``, so it happens once."""
        document = self.document
        if document.closed_on_platform:
            return None
        status, error = document.status, document.error
        if status is RunStatus.RUNNING:
            status, error = RunStatus.CRASHED, CRASHED_ERROR
        if document.attached and status is not RunStatus.COMPLETED:
            _logger.info("Run %s is attached: its %s status is left to the launcher that owns it", self.run_id, status)
            return None
        backend = EvalBackend(EvaluationsAPI(self.http)) if self.kind == "eval" else self._training_backend()
        close_run(backend, self.run_id, status, summary=document.summary, error=error)
        write_json_atomically(
            document.path, {**document.raw, "status": status.value, "error": error, "closed_on_platform": True}
        )
        return status.value

    def _training_backend(self) -> TrainingBackend:
        return TrainingBackend(TrainingRunsAPI(self.http))


def _open_spools(folder: Path) -> list[RunSpool]:
    """Every spool of the folder, all read before anything is sent, so a damaged one stops the sync cleanly."""
    try:
        return RunSpool.all_in(folder)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigurationError(f"a spool in {folder} cannot be read ({type(exc).__name__}: {exc})") from None


def _settle_in_flight_samples(spool: RunSpool, sinks: list[Sink]) -> dict[str, InFlightOutcome]:
    """Before the spool is recovered: the sample request in flight when the producer died, read back (a step
    object's confirm: confirmed again); the sink then numbers what it replays after the rollouts (sample id
    ranges) the run gave out."""
    outcomes: dict[str, InFlightOutcome] = {}
    for sink in sinks:
        if isinstance(sink, EvalSamplesSink):
            outcomes[sink.name] = InFlightSamples(spool, sink).settle()
            sink.continue_numbering(spool.sink(sink.name).counters)
        elif isinstance(sink, RftSamplesSink):
            outcomes[sink.name] = InFlightStepObjects(spool, sink).settle()
            sink.continue_ranges(spool.sink(sink.name).counters)
    return outcomes


def _possibly_missing(spool: RunSpool, name: str) -> list[dict[str, Any]]:
    """The sink's possibly missing records, per reason where the ledger knows it."""
    ledger = spool.sink(name)
    entries = [{"sink": name, "rows": rows, "reason": reason} for reason, rows in ledger.missing_reasons.items()]
    unexplained = len(ledger.missing) - sum(ledger.missing_reasons.values())
    if unexplained > 0:
        entries.append({"sink": name, "rows": unexplained})
    return entries


def _stream_of(spool: RunSpool) -> str:
    """``spool-records``, ``spool-metrics@<pid>``, … : the stream a spool folder belongs to."""
    return "metrics" if spool.name.split("@")[0].endswith("-metrics") else "records"


def sync_settings(document: RunDocument, options: SyncOptions) -> Settings:
    """Each URL and the team: the flag, else what the run folder recorded, else environment, file, default."""
    settings = resolve_settings(
        api_key=options.api_key,
        team_id=options.team_id or document.team_id,
        base_url=options.base_url or document.urls.get("base_url"),
    )
    traces = options.traces_url or document.urls.get("traces_url")
    frontend = options.frontend_url or document.urls.get("frontend_url")
    return replace(
        settings,
        traces_url=normalize_traces_url(traces) if traces else settings.traces_url,
        frontend_url=frontend.strip().rstrip("/") if frontend else settings.frontend_url,
    )


def sync_run_folder(folder: str | Path, options: SyncOptions | None = None) -> SyncResult:
    """Sync an offline run, or deliver an online run's spool; either way a second sync sends nothing.

    The folder's lock is held for the whole sync: a folder whose producer still writes it, or that another sync
    is delivering, is refused before anything is sent (:class:`RunFolderBusy`)."""
    path = Path(folder)
    if not (path / RUN_FILE).is_file():
        raise ConfigurationError(f"{path} is not a run folder (no {RUN_FILE})")
    lock = FolderLock(path, role="sync")
    # Producers hold the lock while they write; a folder without one predates it.
    producers_lock = lock.path.exists()
    try:
        taken = lock.acquire(exclusive=True)
    except OSError as exc:
        raise ConfigurationError(f"{path}: its lock cannot be taken ({exc.strerror or exc})") from None
    if not taken:
        raise RunFolderBusy(f"{path} is {held_by(lock)}; nothing was sent. Sync it once that process has ended")
    try:
        return _sync_locked(path, options, producers_lock=producers_lock)
    finally:
        lock.release()


def _sync_locked(path: Path, options: SyncOptions | None, *, producers_lock: bool) -> SyncResult:
    document = RunDocument.read(path / RUN_FILE)
    if not document.finished and not producers_lock and document.producer_alive():
        # A folder written before producers took its lock.
        raise RunFolderBusy(
            f"{path}: the run is still being written by process {document.pid} on this host; "
            "sync it once that process has ended"
        )
    settings = sync_settings(document, options or SyncOptions())
    if not settings.api_key:
        raise ConfigurationError("sync needs an API key: pass --api-key or set PRIME_API_KEY")
    if document.mode == "online":
        return SpoolSync(document, settings).run()
    return OfflineRunSync(document, settings).run()
