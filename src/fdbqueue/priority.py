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
import itertools
from typing import TYPE_CHECKING, Any, Literal, overload

from fdbqueue._checks import check_count, check_flag
from fdbqueue._consuming.ends import End
from fdbqueue._consuming.sessions import DEFAULT_ABANDON_AFTER, Consumer
from fdbqueue._delivery.claims import Leases
from fdbqueue._delivery.delays import DelayedItems
from fdbqueue._delivery.leases import DEFAULT_MAX_DELIVERIES, Lease, check_lease_seconds
from fdbqueue._queues.group_weights import GroupWeights
from fdbqueue._queues.leased_queue import LeasedQueue
from fdbqueue._queues.pushing import Pushing, push_at_back, where_of
from fdbqueue._queues.sharded_end import ShardedEnd
from fdbqueue._queues.shards import Parts, check_shards
from fdbqueue._queues.stored_queue import QueueOptions, T, check_queue_arguments
from fdbqueue._storage import taking
from fdbqueue._storage.priority_ends import max_end_candidates, max_end_items, min_end_items
from fdbqueue._storage.store import ItemStore
from fdbqueue._transactions.transactional import TransactionContext, transactional
from fdbqueue._transactions.waiting import check_blocking_arguments
from fdbqueue.codecs import Codec

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["PriorityQueue"]


