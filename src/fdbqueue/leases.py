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

    pack(("leases", expiry version, lease id)) -> pack((item key, value, deliveries))
    pack(("dead", item key))                   -> pack((value, deliveries))

Requeued dead letters are enqueued again as new items (at the back; for a priority queue, at
the back of their priority): the recipes' indexes start again at 1 when a queue empties, so
an item's original key says nothing reliable about its place any more.

Leases are ordered by expiry, so a claim finds the oldest expired lease with one range read
(a released lease is re-keyed with expiry version 0: the next claim takes it first). Dead
letters are ordered by their items' original keys, i.e. by queue position.

What conflicts: two claims conflict when they take the same expired lease or the same item
(one retries and takes the next); an ``ack`` or ``release`` conflicts with a claim that
takes its (expired) lease at the same time, so exactly one of them wins.

Source followed: FoundationDB's "Queues" recipe for the items, and its developer guide on
versions (``get_read_version``) for the clock; the semantics follow message queues'
visibility timeouts (for example Amazon SQS: receive count, redrive to a dead-letter queue).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import fdb.tuple

from fdbqueue.receipts import exactly_once
from fdbqueue.store import ItemStore, check_count
from fdbqueue.transactional import TransactionContext, require_writable, transactional

__all__ = [
    "DeadLetter",
    "Lease",
    "LeaseError",
    "LeaseExpiredError",
    "LeaseNotHeldError",
    "Leases",
    "Leasing",
]

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
#: Takes up to ``n`` items from one end of a queue inside a transaction (read and cleared).
TakeItems = Callable[[Any, int], list[Any]]


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


@dataclass(frozen=True)
class DeadLetter:
    """An item whose leases expired ``max_deliveries`` times.

    Attributes:
        value: the item's value.
        deliveries: how many times it was claimed.
        item_key: its original key in the queue (internal; requeueing puts it back there).
    """

    value: Any
    deliveries: int
    item_key: bytes = field(repr=False)


