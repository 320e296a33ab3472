"""A FIFO queue stored in FoundationDB, following FoundationDB's "Queues" recipe.

Each item is one key-value pair ``subspace[(index, random)] = value``: ``index`` orders the
items, and ``random`` (20 random bytes) keeps keys of concurrently enqueued items distinct.
An enqueue finds the last index with a snapshot range read (``limit=1, reverse=True``), so it
adds no read conflict range and concurrent enqueues never conflict with each other or with
dequeues. A dequeue reads the first item with a ``limit=1`` range read and clears it.

Ordering guarantee
    Items come out in key order. If the transaction that enqueued item A committed before the
    transaction that enqueues item B got its read version, then A comes out before B. Items
    whose enqueue transactions overlap in time may be given the same index, and then come out
    in the order of their random elements, i.e. in either order: the queue is FIFO between
    enqueues that do not overlap, and unordered among those that do. Several enqueues in one
    transaction (or one ``enqueue_many``) keep their order. When a queue becomes empty, indexes
    start again at 1.

Source followed: FoundationDB's "Queues" recipe (documentation ``queues.rst`` and
``queues-java.rst``).
"""

from __future__ import annotations

from collections.abc import Iterable
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
from fdbqueue.store import ItemStore, check_count
from fdbqueue.stored_queue import StoredQueue, check_queue_arguments
from fdbqueue.taking import MOVED_ASIDE, Taken
from fdbqueue.transactional import (
    TransactionContext,
    is_database,
    require_writable,
    transactional,
)
from fdbqueue.waiting import check_blocking_arguments, take_blocking

__all__ = ["Queue"]


