"""verifiers 0.4.0's own ``verifiers/v1/utils/platform.py``, unmodified, driving one SDK through four flows.

    python -m tests.compat._verifiers_flows released|shim <hosted eval id> <its token>

``shim`` installs ``prime_otel.compat`` first, so platform.py's ``import prime_runs`` is prime-otel; ``released``
leaves the installed prime-runs 0.1.4 in place. Flows: a normal eval, one aborted by an exception, one cancelled
by Ctrl-C, and one attached by id to a hosted evaluation (with that evaluation's own key, as its sandbox has).
Each flow logs the three fixture episodes under ids prefixed ``<sdk>-<flow>-`` (the platform keeps one copy of an
episode id). Prints one JSON line: per flow what the producer saw (run id, status, summary, losses) and the v0
sample rows prime-runs 0.1.4's projection makes of the episodes it logged (``released`` only).
"""

from __future__ import annotations

import copy
import json
import os
import sys
from typing import Any

FLOW_NAMES = ("normal", "aborted", "cancelled", "attached")


def main(sdk: str, hosted_id: str, hosted_token: str) -> None:
    if sdk == "shim":
        import prime_otel.compat

        prime_otel.compat.install()
    from verifiers.v1.configs.cli.eval import EvalConfig
    from verifiers.v1.utils import platform

    from tests._fixtures import episode_from_record, load_records

    seen: dict[str, Any] = {"sdk": platform.pr.__name__, "flows": {}}
    for flow in FLOW_NAMES:
        episodes = [episode_from_record(tagged(record, f"{sdk}-{flow}-")) for record in load_records("eval")]
        attach = hosted_id if flow == "attached" else None
        config = EvalConfig.model_validate({"model": "Qwen/Qwen3-8B", "run": {"name": f"vf-{flow}", "attach": attach}})
        config.env.taskset.id = "gsm8k"
        if flow == "attached":
            os.environ["PRIME_API_KEY"] = hosted_token
        state = platform.PushState()
        run = platform.open_run(config, state, num_examples=len(episodes))
        platform.log_episodes(run, episodes)
        if flow == "aborted":
            platform.abort_run(run, ValueError("the judge model is unreachable"), state)
        elif flow == "cancelled":
            platform.abort_run(run, KeyboardInterrupt(), state)
        else:
            platform.finish_run(run, episodes, state)
        seen["flows"][flow] = {
            "id": run.id,
            "assigned_id": config.run.id,
            "status": run.status.value,
            "finished": run.finished,
            "summary": run.summary,
            "url_path": run.url.split("/", 3)[3] if run.url else None,
            "errors": list(run.errors),
            "incomplete": state.incomplete,
            "state_error": state.error,
            # What 0.1.4 writes to the sample table (outside the Prime Traces beta): its own projection.
            "v0_rows": platform.pr.projection.build_samples(episodes) if sdk == "released" else None,
        }
    print(json.dumps(seen))


def tagged(record: dict[str, Any], tag: str) -> dict[str, Any]:
    record = copy.deepcopy(record)
    record["id"] = tag + record["id"]
    for trace in record["traces"]:
        trace["id"] = tag + trace["id"]
    return record


if __name__ == "__main__":
    main(*sys.argv[1:4])
