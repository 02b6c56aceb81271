"""An eval producer: a few hundred verifiers episodes logged while they "run", then a summary.

Point it at any platform with PRIME_API_KEY / PRIME_API_BASE_URL / PRIME_TRACES_URL (``make demo`` starts
the local platform and sets them).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _episodes import make_episodes

import prime_otel as po

CONFIG = Path(__file__).parent / "eval.toml"


def main(count: int = 300) -> int:
    episodes = make_episodes(count, kind="eval")
    run = po.init(
        name="gsm8k-demo",
        environments=["gsm8k"],
        model="Qwen/Qwen3-8B",
        framework="verifiers",
        tags=["demo"],
        config=CONFIG,
    )
    with run:
        for start in range(0, len(episodes), 8):
            run.log_episodes(episodes[start : start + 8])
        run.update_summary(po.metrics.from_episodes(episodes))
    return 0 if run.report.complete else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 300))
