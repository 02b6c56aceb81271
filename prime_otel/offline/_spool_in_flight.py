"""The samples POST an online eval's producer left in flight when it died, settled by ``prime-otel sync`` from the
rows the evaluation stored, by the offline sync's rule (``_sample_upload.read_back_in_flight``).

The live sink wrote the request's row keys and every record's rollout number to the spool's ledger with the
in-flight marker (``ROW_NUMBERING``). A record whose rows are all stored counts as delivered and is not sent again;
when none of the request's rows is stored on two reads a settle apart (and the request is old enough that the server
is done with it), its records wait for the replay, under the numbers they had; anything else stays possibly missing,
with the reason, and is never sent again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..client._readback import SampleKey
from ..errors import failure_reason
from ..exporters.eval_samples import EvalSamplesSink
from ..processors._spool import RunSpool
from ._sample_upload import read_back_in_flight

_logger = logging.getLogger("prime_otel")

IN_FLIGHT_UNDECIDED = "in flight when the producer died; the stored rows do not prove either way"


@dataclass(frozen=True)
class InFlightOutcome:
    """Records of the request in flight: proven stored, proven absent (sent again), and left possibly missing."""

    stored: int = 0
    absent: int = 0
    undecided: int = 0


class InFlightSamples:
    """Reads back the rows one spool's sample request in flight carried, and settles its records in the ledger."""

    def __init__(
        self,
        spool: RunSpool,
        sink: EvalSamplesSink,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._spool = spool
        self._sink = sink
        self._clock = clock
        self._sleep = sleep

    def settle(self) -> InFlightOutcome:
        name = self._sink.name
        carried = self._spool.rows_in_flight(name)
        if not carried:
            return InFlightOutcome()
        seqs = sorted(carried)
        keys: list[SampleKey | None] = [key for seq in seqs for key in carried[seq].keys]
        sent_at = self._spool.sink(name).inflight_at
        verdicts = read_back_in_flight(self._sink.read_back, keys, sent_at, clock=self._clock, sleep=self._sleep)
        stored: list[int] = []
        at = 0
        for seq in seqs:
            mine, at = verdicts[at : at + len(carried[seq].keys)], at + len(carried[seq].keys)
            if all(verdict is True for verdict in mine):
                stored.append(seq)
        nothing_stored = all(verdict is False for verdict in verdicts)
        absent = seqs if nothing_stored else []
        undecided = [seq for seq in seqs if seq not in stored and not nothing_stored]
        self._spool.resolve_in_flight(name, stored=stored, absent=absent, undecided=undecided, reason=self._reason())
        if undecided:
            _logger.warning(
                "%d eval records were in flight when the producer died and the sample table cannot tell whether it "
                "stored them (%s): counted as possibly missing, not sent again",
                len(undecided),
                self._reason(),
            )
        return InFlightOutcome(len(stored), len(absent), len(undecided))

    def _reason(self) -> str:
        error = self._sink.last_read_error
        if error is None:
            return IN_FLIGHT_UNDECIDED
        return f"in flight when the producer died; the sample table could not be read ({failure_reason(error)})"
