"""What every queue type shares: :class:`StoredQueue`, the base of
:class:`~fdbqueue._queues.leased_queue.LeasedQueue` and so of :class:`~fdbqueue.Queue` and
:class:`~fdbqueue.PriorityQueue` (``subspace``, ``codec``, ``size``, ``empty``, ``peek_many``,
``leases``, ``info`` and ``clear``, which look at or act on the whole subspace whatever the
item layout). What a lease holder
does is :mod:`fdbqueue._queues.leased_queue`. The queue types compose the rest: an
:class:`~fdbqueue._consuming.ends.End` per end for takes, claims and consumer sessions,
:class:`~fdbqueue._delivery.claims.Leases` and :class:`~fdbqueue._delivery.delays.DelayedItems`.

Source followed: FoundationDB's "Queues" recipe; ``fdb/subspace_impl.py`` for the layer's
conventions (``tr`` first, ``@transactional``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypedDict, TypeVar

from fdb.subspace_impl import Subspace

from fdbqueue._checks import check_count, check_flag
from fdbqueue._consuming.sessions import check_abandon_after
from fdbqueue._delivery.claims import Leases
from fdbqueue._delivery.delays import DelayedItems
from fdbqueue._delivery.leases import Lease, check_max_deliveries
from fdbqueue._queues import sharded_views
from fdbqueue._queues.shards import Parts
from fdbqueue._storage import taking
from fdbqueue._storage.queue_info import QueueInfo
from fdbqueue._storage.store import ItemStore
from fdbqueue._transactions.receipts import exactly_once
from fdbqueue._transactions.transactional import (
    TransactionContext,
    is_database,
    is_transaction,
    transactional,
)
from fdbqueue.codecs import Codec, Undecodable

__all__ = ["PAGE_SIZE", "StoredQueue", "check_limit", "check_queue_arguments", "count_keys"]

#: Records one page of a listing reads (:func:`read_pages`): given a Database, each page is a
#: transaction of its own.
PAGE_SIZE = 1_000
#: Keys one range read of :func:`count_keys` returns.
COUNT_PAGE_SIZE = 10_000

T = TypeVar("T")


class QueueOptions(TypedDict, total=False):
    """The keyword arguments both queue types take beside ``subspace`` and ``codec`` (their
    constructors document them); for typing their overloads."""

    high_contention: bool
    abandon_after: float
    max_deliveries: int | None
    exactly_once: bool
    shards: int


class FifoOptions(QueueOptions, total=False):
    """The keyword arguments only :class:`~fdbqueue.Queue` takes besides them."""

    dedup_window: float


#: Reads one page: ``(tr, after, count)`` -> (up to ``count`` results, the last key read, or
#: None when nothing was read; whether more may follow). ``after`` None starts at the first.
ReadPage = Callable[[Any, "bytes | None", int], "tuple[list[T], bytes | None, bool]"]


def check_limit(limit: Any, name: str = "limit") -> int | None:
    """Return ``limit``: an int >= 0, or None for no limit.

    Raises:
        TypeError: not an int or None (bool included).
        ValueError: negative.
    """
    if limit is None:
        return None
    check_count(limit, name)
    return int(limit)


def read_pages(tr: Any, limit: int | None, read_page: ReadPage[T]) -> list[T]:
    """Up to ``limit`` results (None: all) of ``read_page``, page after page of at most
    :data:`PAGE_SIZE`, each page going on after the last key the one before read.

    ``read_page`` is :func:`~fdbqueue._transactions.transactional.transactional`: given a Database,
    each page is a transaction of its own (so pages are read at different read versions); given a
    Transaction, every page is read in it.
    """
    if not is_database(tr) and not is_transaction(tr):
        read_page(tr, None, 0)  # raises the TypeError that names what was expected
    found: list[T] = []
    after: bytes | None = None
    while limit is None or len(found) < limit:
        count = PAGE_SIZE if limit is None else min(PAGE_SIZE, limit - len(found))
        results, last, more = read_page(tr, after, count)
        found.extend(results)
        if not more or last is None:
            break
        after = last
    return found


def count_keys(reader: Any, begin: bytes, end: bytes) -> int:
    """How many keys ``[begin, end)`` holds, through ``reader`` (pass a snapshot view for no
    conflicts). Cost: one range read per :data:`COUNT_PAGE_SIZE` keys, all in ``reader``'s
    transaction; the binding returns each key's value too (no key-only read exists), so count
    only ranges of small records."""
    counted = 0
    while True:
        page = list(reader.get_range(begin, end, limit=COUNT_PAGE_SIZE))
        counted += len(page)
        if len(page) < COUNT_PAGE_SIZE:
            return counted
        begin = bytes(page[-1].key) + b"\x00"


def check_queue_arguments(high_contention: Any, abandon_after: Any, max_deliveries: Any) -> float:
    """Check the arguments :class:`~fdbqueue.Queue` and :class:`~fdbqueue.PriorityQueue` take
    beside the subspace and codec (those are checked by :func:`fdbqueue._storage.store.as_subspace`
    and :func:`fdbqueue.codecs.resolve_codec`), before anything is read or written.

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
    _delays: DelayedItems
    _high_contention: bool
    _parts: Parts[Any]  # the shards' queue objects; this queue itself when unsharded

    @property
    def high_contention(self) -> bool:
        """Whether takes and claims given a Database take in line
        (:doc:`high-contention`)."""
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
        if self._parts.sharded:
            return all(part.empty(tr) for part in self._parts)
        return not self._store.read(tr, limit=1)

    @property
    def shards(self) -> int:
        """The number of shards the queue was opened with (``shards=``; 1: unsharded)."""
        return len(self._parts)

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
        if self._parts.sharded:
            return sharded_views.size(self._parts, tr)
        return self._store.size(tr)

    def peek_many(self, tr: TransactionContext, n: int | None) -> list[T]:
        """Return up to ``n`` values from the front (None: every item), in key order, without
        removing them: a Queue's next ``n`` items, a PriorityQueue's next ``n`` of
        :meth:`pop_min`; then the items of message groups, group by group, each group's in
        its order (groups in key order, not in turn: :doc:`groups`).

        Poison items (values the codec cannot decode) are skipped, as a take would move them
        to the dead letters.

        Given a Database, it reads pages of at most :data:`PAGE_SIZE` items, each in a
        transaction of its own, each going on after the last key the one before read: with
        ``n`` up to :data:`PAGE_SIZE`, one transaction; with more (or None), the pages are read
        at different read versions, so items taken or added meanwhile may be missed or
        listed. Given a Transaction, every page is read in it (one read version; a large
        queue may then pass FoundationDB's five-second transaction limit).

        Raises:
            TypeError, ValueError: ``n`` is not an int >= 0 or None.
            ValueError: a key among them is not one of this queue's items.

        Cost: one snapshot range read per page (``limit`` the values still wanted, at most
        :data:`PAGE_SIZE`), more only past poison items; no conflicts.
        """
        limit = check_limit(n, "n")
        if self._parts.sharded:
            return sharded_views.concatenated(
                self._parts, limit, lambda part, left: part.peek_many(tr, left)
            )
        return read_pages(tr, limit, self._peek_page)

    @transactional
    def _peek_page(
        self, tr: TransactionContext, after: bytes | None, count: int
    ) -> tuple[list[Any], bytes | None, bool]:
        """One page of :meth:`peek_many` (a :data:`ReadPage`): the items without a group,
        then the groups' items (one range, after them)."""
        grouped = self._store.groups.items.range()
        batch: list[Any] = []
        for begin, end in ((self._store.begin, self._store.end), (grouped.start, grouped.stop)):
            if after is not None and after >= end:
                continue
            start = begin if after is None or after < begin else after + b"\x00"
            batch += self._store.read(tr, start, end, limit=count - len(batch), snapshot=True)
            if len(batch) == count:
                break
        values = taking.peek(self._store, tr, iter(batch), count)
        last = bytes(batch[-1].key) if batch else None
        return values, last, len(batch) == count

    @transactional
    def requests_in_line(self, tr: TransactionContext, limit: int = 10_000) -> int:
        """Return how many requests of consumer sessions wait in line, at every end of the
        queue (at most ``limit``): places reserved by prefetch and takes waiting for an item
        (:doc:`high-contention`).

        Raises:
            TypeError, ValueError: ``limit`` is not an int >= 0.

        Cost: one snapshot range read of up to ``limit`` keys; no conflicts.
        """
        check_count(limit, "limit")
        if self._parts.sharded:
            return sharded_views.summed(
                self._parts, limit, lambda part, left: part.requests_in_line(tr, left)
            )
        lines = self._store.metadata.range(("line",))
        reader: Any = getattr(tr, "snapshot", tr)  # a snapshot view has no .snapshot
        return len(list(reader.get_range(lines.start, lines.stop, limit=limit))) if limit else 0

    def leases(
        self, tr: TransactionContext, limit: int | None = 100
    ) -> list[Lease[T | Undecodable]]:
        """Return up to ``limit`` leases in flight (None: all of them), soonest expiry first
        (expired and released leases whose items wait for the next claim included). A value
        the codec cannot decode shows as an :class:`~fdbqueue.Undecodable`.

        The default, 100, is for a look: more leases may exist (:meth:`info` counts them).
        Given a Database, it reads pages of at most
        1,000 leases, each in a transaction of its own,
        each going on after the last lease key the one before read: with ``limit`` up to
        that, one transaction; with more (or None), pages are read at different read
        versions, so a lease extended, released or redelivered meanwhile (which moves its
        key) may be listed twice or missed. Given a Transaction, every page is read in it.

        Raises:
            TypeError, ValueError: ``limit`` is not an int >= 0 or None.

        Cost per page: one snapshot range read and a snapshot point read per lease (issued
        together); no conflicts.
        """
        if self._parts.sharded:
            return sharded_views.concatenated(
                self._parts, check_limit(limit), lambda part, left: part.leases(tr, left)
            )
        return read_pages(tr, check_limit(limit), self._leases_page)

    @transactional
    def _leases_page(
        self, tr: TransactionContext, after: bytes | None, count: int
    ) -> tuple[list[Lease[T | Undecodable]], bytes | None, bool]:
        found = self._leases.in_flight(tr, count, after) if count else []
        return found, found[-1].key if found else None, len(found) == count

    @transactional
    def info(self, tr: TransactionContext) -> QueueInfo:
        """Return figures about the queue (:class:`~fdbqueue.QueueInfo`): the size
        counter, the front value, requests in line, leases in flight and expired, dead
        letters, delayed items and message groups, all read at one read version.

        Given a Database, one transaction; given a Transaction, read in it. Every read is a
        snapshot read: no conflicts.

        Raises:
            ValueError: the front key is not one of this queue's items (the subspace holds
                something else).

        Cost: a read version, a point read (the size), a range read of the front item, and
        range reads that count every request in line, lease record, dead letter record,
        delayed record and group's turn (10,000 keys each; the
        binding returns the small records with their keys; held values are not read). The
        counts are exact and uncapped, so the cost grows with those records, and
        FoundationDB's five-second transaction limit bounds how many one call can count
        (then it raises error 1007, ``transaction_too_old``).
        """
        if self._parts.sharded:
            return sharded_views.info(self._parts, tr)
        context: Any = tr
        reader: Any = getattr(context, "snapshot", context)
        read_version: int = context.get_read_version().wait()
        metadata = self._store.metadata
        leases = self._leases
        dead = self._store.dead_letters
        lines = metadata.range(("line",))
        front = self._peek_page(reader, None, 1)[0]
        groups = self._store.groups
        active = groups.active_count(reader)
        return QueueInfo(
            size=self._store.size(reader),
            oldest=front[0] if front else None,
            requests_in_line=count_keys(reader, lines.start, lines.stop),
            leases_in_flight=count_keys(reader, leases.leases_begin, leases.leases_end),
            expired_leases=count_keys(
                reader, leases.leases_begin, leases.leases.pack((read_version,))
            ),
            dead_letters=count_keys(reader, dead.begin, dead.end),
            delayed=count_keys(reader, self._delays.begin, self._delays.end),
            read_version=read_version,
            groups=active,
            groups_in_flight=active - count_keys(reader, groups.turns_begin, groups.turns_end),
        )

    @exactly_once
    def clear(self, tr: TransactionContext) -> None:
        """Remove every item, the counters, leases, dead letters and the lines of requests
        of consumer sessions (a session whose requests it removed registers again).

        The receipts stay (:doc:`guarantees`: they expire by themselves), so an
        operation in flight during a clear still takes effect exactly once: it happened before
        the clear, or after it. Prefer this to ``clear_range_startswith(prefix)``, which also
        removes the receipts. Given a Database it takes effect exactly once too, so a clear
        whose commit timed out (1031) cannot land later and remove items enqueued after it.
        Cost: two range clears; no reads, so it never conflicts, but concurrent consumers that
        read the cleared items do.
        """
        for part in self._parts:
            part._store.clear(tr)
        if self._parts.sharded:
            self._store.clear(tr, items=False)
