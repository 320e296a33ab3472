"""What :meth:`~fdbqueue.Queue.info` reports about a queue: :class:`QueueInfo`.

Why no age of the oldest item: an item's key holds its position (a Queue's ``(index,
random)``, a PriorityQueue's ``(priority, count, random)``) and its value holds what the
producer gave; neither holds a time, and FoundationDB keeps no write time of a key. Telling
the age would need a timestamp stored with every item, which changes the key layout the
recipes share. ``oldest`` is the front value instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["QueueInfo"]


@dataclass(frozen=True)
class QueueInfo:
    """Figures about one queue, all read at one snapshot read version.

    Attributes:
        size: the size counter (items ready to take; see :meth:`~fdbqueue.Queue.size`).
        oldest: the value at the front (what the next take returns), or None when no item is
            ready.
        requests_in_line: requests of consumer sessions waiting in line, at every end.
        leases_in_flight: leases not acknowledged yet, expired and released ones included.
        expired_leases: of those, the ones whose expiry version is before the read version
            (released leases included): what the next claims take first.
        dead_letters: dead letters.
        delayed: delayed items not promoted into the queue yet (due or not).
        read_version: the read version the figures were read at.
        groups: message groups with items or an item in a lease (:doc:`groups`).
        groups_in_flight: of those, the ones whose item is in a lease: their next item waits
            for its end.
        shards: a sharded queue's figures per shard, shard 0 first (the fields above are
            their sums); empty for a queue of one shard.
    """

    size: int
    oldest: Any
    requests_in_line: int
    leases_in_flight: int
    expired_leases: int
    dead_letters: int
    delayed: int
    read_version: int
    groups: int = 0
    groups_in_flight: int = 0
    shards: tuple[QueueInfo, ...] = ()
