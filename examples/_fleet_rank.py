"""One producer process of ``examples/fleet.py``: an ordinary prime-otel program, sending over OTLP.

Nothing in it knows about the Collector or the gateways: ``PRIME_OTEL_TRANSPORT=otlp`` and the standard
``OTEL_EXPORTER_OTLP_*`` variables send its records to the agent Collector, and the launcher's ``RANK`` /
``WORLD_SIZE`` / ``PRIME_RUN_ID`` make rank 1 join rank 0's run. ``python _fleet_rank.py eval 24`` logs 24
eval episodes; ``python _fleet_rank.py train 5`` runs 5 training steps. Prints ``RUN <id>`` once the run is open
and ``REPORT <json>`` (its delivery report and the ids it logged) at the end.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _episodes import make_episodes

import prime_otel as po

PER_STEP = 8


def say(key: str, value: Any) -> None:
    print(key, json.dumps(value), flush=True)


def eval_rank(count: int) -> tuple[po.Run, list[str]]:
    rank = int(os.environ.get("RANK", "0"))
    run = po.init(name="gsm8k-fleet", environments=["gsm8k"], model="Qwen/Qwen3-8B", framework="verifiers")
    say("RUN", run.id)  # the launcher starts rank 1 with this id
    episodes = make_episodes(count, kind="eval", seed=11 + rank)
    with run:
        for start in range(0, count, 8):
            run.log_episodes(episodes[start : start + 8])
        if rank == 0:  # the owner's summary is the run's
            run.update_summary({"note": "sent through the agent Collector and a gateway"})
    return run, [episode.id for episode in episodes]


def training_run(steps: int) -> tuple[po.Run, list[str]]:
    run = po.init(
        kind="train",
        name="gsm8k-rl-fleet",
        model="Qwen/Qwen3-8B",
        environments=["gsm8k"],
        training=po.TrainingSpec(max_steps=steps, batch_size=PER_STEP, rollouts_per_example=4),
    )
    say("RUN", run.id)
    logged: list[str] = []
    with run:
        for step in range(1, steps + 1):
            episodes = make_episodes(PER_STEP, kind="train", seed=step, step=step)
            run.log_episodes(episodes)
            logged += [episode.id for episode in episodes]
            run.log_metrics({"loss": 2.0 * math.exp(-step / 4), "lr": 1e-6}, step=step)
    return run, logged


def main(kind: str, count: int) -> int:
    run, logged = eval_rank(count) if kind == "eval" else training_run(count)
    say("REPORT", {"report": run.report.to_dict(), "episode_ids": logged})
    return 0 if run.report.complete else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
