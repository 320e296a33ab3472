"""One end of a sharded queue: the same end of every shard, taken from as one.

A FIFO queue's take goes to the consumer's *home* shard
(:mod:`~fdbqueue._queues.shard_homes`: each thread or asyncio task of a process has one,
spread evenly over the shards, for a stay of up to 128 items), plainly or in the shard's line
with ``high_contention=True``, in this process's turn at that shard (threads sharing a home
take turns instead of conflicting). When the home is empty or the stay is over, a read-only
transaction reads the size counter and delayed-items hint of two shards (:meth:`holding`:
those with the fewest of this process's consumers, visited longest ago), or of every shard
when neither holds items (snapshot point reads, issued together: one round trip, no
conflict); the take goes to a shard holding items, which becomes the consumer's home. When
those takes all find nothing (other consumers were first), the counters are read again, so a
take returns None only when every shard was empty at one transaction's read version (delayed
items not yet due aside, as for an unsharded queue).

A priority queue's pop and claim, in one transaction, first read the first (``min``) or last
(``max``) item of every shard (snapshot range reads with ``limit=1``, all issued before any is
waited on), then take from the shard whose item has the best priority, with the take's read
conflict range there: so they take the best priority among the items committed before their
read version, and of two concurrent pops of one best item, one retries and ranks again.
Unlike an unsharded pop they do not conflict with a push of a better priority into another
shard that commits meanwhile: that item is simply the next pop's. With ``high_contention``
and in sessions they take so too, not in line (a line takes in a later transaction than the
ranking).

Every claim, in whatever shard, also reads the first lease of every other shard (snapshot
range reads issued together, :meth:`~fdbqueue._delivery.claims.Leases.claim_others`) and
redelivers the expired or released leases it finds there before it takes a fresh item: an
expired or released item comes first whatever shard holds it, as in one shard.

A FIFO queue's ``claim`` goes to the consumer's home as a take does; when the home has
nothing to claim, it claims from the shards in random order in one transaction, looking at
every shard (a shard whose items are all leased holds no item by its counter, yet an expired
lease makes one claimable). ``take_many`` and ``claim_many`` take from the shards in those
orders, in one transaction, until they have ``n``.

The two kinds are two classes over one base, :class:`ShardedEnd` (blocking, batches,
claims' batches): :class:`FifoShardedEnd` (homes, turns, moves) and
:class:`PriorityShardedEnd` (ranked heads, :meth:`PriorityShardedEnd.take_best`); the
router builds the one its queue needs.

Paused (:mod:`fdbqueue._storage.pause`: one key for the whole queue, in its own metadata):
every shard's take and claim finds nothing, as in one shard, and the choice of shards finds
none holding items (:func:`holding_items`, :meth:`PriorityShardedEnd.order`), so a take
neither roams nor moves items; the key is read once per transaction however many shards it
visits (the other looks are answered from the transaction's cache of reads).

Ordering: each shard is FIFO (a priority queue's shard: by priority, then FIFO); across shards
a FIFO queue's order is bounded by the stays, a priority's items by their counts
(:doc:`sharding`, "Order"). Every item is taken
exactly once, as from one shard.

Source followed: FoundationDB's "Queues" and "Priority Queues" recipes within each shard;
sharding as QuiCK (CloudKit's queues on FoundationDB) and Amazon SQS partitions do it:
consumers pick a partition and stay.
"""

from __future__ import annotations

import functools
import random
import struct
from collections.abc import Callable, Sequence
from typing import Any

from fdbqueue._consuming.ends import End
from fdbqueue._consuming.sessions import Consumer
from fdbqueue._delivery.claims import leases_unexpired
from fdbqueue._delivery.delays import soonest
from fdbqueue._delivery.leases import Lease
from fdbqueue._queues.shard_homes import Homes, Turns, current_consumer
from fdbqueue._queues.sharded_consumer import (
    FifoShardedConsumer,
    PriorityShardedConsumer,
    SharedSessions,
)
from fdbqueue._storage.features import DELAYS, GROUPS, LEASES, PAUSE
from fdbqueue._storage.taking import MOVED_ASIDE
from fdbqueue._transactions.suspension import current_operation
from fdbqueue._transactions.transactional import AnyContext, is_database, run_in_retry_loop
from fdbqueue._transactions.waiting import take_blocking

