"""Training metrics: the ``rft_metrics`` sink posts each step row (one per step, merged by the metrics uploader) as
one ``POST /rft/metrics`` request from its own lane, so a slow sample upload never holds a step's metrics back.

The platform takes 60 of these a minute per token (``PRIME_METRICS_RATE_LIMIT`` for a deployment with another
limit); the sink paces itself to that, so a trainer faster than the limit has its rows wait, in step order, instead
of being answered 429.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .._sink import MetricsRow, SinkStats, SinkWriteError
from ..client import RequestPacer, TrainingRunsAPI, metered_requests, platform_limit
from ..errors import is_permanent, is_transient

METRICS_REQUESTS_PER_MINUTE = 60
METRICS_RATE_LIMIT_VARIABLE = "PRIME_METRICS_RATE_LIMIT"


class RftMetricsSink:
    """The ``rft_metrics`` sink: one replayable request per row (the platform keeps one row per step)."""

    name = "rft_metrics"
    replay_safe = True  # the platform keeps one row per step and merges a repeat
    reports_requests = False

    def __init__(self, api: TrainingRunsAPI, run_id: str) -> None:
        self.enabled = True
        self.stats = SinkStats()
        self._api = api
        self._run_id = run_id
        self.pacer = RequestPacer(platform_limit(METRICS_RATE_LIMIT_VARIABLE, METRICS_REQUESTS_PER_MINUTE))

    @property
    def quiet_off_reason(self) -> str | None:
        return None

    def write(self, items: Sequence[MetricsRow]) -> None:
        lost: list[int] = []
        reported: BaseException | None = None
        for position, row in enumerate(items):
            try:
                if not isinstance(row, Mapping):
                    raise TypeError(f"a metrics row must be a mapping, got {type(row).__name__}")
                self.pacer.acquire()
                with metered_requests(self._count_request):
                    self._api.post_metrics(self._run_id, row)
            except Exception as exc:
                lost.append(position)
                if not is_permanent(exc):
                    reported = exc if reported is None or is_transient(exc) else reported
                    continue
                lost.extend(range(position + 1, len(items)))
                raise SinkWriteError(exc, len(lost), lost=lost) from exc
            self.stats.delivered += 1
        if reported is not None:
            raise SinkWriteError(reported, len(lost), lost=lost)

    def _count_request(self, sent_bytes: int) -> None:
        self.stats.requests += 1
        self.stats.bytes += sent_bytes

    def flush(self) -> None:
        return None

    def close(self) -> None:
        return None

    def reset_after_fork(self) -> None:
        self.pacer.reset_after_fork()
