"""Reading back whether an append-only call took effect after it failed ambiguously.

The evaluations API takes no idempotency key: after a 502/504 or a broken connection, the only way to know
whether a ``POST …/samples`` was applied is to look for its rows among the stored ones
(``GET /evaluations/{id}/samples``, page by page). A row is recognised by its ``sample_id`` with its
``rollout_number``: a sink numbers each example's rollouts itself, so no two rows it sends share both.
Only two agreeing reads, a settle apart, prove that a request was *not* applied: the server may still have been
working on it when the first read came.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import APIError
from ._evals import SAMPLE_PAGE_ROWS, EvaluationsAPI

#: Seconds between the two reads that must agree before a request counts as not applied.
SETTLE_SECONDS = 1.0
#: A table larger than this is not read back (the request stays possibly missing).
MAX_ROWS_READ = 20_000

SampleKey = tuple[str, str]


def sample_key(row: Any) -> SampleKey | None:
    """``(sample_id, rollout_number)`` as text, or None for a row that does not carry both. Loose on purpose:
    a platform that stored ``"7"`` for ``7`` (or ``1.0`` for ``1``) must not make a stored row look absent."""
    if not isinstance(row, Mapping) or row.get("sample_id") is None or row.get("rollout_number") is None:
        return None
    return _text(row["sample_id"]), _text(row["rollout_number"])


def _text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


@dataclass(frozen=True)
class StoredSamples:
    """How many stored rows carry each key. ``complete``: the answer gave the table's total, that total did
    not change while the table was read, and every stored row was read, each with a key; only then can a read
    prove that a row is absent."""

    counts: collections.Counter[SampleKey]
    complete: bool

    @classmethod
    def read(cls, api: EvaluationsAPI, evaluation_id: str, *, max_rows: int = MAX_ROWS_READ) -> StoredSamples:
        counts: collections.Counter[SampleKey] = collections.Counter()
        keyless = False
        seen = 0
        first_total: int | None = None
        page = 1
        while True:
            body = api.sample_page(evaluation_id, page)
            rows = body.get("samples")
            if not isinstance(rows, list):
                raise APIError(f"the samples read of {evaluation_id} returned no list of samples")
            total = body.get("total") if isinstance(body.get("total"), int) else None
            if page == 1:
                first_total = total
            for row in rows:
                key = sample_key(row)
                keyless = keyless or key is None
                if key is not None:
                    counts[key] += 1
            seen += len(rows)
            if len(rows) < SAMPLE_PAGE_ROWS or (total is not None and seen >= total):
                break
            if seen >= max_rows:
                return cls(counts, complete=False)
            page += 1
        # Without a total, a short page may be the server's own page limit rather than the end of the table.
        whole = total is not None and total == first_total and seen == total
        return cls(counts, complete=whole and not keyless)

    def stored(self, keys: Iterable[SampleKey | None]) -> list[bool | None]:
        """Per key (with its multiplicity among ``keys``): True when stored exactly that often, False when not
        stored at all (and the read was complete), None when the read cannot tell."""
        wanted = collections.Counter(key for key in keys if key is not None)
        verdicts: list[bool | None] = []
        for key in keys:
            found = self.counts[key] if key is not None else -1
            if key is not None and found == wanted[key]:
                verdicts.append(True)
            elif found == 0 and self.complete:
                verdicts.append(False)
            else:
                verdicts.append(None)
        return verdicts