__all__ = ["FifoShardedEnd", "PriorityShardedEnd", "ShardedEnd"]


#: Items a consumer whose home is empty moves from the front of a crowded shard into its home
#: (:meth:`FifoShardedEnd._move_home`): a stay's worth.
MOVE_RUN = 128

#: Shards a consumer whose home is empty looks at first (:meth:`FifoShardedEnd.holding`): the
#: power of two choices, as load balancers sample servers.
SAMPLE = 2

_COUNTER = struct.Struct("<q")


def holding_items(
    tr: Any, ends: list[End], *, taking: bool = True, plan: int | None = None
) -> list[End]:
    """Those of ``ends`` holding items a take may take at ``tr``'s read version (size counter
    above 0, a delayed item due, or a lease expired or released), in their order; none while
    the queue is paused, for a take (``taking``; a peek looks anyway). The size
    also counts the items of message groups whose item is in a lease, which no take may
    take: where a group is active, an item without a group or a group's turn must be there
    too. Cost: three snapshot point reads per end (the size, the delayed items' hint, the
    active groups' count) and a snapshot range read of its first lease (``limit=1``), and
    for a take the paused key (one snapshot point read), issued together, and the read
    version; per end holding items with an active group, two snapshot range reads
    (``limit=1``)."""
    if not ends:
        return []
    reader = tr.snapshot
    pause = ends[0].store.pause
    if plan is None:  # the features read for (fdbqueue._storage.features)
        plan = ends[0].store.features.planned()
    paused = pause.look(tr) if taking and plan & PAUSE else None
    records = [end.store.recorded_codec(tr) for end in ends]
    sizes = [reader.get(end.store.size_key) for end in ends]
    hints = [reader.get(end.delays.hint_key) if plan & DELAYS else None for end in ends]
    counts = [reader.get(end.store.groups.count_key) if plan & GROUPS else None for end in ends]
    firsts = [end.leases.first_lease(reader) if plan & LEASES else None for end in ends]
    version = tr.get_read_version().wait()
    bits = 0
    for end, record in zip(ends, records, strict=True):
        bits |= end.store.check_codec(record)  # another type, shard count or codec raises here
    if bits & ~plan:  # a feature used for the first time since the plan was made
        return holding_items(tr, ends, taking=taking, plan=plan | bits)
    if paused is not None and pause.holds(paused):
        return []
    found = []
    for end, size, hint, count, first in zip(ends, sizes, hints, counts, firsts, strict=True):
        due = hint is not None and end.delays.note(hint, version)  # a blocked take wakes then
        if first is not None and end.leases.note(first, version):
            found.append(end)  # a lease's item waits: a take there takes it first
            continue
        held = size.present() and _COUNTER.unpack(bytes(size))[0] > 0
        grouped = count is not None and count.present() and _COUNTER.unpack(bytes(count))[0] > 0
        if due or (held and (not grouped or _takeable(reader, end))):
            found.append(end)
    return found


def _takeable(reader: Any, end: End) -> bool:
    """Whether ``end``'s shard holds an item without a group, a group's turn, or an expired
    lease (its group's next items wait behind it: a take delivers it again)."""
    store = end.store
    items = reader.get_range(store.begin, store.end, limit=1)
    turns = reader.get_range(store.groups.turns_begin, store.groups.turns_end, limit=1)
    return bool(list(items)) or bool(list(turns)) or end.leases.any_expired(reader)


def _holding_for_sure(order: Callable[[Any], list[End]], tr: Any) -> list[End]:
    """Those of ``order(tr)`` whose shard holds an item or a turn (:func:`_takeable`)."""
    return [end for end in order(tr) if _takeable(tr.snapshot, end)]


def _take(tr: AnyContext, end: End) -> Any:
    """Take one value from ``end`` without blocking (None when there is none)."""
    return end.take(tr, False, None)


