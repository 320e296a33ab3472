"""Consumer sessions on a sharded queue: a session in one shard's line at a time.

A :class:`ShardedConsumer` holds a session (:class:`~fdbqueue.Consumer`) in the line of one
shard, its home (:mod:`~fdbqueue._queues.shard_homes`: a shard with the fewest of this
process's sessions when it opens), and takes there, in line, with its prefetch, for as long as
that shard has items: one process's sessions spread evenly over the shards and stay, and
those of several processes spread at random, so C consumers on N >= C shards rarely share a
line. When its shard is empty, it reads every shard's size counter in one round trip
(:meth:`~fdbqueue._queues.sharded_end.ShardedEnd.order`: the best priority first for a
priority queue; for a FIFO queue, the shards with the fewest of this process's sessions
first), closes its session (withdrawing its requests, so its reserved places return to the
shard) and opens one in a shard that holds items, its new home. A blocking take waits on
every shard's signal key. It returns None only when every shard was empty at a read version
(or the timeout ran out).

When a process has more sessions than a queue has shards, several are at home in one shard.
Each opens a session of its own there (a place in that shard's line) until the process holds
:data:`PLACES_IN_FLIGHT` (16) places in the queue's lines, at most :data:`PLACES_PER_SHARD`
(8) in one shard's line; beyond that a session joins the least used one at its home and takes
turns with its other users (:class:`SharedSessions`). So a line stays short (a take in line
reads the requests ahead of its own), while the process keeps enough takes in flight to use
its interpreter: takes in line by different sessions run side by side (they do not conflict).
When every item sits in one shard, all of a process's sessions gather there and keep up to
eight transactions in flight, not one. Sessions used from coroutines
(:mod:`fdbqueue.asyncio`) keep a session each: their calls share the event loop's thread,
which cannot wait for a turn.

While the queue is paused, a session's take finds nothing in its shard (its session's
attempt checks, :mod:`fdbqueue._consuming.sessions`) and it does not move: the choice of
shards finds none holding items (a session whose stay was over returns its places in its
shard's line as it leaves, as always, and finds nowhere to go).

A priority queue's session (:class:`PriorityShardedConsumer`; a FIFO queue's is
:class:`FifoShardedConsumer`) does not take in line: each take or claim ranks the shards by their
first item and takes from the best in one transaction, as a plain pop does
(:meth:`~fdbqueue._queues.sharded_end.ShardedEnd.take_best`), so that it returns the best
priority at its read version even beside other consumers. A line would take in a later
transaction than the ranking, when another shard may hold a better item. Concurrent pops of
one best item therefore conflict (one retries and ranks again), as unsharded plain pops do.

Source followed: the consumer sessions of :doc:`high-contention`, one per shard at a time;
consumers pinned to partitions as Kafka's consumer groups and QuiCK's consumers pin them,
without a coordinator.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from fdbqueue._consuming.ends import End
from fdbqueue._consuming.sessions import Consumer
from fdbqueue._delivery.leases import check_lease_seconds
from fdbqueue._queues.shard_homes import Homes, Turns
from fdbqueue._transactions.suspension import current_operation
from fdbqueue._transactions.transactional import run_in_retry_loop
from fdbqueue._transactions.waiting import check_blocking_arguments

__all__ = [
    "PLACES_IN_FLIGHT",
    "PLACES_PER_SHARD",
    "FifoShardedConsumer",
    "PriorityShardedConsumer",
    "ShardedConsumer",
    "SharedSession",
    "SharedSessions",
]


class ShardedEnd(Protocol):
    """What a session needs of :class:`~fdbqueue._queues.sharded_end.ShardedEnd` (which
    opens the sessions, so this module does not import it)."""

    ends: list[End]

    def take(self, tr: Any, block: bool, seconds: float | None) -> Any: ...

    def claim(self, tr: Any, seconds: float, block: bool, wait: float | None) -> Any: ...

    def blocking(
        self, database: Any, take: Callable[[Any, float | None], Any], seconds: float | None
    ) -> Any: ...


class FifoShardedEnd(ShardedEnd, Protocol):
    """What a FIFO queue's session needs of
    :class:`~fdbqueue._queues.sharded_end.FifoShardedEnd`: the homes and shared sessions of
    this process, and where to move."""

    homes: Homes
    shared: SharedSessions

    def holding(self, tr: Any, consumer: Any) -> list[End]: ...

    def paused(self, tr: Any) -> bool: ...


#: Takes ``session`` once, without blocking: its value, its Lease, or None.
Act = Callable[[Consumer], Any]


#: How many places in a queue's lines (sessions of its own) one process opens before its
#: sessions share them: sharers take turns, one transaction at a time, while takes in line by
#: different sessions do not conflict and run side by side. Sixteen keep a process's
#: interpreter busy (``docs/benchmarks.rst``: the one-process curve at C = 16 and 64).
PLACES_IN_FLIGHT = 16

#: How many places in one shard's line one process holds at most: a take in line reads every
#: request ahead of its own, so a crowd at one shard (every item in it) shares eight places
#: rather than opening one per session.
PLACES_PER_SHARD = 8


class SharedSession:
    """A session that some of this process's sharded sessions share at one shard, taking
    turns (:class:`~fdbqueue._queues.shard_homes.Turns`) to use it (:class:`SharedSessions`
    says how many)."""

    def __init__(self, session: Consumer) -> None:
        self.session = session
        #: how many sharded sessions use it (changed under :class:`SharedSessions`' lock)
        self.users = 0
        self.turns = Turns()


class SharedSessions:
    """The sessions this process's sharded sessions share, per shard (and prefetch and
    abandon_after), each used one at a time (in its turns): a sharded session opens a session
    of its own while this process holds fewer than :data:`PLACES_IN_FLIGHT` of them in all
    and fewer than :data:`PLACES_PER_SHARD` at its shard, else it joins the least used one
    there. So a take's read of a line grows with the processes in line, not with each of
    their sessions, and a crowd at one shard still takes side by side. Thread-safe. Cost:
    nothing in the database.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._places: dict[tuple[int, int, float], list[SharedSession]] = {}
        self._count = 0  # the shared sessions in ``_places``

    def join(self, key: tuple[int, int, float], opened: Consumer) -> SharedSession:
        """A shared session at ``key`` (shard, prefetch, abandon_after): a new one around
        ``opened`` while this process holds fewer than :data:`PLACES_IN_FLIGHT` and the
        shard fewer than :data:`PLACES_PER_SHARD`, else the least used one there; one more
        user of it."""
        with self._lock:
            places = self._places.setdefault(key, [])
            if not places or (len(places) < PLACES_PER_SHARD and self._count < PLACES_IN_FLIGHT):
                place = SharedSession(opened)
                places.append(place)
                self._count += 1
            else:
                place = min(places, key=lambda shared: shared.users)
            place.users += 1
            return place

    def leave(self, key: tuple[int, int, float], place: SharedSession) -> Consumer | None:
        """One user fewer of ``place`` (at ``key``): its session, when that was its last
        user (the caller closes it), else None."""
        with self._lock:
            place.users -= 1
            if place.users:
                return None
            places = self._places[key]
            places.remove(place)
            self._count -= 1
            if not places:
                del self._places[key]
            return place.session

    def alone(self, place: SharedSession) -> bool:
        """Whether ``place`` has one user (or none)."""
        with self._lock:
            return place.users <= 1


