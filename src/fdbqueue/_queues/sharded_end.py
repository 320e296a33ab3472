"""One end of a sharded queue: the same end of every shard, taken from as one.

A take first tries one shard chosen at random, as an unsharded queue's take would (plainly,
or in the shard's line with ``high_contention=True``): consumers that start at different
shards never meet. When that shard is empty, one more transaction reads every shard's size
counter and delayed-items hint (snapshot point reads, issued together: one round trip, no
conflict) and takes from the shards that hold items, in random order, in that same
transaction. So a take returns None only when every shard was empty at that transaction's
read version (delayed items not yet due aside, as for an unsharded queue).

Claims look at every shard in the second transaction (a shard whose items are all leased
holds no item by its counter, yet an expired lease makes one claimable).

Ordering: each shard is FIFO; across shards there is no order (an item of one shard may be
taken before an older item of another). Every item is taken exactly once, as from one shard.

Source followed: FoundationDB's "Queues" recipe within each shard; sharding as QuiCK (CloudKit's
queues on FoundationDB) and Amazon SQS partitions do it: consumers pick a partition.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Sequence
from typing import Any

from fdbqueue._consuming.ends import End
from fdbqueue._consuming.sessions import Consumer
from fdbqueue._delivery.delays import soonest
from fdbqueue._delivery.leases import Lease
from fdbqueue._storage.taking import MOVED_ASIDE
from fdbqueue._transactions.transactional import AnyContext, is_database
from fdbqueue._transactions.waiting import take_blocking

__all__ = ["ShardedEnd"]

_COUNTER = struct.Struct("<q")
_VERSION = struct.Struct("<Q")


class ShardedEnd:
    """The end ``ends[0].read`` names, over every shard (one :class:`End` per shard).

    Args:
        ends: the same end of each shard, shard 0 first.
        metric_name: the queue's name in metrics (blocking waits are recorded under it).
    """

    def __init__(self, ends: Sequence[End], metric_name: str) -> None:
        self.ends = list(ends)
        self.metric_name = metric_name

    # -- taking -----------------------------------------------------------------------------

    def take(self, tr: AnyContext, block: bool, seconds: float | None) -> Any:
        """Take one value (arguments checked by the caller); None when every shard is empty."""
        if not block:
            return self._take_one(tr)
        return self._blocking(tr, lambda database, _deadline: self._take_one(database), seconds)

    def take_many(self, tr: AnyContext, n: int) -> list[Any]:
        """Take up to ``n`` values from one shard (a shard with items, when there is one)."""
        first = self._start()
        values: list[Any] = first.take_many(tr, n)
        if values:
            return values
        found: list[Any] = self._run(tr, first, lambda tr, end: end.take_many(tr, n) or None)
        return found or []

    def _take_one(self, tr: AnyContext) -> Any:
        first = self._start()
        value = first.take(tr, False, None)
        if value is not None:
            return value
        return self._run(tr, first, lambda tr, end: end._take_one(tr))

    # -- claiming ---------------------------------------------------------------------------

    def claim(
        self, tr: AnyContext, seconds: float, block: bool, wait: float | None
    ) -> Lease[Any] | None:
        """Claim one item under a lease of ``seconds`` (arguments checked by the caller)."""
        if not block:
            return self._claim_one(tr, seconds)
        lease: Lease[Any] | None = self._blocking(
            tr, lambda database, _deadline: self._claim_one(database, seconds), wait
        )
        return lease

    def claim_many(self, tr: AnyContext, n: int, seconds: float) -> list[Lease[Any]]:
        """Claim up to ``n`` items from one shard (one with items, when there is one)."""
        first = self._start()
        leases: list[Lease[Any]] = first.claim_many(tr, n, seconds)
        if leases:
            return leases
        found: list[Lease[Any]] = self._run(
            tr, first, lambda tr, end: end.claim_many(tr, n, seconds) or None, every_shard=True
        )
        return found or []

    def _claim_one(self, tr: AnyContext, seconds: float) -> Lease[Any] | None:
        claimed = self.claim_many(tr, 1, seconds)
        return claimed[0] if claimed else None

    def consumer(self, database: Any, prefetch: int, abandon_after: float) -> Consumer:
        """Consumer sessions on sharded queues are not built yet."""
        raise NotImplementedError(
            "consumer sessions on a sharded queue are not available yet: use plain takes "
            "(high_contention=True takes in line within each shard)"
        )

    # -- the shards -------------------------------------------------------------------------

    def _start(self) -> End:
        return random.choice(self.ends)

    def _run(
        self,
        tr: AnyContext,
        first: End,
        take: Callable[[Any, End], Any],
        *,
        every_shard: bool = False,
    ) -> Any:
        """The second transaction of a take: read every shard's counter and hint, then
        ``take(tr, end)`` from the shards that hold items (all of them with ``every_shard``)
        in random order, until one returns something other than None. Given a Database, one
        transaction, exactly once (the first shard's receipts); given a Transaction, in it."""

        def body(tr: Any) -> Any:
            for end in self._candidates(tr, every_shard):
                found = take(tr, end)
                if found is not None and found is not MOVED_ASIDE:
                    return found
            return None

        if not is_database(tr):
            return body(tr)
        receipts = first._store.receipts
        return receipts.run(tr, body, wrote=lambda found: found is not None)

    def _candidates(self, tr: Any, every_shard: bool) -> list[End]:
        """The shards holding items at ``tr``'s read version (size counter above 0, or a
        delayed item due), in random order. Cost: two snapshot point reads per shard, issued
        together, and the read version."""
        ends = list(self.ends)
        random.shuffle(ends)
        if every_shard:
            return ends
        reader = tr.snapshot
        sizes = [reader.get(end._store.size_key) for end in ends]
        hints = [reader.get(end.delays.hint_key) for end in ends]
        version = tr.get_read_version().wait()
        found = []
        for end, size, hint in zip(ends, sizes, hints, strict=True):
            held = size.present() and _COUNTER.unpack(bytes(size))[0] > 0
            due = hint.present() and _VERSION.unpack(bytes(hint))[0] <= version
            if held or due:
                found.append(end)
        return found

    def _blocking(
        self, database: Any, take: Callable[[Any, float | None], Any], seconds: float | None
    ) -> Any:
        """``take`` until it returns a value or ``seconds`` pass, waiting on every shard's
        signal key (one watch per shard) between attempts."""
        return take_blocking(
            database,
            take,
            [end._store.signal_key for end in self.ends],
            seconds,
            lambda: soonest(
                *(end.leases.seconds_until_expiry() for end in self.ends),
                *(end.delays.seconds_until_due() for end in self.ends),
            ),
            queue=self.metric_name,
        )
