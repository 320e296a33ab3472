"""What happens to a queue's dead letters, whatever the queue type: :class:`DeadLetteredQueue`,
a base of :class:`~fdbqueue.Queue` and :class:`~fdbqueue.PriorityQueue` for
``dead_letters``, ``purge_dead_letters`` and ``requeue_dead_letters``. How items become dead
letters is :mod:`fdbqueue._delivery.claims` (out of deliveries), ``dead_letter`` in
:mod:`fdbqueue._queues.leased_queue`, and :mod:`fdbqueue._storage.taking` (poison items).

Source followed: Amazon SQS's dead-letter queues and their redrive; FoundationDB's "Queues"
recipe for the items put back.
"""

from __future__ import annotations

from fdbqueue._checks import check_count
from fdbqueue._queues.sharded_views import concatenated, summed
from fdbqueue._queues.stored_queue import PAGE_SIZE, StoredQueue, T, check_limit, read_pages
from fdbqueue._storage.dead_letters import DeadLetter
from fdbqueue._storage.transaction_bytes import LIBRARY_TRANSACTION_BUDGET
from fdbqueue._transactions.receipts import exactly_once
from fdbqueue._transactions.transactional import (
    TransactionContext,
    is_database,
    require_writable,
    transactional,
)
from fdbqueue.codecs import Undecodable

__all__ = ["DeadLetteredQueue"]


class DeadLetteredQueue(StoredQueue[T]):
    """Listing, purging and requeueing dead letters, shared by every queue type."""

    def _requeue(self, tr: TransactionContext, item_key: bytes, encoded: bytes) -> None:
        """Enqueue a dead letter's value again (each queue type says where)."""
        raise NotImplementedError

    def dead_letters(
        self, tr: TransactionContext, limit: int | None = 100
    ) -> list[DeadLetter[T | Undecodable]]:
        """Return up to ``limit`` dead letters (None: all of them), oldest first: items whose
        leases expired ``max_deliveries`` times, and poison items whose values the codec
        cannot decode (their ``value`` is an :class:`~fdbqueue.Undecodable` and ``reason``
        says why).

        The default, 100, is for a look: more dead letters may exist (:meth:`info` counts
        them). Given a Database, it reads pages of at most
        1,000 dead letters, each in a transaction of its
        own, each going on after the last record key the one before read: with ``limit`` up
        to that, one transaction; with more (or None), pages are read at different read
        versions, so dead letters requeued or purged meanwhile may still be listed, and new
        ones (which sort last) may be listed too. Given a Transaction, every page is read in
        it.

        Raises:
            TypeError, ValueError: ``limit`` is not an int >= 0 or None.

        Cost per page: one range read and a point read per dead letter (issued together).
        """
        wanted = check_limit(limit)
        if self._parts.sharded:
            return concatenated(self._parts, wanted, lambda part, left: part.dead_letters(tr, left))
        return read_pages(tr, wanted, self._dead_letters_page)

    @transactional
    def _dead_letters_page(
        self, tr: TransactionContext, after: bytes | None, count: int
    ) -> tuple[list[DeadLetter[T | Undecodable]], bytes | None, bool]:
        found = self._store.dead_letters.read(tr, count, after) if count else []
        return found, found[-1].key if found else None, len(found) == count

    def purge_dead_letters(self, tr: TransactionContext, limit: int | None = None) -> int:
        """Remove up to ``limit`` dead letters (None: all of them), oldest first, with their
        held values, for good. Returns how many.

        Given a Database, it runs a transaction per 1,000
        dead letters, each taking effect exactly once (:doc:`guarantees`),
        until ``limit`` are removed or none is left; dead letters added meanwhile (they sort last)
        may be removed too. Given a Transaction, it removes them all in it (a page at a
        time), and commits nothing.

        Raises:
            TypeError, ValueError: ``limit`` is not an int >= 0 or None.

        Cost per page: one range read of the dead letter records (a read conflict on what it
        read, so a concurrent requeue or purge of the same dead letters makes one of them
        retry) and two clears per dead letter; the held values are not read.
        """
        wanted = check_limit(limit)
        if self._parts.sharded:
            return summed(self._parts, wanted, lambda part, left: part.purge_dead_letters(tr, left))
        purged = 0
        while wanted is None or purged < wanted:
            count = PAGE_SIZE if wanted is None else min(PAGE_SIZE, wanted - purged)
            removed = self._purge_batch(tr, count)
            purged += removed
            if removed < count:
                break
        return purged

    @exactly_once(wrote=bool)
    def _purge_batch(self, tr: TransactionContext, limit: int) -> int:
        require_writable(tr, "purge_dead_letters")
        return self._store.dead_letters.drop(tr, limit)

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
        if self._parts.sharded:
            return summed(
                self._parts, limit, lambda part, left: part.requeue_dead_letters(tr, left)
            )
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
        self._store.check_type(tr, self._store.recorded_type(tr))
        taken = self._store.dead_letters.take(tr, limit, LIBRARY_TRANSACTION_BUDGET)
        for letter in taken:
            self._requeue(tr, letter.item_key, letter.encoded)
        return len(taken)