class ShardedConsumer(Consumer):
    """A consumer session over every shard of a queue (see the module docstring); the same
    calls as :class:`~fdbqueue.Consumer`. What :class:`FifoShardedConsumer` and
    :class:`PriorityShardedConsumer` share: the arguments checked, a session opened in one
    shard (:meth:`_open`), and closing.

    Args:
        end: the sharded end it takes from.
        database: a Database (a session runs its own transactions).
        prefetch, abandon_after: as for :class:`~fdbqueue.Consumer`, for each session.

    Raises:
        TypeError, ValueError: as :class:`~fdbqueue.Consumer` (checked by opening the first
            session, before anything is written).
    """

    def __init__(self, end: ShardedEnd, database: Any, prefetch: int, abandon_after: float):
        # Consumer.__init__ is not called: this object holds a Consumer, it is not one.
        self._database = database
        self._prefetch = prefetch
        self._abandon_after = abandon_after
        self._shard = end.ends[self._open(end)]
        self._session = self._shard.consumer(database, prefetch, abandon_after)
        self._shut = False
        self.contended = False

    def _open(self, end: ShardedEnd) -> int:
        """The shard whose session this one opens first."""
        raise NotImplementedError

    def _check_open(self) -> None:
        if self._shut:
            raise RuntimeError("this consumer session is closed")

    def close(self) -> None:
        """Withdraw the current session's requests (its reserved places return to its shard),
        or leave it to the others of this process sharing it."""
        if self._shut:
            return
        self._shut = True
        self._leave()

    def _leave(self) -> None:
        """Stop using the session (:meth:`close`)."""
        self._session.close()

    def __enter__(self) -> ShardedConsumer:
        return self


