"""Writing to a FIFO queue: ``enqueue`` and ``enqueue_many`` (with delays and idempotent
enqueue), and the recipe's append at the back that every write of a Queue goes through.

:class:`Enqueueing` holds :class:`~fdbqueue.Queue`'s writing methods (the class inherits them),
so that the path of a value from ``enqueue`` to its key reads in one place:
``enqueue`` encodes and checks the value and the id, ``_append`` runs in the shard the queue's
parts choose (exactly once, by that shard's receipts), admits the id
(:mod:`fdbqueue._delivery.deduplication`), and :func:`append_at_back` writes the item after the
last index (a snapshot read: enqueues never conflict), as FoundationDB's "Queues" recipe does.

Source followed: FoundationDB's "Queues" recipe (the last index by a reverse range read with
``limit=1``; snapshot reads so that enqueues do not conflict).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, Generic

from fdbqueue._delivery.deduplication import DedupId, Deduplication, check_dedup_id
from fdbqueue._delivery.delays import DelayedItems, check_delay
from fdbqueue._queues.shards import Parts
from fdbqueue._queues.stored_queue import T
from fdbqueue._storage.groups import Group
from fdbqueue._storage.store import ItemStore
from fdbqueue._transactions.receipts import exactly_once
from fdbqueue._transactions.transactional import TransactionContext, require_writable

__all__ = ["Enqueueing", "append_at_back"]


class Enqueueing(Generic[T]):
    """:class:`~fdbqueue.Queue`'s writing methods (see the module docstring)."""

    _store: ItemStore
    _parts: Parts[Any]
    _deduplication: Deduplication
    _delays: DelayedItems

    def enqueue(
        self,
        tr: TransactionContext,
        value: T,
        *,
        delay: float | None = None,
        dedup_id: DedupId | None = None,
        group: Group | None = None,
    ) -> bool:
        """Add ``value`` at the back of the queue; with ``delay``, once that many seconds passed.

        Args:
            tr: a Database, Tenant or Transaction.
            value: any value the queue's codec encodes, except None.
            delay: seconds (at most 30 days) before consumers may take the item (None or 0: at
                once); it then joins the back of the queue (:doc:`delayed-delivery`).
            dedup_id: a str, bytes or int naming this enqueue: when an enqueue with the same
                id was accepted within ``dedup_window`` seconds, nothing is enqueued
                (:doc:`idempotency`).
            group: a str, bytes, int or tuple naming the item's message group: items of
                one group are taken in enqueue order, at most one at a time under leases, and
                groups are served in turn (:doc:`groups`). None: no group.

        Returns:
            True when the value was enqueued; False when ``dedup_id`` was seen in the window.

        Raises:
            ValueError: ``value`` is None or over 100,000 bytes encoded, a bad ``delay`` or
                ``dedup_id``, or the subspace holds a PriorityQueue
                (:class:`~fdbqueue.QueueTypeError`).
            TypeError: the codec cannot encode ``value``, or a wrong type of ``delay``,
                ``dedup_id``, ``group`` or ``tr``.

        Nothing is written when an error is raised. Cost: one snapshot range read and a
        snapshot point read (no read conflict range), one set and two atomic adds (delayed:
        no range read): no conflicts with enqueues or dequeues. With ``dedup_id``: a point
        read with a read conflict on the id's record and two sets (an enqueue of the same id
        may conflict, no other), and the clean-up of two expired records. With ``group``: a
        point read with a read conflict on the group's active record (an enqueue conflicts
        only with the take that empties the group), and, when it makes the group active, a
        snapshot range read, two sets and an atomic add (:doc:`groups`).
        """
        ids = None if dedup_id is None else [check_dedup_id(dedup_id)]
        encoded = [self._store.encode(value)]
        seconds = check_delay(delay)
        part = self._part_for(group, seconds)
        return _append(part, tr, encoded, seconds, self._dedup(ids), group)[0]

    def enqueue_many(
        self,
        tr: TransactionContext,
        values: Iterable[T],
        *,
        delay: float | None = None,
        dedup_ids: Iterable[DedupId] | None = None,
        group: Group | None = None,
    ) -> list[bool]:
        """Add every value of ``values`` at the back of the queue, in order, atomically (all
        delayed by ``delay`` seconds, as for :meth:`enqueue`, and kept in order); with
        ``dedup_ids`` (one per value), those whose id was seen are left out; with ``group``,
        all into that group, in order.

        Every value is checked before anything is written (a bad one changes nothing). Cost:
        as one :meth:`enqueue`, plus one set per further value (and per id); no conflicts.

        Returns:
            Per value, whether it was enqueued.

        Raises:
            ValueError, TypeError: as :meth:`enqueue`, for any value or id; ``dedup_ids`` of
                another length than ``values``; or the batch exceeds FoundationDB's
                10,000,000-byte transaction limit.
        """
        seconds = check_delay(delay)
        part = self._part_for(group, seconds)
        encoded = self._store.encode_many(values)
        ids = None if dedup_ids is None else [check_dedup_id(i) for i in dedup_ids]
        if ids is not None and len(ids) != len(encoded):
            raise ValueError(f"{len(ids)} dedup_ids for {len(encoded)} values")
        suffix = None
        if group is not None:  # a group's item keys are longer than the recipe's
            longest = part._store.groups.longest_item_key(group)
            suffix = longest - len(self._store.subspace.key())
        self._store.check_batch_fits(encoded, suffix)
        if not encoded:
            return []
        return _append(part, tr, encoded, seconds, self._dedup(ids), group)

    def _part_for(self, group: Any, delay: float) -> Any:
        """The part (shard) an enqueue writes to: the next in turn, or the group's; raise
        before anything is written when ``group`` cannot name a group of this queue."""
        if group is None:
            return self._parts.writer()
        part = self._parts.for_group(group)
        if delay:
            part._delays.check_key((group,))
        return part

    def _dedup(self, ids: list[bytes] | None) -> tuple[Deduplication, list[bytes]] | None:
        return None if ids is None else (self._deduplication, ids)


