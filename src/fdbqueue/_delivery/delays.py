"""Delayed delivery: items enqueued now that consumers may take only once they fall due.

``enqueue(db, value, delay=s)`` (and ``push``, ``enqueue_many``) does not write the item
where consumers look. It writes a *delayed record* in the queue's metadata. The record falls
due when both clocks say ``s`` seconds have passed, as a lease expires
(:mod:`fdbqueue._delivery.leases`, "Clock"):

* read versions, the clock all clients of a cluster share: its *due version* is the
  enqueuing transaction's read version plus ``s`` seconds of versions (about 1,000,000 per
  second);
* the wall clock: its *due time* is the enqueuing client's ``time.time()`` plus ``s``
  seconds, by the clock of the client that looks.

A cluster recovery moves versions on by up to about 100 s in a moment; bound by versions
alone, every delayed item would fall due early. Bound by both, an item is never due before
its versions (a consumer's clock running fast cannot make it early), nor, across recoveries,
before its seconds by the wall clocks, less the skew between the enqueuing and the consuming
clients' clocks (an enqueuer whose clock runs ahead makes its own items late by as much). A
record written without its due time (by an older fdbqueue) falls due by its versions alone.
The value is stored unchanged, so every value the queue accepts can be delayed.

Consumers *promote* due records: every take, pop and claim (plain, in line or blocking) first
looks at a hint, the smallest due version of any delayed record, with a snapshot point read
issued alongside its other reads; when the hint is at or below its read version, it moves
the due records into the queue in the same transaction, at the back (of their priority, for
a :class:`~fdbqueue.PriorityQueue`), as an enqueue made then would, and takes from the queue
as usual. Of the records due by their versions, it moves those whose due time has come too;
when none has (after a recovery), it writes nothing, and the queue object remembers, for a
second, the earliest due time it saw, so that the takes meanwhile do not read the records
again. A delayed item is therefore never delivered before it falls due, and once due it goes
to the next consumer that looks, behind the items already queued. Its position is given when
it is promoted, not when it was enqueued.

Key layout, under the queue's metadata prefix ``P + b"\\xff"``::

    pack(("delayed", due version, due time, batch id, i) + where) -> the encoded value
    pack(("next_due",))                                  -> the smallest due version (u64 LE)

``due time`` is in wall-clock microseconds since the epoch (records written before it was
recorded lack it: ``(due version, batch id, i) + where``); ``where`` is ``()`` for a Queue
and ``(priority,)`` for a PriorityQueue; ``batch id`` (16 random bytes) and ``i`` keep one
``enqueue_many``'s values in order. A delayed enqueue sets
its records and lowers the hint with an atomic ``min`` (no read, so it never conflicts), and
bumps the signal key so blocked consumers look again and learn when to wake. A promotion
reads the hint with a read conflict and rewrites it (to the next record's due version, or
clears it): two consumers promoting at the same time conflict and one retries, so a record is
promoted once, and a delayed enqueue that commits meanwhile makes the promotion retry rather
than lose its lowered hint.

Blocked consumers wake when the first delayed item falls due, without any write: like an
expired lease (:mod:`fdbqueue._delivery.leases`), a due item changes nothing a watch sees, so a
consumer that found nothing also sleeps at most until the hint's version, or, when it read
the records, until the first falls due by both clocks.

What counts a delayed item that fell due before a take promoted it: :meth:`~fdbqueue.Queue.size`,
``empty`` and ``peek`` (:meth:`due`, where the promotion will put it). The recipes' own
consumers see an item only once it was promoted.

Source followed: FoundationDB's developer guide on versions (``get_read_version``) and
atomic operations (``min``), and ``MAX_VERSIONS_IN_FLIGHT`` (a recovery's jump of versions);
the semantics are those of Amazon SQS's ``DelaySeconds``,
Celery's ``countdown`` and QuiCK's vesting time.
"""

from __future__ import annotations

import math
import os
import struct
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from fdbqueue import metrics
from fdbqueue._checks import check_seconds
from fdbqueue._delivery.leases import lease_microseconds, wall_microseconds
from fdbqueue._storage.job_records import job_of
from fdbqueue._storage.store import MAX_KEY_BYTES, ItemStore, count_keys
from fdbqueue._storage.taking import Elsewhere
from fdbqueue._storage.transaction_bytes import set_bytes
from fdbqueue._transactions.transactional import AnyContext

__all__ = ["MAX_DELAY_SECONDS", "DelayedItems", "check_delay"]

#: The longest delay, in seconds (30 days).
MAX_DELAY_SECONDS = 30 * 24 * 60 * 60
#: Versions per second of the shared clock (as :mod:`fdbqueue._delivery.leases`).
VERSIONS_PER_SECOND = 1_000_000
MICROSECONDS_PER_SECOND = 1_000_000
#: Seconds a queue object trusts what it read of records due by their versions but not yet
#: by the wall clock (:class:`NotYet`) before it reads them again.
NOT_YET_SECONDS = 1.0
#: The most delayed records one transaction promotes, and the most bytes their values may add
#: (the rest waits for the next transaction: the hint stays due).
PROMOTE_RECORDS = 100
PROMOTE_BYTES = 1_000_000
BATCH_ID_BYTES = 16

