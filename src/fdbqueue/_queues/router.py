"""The shards of one queue, and the choice of the shard each operation acts on: :class:`Router`.

``Queue(subspace, shards=N)`` spreads a queue over N disjoint key ranges so that no key range
takes every operation: a cluster can place the shards on different storage teams. Key layout
of a queue of N > 1 shards whose subspace has the prefix ``P``::

    P + pack((k,)) + ...            shard k (0 <= k < N): every key a queue of the prefix
                                    P + pack((k,)) has (see :doc:`concepts`): its items at
                                    P + pack((k, index, random)), its size counter, signal
                                    key, leases, receipts, line, ... at P + pack((k,)) + 0xff
    P + b"\\xff" + pack(("type",))   b"Queue/N": the type and the number of shards
    P + b"\\xff" + pack(("codec",))  the codec's name
    P + b"\\xff" + pack(("deduplication", ...))  ids of idempotent enqueues

A queue of one shard (the default) is one :class:`~fdbqueue._queues.shard.Shard` over the
queue's own subspace: the recipes' layout, byte for byte. The type record carries N, and every
shard records it too, checked by each write into the shard; the first write into a shard also
checks the queue's record (:meth:`~fdbqueue._storage.store.ItemStore.check_type`), and takes
and reads check the records they meet (:meth:`~fdbqueue._storage.store.ItemStore.check_codec`).
So a queue opened with another number of shards or as another type raises QueueTypeError
before it changes anything.

The router chooses: a write goes to the shards in turn (from a random first one, so producers
do not all start at shard 0), a batch's values go to the shards in turn as single writes
would (:meth:`Router.runs`), a group's items go to the shard its name hashes to, a lease goes
back to the shard that holds its key, and takes go to one end made of every shard's
(:meth:`Router.end`: the shard's own :class:`~fdbqueue._consuming.ends.End` for one shard, a
:class:`~fdbqueue._queues.sharded_end.ShardedEnd` over all of them for more: a FIFO queue's
:class:`~fdbqueue._queues.sharded_end.FifoShardedEnd`, a priority queue's
:class:`~fdbqueue._queues.sharded_end.PriorityShardedEnd`).

Source followed: FoundationDB's "Queues" recipe within each shard; the documentation on data
distribution (shards split by size and write bandwidth) for why the shards are key ranges.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import random
import zlib
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import fdb.tuple

from fdbqueue._consuming.ends import End
from fdbqueue._delivery.leases import Lease
from fdbqueue._queues.options import PAGE_SIZE, ReadPage, read_pages
from fdbqueue._queues.shard import Shard
from fdbqueue._queues.sharded_end import FifoShardedEnd, PriorityShardedEnd, ShardedEnd
from fdbqueue._storage.dead_letters import DeadLetter
from fdbqueue._storage.groups import check_group
from fdbqueue._storage.store import ItemStore
from fdbqueue._transactions.receipts import exactly_once
from fdbqueue._transactions.transactional import (
    AnyContext,
    TransactionContext,
    is_database,
    run_in_retry_loop,
    transactional,
)

__all__ = ["MAX_SHARDS", "Router", "check_shards"]

R = TypeVar("R")

#: The most shards a queue may have (a shard's prefix adds at most 2 bytes to the queue's).
MAX_SHARDS = 256


def check_shards(shards: Any) -> int:
    """Return ``shards`` (an int from 1 to :data:`MAX_SHARDS`), or raise before anything is
    read or written.

    Raises:
        TypeError: not an int (bool included).
        ValueError: below 1 or above :data:`MAX_SHARDS`.
    """
    if isinstance(shards, bool) or not isinstance(shards, int):
        raise TypeError(f"shards must be an int, not {type(shards).__name__}")
    if not 1 <= shards <= MAX_SHARDS:
        raise ValueError(f"shards must be from 1 to {MAX_SHARDS}, not {shards}")
    return shards


class Router:
    """The shards of one queue and the queue's own store; it chooses where each operation
    acts. Cost: nothing in the database, except :meth:`clear` and :meth:`check_type`.

    Args:
        root: the queue's own store: the type and codec records and the deduplication
            records live in its metadata (for one shard, it is that shard's store).
        shards: the shards, shard 0 first.

    Attributes:
        root: as given. receipts: the root's receipts (for :meth:`clear`).
        shards: as given (a tuple).
    """

    def __init__(self, root: ItemStore, shards: tuple[Shard, ...]) -> None:
        self.root = root
        self.receipts = root.receipts
        self.shards = shards
        self._by_prefix = {shard.store.subspace.key(): shard for shard in shards}
        self._prefix_length = len(root.subspace.key())
        self._turn = itertools.count(random.randrange(len(shards)))
        #: the one shard of a queue of one shard, where every write goes (None: several)
        self._only: Shard | None = shards[0] if len(shards) == 1 else None
        for shard in shards:  # a claim redelivers the other shards' expired leases too
            shard.leases.others = [other.leases for other in shards if other is not shard]

    @classmethod
    def build(
        cls,
        shard_class: type[Shard],
        subspace: Any,
        codec: Any,
        exactly_once: bool,
        shards: int,
        **options: Any,
    ) -> Router:
        """The router of a queue of ``shards`` shards of ``shard_class`` over ``subspace``:
        for one shard, one over the queue's own store (the recipes' layout); for more, one
        per ``P + pack((k,))``, each store's ``parent`` the queue's. ``options`` go to each
        shard (``high_contention``, ``abandon_after``, ``max_deliveries``).

        Raises:
            TypeError, ValueError: a bad subspace, codec or ``exactly_once``
                (:class:`~fdbqueue._storage.store.ItemStore`); nothing is read or written.
        """
        integers = shard_class.LEADING_INTEGERS
        root = ItemStore(subspace, codec, exactly_once, integers, shards=shards)
        if shards == 1:
            return cls(root, (shard_class(root, **options),))
        stores = [
            ItemStore(
                root.subspace.subspace((k,)),
                root.codec,
                exactly_once,
                integers,
                shards=shards,
                parent=root,
                shard=k,
            )
            for k in range(shards)
        ]
        return cls(root, tuple(shard_class(store, **options) for store in stores))

    def __len__(self) -> int:
        return len(self.shards)

    # -- writes -----------------------------------------------------------------------------

    def for_write(self) -> Shard:
        """The shard the next write goes to: the shards in turn (thread-safe: ``next`` on a
        count is atomic in CPython)."""
        only = self._only
        if only is not None:
            return only
        return self.shards[next(self._turn) % len(self.shards)]

    def runs(self, encoded: list[bytes]) -> list[tuple[Shard, list[bytes]]]:
        """``encoded``'s values, each with the shard a single write in its place would go to
        (the turn moving on by one per value): a batch lands as its values enqueued one by
        one would, in one transaction (:meth:`Shard.write` appends each shard's values
        together, in order). So the shards this process writes into hold as many of its
        values as each other, give or take one, whatever the sizes of its batches, and an
        item lies about its position over N deep in its shard: the order bound of
        :doc:`sharding` ("Order") holds for batches as for single writes."""
        return [(self.for_write(), [value]) for value in encoded]

    def for_group(self, group: Any, priority: int | None = None) -> Shard:
        """The shard that holds ``group``'s items: a group lives in one shard, chosen by a
        CRC-32 of the group packed by the tuple layer (stable across processes).

        Raises:
            TypeError, ValueError: ``group`` cannot name a group
                (:func:`~fdbqueue._storage.groups.check_group`), or its keys (with
                ``priority``, a PriorityQueue's) would be too long.
        """
        packed = fdb.tuple.pack((check_group(group),))
        shard = self.shards[zlib.crc32(packed) % len(self.shards)]
        shard.groups.check_fits(group, priority)
        return shard

    # -- leases -----------------------------------------------------------------------------

    def for_lease(self, lease: Any, action: str) -> Shard:
        """The shard whose keys hold ``lease``, which its lease holds checked
        (:meth:`~fdbqueue._delivery.leases.LeaseHolds.check`: the one check of a lease given
        to ``ack``, ``release``, ``dead_letter``, ``extend`` and ``ack_with``; what the shard
        does with it checks it no more).

        Raises:
            TypeError: ``lease`` is not a Lease.
            ValueError: a lease of another queue.
        """
        # a queue of one shard: its shard, without the lookup by prefix (the check refuses a
        # lease whose key is not under its leases)
        shard = self._only
        if shard is None:
            shard = self._holding(lease.key) if isinstance(lease, Lease) else None
            if shard is None:  # no shard's: the check of any shard refuses it
                self.shards[0].leases.holds.check(lease, action)
                raise ValueError("the lease belongs to another queue")  # (never reached)
        shard.leases.holds.check(lease, action)
        return shard

    def holds_key(self, key: bytes) -> bool:
        """Whether ``key`` lies under one of the shards' leases."""
        shard = self._holding(key)
        return shard is not None and bool(shard.leases.leases.contains(key))

    def _holding(self, key: bytes) -> Shard | None:
        """The shard whose prefix starts ``key``; None when none does."""
        # a queue of one shard: the queue's own prefix; of several: pack((k,)) after it, 1
        # byte for k = 0, 2 bytes for 0 < k < 256
        for length in (0, 1, 2):
            shard = self._by_prefix.get(key[: self._prefix_length + length])
            if shard is not None:
                return shard
        return None

    # -- ends -------------------------------------------------------------------------------

    def end(self, name: str, best: str | None = None) -> End | ShardedEnd:
        """The end ``name`` over every shard: the shard's own for a queue of one shard, else
        a FIFO queue's :class:`~fdbqueue._queues.sharded_end.FifoShardedEnd` (homes, moves),
        or with ``best`` (``"min"`` or ``"max"``) a priority queue's
        :class:`~fdbqueue._queues.sharded_end.PriorityShardedEnd` (pops take the best
        priority of every shard)."""
        ends = [shard.ends[name] for shard in self.shards]
        if len(ends) == 1:
            return ends[0]
        if best is None:
            return FifoShardedEnd(ends, self.root.metric_name, self.shards)
        return PriorityShardedEnd(ends, self.root.metric_name, best)

    # -- the whole queue --------------------------------------------------------------------

    def check_type(self, tr: TransactionContext) -> None:
        """Raise :class:`~fdbqueue.QueueTypeError` when the queue's records name another type,
        number of shards or codec (nothing changes); given a Database, in a transaction of its
        own, unless the records were once found right (then nothing is read). Cost: two
        snapshot point reads until they were once found right, then none."""
        if not self.root.verified:
            self._check_type(tr)

    @transactional
    def _check_type(self, tr: TransactionContext) -> None:
        """:meth:`check_type`'s reads, in ``tr`` (a transaction of its own given a Database)."""
        self.root.check_codec(self.root.recorded_codec(tr))

    @exactly_once
    def clear(self, tr: AnyContext) -> None:
        """Remove every shard's items and metadata and the queue's own records, but the
        receipts and deduplication records (:meth:`~fdbqueue._storage.store.ItemStore.clear`).
        Cost: a few range clears per shard; no reads."""
        for shard in self.shards:
            shard.clear(tr)
        if self.root is not self.shards[0].store:
            self.root.clear(tr, items=False)

    # -- gathering over the shards (for the queue's listings) -----------------------------

    def checked(self, read_page: ReadPage[R], start: bytes | None = None) -> ReadPage[R]:
        """``read_page`` whose first page (``after`` is ``start``) checks the type records
        first, in its own transaction (:meth:`check_type`)."""

        @transactional
        def page(tr: TransactionContext, after: bytes | None, count: int) -> Any:
            if after == start:
                self.check_type(tr)
            return read_page(tr, after, count)

        return page

    def summed(self, limit: int | None, count: Callable[[Shard, int | None], int]) -> int:
        """``count(shard, left)`` over the shards, each given what ``limit`` leaves (None: no
        limit), stopping once ``limit`` is reached."""
        total = 0
        for shard in self.shards:
            left = None if limit is None else limit - total
            if left == 0:
                break
            total += count(shard, left)
        return total

    def merged(
        self,
        limit: int | None,
        listing: Callable[[Shard, int | None], Sequence[R]],
        rank: Callable[[Shard, R], Any],
    ) -> list[R]:
        """Up to ``limit`` (None: every one) of the shards' ``listing(shard, limit)``, each
        in ``rank`` order, merged by ``rank`` (equal ranks: shard 0's first). Cost: each
        shard's listing of up to ``limit``."""
        listings = [
            [(rank(shard, found), k, found) for found in listing(shard, limit)]
            for k, shard in enumerate(self.shards)
        ]
        merged = heapq.merge(*listings, key=lambda ranked: ranked[:2])
        return [found for _rank, _k, found in itertools.islice(merged, limit)]

    # -- dead letters (for the queue's verbs) -------------------------------------------

    def dead_letters(
        self, tr: TransactionContext, limit: int | None, after: DeadLetter[Any] | None
    ) -> list[Any]:
        """Up to ``limit`` dead letters (None: all), oldest first, those younger than
        ``after`` when given, every shard's read page by page and merged by age
        (:meth:`fdbqueue.Queue.dead_letters`)."""
        rank = None if after is None else self.shard_of_letter(after).dead_letter_rank(after)

        def start(shard: Shard) -> bytes | None:
            return None if rank is None else shard.dead_letters.subspace.pack(rank)

        return self.merged(
            limit,
            lambda shard, left: read_pages(
                tr, left, self.checked(shard.dead_letters_page, start(shard)), start(shard)
            ),
            Shard.dead_letter_rank,
        )

    def purge_dead_letters(self, tr: TransactionContext, limit: int | None) -> int:
        """Remove the ``limit`` oldest dead letters over every shard (None: all), a page at a
        time (:meth:`fdbqueue.Queue.purge_dead_letters`); how many."""

        def purge(shard: Shard, left: int | None) -> int:
            purged = 0
            while left is None or purged < left:
                count = PAGE_SIZE if left is None else min(PAGE_SIZE, left - purged)
                removed = shard.purge_dead_letters(tr, count)
                purged += removed
                if removed < count:
                    break
            return purged

        return self.each_oldest_dead_letters(tr, limit, purge)

    def requeue_dead_letters(self, tr: TransactionContext, limit: int) -> int:
        """Requeue the ``limit`` oldest dead letters over every shard, in transactions of the
        bytes' size given a Database, what fits one given a Transaction
        (:meth:`fdbqueue.Queue.requeue_dead_letters`); how many."""

        def requeue(shard: Shard, left: int | None) -> int:
            assert left is not None
            if not is_database(tr):
                return shard.requeue_dead_letters(tr, left)
            moved = 0
            while moved < left:
                batch = shard.requeue_dead_letters(tr, left - moved)
                if batch == 0:
                    break
                moved += batch
            return moved

        return self.each_oldest_dead_letters(tr, limit, requeue)

    def shard_of_letter(self, letter: DeadLetter[Any]) -> Shard:
        """The shard that stores ``letter``'s record.

        Raises:
            ValueError: none does.
        """
        for shard in self.shards:
            if shard.dead_letters.begin <= letter.key < shard.dead_letters.end:
                return shard
        raise ValueError(f"dead letter {letter.id} is not one of {self.root.metric_name}'s")

    def each_oldest_dead_letters(
        self, tr: TransactionContext, limit: int | None, act: Callable[[Shard, int | None], int]
    ) -> int:
        """``act(shard, count)`` in each shard holding some of the ``limit`` oldest dead
        letters over every shard (None: all of them), ``count`` how many it holds; the sum
        of what ``act`` returned. Cost, for a limit on a queue of several shards: a snapshot
        range read of up to ``limit`` dead letter records per shard, issued together, in a
        transaction of its own given a Database."""
        shards = self.shards
        if limit is None or len(shards) == 1:  # every dead letter, or one shard's oldest
            counts: list[int | None] = [limit] * len(shards)
        else:
            oldest = functools.partial(self.oldest_dead_letters, limit)
            counts = list(run_in_retry_loop(tr, oldest) if is_database(tr) else oldest(tr))
        return sum(
            act(shard, count)
            for shard, count in zip(shards, counts, strict=True)
            if count is None or count > 0
        )

    def oldest_dead_letters(self, limit: int, tr: Any) -> list[int]:
        """How many of the ``limit`` oldest dead letters over every shard each shard holds."""
        reader: Any = getattr(tr, "snapshot", tr)
        shards = self.shards
        reads = [
            reader.get_range(s.dead_letters.begin, s.dead_letters.end, limit=limit) for s in shards
        ]
        ranked = heapq.merge(
            *[
                [(tuple(shard.dead_letters.subspace.unpack(kv.key)), k) for kv in read]
                for k, (shard, read) in enumerate(zip(shards, reads, strict=True))
            ]
        )
        counts = [0] * len(shards)
        for _rank, k in itertools.islice(ranked, limit):
            counts[k] += 1
        return counts

    # -- jobs and leases over the shards ---------------------------------------------------

    def withdraw(self, tr: AnyContext, key: bytes, job: bytes) -> bool:
        """Remove the cancelled job ``job``'s item at ``key`` from whichever shard holds it
        (:meth:`Shard.withdraw`, a :data:`~fdbqueue._storage.jobs.Withdraw`); whether one
        did."""
        return any(shard.withdraw(tr, key, job) for shard in self.shards)

    def ack_many(self, tr: TransactionContext, leases: list[Lease[Any]]) -> None:
        """Acknowledge ``leases`` (checked) in one transaction, each by the shard that holds
        it (:meth:`Shard.ack_batches`)."""
        batches: dict[int, tuple[Shard, list[Lease[Any]]]] = {}
        for lease in leases:  # by the shard that holds each
            shard = self.for_lease(lease, "ack_many")
            batches.setdefault(id(shard), (shard, []))[1].append(lease)
        ordered = list(batches.values())
        ordered[0][0].ack_batches(tr, ordered)

    # -- the whole queue, over the shards (for the queue's views) ---------------------------

    def empty(self, tr: AnyContext) -> bool:
        """Whether no shard holds an item a take could return (:meth:`fdbqueue.Queue.empty`):
        none at any shard's front, no group's turn, nothing waiting in a lease or a delayed
        record due."""
        shards = self.shards
        if any(shard.store.read(tr, limit=1) for shard in shards):
            return False
        if any(shard.store.groups.any_turn(tr) for shard in shards):
            return False
        reader: Any = getattr(tr, "snapshot", tr)
        version: int = reader.get_read_version().wait()
        return not any(shard.waiting_elsewhere(reader, version) for shard in shards)

    def size(self, tr: AnyContext) -> int:
        """The shards' size counters and what waits elsewhere in them, summed
        (:meth:`fdbqueue.Queue.size`)."""
        counters = [tr.get(shard.store.size_key) for shard in self.shards]
        reader: Any = getattr(tr, "snapshot", tr)
        version: int = reader.get_read_version().wait()
        elsewhere = sum(shard.waiting_elsewhere(reader, version) for shard in self.shards)
        return sum(ItemStore.counter_value(counter) for counter in counters) + elsewhere

    def peeked(self, tr: TransactionContext, limit: int | None) -> list[tuple[Shard, bytes, Any]]:
        """Up to ``limit`` of the values the next takes return (None: all), each with its
        shard and key, every shard's merged in take order (:meth:`fdbqueue.Queue.peek_many`)."""
        return self.merged(
            limit,
            lambda shard, left: [
                (shard, key, value)
                for key, value in read_pages(tr, left, self.checked(shard.peek_page))
            ],
            lambda shard, found: shard.peek_rank(found[1]),
        )

    def signal(self, tr: AnyContext) -> None:
        """Bump every shard's signal key, so blocked takes wake (a resume)."""
        for shard in self.shards:
            shard.store.signal(tr)
