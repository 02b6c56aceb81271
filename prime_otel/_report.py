"""The delivery report: per sink, what reached the platform and what did not."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class SinkReport:
    sink: str
    delivered: int
    failed: int
    dropped: int
    skipped: int
    requests: int
    bytes: int
    state: str
    spooled: int = 0
    replayed: int = 0
    pending: int = 0
    possibly_missing: int = 0
    # Why records failed on this sink: a short reason -> how many records.
    failure_reasons: dict[str, int] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return not (self.failed or self.dropped or self.pending or self.possibly_missing)

    def line(self) -> str:
        text = (
            f"{self.sink:<13} delivered {self.delivered:>7}  failed {self.failed:>5}  dropped {self.dropped:>5}  "
            f"requests {self.requests:>5}  bytes {_human_bytes(self.bytes):>9}  ({self.state})"
        )
        if self.spooled or self.possibly_missing:
            text += (
                f"  spooled {self.spooled}, replayed {self.replayed}, still spooled {self.pending}, "
                f"possibly missing {self.possibly_missing}"
            )
        return text


@dataclass(frozen=True)
class DeliveryReport:
    run_id: str
    url: str | None
    status: str
    sinks: tuple[SinkReport, ...]

    @property
    def complete(self) -> bool:
        return all(s.complete for s in self.sinks)

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "url": self.url, "status": self.status, "sinks": [asdict(s) for s in self.sinks]}

    def render(self) -> str:
        head = f"Run {self.run_id} {self.status}" + (f": {self.url}" if self.url else "")
        return "\n".join([head, *("  " + s.line() for s in self.sinks)])


def _human_bytes(count: int) -> str:
    size = float(count)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{count} B"
