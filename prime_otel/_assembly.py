"""One sink assembly: which sinks a run writes through (``dual``, ``traces`` or ``legacy``), made the same way
by ``init()``, by ``prime-otel sync`` for what a run left behind, and by the gateway for a received run."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ._config import Settings
from ._fork import register_for_fork_reset
from ._sink import Sink
from ._types import RunKind, SinkPolicy
from .client import EvaluationsAPI, ObjectStorage, PlatformHTTP, TrainingRunsAPI
from .exporters._base import RecordSink
from .exporters.eval_samples import EvalSamplesSink
from .exporters.rft_metrics import RftMetricsSink
from .exporters.rft_samples import RftSamplesSink
from .exporters.traces import PrimeTracesSink
from .processors import SinkSlot
from .processors._slot import FailureListener
from .processors._spool import RunSpool

#: Builds a run's legacy sink, told when it writes (None: always; else only while the callable says so).
LegacySinkFactory = Callable[[Callable[[], bool] | None], Sink]


def record_sinks(
    *,
    run_id: str,
    kind: RunKind,
    settings: Settings,
    context: dict[str, str],
    policy: SinkPolicy,
    opted_out: bool,
    legacy: LegacySinkFactory,
) -> tuple[PrimeTracesSink, list[Sink]]:
    """The Prime Traces sink and the record sinks the policy keeps; under ``traces`` the legacy sink writes
    only while the traces service is not enabled for the team."""
    traces = PrimeTracesSink.for_run(
        run_id=run_id,
        run_kind=kind,
        context=context,
        api_key=settings.api_key,
        traces_url=settings.traces_url,
        team_id=settings.team_id,
    )
    if opted_out:
        traces.opt_out()
    only_without_traces = (lambda: traces.service_not_enabled) if policy == "traces" else None
    legacy_sink = legacy(only_without_traces)
    if only_without_traces is not None and isinstance(legacy_sink, RecordSink):
        legacy_sink.follows = traces.name  # it asks traces whether the service is enabled: traces writes first
    return traces, [legacy_sink] if policy == "legacy" else [traces, legacy_sink]


def sdk_record_sinks(
    *,
    run_id: str,
    kind: RunKind,
    settings: Settings,
    context: dict[str, str],
    http: PlatformHTTP,
    policy: SinkPolicy,
    opted_out: bool,
    step_interval: int,
) -> list[Sink]:
    """The record sinks of a run the SDK produces (live or synced): eval samples, or training samples whose
    object storage is reset in a forked child."""

    def legacy(write_only_when: Callable[[], bool] | None) -> Sink:
        if kind == "eval":
            return EvalSamplesSink(EvaluationsAPI(http), run_id, write_only_when=write_only_when)
        storage = ObjectStorage()
        register_for_fork_reset(storage)
        return RftSamplesSink(
            TrainingRunsAPI(http), storage, run_id, step_interval=step_interval, write_only_when=write_only_when
        )

    _, sinks = record_sinks(
        run_id=run_id, kind=kind, settings=settings, context=context, policy=policy, opted_out=opted_out, legacy=legacy
    )
    return sinks


def step_metric_sinks(http: PlatformHTTP, run_id: str, kind: RunKind) -> list[Sink]:
    """A training run's step rows go to ``rft_metrics``; an eval run has no metric sink."""
    return [RftMetricsSink(TrainingRunsAPI(http), run_id)] if kind == "train" else []


def sink_slots(
    sinks: Sequence[Sink],
    *,
    pause_seconds: float | None,
    on_failure: FailureListener | None,
    spool: RunSpool | None = None,
) -> list[SinkSlot]:
    """One slot per sink, all sharing the run's pause, failure listener and spool."""
    return [SinkSlot(sink, pause_seconds=pause_seconds, on_failure=on_failure, spool=spool) for sink in sinks]
