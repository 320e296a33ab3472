"""What every queue type shares: :class:`StoredQueue`, the base of
:class:`~fdbqueue.Queue` and :class:`~fdbqueue.PriorityQueue` (``subspace``, ``codec``,
``size``, ``empty``, ``peek_many`` and ``clear``, which act on the whole subspace whatever the
item layout; and what a lease holder does: ``ack``, ``ack_many``, ``release``, ``extend``,
with ``leases``, ``dead_letters`` and ``requeue_dead_letters`` to look after them). The queue
types compose the rest: an :class:`~fdbqueue.ends.End` per end for takes, claims and
consumer sessions, and :class:`~fdbqueue.leases.Leases`.

Source followed: FoundationDB's "Queues" recipe; ``fdb/subspace_impl.py`` for the layer's
conventions (``tr`` first, ``@transactional``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fdb.subspace_impl import Subspace

from fdbqueue import taking
from fdbqueue.codecs import Codec
from fdbqueue.consumers import check_abandon_after
from fdbqueue.deadletters import DeadLetter
from fdbqueue.leases import Lease, Leases, check_lease_seconds, check_max_deliveries
from fdbqueue.receipts import exactly_once
from fdbqueue.store import ItemStore, check_count, check_flag
from fdbqueue.transaction_bytes import LIBRARY_TRANSACTION_BUDGET
from fdbqueue.transactional import (
    TransactionContext,
    is_database,
    require_writable,
    transactional,
)

__all__ = ["StoredQueue", "check_queue_arguments"]


def check_queue_arguments(high_contention: Any, abandon_after: Any, max_deliveries: Any) -> float:
    """Check the arguments :class:`~fdbqueue.Queue` and :class:`~fdbqueue.PriorityQueue` take
    beside the subspace and codec (those are checked by :func:`fdbqueue.store.as_subspace` and
    :func:`fdbqueue.codecs.resolve_codec`), before anything is read or written.

    Returns:
        ``abandon_after`` as a float.

    Raises:
        TypeError: ``high_contention`` is not a bool, ``max_deliveries`` is not an int or
            None, or ``abandon_after`` is not a number. (``subspace`` or ``codec`` of the
            wrong type, or a non-bool ``exactly_once``, raise TypeError too.)
        ValueError: ``abandon_after`` is NaN, not > 0 or over a day, or ``max_deliveries``
            is below 1. (So does a subspace prefix that is empty, longer than 9,872 bytes or
            in the system keys, or an unknown codec name.)
    """
    check_flag(high_contention, "high_contention")
    check_max_deliveries(max_deliveries)
    return check_abandon_after(abandon_after)


class StoredQueue:
    """What every queue type shares: its store, and ``subspace``, ``codec``, ``size``,
    ``empty`` and ``clear``, which act on the whole subspace whatever the item layout; and
    the lease holder's calls, which act on the queue's leases whatever end they came from."""

    _store: ItemStore
    _leases: Leases
    _high_contention: bool

    @property
    def high_contention(self) -> bool:
        """Whether takes and claims given a Database take in line (:mod:`fdbqueue.consumers`)."""
        return self._high_contention

    def _requeue(self, tr: TransactionContext, item_key: bytes, encoded: bytes) -> None:
        """Enqueue a dead letter's value again (each queue type says where)."""
        raise NotImplementedError

    @property
    def subspace(self) -> Subspace:
        """The Subspace whose ``range()`` holds the items."""
        return self._store.subspace

    @property
    def codec(self) -> Codec:
        """The codec that encodes and decodes values."""
        return self._store.codec

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._store.subspace!r}, codec={self._store.codec!r})"

    @transactional
    def empty(self, tr: TransactionContext) -> bool:
        """Return True when no item is ready to take: the queue's item range is empty.

        Exact, whatever wrote the items. Items away from the queue are not counted: leased
        items (until their leases expire or are released, when the next claim takes them)
        and dead letters. Cost: one range read (``limit=1``) whose read conflict range covers
        the start of the queue up to just past its first item (the whole item range when
        empty).
        """
        return not self._store.read(tr, limit=1)

    @transactional
    def size(self, tr: TransactionContext) -> int:
        """Return the number of items, from a counter that enqueue/push and dequeue/pop keep.

        It counts the items ready to take; leased items and dead letters are not counted.
        The counter changes by atomic adds, so keeping it adds no conflicts. It is exact for
        items that fdbqueue wrote and removed; items written or removed by other code (such
        as FoundationDB's recipes) are not counted, and the result is never below 0. Use
        :meth:`empty` for an exact emptiness test.

        Cost: one point read. Inside your own transaction that read adds a read conflict on
        the counter, so your transaction conflicts with any enqueue or dequeue that commits
        first; pass ``tr.snapshot`` to read the size without that conflict.
        """
        return self._store.size(tr)

    @transactional
    def peek_many(self, tr: TransactionContext, n: int) -> list[Any]:
        """Return up to ``n`` values from the front, in key order, without removing them: a
        Queue's next ``n`` items, a PriorityQueue's next ``n`` of :meth:`pop_min`.

        Poison items (values the codec cannot decode) are skipped, as a take would move them
        to the dead letters.

        Raises:
            TypeError, ValueError: ``n`` is not an int >= 0.
            ValueError: a key among them is not one of this queue's items.

        Cost: one range read (``limit=n``), more only past poison items; as a snapshot read
        it adds no conflict range.
        """
        check_count(n)
        return taking.peek(self._store, taking.forward(self._store, tr, n, snapshot=True), n)

    @transactional
    def requests_in_line(self, tr: TransactionContext, limit: int = 10_000) -> int:
        """Return how many requests of consumer sessions wait in line, at every end of the
        queue (at most ``limit``): places reserved by prefetch and takes waiting for an item
        (:mod:`fdbqueue.consumers`).

        Raises:
            TypeError, ValueError: ``limit`` is not an int >= 0.

        Cost: one snapshot range read of up to ``limit`` keys; no conflicts.
        """
        check_count(limit, "limit")
        lines = self._store.metadata.range(("line",))
        reader: Any = getattr(tr, "snapshot", tr)  # a snapshot view has no .snapshot
        return len(list(reader.get_range(lines.start, lines.stop, limit=limit))) if limit else 0

    @exactly_once
    def clear(self, tr: TransactionContext) -> None:
        """Remove every item, the counters, leases, dead letters and the lines of requests
        of consumer sessions (a session whose requests it removed registers again).

        The receipts stay (:mod:`fdbqueue.receipts`: they expire by themselves), so an
        operation in flight during a clear still takes effect exactly once: it happened before
        the clear, or after it. Prefer this to ``clear_range_startswith(prefix)``, which also
        removes the receipts. Given a Database it takes effect exactly once too, so a clear
        whose commit timed out (1031) cannot land later and remove items enqueued after it.
        Cost: two range clears; no reads, so it never conflicts, but concurrent consumers that
        read the cleared items do.
        """
        self._store.clear(tr)

    # -- leases and dead letters ------------------------------------------------------------

    def ack_many(self, tr: TransactionContext, leases: Iterable[Lease]) -> None:
        """Remove several claimed items for good, in one transaction: all of them, or none.

        Args:
            tr: a Database, Tenant or Transaction (then it composes with your own writes).
            leases: what ``claim`` or ``claim_many`` returned (an iterable of
                :class:`Lease`; empty does nothing and starts no transaction).

        Raises:
            TypeError: ``leases`` is not an iterable of :class:`Lease`, or ``tr`` has the
                wrong type.
            ValueError: a lease belongs to another queue, the same lease is given twice, or
                the batch is too large for one transaction (more than about 15,000 leases).
            LeaseNotHeldError: a lease was acknowledged, released or extended already, or
                expired and was claimed again; the message names it (its id and its index
                in ``leases``).
            LeaseExpiredError: a lease expired (its item will be delivered again); named
                the same way.

        Nothing changes when it raises: every lease is read and checked before anything is
        written, so inside your transaction too no acknowledgement is left half done. Given
        a Database, it takes effect exactly once even when a commit's outcome is unknown
        (:mod:`fdbqueue.receipts`). Cost: one transaction; one point read per lease, issued
        together (each a read conflict on its lease, so an ack and a claim of the same
        expired lease never both win), and two clears per lease.

        Source followed: FoundationDB's developer guide (one transaction for several
        changes that must happen together; reads issued before waiting on them).
        """
        batch = self._leases.holds.check_many(leases, "ack_many")
        if batch:
            self._ack_many(tr, batch)

    @exactly_once
    def _ack_many(self, tr: TransactionContext, leases: list[Lease]) -> None:
        self._leases.holds.ack_many(tr, leases)

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
        self._leases.holds.ack(tr, lease)

    def release(self, tr: TransactionContext, lease: Lease, *, delay: float | None = None) -> None:
        """Give a claimed item back unprocessed: the next ``claim`` takes it first; with
        ``delay``, not before that many seconds (a retry with backoff).

        Args:
            delay: seconds (at most 12 hours) before the item can be claimed again; None or
                0: at once. Measured with read versions, as leases are.

        Raises as :meth:`ack` (and TypeError or ValueError for a bad ``delay``); nothing
        changes when it raises. The delivery count is kept, so releasing counts towards
        ``max_deliveries``. Cost: one point read, one clear, one set.
        """
        plain = delay is None or (type(delay) in (int, float) and delay == 0)
        seconds = 0.0 if plain else check_lease_seconds(delay)
        self._release(tr, lease, seconds)

    @exactly_once
    def _release(self, tr: TransactionContext, lease: Lease, seconds: float) -> None:
        self._leases.holds.release(tr, lease, seconds)

    def dead_letter(self, tr: TransactionContext, lease: Lease, reason: str) -> None:
        """Move a claimed item to the dead letters now, with ``reason`` (for instance the
        error its processing raised), instead of releasing it for another delivery.

        Raises as :meth:`ack`, and TypeError when ``reason`` is not a str; nothing changes
        when it raises. Cost: one point read, a clear and a set (the value stays where it is
        held).
        """
        if not isinstance(reason, str):
            raise TypeError(f"reason must be a str, not {type(reason).__name__}")
        self._dead_letter(tr, lease, reason)

    @exactly_once
    def _dead_letter(self, tr: TransactionContext, lease: Lease, reason: str) -> None:
        self._leases.holds.dead_letter(tr, lease, reason)

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
        return self._leases.holds.extend(tr, lease, seconds)

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
