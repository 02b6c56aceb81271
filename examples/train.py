"""A training producer in the prime-rl style: dispatch a batch of episodes at each step, log the step's
metrics after the optimizer step. Every 10th step's episodes become a Parquet object in the viewer."""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _episodes import make_episodes

import prime_otel as po


def main(steps: int = 30, per_step: int = 8) -> int:
    rng = random.Random(3)
    run = po.init(
        kind="train",
        name="gsm8k-rl-demo",
        model="Qwen/Qwen3-8B",
        environments=["gsm8k"],
        training=po.TrainingSpec(max_steps=steps, batch_size=per_step, rollouts_per_example=4),
        config={"learning_rate": 1e-6, "steps": steps},
    )
    with run:
        for step in range(1, steps + 1):
            run.log_episodes(make_episodes(per_step, kind="train", seed=step, step=step))
            loss = 2.0 * math.exp(-step / 12) + rng.uniform(0, 0.05)
            run.log_metrics({"loss": loss, "reward/mean": 1 - loss / 2.5, "lr": 1e-6}, step=step)
    return 0 if run.report.complete else 1


if __name__ == "__main__":
    sys.exit(main())
