"""Order statistics over measured samples."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def percentile(values: Sequence[float], share: float) -> float:
    """Nearest-rank percentile (``share`` in 0..1) of a non-empty sample."""
    ordered = sorted(values)
    rank = max(1, math.ceil(share * len(ordered)))
    return float(ordered[rank - 1])


def latency_summary(nanoseconds: Sequence[int]) -> dict[str, float]:
    """Median, p99, mean and max of per-call latencies, in microseconds."""
    micros = [value / 1000 for value in nanoseconds]
    return {
        "calls": len(micros),
        "median_us": statistics.median(micros),
        "p99_us": percentile(micros, 0.99),
        "mean_us": statistics.fmean(micros),
        "max_us": max(micros),
    }


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def slope(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of y over x."""
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread if spread else 0.0