@exactly_once
def _append(
    part: Any,
    tr: TransactionContext,
    encoded: list[bytes],
    delay: float,
    dedup: tuple[Deduplication, list[bytes]] | None,
    group: Group | None,
) -> list[bool]:
    """Write ``encoded`` at the back of ``part`` (a shard, or the queue), or of its ``group``,
    delayed by ``delay`` seconds; with ``dedup``, only the values whose id it admits. Per
    value, whether written."""
    require_writable(tr, "enqueue")
    admitted = [True] * len(encoded) if dedup is None else dedup[0].admit(tr, dedup[1])
    written = [value for value, admit in zip(encoded, admitted, strict=True) if admit]
    if written:
        store = part._store
        check = functools.partial(store.check_type, tr, store.recorded_type(tr))
        if delay:
            check(True)
            part._delays.put(tr, written, delay, () if group is None else (group,))
        else:
            append_at_back(store, tr, written, check, group)
    return admitted


def _last_index(store: ItemStore, tr: TransactionContext) -> int:
    """The index of the last item, 0 for an empty queue (snapshot read: no conflict)."""
    last = store.read(tr, limit=1, reverse=True, snapshot=True)
    if not last:
        return 0
    index: int = store.unpack_position(last[0].key)[0]
    return index


def append_at_back(
    store: ItemStore,
    tr: TransactionContext,
    encoded: list[bytes],
    check_type: Callable[[bool], None] = lambda record: None,
    group: Group | None = None,
) -> None:
    """Write ``encoded`` values after the last item, in order, as the recipe's enqueue does,
    or after the last item of ``group`` (:mod:`fdbqueue._storage.groups`);
    ``check_type(record)`` (:meth:`~fdbqueue._storage.store.ItemStore.check_type`) runs once the
    last index is read, before any write."""
    if group is not None:
        check_type(True)
        store.groups.append(tr, group, encoded)
        return
    try:
        index = _last_index(store, tr)
    except ValueError:  # a foreign key: say first if a queue of another type is stored here
        check_type(False)
        raise
    check_type(True)
    for value in encoded:
        index += 1
        store.write(tr, store.item_key((index,)), value)
