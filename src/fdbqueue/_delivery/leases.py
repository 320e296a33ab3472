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
    pack(("held", held id))                    -> the encoded value (fdbqueue._storage.held)

The value moves once, unchanged, from the item to its held key, and stays there while the
small lease record is re-keyed (release, extend, redelivery) or becomes a dead letter
(:mod:`fdbqueue._storage.dead_letters`); so every value the queue accepted can be leased, whatever
its size or bytes. Requeued dead letters are enqueued again as new items (at the back; for a
priority queue, at the back of their priority): the recipes' indexes start again at 1 when a
queue empties, so an item's original key says nothing reliable about its place any more.

Leases are ordered by expiry, so a claim finds the oldest expired lease with one range read
(a released lease is re-keyed with expiry version 0: the next claim takes it first). A value
the codec cannot decode (at the head of the queue, or in an expired lease) goes to the dead
letters with the reason instead of being leased, and the claim goes on with the next item.
``claim_many`` leases up to ``n`` items in one transaction, the ones ``n`` claims would take
in the same order, within the library's transaction byte budget; ``ack_many`` acknowledges
several leases in one transaction, all of them or none.

Blocking claims (``claim(db, lease=s, block=True, timeout=t)``) wait as a blocking dequeue
does (:mod:`fdbqueue._transactions.waiting`): on a watch of the queue's signal key, which every
enqueue and every ``release`` bumps, and, since an expired lease makes its item claimable without
any write, also until the first lease in flight expires: a claim that finds nothing reads the
first lease record (the soonest expiry) and the wait ends then. No polling.

What conflicts: two claims conflict when they take the same expired lease or the same item
(one retries and takes the next); an ``ack`` or ``release`` conflicts with a claim that
takes its (expired) lease at the same time, so exactly one of them wins.

