"""The server process: options, start banner, ready file, restart on the same data, the viewer files."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from prime_otel.local._cli import build_parser
from prime_otel.local._viewer import VIEWER_DIR
from prime_otel.testing import LocalPlatform

from ._helpers import FIXTURES, TIMEOUT, create_eval, create_train, fixture_json, wait_until

BANNER = re.compile(r"^Prime local platform: (http://127\.0\.0\.1:\d+)  \(viewer: \1(/_viewer/login\?token=\S+)\)$")


def _client(platform: LocalPlatform) -> httpx.Client:
    return httpx.Client(base_url=platform.url, headers={"Authorization": f"Bearer {platform.api_key}"}, timeout=TIMEOUT)


def test_restart_on_the_same_data_keeps_every_run_and_the_key(local_platform: LocalPlatform) -> None:
    url, key = local_platform.url, local_platform.api_key
    with _client(local_platform) as api:
        evaluation_id = create_eval(api, metadata={"a": 1})
        api.post(f"/api/v1/evaluations/{evaluation_id}/samples", json=fixture_json("eval/samples.json"))
        run_id = create_train(api)
        api.post("/api/v1/rft/metrics", json={"run_id": run_id, "metrics": {"loss": 1, "step": 1}})
        presigned = api.post("/api/v1/rft/samples/presign", json={"run_id": run_id, "step": 1}).json()["data"]
        httpx.put(presigned["presignedUrl"], content=(FIXTURES / "train/step-10.parquet").read_bytes(), timeout=TIMEOUT)
        api.post("/api/v1/rft/samples/confirm", json={"run_id": run_id, "step": 1, "s3_key": presigned["s3Key"]})
        api.post(f"/api/v1/evaluations/{evaluation_id}/finalize", json={"metrics": {"avg_reward": 1}})
    before = {run["id"]: run for run in local_platform.inspect.runs()}
    local_platform.restart()
    assert (local_platform.url, local_platform.api_key) == (url, key)
    assert wait_until(lambda: local_platform.inspect.run(evaluation_id)["status"] == "COMPLETED")
    after = {run["id"]: run for run in local_platform.inspect.runs()}
    assert set(after) == set(before) == {evaluation_id, run_id}
    assert local_platform.inspect.samples(evaluation_id)["total"] == 3
    assert local_platform.inspect.run(run_id)["metric_rows"] == [{"loss": 1, "step": 1}]
    assert local_platform.inspect.step_rows(run_id, 1)["total"] == 3
    assert local_platform.inspect.run(evaluation_id)["requests"]["POST /api/v1/evaluations/"] == 1


def test_the_banner_carries_a_sign_in_link_and_never_the_key(local_platform: LocalPlatform) -> None:
    log = local_platform.log_file.read_text()
    assert local_platform.api_key not in log
    banners = [match for line in log.splitlines() if (match := BANNER.match(line))]
    assert len(banners) == 1
    assert banners[0].group(1) == local_platform.url
    with httpx.Client(base_url=local_platform.url, timeout=TIMEOUT) as browser:
        assert browser.get(banners[0].group(2)).status_code == 303
        assert browser.get("/_viewer/session").json() == {"api_key": local_platform.api_key}
    ready = json.loads((local_platform.data_dir / "ready.json").read_text())
    assert ready["url"] == local_platform.url
    assert isinstance(ready["pid"], int)
    key_file = local_platform.data_dir / "api-key"
    assert key_file.read_text().strip() == local_platform.api_key
    assert local_platform.api_key.startswith("pit_local_")
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert (local_platform.data_dir / "platform.sqlite3").is_file()


@pytest.mark.local_platform(
    api_key="pit_explicit",
    traces="disabled",
    teams=["team_a", "team_b"],
    status_endpoint="absent",
    object_mode="single",
    samples_rate_limit=7,
    metrics_rate_limit=8,
    presign_ttl=9,
    processing_delay=0.1,
)
def test_command_line_options_set_the_behaviour(local_platform: LocalPlatform) -> None:
    assert local_platform.api_key == "pit_explicit"
    settings = local_platform.inspect.settings()
    assert settings["teams"] == ["team_a", "team_b"]
    assert {k: settings[k] for k in ("traces", "status_endpoint", "object_mode")} == {
        "traces": "disabled",
        "status_endpoint": "absent",
        "object_mode": "single",
    }
    assert (settings["samples_rate_limit"], settings["metrics_rate_limit"], settings["presign_ttl"]) == (7, 8, 9)
    with _client(local_platform) as api:
        refused = api.post("/api/v1/rft/external-runs", json={"base_model": "m", "environments": [], "team_id": "c"})
        assert refused.status_code == 403
        create_train(api, team_id="team_b")
        files = {"metadata": (None, b'{"schema_version": 1}'), "traces": ("t.jsonl", b"")}
        traces = api.post("/api/v1/traces", files=files, headers={"Idempotency-Key": "sha256:" + "0" * 64})
        assert traces.json()["error"]["code"] == "service_not_enabled"


def test_the_cli_serves_until_interrupted(tmp_path: Path) -> None:
    ready = tmp_path / "ready.json"
    command = [sys.executable, "-m", "prime_otel.cli", "local", "--port", "0", "--data", str(tmp_path / "data")]
    process = subprocess.Popen(
        [*command, "--ready-file", str(ready)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=tmp_path
    )
    try:
        assert wait_until(ready.exists, timeout=TIMEOUT)
        info = json.loads(ready.read_text())
        assert info["pid"] == process.pid
        response = httpx.get(f"{info['url']}/_local/runs", headers={"x-api-key": info["api_key"]}, timeout=TIMEOUT)
        assert response.json() == []
        os.kill(process.pid, signal.SIGINT)
        assert process.wait(timeout=15) == 0
    finally:
        process.kill()
        process.wait(timeout=15)


def test_the_defaults_of_the_command_line() -> None:
    args = build_parser().parse_args([])
    assert (args.host, args.port, args.data) == ("127.0.0.1", 8787, Path(".prime-otel"))
    assert (args.traces, args.teams, args.status_endpoint, args.object_mode) == ("enabled", None, "present", "additive")
    assert (args.samples_rate_limit, args.metrics_rate_limit, args.presign_ttl) == (300, 60, 900)
    assert (args.processing_delay, args.api_key, args.ready_file) == (0.5, None, None)


@pytest.mark.skipif(not (VIEWER_DIR / "index.html").is_file(), reason="the viewer is not installed")
def test_the_viewer_is_served_at_the_root_and_for_run_links(server: LocalPlatform, anonymous: httpx.Client) -> None:
    index = (VIEWER_DIR / "index.html").read_text()
    assert anonymous.get("/").text == index
    assert anonymous.get("/runs/eval-anything").text == index
    assert anonymous.get("/no-such-file.js").status_code == 404
    for asset in sorted(path for path in VIEWER_DIR.rglob("*") if path.is_file())[:5]:
        response = anonymous.get("/" + asset.relative_to(VIEWER_DIR).as_posix())
        assert (response.status_code, response.content) == (200, asset.read_bytes())
    assert anonymous.get("/api/v1/unknown").json() == {"detail": "Not Found"}
    assert anonymous.post("/api/v1/traces/x/y").json()["error"]["code"] == "not_found"
