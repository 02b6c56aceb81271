"""``init()``: resolve settings, register or join the run, and assemble its providers and sinks."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, cast

from opentelemetry.sdk.trace import TracerProvider

from .._assembly import sdk_record_sinks, sink_slots, step_metric_sinks
from .._backends import EvalBackend, RunBackend, RunSpec, TrainingBackend
from .._config import (
    FINISH_TIMEOUT_ENV,
    MODE_ENV,
    SAMPLES_STEP_INTERVAL_ENV,
    SINKS_ENV,
    SPOOL_MAX_BYTES_ENV,
    STATUS_LINE_ENV,
    Settings,
    resolve_choice,
    resolve_count,
    resolve_flag,
    resolve_mode,
    resolve_number,
    resolve_settings,
    resolve_traces_opt_out,
)
from .._files import write_json_atomically
from .._fork import register_for_fork_reset
from .._sink import Sink
from .._types import (
    CONFIG_SOURCE_KEY,
    RUN_KINDS,
    ConfigSource,
    EnvironmentRef,
    RunKind,
    RunMode,
    SinkPolicy,
    TrainingSpec,
)
from ..client import EvaluationsAPI, PlatformHTTP, TrainingRunsAPI
from ..errors import ConfigurationError
from ..exporters.otlp import (
    OtlpMetricsSink,
    OtlpRecordSink,
    default_metric_exporter,
    default_span_exporter,
    require_otlp_exporter,
)
from ..exporters.rft_samples import DEFAULT_STEP_INTERVAL
from ..exporters.tee import OtlpTee, tee_endpoint, tee_exporters, tee_protocol
from ..exporters.traces import upload_context
from ..offline._lock import FolderLock
from ..offline._run_document import producer_process, recorded_urls
from ..offline._writer import RUN_FILE, OfflineRunWriter, offline_run_id
from ..processors import TRAINING_PAUSE_SECONDS, RecordProcessor, StepMetricsUploader
from ..processors._spool import DEFAULT_SPOOL_MAX_BYTES, SPOOL_DIR, RunSpool
from ..resources import RunIdentity, detect_rank, run_resource
from ._containment import ErrorNotes, OnError
from ._membership import Membership, RunMarker, membership_of
from ._offline_spans import OfflineRecordSpans
from ._open_runs import JoinTarget, find_run_to_join
from ._run import DEFAULT_FINISH_TIMEOUT_SECONDS, Run, RunParts
from ._spool_home import online_runs_dir

_logger = logging.getLogger("prime_otel")

_SINK_POLICIES = ("dual", "traces", "legacy")
_TRANSPORTS = ("direct", "otlp")
SPOOL_ENV = "PRIME_OTEL_SPOOL"
EVAL_PAUSE_SECONDS = 30.0
TRANSPORT_ENV = "PRIME_OTEL_TRANSPORT"
_PROBE_BYTES = 4096


def init(
    *,
    name: str | None = None,
    environments: Iterable[EnvironmentRef | str | Mapping[str, Any]] | None = None,
    model: str | None = None,
    framework: str | None = None,
    description: str | None = None,
    tags: Iterable[str] | None = None,
    config: Any = None,
    mode: RunMode | None = None,
    team_id: str | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
    on_error: OnError = "warn",
    finish_timeout: float | None = None,
    kind: RunKind = "eval",
    id: str | None = None,
    training: TrainingSpec | None = None,
    traces_opt_out: bool | None = None,
    sinks: SinkPolicy | None = None,
    samples_step_interval: int | None = None,
    transport: str | None = None,
    spool: bool | None = None,
    spool_max_bytes: int | None = None,
    status_line: bool | None = None,
    tee_otlp_endpoint: str | None = None,
    _joining: JoinTarget | None = None,
) -> Run:
    """Open a run on the Prime platform (or join the one this process inherited) and return its handle.

    ``sinks``: ``"dual"`` writes every record to Prime Traces and to the legacy sample table;
    ``"traces"`` writes to Prime Traces and falls back to the legacy table when the account is outside
    the Prime Traces beta; ``"legacy"`` writes to the legacy table only (the eval sample table, or the
    training run's Parquet step objects). ``samples_step_interval``: training runs upload the Parquet
    samples of every n-th dispatch step.

    ``transport``: ``"direct"`` (default) uploads from this process; ``"otlp"`` sends records, step metrics
    and a ``run.end`` marker over OTLP (``OTEL_EXPORTER_OTLP_*``) to a Collector and prime-otel gateways,
    which write the platform sinks and close the run. Also read from ``PRIME_OTEL_TRANSPORT``.

    ``spool`` (default on; ``PRIME_OTEL_SPOOL=0`` turns it off): records that cannot be delivered now are kept
    in ``<PRIME_RUNS_DIR>/<run id>/spool/`` (at most ``spool_max_bytes``) and replayed when the sink writes
    again, at the end of the run, or later by ``prime-otel sync <run folder>``.

    ``status_line=True`` (or ``PRIME_OTEL_STATUS_LINE=1``) shows a live one-line status on an interactive
    stderr; off by default, so it never fights the producer's own terminal UI.

    An argument left out is read from its environment variable (docs/configuration.md), then defaulted:
    ``PRIME_OTEL_SINKS``, ``PRIME_OTEL_SAMPLES_STEP_INTERVAL``, ``PRIME_OTEL_SPOOL_MAX_BYTES``,
    ``PRIME_OTEL_FINISH_TIMEOUT``, ``PRIME_OTEL_STATUS_LINE``, and those named above.
    ``tee_otlp_endpoint`` (also ``PRIME_OTEL_TEE_ENDPOINT``; ``PRIME_OTEL_TEE_PROTOCOL`` = ``grpc`` or
    ``http/protobuf``): an online run also exports its spans (episode spans with GenAI attributes and evaluation
    events, and every span of its tracer provider) and its step metric points to this OTLP endpoint, on its own
    threads; what the platform receives does not change. See docs/genai.md.

    Joining: without ``id=``, a process started by a run's owner (a ``multiprocessing`` worker with any start
    method, a forked child, a spawned helper inheriting ``PRIME_RUN_ID``) joins the newest run of its ``kind``
    the owner has open *now*, or gets ``RunFinishedError`` when the run it inherited is finished. With several
    runs open (an eval inside training, two evals) pass ``run.handle`` to workers and call
    ``prime_otel.join(handle)`` there. A joined process never closes the run; what it logged is drained when it
    ends and counted in the owner's report.
    """
    settings = resolve_settings(api_key=api_key, team_id=team_id, base_url=base_url)
    sinks = cast(SinkPolicy, resolve_choice(sinks, SINKS_ENV, _SINK_POLICIES, "dual"))
    samples_step_interval = resolve_count(samples_step_interval, SAMPLES_STEP_INTERVAL_ENV, DEFAULT_STEP_INTERVAL)
    spool_max_bytes = resolve_count(spool_max_bytes, SPOOL_MAX_BYTES_ENV, DEFAULT_SPOOL_MAX_BYTES)
    finish_timeout = resolve_number(finish_timeout, FINISH_TIMEOUT_ENV, None)
    status_line = resolve_flag(status_line, STATUS_LINE_ENV, False)
    if kind not in RUN_KINDS:
        raise ConfigurationError(f"kind must be 'eval' or 'train', got {kind!r}")
    if training is not None and kind != "train":
        raise ConfigurationError("training=... describes a training run; pass kind='train' with it")
    if on_error not in ("warn", "raise"):
        raise ConfigurationError(f"on_error must be 'warn' or 'raise', got {on_error!r}")
    resolved_transport = (transport or os.environ.get(TRANSPORT_ENV) or "direct").strip().lower()
    if resolved_transport not in _TRANSPORTS:
        raise ConfigurationError(f"transport must be one of {_TRANSPORTS}, got {resolved_transport!r}")
    if resolved_transport == "otlp":
        require_otlp_exporter()
    if samples_step_interval < 1:
        raise ConfigurationError(f"samples_step_interval must be at least 1, got {samples_step_interval}")
    if sinks not in _SINK_POLICIES:
        raise ConfigurationError(f"sinks must be one of {_SINK_POLICIES}, got {sinks!r}")
    tee = tee_endpoint(tee_otlp_endpoint)
    try:
        tee_protocol_name = tee_protocol(tee) if tee is not None else None
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None
    spec = RunSpec(
        kind=kind,
        name=name,
        environments=[EnvironmentRef.coerce(env) for env in environments or []],
        model=model,
        framework=framework,
        description=description,
        tags=list(tags or []),
        config=normalize_config(config),
        team_id=settings.team_id,
        training=training,
        frontend_url=settings.frontend_url,
    )
    budget = DEFAULT_FINISH_TIMEOUT_SECONDS if finish_timeout is None else max(0.0, finish_timeout)
    rank, world_size = detect_rank()
    asked_mode = mode if mode is not None else (os.environ.get(MODE_ENV) or "").strip() or None
    if _joining is not None:
        joined: JoinTarget | None = _joining
    elif id is None and str(asked_mode).lower() != "disabled":
        joined = find_run_to_join(kind, [online_runs_dir(settings), Path(settings.runs_dir)])
    else:
        joined = None
    listed_mode = joined.listed.mode if joined is not None and joined.listed is not None else ""
    if asked_mode is None and listed_mode in ("online", "offline"):
        asked_mode = listed_mode  # a worker logs the way its owner does
    resolved_mode = resolve_mode(asked_mode, settings)
    opted_out = (
        resolve_traces_opt_out(traces_opt_out, file=settings.file_values) if resolved_mode != "disabled" else False
    )
    if resolved_mode != "disabled" and rank > 0 and id is None and joined is None:
        _logger.warning("rank %d has no run to join (no id= and no PRIME_RUN_ID); this rank logs nothing", rank)
        resolved_mode = "disabled"

    if resolved_mode == "disabled":
        return _disabled_run(spec, id, on_error)
    if resolved_mode == "offline":
        return _offline_run(spec, settings, id, joined, on_error, budget, step_interval=samples_step_interval)
    return _online_run(
        spec,
        settings,
        id=id,
        joined=joined,
        opted_out=opted_out,
        sinks=sinks,
        on_error=on_error,
        budget=budget,
        rank=rank,
        world_size=world_size,
        step_interval=samples_step_interval,
        transport=resolved_transport,
        spool_max_bytes=spool_max_bytes if _spool_enabled(spool) else None,
        status_line=status_line,
        tee=(tee, tee_protocol_name) if tee is not None and tee_protocol_name is not None else None,
    )


def _run_spool(
    run_folder: Path, stream: str, sinks: list[str], max_bytes: int, owner: bool, *, attached: bool = False
) -> RunSpool:
    """One spool per uploader; processes that only joined the run keep their own, beside the owner's. A run
    attached by id may share its folder with another handle of the run, so its spool is never removed."""
    name = f"{SPOOL_DIR}-{stream}" if owner else f"{SPOOL_DIR}-{stream}@{os.getpid()}"
    return RunSpool(run_folder, max_bytes, name=name, sinks=sinks, contain_disk_errors=True, removable=not attached)


def _hold_run_folder(run_folder: Path) -> list[Callable[[], None]]:
    """The run folder's lock, held shared while this process may write its spool: no sync replays a spool that
    is still being written. Its release, for the run's closers (none when the lock could not be taken)."""
    lock = FolderLock(run_folder, role="producer")
    try:
        taken = lock.acquire(exclusive=False)
    except OSError as exc:
        _logger.warning(
            "the run folder %s cannot be locked (%s); a sync could run beside this process", run_folder, exc
        )
        return []
    if not taken:
        _logger.warning("a prime-otel sync is delivering %s while this process writes it", run_folder)
        return []
    return [lock.release]


