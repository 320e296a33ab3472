"""Home shards: where each consumer of one process takes from, spread evenly.

A consumer of a sharded FIFO queue (a thread calling ``dequeue``, or a consumer session) has
a *home* shard: it takes there for as long as the shard holds items, so consumers that have
different homes never touch the same keys. Homes are handed out by a :class:`Homes` shared by
every consumer of one queue object: a consumer's first home is a shard with the fewest
consumers of this process at home in it (ties broken at random, so processes that start at
the same time spread over the shards too); when its home is empty, it moves to the shard
holding items with the fewest consumers of this process. Nothing is written: the homes are
this process's memory, not a key in the database, so consumers of different processes can
share a home (they then meet as consumers of one unsharded queue do: a plain take may
conflict, a session waits its turn in line).

A consumer that is gone (its thread ended, its session closed or collected) is no longer
counted.

Source followed: consumers pinned to partitions as Kafka's consumer groups and QuiCK's
consumers pin them, without a coordinator: each process balances its own consumers.
"""

from __future__ import annotations

import itertools
import random
import threading
import weakref
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Homes", "Turns"]


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
        self._homes: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()

    def home(self, consumer: Any) -> int:
        """``consumer``'s home shard (a key a weak reference can hold: a Thread, a session),
        given one among every shard when it has none yet."""
        with self._lock:
            shard = self._homes.get(consumer)
        if shard is None:
            shard = self.settle(consumer, range(self._shards))
        return shard

    def settle(self, consumer: Any, shards: Iterable[int]) -> int:
        """Make the shard of ``shards`` with the fewest other consumers at home in it (ties at
        random) ``consumer``'s home, and return it.

        Raises:
            ValueError: ``shards`` is empty.
        """
        return self.ranked(consumer, shards, settle=True)[0]

    def ranked(self, consumer: Any, shards: Iterable[int], *, settle: bool = False) -> list[int]:
        """``shards`` by how many other consumers are at home in each, fewest first (ties at
        random); with ``settle``, the first becomes ``consumer``'s home.

        Raises:
            ValueError: ``settle`` and ``shards`` is empty.
        """
        with self._lock:
            crowd = self._crowd(consumer)
            ranked = sorted(shards, key=lambda shard: (crowd[shard], random.random()))
            if settle:
                if not ranked:
                    raise ValueError("no shard to settle in")
                self._homes[consumer] = ranked[0]
        return ranked

    def move(self, consumer: Any, shard: int) -> None:
        """Make ``shard`` ``consumer``'s home."""
        with self._lock:
            self._homes[consumer] = shard

    def leave(self, consumer: Any) -> None:
        """``consumer`` no longer takes (a closed session): it stops counting."""
        with self._lock:
            self._homes.pop(consumer, None)

    def _crowd(self, consumer: Any) -> Counter[int]:
        """How many live consumers other than ``consumer`` are at home in each shard."""
        return Counter(
            shard
            for other, shard in self._homes.items()
            if other is not consumer and getattr(other, "is_alive", _alive)()
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
        self._condition = threading.Condition()
        self._tickets = itertools.count()
        self._serving = 0

    @contextmanager
    def turn(self) -> Iterator[None]:
        """Wait for this thread's turn (in the order the calls arrived), hold it for the
        ``with`` block, then pass it on."""
        with self._condition:
            ticket = next(self._tickets)
            self._condition.wait_for(lambda: self._serving == ticket)
        try:
            yield
        finally:
            with self._condition:
                self._serving += 1
                self._condition.notify_all()


def _alive() -> bool:
    """A consumer without ``is_alive`` (a session) is alive while it is referenced."""
    return True
