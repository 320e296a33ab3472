"""When runs of item positions began: the age of a queue's oldest item, without a read.

An item's key holds its position (a Queue's ``(index, random)``, a PriorityQueue's
``(priority, count, random)``) and FoundationDB keeps no write time of a key, so the age of
the oldest item needs a time stored somewhere. Storing one with every item would change the
recipes' key layout, and reading a time record on every enqueue would add a read. Instead
small records say when the items of each *bucket* of :data:`BUCKET` consecutive positions
entered it, one record per bucket and *slot* of :data:`SLOT_SECONDS` wall-clock seconds in
which it received items::

    P + b"\\xff" + pack(("began", *prefix, bucket, slot)) -> offset + microseconds

where ``prefix`` is empty for a Queue and ``(priority,)`` for a PriorityQueue, ``bucket`` is
``index // BUCKET`` (``count // BUCKET``), ``slot`` is ``seconds // SLOT_SECONDS`` of the
enqueue's wall clock (:func:`fdbqueue._clock.now`), and the value (9 bytes: one, then eight
big-endian) is the lowest offset in the bucket (``index % BUCKET``) written in that slot and
the wall-clock microseconds of its enqueue.

An enqueue already knows the positions it writes (from its snapshot read of the last one),
so per bucket its items enter (one, unless it writes many items) it writes an atomic
``byte_min`` of its first offset there and its time: no read and no read conflict, and
enqueues never conflict over the records (atomic operations, which nobody reads with a
conflict range); the lower offset wins, and of equal offsets the earlier time. An enqueue
that found the queue (the priority) empty first clears the records at and above its bucket,
which the positions of an earlier run left. A take that begins a bucket (takes its first
position, or crosses into it) clears, blind too, the records of the buckets more than one
below the bucket of the last item it took (one is kept for consumers taking in line, a
little out of order; a plain ``dequeue`` or ``pop_min`` keeps none, as nothing waits below
the items it read with read conflict ranges), and a plain take (not in line) those of the
priorities it passed (below a ``pop_min``'s item, above a ``pop_max``'s), which it read
empty with read conflict ranges. So records stay one per slot in which a waiting item's
bucket received items: at most one per waiting item, and fewer as the rate grows (one item
a second: one record per five items; many a second: one per :data:`BUCKET` items), plus
those of the items taken from the front's bucket and, for takes in line, of the bucket kept
behind it (at a very low rate up to :data:`BUCKET` each), and one or two per priority in
use.

The age of the oldest item (:meth:`ItemAges.oldest_began`) is ``now`` minus the time of the
front item's record (:meth:`ItemAges.began_of`): the record of the latest slot of its bucket
whose offset is at or below the item's, which is the slot it was enqueued in (positions grow
with time). That is the time of an item enqueued in the same slot, at or before it, so an
**upper bound**, too large by less than :data:`SLOT_SECONDS` (5 s) at any rate of enqueues
and any number of shards (each shard keeps its own records; a queue's age is the oldest of
its shards'), and exact for an item that came first into its slot (at one item a minute,
every item); plus the skew between the enqueuing and the reading clients' clocks (a clock
ahead on the enqueuing side makes ages smaller, never below 0). Two enqueues that read the
same last position race: an age may be smaller by the time their transactions overlapped
(milliseconds). Wall-clock seconds, not versions: a recovery of the cluster, which makes
versions jump, changes no age, and a commit whose result was unknown and was retried writes
the record again with its retry's time, within the same bound. A record of an earlier
fdbqueue, ``("began", *prefix, bucket)`` with float64 LE seconds, reads as the record of the
bucket's first offset. Items that entered the queue another way (another program, an
fdbqueue without these records) have no record: ages ignore them (None when no item has
one). Items a shard moves to another (:meth:`fdbqueue._queues.shard.FifoShard.move_front`)
are recorded there with the time their bucket began, which the record of a lower offset in
the same slot of the target's bucket hides. Delayed items not yet due are not counted: a
delayed item's age starts when it falls due. Items in leases are not waiting and not
counted.

Message groups' items (:mod:`fdbqueue._storage.groups`) have records of their own, the same
way, each group a prefix::

    P + b"\\xff" + pack(("began_grouped", group, bucket, slot)) -> offset + microseconds

(``bucket`` counts the group's own indexes): written by the enqueue into the group, cleared
by its takes as above, and all of a group's cleared when the group becomes inactive. A
shard's oldest age is the older of its plain items' and its groups'.

The wall clock is fdbqueue's one clock, :func:`fdbqueue._clock.now`, which lease expiry times
and deduplication windows read too.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from fdb.subspace_impl import Subspace

from fdbqueue import _clock
from fdbqueue._transactions.transactional import AnyContext

__all__ = ["BUCKET", "SLOT_SECONDS", "ItemAges"]

#: Consecutive positions (indices, or counts of one priority) a bucket holds: takes clear
#: the records of whole buckets.
BUCKET = 64

#: Wall-clock seconds of a slot: the items a bucket received in one slot share one record,
#: so an age is too large by less than this.
SLOT_SECONDS = 5.0

#: A record's value: the lowest offset in the bucket written in the slot, and the wall-clock
#: microseconds of its enqueue (big-endian, so ``byte_min`` keeps the lower offset, then the
#: earlier time).
_RECORD = struct.Struct(">BQ")
#: A record of an earlier fdbqueue: when the bucket began, float64 LE seconds.
_OLD_RECORD = struct.Struct("<d")
#: Records one range read of :meth:`ItemAges.oldest_began` returns at most.
_PAGE = 10_000
#: Records one read of :meth:`ItemAges.began_of` returns at most: every slot of a bucket (at
#: most one per position, two per position when enqueues race) and one more below it.
_BUCKET_PAGE = 2 * BUCKET + 2


def _read(value: bytes) -> tuple[int, float]:
    """A record's offset and seconds."""
    if len(value) == _OLD_RECORD.size:
        return 0, _OLD_RECORD.unpack(value)[0]
    offset, microseconds = _RECORD.unpack(value)
    return offset, microseconds / 1_000_000


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
        # the last record key packed, by (prefix, bucket, slot) (see _record_key)
        self._last_record: tuple[tuple[Any, ...], bytes] | None = None
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
        """Record when an enqueue of positions ``first`` to ``first + n - 1`` under ``prefix``
        (``()`` or ``(priority,)``) entered their buckets; ``found_empty``: its read found no
        item under ``prefix``. ``at``: the time to record (None: :func:`fdbqueue._clock.now`'s),
        for items moved with the time they began.

        Cost: per bucket the items enter (one, or one per :data:`BUCKET` items of a large
        enqueue) an atomic ``byte_min`` of 9 bytes, and when it found the queue empty a clear
        range first (of the records the earlier run left); no reads, no read conflicts."""
        if n <= 0:
            return
        seconds = _clock.now() if at is None else at
        slot = int(seconds // SLOT_SECONDS)
        microseconds = max(0, round(seconds * 1_000_000))
        first_bucket, offset = divmod(first, BUCKET)
        if found_empty:
            tr.clear_range(self.records.pack((*prefix, first_bucket)), self._prefix_end(prefix))
        tr.byte_min(
            self._record_key(prefix, first_bucket, slot), _RECORD.pack(offset, microseconds)
        )
        if offset + n > BUCKET:  # the items enter later buckets too, each from its start
            for bucket in range(first_bucket + 1, (first + n - 1) // BUCKET + 1):
                tr.byte_min(self._record_key(prefix, bucket, slot), _RECORD.pack(0, microseconds))

    def _record_key(self, prefix: tuple[Any, ...], bucket: int, slot: int) -> bytes:
        """The key of the record of ``bucket`` (under ``prefix``) for ``slot``: the last
        one packed is kept, as the enqueues of one slot into one bucket share it."""
        last = self._last_record
        if last is not None and last[0] == (prefix, bucket, slot):
            return last[1]
        key: bytes = self.records.pack((*prefix, bucket, slot))
        self._last_record = ((prefix, bucket, slot), key)
        return key

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
        below may still wait. With ``lower`` (a plain take from the low end: ``dequeue``,
        ``pop_min``), the records of every bucket below ``last``'s and of every priority
        below it; with ``higher``, those of every priority above ``last``'s: the take read
        that end with read conflict ranges up to its items, so none of their items waits,
        and an enqueue among them makes the take retry (a Queue has no priorities: nothing
        more). Other takes write nothing here.

        Cost: nothing, or (once per bucket begun) one to two clear ranges; no reads, and no
        read conflicts added (nobody reads the records with one)."""
        length = self.prefix_length
        position = last[length]
        began = (
            position % BUCKET == 0  # (begins_bucket, without its call: every take asks)
            or (first is not last and first[length] // BUCKET != position // BUCKET)
            or (length and first[:length] != last[:length])
        )
        if not began:
            return
        prefix = tuple(last[:length])
        bucket = position // BUCKET
        within = self.records.range(prefix)
        kept = bucket if lower else max(0, bucket - 1)  # the first bucket whose records stay
        if lower and prefix:
            tr.clear_range(self.begin, self.records.pack((*prefix, kept)))
        elif kept > 0:
            tr.clear_range(within.start, self.records.pack((*prefix, kept)))
        if higher and prefix:
            tr.clear_range(within.stop, self.end)

    @staticmethod
    def begins_bucket(index: int) -> bool:
        """Whether the item at ``index`` (a Queue's index, a priority's count, a group's
        index) is the first position of its bucket: a take of it alone begins a bucket
        (:meth:`taken` then clears the records behind it)."""
        return index % BUCKET == 0

    def began_of(self, reader: Any, key: bytes) -> float | None:
        """When the item at ``key`` (of this queue's item subspace) was enqueued, at most
        :data:`SLOT_SECONDS` early (wall-clock seconds): the time of the latest record of its
        bucket whose offset is at or below the item's (the slot it was enqueued in), else of
        the latest record below its bucket under its prefix; None without one. Cost: one
        snapshot-or-not (as ``reader``) reverse range read of the bucket's records (one per
        slot in which the bucket received items: at most about :data:`BUCKET`) and one
        below; rarely (enqueues racing at every position) another."""
        position = self.items.unpack(key)
        length = self.prefix_length
        prefix = tuple(position[:length])
        bucket, offset = divmod(position[length], BUCKET)
        begin = self.records.range(prefix).start
        end = self.records.pack((*prefix, bucket + 1))
        while True:
            page = list(reader.get_range(begin, end, limit=_BUCKET_PAGE, reverse=True))
            for record in page:
                record_offset, seconds = _read(bytes(record.value))
                if (
                    record_offset <= offset
                    or self.records.unpack(bytes(record.key))[length] < bucket
                ):
                    return seconds
            if len(page) < _BUCKET_PAGE:
                return None
            end = bytes(page[-1].key)

    def oldest_began(
        self, reader: Any, first_key: Callable[[tuple[Any, ...]], bytes | None]
    ) -> float | None:
        """When the oldest item was enqueued, at most :data:`SLOT_SECONDS` early (wall-clock
        seconds; :meth:`began_of`), or None when no item has a record. ``first_key(prefix)``
        returns the key of the first item under ``prefix`` (None: none). Read through
        ``reader`` (a snapshot view for no conflicts).

        Cost: for a Queue's items (no prefix), ``first_key``'s read and :meth:`began_of`'s.
        With prefixes (priorities, groups): one range read of the records (per 10,000 of
        them; see the module docstring for how many there are), then, in order of their
        earliest record, ``first_key``'s read for each prefix that may hold the oldest item
        (usually one; more when priorities emptied and left a record) and
        :meth:`began_of`'s for the first that holds an item.
        """
        if not self.prefix_length:  # one prefix: no need to find which began first
            key = first_key(())
            return None if key is None else self.began_of(reader, key)
        earliest: dict[tuple[Any, ...], float] = {}
        begin = self.begin
        while True:
            page = list(reader.get_range(begin, self.end, limit=_PAGE))
            for record in page:
                position = self.records.unpack(bytes(record.key))
                prefix = tuple(position[: self.prefix_length])
                seconds = _read(bytes(record.value))[1]
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