def _open_marker(folder: Path, identity: RunIdentity, mode: str, notes: ErrorNotes) -> RunMarker | None:
    """The owner's open marker, which local workers check before each log call; without one (the runs folder
    takes no write) workers join through ``PRIME_RUN_ID`` unchecked, as across machines."""
    document = {"id": identity.id, "kind": identity.kind, "mode": mode, "owner_pid": os.getpid()}
    try:
        return RunMarker(folder, document)
    except OSError as exc:
        notes.note(f"marking the run open in {folder}", exc, surface=False)
        return None


def _membership(joined: JoinTarget | None) -> Membership | None:
    """A joined process checks with the owner's marker that the run is open (raises ``RunFinishedError``)."""
    if joined is None or joined.listed is None:
        return None
    return membership_of(Path(joined.listed.folder), joined.id)


def _spool_enabled(argument: bool | None) -> bool:
    if argument is not None:
        return argument
    return os.environ.get(SPOOL_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def check_runs_dir(runs_dir: Path) -> None:
    """Before anything is registered: the runs folder exists (it is made now) and takes a write, so a run never
    ends up on the platform with a folder it cannot keep."""
    where = f"the runs folder {runs_dir} (PRIME_RUNS_DIR)"
    if runs_dir.exists() and not runs_dir.is_dir():
        raise ConfigurationError(f"{where} is not a folder; point PRIME_RUNS_DIR at a folder")
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigurationError(f"{where} cannot be created: {exc.strerror or exc}") from exc
    try:
        descriptor, probe = tempfile.mkstemp(dir=runs_dir, prefix=".prime-otel-probe-")
    except OSError as exc:
        raise ConfigurationError(f"{where} is not writable: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(bytes(_PROBE_BYTES))
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        raise ConfigurationError(f"{where} is not writable: {'its disk is full' if full else exc}") from exc
    finally:
        with contextlib.suppress(OSError):
            os.unlink(probe)


def sync_document(
    spec: RunSpec,
    identity: RunIdentity,
    settings: Settings,
    sinks: str,
    step_interval: int,
    *,
    url: str | None = None,
    attached: bool = False,
    opted_out: bool = False,
) -> dict[str, Any]:
    """What ``prime-otel sync`` needs to deliver this run's spool, or close the run, later (never the API key)."""
    return {
        "id": identity.id,
        "kind": spec.kind,
        "name": identity.name,
        "mode": "online",
        "status": "running",
        "sinks": sinks,
        "samples_step_interval": step_interval,
        **recorded_urls(settings, registered=True),
        "url": url,
        "attached": attached,
        "traces_opt_out": opted_out,
        "team_id": settings.team_id,
        "framework": spec.framework,
        "model": spec.model,
        **producer_process(),
    }


def normalize_config(config: Any) -> dict[str, Any]:
    """``config=``: a path (always a path, never inline text), a ``ConfigSource``, or a mapping stored as given."""
    if config is None:
        return {}
    if isinstance(config, ConfigSource):
        return {CONFIG_SOURCE_KEY: config.to_dict()}
    if isinstance(config, (str, os.PathLike)):
        return {CONFIG_SOURCE_KEY: ConfigSource.from_file(config).to_dict()}
    if isinstance(config, Mapping):
        normalized = dict(config)
        if isinstance(normalized.get(CONFIG_SOURCE_KEY), ConfigSource):
            normalized[CONFIG_SOURCE_KEY] = normalized[CONFIG_SOURCE_KEY].to_dict()
        return normalized
    raise TypeError(f"config must be a path, a ConfigSource or a mapping, got {type(config).__name__}")


def _disabled_run(spec: RunSpec, run_id: str | None, on_error: OnError) -> Run:
    identity = RunIdentity(id=run_id or f"disabled-{secrets.token_hex(8)}", kind=spec.kind, name=spec.name)
    return Run(
        RunParts(
            identity=identity,
            mode="disabled",
            url=None,
            attached=False,
            owns_lifecycle=False,
            config=spec.config,
            notes=ErrorNotes(identity.id, on_error),
        )
    )


def _offline_run(
    spec: RunSpec,
    settings: Settings,
    run_id: str | None,
    joined: JoinTarget | None,
    on_error: OnError,
    budget: float,
    *,
    step_interval: int,
) -> Run:
    check_runs_dir(settings.runs_dir)
    owner = joined is None
    membership = _membership(joined)
    run_id = run_id or (joined.id if joined else None) or offline_run_id()
    identity = RunIdentity(id=run_id, kind=spec.kind, name=spec.name)
    writer = OfflineRunWriter(Path(settings.runs_dir) / identity.id, identity.id, spec.kind)
    if owner:
        writer.write_run_document(
            {
                "id": identity.id,
                "kind": spec.kind,
                "mode": "offline",
                "name": spec.name,
                "status": "running",
                "model": spec.model,
                "framework": spec.framework,
                "description": spec.description,
                "tags": spec.tags,
                "environments": [_environment_document(env) for env in spec.environments],
                "team_id": spec.team_id,
                "config": spec.config,
                "training": vars(spec.training) if spec.training else None,
                "samples_step_interval": step_interval,
                **recorded_urls(settings, registered=False),
                **producer_process(),
            }
        )
    notes = ErrorNotes(identity.id, on_error)
    marker = _open_marker(writer.folder, identity, "offline", notes) if owner else None
    _logger.info("Run %s (offline): %s", identity.id, writer.folder)
    record_spans = OfflineRecordSpans(writer)
    provider = TracerProvider(resource=run_resource(identity), shutdown_on_exit=False)
    provider.add_span_processor(record_spans)
    return Run(
        RunParts(
            identity=identity,
            mode="offline",
            url=None,
            attached=False,
            owns_lifecycle=owner,
            config=spec.config,
            notes=notes,
            finish_timeout=budget,
            offline=writer,
            tracer_provider=provider,
            record_spans=record_spans,
            closers=[writer.close],
            local_folder=writer.folder,
            marker=marker,
            membership=membership,
        )
    )


def _environment_document(ref: EnvironmentRef) -> dict[str, str]:
    return {key: value for key, value in vars(ref).items() if value}


def _online_run(
    spec: RunSpec,
    settings: Settings,
    *,
    id: str | None,
    joined: JoinTarget | None,
    opted_out: bool,
    sinks: SinkPolicy,
    on_error: OnError,
    budget: float,
    rank: int,
    world_size: int,
    step_interval: int,
    transport: str,
    spool_max_bytes: int | None,
    status_line: bool = False,
    tee: tuple[str, str] | None = None,
) -> Run:
    if not settings.api_key:
        raise ConfigurationError("online mode needs an API key: pass api_key=... or set PRIME_API_KEY")
    joined_id = joined.id if joined is not None else None
    membership = _membership(joined)
    with_spool = spool_max_bytes is not None and transport == "direct"
    runs_dir = online_runs_dir(settings)
    if with_spool:
        check_runs_dir(runs_dir)
    http = PlatformHTTP(api_key=settings.api_key, base_url=settings.base_url)
    register_for_fork_reset(http)
    backend: RunBackend
    if spec.kind == "eval":
        evaluations = EvaluationsAPI(http)
        backend = EvalBackend(evaluations)
    else:
        backend = TrainingBackend(TrainingRunsAPI(http))
    try:
        if id is not None:
            opened = backend.attach(id, spec)
        elif joined_id is not None:
            opened = backend.attach(joined_id, spec)
        else:
            opened = backend.create(spec)
    except BaseException:
        http.close()
        raise
    owner = joined_id is None
    identity = RunIdentity(
        id=opened.id, kind=spec.kind, name=opened.name or spec.name, rank=rank, world_size=world_size
    )
    notes = ErrorNotes(identity.id, on_error)
    context = upload_context(spec.kind, framework=spec.framework, model=spec.model)

    run_folder = runs_dir / identity.id
    document = (
        sync_document(
            spec, identity, settings, sinks, step_interval, url=opened.url, attached=id is not None, opted_out=opted_out
        )
        if owner and transport == "direct"
        else None
    )
    resource = run_resource(identity)
    end_marker: OtlpRecordSink | None = None
    exporters: list[Sink]
    metric_sinks: list[Sink] = []
    if transport == "otlp":
        end_marker = OtlpRecordSink(default_span_exporter(), resource)
        exporters = [end_marker]
        if spec.kind == "train":
            metric_sinks = [OtlpMetricsSink(default_metric_exporter(), resource)]
    else:
        exporters = sdk_record_sinks(
            run_id=identity.id,
            kind=spec.kind,
            settings=settings,
            context=context,
            http=http,
            policy=sinks,
            opted_out=opted_out,
            step_interval=step_interval,
        )
        metric_sinks = step_metric_sinks(http, identity.id, spec.kind)
    spool: RunSpool | None = None
    metrics_spool: RunSpool | None = None
    if spool_max_bytes is not None and with_spool:
        try:
            if document is not None:
                run_folder.mkdir(parents=True, exist_ok=True)
                write_json_atomically(run_folder / RUN_FILE, document)
            spool = _run_spool(
                run_folder, "records", [e.name for e in exporters], spool_max_bytes, owner, attached=id is not None
            )
            if spec.kind == "train":
                names = [sink.name for sink in metric_sinks]
                metrics_spool = _run_spool(
                    run_folder, "metrics", names, spool_max_bytes, owner, attached=id is not None
                )
        except OSError as exc:
            # The folder passed its check before the run was registered; the run goes on without a spool.
            notes.note(f"opening the run's spool in {run_folder}", exc, surface=False)
            spool = metrics_spool = None
            with_spool = False
    closers = [http.close]
    if with_spool:
        closers += _hold_run_folder(run_folder)
    pause = TRAINING_PAUSE_SECONDS if spec.kind == "train" else (EVAL_PAUSE_SECONDS if with_spool else None)
    slots = sink_slots(exporters, pause_seconds=pause, on_failure=notes.note_sink_failure, spool=spool)
    processor = RecordProcessor(slots, resource, spool=spool)
    metrics = None
    if spec.kind == "train":
        metric_slots = sink_slots(
            metric_sinks, pause_seconds=pause, on_failure=notes.note_sink_failure, spool=metrics_spool
        )
        metrics = StepMetricsUploader(metric_slots, resource, spool=metrics_spool)
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    provider.add_span_processor(processor)
    if tee is not None:
        # After the records processor, so at shutdown it sends what the drained processor handed it.
        teed = OtlpTee(*tee_exporters(*tee), resource)
        provider.add_span_processor(teed)
        processor.tee = teed.records
        if metrics is not None:
            metrics.tee = teed.rows
        _logger.info("Run %s: also exporting its spans and metric points to %s (%s)", identity.id, tee[0], tee[1])

    marker = _open_marker(run_folder, identity, "online", notes) if owner else None
    _logger.info("Run %s: %s", identity.id, opened.url)
    return Run(
        RunParts(
            identity=identity,
            mode="online",
            url=opened.url,
            attached=id is not None or not owner,
            owns_lifecycle=owner,
            config=spec.config,
            notes=notes,
            finish_timeout=budget,
            backend=backend,
            processor=processor,
            metrics=metrics,
            end_marker=end_marker,
            http=http,
            run_folder=run_folder if with_spool else None,
            sync_document=document,
            sync_folder=run_folder,
            tracer_provider=provider,
            local_folder=run_folder,
            marker=marker,
            membership=membership,
            closers=closers,
            status_line=status_line,
        )
    )