def _take_batch(tr: AnyContext, end: End, n: int) -> Any:
    """Take up to ``n`` values from ``end`` in ``tr`` (a list, or MOVED_ASIDE)."""
    return end.take_batch(tr, n)


class ShardedEnd:
    """The end ``ends[0].read`` names, over every shard (one :class:`End` per shard): what a
    FIFO queue's front (:class:`FifoShardedEnd`) and a priority queue's ends
    (:class:`PriorityShardedEnd`) share. A subclass says which shard a take goes to
    (:meth:`_take_one`, :meth:`_claim_one`, :meth:`peek`), in which order a batch visits the
    shards (:meth:`order`) and which session it opens (:meth:`consumer`).

    Args:
        ends: the same end of each shard, shard 0 first.
        metric_name: the queue's name in metrics (blocking waits are recorded under it).
    """

    def __init__(self, ends: Sequence[End], metric_name: str) -> None:
        self.ends = list(ends)
        self.metric_name = metric_name

    # -- what differs between the queue types -------------------------------------------------

    def _take_one(self, tr: AnyContext) -> Any:
        """Take one value without blocking; None when every shard is empty."""
        raise NotImplementedError

    def _claim_one(self, tr: AnyContext, seconds: float) -> Lease[Any] | None:
        """Claim one item under a lease of ``seconds`` without blocking; None when none is
        claimable."""
        raise NotImplementedError

    def peek(self, tr: AnyContext) -> Any:
        """The value this thread's next take returns when nothing else changes the queue,
        without removing it, or None."""
        raise NotImplementedError

    def order(self, tr: Any, every_shard: bool) -> list[End]:
        """The shards a batch takes from, in ``tr``, in the order it visits them: those
        holding items (``every_shard``: every shard, those holding items first)."""
        raise NotImplementedError

    def consumer(self, database: Any, prefetch: int, abandon_after: float) -> Consumer:
        """A consumer session over every shard
        (:class:`~fdbqueue._queues.sharded_consumer.ShardedConsumer`)."""
        raise NotImplementedError

    def paused(self, tr: Any) -> bool:
        """Whether the queue is paused at ``tr``'s read version (a take finds nothing). Cost:
        one snapshot point read of the paused key."""
        pause = self.ends[0].store.pause
        return pause.holds(pause.look(tr))

    # -- taking -----------------------------------------------------------------------------

    def take(self, tr: AnyContext, block: bool, seconds: float | None) -> Any:
        """Take one value (arguments checked by the caller); None when every shard is empty."""
        if not block:
            return self._take_one(tr)
        return self.blocking(tr, lambda database, _deadline: self._take_one(database), seconds)

    def take_many(self, tr: AnyContext, n: int) -> list[Any]:
        """Take up to ``n`` values in one transaction: from the shards in the order
        :meth:`order` gives, until ``n`` are taken."""
        values: list[Any] = self._gather(tr, _take_batch, n)
        return values

    # -- claiming ---------------------------------------------------------------------------

    def claim(
        self, tr: AnyContext, seconds: float, block: bool, wait: float | None
    ) -> Lease[Any] | None:
        """Claim one item under a lease of ``seconds`` (arguments checked by the caller)."""
        if not block:
            return self._claim_one(tr, seconds)
        lease: Lease[Any] | None = self.blocking(
            tr, lambda database, _deadline: self._claim_one(database, seconds), wait
        )
        return lease

    def claim_many(self, tr: AnyContext, n: int, seconds: float) -> list[Lease[Any]]:
        """Claim up to ``n`` items in one transaction, from the shards in :meth:`order`
        (every shard: an expired lease makes an item claimable where the size counter says
        none is)."""
        leases: list[Lease[Any]] = self._gather(
            tr,
            lambda tr, end, left: end.claim_batch(tr, seconds, left),
            n,
            every_shard=True,
            still_good=leases_unexpired,
        )
        return leases

    # -- the shards -------------------------------------------------------------------------

    def _gather(
        self,
        tr: AnyContext,
        take: Callable[[Any, End, int], Any],
        n: int,
        *,
        every_shard: bool = False,
        still_good: Callable[[Any, int], bool] | None = None,
    ) -> list[Any]:
        """``take(tr, end, left)`` from the shards in :meth:`order`, in one transaction,
        until ``n`` are taken; given a Database, exactly once (a random shard's receipts,
        written when something was taken or poison moved aside). ``take`` returns a list, or
        MOVED_ASIDE when it only moved poison to the dead letters (it is called again).
        ``still_good``: as for :meth:`~fdbqueue._transactions.receipts.Receipts.run` (claims:
        no lease that expired before the outcome was known)."""

        def body(tr: Any) -> tuple[list[Any], bool]:
            found: list[Any] = []
            moved = False
            for end in self.order(tr, every_shard):
                while (taken := take(tr, end, n - len(found))) is MOVED_ASIDE:
                    moved = True  # it wrote, though it returns nothing
                found.extend(taken)
                if len(found) >= n:
                    break
            return found, moved

        if not is_database(tr):
            return body(tr)[0]
        receipts = random.choice(self.ends).receipts
        found, _moved = receipts.run(
            tr,
            body,
            wrote=lambda result: bool(result[0]) or result[1],
            still_good=None if still_good is None else lambda result, v: still_good(result[0], v),
        )
        return found

    def blocking(
        self, database: Any, take: Callable[[Any, float | None], Any], seconds: float | None
    ) -> Any:
        """``take`` until it returns a value or ``seconds`` pass, waiting on every shard's
        signal key (one watch per shard) between attempts."""
        return take_blocking(
            database,
            take,
            [end.store.signal_key for end in self.ends],
            seconds,
            self._seconds_until_waiting,
            queue=self.metric_name,
        )

    def _seconds_until_waiting(self) -> float | None:
        """Seconds until an item away from the queue falls due in a shard (a lease expires,
        a delayed item falls due), as the last takes saw it; None while the last take found
        the queue paused (only ``resume``'s signal wakes it then)."""
        if self.ends[0].store.pause.seen:
            return None
        return soonest(
            *(end.leases.seconds_until_expiry() for end in self.ends),
            *(end.delays.seconds_until_due() for end in self.ends),
        )


