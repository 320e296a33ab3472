"""Delayed delivery: items enqueued now that consumers may take only once they fall due.

``enqueue(db, value, delay=s)`` (and ``push``, ``enqueue_many``) does not write the item
where consumers look. It writes a *delayed record* in the queue's metadata, keyed by the
version at which it falls due: the enqueuing transaction's read version plus ``s`` seconds of
versions (about 1,000,000 per second, the clock leases use: shared by every client, no clock
skew). The value is stored unchanged, so every value the queue accepts can be delayed.

Consumers *promote* due records: every take, pop and claim (plain, in line or blocking) first
looks at a hint, the smallest due version of any delayed record, with a snapshot point read
issued alongside its other reads; when the hint is at or below its read version, it moves
the due records into the queue in the same transaction, at the back (of their priority, for
a :class:`~fdbqueue.PriorityQueue`), as an enqueue made then would, and takes from the queue
as usual. A delayed item is therefore never delivered before its due version, and once due
it goes to the next consumer that looks, behind the items already queued. Its position is
given when it is promoted, not when it was enqueued.

Key layout, under the queue's metadata prefix ``P + b"\\xff"``::

    pack(("delayed", due version, batch id, i) + where) -> the encoded value
    pack(("next_due",))                                  -> the smallest due version (u64 LE)

``where`` is ``()`` for a Queue and ``(priority,)`` for a PriorityQueue; ``batch id`` (16
random bytes) and ``i`` keep one ``enqueue_many``'s values in order. A delayed enqueue sets
its records and lowers the hint with an atomic ``min`` (no read, so it never conflicts), and
bumps the signal key so blocked consumers look again and learn when to wake. A promotion
reads the hint with a read conflict and rewrites it (to the next record's due version, or
clears it): two consumers promoting at the same time conflict and one retries, so a record is
promoted once, and a delayed enqueue that commits meanwhile makes the promotion retry rather
than lose its lowered hint.

Blocked consumers wake when the first delayed item falls due, without any write: like an
expired lease (:mod:`fdbqueue._delivery.leases`), a due item changes nothing a watch sees, so a
consumer that found nothing also sleeps at most until the hint's version.

What is not delayed-aware: :meth:`~fdbqueue.Queue.size`, ``peek`` and the recipes' own
consumers see an item only once it was promoted.

Source followed: FoundationDB's developer guide on versions (``get_read_version``) and
atomic operations (``min``); the semantics are those of Amazon SQS's ``DelaySeconds``,
Celery's ``countdown`` and QuiCK's vesting time.
"""

from __future__ import annotations

import math
import os
import struct
import time
from collections.abc import Callable
from typing import Any

from fdbqueue import metrics
from fdbqueue._checks import check_seconds
from fdbqueue._storage.quiet_keys import hint_written
from fdbqueue._storage.store import MAX_KEY_BYTES, ItemStore, count_keys
from fdbqueue._storage.transaction_bytes import set_bytes
from fdbqueue._transactions.transactional import AnyContext

__all__ = ["MAX_DELAY_SECONDS", "DelayedItems", "check_delay"]

#: The longest delay, in seconds (30 days).
MAX_DELAY_SECONDS = 30 * 24 * 60 * 60
#: Versions per second of the shared clock (as :mod:`fdbqueue._delivery.leases`).
VERSIONS_PER_SECOND = 1_000_000
#: The most delayed records one transaction promotes, and the most bytes their values may add
#: (the rest waits for the next transaction: the hint stays due).
PROMOTE_RECORDS = 100
PROMOTE_BYTES = 1_000_000
BATCH_ID_BYTES = 16

_VERSION = struct.Struct("<Q")

#: Writes one promoted value at the back of the queue: ``(tr, encoded, where)``, ``where``
#: being what the queue type stored with it (``()``, or ``(priority,)``).
Append = Callable[[Any, bytes, tuple[Any, ...]], None]


def check_delay(delay: Any) -> float:
    """Return ``delay`` in seconds (0.0 for None), or raise before anything is written.

    Raises:
        TypeError: not a number or None (bool included).
        ValueError: NaN, negative, infinite, or over :data:`MAX_DELAY_SECONDS`.
    """
    if delay is None:
        return 0.0
    number = check_seconds(delay, "delay", allow_zero=True)
    if number > MAX_DELAY_SECONDS:
        raise ValueError(f"delay must be >= 0 and <= {MAX_DELAY_SECONDS} seconds, not {number}")
    return number


