"""What every queue type shares: :class:`StoredQueue`, the base of
:class:`~fdbqueue.leased_queue.LeasedQueue` and so of :class:`~fdbqueue.Queue` and
:class:`~fdbqueue.PriorityQueue` (``subspace``, ``codec``, ``size``, ``empty``, ``peek_many``
and ``clear``, which act on the whole subspace whatever the item layout). What a lease holder
does is :mod:`fdbqueue.leased_queue`. The queue types compose the rest: an
:class:`~fdbqueue.ends.End` per end for takes, claims and consumer sessions,
:class:`~fdbqueue.leases.Leases` and :class:`~fdbqueue.delays.DelayedItems`.

Source followed: FoundationDB's "Queues" recipe; ``fdb/subspace_impl.py`` for the layer's
conventions (``tr`` first, ``@transactional``).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from fdb.subspace_impl import Subspace

from fdbqueue import taking
from fdbqueue.codecs import Codec
from fdbqueue.consumers import check_abandon_after
from fdbqueue.leases import Leases, check_max_deliveries
from fdbqueue.receipts import exactly_once
from fdbqueue.store import ItemStore, check_count, check_flag
from fdbqueue.transactional import (
    TransactionContext,
    transactional,
)

__all__ = ["StoredQueue", "check_queue_arguments"]

#: The type of a queue's values: what its codec decodes (``Queue[str]`` for a ``Codec[str]``).
T = TypeVar("T")


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


class StoredQueue(Generic[T]):
    """What every queue type shares: its store, and ``subspace``, ``codec``, ``size``,
    ``empty``, ``peek_many``, ``requests_in_line`` and ``clear``, which act on the whole
    subspace whatever the item layout."""

    _store: ItemStore
    _leases: Leases
    _high_contention: bool

    @property
    def high_contention(self) -> bool:
        """Whether takes and claims given a Database take in line (:mod:`fdbqueue.consumers`)."""
        return self._high_contention

    @property
    def subspace(self) -> Subspace:
        """The Subspace whose ``range()`` holds the items."""
        return self._store.subspace

    @property
    def codec(self) -> Codec[T]:
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
    def peek_many(self, tr: TransactionContext, n: int) -> list[T]:
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