class FifoShardedEnd(ShardedEnd):
    """A FIFO queue's front over every shard: each consumer takes at its home shard
    (:class:`~fdbqueue._queues.shard_homes.Homes`), in this process's turn there, and moves
    to a shard holding items when its home is empty or its stay is over, moving a crowded
    shard's front into its home when it can (:meth:`_move_home`).

    Args:
        ends, metric_name: as for :class:`ShardedEnd`.
        shards: the queue's shards (:class:`~fdbqueue._queues.shard.FifoShard`), shard 0
            first, for moving a crowded shard's front into an empty home.
    """

    def __init__(self, ends: Sequence[End], metric_name: str, shards: Sequence[Any]) -> None:
        super().__init__(ends, metric_name)
        self.shards = list(shards)
        self.homes = Homes(len(self.ends))
        self.turns = [Turns() for _ in self.ends]
        self.shared = SharedSessions()

    # -- taking -----------------------------------------------------------------------------

    def _take_one(self, tr: AnyContext) -> Any:
        consumer = current_consumer()
        value = self._at_home(tr, consumer, _take)
        if value is not None:
            return value

        home = self.homes.where(consumer)

        def take_and_stay(tr: Any, end: End) -> Any:
            shard = self.ends.index(end)
            if home is not None and self._move_home(tr, consumer, shard, home):
                found = self._at(tr, home, _take)  # the run just moved there
                if found is not None:
                    self._stay(consumer, home)
                    return found
            found = self._at(tr, shard, _take)
            if found is not None:
                self._stay(consumer, shard)
            return found

        return self._in_order(tr, lambda tr: self.holding(tr, consumer), take_and_stay)

    def _move_home(self, tr: AnyContext, consumer: Any, shard: int, home: int) -> bool:
        """When ``consumer``'s home is empty and ``shard``, which holds items, is the home of
        another consumer of this process (crowded): move a run of up to :data:`MOVE_RUN`
        items of ``shard``'s front (at most half of it) to the back of the home, in
        ``shard``'s turn (this process's takes there wait one transaction), and stay home;
        whether a run moved. Only given a Database: the consumers of one process thus
        spread again over the shards however the items were loaded, instead of taking turns
        at one shard. Cost: one transaction
        (:meth:`~fdbqueue._queues.shard.FifoShard.move_front`) per run moved."""
        if shard == home or not is_database(tr):
            return False
        if self.homes.fewest(consumer, [shard]) == 0:  # nobody else of this process there
            return False
        source, target = self.shards[shard], self.shards[home]

        def move(database: Any, _end: End) -> int:
            moved: int = run_in_retry_loop(
                database, lambda tr: source.move_front(tr, target, MOVE_RUN)
            )
            return moved

        return bool(self._at(tr, shard, move))

    def peek(self, tr: AnyContext) -> Any:
        """The front of the consumer's home shard, or of the shard it moves to when its home
        is empty or its stay is over (the move is made now, as a take makes it). Cost: as a
        take's choice of shard, and the shard's peek."""
        consumer = current_consumer()
        home = self.homes.home(consumer)
        if home is not None:
            value = self.ends[home].peek(tr)
            if value is not None:
                return value
        for end in self.holding(tr, consumer, taking=False):  # the first becomes its home
            value = end.peek(tr)
            if value is not None:
                self.homes.move(consumer, self.ends.index(end))
                return value
        return None

    def _at_home(self, tr: AnyContext, consumer: Any, act: Callable[[Any, End], Any]) -> Any:
        """``act`` at ``consumer``'s home shard (:meth:`_at`), counted in its stay; None
        without acting when its stay is over (:class:`Homes`)."""
        stay = self.homes.stay(consumer)
        if stay is None:
            return None
        found = self._at(tr, stay[0], act)
        if found is not None:
            self.homes.took_in(stay)
        return found

    def _at(self, tr: AnyContext, shard: int, act: Callable[[Any, End], Any]) -> Any:
        """``act(tr, end)`` at ``shard``, in this process's turn there when given a Database
        (:class:`Turns`: this process's takes of one shard do not conflict). A call for a
        coroutine takes no turn: waiting for one would block the event loop's thread, which
        the turn's holder may need (its tasks share a home only when they outnumber the
        shards)."""
        end = self.ends[shard]
        if not is_database(tr) or current_operation() is not None:
            return act(tr, end)
        with self.turns[shard].turn():
            return act(tr, end)

    def _stay(self, consumer: Any, shard: int) -> None:
        """``consumer`` took an item at ``shard``, away from its home: its new home."""
        self.homes.move(consumer, shard)
        self.homes.took(consumer)

    # -- claiming ---------------------------------------------------------------------------

    def _claim_one(self, tr: AnyContext, seconds: float) -> Lease[Any] | None:
        """Claim at the thread's home shard (as a take does); when it has nothing, or the
        stay is over, from the shards in random order, in one transaction (every shard: an
        expired lease makes an item claimable where the size counter says none is); the
        shard it claimed from becomes the thread's home."""
        consumer = current_consumer()
        lease: Lease[Any] | None = self._at_home(
            tr, consumer, lambda tr, end: end.claim(tr, seconds, False, None)
        )
        if lease is not None:
            return lease
        found_in: list[End] = []

        def claim(tr: Any, end: End, left: int) -> Any:
            leases = end.claim_batch(tr, seconds, left)
            found_in[:] = [end] if leases and leases is not MOVED_ASIDE else found_in
            return leases

        claimed: list[Lease[Any]] = self._gather(
            tr, claim, 1, every_shard=True, still_good=leases_unexpired
        )
        if not claimed:
            return None
        self._stay(consumer, self.ends.index(found_in[0]))
        return claimed[0]

    def consumer(self, database: Any, prefetch: int, abandon_after: float) -> Consumer:
        """A session in one shard's line at a time
        (:class:`~fdbqueue._queues.sharded_consumer.FifoShardedConsumer`)."""
        return FifoShardedConsumer(self, database, prefetch, abandon_after)

    # -- the shards -------------------------------------------------------------------------

    def holding(self, tr: Any, consumer: Any, *, taking: bool = True) -> list[End]:
        """Where ``consumer`` moves: first the :data:`SAMPLE` shards other than its home
        with the fewest of this process's consumers (the ones visited longest ago first),
        those of them holding items at ``tr``'s read version; when none does (or other
        consumers of this process have moved into them meanwhile while shards without one
        remain), every shard holding items (its home too). Ranked by
        :meth:`Homes.ranked`, the first made ``consumer``'s home. Cost: two snapshot point
        reads per shard looked at (4 when the sample holds items, else 2N more), issued
        together: one round trip, or two. For a take (``taking``), none while the queue is
        paused (:func:`holding_items`; a peek looks anyway)."""
        home = self.homes.where(consumer)  # it has just looked there
        others = [shard for shard in range(len(self.ends)) if shard != home]
        sample = self.homes.ranked(consumer, others)[:SAMPLE]
        found = self._candidates(tr, False, [self.ends[k] for k in sample], taking=taking)
        held = [self.ends.index(end) for end in found]
        if not found or self.homes.fewest(consumer, held) > self.homes.fewest(consumer, others):
            # None of the sample holds items, or consumers that moved meanwhile took its
            # shards while others have none: every shard's counters.
            found = self._candidates(tr, False, taking=taking)
        ranked = self.homes.ranked(consumer, [self.ends.index(end) for end in found], settle=True)
        return [self.ends[k] for k in ranked]

    def order(self, tr: Any, every_shard: bool) -> list[End]:
        """Those holding items in random order (:meth:`_candidates`)."""
        return self._candidates(tr, every_shard)

    def _candidates(
        self,
        tr: Any,
        every_shard: bool,
        among: Sequence[End] | None = None,
        *,
        taking: bool = True,
    ) -> list[End]:
        """The shards (of ``among``, default all) holding items (:func:`holding_items`, none
        while paused with ``taking``) in random order; all of them with ``every_shard``
        (each shard's claim checks the pause)."""
        ends = list(self.ends if among is None else among)
        random.shuffle(ends)
        if every_shard:
            return ends
        return holding_items(tr, ends, taking=taking)

    def _in_order(
        self,
        tr: AnyContext,
        order: Callable[[Any], list[End]],
        take: Callable[[Any, End], Any],
    ) -> Any:
        """``take(tr, end)`` from the shards ``order(tr)`` lists until one returns something
        other than None. Given a Database, ``order`` runs in a read-only transaction (snapshot
        reads: no conflict) and each take as the shard's own (exactly once by its receipts;
        in its line with ``high_contention``); when every take found nothing (another consumer
        was first), ``order`` is read again, until it lists no shard (every shard empty at
        that read version). Given a Transaction, all of it runs in it, once."""
        if not is_database(tr):
            for end in order(tr):
                found = take(tr, end)
                if found is not None:
                    return found
            return None
        checked = order
        while True:
            ends = run_in_retry_loop(tr, checked)
            if not ends:
                return None
            for end in ends:
                found = take(tr, end)
                if found is not None:
                    return found
            # Every take found nothing (and promoted what was due): other consumers were
            # first, or a size counter is off (items removed by other code). From now on,
            # keep only shards whose item range or turns hold something, so that a counter
            # alone cannot keep this loop going.
            checked = functools.partial(_holding_for_sure, order)