class PriorityQueue(Pushing[T], GroupWeights, LeasedQueue[T]):
    """A shared priority queue in one FoundationDB subspace, with both ends usable.

    ``tr`` works as for :class:`~fdbqueue.Queue`: a Database or Tenant (own transaction,
    committed and retried) or a Transaction (runs inside it, commits nothing).

    Args:
        subspace: a ``Subspace``, ``DirectorySubspace`` or tuple prefix (``("P",)``) dedicated
            to this queue. Items live in ``subspace.range()``; the size counter at
            ``subspace.key() + b"\\xff"`` (see :doc:`concepts`).
        codec: ``"tuple"`` (default; the Java recipe's value layout), ``"raw"`` or a codec
            object (:mod:`fdbqueue.codecs`).
        high_contention: pops and claims given a Database take in line
            (:doc:`high-contention`), one line of requests per end.
        abandon_after: with ``high_contention``, seconds after which the request of a
            consumer that died stops holding the line (default 5).
        max_deliveries: how many times :meth:`claim` delivers an item whose leases keep
            expiring before it becomes a dead letter (default 5; None: no limit).
        exactly_once: operations given a Database write a receipt with their effect, so
            that a retry after a commit with an unknown result (1021) neither applies them
            twice nor loses what they took (:doc:`guarantees`); default True. False gives
            the recipes' behaviour, one set and one range clear cheaper per operation.
        shards: how many key ranges the queue spreads over (1 to 256; default 1, the recipe's
            layout). Pops take from the shard whose first item has the best priority at their
            read version. Recorded at the first write: another count raises QueueTypeError.

    Raises:
        TypeError, ValueError: an argument is of the wrong type or out of its range (as
            given above); nothing is read or written.

    Recipe compatibility: with ``codec="tuple"``, items pushed by FoundationDB's Java recipe
    (``MicroPriority``) into the same subspace are popped by this queue in priority order and
    the other way round (its ``pop(max=true)`` takes the newest item of the top priority,
    this queue the oldest). Their items are not counted by :meth:`size`.
    """

    _ends: dict[bool, End] | dict[bool, ShardedEnd]  # by max_end: min (False), max (True)

    @overload
    def __init__(
        self: PriorityQueue[bytes],
        subspace: Any,
        *,
        codec: Literal["raw"],
        **options: Unpack[QueueOptions],
    ) -> None: ...

    @overload
    def __init__(
        self: PriorityQueue[T], subspace: Any, *, codec: Codec[T], **options: Unpack[QueueOptions]
    ) -> None: ...

    @overload
    def __init__(
        self: PriorityQueue[Any],
        subspace: Any,
        *,
        codec: str = "tuple",
        **options: Unpack[QueueOptions],
    ) -> None: ...

    def __init__(
        self,
        subspace: Any,
        *,
        codec: str | Codec[Any] = "tuple",
        high_contention: bool = False,
        abandon_after: float = DEFAULT_ABANDON_AFTER,
        max_deliveries: int | None = DEFAULT_MAX_DELIVERIES,
        exactly_once: bool = True,
        shards: int = 1,
    ) -> None:
        seconds = check_queue_arguments(high_contention, abandon_after, max_deliveries)
        count = check_shards(shards)
        self._high_contention = high_contention
        self._store = ItemStore(subspace, codec, exactly_once, 2, shards=count)
        compose = functools.partial(_compose, max_deliveries=max_deliveries, abandon_after=seconds)
        self._parts = Parts(self, count, compose)
        if self._parts.sharded:
            self._ends = _sharded_ends(self)

    # -- taking and looking -----------------------------------------------------------------

    def pop(
        self,
        tr: TransactionContext,
        max: bool = False,
        *,
        block: bool = False,
        timeout: float | None = None,
    ) -> T | None:
        """Remove and return the oldest item of the lowest (or, with ``max=True``, highest)
        priority, or None when the queue is empty.

        Args:
            tr: a Database, Tenant or Transaction.
            max: take from the highest priority instead of the lowest.
            block: wait until an item is available (needs a Database; a watch, no polling,
                see :doc:`high-contention`).
            timeout: with ``block=True``, the most seconds to wait; None (or ``math.inf``)
                waits without limit.

        Raises:
            TypeError: ``tr`` is of the wrong type or a snapshot view, ``max`` or ``block``
                is not a bool, or ``block=True`` with a Transaction.
            ValueError: a NaN or negative ``timeout``, a ``timeout`` without ``block=True``,
                or a key at that end that is not one of this queue's items (nothing changes).

        Poison items are moved to the dead letters and skipped, as for
        :meth:`fdbqueue.Queue.dequeue`. Cost: :meth:`pop_min` or :meth:`pop_max`; with
        ``high_contention=True`` and a Database, as :meth:`fdbqueue.Queue.dequeue` in
        line (each end has its own line of requests).
        """
        check_flag(max, "max")
        taken: T | None = self._ends[max].take(
            tr, block, check_blocking_arguments(tr, block, timeout)
        )
        return taken

    def pop_min(
        self, tr: TransactionContext, *, block: bool = False, timeout: float | None = None
    ) -> T | None:
        """Remove and return the oldest item of the lowest priority, or None when empty.

        ``block`` and ``timeout`` as for :meth:`pop`. Cost: one range read (``limit=1``), one
        clear, one atomic add. Its read conflict range covers the queue from its start to just
        past the item taken: concurrent pops conflict (one retries), pushes of higher
        priorities or newer items do not.
        """
        return self.pop(tr, max=False, block=block, timeout=timeout)

    def pop_max(
        self, tr: TransactionContext, *, block: bool = False, timeout: float | None = None
    ) -> T | None:
        """Remove and return the oldest item of the highest priority, or None when empty.

        ``block`` and ``timeout`` as for :meth:`pop`. Cost: two range reads (a snapshot
        reverse read, then a forward read within the top priority), one clear, one atomic
        add; read conflict ranges as :doc:`concepts` describes: a concurrent
        push of a higher priority makes it retry.
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
    ) -> Lease[T] | None:
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
        return self._ends[max].claim(tr, seconds, block, wait)

    def claim_many(
        self, tr: TransactionContext, n: int, lease: float, max: bool = False
    ) -> list[Lease[T]]:
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
        return self._ends[max].claim_many(tr, n, seconds) if n else []

    def consumer(
        self,
        database: Any,
        *,
        max: bool = False,
        prefetch: int = 0,
        abandon_after: float = DEFAULT_ABANDON_AFTER,
    ) -> Consumer:
        """Open a consumer session at one end (the lowest priority; the highest with
        ``max=True``): it pops and claims in that end's line, without conflicts, in request
        order. Arguments and errors as for :meth:`fdbqueue.Queue.consumer`, plus TypeError
        when ``max`` is not a bool."""
        check_flag(max, "max")
        return self._ends[max].consumer(database, prefetch, abandon_after)

    def _requeue(self, tr: TransactionContext, item_key: bytes, encoded: bytes) -> None:
        push_at_back(self._store, tr, encoded, where_of(self._store, item_key))

    @transactional
    def peek(self, tr: TransactionContext, max: bool = False) -> T | None:
        """Return the value :meth:`pop` would take, without removing it, or None when empty.

        Poison items are skipped, as :meth:`pop` would move them aside. Raises TypeError
        when ``max`` is not a bool, ValueError when a key at that end is not one of this
        queue's items. Cost: as :meth:`pop` without the writes.
        """
        check_flag(max, "max")
        end = self._ends[max]
        if isinstance(end, ShardedEnd):  # the shard whose first item has the best priority
            shard = end.best_shard(tr)
            return None if shard is None else self._parts[shard].peek(tr, max)
        ungrouped = (
            max_end_candidates(self._store, tr, snapshot=False)
            if max
            else taking.forward(self._store, tr, 1, False)
        )
        front = list(itertools.islice(ungrouped, 1))  # and a group's turn, when better
        turns = self._store.groups.front(tr, 1, False, lambda: front, max)
        candidates = itertools.chain(turns, front, ungrouped)
        first: T | None = taking.peek_first(self._store, tr, candidates)
        return first

    def peek_min(self, tr: TransactionContext) -> T | None:
        """Return the oldest value of the lowest priority, or None when empty (one range read)."""
        return self.peek(tr, max=False)

    def peek_max(self, tr: TransactionContext) -> T | None:
        """Return the oldest value of the highest priority, or None when empty (two range reads)."""
        return self.peek(tr, max=True)


def _compose(
    queue: PriorityQueue[Any], store: ItemStore, *, max_deliveries: int | None, abandon_after: float
) -> None:
    """Give ``queue`` what takes from ``store``: its leases, delayed items and two ends."""
    queue._store = store
    queue._leases = Leases(store, max_deliveries)
    queue._delays = DelayedItems(store, functools.partial(push_at_back, store))
    queue._ends = {
        max_end: End(
            store,
            queue._leases,
            queue._delays,
            functools.partial(_read_end, store, max_end),
            name="max" if max_end else "min",
            high_contention=queue._high_contention,
            abandon_after=abandon_after,
            action="pop",
        )
        for max_end in (False, True)
    }


def _sharded_ends(queue: PriorityQueue[Any]) -> dict[bool, ShardedEnd]:
    """A sharded queue's two ends, each over the same end of every shard: pops go to the
    shard whose first item has the best priority."""
    return {
        max_end: ShardedEnd(
            [part._ends[max_end] for part in queue._parts],
            queue._store.metric_name,
            best="max" if max_end else "min",
        )
        for max_end in (False, True)
    }


def _read_end(
    store: ItemStore, highest: bool, tr: TransactionContext, n: int, snapshot: bool
) -> list[Any]:
    """The first ``n`` items at one end (the max end with ``highest``), the groups' turns
    among them (a :data:`~fdbqueue._consuming.ends.ReadEnd`)."""
    read = max_end_items if highest else min_end_items
    return store.groups.front(tr, n, snapshot, lambda: read(store, tr, n, snapshot), highest)
