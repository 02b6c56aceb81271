"""The training step objects whose confirm an online run's producer left in flight when it died, settled by
``prime-otel sync`` by confirming each object's key again (``rft_samples.confirm_again``, the gateway's rule too).

The live sink writes each object's step and key, and the sample id range it used, to the spool's ledger with the
in-flight marker, after the object's PUT and before its confirm. Confirming a key twice registers it once, so a
confirm that succeeds now means the records are delivered (never uploaded again); a refused key was never
registered, so its records wait for the replay, which uploads them as a fresh object in a range after every range
the run used; anything else leaves them possibly missing, with the reason, never sent again.
"""

from __future__ import annotations

import logging

from ..errors import failure_reason
from ..exporters.rft_samples import RftSamplesSink
from ..processors._spool import RunSpool
from ._spool_in_flight import InFlightOutcome

_logger = logging.getLogger("prime_otel")

CONFIRM_UNREPEATABLE = "in flight when the producer died; its step object could not be confirmed again"


class InFlightStepObjects:
    """Confirms again the step objects one spool's training sample sink had in flight, and settles their records."""

    def __init__(self, spool: RunSpool, sink: RftSamplesSink) -> None:
        self._spool = spool
        self._sink = sink

    def settle(self) -> InFlightOutcome:
        name = self._sink.name
        stored: list[int] = []
        absent: list[int] = []
        undecided: dict[str, list[int]] = {}
        for (step, key), seqs in sorted(self._spool.objects_in_flight(name).items()):
            outcome = self._sink.confirm_again(step, key)
            if outcome.registered:
                stored.extend(seqs)
            elif outcome.registered is False:
                absent.extend(seqs)
            else:
                why = failure_reason(outcome.error) if outcome.error else "no answer"
                reason = f"{CONFIRM_UNREPEATABLE} ({why})"
                undecided.setdefault(reason, []).extend(seqs)
        if stored or absent:
            self._spool.resolve_in_flight(name, stored=stored, absent=absent, undecided=[], reason="")
        for reason, seqs in undecided.items():
            self._spool.resolve_in_flight(name, stored=[], absent=[], undecided=seqs, reason=reason)
        missing = sum(len(seqs) for seqs in undecided.values())
        if missing:
            _logger.warning(
                "%d training records were in a step object whose confirm was in flight when the producer died, and "
                "it cannot be confirmed again: counted as possibly missing, not sent again",
                missing,
            )
        return InFlightOutcome(len(stored), len(absent), missing)
