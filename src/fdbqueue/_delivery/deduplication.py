"""Idempotent enqueue: deduplication ids remembered for a window of seconds.

"Enqueue" here is any write of new items that takes an id: :meth:`fdbqueue.Queue.enqueue`,
:meth:`~fdbqueue.Queue.enqueue_many` and :meth:`fdbqueue.PriorityQueue.push`, each through
:meth:`~fdbqueue._queues.shard.Shard.write`; both queue types keep the same records.

An enqueue given a ``dedup_id`` first looks the id up in the queue's deduplication records:
when an enqueue recorded that id within ``dedup_window`` seconds (see "Clock" below), the
value is not enqueued (the call returns False); otherwise the id is recorded with the
transaction's read version and the wall-clock time, in the same transaction as the item, so
both commit or neither does. The record outlives the item (it is kept when the item is
taken, and by ``clear``) until the window ends, as Amazon SQS keeps a message deduplication
id for five minutes after the send.

Key layout under the queue's metadata ``M = P + b"\\xff"``::

    M + pack(("deduplication", "id", dedup_id))               read version, wall-clock time
    M + pack(("deduplication", "expiry", version, dedup_id))   the same (the records by age)

(each value 16 bytes: the read version and the admitting client's ``time.time()`` in
microseconds, both little-endian; records of 8 bytes, the version alone, are older ones.)

Clock: an id is remembered until both ``dedup_window`` seconds of read versions *and*
``dedup_window`` seconds of wall-clock time (the admitting client's clock against the checking
client's) have passed. Read versions alone are no clock across recoveries: each moves them
about 100 s on in a moment, so three recoveries (a rolling restart) would end a 300 s window at
once. The wall clock alone would trust every client's clock. Bound by both, a window is never
shorter than its versions (clock skew cannot shorten it below that) nor, across recoveries,
than its seconds by the clocks (minus the skew between the two clients' clocks).

Conflicts: an enqueue reads its id's record with a read conflict (two enqueues of one id
cannot both commit: the second retries and finds the first's record) and nothing else with
one, so enqueues of distinct ids never conflict. Each admitting enqueue also cleans expired
records, up to twice as many as it admits plus :data:`CLEANED_PER_ENQUEUE` (within a byte
budget): a snapshot range read of the oldest expired entries (only those), a clear of each,
and a ``compare_and_clear`` of its record (an atomic operation that clears the key only while
it still holds that version, so a record written again meanwhile stays; no read, no conflict).
Records are thus cleaned at least twice as fast as they are added, and they never outgrow the
ids admitted within about one window, plus the last admitting enqueue's: 100,000 ids sent in
batches of 100 with a 0.01 s window leave a few hundred records (there were 98,002 when each
enqueue cleaned two). After the last enqueue, what remains stays until the next admitting
enqueue (it never grows without one).

Exactly once: the records are written in the enqueue's own transaction, which the queue's
receipts make exactly-once under unknown results (:doc:`guarantees`): a retry after 1021
returns what the applied attempt returned (True) instead of finding its own record.

Source followed: Amazon SQS's message deduplication id (a five-minute interval), FoundationDB's
atomic ``compare_and_clear`` (API 610) for the clean-up, and read versions as the clock
(about 1,000,000 versions a second), as leases measure time.
"""

from __future__ import annotations

import struct
from typing import Any

import fdb.tuple

from fdbqueue._checks import check_packable_int, check_seconds
from fdbqueue._delivery.leases import (
    MICROSECONDS_PER_SECOND,
    VERSIONS_PER_SECOND,
    wall_microseconds,
)
from fdbqueue._storage.store import ItemStore

__all__ = [
    "CLEANED_PER_ENQUEUE",
    "DEFAULT_DEDUP_WINDOW",
    "MAX_DEDUP_ID_BYTES",
    "MAX_DEDUP_WINDOW",
    "DedupId",
    "Deduplication",
    "check_dedup_id",
    "check_dedup_window",
]

#: Seconds an id is remembered by default: five minutes, as Amazon SQS.
DEFAULT_DEDUP_WINDOW = 300.0
#: The longest window accepted: a day.
MAX_DEDUP_WINDOW = 24 * 60 * 60.0
#: The longest id, packed with the tuple layer (SQS allows 128 characters).
MAX_DEDUP_ID_BYTES = 1_000
#: Expired records an admitting enqueue clears at most, beyond twice the ids it admits.
CLEANED_PER_ENQUEUE = 16
#: Bytes of clears an admitting enqueue may add for the clean-up, beyond twice the bytes its
#: own records write (so the clean-up never more than triples an enqueue's size).
CLEANING_BYTES = 32_768

_VERSION = struct.Struct("<Q")
#: A record's value: the read version and the wall-clock time (microseconds since the epoch)
#: of the enqueue that admitted the id. Records of 8 bytes (the version alone) were written
#: before the time was recorded: they count by versions only.
_RECORD = struct.Struct("<Qq")


def _unpack_record(value: bytes) -> tuple[int, int | None]:
    """A record's (read version, wall-clock microseconds or None for an 8-byte record)."""
    if len(value) == _VERSION.size:
        return _VERSION.unpack(value)[0], None
    version, micros = _RECORD.unpack(value)
    return version, micros


#: What a deduplication id may be.
DedupId = str | bytes | int


def check_dedup_window(window: Any) -> float:
    """Return ``window`` (seconds, > 0, at most :data:`MAX_DEDUP_WINDOW`), or raise before
    anything is read or written.

    Raises:
        TypeError: not a number.
        ValueError: not finite, not > 0, or over a day.
    """
    seconds = check_seconds(window, "dedup_window")
    if seconds > MAX_DEDUP_WINDOW:
        raise ValueError(f"dedup_window must be at most {MAX_DEDUP_WINDOW:.0f} s, not {window!r}")
    return seconds


