"""Reading the two ends of a priority queue: its lowest and its highest priority.

Items sort by ``(priority, count, random)``, so the lowest priority's oldest item is the first
key of the subspace: the min end is one forward range read, as a FIFO queue's front. The max
end is not the last key (that is the highest priority's *newest* item): a snapshot reverse
read with ``limit=1`` finds the highest priority, then a forward read within that priority
finds its oldest items. The read conflict ranges a take needs are added explicitly:
everything above that priority, and the priority's items up to the one taken, so that a
concurrent push of a higher priority, or a concurrent pop of the same item, makes the taking
transaction retry, while pushes of newer items of the same or lower priorities do not.

Each function here is a :data:`fdbqueue._consuming.ends.ReadEnd` once given the queue's store.

Source followed: FoundationDB's "Priority Queues" recipe (``MicroPriority``: the first item
of the lowest priority, the last priority found with a reverse ``limit=1`` read).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from fdbqueue._storage.store import ItemStore
from fdbqueue._transactions.transactional import AnyContext

__all__ = ["max_end_candidates", "max_end_items", "min_end_items"]

#: Items read per range read within one priority, past the first.
BATCH = 16


def min_end_items(store: ItemStore, tr: AnyContext, n: int, snapshot: bool) -> list[Any]:
    """Up to ``n`` items of the lowest priorities, oldest first (one range read)."""
    return store.read_first(tr, n, snapshot)


def max_end_items(store: ItemStore, tr: AnyContext, n: int, snapshot: bool) -> list[Any]:
    """Up to ``n`` items in ``pop_max`` order. A take's read (not a snapshot) returns only the
    oldest item of the highest priority, with the conflict ranges the module docstring
    describes (two range reads); a snapshot read returns up to ``n`` (two range reads per
    priority, more past :data:`BATCH` items within one), adding no conflict range."""
    if snapshot:
        return list(itertools.islice(max_end_candidates(store, tr, snapshot=True), n))
    top = store.read(tr, limit=1, reverse=True, snapshot=True)
    if not top:
        store.add_read_conflict_range(tr, store.begin, store.end)
        return []
    within = store.subspace.range(store.unpack_position(top[0].key)[:1])
    store.add_read_conflict_range(tr, within.stop, store.end)
    return store.read(tr, within.start, within.stop, limit=1)


def max_end_candidates(store: ItemStore, tr: AnyContext, snapshot: bool) -> Iterator[Any]:
    """Items in ``pop_max`` order (highest priority first, oldest first within one), lazily;
    unless ``snapshot``, with the read conflict ranges a take of the items it yields needs."""
    upper = store.end
    while True:
        top = store.read(tr, store.begin, upper, reverse=True, snapshot=True)
        if not top:
            if not snapshot:
                store.add_read_conflict_range(tr, store.begin, upper)
            return
        within = store.subspace.range(store.unpack_position(top[0].key)[:1])
        if not snapshot:
            store.add_read_conflict_range(tr, within.stop, upper)
        begin = within.start
        while True:
            batch = store.read(tr, begin, within.stop, limit=BATCH, snapshot=snapshot)
            yield from batch
            if len(batch) < BATCH:
                break
            begin = batch[-1].key + b"\x00"
        upper = within.start
