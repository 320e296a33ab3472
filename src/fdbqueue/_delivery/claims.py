"""Claims: taking items, and expired leases, into leases (:class:`Leases`).

Leases are ordered by expiry version, so a claim finds the oldest expired lease with one range
read (a released lease is re-keyed with expiry version 0: the next claim takes it first); a
lease has expired when its wall-clock expiry has come too (:mod:`fdbqueue._delivery.leases`,
"Clock"), and a claim stops at the first whose expiry time has not. A value
the codec cannot decode (at the head of the queue, or in an expired lease) goes to the dead
letters with the reason instead of being leased, and the claim goes on with the next item.
``claim_many`` leases up to ``n`` items in one transaction, the ones ``n`` claims would take
in the same order, within the library's transaction byte budget.

Blocking claims (``claim(db, lease=s, block=True, timeout=t)``) wait as a blocking dequeue
does (:mod:`fdbqueue._transactions.waiting`): on a watch of the queue's signal key, which every
enqueue and every ``release`` bumps, and, since an expired lease makes its item claimable without
any write, also until the first lease in flight expires: a claim that finds nothing reads the
first lease record (the soonest expiry) and the wait ends then. No polling.

What conflicts: two claims conflict when they take the same expired lease or the same item
(one retries and takes the next); an ``ack`` or ``release`` conflicts with a claim that
takes its (expired) lease at the same time, so exactly one of them wins.

Source followed: FoundationDB's "Queues" recipe for taking the items; Amazon SQS's receive
count and redrive to a dead-letter queue for redelivery; the developer guide's "Watches" and
SQS's long polling (``ReceiveMessage`` with ``WaitTimeSeconds``) for blocking claims.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from fdbqueue import metrics
from fdbqueue._delivery.leases import (
    LEASE_ID_BYTES,
    Lease,
    LeaseHolds,
    LeaseRecord,
    lease_microseconds,
    lease_versions,
    wall_microseconds,
)
from fdbqueue._storage.features import GROUPS, LEASES
from fdbqueue._storage.job_records import JobOptions, JobRecord, job_of, strip_job_header
from fdbqueue._storage.store import COUNT_PAGE_SIZE, ItemStore, count_keys
from fdbqueue._storage.taking import MOVED_ASIDE, Taken, TakenItem
from fdbqueue._storage.transaction_bytes import (
    LIBRARY_TRANSACTION_BUDGET,
    clear_bytes,
    set_bytes,
)
from fdbqueue._transactions.transactional import (
    AnyContext,
    require_writable,
)
from fdbqueue._wording import describe_error
from fdbqueue.codecs import decode_or_undecodable

__all__ = ["Leases", "claimed_something", "leases_unexpired"]

#: The logger, by its documented name (docs/observability.rst), whatever the module.
logger = logging.getLogger("fdbqueue.leases")

#: Expired leases one claim moves to the dead letters before it gives up finding an item.
DEAD_LETTERS_PER_CLAIM = 16
#: Lease records a claim or take reads past those it wants, so that leases whose versions
#: passed but whose wall-clock expiry has not come (a holder whose clock runs fast, or a
#: recovery) do not hide the expired leases behind them.
LOOK_PAST = 64

#: Enqueues a dead letter again: ``(tr, its original item key, its encoded value)``.
Requeue = Callable[[Any, bytes, bytes], None]
#: Takes up to ``n`` items from one end of a queue within a byte budget
#: (:func:`fdbqueue._storage.taking.take`).
TakeItems = Callable[[Any, int, "int | None"], Taken]


def _nothing_fresh(tr: Any, n: int, budget: int | None) -> Taken:
    """A :data:`TakeItems` that takes nothing: a claim of expired leases only."""
    return Taken([], 0, budget_spent=False)


def claimed_something(claimed: Any) -> bool:
    """Whether a claim batch wrote (leased something, or moved items to the dead letters):
    the ``wrote`` of its :func:`~fdbqueue._transactions.receipts.exactly_once`."""
    # (a claim's non-empty list, the usual case, first: MOVED_ASIDE is true too)
    return bool(claimed) or claimed is MOVED_ASIDE


def leases_unexpired(claimed: Any, version: int) -> bool:
    """Whether every :class:`Lease` in ``claimed`` (a Lease, or a list or tuple holding
    some, at any depth) is still held at ``version``: its expiry version is above it, or its
    expiry time has not come (:meth:`Lease.expired`). The ``still_good`` of a claim's
    :func:`~fdbqueue._transactions.receipts.exactly_once`: a claim whose commit had an unknown
    result learns that it was applied only later, perhaps after a recovery, and must not
    return a lease that has expired since; it claims again."""
    if not isinstance(claimed, (list, tuple)):  # (a claim's list of Leases: the usual case)
        if not isinstance(claimed, Lease):
            return True
        claimed = (claimed,)
    for part in claimed:
        if isinstance(part, Lease):  # (checked here, without a call of its own)
            if part.expired(version + 1):
                return False
        elif not leases_unexpired(part, version):
            return False
    return True


@dataclass(frozen=True)
class _Waiting:
    """A waiting lease's item as a key-value pair, as a take would read it (for a peek)."""

    key: bytes
    value: bytes


