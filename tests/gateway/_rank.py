"""One rank of an eval run over OTLP (``prime_otel.init(transport="otlp")``), steered through stdin by the fleet
test: ``log <n>`` logs n JSON episode records under fresh ids and flushes them out; ``finish`` or ``fail`` end
the run (or the test kills the process). Prints ``RUN <id>``, ``LOGGED <ids>`` and ``DONE`` lines."""

from __future__ import annotations

import copy
import json
import sys
import uuid

import prime_otel as po
from tests._fixtures import load_records


def main() -> None:
    run = po.init(name="fleet", environments=["gsm8k"], model="Qwen/Qwen3-8B", transport="otlp")
    say("RUN", run.id)
    records = load_records("eval")
    for line in sys.stdin:
        command, _, argument = line.strip().partition(" ")
        if command == "log":
            batch = []
            for number in range(int(argument)):
                record = copy.deepcopy(records[number % len(records)])
                record["id"] = uuid.uuid4().hex
                for trace in record["traces"]:
                    trace["id"] = uuid.uuid4().hex
                batch.append(record)
            run.log_episodes(batch)
            run.flush()
            say("LOGGED", [record["id"] for record in batch])
        elif command == "finish":
            run.finish()
            say("DONE")
            return
        elif command == "fail":
            run.fail("this rank broke")
            say("DONE")
            return


def say(key: str, value: object = None) -> None:
    print(key, json.dumps(value), flush=True)


if __name__ == "__main__":
    main()
