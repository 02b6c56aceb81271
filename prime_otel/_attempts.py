"""The attempt listener: how the uploader learns, per HTTP attempt, whether a request may be in flight.

It lives on the ground floor because two rooms share it without importing each other's internals: the
client tells it about every attempt, and a processor's slot sets it around a write to keep the spool's
"in flight" marker exactly as long as a request may be under way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextvars import ContextVar
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


#: How the thread sending for one sink waits (a retry's back-off, a pacing gap): called with the seconds to wait and
#: the caller's own sleep, it returns False instead of waiting when the wait would outlast the sender's deadline
#: (the run is finishing), and the caller then gives the request up as not sent. Unset: the caller's plain sleep.
SenderWait = Callable[[float, Callable[[float], None]], bool]
SENDER_WAIT: ContextVar[SenderWait | None] = ContextVar("prime_otel_sender_wait", default=None)

#: Told the body size of every HTTP attempt a sink's request makes (successful or not), for its report.
REQUEST_METER: ContextVar[Callable[[int], None] | None] = ContextVar("prime_otel_request_meter", default=None)
