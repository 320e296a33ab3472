"""When ranges of item positions began: the age of a queue's oldest item, without a read.

An item's key holds its position (a Queue's ``(index, random)``, a PriorityQueue's
``(priority, count, random)``) and FoundationDB keeps no write time of a key, so the age of
the oldest item needs a time stored somewhere. Storing one with every item would change the
recipes' key layout, and reading a time record on every enqueue would add a read. Instead a
sparse record says when each *bucket* of :data:`BUCKET` consecutive positions began::

    P + b"\\xff" + pack(("began", *prefix, bucket)) -> float64 LE: wall-clock seconds

where ``prefix`` is empty for a Queue and ``(priority,)`` for a PriorityQueue, and ``bucket``
is ``index // BUCKET`` (``count // BUCKET``). An enqueue already knows the positions it writes
(from its snapshot read of the last one), so it writes the record of each bucket whose first
position it writes, and of its first position's bucket when it found the queue (the priority)
empty: a blind set, no read, no read conflict, at most one record per bucket per enqueue;
enqueues never conflict over them (nobody reads them with a conflict range). An enqueue that
found the queue (the priority) empty first clears the records at and above its bucket, which
the positions of an earlier run left. A take that begins a bucket (takes its first
position, or crosses into it) clears, blind too, the records of the buckets more than one
below the bucket of the last item it took (one is kept for consumers taking
in line, a little out of order), and a plain take (not in line) those of the priorities it
passed (below a ``pop_min``'s item, above a ``pop_max``'s), which it read empty with read
conflict ranges: records stay about ``items / BUCKET`` plus two per priority in use.

The age of the oldest item (:meth:`ItemAges.oldest_began`) is ``now`` minus the record of the
front item's bucket (the latest record at or below it): an **upper bound**, too large by at
most the time between the first enqueue into that bucket and the front item's own enqueue,
so at most the time the queue took to receive :data:`BUCKET` items, plus the skew between the
enqueuing and the reading clients' clocks (a clock ahead on the enqueuing side makes ages
smaller, never below 0). Two enqueues that both found the queue empty race for the record of
its first bucket: it may be later than the first item by the time their transactions
overlapped (milliseconds). Wall-clock seconds, not versions: a recovery of the cluster,
which makes versions jump, changes no age, and a commit whose result was unknown and was
retried writes the record again with its retry's time, within the same bound. Items that
entered the queue another way (another program, an fdbqueue without this record) have no
record: ages ignore them (None when no item has one). Delayed items not yet due are not
counted: a delayed item's age starts when it falls due. Items in leases are not waiting and
not counted.

Message groups' items (:mod:`fdbqueue._storage.groups`) have records of their own, the same
way, each group a prefix::

    P + b"\\xff" + pack(("began_grouped", group, bucket)) -> float64 LE: wall-clock seconds

(``bucket`` counts the group's own indexes): written by the enqueue into the group, cleared
by its takes as above, and all of a group's cleared when the group becomes inactive, so they
stay about ``grouped items / BUCKET`` plus one per active group. A shard's oldest age is the
older of its plain items' and its groups'.

:data:`clock` is fdbqueue's wall clock: these records, lease expiry times and deduplication
windows (:func:`fdbqueue._delivery.leases.wall_clock`) all read it. Tests and callers can set
it, a function that gives wall-clock seconds.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from fdb.subspace_impl import Subspace

from fdbqueue import memory
from fdbqueue._transactions.transactional import AnyContext

__all__ = ["BUCKET", "ItemAges", "clock"]

#: Consecutive positions (indices, or counts of one priority) one record covers.
BUCKET = 64

#: fdbqueue's wall clock, in seconds since the epoch: the seconds an enqueue records and an
#: age is measured against, and what lease expiry times and deduplication windows are
#: measured by besides read versions. :func:`fdbqueue.memory.wall_clock`: ``time.time()``,
#: moved on by the in-memory database's ``pass_time`` (tests also replace it with a
#: controlled clock).
clock: Callable[[], float] = memory.wall_clock

_SECONDS = struct.Struct("<d")
#: Records one range read of :meth:`ItemAges.oldest_began` returns at most.
_PAGE = 10_000


class ItemAges:
    """The ``began`` records of one queue (or shard): see the module docstring.

    Args:
        metadata: the queue's metadata subspace (``P + b"\\xff"``).
        items: the queue's item subspace (or its groups' items).
        leading_integers: the elements of an item's position up to its index: 1 for a Queue
            (``(index, random)``), 2 for a PriorityQueue (``(priority, count, random)``) and
            for groups' items (``(group, index, ...)``).
        name: the records' name under ``metadata``: ``"began"``, or ``"began_grouped"`` for
            groups' items.
    """

    def __init__(
        self, metadata: Subspace, items: Subspace, leading_integers: int, name: str = "began"
    ) -> None:
        self.records = metadata.subspace((name,))
        self.items = items
        self.prefix_length = leading_integers - 1
        records = self.records.range()
        self.begin: bytes = records.start
        self.end: bytes = records.stop

    def appended(
        self,
        tr: AnyContext,
        prefix: tuple[Any, ...],
        first: int,
        n: int,
        found_empty: bool,
        at: float | None = None,
    ) -> None:
        """Record the buckets an enqueue of positions ``first`` to ``first + n - 1`` under
        ``prefix`` begins (``()`` or ``(priority,)``); ``found_empty``: its read found no item
        under ``prefix``. Cost: per bucket begun a set (one per :data:`BUCKET` items, one
        more when it found the queue empty, then after a clear range of the records the
        earlier run left); no reads, no read conflicts. ``at``: the time to record (None:
        :data:`clock`'s), for items moved with the time they began."""
        if n <= 0:
            return
        now = _SECONDS.pack(clock() if at is None else at)
        first_bucket = first // BUCKET
        if found_empty:
            tr.clear_range(self.records.pack((*prefix, first_bucket)), self._prefix_end(prefix))
            tr[self.records.pack((*prefix, first_bucket))] = now
        start = -(-first // BUCKET) * BUCKET  # the first bucket boundary at or after first
        for position in range(start, first + n, BUCKET):
            tr[self.records.pack((*prefix, position // BUCKET))] = now

    def taken(
        self,
        tr: AnyContext,
        first: tuple[Any, ...],
        last: tuple[Any, ...],
        *,
        lower: bool,
        higher: bool,
    ) -> None:
        """After a take of the items at positions ``first`` to ``last`` (in take order), when
        it began a bucket (``last`` is the first position of its bucket, or ``first`` lies in
        another bucket or priority), clear the records of the buckets more than one below
        ``last``'s under its prefix: one bucket is kept, as consumers taking in line take
        items a little out of order (the k-th request in line the k-th item), so items just
        below may still wait. With ``lower`` (``higher``), the records of every priority
        below (above) ``last``'s too: the take read that end with read conflict ranges up to
        its items, so none of their items waits, and an enqueue into them makes the take
        retry (a Queue has no priorities: nothing more). Other takes write nothing here.

        Cost: nothing, or (once per bucket begun) one to two clear ranges; no reads, and no
        read conflicts added (nobody reads the records with one)."""
        length = self.prefix_length
        position = last[length]
        began = (
            position % BUCKET == 0
            or first[length] // BUCKET != position // BUCKET
            or first[:length] != last[:length]
        )
        if not began:
            return
        prefix = tuple(last[:length])
        bucket = position // BUCKET
        within = self.records.range(prefix)
        if lower and prefix:
            tr.clear_range(self.begin, self.records.pack((*prefix, max(0, bucket - 1))))
        elif bucket > 1:
            tr.clear_range(within.start, self.records.pack((*prefix, bucket - 1)))
        if higher and prefix:
            tr.clear_range(within.stop, self.end)

    def began_of(self, reader: Any, key: bytes) -> float | None:
        """When the bucket of the item at ``key`` (of this queue's item subspace) began: the
        latest record at or below it under its prefix, or None without one. Cost: one
        snapshot-or-not (as ``reader``) reverse range read of one key."""
        position = self.items.unpack(key)
        prefix = tuple(position[: self.prefix_length])
        bucket = position[self.prefix_length] // BUCKET
        found = list(
            reader.get_range(
                self.records.range(prefix).start,
                self.records.pack((*prefix, bucket + 1)),
                limit=1,
                reverse=True,
            )
        )
        return _SECONDS.unpack(bytes(found[0].value))[0] if found else None

    def oldest_began(
        self, reader: Any, first_key: Callable[[tuple[Any, ...]], bytes | None]
    ) -> float | None:
        """When the bucket of the oldest item began (wall-clock seconds), or None when no
        item has a record. ``first_key(prefix)`` returns the key of the first item under
        ``prefix`` (None: none). Read through ``reader`` (a snapshot view for no conflicts).

        Cost: one range read of the records (per 10,000 of them: about one per
        :data:`BUCKET` items plus one per priority in use), then, in order of their earliest
        record, ``first_key``'s read for each prefix that may hold the oldest item (usually
        one; more when priorities emptied and left a record) and a reverse range read of
        one key for the first that holds an item.
        """
        earliest: dict[tuple[Any, ...], float] = {}
        begin = self.begin
        while True:
            page = list(reader.get_range(begin, self.end, limit=_PAGE))
            for record in page:
                position = self.records.unpack(bytes(record.key))
                prefix = tuple(position[: self.prefix_length])
                seconds = _SECONDS.unpack(bytes(record.value))[0]
                if prefix not in earliest or seconds < earliest[prefix]:
                    earliest[prefix] = seconds
            if len(page) < _PAGE:
                break
            begin = bytes(page[-1].key) + b"\x00"
        best: float | None = None
        for prefix, seconds in sorted(earliest.items(), key=lambda pair: pair[1]):
            if best is not None and seconds >= best:
                break  # every later prefix began after the oldest found
            key = first_key(prefix)
            if key is None:
                continue  # emptied: its records wait for its next enqueue or take
            began = self.began_of(reader, key)
            if began is not None and (best is None or began < best):
                best = began
        return best

    def clear(self, tr: AnyContext) -> None:
        """Remove every record. Cost: one range clear."""
        tr.clear_range(self.begin, self.end)

    def forget(self, tr: AnyContext, prefix: tuple[Any, ...]) -> None:
        """Remove the records under ``prefix`` (a group that became inactive). Cost: one
        range clear, no read."""
        within = self.records.range(prefix)
        tr.clear_range(within.start, within.stop)

    def _prefix_end(self, prefix: tuple[Any, ...]) -> bytes:
        stop: bytes = self.records.range(prefix).stop
        return stop
