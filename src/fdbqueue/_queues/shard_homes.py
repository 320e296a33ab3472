"""Home shards: where each consumer of one process takes from, spread evenly and in turn.

A consumer of a sharded FIFO queue (a thread calling ``dequeue`` or ``claim``, an asyncio
task calling them through :mod:`fdbqueue.asyncio`, or a consumer session) has a *home*
shard: it takes there for a *stay* of up to :data:`STAY_TAKES` items, so consumers that have
different homes never touch the same keys. Homes are handed out by a :class:`Homes` shared
by every consumer of one queue object: a consumer's first home is a shard with the fewest
consumers of this process at home in it (ties broken at random, so processes that start at
the same time spread over the shards too). When its home is empty or its stay is over, it
moves to a shard holding items with the fewest consumers of this process, the one this
process visited longest ago first. So fewer consumers than shards still visit every shard in
turn: no shard waits while others are served (with C of this process's consumers and N
shards holding items, a shard is visited at least once every ``N / C`` stays). Nothing is
written: the homes are this process's memory, not a key in the database, so consumers of
different processes can share a home (they then meet as consumers of one unsharded queue do:
a plain take may conflict, a session waits its turn in line).

A consumer that is gone (its thread ended, its session closed or collected) is no longer
counted.

Source followed: consumers pinned to partitions as Kafka's consumer groups and QuiCK's
consumers pin them, without a coordinator: each process balances its own consumers.
"""

from __future__ import annotations

import itertools
import random
import sys
import threading
import weakref
from collections import Counter, deque
from collections.abc import Iterable
from typing import Any

from fdbqueue._transactions.suspension import current_operation

__all__ = ["STAY_TAKES", "Homes", "Turns", "current_consumer"]


def current_consumer() -> Any:
    """Who is taking: the asyncio task when the call runs for a coroutine (:mod:`fdbqueue.asyncio`
    runs each call in a greenlet on the event loop's thread, which every task shares), else
    the thread."""
    if current_operation() is not None:
        task = sys.modules["asyncio"].current_task()
        if task is not None:
            return task
    return threading.current_thread()


#: Items a consumer takes at its home before it moves on (when other shards hold items): a
#: move costs one read of every shard's counter, so a stay of 128 takes adds 2N/128 keys read
#: per item (0.25 for N = 16); and an item waits behind at most about N stays of items
#: enqueued after it (:doc:`sharding`, "Order").
STAY_TAKES = 128


