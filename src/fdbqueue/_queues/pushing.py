"""Writing to a priority queue: ``push`` (with delays and message groups), and the recipe's
append at the back of a priority that every write of a PriorityQueue goes through.

:class:`Pushing` holds :class:`~fdbqueue.PriorityQueue`'s writing methods (the class inherits
them), as :mod:`fdbqueue._queues.enqueueing` does for a Queue: ``push`` checks the value, the
priority and the group, ``_push`` runs in the shard the queue's parts choose (exactly once,
by that shard's receipts), and :func:`push_at_back` writes the item after the last count of
its priority (a snapshot read: pushes never conflict), as FoundationDB's "Priority Queues"
recipe does, or after the last item of its group (:mod:`fdbqueue._storage.groups`).

Source followed: FoundationDB's "Priority Queues" recipe (``MicroPriority``: the next count of
a priority by a reverse range read with ``limit=1``, a snapshot read).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Generic

from fdbqueue._delivery.delays import DelayedItems, check_delay
from fdbqueue._queues.shards import Parts
from fdbqueue._queues.stored_queue import T
from fdbqueue._storage.groups import Group
from fdbqueue._storage.store import ItemStore
from fdbqueue._transactions.receipts import exactly_once
from fdbqueue._transactions.transactional import TransactionContext, require_writable

__all__ = ["Pushing", "check_priority", "push_at_back"]


def check_priority(priority: Any) -> None:
    """Raise TypeError unless ``priority`` is an int (a bool is refused)."""
    if type(priority) is bool or not isinstance(priority, int):
        raise TypeError(f"priority must be an int, not {type(priority).__name__}")


class Pushing(Generic[T]):
    """:class:`~fdbqueue.PriorityQueue`'s writing methods (see the module docstring)."""

    _store: ItemStore
    _parts: Parts[Any]
    _delays: DelayedItems

    def push(
        self,
        tr: TransactionContext,
        value: T,
        priority: int,
        *,
        delay: float | None = None,
        group: Group | None = None,
    ) -> None:
        """Add ``value`` with ``priority``; with ``delay``, once that many seconds passed.

        Args:
            tr: a Database, Tenant or Transaction.
            value: any value the codec encodes, except None.
            priority: an int of any size the tuple layer packs (negative allowed). Lower
                priorities come out of :meth:`pop_min` first, higher ones out of
                :meth:`pop_max`.
            delay: seconds (at most 30 days) before consumers may pop the item; None or 0:
                at once. Once due, it joins the back of its priority (or of its group) when
                the next consumer looks (:doc:`delayed-delivery`).
            group: a str, bytes, int or tuple naming the item's message group: a group's
                items come out in push order whatever their priorities, one at a time under
                leases, and a group's turn ranks by its first item's priority
                (:doc:`groups`). None: no group.

        Raises:
            TypeError: ``priority`` is not an int (bools are refused too), the codec cannot
                encode ``value``, ``delay`` is not a number, ``group`` is not a group, or
                ``tr`` is of the wrong type.
            ValueError: ``value`` is None or encodes to more than 100,000 bytes, the
                priority is beyond the tuple layer's integer range, ``delay`` is out of
                range, or the group's keys would be too long.

        Nothing is written when an error is raised. Cost: one snapshot range read inside the
        priority (no read conflict range), one set, two atomic adds; it never conflicts with
        other pushes or pops. Delayed: the read version, one set and two atomic adds. With
        ``group``: as a Queue's enqueue into a group (:meth:`fdbqueue.Queue.enqueue`).
        """
        check_priority(priority)
        seconds = check_delay(delay)
        encoded = self._store.encode(value)
        self._store.item_key((priority, 0))  # checks the priority packs and the key fits
        where: tuple[Any, ...] = (priority,)
        if group is None:
            part = self._parts.writer()
        else:
            part = self._parts.for_group(group, priority)
            where = (priority, group)
        if seconds:
            self._delays.check_key(where)
        part._push(tr, encoded, where, seconds)

    @exactly_once
    def _push(
        self, tr: TransactionContext, encoded: bytes, where: tuple[Any, ...], delay: float = 0.0
    ) -> None:
        require_writable(tr, "push")
        recorded = self._store.recorded_type(tr)  # overlaps the last count's read
        if delay:
            self._store.check_type(tr, recorded)
            self._delays.put(tr, [encoded], delay, where)
        else:
            check = functools.partial(self._store.check_type, tr, recorded)
            push_at_back(self._store, tr, encoded, where, check)


def push_at_back(
    store: ItemStore,
    tr: TransactionContext,
    encoded: bytes,
    where: tuple[Any, ...],
    check_type: Callable[[bool], None] = lambda record: None,
) -> None:
    """Write ``encoded`` after the last item of the priority ``where[0]``, or of the group
    ``where[1]`` when given (a push, a delayed item falling due, a requeued dead letter);
    ``check_type(record)`` (:meth:`~fdbqueue._storage.store.ItemStore.check_type`) runs
    before any write."""
    priority = where[0]
    if len(where) > 1:
        check_type(True)
        store.groups.append(tr, where[1], [encoded], priority)
        return
    try:
        count = _next_count(store, tr, priority)
    except ValueError:  # a foreign key: say first if a queue of another type is here
        check_type(False)
        raise
    check_type(True)
    store.write(tr, store.item_key((priority, count)), encoded)


def where_of(store: ItemStore, item_key: bytes) -> tuple[Any, ...]:
    """Where an item of ``item_key`` goes back to (:func:`push_at_back`'s ``where``): its
    priority, and its group when it has one."""
    group = store.groups.group_of(item_key)
    if group is None:
        return store.unpack_position(item_key)[:1]
    return (store.unpack_position(item_key)[2], group)


def _next_count(store: ItemStore, tr: TransactionContext, priority: int) -> int:
    """1 + the last count used for ``priority``, or 0 (snapshot read: no conflict)."""
    within = store.subspace.range((priority,))
    last = store.read(tr, within.start, within.stop, reverse=True, snapshot=True)
    if not last:
        return 0
    count: int = store.unpack_position(last[0].key)[1]
    return count + 1