def check_lease_seconds(seconds: Any) -> float:
    """Return ``seconds`` as a float, or raise before anything is read or written.

    Raises:
        TypeError: not a number (bool included).
        ValueError: not in ``(0, MAX_LEASE_SECONDS]``.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"lease must be a number of seconds, not {type(seconds).__name__}")
    if not 0 < seconds <= MAX_LEASE_SECONDS:
        raise ValueError(f"lease must be > 0 and <= {MAX_LEASE_SECONDS} seconds, not {seconds}")
    return float(seconds)


def check_max_deliveries(max_deliveries: Any) -> int | None:
    """Return ``max_deliveries`` (an int >= 1, or None for no limit), or raise ValueError."""
    if max_deliveries is None:
        return None
    if isinstance(max_deliveries, bool) or not isinstance(max_deliveries, int):
        raise ValueError(f"max_deliveries must be an int >= 1 or None, not {max_deliveries!r}")
    if max_deliveries < 1:
        raise ValueError(f"max_deliveries must be >= 1, not {max_deliveries}")
    return max_deliveries


class Leases:
    """The leases and dead letters of one queue (see the module docstring).

    Args:
        store: the queue's items and metadata.
        max_deliveries: deliveries after which an expired item becomes a dead letter (None:
            never).
    """

    def __init__(self, store: ItemStore, max_deliveries: int | None) -> None:
        self.store = store
        self.max_deliveries = max_deliveries
        self.leases = store.metadata["leases"]
        self.dead = store.metadata["dead"]
        self.leases_begin: bytes = self.leases.range().start
        self.leases_end: bytes = self.leases.range().stop
        self.dead_begin: bytes = self.dead.range().start
        self.dead_end: bytes = self.dead.range().stop

    def claim(self, tr: TransactionContext, take_items: TakeItems, seconds: float) -> Lease | None:
        """Lease the next item: an expired or released lease's item first, else the queue's
        next item. Returns None when there is neither.

        Cost: a read version, one range read of the expired leases (plus one per item moved
        to the dead letters, at most :data:`DEAD_LETTERS_PER_CLAIM`), the queue's take
        (one range read and a clear) when no lease expired, and one set.
        """
        require_writable(tr, "claim")
        read_version: int = tr.get_read_version().wait()
        for _ in range(DEAD_LETTERS_PER_CLAIM):
            expired = list(
                tr.get_range(self.leases_begin, self.leases.pack((read_version,)), limit=1)
            )
            if not expired:
                break
            del tr[expired[0].key]
            item_key, value, deliveries = fdb.tuple.unpack(bytes(expired[0].value))
            if self.max_deliveries is not None and deliveries >= self.max_deliveries:
                tr[self.dead.pack((item_key,))] = fdb.tuple.pack((value, deliveries))
                continue
            return self._grant(tr, item_key, value, deliveries + 1, read_version, seconds)
        items = take_items(tr, 1)
        if not items:
            return None
        self.store.add_to_size(tr, -1)
        return self._grant(tr, items[0].key, bytes(items[0].value), 1, read_version, seconds)

    def _grant(
        self,
        tr: TransactionContext,
        item_key: bytes,
        value: bytes,
        deliveries: int,
        read_version: int,
        seconds: float,
    ) -> Lease:
        lease_id = os.urandom(LEASE_ID_BYTES)
        expiry_version = read_version + int(seconds * VERSIONS_PER_SECOND)
        key: bytes = self.leases.pack((expiry_version, lease_id))
        tr[key] = fdb.tuple.pack((item_key, value, deliveries))
        return Lease(self.store.decode(value), lease_id.hex(), deliveries, expiry_version, key)

    def _held(self, tr: TransactionContext, lease: Any, action: str) -> bytes:
        """Check that ``lease`` is a lease of this queue, still held; return its stored value.

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
                f"lease {lease.id} is not held: it was acknowledged or released already, or it "
                "expired and its item was claimed again or moved to the dead letters"
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
        so an ack and a claim of the same expired lease never both win) and one clear.
        """
        self._held(tr, lease, "ack")
        del tr[lease.key]

    def release(self, tr: TransactionContext, lease: Any) -> None:
        """Give a leased item back unprocessed: the next claim takes it, ahead of the queue.

        Its delivery count is kept (the next claim raises it). Raises as :meth:`ack`; nothing
        changes when it raises. Cost: one point read, one clear and one set.
        """
        stored = self._held(tr, lease, "release")
        del tr[lease.key]
        tr[self.leases.pack((0, bytes.fromhex(lease.id)))] = stored

    def extend(self, tr: TransactionContext, lease: Any, seconds: float) -> Lease:
        """Move a held lease's expiry to ``seconds`` after this transaction's read version;
        return the new Lease (same id and deliveries; the old object is no longer held).

        Raises as :meth:`ack`; nothing changes when it raises. Cost: one point read, one
        clear and one set.
        """
        stored = self._held(tr, lease, "extend")
        del tr[lease.key]
        expiry_version = tr.get_read_version().wait() + int(seconds * VERSIONS_PER_SECOND)
        key: bytes = self.leases.pack((expiry_version, bytes.fromhex(lease.id)))
        tr[key] = stored
        return Lease(lease.value, lease.id, lease.deliveries, expiry_version, key)

    def in_flight(self, tr: TransactionContext, limit: int) -> list[Lease]:
        """Up to ``limit`` leases, soonest expiry first (expired and released ones included).

        Cost: one snapshot range read (no conflicts).
        """
        found = []
        for kv in tr.snapshot.get_range(self.leases_begin, self.leases_end, limit=limit):
            expiry_version, lease_id = self.leases.unpack(kv.key)
            _item_key, value, deliveries = fdb.tuple.unpack(bytes(kv.value))
            found.append(
                Lease(self.store.decode(value), lease_id.hex(), deliveries, expiry_version, kv.key)
            )
        return found

    def dead_letters(self, tr: TransactionContext, limit: int) -> list[DeadLetter]:
        """Up to ``limit`` dead letters, in queue order. Cost: one range read."""
        found = []
        for kv in tr.get_range(self.dead_begin, self.dead_end, limit=limit):
            (item_key,) = self.dead.unpack(kv.key)
            value, deliveries = fdb.tuple.unpack(bytes(kv.value))
            found.append(DeadLetter(self.store.decode(value), deliveries, item_key))
        return found

    def requeue_dead_letters(self, tr: TransactionContext, limit: int, enqueue: Requeue) -> int:
        """Enqueue up to ``limit`` dead letters again, in queue order, with ``enqueue(tr,
        item key, value)``; their delivery counts start again. Returns how many.

        Cost: one range read, one clear per item, and the enqueues.
        """
        require_writable(tr, "requeue_dead_letters")
        moved = 0
        for kv in tr.get_range(self.dead_begin, self.dead_end, limit=limit):
            (item_key,) = self.dead.unpack(kv.key)
            value, _deliveries = fdb.tuple.unpack(bytes(kv.value))
            del tr[kv.key]
            enqueue(tr, item_key, value)
            moved += 1
        return moved


class Leasing:
    """The lease methods :class:`~fdbqueue.Queue` and :class:`~fdbqueue.PriorityQueue` share
    (``claim`` itself is each queue's own: it takes from that queue's end)."""

    _leases: Leases

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
            LeaseNotHeldError: acknowledged or released already, or expired and claimed again.
            LeaseExpiredError: the lease expired (the item will be delivered again).

        Nothing changes when it raises. Given a Database, it takes effect exactly once even
        when a commit's result is unknown (:mod:`fdbqueue.receipts`). Cost: one point read
        (a read conflict on the lease) and one clear.
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
        :class:`Lease`; use it from now on (the old one is no longer held).

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
        leases whose items wait for the next claim included).

        Raises:
            TypeError, ValueError: ``limit`` is not an int >= 0.

        Cost: one snapshot range read; it adds no conflicts.
        """
        check_count(limit, "limit")
        return self._leases.in_flight(tr, limit) if limit else []

    @transactional
    def dead_letters(self, tr: TransactionContext, limit: int = 100) -> list[DeadLetter]:
        """Return up to ``limit`` dead letters (items whose leases expired ``max_deliveries``
        times), in queue order.

        Raises:
            TypeError, ValueError: ``limit`` is not an int >= 0.

        Cost: one range read.
        """
        check_count(limit, "limit")
        return self._leases.dead_letters(tr, limit) if limit else []

    @exactly_once(wrote=bool)
    def requeue_dead_letters(self, tr: TransactionContext, limit: int = 1000) -> int:
        """Enqueue up to ``limit`` dead letters again, oldest first, as new items at the back
        of the queue (of their priority, for a PriorityQueue); their delivery counts start
        again. Returns how many.

        Raises:
            TypeError, ValueError: ``limit`` is not an int >= 0.

        Cost: one range read; per item one clear and an enqueue's snapshot read, set and two
        atomic adds.
        """
        check_count(limit, "limit")
        return self._leases.requeue_dead_letters(tr, limit, self._requeue) if limit else 0