class PriorityShardedEnd(ShardedEnd):
    """A priority queue's ``min`` or ``max`` end over every shard: each pop and claim ranks
    the shards by their first item and takes from the best one, in one transaction
    (:meth:`take_best`); no home, no line.

    Args:
        ends, metric_name: as for :class:`ShardedEnd`.
        best: ``"min"`` or ``"max"``: takes go to the shard whose first item has the lowest
            or the highest priority (:meth:`_ranked`).
    """

    def __init__(self, ends: Sequence[End], metric_name: str, best: str) -> None:
        super().__init__(ends, metric_name)
        self.best = best

    def _take_one(self, tr: AnyContext) -> Any:
        return self.take_best(tr)

    def take_best(self, tr: AnyContext) -> Any:
        """A priority queue's pop: in one transaction, rank the shards by their first item
        (snapshot reads) and take from the best one with the take's read conflict range, so
        that of two concurrent pops of the same best item one retries and ranks again: a pop
        returns the best priority present at its read version. Its line is not used (a
        take in line would take in another transaction than the ranking). Cost: the ranking's
        snapshot range reads (two per shard, issued together) and the take's."""
        values = self._gather(tr, _take_batch, 1)
        return values[0] if values else None

    def _claim_one(self, tr: AnyContext, seconds: float) -> Lease[Any] | None:
        """The best priority of every shard, as a pop takes, claimed in one transaction."""
        ranked: list[Lease[Any]] = self._gather(
            tr,
            lambda tr, end, left: end.claim_batch(tr, seconds, left),
            1,
            every_shard=True,
            still_good=leases_unexpired,
        )
        return ranked[0] if ranked else None

    def peek(self, tr: AnyContext) -> Any:
        """The best first item over the shards. Cost: :meth:`_ranked`'s reads, and the best
        shard's peek."""
        ranked = self._ranked(tr, False)
        return next((v for end in ranked if (v := end.peek(tr)) is not None), None)

    def consumer(self, database: Any, prefetch: int, abandon_after: float) -> Consumer:
        """A session whose takes rank and take in one transaction, not in line
        (:class:`~fdbqueue._queues.sharded_consumer.PriorityShardedConsumer`)."""
        return PriorityShardedConsumer(self, database, prefetch, abandon_after)

    def order(self, tr: Any, every_shard: bool) -> list[End]:
        """By priority, once the delayed items due in every shard were promoted in ``tr``
        (:meth:`_ranked`: a due item ranks as an item); none while the queue is paused
        (nothing promoted then). Cost: the paused key's read, issued with the delayed items'
        hints, and :meth:`_ranked`'s."""
        pause = self.ends[0].store.pause
        paused = pause.look(tr)
        looks = [end.delays.look(tr) for end in self.ends]  # issued together
        if pause.holds(paused):
            return []
        for end, looked in zip(self.ends, looks, strict=True):
            end.delays.promote(tr, looked)
        return self._ranked(tr, every_shard)

    def _ranked(self, tr: Any, every_shard: bool) -> list[End]:
        """The shards holding items at ``tr``'s read version, the best first item first (the
        lowest priority for ``"min"``, the highest for ``"max"``; within a priority, the
        oldest: :func:`ranked_heads`; ties in random order); with ``every_shard``, the
        others after them."""
        heads = self._heads(tr)
        ranked = sorted(heads, key=lambda head: (head[0], random.random()))
        found = [end for _rank, end in ranked]
        return found + [end for end in self.ends if end not in found] if every_shard else found

    def _heads(self, tr: Any) -> list[tuple[Rank, End]]:
        """Each non-empty shard with the rank of its best priority (:func:`ranked_heads`)."""
        return ranked_heads(self.ends, self.best == "max", tr)


