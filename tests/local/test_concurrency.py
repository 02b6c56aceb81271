"""Concurrent requests: nothing lost, nothing merged wrongly, no server errors."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx

from prime_otel.testing import LocalPlatform

from ._helpers import TIMEOUT, create_eval, create_train, jsonl, upload

WORKERS = 8


def test_concurrent_appends_merges_and_uploads_all_land(api: httpx.Client, server: LocalPlatform) -> None:
    evaluation_id = create_eval(api)
    run_id = create_train(api)
    headers = {"Authorization": f"Bearer {server.api_key}"}

    def work(i: int) -> list[int]:
        with httpx.Client(base_url=server.url, headers=headers, timeout=TIMEOUT) as client:
            samples = client.post(f"/api/v1/evaluations/{evaluation_id}/samples", json={"samples": [{"i": i}] * 3})
            metrics = client.post("/api/v1/rft/metrics", json={"run_id": run_id, "metrics": {f"m{i}": i, "step": 1}})
            trace = {"id": uuid.uuid4().hex, "run": {"id": evaluation_id, "type": "eval"}}
            traces = upload(client, jsonl([trace]), episodes=False)
            return [samples.status_code, metrics.status_code, traces.status_code]

    with ThreadPoolExecutor(WORKERS) as pool:
        statuses = list(pool.map(work, range(WORKERS * 2)))
    assert all(codes == [200, 200, 200] for codes in statuses)
    assert server.inspect.samples(evaluation_id)["total"] == WORKERS * 2 * 3
    assert server.inspect.run(evaluation_id)["num_traces"] == WORKERS * 2
    (row,) = server.inspect.run(run_id)["metric_rows"]
    assert {f"m{i}" for i in range(WORKERS * 2)} <= set(row)
