"""The attempt listener: how the uploader learns, per HTTP attempt, whether a request may be in flight.

It lives on the ground floor because two rooms share it without importing each other's internals: the
client tells it about every attempt, and a processor's slot sets it around a write to keep the spool's
"in flight" marker exactly as long as a request may be under way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

#: Told ``True`` before every attempt and ``False`` after one that certainly reached no server, so a caller can
#: keep a durable "request in flight" marker exactly as long as a request may be under way.
ATTEMPT_LISTENER: ContextVar[Callable[[bool], None] | None] = ContextVar("prime_otel_attempt_listener", default=None)


class RequestProgress(Protocol):
    """Told by a sink that sends one batch in several requests what each request carries and what became of it,
    so the caller's in-flight marker names only the records (positions in the batch) a request under way may
    apply, and records a request stored are settled before the next request goes out."""

    def carrying(self, positions: Iterable[int]) -> None:
        """The next attempts may store these records (they stay in flight until delivered or released)."""

    def delivered(self, positions: Iterable[int]) -> None:
        """These records are stored for good."""

    def released(self, positions: Iterable[int]) -> None:
        """These records are certainly not stored (a crash now leaves them for a replay)."""


#: Set around a sink's write by a caller keeping in-flight markers, for sinks that report their requests.
REQUEST_PROGRESS: ContextVar[RequestProgress | None] = ContextVar("prime_otel_request_progress", default=None)


@dataclass(frozen=True)
class NumberedRows:
    """The rows a sink that numbers them (the eval sample table: rollouts per example) made of one record: the
    counter that numbered them (its key as JSON text; None for rows the producer numbered), the number they took
    (None likewise), and each row's ``(sample_id, rollout_number)`` key (None for a row without one).

    A sink that stores a record's rows in an object it registers afterwards (a training step object) names it in
    ``step_object``, ``(step, object key)``, so that after a crash the key can be confirmed again instead of
    uploading a second object; its counter is then the step's sample id range (the number being the range used)."""

    counter: str | None
    number: int | None
    keys: Sequence[tuple[str, str] | None]
    step_object: tuple[int, str] | None = None


class RowNumbering(Protocol):
    """Kept around a write by a caller that makes a numbering sink's rows durable (the spool's slot), so that after
    a crash the rows a request carried can be read back by their keys, and the records are numbered again as they
    were (positions are those of the records in the batch)."""

    def given(self, position: int) -> int | None:
        """The number the record took when a write that a crash cut short numbered it, if one did."""

    def numbered(self, rows: Mapping[int, NumberedRows]) -> None:
        """What the sink made of these records; kept durable before a request carrying them goes out."""


#: Set around a sink's write by a caller keeping its rows' numbers and keys with the in-flight marker.
ROW_NUMBERING: ContextVar[RowNumbering | None] = ContextVar("prime_otel_row_numbering", default=None)


#: How the thread sending for one sink waits (a retry's back-off, a pacing gap): called with the seconds to wait and
#: the caller's own sleep, it returns False instead of waiting when the wait would outlast the sender's deadline
#: (the run is finishing), and the caller then gives the request up as not sent. Unset: the caller's plain sleep.
SenderWait = Callable[[float, Callable[[float], None]], bool]
SENDER_WAIT: ContextVar[SenderWait | None] = ContextVar("prime_otel_sender_wait", default=None)

#: Told the body size of every HTTP attempt a sink's request makes (successful or not), for its report.
REQUEST_METER: ContextVar[Callable[[int], None] | None] = ContextVar("prime_otel_request_meter", default=None)
