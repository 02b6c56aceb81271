"""The prime-otel Collector distribution (collector-config/): built with the official OpenTelemetry Collector
Builder, its configs accepted by the built binary, and the agent's load balancing on ``run.id`` observed end to
end against two Python OTLP/gRPC receivers standing in for two prime-otel gateways."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.resource.v1.resource_pb2 import Resource as ProtoResource
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from tests._collector import built_collector

CONFIG_DIR = Path(__file__).resolve().parents[2] / "collector-config"
MAX_MESSAGE_BYTES = 128 * 1024 * 1024
DELIVERY_TIMEOUT_S = 30.0
# Longer than the agent's batch timeout (1 s): a duplicate would show up within it.
QUIET_PERIOD_S = 2.5

# The first test's setup may build the collector from nothing (about 10 minutes on 2 cores).
pytestmark = pytest.mark.timeout(1800)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run_id(resource: ProtoResource) -> str:
    for attribute in resource.attributes:
        if attribute.key == "run.id":
            return str(attribute.value.string_value)
    return ""


def _collector_env(**overrides: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("AGENT_", "GATEWAY_"))}
    env.update(overrides)
    return env


class _Received:
    """Thread-safe record of (signal, run.id, name) triples one receiver was sent."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[tuple[str, str, str]] = []

    def add(self, signal: str, run_id: str, name: str) -> None:
        with self._lock:
            self._items.append((signal, run_id, name))

    def items(self, signal: str) -> list[tuple[str, str]]:
        with self._lock:
            return [(run_id, name) for kind, run_id, name in self._items if kind == signal]


class _TraceServicer(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, received: _Received) -> None:
        self._received = received

    def Export(self, request: Any, context: Any) -> trace_service_pb2.ExportTraceServiceResponse:
        for resource_spans in request.resource_spans:
            run_id = _run_id(resource_spans.resource)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self._received.add("span", run_id, span.name)
        return trace_service_pb2.ExportTraceServiceResponse()


class _LogsServicer(logs_service_pb2_grpc.LogsServiceServicer):
    def __init__(self, received: _Received) -> None:
        self._received = received

    def Export(self, request: Any, context: Any) -> logs_service_pb2.ExportLogsServiceResponse:
        for resource_logs in request.resource_logs:
            run_id = _run_id(resource_logs.resource)
            for scope_logs in resource_logs.scope_logs:
                for record in scope_logs.log_records:
                    self._received.add("log", run_id, record.body.string_value)
        return logs_service_pb2.ExportLogsServiceResponse()


class _MetricsServicer(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, received: _Received) -> None:
        self._received = received

    def Export(self, request: Any, context: Any) -> metrics_service_pb2.ExportMetricsServiceResponse:
        for resource_metrics in request.resource_metrics:
            run_id = _run_id(resource_metrics.resource)
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    for _ in metric.sum.data_points:
                        self._received.add("point", run_id, metric.name)
        return metrics_service_pb2.ExportMetricsServiceResponse()


class _FakeGateway:
    """An OTLP/gRPC server on a free loopback port, standing in for one prime-otel gateway."""

    def __init__(self) -> None:
        self.received = _Received()
        options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
        self._server = grpc.server(ThreadPoolExecutor(max_workers=4), options=options)
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_TraceServicer(self.received), self._server)
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(_LogsServicer(self.received), self._server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(_MetricsServicer(self.received), self._server)
        self.endpoint = f"127.0.0.1:{self._server.add_insecure_port('127.0.0.1:0')}"
        self._server.start()

    def stop(self) -> None:
        self._server.stop(grace=None)


class _CollectorProcess:
    """The built collector running one config, its output kept in a file for failure messages."""

    def __init__(self, binary: Path, config: Path, env: dict[str, str], log_path: Path) -> None:
        self._log_path = log_path
        self._log = log_path.open("wb")
        self._process = subprocess.Popen(
            [str(binary), f"--config={config}"], env=env, stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log
        )

    def wait_listening(self, port: int, timeout: float = DELIVERY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self._process.poll() is None, f"collector exited early:\n{self.log_tail()}"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"collector not listening on {port} after {timeout}s:\n{self.log_tail()}")

    def log_tail(self) -> str:
        return self._log_path.read_text(encoding="utf-8", errors="replace")[-4000:]

    def stop(self) -> None:
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=10)
        self._log.close()


class _Agent:
    """The agent collector (agent.yaml) load balancing onto the given gateways."""

    def __init__(self, binary: Path, gateways: list[_FakeGateway], log_path: Path) -> None:
        self.grpc_port = _free_port()
        hostnames = ", ".join(gateway.endpoint for gateway in gateways)
        env = _collector_env(
            AGENT_OTLP_GRPC_PORT=str(self.grpc_port),
            AGENT_OTLP_HTTP_PORT=str(_free_port()),
            AGENT_METRICS_PORT=str(_free_port()),
            GATEWAY_GRPC_ENDPOINTS=f"[{hostnames}]",
        )
        self.process = _CollectorProcess(binary, CONFIG_DIR / "agent.yaml", env, log_path)
        self.process.wait_listening(self.grpc_port)

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"


def _resource(run_id: str) -> Resource:
    return Resource.create({"service.name": "collector-test", "run.id": run_id})


def _send_spans(endpoint: str, names_by_run: dict[str, list[str]]) -> None:
    """One producer per run, their spans interleaved; each span is a root span, so each has its own trace id."""
    providers = {run_id: TracerProvider(resource=_resource(run_id)) for run_id in names_by_run}
    for provider in providers.values():
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True)))
    rounds = max(len(names) for names in names_by_run.values())
    for index in range(rounds):
        for run_id, names in names_by_run.items():
            if index < len(names):
                providers[run_id].get_tracer("collector-test").start_span(names[index]).end()
    for provider in providers.values():
        provider.shutdown()


