"""A priority queue stored in FoundationDB, following FoundationDB's "Priority Queues" recipe.

Each item is one key-value pair ``subspace[(priority, count, random)] = value``. Keys sort by
priority, then by ``count`` (1 + the last count used for that priority, 0 for a new one, found
with a snapshot reverse range read so that pushes never conflict), then by 20 random bytes
that keep concurrent pushes distinct. The lowest-priority items are at the start of the
subspace and the highest at its end.

Ordering guarantee
    ``pop_min`` takes the oldest item of the lowest priority, ``pop_max`` the oldest item of
    the highest priority: FIFO within a priority at both ends. (FoundationDB's Java recipe
    returns the newest item from the max end; this library does not copy that.) "Oldest"
    has the meaning :mod:`fdbqueue.queue` gives it: if the push of A committed before the
    push of B (same priority) got its read version, A comes out first; pushes that overlap in
    time may share a count and come out in either order.

Source followed: FoundationDB's "Priority Queues" recipe (documentation
``priority-queues-java.rst``, class ``MicroPriority``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from fdbqueue import taking
from fdbqueue.codecs import Codec
from fdbqueue.leases import (
    DEFAULT_MAX_DELIVERIES,
    Lease,
    Leases,
    Leasing,
    check_lease_seconds,
    claimed_something,
)
from fdbqueue.receipts import exactly_once
from fdbqueue.results import ServedResults
from fdbqueue.staging import (
    DEFAULT_ABANDON_AFTER,
    DEFAULT_BATCH_SIZE,
    Staging,
)
from fdbqueue.store import ItemStore, check_count, check_flag
from fdbqueue.stored_queue import StoredQueue, check_queue_arguments
from fdbqueue.taking import MOVED_ASIDE, Taken
from fdbqueue.transactional import (
    TransactionContext,
    is_database,
    require_writable,
    transactional,
)
from fdbqueue.waiting import check_blocking_arguments, take_blocking

__all__ = ["PriorityQueue"]


def _check_priority(priority: Any) -> None:
    if type(priority) is bool or not isinstance(priority, int):
        raise TypeError(f"priority must be an int, not {type(priority).__name__}")


class PriorityQueue(StoredQueue, Leasing):
    """A shared priority queue in one FoundationDB subspace, with both ends usable.

    ``tr`` works as for :class:`~fdbqueue.Queue`: a Database or Tenant (own transaction,
    committed and retried) or a Transaction (runs inside it, commits nothing).

    Args:
        subspace: a ``Subspace``, ``DirectorySubspace`` or tuple prefix (``("P",)``) dedicated
            to this queue. Items live in ``subspace.range()``; the size counter at
            ``subspace.key() + b"\\xff"`` (see :mod:`fdbqueue.store`).
        codec: ``"tuple"`` (default; the Java recipe's value layout), ``"raw"`` or a codec
            object (:mod:`fdbqueue.codecs`).
        high_contention: pops given a Database use the staging technique
            (:mod:`fdbqueue.staging`), with one line of requests per end.
        batch_size: with ``high_contention``, the most requests one serving transaction
            fulfils (default 64).
        abandon_after: with ``high_contention``, seconds after which an uncollected result
            goes back to the queue (default 10).
        max_deliveries: how many times :meth:`claim` delivers an item whose leases keep
            expiring before it becomes a dead letter (default 5; None: no limit).
        exactly_once: operations given a Database write a receipt with their effect, so
            that a retry after a commit with an unknown result (1021) neither applies them
            twice nor loses what they took (:mod:`fdbqueue.receipts`); default True. False
            gives the recipes' behaviour, one set and one range clear cheaper per operation.

    Raises:
        TypeError, ValueError: an argument is of the wrong type or out of range (see
            :func:`fdbqueue.stored_queue.check_queue_arguments`); nothing is read or written.

    Recipe compatibility: with ``codec="tuple"``, items pushed by FoundationDB's Java recipe
    (``MicroPriority``) into the same subspace are popped by this queue in priority order and
    the other way round (its ``pop(max=true)`` takes the newest item of the top priority,
    this queue the oldest). Their items are not counted by :meth:`size`.
    """

    def __init__(
        self,
        subspace: Any,
        *,
        codec: str | Codec = "tuple",
        high_contention: bool = False,
        batch_size: int = DEFAULT_BATCH_SIZE,
        abandon_after: float = DEFAULT_ABANDON_AFTER,
        max_deliveries: int | None = DEFAULT_MAX_DELIVERIES,
        exactly_once: bool = True,
    ) -> None:
        check_queue_arguments(high_contention, batch_size, abandon_after, max_deliveries)
        self._store = ItemStore(subspace, codec, exactly_once, leading_integers=2)
        self._results = ServedResults(self._store)
        self._leases = Leases(self._store, max_deliveries)
        self._staging: dict[bool, Staging] = {}
        if high_contention:
            for max_end, end in ((False, "min"), (True, "max")):
                self._staging[max_end] = Staging(
                    self._store,
                    self._results,
                    end,
                    functools.partial(self._take_items, max=max_end),
                    batch_size=batch_size,
                    abandon_after=abandon_after,
                )

    @property
    def high_contention(self) -> bool:
        """Whether pops given a Database use staging (:mod:`fdbqueue.staging`)."""
        return bool(self._staging)

    # -- writing ----------------------------------------------------------------------------

    def push(self, tr: TransactionContext, value: Any, priority: int) -> None:
        """Add ``value`` with ``priority``.

        Args:
            tr: a Database, Tenant or Transaction.
            value: any value the codec encodes, except None.
            priority: an int of any size the tuple layer packs (negative allowed). Lower
                priorities come out of :meth:`pop_min` first, higher ones out of
                :meth:`pop_max`.

        Raises:
            TypeError: ``priority`` is not an int (bools are refused too), the codec cannot
                encode ``value``, or ``tr`` is of the wrong type.
            ValueError: ``value`` is None or encodes to more than 100,000 bytes, or the
                priority is beyond the tuple layer's integer range.

        Nothing is written when an error is raised. Cost: one snapshot range read inside the
        priority (no read conflict range), one set, one atomic add; it never conflicts with
        other pushes or pops.
        """
        _check_priority(priority)
        encoded = self._store.encode(value)
        self._store.item_key((priority, 0))  # checks the priority packs and the key fits
        self._push(tr, encoded, priority)

    @exactly_once
    def _push(self, tr: TransactionContext, encoded: bytes, priority: int) -> None:
        require_writable(tr, "push")
        self._store.write(
            tr, self._store.item_key((priority, self._next_count(tr, priority))), encoded
        )

    def _next_count(self, tr: TransactionContext, priority: int) -> int:
        """1 + the last count used for ``priority``, or 0 (snapshot read: no conflict)."""
        within = self.subspace.range((priority,))
        last = self._store.read(tr, within.start, within.stop, reverse=True, snapshot=True)
        if not last:
            return 0
        count: int = self._store.unpack_position(last[0].key)[1]
        return count + 1

    # -- taking and looking -----------------------------------------------------------------

    def _first(self, tr: TransactionContext, max: bool) -> list[Any]:
        """The oldest item at the chosen end, as a list of at most one KeyValue.

        The min end is one range read. The max end is two: a snapshot reverse read finds the
        highest priority, then a forward read within that priority finds its oldest item.
        Their read conflict ranges cover everything above that priority (explicitly added) and
        the priority's items up to the one found, so a concurrent push of a higher priority,
        or a concurrent pop of the same item, makes this transaction retry, while pushes of
        newer items of the same or lower priorities do not.
        """
        if not max:
            return self._store.read(tr, limit=1)
        top = self._store.read(tr, limit=1, reverse=True, snapshot=True)
        if not top:
            self._store.add_read_conflict_range(tr, self._store.begin, self._store.end)
            return []
        priority = self._store.unpack_position(top[0].key)[0]
        within = self.subspace.range((priority,))
        self._store.add_read_conflict_range(tr, within.stop, self._store.end)
        return self._store.read(tr, within.start, within.stop, limit=1)

    def pop(
        self,
        tr: TransactionContext,
        max: bool = False,
        *,
        block: bool = False,
        timeout: float | None = None,
    ) -> Any:
        """Remove and return the oldest item of the lowest (or, with ``max=True``, highest)
        priority, or None when the queue is empty.

        Args:
            tr: a Database, Tenant or Transaction.
            max: take from the highest priority instead of the lowest.
            block: wait until an item is available (needs a Database; a watch, no polling,
                see :mod:`fdbqueue.waiting`).
            timeout: with ``block=True``, the most seconds to wait; None (or ``math.inf``)
                waits without limit.

        Raises:
            TypeError: ``tr`` is of the wrong type or a snapshot view, ``max`` or ``block``
                is not a bool, or ``block=True`` with a Transaction.
            ValueError: a NaN or negative ``timeout``, a ``timeout`` without ``block=True``,
                or a key at that end that is not one of this queue's items (nothing changes).

        Poison items are moved to the dead letters and skipped, and served items whose
        consumers died come back, as for :meth:`fdbqueue.Queue.dequeue`. Cost:
        :meth:`pop_min` or :meth:`pop_max`; with ``high_contention=True`` and a Database, see
        :mod:`fdbqueue.staging` (each end has its own line of requests).
        """
        check_flag(max, "max")
        seconds = check_blocking_arguments(tr, block, timeout)
        take = functools.partial(self._take_one, max=max)
        if block:
            return take_blocking(
                tr, take, self._store.signal_key, seconds, self._results.seconds_until_due
            )
        return take(tr)

    def _take_one(self, tr: TransactionContext, deadline: float | None = None, *, max: bool) -> Any:
        staging = self._staging.get(max)
        if staging is not None and is_database(tr):
            return staging.take(tr, deadline)
        value = self._pop(tr, max)
        while value is MOVED_ASIDE:
            value = self._pop(tr, max)
        return value

    @exactly_once(wrote=lambda value: value is not None)
    def _pop(self, tr: TransactionContext, max: bool) -> Any:
        require_writable(tr, "pop")
        take_items = functools.partial(self._take_items, max=max, moving=False)
        taken = self._results.take_with_give_back(tr, take_items, 1)
        if not taken.items:
            return MOVED_ASIDE if taken.moved_aside else None
        self._store.add_to_size(tr, -1)
        return taken.items[0].value

    def _front(self, tr: TransactionContext, n: int, max: bool) -> list[Any]:
        """Up to ``n`` items at one end, in take order (the max end reads one at a time)."""
        return self._first(tr, True) if max else self._store.read(tr, limit=n)

    def _take_items(
        self,
        tr: TransactionContext,
        n: int,
        budget: int | None,
        max: bool,
        moving: bool = True,
    ) -> Taken:
        """Clear and return up to ``n`` items from one end, oldest first within a priority
        (see :func:`fdbqueue.taking.take` for ``budget`` and ``moving``)."""
        front = functools.partial(self._front, max=max)
        return taking.take(self._store, tr, front, n, budget, moving=moving)

    def pop_min(
        self, tr: TransactionContext, *, block: bool = False, timeout: float | None = None
    ) -> Any:
        """Remove and return the oldest item of the lowest priority, or None when empty.

        ``block`` and ``timeout`` as for :meth:`pop`. Cost: one range read (``limit=1``), one
        clear, one atomic add. Its read conflict range covers the queue from its start to just
        past the item taken: concurrent pops conflict (one retries), pushes of higher
        priorities or newer items do not.
        """
        return self.pop(tr, max=False, block=block, timeout=timeout)

    def pop_max(
        self, tr: TransactionContext, *, block: bool = False, timeout: float | None = None
    ) -> Any:
        """Remove and return the oldest item of the highest priority, or None when empty.

        ``block`` and ``timeout`` as for :meth:`pop`. Cost: two range reads (a snapshot
        reverse read, then a forward read within the top priority), one clear, one atomic
        add; read conflict ranges as described in the module docstring: a concurrent push of
        a higher priority makes it retry.
        """
        return self.pop(tr, max=True, block=block, timeout=timeout)

    def claim(
        self,
        tr: TransactionContext,
        lease: float,
        max: bool = False,
        *,
        block: bool = False,
        timeout: float | None = None,
    ) -> Lease | None:
        """Claim the oldest item of the lowest (or, with ``max=True``, highest) priority under
        a lease of ``lease`` seconds; an expired or released item comes first.

        ``block=True`` waits (needs a Database) on a watch of the signal key, which every
        push and release bumps, until an item can be claimed or ``timeout`` seconds pass
        (None or ``math.inf``: no limit), and also wakes when the first lease in flight
        expires; no polling. Everything else is as for :meth:`fdbqueue.Queue.claim`:
        returns a :class:`~fdbqueue.Lease` or None (blocking: None when the timeout ran
        out), raises TypeError / ValueError for a bad ``lease``, ``max``, ``block`` or
        ``timeout`` (or ``block=True`` with a Transaction) before anything is read or
        written, takes effect exactly once given a Database. Cost: a read version, one
        range read of the expired leases, then the pop's reads and clear when none has
        expired, and two sets; one that finds nothing adds a snapshot range read of the
        first lease; blocking, per further attempt a read-only transaction creating the
        watch.
        """
        check_flag(max, "max")
        seconds = check_lease_seconds(lease)
        wait = check_blocking_arguments(tr, block, timeout)
        return self._claim(tr, seconds, block, wait, functools.partial(self._claim_batch, max=max))

    def claim_many(
        self, tr: TransactionContext, n: int, lease: float, max: bool = False
    ) -> list[Lease]:
        """Claim up to ``n`` items in one transaction, each under its own lease of ``lease``
        seconds, in the order ``n`` calls of :meth:`claim` with this ``max`` would take
        them (expired or released leases first). Returns a list of
        :class:`~fdbqueue.Lease`, possibly empty; fewer than ``n`` when fewer are claimable
        or the transaction's writes reached the library's budget (about 5,000,000 bytes).

        Raises TypeError / ValueError for a bad ``n``, ``lease`` or ``max`` before anything
        is read or written; exactly once given a Database. Cost: as
        :meth:`fdbqueue.Queue.claim_many`; at the max end the pop reads the top priority
        one item at a time (two range reads per item).
        """
        check_flag(max, "max")
        check_count(n)
        seconds = check_lease_seconds(lease)
        if n == 0:
            return []
        return self._claim_batches(tr, seconds, n, functools.partial(self._claim_batch, max=max))

    @exactly_once(wrote=claimed_something)
    def _claim_batch(self, tr: TransactionContext, seconds: float, n: int, *, max: bool) -> Any:
        def claimable(tr: TransactionContext, n: int, budget: int | None) -> Taken:
            take_items = functools.partial(self._take_items, max=max)
            return self._results.take_with_give_back(tr, take_items, n, budget)

        return self._leases.claim_many(tr, claimable, seconds, n)

    def _requeue(self, tr: TransactionContext, item_key: bytes, encoded: bytes) -> None:
        self._push(tr, encoded, self._store.unpack_position(item_key)[0])

    @transactional
    def peek(self, tr: TransactionContext, max: bool = False) -> Any:
        """Return the value :meth:`pop` would take, without removing it, or None when empty.

        Poison items are skipped, as :meth:`pop` would move them aside. Raises TypeError
        when ``max`` is not a bool, ValueError when a key at that end is not one of this
        queue's items. Cost: as :meth:`pop` without the writes.
        """
        check_flag(max, "max")
        candidates = self._max_candidates(tr) if max else taking.forward(self._store, tr, 1, False)
        values = taking.peek(self._store, candidates, 1)
        return values[0] if values else None

    def _max_candidates(self, tr: TransactionContext) -> Iterator[Any]:
        """Items in ``pop_max`` order (highest priority first, oldest first within one),
        lazily, with the read conflict ranges :meth:`_first` adds for the items it yields."""
        upper = self._store.end
        while True:
            top = self._store.read(tr, self._store.begin, upper, reverse=True, snapshot=True)
            if not top:
                self._store.add_read_conflict_range(tr, self._store.begin, upper)
                return
            priority = self._store.unpack_position(top[0].key)[0]
            within = self.subspace.range((priority,))
            self._store.add_read_conflict_range(tr, within.stop, upper)
            begin = within.start
            while True:
                batch = self._store.read(tr, begin, within.stop, limit=16)
                yield from batch
                if len(batch) < 16:
                    break
                begin = batch[-1].key + b"\x00"
            upper = within.start

    def peek_min(self, tr: TransactionContext) -> Any:
        """Return the oldest value of the lowest priority, or None when empty (one range read)."""
        return self.peek(tr, max=False)

    def peek_max(self, tr: TransactionContext) -> Any:
        """Return the oldest value of the highest priority, or None when empty (two range reads)."""
        return self.peek(tr, max=True)