def check_dedup_id(dedup_id: Any) -> bytes:
    """Return ``dedup_id`` packed with the tuple layer (a str, bytes or int), or raise before
    anything is read or written.

    Raises:
        TypeError: not a str, bytes or int (bool included), or None.
        ValueError: empty, an int the tuple layer cannot pack, or over
            :data:`MAX_DEDUP_ID_BYTES` bytes packed.
    """
    if isinstance(dedup_id, bool) or not isinstance(dedup_id, (str, bytes, int)):
        raise TypeError(f"dedup_id must be a str, bytes or int, not {type(dedup_id).__name__}")
    if dedup_id in ("", b""):
        raise ValueError("dedup_id must not be empty")
    if isinstance(dedup_id, int):
        check_packable_int(dedup_id, "dedup_id")
    packed: bytes = fdb.tuple.pack((dedup_id,))
    if len(packed) > MAX_DEDUP_ID_BYTES:
        raise ValueError(
            f"dedup_id must be at most {MAX_DEDUP_ID_BYTES} bytes packed, not {len(packed)}"
        )
    return packed


class Deduplication:
    """The deduplication records of one queue (see the module docstring).

    Args:
        store: the queue's own store (a sharded queue's, not a shard's: an id is one queue's).
        window: seconds an id is remembered (:func:`check_dedup_window`).
    """

    def __init__(self, store: ItemStore, window: float) -> None:
        records = store.deduplication
        self.ids = records.subspace(("id",))
        self.expiry = records.subspace(("expiry",))
        self.window_versions = max(1, round(window * VERSIONS_PER_SECOND))
        self.window_micros = max(1, round(window * MICROSECONDS_PER_SECOND))

    def _fresh(self, recorded: tuple[int, int | None], version: int, now: int) -> bool:
        """Whether a record is still within the window: until both the window's versions
        and its wall-clock seconds have passed (a recovery moves versions about 100 s on in
        a moment; a wall clock alone would trust every client's clock)."""
        recorded_version, recorded_micros = recorded
        if version - recorded_version < self.window_versions:
            return True
        return recorded_micros is not None and now - recorded_micros < self.window_micros

    def admit(self, tr: Any, packed_ids: list[bytes]) -> list[bool]:
        """Record each id not seen within the window and return, per id, whether its value
        should be enqueued (an id repeated within ``packed_ids`` is admitted once). Runs in
        ``tr``, the enqueue's transaction. Cost: the read version, a point read with a read
        conflict per id (issued together), a set and a set of its expiry entry per admitted
        id (and a clear of the entry it replaces), and the clean-up of
        :data:`CLEANED_PER_ENQUEUE` expired records (one snapshot range read)."""
        version: int = tr.get_read_version().wait()
        now = wall_microseconds()
        record = _RECORD.pack(version, now)
        reads = [tr.get(self.ids.key() + packed) for packed in packed_ids]
        admitted: list[bool] = []
        seen: set[bytes] = set()
        for packed, read in zip(packed_ids, reads, strict=True):
            found = read.wait()
            recorded = _unpack_record(bytes(found)) if found.present() else None
            if packed in seen or (recorded is not None and self._fresh(recorded, version, now)):
                admitted.append(False)
                continue
            seen.add(packed)
            if recorded is not None:
                del tr[self._expiry_key(recorded[0], packed)]
            tr[self.ids.key() + packed] = record
            tr[self._expiry_key(version, packed)] = record
            admitted.append(True)
        count = sum(admitted)
        if count:
            written = sum(
                2 * len(packed) for packed, taken in zip(packed_ids, admitted, strict=True) if taken
            )
            self.clean(tr, version, CLEANED_PER_ENQUEUE + 2 * count, CLEANING_BYTES + 2 * written)
        return admitted

    def clean(
        self,
        tr: Any,
        version: int,
        limit: int = CLEANED_PER_ENQUEUE,
        budget: int = CLEANING_BYTES,
    ) -> int:
        """Clear up to ``limit`` records that expired at ``version``, oldest first, within
        about ``budget`` bytes of ids; return how many. An admitting enqueue cleans up to
        twice as many as it adds, plus :data:`CLEANED_PER_ENQUEUE`: the records are cleaned
        faster than they are added, so they never hold many more than the ids admitted
        within one window. Cost: one snapshot range read of the expired entries only (its
        end is the window's start: no live entry is read) and two blind clears per record
        (a ``compare_and_clear`` of the record, a clear of its entry): no conflict with
        anything."""
        expired_end = self.expiry.pack((version - self.window_versions + 1,))
        entries = tr.snapshot.get_range(self.expiry.range().start, expired_end, limit=limit)
        now = wall_microseconds()
        cleaned = spent = 0
        for entry in entries:
            recorded_version, dedup_id = self.expiry.unpack(bytes(entry.key))
            value = bytes(entry.value)
            if value:  # the record's value, with its wall-clock time
                if self._fresh(_unpack_record(value), version, now):
                    break  # within the window by the clock (versions jumped): kept
            else:  # an entry of an 8-byte record
                value = _VERSION.pack(recorded_version)
            packed = fdb.tuple.pack((dedup_id,))
            tr.compare_and_clear(self.ids.key() + packed, value)
            del tr[bytes(entry.key)]
            cleaned += 1
            spent += 2 * len(packed)
            if spent >= budget:
                break
        return cleaned

    def _expiry_key(self, version: int, packed: bytes) -> bytes:
        # pack((version,)) + packed is pack((version, dedup_id)): the tuple layer concatenates
        key: bytes = self.expiry.key() + fdb.tuple.pack((version,)) + packed
        return key
