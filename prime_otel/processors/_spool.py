"""The run's durable spool: a write-ahead log of records plus a ledger of what each sink did with them.

Every record the uploader takes is appended to the log before it is sent (and a batch the producer could
not queue is appended on the producer's thread), so a record that could not be delivered now is kept
instead of dropped, and survives a crash of the producer. Per sink, the ledger says which records are
settled (delivered, or reported as possibly missing), which wait for a replay, and which request was in
flight, so a later replay never resends what may already have been applied to a non-idempotent table.

Layout under ``<run folder>/spool/``: ``log-<first seq>.jsonl`` segments of ``{"s": seq, "k": kind,
"r": record}`` lines, and ``ledger.json``.

The spool bounds the backlog, not the history: a segment whose every record each sink has settled is deleted
once the ledger saying so is on disk, and ``max_bytes`` counts the segments still on disk (so what was
delivered no longer counts; the granularity is one segment, at most a sixteenth of the cap). At the end of a
run that delivered every record to every sink, :meth:`RunSpool.discard_if_delivered` removes the spool.

A live run's spool contains disk errors (``contain_disk_errors``): a log write that fails (a full disk) is cut
back to the last whole line and the spool keeps no more records (what it holds is still replayed); a ledger
that cannot be saved any more would let a later sync resend what a non-idempotent sink already stored, so the
spool's folder is then moved aside (``unsynced-<name>``), out of every sync's reach.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import shutil
import threading
import time
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from .._attempts import NumberedRows
from .._files import write_json_atomically
from .._fork import register_for_fork_reset

_logger = logging.getLogger("prime_otel")

SPOOL_DIR = "spool"
LEDGER_FILE = "ledger.json"
SEGMENT_PREFIX = "log-"
SEGMENT_BYTES = 8 * 1024 * 1024
MIN_SEGMENT_BYTES = 64 * 1024
#: The log is cut into segments of at most this share of the cap, so that what every sink settled is freed
#: (segment by segment) long before the cap is reached.
SEGMENTS_PER_CAP = 16
LEDGER_SAVE_INTERVAL_SECONDS = 0.5
DEFAULT_SPOOL_MAX_BYTES = 4 * 1024 * 1024 * 1024
SET_ASIDE_PREFIX = "unsynced-"
DISK_FULL = "spool disk full"
SPOOL_FULL = "spool full"
_DISK_FULL_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT})


class SeqSet:
    """A set of seqs (non-negative ints) kept as a bitmap, one bit a seq: a backlog of a million records costs
    125 KiB where a set of ints took about 60 MiB. Iterates in ascending order."""

    __slots__ = ("_bits", "_count", "_low")

    def __init__(self, seqs: Iterable[int] = ()) -> None:
        self._bits = bytearray()
        self._count = 0
        self._low = 0  # no member is below this
        self.update(seqs)

    def any_in(self, start: int, stop: int) -> bool:
        """Whether a member lies in ``[start, stop)``; whole bytes are scanned at once."""
        if not self._count:
            return False
        stop = min(stop, len(self._bits) * 8)
        seq = max(start, 0)
        while seq < stop and seq & 7:
            if seq in self:
                return True
            seq += 1
        whole_stop = stop & ~7
        if seq < whole_stop and _NONZERO_BYTE.search(self._bits, seq >> 3, whole_stop >> 3) is not None:
            return True
        return any(member in self for member in range(max(seq, whole_stop), stop))

    def __contains__(self, seq: object) -> bool:
        if not isinstance(seq, int) or seq < 0:
            return False
        byte = seq >> 3
        return byte < len(self._bits) and bool(self._bits[byte] >> (seq & 7) & 1)

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[int]:
        if not self._count:
            return
        bits, position = self._bits, self._low >> 3
        while (found := _NONZERO_BYTE.search(bits, position)) is not None:
            byte = found.start()
            value = bits[byte]
            for bit in range(8):
                if value >> bit & 1:
                    yield byte * 8 + bit
            position = byte + 1

    def update(self, seqs: Iterable[int]) -> None:
        bits = self._bits
        for seq in seqs:
            byte = seq >> 3
            if byte >= len(bits):
                bits.extend(bytes(max(byte + 1 - len(bits), len(bits))))
            mask = 1 << (seq & 7)
            if not bits[byte] & mask:
                bits[byte] |= mask
                self._count += 1
                self._low = min(self._low, seq)

    def difference_update(self, seqs: Iterable[int]) -> None:
        bits = self._bits
        for seq in seqs:
            byte = seq >> 3
            if seq < 0 or byte >= len(bits):
                continue
            mask = 1 << (seq & 7)
            if bits[byte] & mask:
                bits[byte] &= ~mask & 0xFF
                self._count -= 1

    def ranges(self) -> list[list[int]]:
        """The members as ``[start, stop)`` ranges; a run of full bytes costs one step, not eight a member."""
        out: list[list[int]] = []
        if not self._count:
            return out
        bits = self._bits
        for found in _FULL_BYTES_OR_ONE.finditer(bits, self._low >> 3):
            start, value = found.start() * 8, bits[found.start()]
            if value == 0xFF:
                runs = [(start, found.end() * 8)]
            else:
                runs = [(start + bit, start + bit + 1) for bit in range(8) if value >> bit & 1]
            for first, stop in runs:
                if out and out[-1][1] == first:
                    out[-1][1] = stop
                else:
                    out.append([first, stop])
        return out

    def smallest(self, count: int) -> list[int]:
        found = list(islice(self, count))
        if count > 0:
            self._low = found[0] if found else len(self._bits) * 8
        return found


_NONZERO_BYTE = re.compile(rb"[^\x00]")
_FULL_BYTES_OR_ONE = re.compile(rb"\xff+|[^\x00\xff]")


@dataclass
class SinkLedger:
    """One sink's view of the log: ``pending`` seqs await a replay, ``missing`` may or may not have been
    applied (never replayed), ``inflight`` was being sent by a non-idempotent request when last written, and
    ``sending`` holds the records of the batch being written that have no outcome yet (after a crash, those not
    in flight are pending). ``failed`` counts records the platform rejected for good (settled, never replayed).

    For a sink that numbers its rows (``ROW_NUMBERING``): ``rows`` holds what it made of each record of the batch
    being written (numbers and row keys, or the step object carrying it), ``counters`` the last number each counter
    gave (a training step's last sample id range), and ``inflight_at`` the
    wall-clock time the marker last went out; ``missing_reasons`` says why records are possibly missing (reason ->
    records), when it is known."""

    pending: SeqSet = field(default_factory=SeqSet)
    missing: SeqSet = field(default_factory=SeqSet)
    inflight: list[int] = field(default_factory=list)
    sending: set[int] = field(default_factory=set)
    #: Every seq below this was dispatched to the sink and has an outcome (delivered, pending or missing) or is in
    #: ``sending``.
    through: int = 0
    delivered: int = 0
    spooled: int = 0
    replayed: int = 0
    failed: int = 0
    rows: dict[int, NumberedRows] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    inflight_at: float = 0.0
    missing_reasons: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "pending": _ranges(self.pending),
            "missing": _ranges(self.missing),
            "inflight": _ranges(self.inflight),
            "sending": _ranges(self.sending),
            "through": self.through,
            "delivered": self.delivered,
            "spooled": self.spooled,
            "replayed": self.replayed,
            "failed": self.failed,
        }
        if self.inflight_at:
            document["inflight_at"] = self.inflight_at
        if self.rows:
            document["rows"] = {
                str(seq): {
                    "counter": made.counter,
                    "number": made.number,
                    "keys": [list(k) if k else None for k in made.keys],
                    **({"object": list(made.step_object)} if made.step_object else {}),
                }
                for seq, made in self.rows.items()
            }
        if self.counters:
            document["counters"] = self.counters
        if self.missing_reasons:
            document["missing_reasons"] = self.missing_reasons
        return document

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SinkLedger:
        return cls(
            pending=SeqSet(_expand(data.get("pending", []))),
            missing=SeqSet(_expand(data.get("missing", []))),
            inflight=_expand(data.get("inflight", [])),
            sending=set(_expand(data.get("sending", []))),
            through=int(data.get("through", 0)),
            delivered=int(data.get("delivered", 0)),
            spooled=int(data.get("spooled", 0)),
            replayed=int(data.get("replayed", 0)),
            failed=int(data.get("failed", 0)),
            rows={
                int(seq): NumberedRows(
                    made.get("counter"),
                    None if made.get("number") is None else int(made["number"]),
                    [(str(k[0]), str(k[1])) if k else None for k in made.get("keys", [])],
                    (int(made["object"][0]), str(made["object"][1])) if made.get("object") else None,
                )
                for seq, made in data.get("rows", {}).items()
            },
            counters={str(counter): int(number) for counter, number in data.get("counters", {}).items()},
            inflight_at=float(data.get("inflight_at", 0.0)),
            missing_reasons={str(reason): int(count) for reason, count in data.get("missing_reasons", {}).items()},
        )


def _ranges(seqs: Iterable[int]) -> list[list[int]]:
    """Sorted seqs as ``[start, stop)`` ranges, so a long outage costs a few numbers in the ledger."""
    if isinstance(seqs, SeqSet):
        return seqs.ranges()
    out: list[list[int]] = []
    for seq in sorted(seqs):
        if out and out[-1][1] == seq:
            out[-1][1] = seq + 1
        else:
            out.append([seq, seq + 1])
    return out


def _expand(ranges: Iterable[Sequence[int]]) -> list[int]:
    return [seq for start, stop in ranges for seq in range(start, stop)]


class SpooledRecord:
    """One logged record: its seq, kind and compact JSON (:attr:`data`), decoded only when :attr:`record` is read."""

    __slots__ = ("_record", "data", "kind", "seq")

    def __init__(self, seq: int, kind: str, data: bytes) -> None:
        self.seq, self.kind, self.data = seq, kind, data
        self._record: dict[str, Any] | None = None

    @classmethod
    def from_line(cls, line: bytes) -> SpooledRecord:
        """A log line as :meth:`RunSpool.append` writes it: ``{"s":<seq>,"k":<kind>,"r":<record>}``."""
        kind_at = line.index(b',"k":')
        record_at = line.index(b',"r":', kind_at)
        kind = json.loads(line[kind_at + 5 : record_at])
        return cls(int(line[5:kind_at]), kind, line[record_at + 5 : line.rindex(b"}")])

    @property
    def record(self) -> dict[str, Any]:
        if self._record is None:
            self._record = json.loads(self.data)
        return self._record


class _LogIndex:
    """Where each logged seq's line starts, in parallel arrays (seqs ascending): about 20 bytes a record, where a
    dict of tuples took about 350."""

    def __init__(self) -> None:
        self._seqs = array("q")
        self._segment_numbers = array("I")
        self._offsets = array("Q")
        self._segments: list[Path] = []

    def add(self, seq: int, segment: Path, offset: int) -> None:
        if not self._segments or self._segments[-1] != segment:
            self._segments.append(segment)
        at = len(self._seqs) if not self._seqs or seq > self._seqs[-1] else bisect_left(self._seqs, seq)
        self._seqs.insert(at, seq)
        self._segment_numbers.insert(at, len(self._segments) - 1)
        self._offsets.insert(at, offset)

    def move(self, folder: Path) -> None:
        self._segments = [folder / segment.name for segment in self._segments]

    def find(self, seq: int) -> tuple[Path, int] | None:
        at = bisect_left(self._seqs, seq)
        if at == len(self._seqs) or self._seqs[at] != seq:
            return None
        return self._segments[self._segment_numbers[at]], self._offsets[at]


class RunSpool:
    """The spool of one run folder; thread-safe, append-only, bounded by ``max_bytes`` of log on disk."""

    def __init__(
        self,
        run_folder: Path,
        max_bytes: int = DEFAULT_SPOOL_MAX_BYTES,
        *,
        name: str = SPOOL_DIR,
        sinks: Sequence[str] = (),
        contain_disk_errors: bool = False,
        removable: bool = True,
    ) -> None:
        self.run_folder = run_folder
        self.name = name
        self.folder = run_folder / name
        self.sinks = list(sinks)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        #: Records the spool did not keep, and why (the first reason; a full cap lasts while the backlog fills it).
        self.refused = 0
        self.refusal_reason: str | None = None
        #: Set once a write failed: from then on the spool keeps nothing more (a full cap only lasts while it is full).
        self._stopped = False
        self._discarded = False
        #: Where the spool's files went when its ledger could not be saved (see the module docstring).
        self.set_aside_to: Path | None = None
        self._contain_disk_errors = contain_disk_errors
        #: False when another run handle may share this folder (a run attached by id): it is never removed.
        self._removable = removable
        self._lock = threading.Lock()
        self._sinks: dict[str, SinkLedger] = {}
        self._next_seq = 0
        self._index = _LogIndex()
        self._bytes = 0
        self._segment_sizes: dict[Path, int] = {}
        self._segment_limit = max(MIN_SEGMENT_BYTES, min(SEGMENT_BYTES, max_bytes // SEGMENTS_PER_CAP))
        self._segment: Path | None = None
        self._segment_bytes = 0
        self._last_save = 0.0
        self._load()
        register_for_fork_reset(self)

    @classmethod
    def all_in(cls, run_folder: Path) -> list[RunSpool]:
        """Every spool of a run folder: the owner's and those of other processes of the run."""
        return [cls(run_folder, name=path.name) for path in sorted(run_folder.glob(f"{SPOOL_DIR}*")) if path.is_dir()]

    def reset_after_fork(self) -> None:
        """A forked child keeps its own log: two processes never append to one sequence (nor two spools of one
        child: the inherited run's is ``@<pid>.forked``, beside the ``@<pid>`` of a run the child joined)."""
        base = self.name.split("@")[0]
        self.__init__(  # type: ignore[misc]
            self.run_folder,
            self.max_bytes,
            name=f"{base}@{os.getpid()}.forked",
            sinks=self.sinks,
            contain_disk_errors=self._contain_disk_errors,
            removable=self._removable,
        )

    # -- the log ---------------------------------------------------------------------------------

    def _segments(self) -> list[tuple[int, Path]]:
        found = []
        for path in self.folder.glob(f"{SEGMENT_PREFIX}*.jsonl"):
            start = path.stem[len(SEGMENT_PREFIX) :]
            if start.isdigit():
                found.append((int(start), path))
        return sorted(found)

    def _load(self) -> None:
        ledger = self.folder / LEDGER_FILE
        if ledger.exists():
            data = json.loads(ledger.read_text(encoding="utf-8"))
            self._sinks = {name: SinkLedger.from_dict(entry) for name, entry in data.get("sinks", {}).items()}
            self.sinks = list(dict.fromkeys([*self.sinks, *data.get("declared_sinks", [])]))
            self._next_seq = int(data.get("next_seq", 0))
        for _, path in self._segments():
            self._index_segment(path)

    def _index_segment(self, path: Path) -> None:
        """Where each seq's line starts. A line torn by a crash was never acknowledged to anyone; appends go to a
        new segment after it (another process may still be writing this one, so it is never cut)."""
        offset = 0
        with path.open("rb") as handle:
            for raw in handle:
                if not raw.endswith(b"\n"):
                    break
                seq = int(raw[5 : raw.index(b",")])  # every line starts with {"s":<seq>,
                self._index.add(seq, path, offset)
                self._next_seq = max(self._next_seq, seq + 1)
                offset += len(raw)
        self._bytes += offset
        self._segment_sizes[path] = offset
        self._segment, self._segment_bytes = path, offset
        if path.stat().st_size > offset:
            self._segment = None
            self._next_seq = max(self._next_seq, int(path.stem[len(SEGMENT_PREFIX) :]) + 1)

    def append(
        self, kind: str | Sequence[str], encoded_records: Sequence[bytes], *, past_bound: bool = False
    ) -> list[int] | None:
        """Log records (compact JSON, unstamped) of one kind, or of the kind given for each; their seqs, or None when
        the spool is full (nothing written). ``past_bound``: logged even when full, for records that replace
        records the spool holds (the caller keeps what passes this way bounded)."""
        if self._bytes >= self.max_bytes and not self._stopped and not past_bound:
            self.save_soon()  # frees the segments every sink settled since the last save
        with self._lock:
            full = self._bytes >= self.max_bytes and not past_bound
            if full and self.refusal_reason is None:
                self.refusal_reason = SPOOL_FULL
                _logger.warning(
                    "the spool at %s is full (%d bytes not yet delivered to every sink): it keeps no more records "
                    "until the sinks catch up",
                    self.folder,
                    self._bytes,
                )
            if full or self._stopped:
                self.refused += len(encoded_records)
                return None
            first = self._next_seq
            kinds = [kind] * len(encoded_records) if isinstance(kind, str) else kind
            kind_json = {name: json.dumps(name).encode() for name in set(kinds)}
            lines = [
                b'{"s":%d,"k":%s,"r":%s}\n' % (first + offset, kind_json[name], data)
                for offset, (name, data) in enumerate(zip(kinds, encoded_records, strict=True))
            ]
            if self._segment is None or self._segment_bytes >= self._segment_limit:
                self._segment, self._segment_bytes = self.folder / f"{SEGMENT_PREFIX}{first:012d}.jsonl", 0
            try:
                _append_whole(self._segment, b"".join(lines), self._segment_bytes)
            except OSError as exc:
                if not self._contain_disk_errors:
                    raise
                self._stop_keeping(exc)
                self.refused += len(lines)
                return None
            self._next_seq = first + len(lines)
            offset = self._segment_bytes
            for seq, line in enumerate(lines, start=first):
                self._index.add(seq, self._segment, offset)
                offset += len(line)
            self._bytes += offset - self._segment_bytes
            self._segment_sizes[self._segment] = offset
            self._segment_bytes = offset
            return list(range(first, first + len(lines)))

    def read(self, seqs: Sequence[int]) -> list[SpooledRecord]:
        """The logged records for ``seqs`` that the log still holds, in seq order."""
        with self._lock:
            places = sorted(place for place in map(self._index.find, set(seqs)) if place is not None)
        found: list[SpooledRecord] = []
        handle = None
        current: Path | None = None
        try:
            for path, offset in places:
                if path != current:
                    if handle is not None:
                        handle.close()
                        handle = None
                    current = path
                    if path not in self._segment_sizes:
                        continue  # freed: every sink had settled its records
                    handle = path.open("rb")
                if handle is None:
                    continue
                assert handle is not None
                handle.seek(offset)
                found.append(SpooledRecord.from_line(handle.readline()))
        finally:
            if handle is not None:
                handle.close()
        return sorted(found, key=lambda record: record.seq)

    # -- the ledger ------------------------------------------------------------------------------

    def waiting(self, name: str) -> int:
        """Records of ``name`` not settled yet: kept for a replay, or logged and not (yet) answered for."""
        ledger = self.sink(name)
        with self._lock:
            pending = ledger.pending
            unanswered = sum(1 for seq in range(ledger.through, self._next_seq) if seq not in pending)
            return len(pending) + unanswered

    def sink(self, name: str) -> SinkLedger:
        with self._lock:
            return self._sinks.setdefault(name, SinkLedger())

    def save_soon(self) -> None:
        """Ledger changes that a crash may lose: losing them only causes a replay that is safe anyway (a
        non-idempotent request's in-flight marker is written at once, see :meth:`mark_inflight`)."""
        if time.monotonic() - self._last_save >= LEDGER_SAVE_INTERVAL_SECONDS:
            self.save()

    def save(self) -> None:
        """Write the ledger, then free the segments it says every sink settled."""
        if self.set_aside_to is not None or self._discarded:
            return
        self._last_save = time.monotonic()
        with self._lock:
            document = {
                "next_seq": self._next_seq,
                "declared_sinks": self.sinks,
                "sinks": {n: s.to_dict() for n, s in self._sinks.items()},
            }
        try:
            write_json_atomically(self.folder / LEDGER_FILE, document)
        except OSError as exc:
            if not self._contain_disk_errors:
                raise
            self._set_aside(exc)
            return
        self._free_settled_segments()

    def _free_settled_segments(self) -> None:
        """Delete every closed segment whose records each sink settled (delivered, failed or possibly missing):
        the ledger on disk already says so, so neither a replay nor a sync will ever read them."""
        with self._lock:
            names = set(self.sinks) | set(self._sinks)
            ledgers = [self._sinks.get(name) for name in names]
            if not names or any(ledger is None for ledger in ledgers):
                return
            segments = sorted((int(path.stem[len(SEGMENT_PREFIX) :]), path) for path in self._segment_sizes)
            for position, (start, path) in enumerate(segments):
                last = position + 1 == len(segments)
                stop = self._next_seq if last else segments[position + 1][0]
                settled = all(_settled(ledger, start, stop) for ledger in ledgers if ledger is not None)
                if path == self._segment and not (last and settled and self._bytes >= self.max_bytes):
                    break  # the one being appended to stays, unless it alone holds a full spool's settled records
                if not settled:
                    continue
                try:
                    path.unlink()
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    _logger.warning("could not free the delivered spool segment %s: %s", path, exc)
                    continue
                self._bytes -= self._segment_sizes.pop(path)
                if path == self._segment:
                    # A batch larger than the bound can fill the spool from one segment: once it is settled, the
                    # next append starts a new one instead of the spool staying full for good.
                    self._segment, self._segment_bytes = None, 0

    def discard_if_delivered(self) -> bool:
        """At the end of a run: when every sink delivered every logged record (nothing pending, failed, possibly
        missing or unanswered), the spool is removed from disk. Whether it was."""
        with self._lock:
            if self.set_aside_to is not None or self._discarded or not self._removable:
                return self._discarded
            for name in set(self.sinks) | set(self._sinks):
                ledger = self._sinks.get(name)
                if ledger is None:
                    if self._next_seq:
                        return False
                    continue
                undelivered = ledger.pending or ledger.missing or ledger.inflight or ledger.sending
                if undelivered or ledger.failed or ledger.through < self._next_seq:
                    return False
            try:
                shutil.rmtree(self.folder)
            except OSError as exc:
                _logger.warning("could not remove the delivered spool %s: %s", self.folder, exc)
                return False
            self._discarded = True
            self._bytes = 0
            self._segment_sizes.clear()
            return True

    def _stop_keeping(self, error: OSError) -> None:
        """Called with the lock held, once a write failed: the spool keeps nothing more from now on."""
        if self._stopped:
            return
        self._stopped = True
        self.refusal_reason = (
            DISK_FULL if error.errno in _DISK_FULL_ERRORS else f"spool not writable: {error.strerror or error}"
        )
        _logger.warning(
            "the spool at %s cannot be written (%s): it keeps no more records; what it holds is still replayed",
            self.folder,
            error,
        )

    def _set_aside(self, error: OSError) -> None:
        with self._lock:
            self._stop_keeping(error)
            target = self.run_folder / f"{SET_ASIDE_PREFIX}{self.name}"
            try:
                os.rename(self.folder, target)
            except OSError as rename_error:
                _logger.error(
                    "the spool's ledger at %s could not be saved (%s) nor its folder moved aside (%s): do not run "
                    "prime-otel sync on this run folder, it could resend records already stored",
                    self.folder,
                    error,
                    rename_error,
                )
                target = self.folder
            else:
                self._index.move(target)
                self._segment_sizes = {target / path.name: size for path, size in self._segment_sizes.items()}
                self.folder = target
                self._segment = None
                _logger.warning(
                    "the spool's ledger could not be saved (%s): its files were moved to %s, where no sync reads them",
                    error,
                    target,
                )
            self.set_aside_to = target

    def defer(self, name: str, seqs: Sequence[int], *, dispatched: bool = True) -> None:
        """These records did not reach ``name`` and may be replayed (they were never applied). ``dispatched``
        is False for a batch the producer spilled before the uploader took it: that needs no ledger write,
        since after a crash every logged record without an outcome is pending anyway."""
        ledger = self.sink(name)
        with self._lock:
            fresh = [seq for seq in seqs if seq not in ledger.pending]
            ledger.pending.update(fresh)
            ledger.spooled += len(fresh)
            self._outcome(ledger, seqs, dispatched)
        if dispatched:
            self.save_soon()

    def settle(self, name: str, seqs: Sequence[int], *, replayed: bool = False) -> None:
        """These records reached ``name``."""
        ledger = self.sink(name)
        with self._lock:
            before = len(ledger.pending)
            ledger.pending.difference_update(seqs)
            ledger.delivered += len(seqs)
            if replayed:
                ledger.replayed += before - len(ledger.pending)
            self._outcome(ledger, seqs, not replayed)
        self.save_soon()

    def fail(self, name: str, seqs: Sequence[int]) -> None:
        """``name`` refused these records for good (a record rejection): settled, and never resent."""
        ledger = self.sink(name)
        with self._lock:
            ledger.pending.difference_update(seqs)
            ledger.failed += len(seqs)
            self._outcome(ledger, seqs, True)
        self.save_soon()

    def mark_missing(self, name: str, seqs: Sequence[int]) -> None:
        """An ambiguous failure of a non-idempotent request: these may or may not be stored; never resent."""
        ledger = self.sink(name)
        with self._lock:
            ledger.pending.difference_update(seqs)
            ledger.missing.update(seqs)
            self._outcome(ledger, seqs, True)
        self.save_soon()

    def begin_write(self, name: str, seqs: Sequence[int]) -> None:
        """A batch goes to the non-idempotent sink ``name``: until each record has an outcome, a crash leaves
        it for a replay, unless it is in flight (see :meth:`mark_inflight`)."""
        ledger = self.sink(name)
        with self._lock:
            ledger.sending = set(seqs)
            if seqs:
                ledger.through = max(ledger.through, max(seqs) + 1)

    def end_write(self, name: str, seqs: Sequence[int] = ()) -> None:
        """The batch ``seqs``'s write is over: every record has its outcome (and needs its numbers no more)."""
        ledger = self.sink(name)
        with self._lock:
            ledger.sending = set()
            marked, ledger.inflight = ledger.inflight, []
            for seq in seqs if ledger.rows else ():
                ledger.rows.pop(seq, None)
        if marked:
            self.save()

    def mark_inflight(self, name: str, seqs: Sequence[int]) -> None:
        """Written before a non-idempotent request, so a crash mid-request leaves its records to be read back (or
        reported as possibly missing), never replayed blindly. Written before every attempt, with the time it goes
        out: a server may still be applying a request a crash cut short, so how old it is matters."""
        ledger = self.sink(name)
        marked = sorted(seqs)
        with self._lock:
            if not marked and not ledger.inflight:
                return
            ledger.inflight = marked
            if marked:
                ledger.inflight_at = time.time()
        self.save()

    def note_rows(self, name: str, rows: Mapping[int, NumberedRows]) -> None:
        """What a numbering sink made of these records of the batch being written; written with the in-flight
        marker, before any request carrying them goes out."""
        ledger = self.sink(name)
        with self._lock:
            ledger.rows.update(rows)
            for made in rows.values():
                if made.counter is not None and made.number is not None:
                    ledger.counters[made.counter] = max(ledger.counters.get(made.counter, 0), made.number)

    def given_number(self, name: str, seq: int) -> int | None:
        """The number ``seq`` took in a write a crash cut short (replayed, it is numbered the same)."""
        ledger = self.sink(name)
        with self._lock:
            made = ledger.rows.get(seq)
            return made.number if made is not None else None

    def rows_in_flight(self, name: str) -> dict[int, NumberedRows]:
        """After the producer died, before :meth:`recover`: what the request in flight carried, per record with
        row keys (the others are possibly missing)."""
        ledger = self.sink(name)
        with self._lock:
            return {seq: ledger.rows[seq] for seq in ledger.inflight if seq in ledger.rows and ledger.rows[seq].keys}

    def objects_in_flight(self, name: str) -> dict[tuple[int, str], list[int]]:
        """After the producer died, before :meth:`recover`: the step objects whose confirm was in flight, as
        ``(step, key)`` -> the records each carries."""
        ledger = self.sink(name)
        objects: dict[tuple[int, str], list[int]] = {}
        with self._lock:
            for seq in ledger.inflight:
                made = ledger.rows.get(seq)
                if made is not None and made.step_object is not None:
                    objects.setdefault(made.step_object, []).append(seq)
        return objects

    def resolve_in_flight(
        self, name: str, *, stored: Iterable[int], absent: Iterable[int], undecided: Iterable[int], reason: str
    ) -> None:
        """What a read-back made of records in flight when the producer died: ``stored`` is delivered, ``absent``
        waits for a replay (under the numbers it had), ``undecided`` is possibly missing for ``reason``."""
        ledger = self.sink(name)
        stored, absent, undecided = sorted(stored), sorted(absent), sorted(undecided)
        with self._lock:
            done = {*stored, *absent, *undecided}
            ledger.inflight = [seq for seq in ledger.inflight if seq not in done]
            ledger.sending.difference_update(done)
            ledger.delivered += len(stored)
            ledger.pending.update(absent)
            ledger.spooled += len(absent)
            ledger.missing.update(undecided)
            if undecided:
                ledger.missing_reasons[reason] = ledger.missing_reasons.get(reason, 0) + len(undecided)
            for seq in (*stored, *undecided):
                ledger.rows.pop(seq, None)
        self.save()

    def oldest_pending(self, name: str, count: int) -> list[int]:
        ledger = self.sink(name)
        with self._lock:
            return ledger.pending.smallest(count)

    def recover(self, names: Iterable[str]) -> None:
        """After the producer died: in flight ⇒ possibly missing; the rest of its batch, and what was logged but
        never dispatched ⇒ pending."""
        with self._lock:
            for name in names:
                ledger = self._sinks.setdefault(name, SinkLedger())
                if ledger.inflight:
                    ledger.missing.update(ledger.inflight)
                    for seq in ledger.inflight:
                        ledger.rows.pop(seq, None)
                    ledger.pending.difference_update(ledger.inflight)
                    ledger.through = max(ledger.through, max(ledger.inflight) + 1)
                unattempted = sorted(
                    seq
                    for seq in ledger.sending.difference(ledger.inflight)
                    if seq not in ledger.pending and seq not in ledger.missing
                )
                ledger.pending.update(unattempted)
                ledger.spooled += len(unattempted)
                ledger.inflight, ledger.sending = [], set()
                unsent = [
                    seq
                    for seq in range(ledger.through, self._next_seq)
                    if seq not in ledger.pending and seq not in ledger.missing
                ]
                ledger.pending.update(unsent)
                ledger.spooled += len(unsent)
                ledger.through = self._next_seq
        self.save()

    @staticmethod
    def _outcome(ledger: SinkLedger, seqs: Sequence[int], dispatched: bool) -> None:
        if ledger.inflight or ledger.sending:
            done = set(seqs)
            ledger.inflight = [seq for seq in ledger.inflight if seq not in done]
            ledger.sending.difference_update(done)
        if dispatched and seqs:
            ledger.through = max(ledger.through, max(seqs) + 1)


def _settled(ledger: SinkLedger, start: int, stop: int) -> bool:
    """Whether the sink has an outcome that needs no replay for every seq in ``[start, stop)``."""
    if stop > ledger.through or ledger.pending.any_in(start, stop):
        return False
    return not any(start <= seq < stop for seq in (*ledger.inflight, *ledger.sending))


def _append_whole(segment: Path, data: bytes, size_before: int) -> None:
    """Append ``data`` in full; a write that fails part way is cut back to ``size_before``, so the log never
    holds records that nobody was told about (a later sync would deliver them a second time)."""
    descriptor = os.open(segment, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(descriptor, view) :]
    except OSError:
        try:
            os.ftruncate(descriptor, size_before)
        except OSError:
            _logger.warning("the spool could not cut %s back to its last whole line", segment)
        raise
    finally:
        os.close(descriptor)