def _send_logs(endpoint: str, run_id: str, bodies: list[str]) -> None:
    provider = LoggerProvider(resource=_resource(run_id))
    provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(endpoint=endpoint, insecure=True)))
    logger = provider.get_logger("collector-test")
    for body in bodies:
        logger.emit(body=body)
    provider.shutdown()


def _send_counter(endpoint: str, run_id: str, name: str) -> None:
    reader = PeriodicExportingMetricReader(
        OTLPMetricExporter(endpoint=endpoint, insecure=True), export_interval_millis=600_000
    )
    provider = MeterProvider(resource=_resource(run_id), metric_readers=[reader])
    provider.get_meter("collector-test").create_counter(name).add(1)
    provider.shutdown()


def _settle(count: Callable[[], int], expected: int) -> None:
    """Waits (bounded) until ``expected`` items arrived, then a quiet period so late duplicates would show."""
    deadline = time.monotonic() + DELIVERY_TIMEOUT_S
    while count() < expected and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(QUIET_PERIOD_S)


def _gateways_by_run(gateways: list[_FakeGateway], signal: str) -> dict[str, set[int]]:
    placement: dict[str, set[int]] = {}
    for index, gateway in enumerate(gateways):
        for run_id, _ in gateway.received.items(signal):
            placement.setdefault(run_id, set()).add(index)
    return placement


@pytest.fixture(scope="module")
def collector_binary() -> Path:
    return built_collector()


@pytest.fixture(scope="module")
def gateways() -> Iterator[list[_FakeGateway]]:
    started = [_FakeGateway(), _FakeGateway()]
    yield started
    for gateway in started:
        gateway.stop()


@pytest.fixture(scope="module")
def agent(
    collector_binary: Path, gateways: list[_FakeGateway], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[_Agent]:
    running = _Agent(collector_binary, gateways, tmp_path_factory.mktemp("agent") / "agent.log")
    yield running
    running.process.stop()


VALID_ENVIRONMENTS = {
    "agent.yaml": {"GATEWAY_GRPC_ENDPOINTS": "[127.0.0.1:14317, 127.0.0.1:24317]"},
    "gateway.yaml": {"GATEWAY_HTTP_PORT": "8080"},
}


@pytest.mark.parametrize("config", sorted(VALID_ENVIRONMENTS))
def test_built_collector_accepts_each_config(collector_binary: Path, config: str) -> None:
    result = subprocess.run(
        [str(collector_binary), "validate", f"--config={CONFIG_DIR / config}"],
        env=_collector_env(**VALID_ENVIRONMENTS[config]),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_agent_config_is_rejected_without_gateway_endpoints(collector_binary: Path) -> None:
    result = subprocess.run(
        [str(collector_binary), "validate", f"--config={CONFIG_DIR / 'agent.yaml'}"],
        env=_collector_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert "no endpoints specified for the static resolver" in result.stderr


def test_built_collector_holds_every_manifest_component(collector_binary: Path) -> None:
    manifest = (CONFIG_DIR / "manifest.yaml").read_text(encoding="utf-8")
    pinned = re.findall(r"^\s*-\s*gomod:\s*(\S+ v\S+)\s*$", manifest, flags=re.MULTILINE)
    result = subprocess.run(
        [str(collector_binary), "components"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    listed = set(re.findall(r"module:\s*(\S+ v\S+)", result.stdout))
    assert pinned
    assert set(pinned) <= listed


def test_spans_arrive_once_with_each_run_on_one_gateway(agent: _Agent, gateways: list[_FakeGateway]) -> None:
    names_by_run = {run_id: [f"{run_id}/span-{index}" for index in range(40)] for run_id in ("run-alpha", "run-beta")}
    expected = Counter(name for names in names_by_run.values() for name in names)

    _send_spans(agent.endpoint, names_by_run)
    _settle(lambda: sum(len(gateway.received.items("span")) for gateway in gateways), expected.total())

    received = [item for gateway in gateways for item in gateway.received.items("span")]
    assert Counter(name for _, name in received) == expected, agent.process.log_tail()
    assert all(name.startswith(f"{run_id}/") for run_id, name in received)
    placement = _gateways_by_run(gateways, "span")
    assert {run_id: len(indexes) for run_id, indexes in placement.items()} == {run_id: 1 for run_id in names_by_run}


def test_logs_and_metrics_of_a_run_reach_the_gateway_of_its_spans(agent: _Agent, gateways: list[_FakeGateway]) -> None:
    runs = ("run-gamma", "run-delta")
    signals = ("span", "log", "point")
    for run_id in runs:
        _send_logs(agent.endpoint, run_id, [f"{run_id}/log-{index}" for index in range(5)])
        _send_counter(agent.endpoint, run_id, "episodes")
    _send_spans(agent.endpoint, {run_id: [f"{run_id}/span"] for run_id in runs})

    def received(signal: str) -> list[tuple[str, str]]:
        return [item for gateway in gateways for item in gateway.received.items(signal) if item[0] in runs]

    _settle(lambda: sum(len(received(signal)) for signal in signals), len(runs) * (1 + 5 + 1))

    expected_logs = Counter(f"{run_id}/log-{index}" for run_id in runs for index in range(5))
    assert Counter(body for _, body in received("log")) == expected_logs, agent.process.log_tail()
    assert Counter(run_id for run_id, _ in received("point")) == Counter(runs)
    for run_id in runs:
        homes = set().union(*(_gateways_by_run(gateways, signal).get(run_id, set()) for signal in signals))
        assert len(homes) == 1, f"{run_id} split across gateways {sorted(homes)}"