Source followed: FoundationDB's "Queues" recipe for the items, and its developer guide on
versions (``get_read_version``) for the clock; the semantics follow message queues'
visibility timeouts (for example Amazon SQS: receive count, redrive to a dead-letter queue).
Blocking claims follow the developer guide's "Watches" and Amazon SQS's long polling
(``ReceiveMessage`` with ``WaitTimeSeconds``).
"""

from __future__ import annotations

import functools
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import fdb.tuple
from fdb.subspace_impl import Subspace

from fdbqueue import metrics
from fdbqueue._checks import check_seconds
from fdbqueue._keys import describe_key
from fdbqueue._storage.dead_letters import DeadLetter
from fdbqueue._storage.store import RESERVED_TRANSACTION_BYTES, ItemStore
from fdbqueue._storage.taking import MOVED_ASIDE, Taken
from fdbqueue._storage.transaction_bytes import (
    LIBRARY_TRANSACTION_BUDGET,
    MAX_TRANSACTION_BYTES,
    clear_bytes,
    read_conflict_bytes,
    set_bytes,
)
from fdbqueue._transactions.transactional import (
    AnyContext,
    require_writable,
)
from fdbqueue.codecs import decode_or_undecodable, describe_error
from fdbqueue.errors import LeaseError, LeaseExpiredError, LeaseNotHeldError

__all__ = [
    "DeadLetter",
    "Lease",
    "LeaseError",
    "LeaseExpiredError",
    "LeaseHolds",
    "LeaseNotHeldError",
    "Leases",
]

logger = logging.getLogger("fdbqueue.leases")  # a documented logger name, whatever the module

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
#: Takes up to ``n`` items from one end of a queue within a byte budget
#: (:func:`fdbqueue._storage.taking.take`).
TakeItems = Callable[[Any, int, "int | None"], Taken]


def claimed_something(claimed: Any) -> bool:
    """Whether a claim batch wrote (leased something, or moved items to the dead letters):
    the ``wrote`` of its :func:`~fdbqueue._transactions.receipts.exactly_once`."""
    return claimed is MOVED_ASIDE or bool(claimed)


#: The type of a lease's value (covariant: a ``Lease[str]`` is a ``Lease[object]``).
T_co = TypeVar("T_co", covariant=True)


@dataclass(frozen=True)
class Lease(Generic[T_co]):
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

    value: T_co
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
        self.holds = LeaseHolds(store, self.leases)
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

        Cost: :meth:`claim_many` with ``n=1``: a read version, one range read of the expired
        leases and a point read of the held value (plus one of each per item moved to the
        dead letters, at most :data:`DEAD_LETTERS_PER_CLAIM`), the queue's take (one range
        read and a clear) when no lease expired, and two sets (record and held value) for a
        fresh item; when it finds nothing, one snapshot range read of the first lease.
        """
        claimed = self.claim_many(tr, take_items, seconds, 1)
        if claimed is MOVED_ASIDE:
            return MOVED_ASIDE
        return claimed[0] if claimed else None

    def claim_many(self, tr: AnyContext, take_items: TakeItems, seconds: float, n: int) -> Any:
        """Lease up to ``n`` items in ``tr``, in the order ``n`` claims one after the other
        would: expired or released leases' items first (soonest expiry first), then the
        queue's next items.

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
        """
        require_writable(tr, "claim")
        codec_record = self.store.recorded_codec(tr)
        read_version: int = tr.get_read_version().wait()
        read_at = time.monotonic()
        expired_end: bytes = self.leases.pack((read_version,))
        leases: list[Lease[Any]] = []
        spent = 0
        dead_lettered = 0
        most_dead = DEAD_LETTERS_PER_CLAIM * n
        while len(leases) < n:
            if dead_lettered >= most_dead or spent >= LIBRARY_TRANSACTION_BUDGET:
                # More expired leases may wait: they come before the queue's items.
                return leases or MOVED_ASIDE
            limit = min(n - len(leases), most_dead - dead_lettered)
            records = list(tr.get_range(self.leases_begin, expired_end, limit=limit))
            self.store.check_codec(codec_record)  # before a held value is decoded
            values = [
                None
                if self._out_of_deliveries(deliveries)
                else self.store.held.get(tr.snapshot, held)
                for _item, deliveries, held in (fdb.tuple.unpack(bytes(r.value)) for r in records)
            ]
            for record, stored in zip(records, values, strict=True):
                lease, written = self._redeliver(tr, record, stored, read_version, seconds)
                spent += written
                if lease is None:
                    dead_lettered += 1
                else:
                    leases.append(lease)
            if len(records) < limit:
                break  # no expired lease left
        moved_aside = dead_lettered > 0
        if len(leases) < n and spent < LIBRARY_TRANSACTION_BUDGET:
            # Each lease record costs less than the move of the value it goes with (a longer
            # key and the value): half of what is left lets the take's items and their
            # records both fit.
            taken = take_items(tr, n - len(leases), (LIBRARY_TRANSACTION_BUDGET - spent) // 2)
            if taken.items:
                self.store.add_to_size(tr, -len(taken.items))
            for item in taken.items:
                held_id = os.urandom(LEASE_ID_BYTES)
                self.store.held.put(tr, held_id, item.encoded)
                leases.append(
                    self._grant(tr, item.key, item.value, 1, held_id, read_version, seconds)
                )
            moved_aside = moved_aside or taken.moved_aside
        if not leases:
            if moved_aside:
                # Something moved to the dead letters is a write: commit it (with a receipt),
                # then look again.
                return MOVED_ASIDE
            self._note_next_expiry(tr, read_version, read_at)
        return leases

    def _out_of_deliveries(self, deliveries: int) -> bool:
        return self.max_deliveries is not None and deliveries >= self.max_deliveries

    def _note_next_expiry(self, tr: AnyContext, read_version: int, read_at: float) -> None:
        """Remember when the first lease (none of them expired at ``read_version``) expires,
        as a ``time.monotonic()`` time: a blocked claim wakes then (one snapshot range read)."""
        first = list(tr.snapshot.get_range(self.leases_begin, self.leases_end, limit=1))
        if not first:
            self._wake_at = None
            return
        expiry_version = self.leases.unpack(first[0].key)[0]
        seconds = max(0, expiry_version - read_version) / VERSIONS_PER_SECOND
        self._wake_at = read_at + seconds

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
        item_key, deliveries, held_id = fdb.tuple.unpack(bytes(record.value))
        if self._out_of_deliveries(deliveries):
            reason = (
                f"max_deliveries: delivered {deliveries} times, each lease expired or was "
                f"released (max_deliveries={self.max_deliveries})"
            )
            metrics.on_commit(
                functools.partial(
                    logger.info,
                    "fdbqueue: item %s of %s is now a dead letter: %s",
                    describe_key(item_key),
                    self.store.metric_name,
                    reason,
                )
            )
            return None, written + self._dead_letter(tr, item_key, deliveries, held_id, reason)
        try:
            value = self.store.codec.decode(bytes(stored))
        except Exception as error:  # a codec may raise anything on bytes it cannot read
            self.store.check_codec(self.store.recorded_codec(tr, again=True))  # a wrong codec?
            reason = f"undecodable: {describe_error(error)}"
            metrics.on_commit(
                functools.partial(
                    logger.warning,
                    "fdbqueue: moving leased item %s of %s to the dead letters: %s",
                    describe_key(item_key),
                    self.store.metric_name,
                    reason,
                )
            )
            return None, written + self._dead_letter(tr, item_key, deliveries, held_id, reason)
        lease = self._grant(tr, item_key, value, deliveries + 1, held_id, read_version, seconds)
        metrics.on_commit(
            functools.partial(
                logger.info,
                "fdbqueue: delivering item %s of %s again (delivery %d): its lease expired or "
                "was released",
                describe_key(item_key),
                self.store.metric_name,
                deliveries + 1,
            )
        )
        metrics.add("expired", queue=self.store.metric_name)
        return lease, written + set_bytes(len(lease.key), len(record.value))

    def _dead_letter(
        self, tr: AnyContext, item_key: bytes, deliveries: int, held_id: bytes, reason: str
    ) -> int:
        """Move a lease's item to the dead letters; return the bytes written (about)."""
        self.store.dead_letters.add(tr, item_key, deliveries, reason, held_id=held_id)
        metrics.add("dead_lettered", queue=self.store.metric_name)
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
    ) -> Lease[Any]:
        lease_id = os.urandom(LEASE_ID_BYTES)
        expiry_version = read_version + lease_versions(seconds)
        key: bytes = self.leases.pack((expiry_version, lease_id))
        tr[key] = fdb.tuple.pack((item_key, deliveries, held_id))
        metrics.add("claimed", queue=self.store.metric_name)
        return Lease(value, lease_id.hex(), deliveries, expiry_version, key)

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