class DelayedItems:
    """The delayed records of one queue (see the module docstring).

    Args:
        store: the queue's items and metadata.
        append: writes a promoted value at the back of the queue (:data:`Append`).
    """

    def __init__(self, store: ItemStore, append: Append) -> None:
        self.store = store
        self.append = append
        self.records = store.metadata["delayed"]
        self.begin: bytes = self.records.range().start
        self.end: bytes = self.records.range().stop
        self.hint_key: bytes = store.metadata.pack(("next_due",))
        # time.monotonic() instant the first delayed item the last look saw falls due (a hint)
        self._wake_at: float | None = None

    def check_key(self, where: tuple[Any, ...]) -> None:
        """Raise ValueError when a delayed record with ``where`` would exceed FoundationDB's
        key size limit (no database access)."""
        # the largest due version and index, and a batch id of zero bytes (escaped to two)
        longest = self.records.pack((2**64, bytes(BATCH_ID_BYTES), 2**31, *where))
        if len(longest) > MAX_KEY_BYTES:
            raise ValueError(
                f"a delayed item's key would be up to {len(longest):,} bytes, more than "
                f"FoundationDB's {MAX_KEY_BYTES:,}"
            )

    def put(
        self, tr: AnyContext, encoded: list[bytes], seconds: float, where: tuple[Any, ...]
    ) -> None:
        """Write ``encoded`` values due ``seconds`` after ``tr``'s read version, in order.

        Cost: the read version, one set per value, an atomic ``min`` on the hint and an atomic
        add on the signal key; no reads, no conflicts.
        """
        due: int = tr.get_read_version().wait() + max(1, math.ceil(seconds * VERSIONS_PER_SECOND))
        batch = os.urandom(BATCH_ID_BYTES)
        for i, value in enumerate(encoded):
            tr[self.records.pack((due, batch, i, *where))] = value
        tr.min(self.hint_key, _VERSION.pack(due))
        hint_written(self.hint_key)
        self.store.signal(tr)
        metrics.add("delayed", len(encoded), **self.store.metric_attributes)

    def look(self, tr: AnyContext, *, anyway: bool = False) -> Any:
        """Start reading the hint (a snapshot point read, no conflict): pass the future to
        :meth:`promote` once other reads are issued, so the round trips overlap. None, and
        no read, while the hint is quiet (:mod:`fdbqueue._storage.quiet_keys`), unless
        ``anyway``."""
        if not anyway and self.store.quiet.quiet(self.hint_key):
            return None
        return tr.snapshot.get(self.hint_key)

    def promote(self, tr: AnyContext, looked: Any) -> int:
        """Move the records due at ``tr``'s read version into the queue; return how many.

        ``looked`` is :meth:`look`'s future (None: the hint was not read, it is quiet:
        nothing was due lately). When the hint is absent or not yet due, nothing else is
        read and nothing written (the hint is kept for :meth:`seconds_until_due`).
        Otherwise: a read conflict key on the hint, one snapshot range read of the due
        records (at most :data:`PROMOTE_RECORDS`, within :data:`PROMOTE_BYTES` of values),
        per record a clear and the queue's append (its snapshot read of the back, a set,
        two atomic adds), and a set (or clear) of the hint.
        """
        if looked is None:
            return 0
        read_version: int = tr.get_read_version().wait()
        read_at = time.monotonic()
        if not self.note(looked, read_version, read_at):
            return 0
        tr.add_read_conflict_key(self.hint_key)  # promoters and delayed enqueues meet here
        due_end = self.records.pack((read_version + 1,))
        records = list(tr.snapshot.get_range(self.begin, due_end, limit=PROMOTE_RECORDS + 1))
        promoted = 0
        spent = 0
        for record in records:
            if promoted == PROMOTE_RECORDS or spent >= PROMOTE_BYTES:
                break
            where = tuple(self.records.unpack(record.key)[3:])
            del tr[record.key]
            self.append(tr, bytes(record.value), where)
            spent += set_bytes(len(record.key), len(record.value))
            promoted += 1
        self._rewrite_hint(tr, records[promoted:], read_version, read_at)
        return promoted

    def note(self, hint: Any, read_version: int, read_at: float | None = None) -> bool:
        """Learn from ``hint`` (the future of :meth:`look`, read at ``read_version``) when
        the first delayed item falls due, for :meth:`seconds_until_due`; return whether one
        is due at ``read_version``. An absent hint counts towards its being quiet
        (:mod:`fdbqueue._storage.quiet_keys`). Cost: waits for ``hint``."""
        read_at = time.monotonic() if read_at is None else read_at
        if not hint.present():
            self._wake_at = None
            self.store.quiet.empty(self.hint_key)
            return False
        self.store.quiet.not_empty(self.hint_key)
        due = _VERSION.unpack(bytes(hint))[0]
        self._wake_at = read_at + max(0, due - read_version) / VERSIONS_PER_SECOND
        return bool(due <= read_version)

    def _rewrite_hint(
        self, tr: AnyContext, left: list[Any], read_version: int, read_at: float
    ) -> None:
        """Set the hint to the first record not promoted (read one more when ``left`` is
        empty), or clear it when no record is left."""
        if not left:
            left = list(tr.snapshot.get_range(self.begin, self.end, limit=1))
            # records promoted here are cleared in tr: the snapshot read does not return them
        if not left:
            del tr[self.hint_key]
            self._wake_at = None
            return
        due = self.records.unpack(left[0].key)[0]
        tr[self.hint_key] = _VERSION.pack(due)
        self._wake_at = read_at + max(0, due - read_version) / VERSIONS_PER_SECOND

    def count_due(self, reader: Any, read_version: int) -> tuple[int, int]:
        """How many delayed items are due at ``read_version`` (they wait: the next take
        promotes them) and how many are not yet. Cost: range reads of every delayed record
        through ``reader`` (a snapshot view: no conflicts)."""
        due_end = self.records.pack((read_version + 1,))
        due = count_keys(reader, self.begin, due_end)
        return due, count_keys(reader, due_end, self.end)

    def seconds_until_due(self) -> float | None:
        """Seconds until the first delayed item the last look saw falls due (0 if it has), or
        None when it saw none: how long a blocked consumer may sleep at most. A hint kept per
        queue object; a delayed enqueue bumps the signal key, so a blocked consumer looks
        again and learns of it."""
        wake_at = self._wake_at
        if wake_at is None:
            return None
        return max(0.0, wake_at - time.monotonic())


def soonest(*seconds: float | None) -> float | None:
    """The smallest of ``seconds`` that are not None, or None."""
    known = [s for s in seconds if s is not None]
    return min(known) if known else None