class PriorityShardedConsumer(ShardedConsumer):
    """A priority queue's session: each take or claim ranks the shards and takes from the
    best in one transaction, as a plain pop does
    (:meth:`~fdbqueue._queues.sharded_end.PriorityShardedEnd.take_best`), not in line: a
    line would take in a later transaction than the ranking, when another shard may hold a
    better item. Its session in shard 0 checks the arguments and is never taken from."""

    def __init__(self, end: ShardedEnd, database: Any, prefetch: int, abandon_after: float):
        super().__init__(end, database, prefetch, abandon_after)
        self._end = end

    def _open(self, end: ShardedEnd) -> int:
        return 0

    def take(self, *, block: bool = False, timeout: float | None = None) -> Any:
        seconds = check_blocking_arguments(self._database, block, timeout)
        self._check_open()
        return self._end.take(self._database, block, seconds)

    def claim(self, lease: float, *, block: bool = False, timeout: float | None = None) -> Any:
        seconds = check_blocking_arguments(self._database, block, timeout)
        lease_seconds = check_lease_seconds(lease)
        self._check_open()
        return self._end.claim(self._database, lease_seconds, block, seconds)

    take.__doc__ = Consumer.take.__doc__
    claim.__doc__ = Consumer.claim.__doc__
    dequeue = take
    pop = take