class LeaseHolds:
    """What a lease holder does with a held lease: acknowledge it (alone or several at
    once), release it or extend it; each first checks that the lease is still held.

    Args:
        store: the queue's items and metadata.
        leases: the subspace of the lease records (:class:`Leases`).
    """

    def __init__(self, store: ItemStore, leases: Subspace) -> None:
        self.store = store
        self.leases = leases

    def check(self, lease: Any, action: str) -> None:
        """Check that ``lease`` is a Lease of this queue (no database access).

        Raises:
            TypeError: ``lease`` is not a Lease.
            ValueError: it is a lease of another queue.
        """
        if not isinstance(lease, Lease):
            raise TypeError(f"{action} needs a Lease from claim(), not {type(lease).__name__}")
        if not self.leases.contains(lease.key):
            raise ValueError(f"lease {lease.id} belongs to another queue")

    def check_many(self, leases: Any, action: str) -> list[Lease[Any]]:
        """``leases`` as a list, each a Lease of this queue, none twice, small enough for one
        transaction (no database access).

        Raises:
            TypeError: ``leases`` is not an iterable of Leases.
            ValueError: a lease of another queue, a lease given twice, or more leases than
                one transaction can acknowledge.
        """
        if isinstance(leases, (Lease, str, bytes)):
            raise TypeError(f"{action} needs an iterable of Leases, not {type(leases).__name__}")
        try:
            batch = list(leases)
        except TypeError:
            raise TypeError(
                f"{action} needs an iterable of Leases, not {type(leases).__name__}"
            ) from None
        seen: set[bytes] = set()
        size = 0
        for lease in batch:
            self.check(lease, action)
            if lease.key in seen:
                raise ValueError(f"{action}: lease {lease.id} is given twice")
            seen.add(lease.key)
            size += read_conflict_bytes(len(lease.key)) + 2 * clear_bytes(len(lease.key))
        limit = MAX_TRANSACTION_BYTES - RESERVED_TRANSACTION_BYTES
        if size > limit:
            raise ValueError(
                f"{action}: {len(batch):,} leases are about {size:,} bytes as FoundationDB counts "
                f"a transaction, more than the {limit:,} one transaction can hold: acknowledge "
                "them in smaller batches"
            )
        return batch

    def _held(self, tr: AnyContext, lease: Any, action: str) -> bytes:
        """Check that ``lease`` is a lease of this queue, still held; return its record.

        Raises:
            TypeError: ``lease`` is not a Lease.
            ValueError: it is a lease of another queue.
            LeaseNotHeldError, LeaseExpiredError: see :meth:`ack`.
        """
        self.check(lease, action)
        require_writable(tr, action)
        stored = tr.get(lease.key)
        return self._still_held(lease, stored, tr.get_read_version().wait())

    def _still_held(
        self, lease: Lease[Any], stored: Any, read_version: int, where: str = ""
    ) -> bytes:
        """The record ``stored`` (a point read of ``lease.key``), or raise when the lease is
        no longer held at ``read_version``; ``where`` is put before the message."""
        if not stored.present():
            raise LeaseNotHeldError(
                f"{where}lease {lease.id} is not held: it was acknowledged, released or extended "
                "already (extend returns the lease to use from then on), or it expired and its "
                "item was claimed again or moved to the dead letters"
            )
        if read_version > lease.expiry_version:
            raise LeaseExpiredError(
                f"{where}lease {lease.id} expired; its item goes to the next claim (delivery "
                f"{lease.deliveries + 1})"
            )
        return bytes(stored)

    def ack(self, tr: AnyContext, lease: Any) -> None:
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
        metrics.add("acknowledged", queue=self.store.metric_name)

    def ack_many(self, tr: AnyContext, leases: list[Lease[Any]]) -> None:
        """Remove every leased item of ``leases`` for good, or none of them.

        ``leases`` must have passed :meth:`check`. Every lease is read first (the point
        reads issued together) and checked, in the order given; the first that is not
        held raises, before anything is written in ``tr``.

        Raises:
            LeaseNotHeldError, LeaseExpiredError: as :meth:`ack`, naming the lease and its
                place in ``leases``.

        Cost: one point read per lease (each a read conflict on its lease), issued
        together, and two clears per lease.
        """
        require_writable(tr, "ack_many")
        stored = [tr.get(lease.key) for lease in leases]
        read_version: int = tr.get_read_version().wait()
        records = [
            self._still_held(lease, value, read_version, f"ack_many: leases[{index}]: ")
            for index, (lease, value) in enumerate(zip(leases, stored, strict=True))
        ]
        for lease, record in zip(leases, records, strict=True):
            del tr[lease.key]
            self.store.held.drop(tr, fdb.tuple.unpack(record)[2])
        metrics.add("acknowledged", len(leases), queue=self.store.metric_name)

    def release(self, tr: AnyContext, lease: Any, seconds: float = 0.0) -> None:
        """Give a leased item back unprocessed: the next claim takes it, ahead of the queue;
        with ``seconds`` > 0, not before that many seconds after ``tr``'s read version (its
        record is re-keyed to expire then, so a claim sees it as expired from then on).

        Its delivery count is kept (the next claim raises it). Raises as :meth:`ack`; nothing
        changes when it raises. Cost: one point read, one clear and one set of the small
        record (the value stays where it is held), and an atomic add to the signal key that
        wakes blocked claims (:mod:`fdbqueue._transactions.waiting`; no conflict), which then sleep
        until the record expires.
        """
        record = self._held(tr, lease, "release")
        del tr[lease.key]
        expiry_version = 0
        if seconds:
            expiry_version = tr.get_read_version().wait() + lease_versions(seconds)
        tr[self.leases.pack((expiry_version, bytes.fromhex(lease.id)))] = record
        self.store.signal(tr)  # the item is claimable now (or its wait changed): wake claims

    def dead_letter(self, tr: AnyContext, lease: Any, reason: str) -> None:
        """Move a leased item to the dead letters with ``reason``, its deliveries kept (the
        caller logs why, as the worker loop does).

        Raises as :meth:`ack`; nothing changes when it raises. Cost: one point read, a clear
        and a set.
        """
        record = self._held(tr, lease, "dead_letter")
        del tr[lease.key]
        item_key, deliveries, held_id = fdb.tuple.unpack(record)
        self.store.dead_letters.add(tr, item_key, deliveries, reason, held_id=held_id)
        metrics.add("dead_lettered", queue=self.store.metric_name)

    def extend(self, tr: AnyContext, lease: Any, seconds: float) -> Lease[Any]:
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