class Homes:
    """The home shard of each consumer of one sharded queue object (see the module
    docstring). Thread-safe. Cost: nothing in the database; choosing a home counts this
    process's consumers (O(consumers)), which happens only when a consumer starts or moves.

    Args:
        shards: the number of shards.
    """

    def __init__(self, shards: int) -> None:
        self._shards = shards
        self._lock = threading.Lock()
        #: consumer -> [its home, items it took there in this stay]
        self._stays: weakref.WeakKeyDictionary[Any, list[int]] = weakref.WeakKeyDictionary()
        self._visits = itertools.count(1)
        self._visited = [0] * shards  # each shard's last visit (a number from _visits)

    def home(self, consumer: Any) -> int | None:
        """``consumer``'s home shard (a key a weak reference can hold: a Thread, a session);
        a new consumer is given one among every shard. None when its stay is over
        (:data:`STAY_TAKES`): it should move (:meth:`ranked`, then :meth:`move`)."""
        stay = self.stay(consumer)
        return None if stay is None else stay[0]

    def stay(self, consumer: Any) -> list[int] | None:
        """``consumer``'s stay, ``[home, items taken there]`` (a new consumer is given a home
        among every shard), for :meth:`took_in`; None when it is over (:meth:`home`). Only
        ``consumer`` gives itself a stay, so the lookup needs no lock (a dict read is atomic;
        every change of the stays holds the lock)."""
        stay = self._stays.get(consumer)
        if stay is None:
            self.settle(consumer, range(self._shards))
            with self._lock:
                stay = self._stays[consumer]
        return stay if stay[1] < STAY_TAKES else None

    @staticmethod
    def took_in(stay: list[int]) -> None:
        """Count an item taken in ``stay`` (:meth:`stay`): only its consumer changes its
        count, and a move starts a new stay, so no lock is needed."""
        stay[1] += 1

    def where(self, consumer: Any) -> int | None:
        """``consumer``'s home (stay over or not), None when it has none."""
        with self._lock:
            stay = self._stays.get(consumer)
            return None if stay is None else stay[0]

    def took(self, consumer: Any) -> None:
        """Count an item ``consumer`` took at its home."""
        with self._lock:
            stay = self._stays.get(consumer)
        if stay is not None:
            self.took_in(stay)

    def settle(self, consumer: Any, shards: Iterable[int]) -> int:
        """Make the first of :meth:`ranked` ``shards`` ``consumer``'s home, and return it.

        Raises:
            ValueError: ``shards`` is empty.
        """
        ranked = self.ranked(consumer, shards, settle=True)
        if not ranked:
            raise ValueError("no shard to settle in")
        return ranked[0]

    def ranked(self, consumer: Any, shards: Iterable[int], *, settle: bool = False) -> list[int]:
        """``shards`` by how many other consumers are at home in each, fewest first, then the
        one this process visited longest ago first (ties at random). With ``settle``, the
        first becomes ``consumer``'s home at once (in the same lock: consumers moving at the
        same moment choose different shards)."""
        with self._lock:
            crowd = self._crowd(consumer)
            ranked = sorted(
                shards, key=lambda shard: (crowd[shard], self._visited[shard], random.random())
            )
            if settle and ranked:
                self._move(consumer, ranked[0])
        return ranked

    def fewest(self, consumer: Any, shards: Iterable[int]) -> int:
        """The fewest other consumers at home in one of ``shards`` (0 when there is none)."""
        with self._lock:
            crowd = self._crowd(consumer)
            return min((crowd[shard] for shard in shards), default=0)

    def move(self, consumer: Any, shard: int) -> None:
        """Make ``shard`` ``consumer``'s home, for a new stay."""
        with self._lock:
            self._move(consumer, shard)

    def _move(self, consumer: Any, shard: int) -> None:
        self._stays[consumer] = [shard, 0]
        self._visited[shard] = next(self._visits)

    def leave(self, consumer: Any) -> None:
        """``consumer`` no longer takes (a closed session): it stops counting."""
        with self._lock:
            self._stays.pop(consumer, None)

    def _crowd(self, consumer: Any) -> Counter[int]:
        """How many live consumers other than ``consumer`` are at home in each shard."""
        return Counter(
            stay[0]
            for other, stay in self._stays.items()
            if other is not consumer and _alive(other)
        )


class Turns:
    """Turns at one shard for this process's plain takes: one take at a time, first come first
    served. Consumers of one process that share a home shard would otherwise take its head
    in concurrent transactions, of which all but one conflict (each conflict a transaction
    spent for nothing); taking turns, each transaction finds its own head item. It costs no
    throughput: takes of one shard's head commit one after another either way. Consumers of
    other processes are not held back (they may still conflict, then retry). Thread-safe;
    waiting holds no transaction open.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards the two below
        self._held = False
        #: the waiters, first come first; each blocks on its own lock until handed the turn
        self._waiters: deque[threading.Lock] = deque()

    def turn(self) -> Turns:
        """This thread's turn, as a context manager: ``with turns.turn():`` waits for it (in
        the order the calls arrived), holds it for the block, then hands it to the next
        waiter. A wait that ends in an exception (a KeyboardInterrupt, say) gives its place
        up, so the turns after it still come. Cost: a lock taken twice when nobody holds the
        turn; a wait otherwise."""
        return self

    def __enter__(self) -> None:
        with self._lock:
            if not self._held:
                self._held = True
                return
            waiter = threading.Lock()
            waiter.acquire()
            self._waiters.append(waiter)
        try:
            self._wait(waiter)
        except BaseException:
            with self._lock:
                try:
                    self._waiters.remove(waiter)  # not served yet: it leaves the line
                except ValueError:
                    self._pass_on()  # handed the turn as it left: the next one's
            raise

    def __exit__(self, *exception: object) -> None:
        with self._lock:
            self._pass_on()

    @staticmethod
    def _wait(waiter: threading.Lock) -> None:
        """Block until ``waiter`` is released: this thread's turn has come."""
        waiter.acquire()

    def _pass_on(self) -> None:
        """Hand the turn to the first waiter, or free it. Called holding ``_lock``."""
        if self._waiters:
            self._waiters.popleft().release()
        else:
            self._held = False


def _alive(consumer: Any) -> bool:
    """Whether ``consumer`` still takes: a thread while it runs, an asyncio task until it is
    done, a session while it is referenced (a closed one has left)."""
    if isinstance(consumer, threading.Thread):
        return consumer.is_alive()
    done = getattr(consumer, "done", None)
    return not done() if callable(done) else True
