"""An uninstrumented producer: only the OpenTelemetry API, no prime_otel import.

argv[1] says how it ends: clean | raise | interrupt | sigterm | spawn.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sys
import time
from pathlib import Path

from opentelemetry import trace

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "eval"


def log_fixture_episodes(suffix: str = "") -> None:
    tracer = trace.get_tracer("producer")
    for number in (1, 2, 3):
        record = json.loads((FIXTURES / f"episode-{number}.json").read_text())
        record["id"] += suffix
        for member in record["traces"]:
            member["id"] += suffix
        with tracer.start_as_current_span("episode", attributes={"prime.record.json": json.dumps(record)}):
            pass


def child() -> None:
    log_fixture_episodes("-child")


def main(ending: str) -> None:
    log_fixture_episodes()
    if ending == "raise":
        raise ValueError("the judge model is unreachable")
    if ending == "interrupt":
        raise KeyboardInterrupt
    if ending == "sigterm":
        print("ready", flush=True)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
    if ending == "spawn":
        worker = multiprocessing.get_context("spawn").Process(target=child)
        worker.start()
        worker.join(60)


if __name__ == "__main__":
    main(sys.argv[1])
