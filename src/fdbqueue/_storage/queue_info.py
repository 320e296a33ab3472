"""What :meth:`~fdbqueue.Queue.info` reports about a queue: :class:`QueueInfo`.

An item's key holds its position (a Queue's ``(index, random)``, a PriorityQueue's
``(priority, count, random)``) and its value holds what the producer gave; neither holds a
time, and FoundationDB keeps no write time of a key. ``oldest_age`` comes from small records
of when items entered ranges of positions, per 5-second slot (:mod:`fdbqueue._storage.ages`),
which enqueues write blind: an upper bound of the oldest item's age, less than 5 s too large.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

__all__ = ["QueueInfo"]


@dataclass(frozen=True)
class QueueInfo:
    """Figures about one queue, all read at one snapshot read version.

    Attributes:
        size: the items waiting (see :meth:`~fdbqueue.Queue.size`): the size counter (items
            ready in the queue), plus ``expired_leases``, plus the delayed items due but not
            promoted yet (:ref:`waiting items <waiting-items>`).
        oldest: the value the next take returns (a waiting lease's item first), or None
            when no item waits.
        requests_in_line: requests of consumer sessions waiting in line, at every end.
        leases_in_flight: leases held: not acknowledged, not expired, not released.
        expired_leases: leases whose items wait (counted in ``size`` too): expired (their
            expiry version is before the read version and their expiry time has come by this
            client's clock) or released (their delay, if any, over); what the next takes and
            claims take first.
        dead_letters: dead letters.
        delayed: items not to be taken yet: delayed enqueues not due, and items released
            with a delay not over (a worker's retry waiting out its backoff).
        read_version: the read version the figures were read at.
        groups: message groups with items or an item in a lease (:doc:`groups`).
        groups_in_flight: of those, the ones whose item is in a lease: their next item waits
            for its end.
        oldest_age: seconds the oldest item has waited (a float, never below 0), or None
            when no item waits (or none has a record of when it began: items another
            program wrote). An upper bound: too large by less than 5 seconds
            (:data:`fdbqueue._storage.ages.SLOT_SECONDS`) at any rate of enqueues, plus the
            skew between the enqueuing and the reading clients' wall clocks; a cluster's
            recovery does not change it (wall-clock seconds, not versions). It counts the
            items ready to take, in message groups or not, from when they entered the queue (a
            delayed item: when it fell due; a requeued dead letter: when requeued). For a
            sharded queue, the oldest over its shards.
        enqueued: the enqueue counter: items enqueued (or pushed) since the queue was
            created or last cleared (:meth:`~fdbqueue.Queue.clear` sets it back to 0),
            delayed items counted when enqueued (not again when they fall due), requeued dead
            letters counted again when requeued; moves between shards and takes leave it
            alone (the metric ``fdbqueue.items.enqueued`` differs: it counts a delayed item
            when it falls due, :mod:`fdbqueue.metrics`). Items another program wrote are not
            counted. Its change between two reads,
            minus the change of the items kept (``size + leases_in_flight + delayed``), is
            how many items left: taken, acknowledged or dead-lettered (the dashboard's rates).
        paused: whether the queue is paused (:meth:`~fdbqueue.Queue.pause`): takes and
            claims find nothing until :meth:`~fdbqueue.Queue.resume`. One key for the whole
            queue: a sharded queue's and each of its shards' figures say the same.
        shards: a sharded queue's figures per shard, shard 0 first (the fields above are
            their sums, ``oldest_age`` their largest, ``paused`` the queue's); empty for a
            queue of one shard.
        rate_limited: whether the queue's ``rate_limit`` holds starts back now: as many
            jobs as it allows started within its window (the queue's, not a shard's; False
            without a ``rate_limit``).
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
    oldest_age: float | None = None
    enqueued: int = 0
    paused: bool = False
    shards: tuple[QueueInfo, ...] = ()
    rate_limited: bool = False

    @classmethod
    def over_shards(
        cls, each: list[QueueInfo], oldest: Any, read_version: int, rate_limited: bool = False
    ) -> QueueInfo:
        """A sharded queue's figures from ``each`` shard's (read at ``read_version``): the
        counts summed, the oldest age the largest, ``oldest`` the value its next take
        returns."""
        counted = {
            field.name: sum(getattr(one, field.name) for one in each)
            for field in dataclasses.fields(cls)
            if field.name
            not in ("oldest", "oldest_age", "read_version", "shards", "paused", "rate_limited")
        }
        waited = [one.oldest_age for one in each if one.oldest_age is not None]
        return cls(
            **counted,
            oldest_age=max(waited) if waited else None,
            oldest=oldest,
            read_version=read_version,
            paused=each[0].paused,
            shards=tuple(each),
            rate_limited=rate_limited,
        )
