"""A worker pool that serves two evals in a row: each worker logs into the run it is handed, never another.

The pool is created before the first run (as a long-lived rollout pool is): workers get ``run.handle`` with
each task and call ``prime_otel.join(handle)``, which gives them the run while it is open (one joined handle per
worker and run, reused across tasks) and refuses it once it is finished. Workers need no ``finish()``: what a
worker logged is drained when it ends, and the owner's report counts it ("workers: ... delivered").

Point it at any platform with PRIME_API_KEY / PRIME_API_BASE_URL / PRIME_TRACES_URL (``make demo`` starts
the local platform and sets them).
"""

from __future__ import annotations

import multiprocessing
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _episodes import make_episodes

import prime_otel as po


def rollouts(handle: po.RunHandle, seed: int, count: int) -> int:
    """One task in a worker: make ``count`` episodes and log them into the run ``handle`` names."""
    run = po.join(handle)
    run.log_episodes(make_episodes(count, seed=seed))
    return count


def main(tasks: int = 4, per_task: int = 4) -> int:
    context = multiprocessing.get_context("spawn")
    complete = True
    with context.Pool(2) as pool:
        for name in ("gsm8k-first", "gsm8k-second"):
            run = po.init(name=name, environments=["gsm8k"], model="Qwen/Qwen3-8B", framework="verifiers")
            with run:
                logged = sum(pool.starmap(rollouts, [(run.handle, seed, per_task) for seed in range(tasks)]))
                run.update_summary({"episodes": logged})
            complete = complete and run.report.complete
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