class FifoShardedConsumer(ShardedConsumer):
    """A FIFO queue's session: in one shard's line at a time, its home, moving to a shard
    holding items when its home is empty or its stay is over (see the module docstring)."""

    def __init__(self, end: FifoShardedEnd, database: Any, prefetch: int, abandon_after: float):
        self._end = end
        super().__init__(end, database, prefetch, abandon_after)
        # Shared with this process's other sessions at its shard (taking turns), decided at
        # the first call: not for coroutines (fdbqueue.asyncio), whose calls share the event
        # loop's thread and so cannot wait for a turn.
        self._sharing: bool | None = None
        self._place: SharedSession | None = None  # the shared session used, when sharing

    def _open(self, end: ShardedEnd) -> int:
        return self._end.homes.settle(self, range(len(end.ends)))

    def take(self, *, block: bool = False, timeout: float | None = None) -> Any:
        seconds = check_blocking_arguments(self._database, block, timeout)
        return self._serve(lambda session: session.take(), block, seconds, every_shard=False)

    def claim(self, lease: float, *, block: bool = False, timeout: float | None = None) -> Any:
        seconds = check_blocking_arguments(self._database, block, timeout)
        lease_seconds = check_lease_seconds(lease)
        return self._serve(
            lambda session: session.claim(lease_seconds), block, seconds, every_shard=True
        )

    take.__doc__ = Consumer.take.__doc__
    claim.__doc__ = Consumer.claim.__doc__
    dequeue = take
    pop = take

    def _leave(self) -> None:
        self._end.homes.leave(self)
        self._release(withdrawn=False)

    def _serve(self, act: Act, block: bool, seconds: float | None, *, every_shard: bool) -> Any:
        self._check_open()
        if self._sharing is None:
            self._sharing = current_operation() is None
            if self._sharing:
                self._share(self._session)
        value = self._once(act, every_shard)
        if value is not None or not block:
            return value
        return self._end.blocking(
            self._database, lambda _database, _deadline: self._once(act, every_shard), seconds
        )

    def _once(self, act: Act, every_shard: bool) -> Any:
        """``act`` on the current session (unless its stay at this shard is over, see
        :mod:`~fdbqueue._queues.shard_homes`); when it finds
        nothing, or the stay is over, on a session in each other shard holding items, moving
        there (the last one tried stays current)."""
        end = self._end
        if end.homes.home(self) is None:
            return self._elsewhere(act, every_shard, stay_over=True)
        value = self._act(act)
        if value is not None:
            end.homes.took(self)
            return value
        if self._session.paused:  # the queue is paused: no shard would give anything
            return None
        return self._elsewhere(act, every_shard, stay_over=False)

    def _elsewhere(self, act: Act, every_shard: bool, *, stay_over: bool) -> Any:
        """``act`` in the shards holding items (read in one round trip: the shards with the
        fewest of this process's sessions,
        the one visited longest ago first), moving to each in turn; the current shard is
        tried again only when its stay was over (it found nothing there otherwise)."""
        end = self._end

        def read(tr: Any) -> list[End]:
            if not every_shard:
                return end.holding(tr, self)
            if end.paused(tr):
                return []
            ends = end.ends
            return [ends[k] for k in end.homes.ranked(self, range(len(ends)), settle=True)]

        order, withdrawn = self._leave_and_read(read)
        for shard in order:
            if shard is self._shard:
                if not stay_over:
                    continue
                end.homes.move(self, end.ends.index(shard))  # a new stay where it is
            else:
                self._move(shard, withdrawn=withdrawn)
            withdrawn = False
            value = self._act(act)
            if value is not None:
                end.homes.took(self)
                return value
            if self._session.paused:  # the queue is paused: no shard would give anything
                return None
        return None

    def _leave_and_read(self, read: Callable[[Any], list[End]]) -> tuple[list[End], bool]:
        """``read`` the shards; when no other session of this process shares the current
        session, withdraw its requests in the same transaction (if it stays, its next take
        registers again, as after an abandoned request), in the shard's turn so that none
        joins it meanwhile and takes with a request being withdrawn. Returns what ``read``
        found and whether the requests were withdrawn."""
        place = self._place
        if place is None:
            return self._session.line.withdraw(self._database, read), True
        with place.turns.turn():
            if self._end.shared.alone(place):
                return self._session.line.withdraw(self._database, read), True
        # Others of this process take with the session: it stays for them.
        return run_in_retry_loop(self._database, read), False

    def _act(self, act: Act) -> Any:
        """``act`` on the current session, in its turn when shared."""
        place = self._place
        if place is None:
            return act(self._session)
        with place.turns.turn():
            return act(self._session)

    def _key(self) -> tuple[int, int, float]:
        return (self._end.ends.index(self._shard), self._prefetch, self._abandon_after)

    def _release(self, *, withdrawn: bool) -> None:
        """Stop using the current session: close it (withdrawing its requests unless they
        were ``withdrawn`` already) when no other session of this process shares it."""
        place = self._place
        session = self._session if place is None else self._end.shared.leave(self._key(), place)
        if session is not None and not withdrawn:
            session.close()

    def _move(self, shard: End, *, withdrawn: bool = False) -> None:
        """Leave the current session (:meth:`_release`: withdrawing its requests before
        holding places elsewhere, unless they were ``withdrawn`` already or others of this
        process share it) and take up one in ``shard``'s line."""
        try:
            self._release(withdrawn=withdrawn)
        finally:  # a withdrawal that failed (1031) leaves its requests to abandon_after
            self._end.homes.move(self, self._end.ends.index(shard))
            self._shard = shard
            opened = shard.consumer(self._database, self._prefetch, self._abandon_after)
            if self._sharing:
                self._share(opened)
            else:
                self._session = opened

    def _share(self, opened: Consumer) -> None:
        """Use a session shared at the current shard (``opened``, when a new one is due)."""
        self._place = self._end.shared.join(self._key(), opened)
        self._session = self._place.session