#: How much better than any priority a shard with an expired or released lease ranks (a
#: take delivers that lease's item first).
EXPIRED_FIRST = 2**2048

#: A head's rank: its priority's (lower is better: the priority, or minus it for the max end),
#: then its count (the how-manieth item of that priority its shard holds, from 0), or its
#: turn's number for a group's turn.
Rank = tuple[int, int]


def ranked_heads(ends: Sequence[End], reverse: bool, tr: Any) -> list[tuple[Rank, End]]:
    """Each non-empty shard's end with the :data:`Rank` of its first item (the oldest of
    its best priority), its groups' turns counted (a turn's key holds its priority and
    number: :mod:`fdbqueue._storage.groups`), each shard's type records checked first.
    Equal priorities rank by count: one producer's pushes go to the shards in turn, so
    its items of one priority sit at about the same counts in every shard, and a pop takes
    them round by round (:doc:`sharding`, "Order": overtaken by at most N - 1 items).

    Cost: per shard a snapshot range read (``limit=1``) of the first item, a snapshot point
    read of the active groups' count, a snapshot range read (``limit=1``) of the first lease
    (a shard whose first lease expired or was released ranks first: its take delivers that
    item first, as every take does), and the type records' reads until they were found
    right, all issued before any is waited on (one round trip); per shard whose count says
    a group is active, a snapshot range read (``limit=1``) of its first turn, issued
    together (a second round trip, only while groups are in use). For the
    max end (``reverse``), whose reverse reads find each shard's highest priority but its
    newest item, when several shards share the best priority: per such shard, a snapshot
    range read (``limit=1``) of that priority's first item, and of its first turn where the
    count was read, issued together (a second round trip)."""
    reader = tr.snapshot
    records = [end.store.recorded_codec(tr) for end in ends]
    reads = []
    for end in ends:
        store = end.store
        items = reader.get_range(store.begin, store.end, limit=1, reverse=reverse)
        count = store.groups.look(tr)
        first_lease = end.leases.first_lease(reader)
        reads.append((items, count, first_lease))
    version = tr.get_read_version().wait()
    turns_of = {
        end: reader.get_range(
            end.store.groups.turns_begin, end.store.groups.turns_end, limit=1, reverse=reverse
        )
        for end, (_items, count, _first) in zip(ends, reads, strict=True)
        if end.store.groups.any_active(count)
    }
    heads: list[tuple[Rank, End]] = []
    grouped: list[End] = []  # ends whose turns were read
    for end, record, (items, _count, first_lease) in zip(ends, records, reads, strict=True):
        store = end.store
        store.check_codec(record)  # before a key is unpacked: another type raises here
        firsts = [tuple(store.unpack_position(bytes(kv.key))[:2]) for kv in items]
        if end.leases.note(first_lease, version):
            # an expired or released lease's item waits (a group whose holder died may
            # wait behind it): a take delivers it first, as a claim does
            heads.append(((-EXPIRED_FIRST, 0), end))
            continue
        turns = turns_of.get(end)
        if turns is not None:
            grouped.append(end)
            firsts += [tuple(store.groups.turns.unpack(bytes(kv.key))[:2]) for kv in turns]
        if firsts:
            if reverse:  # the highest priority; its oldest number is read below if needed
                heads.append(((-max(first[0] for first in firsts), 0), end))
            else:
                heads.append((min((first[0], first[1]) for first in firsts), end))
    if reverse:
        heads = _oldest_of_the_best(reader, heads, grouped)
    return heads


