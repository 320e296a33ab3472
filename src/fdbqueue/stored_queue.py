"""What every queue type shares: :class:`StoredQueue`, the base of
:class:`~fdbqueue.Queue` and :class:`~fdbqueue.PriorityQueue` (``subspace``, ``codec``,
``size``, ``empty``, ``peek_many``, ``pending_requests`` and ``clear``, which act on the whole
subspace whatever the item layout).

Source followed: FoundationDB's "Queues" recipe; ``fdb/subspace_impl.py`` for the layer's
conventions (``tr`` first, ``@transactional``).
"""

from __future__ import annotations

from typing import Any

from fdb.subspace_impl import Subspace

from fdbqueue import taking
from fdbqueue.codecs import Codec
from fdbqueue.consumers import DEFAULT_ABANDON_AFTER, Consumer
from fdbqueue.leases import check_max_deliveries
from fdbqueue.receipts import exactly_once
from fdbqueue.staging import check_staging_arguments
from fdbqueue.store import ItemStore, check_count, check_flag
from fdbqueue.transactional import TransactionContext, transactional

__all__ = ["StoredQueue", "check_queue_arguments"]


def check_queue_arguments(
    high_contention: Any, batch_size: Any, abandon_after: Any, max_deliveries: Any
) -> None:
    """Check the arguments :class:`~fdbqueue.Queue` and :class:`~fdbqueue.PriorityQueue` take
    beside the subspace and codec (those are checked by :func:`fdbqueue.store.as_subspace` and
    :func:`fdbqueue.codecs.resolve_codec`), before anything is read or written.

    Raises:
        TypeError: ``high_contention`` is not a bool, ``batch_size`` / ``max_deliveries`` is
            not an int (``max_deliveries`` may be None), or ``abandon_after`` is not a number.
            (``subspace`` or ``codec`` of the wrong type, or a non-bool ``exactly_once``, raise
            TypeError too.)
        ValueError: ``batch_size`` is not in 1 to 10,000, ``abandon_after`` is NaN, not > 0 or
            over a day, or ``max_deliveries`` is below 1. (So does a subspace prefix that is
            empty, longer than 9,872 bytes or in the system keys, or an unknown codec name.)
    """
    check_flag(high_contention, "high_contention")
    check_staging_arguments(batch_size, abandon_after)
    check_max_deliveries(max_deliveries)


class StoredQueue:
    """What every queue type shares: its store, and ``subspace``, ``codec``, ``size``,
    ``empty`` and ``clear``, which act on the whole subspace whatever the item layout."""

    _store: ItemStore

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
        items (until their leases expire or are released, when the next claim takes them),
        dead letters, and items served to high-contention consumers that have not collected
        them yet (they come back if nobody does within ``abandon_after``; :meth:`size` counts
        them meanwhile). Cost: one range read (``limit=1``) whose read conflict range covers
        the start of the queue up to just past its first item (the whole item range when
        empty).
        """
        return not self._store.read(tr, limit=1)

    @transactional
    def size(self, tr: TransactionContext) -> int:
        """Return the number of items, from a counter that enqueue/push and dequeue/pop keep.

        It counts the items ready to take plus the items served to high-contention consumers
        that have not collected them yet (they come back to the queue if nobody does); leased
        items and dead letters are not counted. The counter changes by atomic adds, so keeping
        it adds no conflicts. It is exact for items that fdbqueue wrote and removed; items
        written or removed by other code (such as FoundationDB's recipes) are not counted, and
        the result is never below 0. Use :meth:`empty` for an exact emptiness test.

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

    def consumer(
        self, database: Any, *, prefetch: int = 0, abandon_after: float = DEFAULT_ABANDON_AFTER
    ) -> Consumer:
        """A consumer session: takes from the front in line with other sessions, without
        conflicts, FIFO in request order (:mod:`fdbqueue.consumers`).

        Use it as a context manager (``with queue.consumer(db, prefetch=1) as consumer:
        consumer.take(block=True)``); closing it returns its reserved places to the queue.

        Args:
            database: a Database (the session runs its own transactions).
            prefetch: places in line reserved between calls (0: none; 1: an item then costs
                one transaction).
            abandon_after: seconds after which the reservations of a session that died (or
                stopped calling) go to the next in line.

        Raises:
            TypeError: ``database`` is not a Database; ValueError: a bad ``prefetch`` or
            ``abandon_after``.
        """
        return Consumer(
            self._store,
            database,
            leases=getattr(self, "_leases", None),
            prefetch=prefetch,
            abandon_after=abandon_after,
        )

    @transactional
    def pending_requests(self, tr: TransactionContext, limit: int = 10_000) -> int:
        """Return how many high-contention requests wait to be served (at most ``limit``;
        0 for a queue without ``high_contention``).

        Cost: one snapshot range read of up to ``limit`` keys; no conflicts.
        """
        check_count(limit, "limit")
        requests = self._store.metadata.range(("requests",))
        reader: Any = getattr(tr, "snapshot", tr)  # a snapshot view has no .snapshot
        return len(list(reader.get_range(requests.start, requests.stop, limit=limit)))

    @exactly_once
    def clear(self, tr: TransactionContext) -> None:
        """Remove every item, the counters, leases, dead letters and any high-contention
        requests and results.

        The receipts stay (:mod:`fdbqueue.receipts`: they expire by themselves), so an
        operation in flight during a clear still takes effect exactly once: it happened before
        the clear, or after it. Prefer this to ``clear_range_startswith(prefix)``, which also
        removes the receipts. Given a Database it takes effect exactly once too, so a clear
        whose commit timed out (1031) cannot land later and remove items enqueued after it.
        Cost: two range clears; no reads, so it never conflicts, but concurrent consumers that
        read the cleared items do.
        """
        self._store.clear(tr)