_VERSION = struct.Struct("<Q")

#: Writes one promoted value at the back of the queue: ``(tr, encoded, where)``, ``where``
#: being what the queue type stored with it (``()``, or ``(priority,)``).
Append = Callable[[Any, bytes, tuple[Any, ...]], None]


class NotYet(NamedTuple):
    """What a promotion that found records due by their versions only learned: the hint
    (due version) it read, the earliest due time among them (wall-clock microseconds), and
    the ``time.monotonic()`` instant until which that is trusted."""

    hint: int
    due_time: int
    until: float


class Record(NamedTuple):
    """A delayed record's key, parsed."""

    due_version: int
    #: wall-clock microseconds; None for a record written before it was recorded
    due_time: int | None
    where: tuple[Any, ...]

    def due_by_wall_clock(self, now: int) -> bool:
        """Whether its due time has come at ``now`` (microseconds); its versions are the
        caller's to check."""
        return self.due_time is None or self.due_time <= now


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
        # records due by their versions, not yet by the wall clock, the last promotion saw
        self._not_yet: NotYet | None = None

    def check_key(self, where: tuple[Any, ...]) -> None:
        """Raise ValueError when a delayed record with ``where`` would exceed FoundationDB's
        key size limit (no database access)."""
        # the largest due version, due time and index, and a batch id of zero bytes (escaped
        # to two)
        longest = self.records.pack((2**64, 2**63, bytes(BATCH_ID_BYTES), 2**31, *where))
        if len(longest) > MAX_KEY_BYTES:
            raise ValueError(
                f"a delayed item's key would be up to {len(longest):,} bytes, more than "
                f"FoundationDB's {MAX_KEY_BYTES:,}"
            )

    def put(
        self, tr: AnyContext, encoded: list[bytes], seconds: float, where: tuple[Any, ...]
    ) -> None:
        """Write ``encoded`` values due ``seconds`` after ``tr``'s read version and after this
        client's wall clock now, in order.

        Cost: the read version, one set per value (a job's: two,
        :meth:`~fdbqueue._storage.jobs.Jobs.located`), an atomic ``min`` on the hint and an
        atomic add on the signal key; no reads, no conflicts.
        """
        due: int = tr.get_read_version().wait() + max(1, math.ceil(seconds * VERSIONS_PER_SECOND))
        due_time = wall_microseconds() + lease_microseconds(seconds)
        batch = os.urandom(BATCH_ID_BYTES)
        for i, value in enumerate(encoded):
            key = self.records.pack((due, due_time, batch, i, *where))
            tr[key] = value
            job = job_of(value)
            if job is not None:  # where its cancel finds it
                self.store.jobs.located(tr, job, key)
        tr.min(self.hint_key, _VERSION.pack(due))
        self.store.signal(tr)
        metrics.add("delayed", len(encoded), **self.store.metric_attributes)

    def look(self, tr: AnyContext) -> Any:
        """Start reading the hint (a snapshot point read, no conflict): pass the future to
        :meth:`promote` once other reads are issued, so the round trips overlap."""
        return tr.snapshot.get(self.hint_key)

    def promote(self, tr: AnyContext, looked: Any) -> int:
        """Move the records due at ``tr``'s read version and this client's wall clock into
        the queue; return how many.

        ``looked`` is :meth:`look`'s future. When the hint is absent or not yet due (by its
        version, or, as the last read of the records found, by the wall clock), nothing else is
        read and nothing written (the hint is kept for :meth:`seconds_until_due`). Otherwise: one
        snapshot range read of the records due by their versions (at most
        :data:`PROMOTE_RECORDS`, within :data:`PROMOTE_BYTES` of values); when some are due
        by the wall clock too, a read conflict key on the hint, per record promoted a clear
        and the queue's append (its snapshot read of the back, a set, two atomic adds), and
        a set (or clear) of the hint; when none is, nothing more.
        """
        read_version: int = tr.get_read_version().wait()
        read_at = time.monotonic()
        if not self.note(looked, read_version, read_at):
            return 0
        hint = self._hint_version(looked)
        now = wall_microseconds()
        due_end = self.records.pack((read_version + 1,))
        records = list(tr.snapshot.get_range(self.begin, due_end, limit=PROMOTE_RECORDS + 1))
        parsed = [self.parse(bytes(record.key)) for record in records]
        first = parsed[:PROMOTE_RECORDS]
        if first and not any(record.due_by_wall_clock(now) for record in first):
            self._not_yet_due(hint, first, now, read_at)
            return 0
        self._not_yet = None
        tr.add_read_conflict_key(self.hint_key)  # promoters and delayed enqueues meet here
        promoted = 0
        spent = 0
        left: list[Any] = []
        for record, where in zip(records, parsed, strict=True):
            if promoted == PROMOTE_RECORDS or spent >= PROMOTE_BYTES:
                left.append(record)
                continue
            if not where.due_by_wall_clock(now):
                left.append(record)  # due by versions only (a recovery): it waits
                continue
            del tr[record.key]
            self.append(tr, bytes(record.value), where.where)
            spent += set_bytes(len(record.key), len(record.value))
            promoted += 1
        self._rewrite_hint(tr, left, read_version, read_at)
        return promoted

    def due(self, reader: Any, read_version: int, n: int, after: bytes | None = None) -> list[Any]:
        """Up to ``n`` delayed records due at ``read_version`` and this client's wall clock
        (after the record ``after``, when given), as
        :class:`~fdbqueue._storage.taking.Elsewhere` items, in the order a promotion appends
        them: what the next take finds behind the queue's items (``peek``). Cost: a range
        read of the records due by their versions through ``reader``, lazily, until ``n``."""
        begin = self.begin if after is None else after + b"\x00"
        due_end = self.records.pack((read_version + 1,))
        now = wall_microseconds()
        found: list[Any] = []
        if n <= 0 or begin >= due_end:
            return found
        for record in reader.get_range(begin, due_end):
            key = bytes(record.key)
            if self.parse(key).due_by_wall_clock(now):
                found.append(Elsewhere(key, bytes(record.value)))
                if len(found) == n:
                    break
        return found

    def withdraw(self, tr: AnyContext, key: bytes) -> None:
        """Remove the delayed record at ``key`` (a cancelled job's) and rewrite the hint to
        the first record left, as a promotion does (a read conflict key on it: a delayed
        enqueue at the same time makes one of them retry). Cost: a clear, the read version, a
        snapshot range read of one record, a set or clear of the hint."""
        del tr[key]
        tr.add_read_conflict_key(self.hint_key)
        read_version: int = tr.get_read_version().wait()
        self._rewrite_hint(tr, [], read_version, time.monotonic())

    def parse(self, key: bytes) -> Record:
        """The delayed record at ``key`` (either layout: see the module docstring)."""
        parts = self.records.unpack(key)
        if isinstance(parts[1], int):  # (due version, due time, batch id, i, *where)
            return Record(parts[0], parts[1], tuple(parts[4:]))
        return Record(parts[0], None, tuple(parts[3:]))  # (due version, batch id, i, *where)

    def note(self, hint: Any, read_version: int, read_at: float | None = None) -> bool:
        """Learn from ``hint`` (the future of :meth:`look`, read at ``read_version``) when
        the first delayed item falls due, for :meth:`seconds_until_due`; return whether one
        may be due at ``read_version`` (due by its version, and not known to this object to
        wait for the wall clock still). Cost: waits for ``hint``."""
        read_at = time.monotonic() if read_at is None else read_at
        if not hint.present():
            self._wake_at = None
            return False
        due = self._hint_version(hint)
        self._wake_at = read_at + max(0, due - read_version) / VERSIONS_PER_SECOND
        if due > read_version:
            return False
        not_yet = self._not_yet
        if not_yet is not None and not_yet.hint == due and read_at < not_yet.until:
            seconds = (not_yet.due_time - wall_microseconds()) / MICROSECONDS_PER_SECOND
            if seconds > 0:
                self._wake_at = read_at + min(seconds, not_yet.until - read_at)
                return False
        return True

    @staticmethod
    def _hint_version(hint: Any) -> int:
        version: int = _VERSION.unpack(bytes(hint))[0]
        return version

    def _not_yet_due(self, hint: int, parsed: list[Record], now: int, read_at: float) -> None:
        """Remember that the records due by their versions (``parsed``, read after the hint
        ``hint``) are not due by the wall clock at ``now`` (microseconds), for
        :data:`NOT_YET_SECONDS`, and when the first of them is, for
        :meth:`seconds_until_due`."""
        # every record not due by the wall clock has a due time
        due_time = min(record.due_time or 0 for record in parsed)
        self._not_yet = NotYet(hint, due_time, read_at + NOT_YET_SECONDS)
        seconds = max(0, due_time - now) / MICROSECONDS_PER_SECOND
        self._wake_at = read_at + min(seconds, NOT_YET_SECONDS)

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
        due = self.parse(bytes(left[0].key)).due_version
        tr[self.hint_key] = _VERSION.pack(due)
        self._wake_at = read_at + max(0, due - read_version) / VERSIONS_PER_SECOND

    def count_due(self, reader: Any, read_version: int) -> tuple[int, int]:
        """How many delayed items are due at ``read_version`` and this client's wall clock
        (both clocks: they wait, the next take promotes them) and how many are not yet.
        Cost: range reads of every delayed record through ``reader`` (a snapshot view: no
        conflicts)."""
        due_end = self.records.pack((read_version + 1,))
        now = wall_microseconds()
        due = count_keys(
            reader, self.begin, due_end, lambda kv: self.parse(bytes(kv.key)).due_by_wall_clock(now)
        )
        return due, count_keys(reader, self.begin, self.end) - due

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