def _oldest_of_the_best(
    reader: Any, heads: list[tuple[Rank, End]], grouped: list[End]
) -> list[tuple[Rank, End]]:
    """``heads`` of the max end, those sharing the best priority ranked by the count of
    that priority's first item (or the number of its first turn, for ``grouped`` ends):
    the oldest first. Cost: see :func:`ranked_heads`."""
    best = min((rank for rank, _end in heads), default=None)
    tied = [end for rank, end in heads if rank == best]
    if best is None or len(tied) < 2 or best[0] == -EXPIRED_FIRST:
        return heads
    priority = -best[0]
    reads = []
    for end in tied:
        store = end.store
        within = store.subspace.range((priority,))
        items = reader.get_range(within.start, within.stop, limit=1)
        turns = None
        if end in grouped:
            ranked = store.groups.turns.range((priority,))
            turns = reader.get_range(ranked.start, ranked.stop, limit=1)
        reads.append((items, turns))
    oldest = {}
    for end, (items, turns) in zip(tied, reads, strict=True):
        numbers = [end.store.unpack_position(bytes(kv.key))[1] for kv in items]
        numbers += [end.store.groups.turns.unpack(bytes(kv.key))[1] for kv in turns or ()]
        oldest[id(end)] = min(numbers, default=0)
    return [
        ((rank[0], oldest[id(end)]), end) if id(end) in oldest else (rank, end)
        for rank, end in heads
    ]
