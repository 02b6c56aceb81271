"""``prime-otel sync FOLDER``: upload an offline run, then close it with the status it recorded.

A ledger (``sync.json`` in the folder) makes every step resumable and a second sync a no-op: the platform
id is saved as soon as the run is registered, and byte offsets advance only past what the platform
acknowledged. Prime Traces uploads are content-addressed, so a replay is always safe; the sample table is
append-only, so a request that failed ambiguously is never resent: its rows are reported as possibly
missing instead.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prime_traces import LineFormat

from ._backends import EvalBackend, RunSpec, TrainingBackend
from ._config import Settings, resolve_settings
from ._offline import EPISODES_FILE, METRICS_FILE, RUN_FILE, SAMPLES_FILE, TRACES_FILE, write_json_atomically
from ._records import compact_json, stamp_run
from ._spool import RunSpool, SpooledRecord
from ._types import EnvironmentRef, RunStatus, TrainingSpec
from .client import EvaluationsAPI, ObjectStorage, PlatformHTTP, TrainingRunsAPI, is_ambiguous, traces_client
from .errors import ConfigurationError, ForbiddenError
from .exporters._base import Sink
from .projection import EncodedSample, pack_sample_requests

_logger = logging.getLogger("prime_otel")

LEDGER_FILE = "sync.json"
_SERVICE_NOT_ENABLED = "service_not_enabled"


@dataclass
class SyncLedger:
    platform_id: str | None = None
    create_attempted: bool = False
    offsets: dict[str, int] = field(default_factory=dict)
    possibly_missing: list[dict[str, Any]] = field(default_factory=list)
    traces_not_enabled: bool = False
    closed: bool = False

    @classmethod
    def load(cls, folder: Path) -> SyncLedger:
        path = folder / LEDGER_FILE
        if not path.exists():
            return cls()
        return cls(**json.loads(path.read_text(encoding="utf-8")))

    def save(self, folder: Path) -> None:
        write_json_atomically(folder / LEDGER_FILE, self.__dict__)


@dataclass
class SyncResult:
    run_id: str
    url: str | None
    requests: int
    uploaded: dict[str, int]
    possibly_missing: list[dict[str, Any]]

    def render(self) -> str:
        parts = ", ".join(f"{name} {count}" for name, count in self.uploaded.items()) or "nothing new"
        text = f"Synced run {self.run_id} ({self.url}): {parts}; {self.requests} requests"
        if self.possibly_missing:
            text += f"; {sum(m['rows'] for m in self.possibly_missing)} sample rows may be missing (ambiguous failure)"
        return text


def _lines_from(path: Path, offset: int) -> Iterator[tuple[int, bytes]]:
    """Complete lines after ``offset`` with the offset just past each (a torn last line is left for later)."""
    if not path.exists():
        return
    with path.open("rb") as handle:
        handle.seek(offset)
        position = offset
        for line in handle:
            if not line.endswith(b"\n"):
                return
            position += len(line)
            if line.strip():
                yield position, line


class OfflineRunSync:
    def __init__(self, folder: Path, settings: Settings) -> None:
        self.folder = folder
        self.settings = settings
        self.document: dict[str, Any] = json.loads((folder / RUN_FILE).read_text(encoding="utf-8"))
        self.kind: str = self.document["kind"]
        self.ledger = SyncLedger.load(folder)
        self.http = PlatformHTTP(api_key=settings.api_key, base_url=settings.base_url)
        self.uploaded: dict[str, int] = {}
        self._traces_requests = 0

    def run(self) -> SyncResult:
        try:
            url = self._register()
            assert self.ledger.platform_id is not None
            self._upload_records(EPISODES_FILE, LineFormat.EPISODE)
            self._upload_records(TRACES_FILE, LineFormat.TRACE)
            if self.kind == "eval":
                self._upload_samples()
            else:
                self._upload_metrics()
            self._close()
        finally:
            self.http.close()
        return SyncResult(
            run_id=self.ledger.platform_id,
            url=url,
            requests=self.http.requests + self._traces_requests,
            uploaded=self.uploaded,
            possibly_missing=self.ledger.possibly_missing,
        )

    # -- steps ---------------------------------------------------------------------------------

    def _spec(self) -> RunSpec:
        training = self.document.get("training")
        return RunSpec(
            kind=self.kind,
            name=self.document.get("name"),
            environments=[EnvironmentRef(**env) for env in self.document.get("environments") or []],
            model=self.document.get("model"),
            framework=self.document.get("framework"),
            description=self.document.get("description"),
            tags=list(self.document.get("tags") or []),
            config=dict(self.document.get("config") or {}),
            team_id=self.settings.team_id or self.document.get("team_id"),
            training=TrainingSpec(**training) if training else None,
            frontend_url=self.settings.frontend_url,
        )

    def _backend(self) -> EvalBackend | TrainingBackend:
        if self.kind == "eval":
            return EvalBackend(EvaluationsAPI(self.http))
        return TrainingBackend(TrainingRunsAPI(self.http))

    def _register(self) -> str | None:
        spec = self._spec()
        if self.ledger.platform_id is not None:
            return self._backend().attach(self.ledger.platform_id, spec).url
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
        self.ledger.save(self.folder)
        return opened.url

    def _upload_records(self, name: str, line_format: LineFormat) -> None:
        if self.ledger.traces_not_enabled or not (self.folder / name).exists():
            return
        assert self.ledger.platform_id is not None
        offset = self.ledger.offsets.get(name, 0)
        pending = list(_lines_from(self.folder / name, offset))
        if not pending:
            return
        lines = [
            compact_json(stamp_run(json.loads(line), self.ledger.platform_id, self.kind)) + b"\n" for _, line in pending
        ]
        client = traces_client(
            api_key=self.settings.api_key, base_url=self.settings.traces_url, team_id=self.settings.team_id
        )
        committed = 0

        def on_batch(batch: Any, receipt: Any) -> None:
            nonlocal committed
            committed += batch.num_lines
            self._traces_requests += 1
            self.ledger.offsets[name] = pending[committed - 1][0]
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
            self.uploaded[name] = self.uploaded.get(name, 0) + committed

    def _context(self) -> dict[str, str]:
        context = {"source": "prime-otel", "run_type": self.kind}
        for key in ("framework", "model"):
            if self.document.get(key):
                context[key] = self.document[key]
        return context

    def _upload_samples(self) -> None:
        assert self.ledger.platform_id is not None
        api = EvaluationsAPI(self.http)
        for end, body, rows in self._sample_requests():
            try:
                api.append_samples(self.ledger.platform_id, body)
            except Exception as exc:
                if not is_ambiguous(exc):
                    raise
                start = self.ledger.offsets.get(SAMPLES_FILE, 0)
                self.ledger.possibly_missing.append({"file": SAMPLES_FILE, "start": start, "end": end, "rows": rows})
                _logger.warning("%d sample rows may be missing: the request failed ambiguously and is not resent", rows)
            else:
                self.uploaded[SAMPLES_FILE] = self.uploaded.get(SAMPLES_FILE, 0) + rows
            self.ledger.offsets[SAMPLES_FILE] = end
            self.ledger.save(self.folder)

    def _sample_requests(self) -> Iterator[tuple[int, bytes, int]]:
        """The rows not yet sent, packed like the live sink packs them: (offset past the last row, body, rows)."""
        lines = list(_lines_from(self.folder / SAMPLES_FILE, self.ledger.offsets.get(SAMPLES_FILE, 0)))
        samples = [EncodedSample(row={}, data=line.rstrip(b"\n"), source=i) for i, (_, line) in enumerate(lines)]
        for request in pack_sample_requests(samples):
            yield lines[request.indices[-1]][0], request.body, request.rows

    def _upload_metrics(self) -> None:
        assert self.ledger.platform_id is not None
        api = TrainingRunsAPI(self.http)
        for end, line in _lines_from(self.folder / METRICS_FILE, self.ledger.offsets.get(METRICS_FILE, 0)):
            api.post_metrics(self.ledger.platform_id, json.loads(line))
            self.uploaded[METRICS_FILE] = self.uploaded.get(METRICS_FILE, 0) + 1
            self.ledger.offsets[METRICS_FILE] = end
            self.ledger.save(self.folder)

    def _close(self) -> None:
        if self.ledger.closed:
            return
        assert self.ledger.platform_id is not None
        recorded = self.document.get("status", "running")
        error: str | None = self.document.get("error")
        status = RunStatus(recorded)
        if status is RunStatus.RUNNING:
            status, error = RunStatus.CRASHED, "the offline run never finished"
        summary = dict(self.document.get("summary") or {})
        config = dict(self.document.get("config") or {}) or None
        backend = self._backend()
        backend.update(self.ledger.platform_id, config=config, summary=summary or None)
        backend.finalize(self.ledger.platform_id, status, summary=summary or None, error=error, config=config)
        self.ledger.closed = True
        self.ledger.save(self.folder)


class SpoolSync:
    """Delivers what an online run kept in its spool(s), then closes the run if its own finish could not."""

    def __init__(self, folder: Path, settings: Settings) -> None:
        self.folder = folder
        self.settings = settings
        self.document: dict[str, Any] = json.loads((folder / RUN_FILE).read_text(encoding="utf-8"))
        self.run_id: str = self.document["id"]
        self.kind: str = self.document["kind"]
        self.http = PlatformHTTP(api_key=settings.api_key, base_url=settings.base_url)

    def run(self) -> SyncResult:
        from opentelemetry.sdk.resources import Resource

        from .processors._slot import SinkSlot
        from .processors._spans import RecordSpan

        resource = Resource.create({"run.id": self.run_id})
        uploaded: dict[str, int] = {}
        missing: list[dict[str, Any]] = []
        try:
            sinks = {sink.name: sink for sink in self._sinks()}
            for spool in RunSpool.all_in(self.folder):
                names = [name for name in spool.sinks if name in sinks]
                spool.recover(names)
                for name in names:
                    sink = sinks.get(name)
                    if sink is None:
                        continue
                    slot = SinkSlot(sink, spool=spool)
                    before = spool.sink(name).replayed

                    def build(records: list[SpooledRecord], metrics: bool = name == "rft_metrics") -> list[Any]:
                        if metrics:
                            return [record.record for record in records]
                        return [RecordSpan(record.record, resource, 0) for record in records]

                    while slot.pending and slot.replay(build, force=True):
                        pass
                    spool.save()
                    sent = spool.sink(name).replayed - before
                    if sent:
                        uploaded[name] = uploaded.get(name, 0) + sent
                    if spool.sink(name).missing:
                        missing.append({"sink": name, "rows": len(spool.sink(name).missing)})
                    if slot.pending:
                        raise ConfigurationError(
                            f"the {name} sink could not take {slot.pending} spooled records now; run sync again later"
                        )
            self._close()
        finally:
            self.http.close()
        return SyncResult(
            run_id=self.run_id,
            url=None,
            requests=self.http.requests,
            uploaded=uploaded,
            possibly_missing=missing,
        )

    def _sinks(self) -> list[Sink]:
        from .exporters.eval_samples import EvalSamplesExporter
        from .exporters.rft_metrics import RftMetricsWriter
        from .exporters.rft_samples import RftSamplesExporter
        from .exporters.traces import PrimeTracesExporter

        context = {"source": "prime-otel", "run_type": self.kind}
        sinks: list[Sink] = [
            PrimeTracesExporter.for_run(
                run_id=self.run_id,
                run_kind=self.kind,
                context=context,
                api_key=self.settings.api_key,
                traces_url=self.settings.traces_url,
                team_id=self.settings.team_id,
            )
        ]
        if self.kind == "eval":
            sinks.append(EvalSamplesExporter(EvaluationsAPI(self.http), self.run_id))
        else:
            interval = int(self.document.get("samples_step_interval") or 10)
            sinks.append(
                RftSamplesExporter(TrainingRunsAPI(self.http), ObjectStorage(), self.run_id, step_interval=interval)
            )
            sinks.append(RftMetricsWriter(TrainingRunsAPI(self.http), self.run_id))
        return sinks

    def _close(self) -> None:
        if self.document.get("closed_on_platform", True) or self.document.get("status") in (None, "running"):
            return
        backend = EvalBackend(EvaluationsAPI(self.http)) if self.kind == "eval" else self._training_backend()
        status = RunStatus(self.document["status"])
        summary = dict(self.document.get("summary") or {}) or None
        if self.kind == "eval":
            backend.update(self.run_id, config=None, summary=summary)
        backend.finalize(self.run_id, status, summary=summary, error=self.document.get("error"), config=None)
        self.document["closed_on_platform"] = True
        write_json_atomically(self.folder / RUN_FILE, self.document)

    def _training_backend(self) -> TrainingBackend:
        return TrainingBackend(TrainingRunsAPI(self.http))


def sync_run_folder(folder: str | Path, *, api_key: str | None = None, base_url: str | None = None) -> SyncResult:
    """Sync an offline run, or deliver an online run's spool; either way a second sync sends nothing."""
    path = Path(folder)
    if not (path / RUN_FILE).exists():
        raise ConfigurationError(f"{path} is not a run folder (no {RUN_FILE})")
    document = json.loads((path / RUN_FILE).read_text(encoding="utf-8"))
    online = document.get("mode") == "online"
    settings = resolve_settings(api_key=api_key, base_url=base_url or (document.get("base_url") if online else None))
    if not settings.api_key:
        raise ConfigurationError("sync needs an API key: pass --api-key or set PRIME_API_KEY")
    if online:
        return SpoolSync(path, settings).run()
    return OfflineRunSync(path, settings).run()
