"""Who may talk to the gateway: a bearer token on OTLP/HTTP and OTLP/gRPC (401 / UNAUTHENTICATED without one),
``/runs`` behind the token too, ``/healthz`` open; a run bound to the token that opened it, so another token can
neither end it nor see it; both receivers on TLS when given a certificate."""

from __future__ import annotations

import datetime
import ipaddress
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

from prime_otel.gateway._auth import TOKENS_ENV
from prime_otel.testing import LocalPlatform
from tests._waiting import wait_for
from tests.gateway._gateway import Gateway, create_run
from tests.gateway._producer import end_marker, episode_spans, fresh_episodes, run_resource

ALPHA = "alpha-token-3f9c2a"
BETA = "beta-token-77d01e"
PROTOBUF = {"Content-Type": "application/x-protobuf"}


@pytest.fixture(scope="module")
def guarded(platform: LocalPlatform, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    folder = tmp_path_factory.mktemp("guarded-gateway")
    with Gateway(platform, folder, "--lease-seconds", "30", tokens=(ALPHA, BETA)) as server:
        yield server


def body(spans: list[ReadableSpan]) -> bytes:
    return encode_spans(spans).SerializeToString()


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def post(gateway: Gateway, spans: list[ReadableSpan], headers: dict[str, str]) -> httpx.Response:
    return httpx.post(f"{gateway.http_url}/v1/traces", content=body(spans), headers={**PROTOBUF, **headers}, timeout=30)


def runs_seen_by(gateway: Gateway, token: str) -> dict[str, dict[str, object]]:
    answer = httpx.get(f"{gateway.http_url}/runs", headers=bearer(token), timeout=10)
    answer.raise_for_status()
    return {run["run_id"]: run for run in answer.json()}


def test_http_requests_without_an_accepted_token_are_refused_and_nothing_is_opened(
    platform: LocalPlatform, guarded: Gateway
) -> None:
    run_id = create_run(platform, "eval", "auth-refused")
    resource = run_resource(run_id, "eval")
    spans = [*episode_spans(fresh_episodes("eval", 1), resource), end_marker(resource, episodes=1, status="failed")]
    for headers in ({}, bearer("not-a-token"), {"authorization": ALPHA}, {"authorization": "Basic YTpi"}):
        answer = post(guarded, spans, headers)
        assert answer.status_code == 401, headers
        assert answer.headers["www-authenticate"].startswith("Bearer")
    assert httpx.get(f"{guarded.http_url}/runs", timeout=10).status_code == 401
    assert httpx.get(f"{guarded.http_url}/runs", headers=bearer("nope"), timeout=10).status_code == 401
    assert httpx.get(f"{guarded.http_url}/healthz", timeout=10).status_code == 200
    assert run_id not in runs_seen_by(guarded, ALPHA)
    assert platform.inspect.run(run_id)["status"] == "RUNNING"
    assert ALPHA not in guarded.log() and BETA not in guarded.log()


def test_grpc_requests_need_the_token_in_the_authorization_metadata(platform: LocalPlatform, guarded: Gateway) -> None:
    run_id = create_run(platform, "eval", "auth-grpc")
    resource = run_resource(run_id, "eval")
    request = encode_spans(episode_spans(fresh_episodes("eval", 2), resource))
    with grpc.insecure_channel(guarded.grpc_endpoint) as channel:
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        for metadata in ((), (("authorization", "Bearer wrong"),)):
            with pytest.raises(grpc.RpcError) as refused:
                stub.Export(request, metadata=metadata, timeout=10)
            assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert run_id not in runs_seen_by(guarded, ALPHA)
        answer = stub.Export(request, metadata=(("authorization", f"Bearer {BETA}"),), timeout=10)
    assert isinstance(answer, ExportTraceServiceResponse) and not answer.partial_success.rejected_spans
    assert runs_seen_by(guarded, BETA)[run_id]["received"] == {"0": {"episodes": 2, "traces": 0, "metric_rows": 0}}


def test_the_sdk_exporter_with_the_token_header_delivers_a_run(platform: LocalPlatform, guarded: Gateway) -> None:
    run_id = create_run(platform, "eval", "auth-ok")
    resource = run_resource(run_id, "eval")
    episodes = fresh_episodes("eval", 3)
    exporter = HttpSpanExporter(endpoint=f"{guarded.http_url}/v1/traces", headers=bearer(ALPHA))
    try:
        spans = [*episode_spans(episodes, resource), end_marker(resource, episodes=3)]
        assert exporter.export(spans) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    closed = wait_for(lambda: _closed(guarded, ALPHA, run_id), "the run to close")
    assert closed["status"] == "completed"
    landed = sorted(episode["id"] for episode in platform.inspect.episodes(run_id)["items"])
    assert landed == sorted(episode.id for episode in episodes)


def test_a_second_token_can_neither_end_nor_see_nor_write_into_the_first_tokens_run(
    platform: LocalPlatform, guarded: Gateway
) -> None:
    run_id = create_run(platform, "eval", "auth-owner")
    resource = run_resource(run_id, "eval")
    mine = fresh_episodes("eval", 2)
    assert post(guarded, episode_spans(mine, resource), bearer(ALPHA)).status_code == 200

    stranger = [
        *episode_spans(fresh_episodes("eval", 1), resource),
        end_marker(resource, episodes=1, status="failed", error="closed by a stranger"),
    ]
    answer = post(guarded, stranger, bearer(BETA))
    assert answer.status_code == 200
    refused = ExportTraceServiceResponse.FromString(answer.content).partial_success
    assert refused.rejected_spans == 2 and "another token" in refused.error_message
    assert run_id not in runs_seen_by(guarded, BETA)
    held = runs_seen_by(guarded, ALPHA)[run_id]
    assert held["state"] == "open" and held["markers"] == {} and held["foreign"] == 2

    assert post(guarded, [end_marker(resource, episodes=2)], bearer(ALPHA)).status_code == 200
    closed = wait_for(lambda: _closed(guarded, ALPHA, run_id), "the owner's run to close")
    assert closed["status"] == "completed"
    assert platform.inspect.run(run_id)["status"] in ("PROCESSING", "COMPLETED")
    landed = sorted(episode["id"] for episode in platform.inspect.episodes(run_id)["items"])
    assert landed == sorted(episode.id for episode in mine)


def _closed(gateway: Gateway, token: str, run_id: str) -> dict[str, object] | None:
    run = runs_seen_by(gateway, token).get(run_id)
    return run if run is not None and run["state"] == "closed" else None


def test_the_gateway_will_not_start_without_tokens_unless_told_to_take_anonymous_senders(
    platform: LocalPlatform, tmp_path: Path
) -> None:
    env = {**os.environ, **platform.env, "HOME": str(tmp_path)}
    env.pop(TOKENS_ENV, None)
    command = [sys.executable, "-m", "prime_otel.cli", "gateway", "--http-port", "0", "--grpc-port", "0"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "no accepted tokens" in done.stderr and "PRIME_OTEL_GATEWAY_TOKENS" in done.stderr


def self_signed(folder: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def test_both_receivers_serve_tls_with_a_certificate(
    platform: LocalPlatform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # requests lets these variables override the exporter's own certificate_file.
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    cert, key = self_signed(tmp_path)
    options = ("--lease-seconds", "30", "--tls-cert", str(cert), "--tls-key", str(key))
    with Gateway(platform, tmp_path / "tls-gateway", *options, tokens=(ALPHA,), ca=cert) as gateway:
        assert gateway.http_url.startswith("https://")
        with pytest.raises(httpx.HTTPError):
            httpx.get(gateway.http_url.replace("https://", "http://") + "/healthz", timeout=5)
        http_run = create_run(platform, "eval", "tls-http")
        http_exporter = HttpSpanExporter(
            endpoint=f"{gateway.http_url}/v1/traces", headers=bearer(ALPHA), certificate_file=str(cert)
        )
        grpc_run = create_run(platform, "eval", "tls-grpc")
        credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        grpc_exporter = GrpcSpanExporter(endpoint=gateway.grpc_endpoint, credentials=credentials, headers=bearer(ALPHA))
        try:
            for exporter, run_id in ((http_exporter, http_run), (grpc_exporter, grpc_run)):
                resource = run_resource(run_id, "eval")
                spans = [*episode_spans(fresh_episodes("eval", 1), resource), end_marker(resource, episodes=1)]
                assert exporter.export(spans) is SpanExportResult.SUCCESS
        finally:
            http_exporter.shutdown()
            grpc_exporter.shutdown()
        for run_id in (http_run, grpc_run):
            closed = wait_for(lambda run_id=run_id: gateway.runs().get(run_id, {}).get("state") == "closed", run_id)
            assert closed
            assert len(platform.inspect.episodes(run_id)["items"]) == 1