class Queue(StoredQueue, Leasing):
    """A shared FIFO queue in one FoundationDB subspace.

    Every operation takes ``tr``: a Database or Tenant (the operation runs in its own
    transaction, committed and retried on retryable errors, as ``fdb.transactional`` does) or
    a Transaction (the operation runs inside it and commits nothing, so several operations
    and your own reads and writes form one atomic transaction). Both the ``fdb`` binding's
    objects and :mod:`fdbqueue.memory`'s are accepted; anything else raises TypeError.

    Args:
        subspace: a ``Subspace``, ``DirectorySubspace`` or tuple prefix (``("Q",)``) dedicated
            to this queue. Items live in ``subspace.range()``; the size counter lives just
            after it, at ``subspace.key() + b"\\xff"`` (see :mod:`fdbqueue.store`).
        codec: how values are stored: ``"tuple"`` (default, any value the tuple layer packs,
            as the Java recipe stores it), ``"raw"`` (bytes, stored unchanged, as the Python
            recipe stores it) or an object with ``encode``/``decode``
            (:mod:`fdbqueue.codecs`).
        high_contention: dequeues given a Database use the staging technique
            (:mod:`fdbqueue.staging`): many consumers then share the queue without
            throughput collapsing into conflicts. Given a Transaction, dequeues stay plain.
        batch_size: with ``high_contention``, the most requests one serving transaction
            fulfils (default 64).
        abandon_after: with ``high_contention``, seconds after which a result nobody
            collected (its consumer died) goes back to the front of the queue (default 10).
        max_deliveries: how many times :meth:`claim` delivers an item whose leases keep
            expiring before it becomes a dead letter (default 5; None: no limit).
        exactly_once: operations given a Database write a receipt with their effect, so
            that a retry after a commit with an unknown result (1021) neither applies them
            twice nor loses what they took (:mod:`fdbqueue.receipts`); default True. False
            gives the recipes' behaviour, one set and one range clear cheaper per operation.

    Raises:
        TypeError, ValueError: an argument is of the wrong type or out of range (see
            :func:`fdbqueue.stored_queue.check_queue_arguments`); nothing is read or written.

    Recipe compatibility: with ``codec="raw"``, this queue and FoundationDB's Python recipe
    over the same subspace read each other's items in order; with ``codec="tuple"`` the same
    holds for the Java recipe (``MicroQueue``). Items the recipes write are not counted by
    :meth:`size`, which counts what fdbqueue enqueued minus what it dequeued (never below 0).
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
        self._store = ItemStore(subspace, codec, exactly_once, leading_integers=1)
        self._results = ServedResults(self._store)
        self._leases = Leases(self._store, max_deliveries)
        self._staging = (
            Staging(
                self._store,
                self._results,
                "front",
                self._take_items,
                batch_size=batch_size,
                abandon_after=abandon_after,
            )
            if high_contention
            else None
        )

    @property
    def high_contention(self) -> bool:
        """Whether dequeues given a Database use staging (:mod:`fdbqueue.staging`)."""
        return self._staging is not None

    # -- writing ----------------------------------------------------------------------------

    def enqueue(self, tr: TransactionContext, value: Any) -> None:
        """Add ``value`` at the back of the queue.

        Args:
            tr: a Database, Tenant or Transaction.
            value: any value the queue's codec encodes, except None.

        Raises:
            ValueError: ``value`` is None, or encodes to more than 100,000 bytes.
            TypeError: the codec cannot encode ``value``, or ``tr`` is of the wrong type.

        Nothing is written when an error is raised. Cost: one snapshot range read (no read
        conflict range), one set and one atomic add; it never conflicts with other enqueues or
        dequeues.
        """
        self._append(tr, [self._store.encode(value)])

    def enqueue_many(self, tr: TransactionContext, values: Iterable[Any]) -> None:
        """Add every value of ``values`` at the back of the queue, in order, atomically.

        Every value is encoded and checked before anything is written, so a bad value leaves
        the queue unchanged. Cost: one snapshot range read for the whole batch, then one set
        per value and one atomic add; no conflicts, as for :meth:`enqueue`.

        Raises:
            ValueError: a value is None or too large, or the batch exceeds FoundationDB's
                10,000,000-byte transaction limit.
            TypeError: ``values`` is not an iterable of values, a value cannot be encoded, or
                ``tr`` is of the wrong type.
        """
        encoded = self._store.encode_many(values)
        self._store.check_batch_fits(encoded)
        if encoded:
            self._append(tr, encoded)

    @exactly_once
    def _append(self, tr: TransactionContext, encoded: list[bytes]) -> None:
        require_writable(tr, "enqueue")
        index = self._last_index(tr)
        for value in encoded:
            index += 1
            self._store.write(tr, self._store.item_key((index,)), value)

    def _last_index(self, tr: TransactionContext) -> int:
        """The index of the last item, 0 for an empty queue (snapshot read: no conflict)."""
        last = self._store.read(tr, limit=1, reverse=True, snapshot=True)
        if not last:
            return 0
        index: int = self._store.unpack_position(last[0].key)[0]
        return index

    # -- taking -----------------------------------------------------------------------------

    def dequeue(
        self, tr: TransactionContext, *, block: bool = False, timeout: float | None = None
    ) -> Any:
        """Remove the item at the front of the queue and return its value.

        Args:
            tr: a Database, Tenant or Transaction.
            block: wait until an item is available (needs a Database). The wait is on a watch
                of the queue's signal key, which every enqueue bumps with an atomic add: no
                polling (see :mod:`fdbqueue.waiting`).
            timeout: with ``block=True``, the most seconds to wait; None (or ``math.inf``)
                waits without limit.

        Returns:
            The oldest item's value, or None when the queue is empty (or, blocking, when the
            timeout ran out).

        Raises:
            TypeError: ``tr`` is of the wrong type or a read-only snapshot view, ``block`` is
                not a bool, or ``block=True`` with a Transaction.
            ValueError: a NaN or negative ``timeout``, or a ``timeout`` without
                ``block=True``; or the key at the front is not one of this queue's items (the
                message names it; nothing changes).

        An item whose value the codec cannot decode is moved to the dead letters (a warning
        is logged) and the next item is taken instead, in the same transaction. Items served
        to a high-contention consumer that died come back once ``abandon_after`` has passed
        (:mod:`fdbqueue.results`). Given a Database, it takes effect exactly once
        (:mod:`fdbqueue.receipts`).

        Cost (plain, or any Transaction): one range read (``limit=1``), one clear and one atomic
        add; about once per second, or when the queue looks empty, one snapshot range read of
        served results. Its read conflict range runs from the start of the queue to just past
        the item taken, so two concurrent dequeues conflict (one commits, the other retries and
        takes the next item), while concurrent enqueues, which write after the last item, do
        not. With ``high_contention=True`` and a Database, see :mod:`fdbqueue.staging`.
        """
        seconds = check_blocking_arguments(tr, block, timeout)
        if block:
            return take_blocking(
                tr, self._take_one, self._store.signal_key, seconds, self._results.seconds_until_due
            )
        return self._take_one(tr)

    def _take_one(self, tr: TransactionContext, deadline: float | None = None) -> Any:
        if self._staging is not None and is_database(tr):
            return self._staging.take(tr, deadline)
        value = self._dequeue(tr)
        while value is MOVED_ASIDE:
            value = self._dequeue(tr)
        return value

    def _front(self, tr: TransactionContext, n: int) -> list[Any]:
        return self._store.read(tr, limit=n)

    def _take_items(self, tr: TransactionContext, n: int, budget: int | None) -> Taken:
        return taking.take(self._store, tr, self._front, n, budget)

    def _dequeue_items(self, tr: TransactionContext, n: int, budget: int | None) -> Taken:
        return taking.take(self._store, tr, self._front, n, budget, moving=False)

    @exactly_once(wrote=lambda value: value is not None)
    def _dequeue(self, tr: TransactionContext) -> Any:
        require_writable(tr, "dequeue")
        taken = self._results.take_with_give_back(tr, self._dequeue_items, 1)
        if not taken.items:
            return MOVED_ASIDE if taken.moved_aside else None
        self._store.add_to_size(tr, -1)
        return taken.items[0].value

    def dequeue_many(self, tr: TransactionContext, n: int) -> list[Any]:
        """Remove up to ``n`` items from the front of the queue and return their values.

        Args:
            n: the most items to take (an int >= 0).

        Returns:
            The values, oldest first; fewer than ``n`` (or none) when the queue holds fewer.

        Raises:
            TypeError: ``n`` is not an int, or ``tr`` is of the wrong type.
            ValueError: ``n`` is negative, or the key at the front is not one of this
                queue's items (nothing changes).

        Poison items are moved to the dead letters and skipped, as by :meth:`dequeue`.
        Cost: one range read (``limit=n``), ``n`` clears and one atomic add. The read
        conflict range covers the front of the queue up to just past the last item taken.
        """
        check_count(n)
        if n == 0:
            return []
        values = self._dequeue_many(tr, n)
        while values is MOVED_ASIDE:
            values = self._dequeue_many(tr, n)
        return values  # type: ignore[no-any-return]

    @exactly_once(wrote=bool)
    def _dequeue_many(self, tr: TransactionContext, n: int) -> Any:
        require_writable(tr, "dequeue_many")
        taken = self._results.take_with_give_back(tr, self._dequeue_items, n)
        if not taken.items:
            return MOVED_ASIDE if taken.moved_aside else []
        self._store.add_to_size(tr, -len(taken.items))
        return [item.value for item in taken.items]

    # -- leases -----------------------------------------------------------------------------

    def claim(
        self,
        tr: TransactionContext,
        lease: float,
        *,
        block: bool = False,
        timeout: float | None = None,
    ) -> Lease | None:
        """Claim the next item for processing under a lease of ``lease`` seconds.

        The item leaves the queue into a lease. Acknowledge it with :meth:`ack` once
        processed; if the lease expires first, the next claim delivers it again with its
        delivery count raised, and after ``max_deliveries`` expiries it becomes a dead letter
        (:mod:`fdbqueue.leases`). An expired or released item is claimed before the queue's
        front.

        Args:
            tr: a Database, Tenant or Transaction.
            lease: seconds until the lease expires (> 0, at most 12 hours), measured with read
                versions (about 1,000,000 per second, a clock all clients share).
            block: wait until an item can be claimed (needs a Database): long polling, like
                Amazon SQS's ``WaitTimeSeconds``. The wait is on a watch of the queue's signal
                key, which every enqueue and release bumps, and it also ends when the first
                lease in flight expires (its item is claimable again); no polling (see
                :mod:`fdbqueue.waiting`).
            timeout: with ``block=True``, the most seconds to wait; None (or ``math.inf``)
                waits without limit.

        Returns:
            A :class:`~fdbqueue.Lease` (value, id, deliveries, expiry_version), or None when
            the queue is empty and no lease has expired (blocking: when the timeout ran out).

        Raises:
            TypeError: ``lease`` is not a number, ``block`` is not a bool, ``timeout`` is not
                a number or None, ``block=True`` with a Transaction, or ``tr`` has the wrong
                type.
            ValueError: ``lease`` is out of range, ``timeout`` is NaN or negative, or a
                ``timeout`` without ``block=True``.

        Arguments are checked before anything is read or written. Given a Database, it takes
        effect exactly once even when a commit's result is unknown (:mod:`fdbqueue.receipts`).
        Cost: a read version, one range read of the expired leases, then the dequeue's range
        read and clear when none has, and two sets (lease record, held value); claims
        conflict with each other as plain dequeues do. One that finds nothing adds a snapshot
        range read of the first lease (when it expires). Blocking, when nothing is there: per
        further attempt one read-only transaction creating the watch plus the claim; while
        waiting, nothing.

        Source followed: FoundationDB's "Queues" recipe and developer guide ("Watches"); the
        long polling of Amazon SQS ``ReceiveMessage`` (``WaitTimeSeconds``).
        """
        seconds = check_lease_seconds(lease)
        wait = check_blocking_arguments(tr, block, timeout)
        return self._claim(tr, seconds, block, wait, self._claim_batch)

    def claim_many(self, tr: TransactionContext, n: int, lease: float) -> list[Lease]:
        """Claim up to ``n`` items in one transaction, each under its own lease of ``lease``
        seconds.

        The items are those ``n`` calls of :meth:`claim` would take, in that order: expired
        or released leases' items first (soonest expiry first), then the front of the queue;
        poison items and items out of deliveries go to the dead letters on the way, as for
        :meth:`claim`. It never waits.

        Args:
            tr: a Database, Tenant or Transaction.
            n: the most items to claim (an int >= 0).
            lease: seconds until each lease expires, as for :meth:`claim`.

        Returns:
            A list of :class:`~fdbqueue.Lease`, in claim order; fewer than ``n`` (possibly
            none) when fewer are claimable, or when the transaction's writes reached
            :data:`~fdbqueue.transaction_bytes.LIBRARY_TRANSACTION_BUDGET` (about 5,000,000
            bytes, values included; claim again for the rest).

        Raises:
            TypeError: ``n`` is not an int, ``lease`` is not a number, or ``tr`` has the
                wrong type.
            ValueError: ``n`` is negative or ``lease`` out of range; or the key at the front
                is not one of this queue's items. Nothing changes then.

        Given a Database, it takes effect exactly once (:mod:`fdbqueue.receipts`): a commit
        with an unknown result neither loses the items nor leases them twice. Cost: one
        transaction: a read version, one range read of the expired leases with a point read
        of each held value (issued together), a clear and a set per redelivered lease; for
        the rest, the queue's range read (``limit`` the number missing), a clear and two sets
        per item, and one atomic add. Its read conflict ranges, like ``n`` claims': the
        expired leases read and the queue's front up to the last item taken.
        """
        check_count(n)
        seconds = check_lease_seconds(lease)
        if n == 0:
            return []
        return self._claim_batches(tr, seconds, n, self._claim_batch)

    @exactly_once(wrote=claimed_something)
    def _claim_batch(self, tr: TransactionContext, seconds: float, n: int) -> Any:
        return self._leases.claim_many(tr, self._claimable_items, seconds, n)

    def _claimable_items(self, tr: TransactionContext, n: int, budget: int | None) -> Taken:
        return self._results.take_with_give_back(tr, self._take_items, n, budget)

    def _requeue(self, tr: TransactionContext, item_key: bytes, encoded: bytes) -> None:
        self._append(tr, [encoded])

    # -- looking ----------------------------------------------------------------------------

    @transactional
    def peek(self, tr: TransactionContext) -> Any:
        """Return the value at the front of the queue without removing it, or None if empty.

        Poison items (values the codec cannot decode) are skipped, as :meth:`dequeue` would
        move them aside. Raises ValueError when the key at the front is not one of this
        queue's items.

        Cost: one range read (``limit=1``), more only past poison items; its read conflict
        range covers the front of the queue up to just past the first item (the whole queue
        range when empty).
        """
        values = taking.peek(self._store, taking.forward(self._store, tr, 1, snapshot=False), 1)
        return values[0] if values else None