def _due(records: list[Any], now: int) -> list[Any]:
    """The records of ``records`` (lease records, read in expiry version order, each expired
    by its version) whose wall-clock expiry has come at ``now`` (microseconds), in order. A
    record whose time has not come is passed over, not waited for: the leases after it were
    granted by other clients, whose clocks may be right (a client whose clock runs an hour
    fast delays its own leases only)."""
    return [r for r in records if LeaseRecord.parse(bytes(r.value)).has_expired(now)]


class Leases:
    """The leases of one queue, and the moves between leases and dead letters (see the module
    docstring).

    Args:
        store: the queue's items and metadata.
        max_deliveries: deliveries after which an expired item becomes a dead letter (None:
            never).
    """

    def __init__(self, store: ItemStore, max_deliveries: int | None) -> None:
        self.store = store
        self.max_deliveries = max_deliveries
        self.leases = store.metadata["leases"]
        self.leases_begin: bytes = self.leases.range().start
        self.leases_end: bytes = self.leases.range().stop
        self.holds = LeaseHolds(store, self.leases)
        #: the leases of the queue's other shards (none for a queue of one shard): a claim
        #: redelivers their expired leases too, before it takes a fresh item
        self.others: list[Leases] = []
        # monotonic time the first lease the last empty-handed claim saw expires (a hint)
        self._wake_at: float | None = None

    def claim(self, tr: AnyContext, take_items: TakeItems, seconds: float) -> Any:
        """Lease the next item: an expired or released lease's item first, else the queue's
        next item.

        Returns:
            A Lease; None when there is neither; or :data:`~fdbqueue._storage.store.MOVED_ASIDE`
            when it only moved items to the dead letters (poison items, or
            :data:`DEAD_LETTERS_PER_CLAIM` leases out of deliveries) and ran out of budget:
            commit, then claim again.

        Cost: :meth:`claim_many` with ``n=1`` and no ``probed``: a read version, one range
        read of the expired leases and a point read of the held value (plus one of each per
        item moved to the dead letters, at most :data:`DEAD_LETTERS_PER_CLAIM`), the queue's
        take (one range read and a clear) when no lease expired, and two sets (record and
        held value) for a fresh item; when it finds nothing, one snapshot range read of the
        first lease.
        """
        claimed = self.claim_many(tr, take_items, seconds, 1)
        if claimed is MOVED_ASIDE:
            return MOVED_ASIDE
        return claimed[0] if claimed else None

    def claim_many(
        self,
        tr: AnyContext,
        take_items: TakeItems,
        seconds: float,
        n: int,
        *,
        others: bool = True,
        probed: list[Any] | None = None,
        seen: int | None = None,
    ) -> Any:
        """Lease up to ``n`` items in ``tr``, in the order ``n`` claims one after the other
        would: expired or released leases' items first (soonest expiry first; then, with
        ``others``, those of the other shards, :meth:`claim_others`), then the queue's next
        items.

        It stops early, with what it leased so far, when the writes reach
        :data:`~fdbqueue._storage.transaction_bytes.LIBRARY_TRANSACTION_BUDGET` bytes (counted as
        FoundationDB counts them) or after ``DEAD_LETTERS_PER_CLAIM * n`` expired leases
        went to the dead letters; it then takes nothing from the queue, so that the expired
        leases still waiting keep their place ahead of it.

        Returns:
            A list of Leases (empty when there is nothing to claim), or
            :data:`~fdbqueue._storage.store.MOVED_ASIDE` when it leased nothing but moved items to
            the dead letters and ran out of budget: commit, then claim again.

        Cost: a read version; one range read of the expired leases per ``n`` of them (more
        only past dead letters), with one point read of each held value, all issued
        together; per redelivered lease a clear and a set of the small record; per
        expired lease out of deliveries a clear and a set (the dead letter); then, when
        fewer than ``n`` leases had expired, the queue's take of the rest (one range read,
        one clear per item, an atomic add) and two sets per fresh item (record and held
        value). When it finds nothing at all, one snapshot range read of the first lease,
        to learn when it expires (:meth:`seconds_until_expiry`). Read conflict ranges: the
        expired leases read and the queue's front up to the last item taken, as for
        ``n`` claims.

        ``probed``: :meth:`probe`'s reads, which the caller issued with its others (the
        front's, read before ``take_items`` is called: a claim's reads then wait together,
        as a take's do). When the first lease they found has not expired by its version at
        the read version, no lease had: the expired leases are not read, and the snapshot
        probe is what tells when the first expires (no further read when nothing is found);
        when it has, the expired leases are read as above (with their read conflict range),
        and the held value of that first lease is read with them. The other shards' leases
        likewise (:meth:`claim_others`). None: the claim reads the expired leases first.

        ``seen``: the features ``tr`` found in the queue's feature record
        (:mod:`fdbqueue._storage.features`; None: not read): the first lease granted records
        the leases' bit there unless it is seen.
        """
        require_writable(tr, "claim")
        read_version: int = tr.get_read_version().wait()
        read_at = time.monotonic()
        now = wall_microseconds()
        expired_end: bytes = self.holds.expired_end(read_version)
        leases: list[Lease[Any]] = []
        spent = 0
        dead_lettered = 0
        most_dead = DEAD_LETTERS_PER_CLAIM * n
        begin = self.leases_begin
        waiting = True  # leases may have expired: read them
        ahead: dict[bytes, Any] = {}  # held values read ahead, by held id
        if probed is not None:
            first = list(probed[0])
            waiting = self.note(first, read_version, by_versions=True)
            if waiting:
                ahead = self._read_ahead(tr, _due(first, now))
        while waiting and len(leases) < n:
            if dead_lettered >= most_dead or spent >= LIBRARY_TRANSACTION_BUDGET:
                # More expired leases may wait: they come before the queue's items.
                return leases or MOVED_ASIDE
            limit = min(n - len(leases), most_dead - dead_lettered)
            codec_record = self.store.recorded_codec(tr)
            read = list(tr.get_range(begin, expired_end, limit=limit + LOOK_PAST))
            records = _due(read, now)[:limit]
            self.store.check_codec(codec_record)  # before a held value is decoded
            values = [
                self._held_value(tr, LeaseRecord.parse(bytes(r.value)), ahead) for r in records
            ]
            for record, stored in zip(records, values, strict=True):
                lease, written = self._redeliver(tr, record, stored, read_version, seconds)
                spent += written
                if lease is None:
                    dead_lettered += 1
                else:
                    leases.append(lease)
            if len(records) < limit:
                break  # no expired lease left (or the next ones' expiry times have not come)
            begin = bytes(records[-1].key) + b"\x00"
        moved_aside = dead_lettered > 0
        if len(leases) < n and others and self.others:
            firsts = None if probed is None else probed[1:]
            elsewhere, moved = self.claim_others(tr, read_version, seconds, n - len(leases), firsts)
            leases += elsewhere
            moved_aside = moved_aside or moved
        if len(leases) < n and spent < LIBRARY_TRANSACTION_BUDGET:
            # Each lease record costs less than the move of the value it goes with (a longer
            # key and the value): half of what is left lets the take's items and their
            # records both fit.
            taken = take_items(tr, n - len(leases), (LIBRARY_TRANSACTION_BUDGET - spent) // 2)
            if taken.items:
                leases += self.lease_taken(tr, taken.items, read_version, seconds, seen)
            moved_aside = moved_aside or taken.moved_aside
        if not leases:
            if moved_aside:
                # Something moved to the dead letters is a write: commit it (with a receipt),
                # then look again.
                return MOVED_ASIDE
            if probed is None:  # else the probe told when the first lease expires
                self._note_next_expiry(tr, read_version, read_at)
        return leases

    def probe(self, reader: Any) -> list[Any]:
        """Start reading the first lease record of this queue and of each of :attr:`others`
        (:meth:`first_lease`'s reads, issued together), for :meth:`claim_many`'s
        ``probed``: send them with the claim's other first reads, through ``tr.snapshot``.
        Cost: a range read (``limit=1``) per shard."""
        return [self.first_lease(reader)] + [other.first_lease(reader) for other in self.others]

    def lease_taken(
        self,
        tr: AnyContext,
        items: list[TakenItem],
        read_version: int,
        seconds: float,
        seen: int | None = None,
    ) -> list[Lease[Any]]:
        """Lease ``items``, taken from the queue in ``tr`` (cleared, not yet counted out of the
        size) at ``read_version``, for ``seconds``: count them out of the size, move each value
        to a held value, start a job's delivery, and write each lease record; the first lease
        of the queue records the leases' bit in its feature record unless ``seen`` (the bits
        ``tr`` read there) holds it. A queue whose record showed no group (``seen``) has no
        group's item: its leases are made without looking for one. Cost: one atomic add, two
        sets per item (record and held value), a job's record change; an atomic ``bit_or`` for
        the queue's first lease."""
        self.store.add_to_size(tr, -len(items))
        self.store.features.use(tr, LEASES, seen)  # in the transaction of its leases
        grouped = seen is None or bool(seen & GROUPS)
        leases = []
        for item in items:
            held_id = os.urandom(LEASE_ID_BYTES)
            self.store.held.put(tr, held_id, item.encoded)
            record = item.job_record
            if item.job is not None:
                self.store.jobs.started(tr, item.job, 1, record)
            options = None if record is None else record.options
            leases.append(
                self._grant(
                    tr,
                    item.key,
                    item.value,
                    1,
                    held_id,
                    read_version,
                    seconds,
                    item.job,
                    options,
                    grouped,
                )
            )
        return leases

    def unused(self) -> list[Any]:
        """:meth:`probe`'s reads for a queue that never had a lease
        (:data:`~fdbqueue._storage.features.LEASES` unset): no lease record in any shard, and
        nothing read."""
        return [()] * (1 + len(self.others))

    def _read_ahead(self, tr: AnyContext, records: list[Any]) -> dict[bytes, Any]:
        """Start reading the held values of ``records`` (lease records a probe found expired
        and due), by held id, so that they are read with the expired leases' range read
        (:meth:`claim_many`), not after it. Cost: :meth:`_held_value`'s per record."""
        parsed = (LeaseRecord.parse(bytes(record.value)) for record in records)
        reads = {record.held_id: self._held_value(tr, record) for record in parsed}
        return {held_id: read for held_id, read in reads.items() if read is not None}

    def _held_value(
        self, tr: AnyContext, record: LeaseRecord, ahead: dict[bytes, Any] | None = None
    ) -> Any:
        """The read of the held value of ``record``'s item: taken from ``ahead``
        (:meth:`_read_ahead`'s) when it is there, else started (a snapshot point read); None
        for a lease out of deliveries (a dead letter: its value is not read)."""
        if self._out_of_deliveries(record.deliveries):
            return None
        read = None if ahead is None else ahead.pop(record.held_id, None)
        return self.store.held.get(tr.snapshot, record.held_id) if read is None else read

    def any_expired(self, reader: Any) -> bool:
        """Whether a lease has expired (or was released) at ``reader``'s read version and
        this client's wall clock. Cost: a range read (``limit=1``) of the first lease, with
        ``reader``'s conflicts."""
        version: int = reader.get_read_version().wait()
        return self.first_expired(
            reader.get_range(self.leases_begin, self.leases_end, limit=1), version
        )

    def first_lease(self, reader: Any) -> Any:
        """Start reading the first lease record (a range read, ``limit=1``, through
        ``reader``) for :meth:`first_expired`."""
        return reader.get_range(self.leases_begin, self.leases_end, limit=1)

    def note(self, first: Any, read_version: int, *, by_versions: bool = False) -> bool:
        """Learn from ``first`` (:meth:`first_lease`'s read, at ``read_version``) when the
        first lease expires, for :meth:`seconds_until_expiry` (a blocked take wakes then);
        return whether it has expired (or was released): a take would deliver its item.
        With ``by_versions``, whether its expiry version passed (a take's
        :meth:`take_expired` then passes over the leases whose wall-clock time has not come,
        up to :data:`LOOK_PAST` of them, to those behind that are due). Cost: waits for
        ``first``."""
        records = list(first)
        if not records:
            self._wake_at = None
            return False
        lease = self._lease_of(records[0], None, grouped=False)  # (its times alone)
        self._wake_at = time.monotonic() + max(0.0, lease.seconds_left(read_version))
        if by_versions:
            return lease.expiry_version < read_version
        return self.first_expired(records, read_version)

    def first_expired(self, first: Any, read_version: int) -> bool:
        """Whether the first lease, ``first`` (the result of a range read of the lease
        records with ``limit=1``), has expired at ``read_version`` and this client's wall
        clock: a claim would deliver its item again. No database access of its own."""
        records = list(first)
        if not records or self.holds.key_fields(bytes(records[0].key))[0] >= read_version:
            return False
        return bool(_due(records, wall_microseconds()))

    def count_expired(self, reader: Any, read_version: int) -> int:
        """How many leases have expired (released ones included) at ``read_version`` and this
        client's wall clock. Cost: :func:`~fdbqueue._storage.store.count_keys` of the lease
        records whose expiry version has passed, through ``reader`` (a snapshot view: no
        conflicts)."""
        now = wall_microseconds()
        return count_keys(
            reader,
            self.leases_begin,
            self.holds.expired_end(read_version),
            lambda kv: LeaseRecord.parse(bytes(kv.value)).has_expired(now),
        )

    def waiting(self, reader: Any, read_version: int, n: int) -> list[Any]:
        """Up to ``n`` leases whose items wait (expired, or released and due; not those out
        of deliveries, which the next take moves to the dead letters) at ``read_version``
        and this client's wall clock, soonest expiry first, as key-value
        pairs of the item's key and its held value: what the next takes deliver first, for
        a peek. Cost: one range read of the leases expired by their versions (``limit=n`` +
        :data:`LOOK_PAST`) and a point read per lease (issued together), through ``reader``
        (a snapshot view: no conflicts)."""
        if n <= 0:
            return []
        read = reader.get_range(
            self.leases_begin, self.holds.expired_end(read_version), limit=n + LOOK_PAST
        )
        due = (LeaseRecord.parse(bytes(kv.value)) for kv in _due(list(read), wall_microseconds()))
        # those out of deliveries are not delivered: the next take moves them to the dead letters
        records = [record for record in due if not self._out_of_deliveries(record.deliveries)]
        held = [self.store.held.get(reader, record.held_id) for record in records[:n]]
        return [
            _Waiting(record.item_key, bytes(value))
            for record, value in zip(records[:n], held, strict=True)
            if value.present()
        ]

    def _records(self, reader: Any, end: bytes) -> Iterator[tuple[int, LeaseRecord]]:
        """Every lease record from the first up to ``end``, as (expiry version, record),
        read lazily through ``reader`` in pages of
        :data:`~fdbqueue._storage.store.COUNT_PAGE_SIZE`."""
        begin = self.leases_begin
        while True:
            page = list(reader.get_range(begin, end, limit=COUNT_PAGE_SIZE))
            for kv in page:
                yield self.holds.key_fields(bytes(kv.key))[0], LeaseRecord.parse(bytes(kv.value))
            if len(page) < COUNT_PAGE_SIZE:
                return
            begin = bytes(page[-1].key) + b"\x00"

    def oldest_waiting(self, reader: Any, read_version: int) -> int | None:
        """Since when the longest-waiting lease's item waits (wall-clock microseconds;
        :meth:`LeaseRecord.waiting_since`), or None when none waits. Cost: a range read of
        the leases expired by their versions, through ``reader``."""
        now = wall_microseconds()
        starts = [
            record.waiting_since()
            for _version, record in self._records(reader, self.holds.expired_end(read_version))
            if record.has_expired(now)
        ]
        return min(starts) if starts else None

    def census(self, reader: Any, read_version: int) -> tuple[int, int, int, int | None]:
        """The leases at ``read_version`` and this client's wall clock: how many are held,
        how many items wait (expired, or released and due: ``expired_leases``), how many were
        released with a delay not over yet (delayed), and since when the longest-waiting
        item waits (wall-clock microseconds, None when none waits). Cost: range reads of
        every lease record through ``reader`` (a snapshot view: no conflicts)."""
        now = wall_microseconds()
        held = delayed = 0
        starts: list[int] = []
        for version, record in self._records(reader, self.leases_end):
            if version < read_version and record.has_expired(now):
                starts.append(record.waiting_since())
            elif record.released_at is not None:
                delayed += 1
            else:
                held += 1
        return held, len(starts), delayed, min(starts) if starts else None

    def take_expired(
        self, tr: AnyContext, n: int, first: list[Any] | None = None
    ) -> tuple[list[Any], bool]:
        """Take up to ``n`` waiting leases' items as a plain take does, soonest expiry first:
        leases that expired (by their versions and the wall clock), and released ones whose
        delay, if any, fell due. An item whose lease expired waits as any item does, so every
        take (dequeue, pop, their ``_many`` forms, sessions) takes it before the queue's
        items, as a claim would. Each lease ends (its record and held value cleared, its
        group's next turn given, :meth:`~fdbqueue._storage.groups.Groups.finished`) and its
        value is returned; a lease out of deliveries, or whose value cannot be decoded,
        goes to the dead letters instead, as a claim would move it.

        The caller checked that the queue is not paused (:mod:`fdbqueue._storage.pause`).

        Args:
            first: the first lease record, as the caller's probe read it
                (:meth:`first_lease`): its held value is read with the range read of the
                expired leases, not after it (one round trip, as a claim's).

        Returns:
            The values taken, and whether anything moved to the dead letters.

        Cost: a read version, one range read of the leases expired by their versions
        (``limit=n`` + :data:`LOOK_PAST`; its read conflict range, so two takes of one lease
        conflict) and a point read of each held value, issued together (the probed first
        lease's with the range read); per lease two
        clears (record and held value) and the group's next turn (a range read, a set and
        an atomic add); nothing is written when no lease waits.
        """
        read_version: int = tr.get_read_version().wait()
        now = wall_microseconds()
        ahead = {} if first is None else self._read_ahead(tr, _due(first, now))
        expired_end: bytes = self.holds.expired_end(read_version)
        read = list(tr.get_range(self.leases_begin, expired_end, limit=n + LOOK_PAST))
        due = _due(read, now) if read else read
        if not due:
            return [], False
        # the first n deliverable ones, and those out of deliveries before them (at most
        # DEAD_LETTERS_PER_CLAIM * n): a take passes over what it moves to the dead letters
        records: list[tuple[Any, LeaseRecord]] = []
        deliverable = dead = 0
        for record in due:
            parsed = LeaseRecord.parse(bytes(record.value))
            if self._out_of_deliveries(parsed.deliveries):
                if dead == DEAD_LETTERS_PER_CLAIM * n:
                    break
                dead += 1
            elif deliverable == n:
                break
            else:
                deliverable += 1
            records.append((record, parsed))
        stored = [self._held_value(tr, parsed, ahead) for _record, parsed in records]
        values: list[Any] = []
        moved = False
        for (record, parsed), value in zip(records, stored, strict=True):
            if value is None:
                self._redeliver(tr, record, None, read_version, 1.0)  # a dead letter
                moved = True
                continue
            try:
                decoded = self.store.decode(value)
            except Exception:  # a codec may raise anything: the claim's path says why
                self._redeliver(tr, record, value, read_version, 1.0)
                moved = True
                continue
            del tr[record.key]
            job = job_of(bytes(value))
            job_record = None
            if job is not None:
                goes_on, job_record = self._job_goes_on(tr, job, parsed.item_key, parsed.held_id)
                if not goes_on:
                    moved = True  # a cancelled job's item, dropped
                    continue
            self.store.held.drop(tr, parsed.held_id)
            self.store.groups.finished(tr, parsed.item_key)
            if job is not None:
                self.store.jobs.taken(tr, job, job_record)
            metrics.add("expired", **self.store.metric_attributes)
            metrics.add("dequeued", **self.store.metric_attributes)
            values.append(decoded)
        return values, moved

    def claim_others(
        self,
        tr: AnyContext,
        read_version: int,
        seconds: float,
        n: int,
        firsts: list[Any] | None = None,
    ) -> tuple[list[Lease[Any]], bool]:
        """Redeliver up to ``n`` expired or released leases of the other shards
        (:attr:`others`) in ``tr``: where a shard's first lease expired at ``read_version``,
        its :meth:`claim_many` without fresh items. Returns the leases and whether items
        moved to the dead letters. ``firsts``: their first leases' snapshot reads, issued
        already (:meth:`probe`). Cost: a snapshot range read (``limit=1``) per other shard,
        issued together (one round trip), unless ``firsts``; then, per shard whose first
        lease expired, its claim's reads and writes."""
        if firsts is None:
            firsts = [other.first_lease(tr.snapshot) for other in self.others]
        found: list[Lease[Any]] = []
        moved = False
        for other, first in zip(self.others, firsts, strict=True):
            if len(found) >= n or not other.first_expired(first, read_version):
                continue
            claimed = other.claim_many(tr, _nothing_fresh, seconds, n - len(found), others=False)
            if claimed is MOVED_ASIDE:
                moved = True
            else:
                found += claimed
        return found, moved

    def _out_of_deliveries(self, deliveries: int) -> bool:
        return self.max_deliveries is not None and deliveries >= self.max_deliveries

    def note_next_expiry(self, tr: AnyContext) -> None:
        """Remember when the first lease in flight expires, for :meth:`seconds_until_expiry`:
        a take that found nothing calls it, so that a blocked take wakes when an expired
        lease's item waits. Cost: one snapshot range read of one key."""
        self._note_next_expiry(tr, tr.get_read_version().wait(), time.monotonic())

    def _note_next_expiry(self, tr: AnyContext, read_version: int, read_at: float) -> None:
        """Remember when the first lease (none of them expired at ``read_version``) expires
        by both its clocks, as a ``time.monotonic()`` time: a blocked claim wakes then (one
        snapshot range read)."""
        first = list(tr.snapshot.get_range(self.leases_begin, self.leases_end, limit=1))
        if not first:
            self._wake_at = None
            return
        self._wake_at = read_at + max(
            0.0, self._lease_of(first[0], None, grouped=False).seconds_left(read_version)
        )

    def seconds_until_expiry(self) -> float | None:
        """Seconds until the first lease the last claim that found nothing saw expires (0 if
        it has), or None when that claim saw no lease: how long a blocked claim may sleep
        at most before an expired lease makes an item claimable again.

        A hint kept per queue object: a lease granted later comes from an item whose
        enqueue bumped the signal key, and a released lease bumps it too, so a blocked
        claim misses neither.
        """
        wake_at = self._wake_at
        if wake_at is None:
            return None
        return max(0.0, wake_at - time.monotonic())

    def _redeliver(
        self,
        tr: AnyContext,
        record: Any,
        stored: Any,
        read_version: int,
        seconds: float,
    ) -> tuple[Lease[Any] | None, int]:
        """Lease an expired lease's item again, or move it to the dead letters (max
        deliveries reached, or its value cannot be decoded). ``stored`` is the held value's
        read, started by the caller (None when out of deliveries).

        Returns:
            The new Lease, or None for a dead letter; and the bytes written, as FoundationDB
            counts them.
        """
        del tr[record.key]
        written = clear_bytes(len(record.key))
        parsed = LeaseRecord.parse(bytes(record.value))
        item_key, deliveries, held_id, *_times = parsed
        held = self.holds.key_fields(bytes(record.key))[1].hex()  # the lease, for the log
        if self._out_of_deliveries(deliveries):
            times = "once" if deliveries == 1 else f"{deliveries} times"
            reason = (
                f"max_deliveries: delivered {times}, each lease expired or was released "
                f"(max_deliveries={self.max_deliveries})"
            )
            metrics.on_commit(
                functools.partial(
                    logger.warning,
                    "item of %s (lease %s) is now dead letter %s: %s",
                    self.store.metric_name,
                    held,
                    held_id.hex(),
                    reason,
                )
            )
            return None, written + self._dead_letter(tr, item_key, deliveries, held_id, reason)
        try:
            value = self.store.decode(stored)
        except Exception as error:  # a codec may raise anything on bytes it cannot read
            self.store.check_codec(self.store.recorded_codec(tr, again=True))  # a wrong codec?
            reason = f"undecodable: {describe_error(error)}"
            metrics.on_commit(
                functools.partial(
                    logger.warning,
                    "item of %s (lease %s) is now dead letter %s: %s",
                    self.store.metric_name,
                    held,
                    held_id.hex(),
                    reason,
                )
            )
            return None, written + self._dead_letter(tr, item_key, deliveries, held_id, reason)
        job = job_of(bytes(stored))
        options = None
        if job is not None:
            goes_on, job_record = self._job_goes_on(tr, job, item_key, held_id)
            if not goes_on:
                return None, written
            self.store.jobs.started(tr, job, deliveries + 1, job_record)
            options = None if job_record is None else job_record.options
        lease = self._grant(
            tr, item_key, value, deliveries + 1, held_id, read_version, seconds, job, options
        )
        metrics.on_commit(
            functools.partial(
                logger.debug,
                "item of %s delivered again as lease %s (delivery %d): lease %s expired or was "
                "released",
                self.store.metric_name,
                lease.id,
                deliveries + 1,
                held,
            )
        )
        metrics.add("expired", **self.store.metric_attributes)
        # the new record: the same item key and held id, the fixed layout's other fields
        return lease, written + set_bytes(len(lease.key), parsed.stored_bytes())

    def _job_goes_on(
        self, tr: AnyContext, job: bytes, item_key: bytes, held_id: bytes
    ) -> tuple[bool, JobRecord | None]:
        """Whether the job ``job``, whose lease ended (expired, or given back), goes on to
        its next delivery (False when it was cancelled: its item and lease are dropped here,
        the job is ``cancelled``, :mod:`fdbqueue._storage.jobs`), and its record as read
        (None: none), for its next state change. Cost: a point read."""
        record = self.store.jobs.parsed(self.store.jobs.read(tr, job))
        if record is None or not (record.cancel_requested or record.state == "cancelled"):
            return True, record
        self._drop(tr, held_id, item_key)
        if record.state != "cancelled":
            self.store.jobs.finish(tr, job, "cancelled", record)
        return False, record

    def _drop(self, tr: AnyContext, held_id: bytes, item_key: bytes) -> None:
        """A lease's item that goes no further, its job cancelled (its record already
        cleared by the caller): its held value cleared, its group's next turn given."""
        self.store.held.drop(tr, held_id)
        self.store.groups.finished(tr, item_key)

    def withdraw(self, tr: AnyContext, key: bytes) -> bool:
        """Remove the released lease at ``key``, a cancelled job's (its release noted it
        there: :meth:`~fdbqueue._storage.jobs.Jobs.located`): its record and held value, its
        group's next turn given; whether it did (False: claimed again since, so no longer
        there). Cost: a point read (a read conflict: a claim of it at the same time
        conflicts), two clears, and the group's next turn."""
        found = tr.get(key)
        if not found.present():
            return False
        record = LeaseRecord.parse(bytes(found))
        del tr[key]
        self._drop(tr, record.held_id, record.item_key)
        return True

    def holds_key(self, key: bytes) -> bool:
        """Whether ``key`` is one of this queue's (shard's) lease keys. No database access."""
        return self.leases_begin <= key < self.leases_end

    def _dead_letter(
        self, tr: AnyContext, item_key: bytes, deliveries: int, held_id: bytes, reason: str
    ) -> int:
        """Move a lease's item to the dead letters (its job, if it is one, ``dead``); return
        the bytes written (about)."""
        stored = self.store.held.get(tr.snapshot, held_id)
        job = job_of(bytes(stored)) if stored.present() else None
        if job is not None:
            self.store.jobs.finish(tr, job, "dead", error=reason)
        self.store.dead_letters.add(tr, item_key, deliveries, reason, held_id=held_id)
        self.store.groups.finished(tr, item_key)
        metrics.add("dead_lettered", **self.store.metric_attributes)
        return set_bytes(len(self.leases_begin) + 32, len(item_key) + len(reason.encode()) + 16)

    def _grant(
        self,
        tr: AnyContext,
        item_key: bytes,
        value: Any,
        deliveries: int,
        held_id: bytes,
        read_version: int,
        seconds: float,
        job: bytes | None = None,
        options: JobOptions | None = None,
        grouped: bool = True,
    ) -> Lease[Any]:
        """The lease of ``item_key`` (its ``deliveries``-th), written in ``tr``; ``grouped``:
        the item may be a group's (False: the queue never had a group, so none is looked
        for). Cost: one set."""
        lease_id = os.urandom(LEASE_ID_BYTES)
        expiry_version = read_version + lease_versions(seconds)
        record = LeaseRecord(
            item_key, deliveries, held_id, wall_microseconds() + lease_microseconds(seconds)
        )
        key = self.holds.key(expiry_version, lease_id)
        tr[key] = record.pack()
        if metrics.may_record:  # (no call while nothing records)
            metrics.add("claimed", **self.store.metric_attributes)
        group = self.store.groups.group_of(item_key) if grouped else None
        return Lease(
            value,
            lease_id.hex(),
            deliveries,
            expiry_version,
            key,
            group,
            record.expiry_seconds(),
            job_id=None if job is None else job.hex(),
            job_options=options,
        )

    def _lease_of(
        self, kv: Any, value: Any, job: bytes | None = None, *, grouped: bool = True
    ) -> Lease[Any]:
        """The :class:`Lease` a lease record ``kv`` (a key-value pair read) stands for, with
        ``value`` as its value (of the job ``job``, if it is one); without its group unless
        ``grouped`` (a lease looked at for its expiry alone)."""
        expiry_version, lease_id = self.holds.key_fields(bytes(kv.key))
        record = LeaseRecord.parse(bytes(kv.value))
        group = self.store.groups.group_of(record.item_key) if grouped else None
        return Lease(
            value,
            lease_id.hex(),
            record.deliveries,
            expiry_version,
            bytes(kv.key),
            group,
            record.expiry_seconds(),
            record.released_at is not None,
            None if job is None else job.hex(),
        )

    def in_flight(self, tr: AnyContext, limit: int, after: bytes | None = None) -> list[Lease[Any]]:
        """Up to ``limit`` leases, soonest expiry first (expired and released ones included),
        starting after the lease key ``after`` (None: from the first).

        A value the codec cannot decode is shown as an :class:`~fdbqueue.Undecodable`.
        Cost: one snapshot range read and one snapshot point read per lease (issued
        together); no conflicts.
        """
        reader: Any = getattr(tr, "snapshot", tr)
        begin = self.leases_begin if after is None else after + b"\x00"
        records = list(reader.get_range(begin, self.leases_end, limit=limit))
        values = [
            self.store.held.get(reader, LeaseRecord.parse(bytes(kv.value)).held_id)
            for kv in records
        ]
        return [
            self._lease_of(
                kv,
                decode_or_undecodable(self.store.codec, strip_job_header(bytes(stored))),
                job_of(bytes(stored)),
            )
            for kv, stored in zip(records, values, strict=True)
        ]
