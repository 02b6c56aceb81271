"""The attempt listener: how the uploader learns, per HTTP attempt, whether a request may be in flight.

It lives on the ground floor because two rooms share it without importing each other's internals: the
client tells it about every attempt, and a processor's slot sets it around a write to keep the spool's
"in flight" marker exactly as long as a request may be under way.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

#: Told ``True`` before every attempt and ``False`` after one that certainly reached no server, so a caller can
#: keep a durable "request in flight" marker exactly as long as a request may be under way.
ATTEMPT_LISTENER: ContextVar[Callable[[bool], None] | None] = ContextVar("prime_otel_attempt_listener", default=None)
