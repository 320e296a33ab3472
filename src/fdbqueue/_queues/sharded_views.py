"""What looks at a whole sharded queue: its figures and listings, gathered from its shards.

Each function takes the queue's parts (:class:`~fdbqueue._queues.shards.Parts`, one queue
object per shard) and a Transaction (the queue's methods open one when given a Database), so
that figures summed over the shards are read at one read version. Listings go shard by shard,
shard 0 first: within a shard in the shard's order, with no order across shards.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from fdbqueue._storage.queue_info import QueueInfo
from fdbqueue._storage.store import ItemStore

__all__ = ["concatenated", "info", "size", "summed"]


def size(parts: Sequence[Any], tr: Any) -> int:
    """The sum of the shards' size counters. Cost: one point read per shard, issued
    together (one round trip)."""
    counters = [tr.get(part._store.size_key) for part in parts]
    return sum(ItemStore.counter_value(counter) for counter in counters)


def summed(parts: Sequence[Any], limit: int | None, count: Callable[[Any, int | None], int]) -> int:
    """``count(part, limit)`` over the parts, each part given what ``limit`` leaves (None: no
    limit), stopping once ``limit`` is reached."""
    total = 0
    for part in parts:
        left = None if limit is None else limit - total
        if left == 0:
            break
        total += count(part, left)
    return total


def concatenated(
    parts: Sequence[Any], limit: int | None, listing: Callable[[Any, int | None], list[Any]]
) -> list[Any]:
    """``listing(part, limit)`` of the parts one after the other, at most ``limit`` in all
    (None: every one)."""
    found: list[Any] = []
    for part in parts:
        left = None if limit is None else limit - len(found)
        if left == 0:
            break
        found.extend(listing(part, left))
    return found


def info(parts: Sequence[Any], tr: Any) -> QueueInfo:
    """The shards' figures summed (``oldest``: the front of the first shard that has one),
    read in ``tr`` at one read version, with each shard's own in ``shards``."""
    each = [part.info(tr) for part in parts]
    counted = {
        field.name: sum(getattr(one, field.name) for one in each)
        for field in dataclasses.fields(QueueInfo)
        if field.name not in ("oldest", "read_version", "shards")
    }
    oldest = next((one.oldest for one in each if one.oldest is not None), None)
    return QueueInfo(
        **counted, oldest=oldest, read_version=each[0].read_version, shards=tuple(each)
    )
