"""Zero-code runs: ``opentelemetry-instrument`` with the run described only by environment variables.

    OTEL_PYTHON_DISTRO=prime OTEL_PYTHON_CONFIGURATOR=prime opentelemetry-instrument python producer.py

The configurator opens the run at interpreter start (``PRIME_RUN_NAME``, ``PRIME_RUN_KIND``,
``PRIME_RUN_MODEL``, ``PRIME_RUN_ENVIRONMENTS``, ``PRIME_RUN_FRAMEWORK``, ``PRIME_RUN_CONFIG``,
``PRIME_RUN_DESCRIPTION``, ``PRIME_RUN_TAGS``, ``PRIME_RUN_ATTACH``, the training fields ``PRIME_RUN_MAX_STEPS``,
``PRIME_RUN_BATCH_SIZE``, ``PRIME_RUN_ROLLOUTS_PER_EXAMPLE``, ``PRIME_RUN_SEQ_LEN``, plus every variable ``init()``
reads itself: ``PRIME_API_KEY``, ``PRIME_RUNS_MODE``, ``PRIME_OTEL_SINKS`` and the rest of docs/configuration.md),
installs the run's providers as the global ones, and closes the run at exit:
completed on a clean exit, failed when the script raises, cancelled on Ctrl-C, crashed on SIGTERM. Spawned
children and multiprocessing helpers inherit ``PRIME_RUN_ID`` and only join the run.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import sys
import threading
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk._configuration import _BaseConfigurator
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from . import compat
from ._config import SAMPLES_STEP_INTERVAL_ENV, STATUS_LINE_ENV, resolve_flag
from ._conventions import RUN_STEP
from ._types import RunStatus, TrainingSpec
from .errors import ConfigurationError
from .records import ALL_DELTA, StepRowExporter
from .run import Run

_logger = logging.getLogger("prime_otel")

RUN_NAME_ENV = "PRIME_RUN_NAME"
RUN_KIND_ENV = "PRIME_RUN_KIND"
RUN_MODEL_ENV = "PRIME_RUN_MODEL"
RUN_ENVIRONMENTS_ENV = "PRIME_RUN_ENVIRONMENTS"
RUN_FRAMEWORK_ENV = "PRIME_RUN_FRAMEWORK"
RUN_CONFIG_ENV = "PRIME_RUN_CONFIG"
RUN_DESCRIPTION_ENV = "PRIME_RUN_DESCRIPTION"
RUN_TAGS_ENV = "PRIME_RUN_TAGS"
RUN_ATTACH_ENV = "PRIME_RUN_ATTACH"
#: ``TrainingSpec`` fields a zero-code training run can set, and their variables.
TRAINING_ENV = {
    "max_steps": "PRIME_RUN_MAX_STEPS",
    "batch_size": "PRIME_RUN_BATCH_SIZE",
    "rollouts_per_example": "PRIME_RUN_ROLLOUTS_PER_EXAMPLE",
    "seq_len": "PRIME_RUN_SEQ_LEN",
}
#: ``init()`` arguments the variables above stand for: an error naming the argument names the variable too.
_VARIABLE_OF_ARGUMENT = {
    "environments": RUN_ENVIRONMENTS_ENV,
    "model": RUN_MODEL_ENV,
    "kind": RUN_KIND_ENV,
    "name": RUN_NAME_ENV,
    "config": RUN_CONFIG_ENV,
    "team_id": "PRIME_TEAM_ID",
    "api_key": "PRIME_API_KEY",
    "mode": "PRIME_RUNS_MODE",
    "training": ", ".join(TRAINING_ENV.values()),
    "samples_step_interval": SAMPLES_STEP_INTERVAL_ENV,
}

_lock = threading.Lock()
_run: Run | None = None


def _environ(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def zero_code_run() -> Run | None:
    """The run this process opened (or joined) from its environment; opened on first use."""
    global _run
    with _lock:
        if _run is None:
            _run = _open_from_environment()
        return _run


def _listed(name: str) -> list[str]:
    return [item.strip() for item in (_environ(name) or "").split(",") if item.strip()]


def _training_from_environment(kind: str) -> TrainingSpec | None:
    values: dict[str, Any] = {}
    for field, name in TRAINING_ENV.items():
        raw = _environ(name)
        if raw is None:
            continue
        try:
            values[field] = int(raw)
        except ValueError:
            raise ConfigurationError(f"{name}={raw!r} is not a whole number") from None
    if not values:
        return None
    if kind != "train":
        raise ConfigurationError(
            f"{', '.join(TRAINING_ENV[f] for f in values)} describe a training run: set {RUN_KIND_ENV}=train"
        )
    return TrainingSpec(**values)


def _in_variables(message: str) -> str:
    """``message`` with the variable named beside each ``init()`` argument it mentions (``environments=...``)."""
    named = [
        f"{argument}= is {variable}"
        for argument, variable in _VARIABLE_OF_ARGUMENT.items()
        if re.search(rf"\b{argument}(=| must)", message)
    ]
    return f"{message} (here {'; '.join(named)})" if named else message


def _open_from_environment() -> Run | None:
    from .run import init

    kind = _environ(RUN_KIND_ENV) or "eval"
    try:
        run = init(
            name=_environ(RUN_NAME_ENV),
            kind=kind,
            model=_environ(RUN_MODEL_ENV),
            environments=_listed(RUN_ENVIRONMENTS_ENV),
            framework=_environ(RUN_FRAMEWORK_ENV),
            description=_environ(RUN_DESCRIPTION_ENV),
            tags=_listed(RUN_TAGS_ENV),
            config=_environ(RUN_CONFIG_ENV),
            id=_environ(RUN_ATTACH_ENV),
            training=_training_from_environment(kind),
            status_line=resolve_flag(None, STATUS_LINE_ENV, True),  # nothing else draws on a zero-code terminal
        )
    except (ConfigurationError, ValueError) as error:
        # A setting the user got wrong: one line naming the variable, no traceback.
        _logger.error(
            "prime-otel could not open the run described by the environment: %s; nothing is tracked",
            _in_variables(str(error)),
        )
        return None
    except Exception:
        _logger.exception("prime-otel could not open the run described by the environment; nothing is tracked")
        return None
    _ExitStatus(run).install()
    return run


class _ExitStatus:
    """Closes the run at interpreter exit with what happened: the uncaught exception, or a clean exit."""

    def __init__(self, run: Run) -> None:
        self._run = run
        self._error: BaseException | None = None
        self._previous_hook = sys.excepthook

    def install(self) -> None:
        sys.excepthook = self._excepthook
        # Registered after the run's own crash hook, so it runs first (atexit is LIFO).
        atexit.register(self._at_exit)

    def _excepthook(self, kind: type[BaseException], error: BaseException, tb: TracebackType | None) -> None:
        self._error = error
        self._previous_hook(kind, error, tb)

    def _at_exit(self) -> None:
        if self._run.finished:
            return
        error = self._error
        if error is None:
            status, message = RunStatus.COMPLETED, None
        elif isinstance(error, KeyboardInterrupt):
            status, message = RunStatus.CANCELLED, "interrupted"
        else:
            status, message = RunStatus.FAILED, f"{type(error).__name__}: {error}"
        try:
            self._run.finish(status=status, error=message)
        except Exception:
            _logger.exception("prime-otel: closing run %s at exit failed", self._run.id)


class PrimeConfigurator(_BaseConfigurator):
    """``OTEL_PYTHON_CONFIGURATOR=prime``: the run's private providers become the global ones."""

    def _configure(self, **kwargs: Any) -> None:
        if compat.requested():
            return  # an unmodified prime-runs producer opens its own run with prime_runs.init()
        run = zero_code_run()
        if run is None or run.tracer_provider is None:
            return
        trace.set_tracer_provider(run.tracer_provider)
        meter_provider = run.meter_provider
        if meter_provider is not None:
            metrics.set_meter_provider(meter_provider)


class PrimeSpanExporter(SpanExporter):
    """``OTEL_TRACES_EXPORTER=prime`` under the stock configurator: ``episode``/``trace`` spans join the
    environment's run (child spans are attached only under ``OTEL_PYTHON_CONFIGURATOR=prime``)."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        run = zero_code_run()
        if run is None:
            return SpanExportResult.FAILURE
        for span in spans:
            run.ingest_span(span)
        return SpanExportResult.SUCCESS


class PrimeMetricExporter(MetricExporter):
    """``OTEL_METRICS_EXPORTER=prime`` under the stock configurator: points carrying ``prime.run.step``
    become that step's metrics row."""

    def __init__(self) -> None:
        super().__init__(preferred_temporality=ALL_DELTA)
        self._rows = StepRowExporter()

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        run = zero_code_run()
        if run is None:
            return MetricExportResult.FAILURE
        self._rows.export(metrics_data)
        for step, row in sorted(self._rows.take_rows().items(), key=lambda item: item[0] or 0):
            if step is None:
                _logger.warning("metric points without %s belong to no step and are not uploaded", RUN_STEP)
                continue
            run.log_metrics(row, step=step)
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return None
