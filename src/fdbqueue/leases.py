"""Leases: at-least-once processing with a visibility timeout, acknowledgements and dead letters.

``claim`` takes an item out of the queue into a *lease* that expires after a number of
seconds. The consumer processes the value, then ``ack`` removes the item for good. If the
consumer crashes or is too slow, the lease expires and the next ``claim`` delivers the item
again, with its delivery count raised; ``release`` hands an item back before that. An item
whose lease expires ``max_deliveries`` times moves to the queue's *dead letters*, where it can
be inspected and requeued.

Clock: expiry is measured in read versions, a clock all clients of a cluster share (no client
clock, no clock skew). Versions advance about 1,000,000 per second, so a lease of ``s`` seconds
expires ``s * 1,000,000`` versions after the read version of the claiming transaction; its
precision is that of the read version, about a GRV round trip. A cluster recovery makes
versions jump forward (by up to about 100 seconds' worth upstream), which expires leases
early: an item may then be delivered again while its first consumer still works on it, which
at-least-once processing allows (make processing idempotent).

Key layout, under the queue's metadata prefix ``P + b"\\xff"``::

    pack(("leases", expiry version, lease id)) -> pack((item key, deliveries, held id))
    pack(("held", held id))                    -> the encoded value (fdbqueue.held)

The value moves once, unchanged, from the item to its held key, and stays there while the
small lease record is re-keyed (release, extend, redelivery) or becomes a dead letter
(:mod:`fdbqueue.deadletters`); so every value the queue accepted can be leased, whatever its
size or bytes. Requeued dead letters are enqueued again as new items (at the back; for a
priority queue, at the back of their priority): the recipes' indexes start again at 1 when a
queue empties, so an item's original key says nothing reliable about its place any more.

Leases are ordered by expiry, so a claim finds the oldest expired lease with one range read
(a released lease is re-keyed with expiry version 0: the next claim takes it first). A value
the codec cannot decode (at the head of the queue, or in an expired lease) goes to the dead
letters with the reason instead of being leased, and the claim goes on with the next item.

What conflicts: two claims conflict when they take the same expired lease or the same item
(one retries and takes the next); an ``ack`` or ``release`` conflicts with a claim that
takes its (expired) lease at the same time, so exactly one of them wins.

Source followed: FoundationDB's "Queues" recipe for the items, and its developer guide on
versions (``get_read_version``) for the clock; the semantics follow message queues'
visibility timeouts (for example Amazon SQS: receive count, redrive to a dead-letter queue).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import fdb.tuple

from fdbqueue.codecs import decode_or_undecodable, describe_error
from fdbqueue.deadletters import DeadLetter
from fdbqueue.receipts import exactly_once
from fdbqueue.store import ItemStore, check_count, check_seconds
from fdbqueue.taking import MOVED_ASIDE, Taken
from fdbqueue.transaction_bytes import LIBRARY_TRANSACTION_BUDGET
from fdbqueue.transactional import (
    TransactionContext,
    is_database,
    require_writable,
    transactional,
)

__all__ = [
    "DeadLetter",
    "Lease",
    "LeaseError",
    "LeaseExpiredError",
    "LeaseNotHeldError",
    "Leases",
    "Leasing",
]

logger = logging.getLogger(__name__)

VERSIONS_PER_SECOND = 1_000_000
#: Deliveries after which an item whose leases keep expiring becomes a dead letter.
DEFAULT_MAX_DELIVERIES = 5
#: The longest lease, in seconds (12 hours, as Amazon SQS's longest visibility timeout).
MAX_LEASE_SECONDS = 12 * 60 * 60
#: Expired leases one claim moves to the dead letters before it gives up finding an item.
DEAD_LETTERS_PER_CLAIM = 16
LEASE_ID_BYTES = 16

#: Enqueues a dead letter again: ``(tr, its original item key, its encoded value)``.
Requeue = Callable[[Any, bytes, bytes], None]
#: Takes up to ``n`` items from one end of a queue within a byte budget, giving back due
#: served results (:meth:`fdbqueue.results.ServedResults.take_with_give_back`).
TakeItems = Callable[[Any, int, "int | None"], Taken]


class LeaseError(Exception):
    """An ``ack`` or ``release`` refused: the lease is no longer held. Nothing was changed."""


class LeaseExpiredError(LeaseError):
    """The lease expired: its item is available to the next claim (or already claimed)."""


class LeaseNotHeldError(LeaseError):
    """The lease does not exist any more: it was acknowledged or released already, or it
    expired and its item was claimed again or moved to the dead letters."""


@dataclass(frozen=True)
class Lease:
    """An item claimed for processing.

    Attributes:
        value: the item's value.
        id: the lease's id (32 hexadecimal digits), unique per claim.
        deliveries: how many times this item has been claimed, this claim included (1 the
            first time).
        expiry_version: the read version after which the lease has expired (about
            1,000,000 versions per second).
        key: where the lease is stored (internal; ``ack`` and ``release`` use it).
    """

    value: Any
    id: str
    deliveries: int
    expiry_version: int
    key: bytes = field(repr=False)


def check_lease_seconds(seconds: Any) -> float:
    """Return ``seconds`` as a float, or raise before anything is read or written.

    Raises:
        TypeError: not a number (bool included).
        ValueError: NaN, or not in ``(0, MAX_LEASE_SECONDS]``.
    """
    number = check_seconds(seconds, "lease", allow_infinity=True)
    if number > MAX_LEASE_SECONDS:
        raise ValueError(f"lease must be > 0 and <= {MAX_LEASE_SECONDS} seconds, not {number}")
    return number


def lease_versions(seconds: float) -> int:
    """Versions a lease of ``seconds`` lasts: at least 1, so a lease is never born expired."""
    return max(1, math.ceil(seconds * VERSIONS_PER_SECOND))


def check_max_deliveries(max_deliveries: Any) -> int | None:
    """Return ``max_deliveries`` (an int >= 1, or None for no limit).

    Raises:
        TypeError: not an int or None (bool included).
        ValueError: less than 1.
    """
    if max_deliveries is None:
        return None
    if isinstance(max_deliveries, bool) or not isinstance(max_deliveries, int):
        raise TypeError(f"max_deliveries must be an int >= 1 or None, not {max_deliveries!r}")
    if max_deliveries < 1:
        raise ValueError(f"max_deliveries must be >= 1, not {max_deliveries}")
    return max_deliveries


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

    def claim(self, tr: TransactionContext, take_items: TakeItems, seconds: float) -> Any:
        """Lease the next item: an expired or released lease's item first, else the queue's
        next item.

        Returns:
            A Lease; None when there is neither; or :data:`~fdbqueue.store.MOVED_ASIDE`
            when it only moved items to the dead letters (poison items, or
            :data:`DEAD_LETTERS_PER_CLAIM` leases out of deliveries) and ran out of budget:
            commit, then claim again.

        Cost: a read version, one range read of the expired leases and a point read of the
        held value (plus one of each per item moved to the dead letters, at most
        :data:`DEAD_LETTERS_PER_CLAIM`), the queue's take (one range read and a clear) when
        no lease expired, and two sets (record and held value) for a fresh item.
        """
        require_writable(tr, "claim")
        read_version: int = tr.get_read_version().wait()
        dead_lettered = False
        for _ in range(DEAD_LETTERS_PER_CLAIM):
            expired = list(
                tr.get_range(self.leases_begin, self.leases.pack((read_version,)), limit=1)
            )
            if not expired:
                break
            lease = self._redeliver(tr, expired[0], read_version, seconds)
            if lease is not None:
                return lease
            dead_lettered = True
        else:
            return MOVED_ASIDE  # moved as many as one claim may: commit, then claim again
        taken = take_items(tr, 1, LIBRARY_TRANSACTION_BUDGET)
        if not taken.items:
            # Something moved to the dead letters is a write: commit it (with a receipt),
            # then look again.
            return MOVED_ASIDE if taken.moved_aside or dead_lettered else None
        item = taken.items[0]
        self.store.add_to_size(tr, -1)
        held_id = os.urandom(LEASE_ID_BYTES)
        self.store.held.put(tr, held_id, item.encoded)
        return self._grant(tr, item.key, item.value, 1, held_id, read_version, seconds)

    def _redeliver(
        self, tr: TransactionContext, record: Any, read_version: int, seconds: float
    ) -> Lease | None:
        """Lease an expired lease's item again, or move it to the dead letters (max
        deliveries reached, or its value cannot be decoded) and return None."""
        del tr[record.key]
        item_key, deliveries, held_id = fdb.tuple.unpack(bytes(record.value))
        dead_letters = self.store.dead_letters
        if self.max_deliveries is not None and deliveries >= self.max_deliveries:
            reason = (
                f"max_deliveries: delivered {deliveries} times, each lease expired or was "
                f"released (max_deliveries={self.max_deliveries})"
            )
            dead_letters.add(tr, item_key, deliveries, reason, held_id=held_id)
            logger.info(
                "fdbqueue: item %r of %r is now a dead letter: %s",
                item_key,
                self.store.subspace,
                reason,
            )
            return None
        stored = self.store.held.get(tr.snapshot, held_id)
        try:
            value = self.store.codec.decode(bytes(stored))
        except Exception as error:  # a codec may raise anything on bytes it cannot read
            reason = f"undecodable: {describe_error(error)}"
            dead_letters.add(tr, item_key, deliveries, reason, held_id=held_id)
            logger.warning(
                "fdbqueue: moving leased item %r of %r to the dead letters: %s",
                item_key,
                self.store.subspace,
                reason,
            )
            return None
        return self._grant(tr, item_key, value, deliveries + 1, held_id, read_version, seconds)

    def _grant(
        self,
        tr: TransactionContext,
        item_key: bytes,
        value: Any,
        deliveries: int,
        held_id: bytes,
        read_version: int,
        seconds: float,
    ) -> Lease:
        lease_id = os.urandom(LEASE_ID_BYTES)
        expiry_version = read_version + lease_versions(seconds)
        key: bytes = self.leases.pack((expiry_version, lease_id))
        tr[key] = fdb.tuple.pack((item_key, deliveries, held_id))
        return Lease(value, lease_id.hex(), deliveries, expiry_version, key)

    def _held(self, tr: TransactionContext, lease: Any, action: str) -> bytes:
        """Check that ``lease`` is a lease of this queue, still held; return its record.

        Raises:
            TypeError: ``lease`` is not a Lease.
            ValueError: it is a lease of another queue.
            LeaseNotHeldError, LeaseExpiredError: see :meth:`ack`.
        """
        if not isinstance(lease, Lease):
            raise TypeError(f"{action} needs a Lease from claim(), not {type(lease).__name__}")
        if not self.leases.contains(lease.key):
            raise ValueError(f"lease {lease.id} belongs to another queue")
        require_writable(tr, action)
        stored = tr.get(lease.key)
        if not stored.present():
            raise LeaseNotHeldError(
                f"lease {lease.id} is not held: it was acknowledged, released or extended "
                "already (extend returns the lease to use from then on), or it expired and its "
                "item was claimed again or moved to the dead letters"
            )
        if tr.get_read_version().wait() > lease.expiry_version:
            raise LeaseExpiredError(
                f"lease {lease.id} expired; its item goes to the next claim (delivery "
                f"{lease.deliveries + 1})"
            )
        return bytes(stored)

    def ack(self, tr: TransactionContext, lease: Any) -> None:
        """Remove a leased item for good.

        Raises:
            TypeError: ``lease`` is not a :class:`Lease`, or ``tr`` is a snapshot view.
            ValueError: the lease belongs to another queue.
            LeaseNotHeldError: acknowledged or released already, or expired and claimed again.
            LeaseExpiredError: the lease expired (the item will be delivered again).

        Nothing changes when it raises. Cost: one point read (a read conflict on the lease,
        so an ack and a claim of the same expired lease never both win) and two clears.
        """
        record = self._held(tr, lease, "ack")
        del tr[lease.key]
        self.store.held.drop(tr, fdb.tuple.unpack(record)[2])

    def release(self, tr: TransactionContext, lease: Any) -> None:
        """Give a leased item back unprocessed: the next claim takes it, ahead of the queue.

        Its delivery count is kept (the next claim raises it). Raises as :meth:`ack`; nothing
        changes when it raises. Cost: one point read, one clear and one set of the small
        record (the value stays where it is held).
        """
        record = self._held(tr, lease, "release")
        del tr[lease.key]
        tr[self.leases.pack((0, bytes.fromhex(lease.id)))] = record

    def extend(self, tr: TransactionContext, lease: Any, seconds: float) -> Lease:
        """Move a held lease's expiry to ``seconds`` after this transaction's read version;
        return the new Lease (same id and deliveries; the old object is no longer held).

        Raises as :meth:`ack`; nothing changes when it raises. Cost: one point read, one
        clear and one set of the small record.
        """
        record = self._held(tr, lease, "extend")
        del tr[lease.key]
        expiry_version = tr.get_read_version().wait() + lease_versions(seconds)
        key: bytes = self.leases.pack((expiry_version, bytes.fromhex(lease.id)))
        tr[key] = record
        return Lease(lease.value, lease.id, lease.deliveries, expiry_version, key)

    def in_flight(self, tr: TransactionContext, limit: int) -> list[Lease]:
        """Up to ``limit`` leases, soonest expiry first (expired and released ones included).

        A value the codec cannot decode is shown as an :class:`~fdbqueue.Undecodable`.
        Cost: one snapshot range read and one snapshot point read per lease (issued
        together); no conflicts.
        """
        reader: Any = getattr(tr, "snapshot", tr)
        records = list(reader.get_range(self.leases_begin, self.leases_end, limit=limit))
        unpacked = [fdb.tuple.unpack(bytes(kv.value)) for kv in records]
        values = [self.store.held.get(reader, held_id) for _key, _n, held_id in unpacked]
        found = []
        for kv, (_item_key, deliveries, _held_id), stored in zip(
            records, unpacked, values, strict=True
        ):
            expiry_version, lease_id = self.leases.unpack(kv.key)
            value = decode_or_undecodable(self.store.codec, bytes(stored))
            found.append(Lease(value, lease_id.hex(), deliveries, expiry_version, kv.key))
        return found


class Leasing:
    """The lease and dead-letter methods :class:`~fdbqueue.Queue` and
    :class:`~fdbqueue.PriorityQueue` share (``claim`` itself is each queue's own: it takes
    from that queue's end)."""

    _leases: Leases
    _store: ItemStore

    def _requeue(self, tr: TransactionContext, item_key: bytes, encoded: bytes) -> None:
        """Enqueue a dead letter's value again (each queue type says where)."""
        raise NotImplementedError

    @exactly_once
    def ack(self, tr: TransactionContext, lease: Lease) -> None:
        """Remove a claimed item for good: its processing is done.

        Args:
            tr: a Database, Tenant or Transaction (then it composes with your own writes,
                for example the results of processing the item).
            lease: what ``claim`` returned.

        Raises:
            TypeError: ``lease`` is not a :class:`Lease`, or ``tr`` has the wrong type.
            ValueError: the lease belongs to another queue.
            LeaseNotHeldError: acknowledged, released or extended already, or expired and
                claimed again.
            LeaseExpiredError: the lease expired (the item will be delivered again).

        Nothing changes when it raises. Given a Database, it takes effect exactly once even
        when a commit's outcome is unknown (:mod:`fdbqueue.receipts`). Cost: one point read
        (a read conflict on the lease) and two clears.
        """
        self._leases.ack(tr, lease)

    @exactly_once
    def release(self, tr: TransactionContext, lease: Lease) -> None:
        """Give a claimed item back unprocessed: the next ``claim`` takes it first.

        Raises as :meth:`ack`, and nothing changes when it raises. The delivery count is
        kept, so releasing counts towards ``max_deliveries``. Cost: one point read, one
        clear, one set.
        """
        self._leases.release(tr, lease)

    def extend(self, tr: TransactionContext, lease: Lease, seconds: float) -> Lease:
        """Keep a claimed item longer: its lease now expires ``seconds`` after this call's
        read version (like a visibility-timeout change). Returns the new
        :class:`Lease`; use it from now on (the old one is no longer held, and acking it
        raises LeaseNotHeldError).

        Raises:
            TypeError: ``lease`` is not a :class:`Lease`, ``seconds`` is not a number, or
                ``tr`` has the wrong type.
            ValueError: ``seconds`` out of range, or a lease of another queue.
            LeaseNotHeldError, LeaseExpiredError: as for :meth:`ack`.

        Nothing changes when it raises. Given a Database, it takes effect exactly once.
        Cost: one point read, one clear, one set.
        """
        return self._extend(tr, lease, check_lease_seconds(seconds))

    @exactly_once
    def _extend(self, tr: TransactionContext, lease: Lease, seconds: float) -> Lease:
        return self._leases.extend(tr, lease, seconds)

    @transactional
    def leases(self, tr: TransactionContext, limit: int = 100) -> list[Lease]:
        """Return up to ``limit`` leases in flight, soonest expiry first (expired and released
        leases whose items wait for the next claim included). A value the codec cannot decode
        shows as an :class:`~fdbqueue.Undecodable`.

        Raises:
            TypeError, ValueError: ``limit`` is not an int >= 0.

        Cost: one snapshot range read and a snapshot point read per lease; no conflicts.
        """
        check_count(limit, "limit")
        return self._leases.in_flight(tr, limit) if limit else []

    @transactional
    def dead_letters(self, tr: TransactionContext, limit: int = 100) -> list[DeadLetter]:
        """Return up to ``limit`` dead letters, oldest first: items whose leases expired
        ``max_deliveries`` times, and poison items whose values the codec cannot decode
        (their ``value`` is an :class:`~fdbqueue.Undecodable` and ``reason`` says why).

        Raises:
            TypeError, ValueError: ``limit`` is not an int >= 0.

        Cost: one range read and a point read per dead letter.
        """
        check_count(limit, "limit")
        return self._store.dead_letters.read(tr, limit) if limit else []

    def requeue_dead_letters(self, tr: TransactionContext, limit: int = 1000) -> int:
        """Enqueue up to ``limit`` dead letters again, oldest first, as new items at the back
        of the queue (of their priority, for a PriorityQueue), with their stored bytes
        unchanged; their delivery counts start again. Returns how many.

        Given a Database, it runs as many transactions as the bytes need (each holds at most
        about 5,000,000 bytes of values, and each takes effect exactly once). Given a
        Transaction, it requeues what fits in that budget and returns how many it did.

        Raises:
            TypeError, ValueError: ``limit`` is not an int >= 0.

        Cost per transaction: one range read, a point read per dead letter; per item two
        clears and an enqueue's snapshot read, set and two atomic adds.
        """
        check_count(limit, "limit")
        if not is_database(tr):
            return self._requeue_batch(tr, limit)
        moved = 0
        while moved < limit:
            batch = self._requeue_batch(tr, limit - moved)
            if batch == 0:
                break
            moved += batch
        return moved

    @exactly_once(wrote=bool)
    def _requeue_batch(self, tr: TransactionContext, limit: int) -> int:
        if limit == 0:
            return 0
        require_writable(tr, "requeue_dead_letters")
        taken = self._store.dead_letters.take(tr, limit, LIBRARY_TRANSACTION_BUDGET)
        for letter in taken:
            self._requeue(tr, letter.item_key, letter.encoded)
        return len(taken)
