"""Sharded queues: one queue made of N shards, each a complete queue of its own.

``Queue(subspace, shards=N)`` spreads a queue over N disjoint key ranges so that no key range
takes every operation: a cluster can place the shards on different storage teams. Key layout
of a queue of N > 1 shards whose subspace has the prefix ``P``::

    P + pack((k,)) + ...            shard k (0 <= k < N): every key a queue of the prefix
                                    P + pack((k,)) has (see :doc:`concepts`): its items at
                                    P + pack((k, index, random)), its size counter, signal
                                    key, leases, receipts, line, ... at P + pack((k,)) + 0xff
    P + b"\\xff" + pack(("type",))   b"Queue/N": the type and the number of shards
    P + b"\\xff" + pack(("codec",))  the codec's name

A queue of one shard (the default) is the unsharded layout, byte for byte the recipes'. The
type record carries N, and every shard records it too, checked by each write into the shard
(the shard's own record: a key only writers of that shard read); the first write into a
shard also checks the queue's record (:meth:`~fdbqueue._storage.store.ItemStore.check_type`).
So a queue opened with another number of shards raises QueueTypeError before it writes.

Each shard is a queue object of the same class (a *part*), composed like an unsharded
queue; the sharded queue chooses the part each operation acts on: writes go to the parts in
turn (from a random first one, so producers do not all start at shard 0), a lease goes back
to the part that holds its key, and takes go through a
:class:`~fdbqueue._queues.sharded_end.ShardedEnd`.

Source followed: FoundationDB's "Queues" recipe within each shard; the documentation on data
distribution (shards split by size and write bandwidth) for why the shards are key ranges.
"""

from __future__ import annotations

import itertools
import random
import zlib
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import fdb.tuple

from fdbqueue._storage.groups import check_group
from fdbqueue._storage.store import ItemStore

__all__ = ["MAX_SHARDS", "Part", "Parts", "check_shards"]

#: The most shards a queue may have (a shard's prefix adds at most 2 bytes to the queue's).
MAX_SHARDS = 256


def check_shards(shards: Any) -> int:
    """Return ``shards`` (an int from 1 to :data:`MAX_SHARDS`), or raise before anything is
    read or written.

    Raises:
        TypeError: not an int (bool included).
        ValueError: below 1 or above :data:`MAX_SHARDS`.
    """
    if isinstance(shards, bool) or not isinstance(shards, int):
        raise TypeError(f"shards must be an int, not {type(shards).__name__}")
    if not 1 <= shards <= MAX_SHARDS:
        raise ValueError(f"shards must be from 1 to {MAX_SHARDS}, not {shards}")
    return shards


class Part(Protocol):
    """What a queue and each of its parts have (the queue classes' private attributes)."""

    _store: ItemStore
    _leases: Any
    _high_contention: bool
    _parts: Parts[Any]


P = TypeVar("P", bound=Part)


class Parts(Sequence[P]):
    """The parts of one queue: the queue itself when it has one shard, else one queue object
    per shard. Cost: nothing; it only chooses.

    Args:
        queue: the queue (its ``_store`` is the queue's own store, holding the type record).
        shards: the number of shards (:func:`check_shards`).
        compose: gives a part its store-bound parts (leases, delayed items, ends), as the
            queue class's ``__init__`` does for an unsharded queue.
    """

    def __init__(self, queue: P, shards: int, compose: Callable[[P, ItemStore], None]) -> None:
        store = queue._store
        if shards == 1:
            compose(queue, store)
            self._parts: list[P] = [queue]
        else:
            self._parts = []
            for shard in range(shards):
                part: P = object.__new__(type(queue))
                part._high_contention = queue._high_contention
                part_store = ItemStore(
                    store.subspace.subspace((shard,)),
                    store.codec,
                    store.receipts.enabled,
                    store.leading_integers,
                    shards=shards,
                    parent=store,
                    shard=shard,
                )
                compose(part, part_store)
                part._parts = Parts(part, 1, _composed)  # a part is a queue of one shard
                self._parts.append(part)
        self._by_prefix = {part._store.subspace.key(): part for part in self._parts}
        self._prefix_length = len(store.subspace.key())
        self._turn = itertools.count(random.randrange(shards))

    def __len__(self) -> int:
        return len(self._parts)

    def __getitem__(self, index: Any) -> Any:
        return self._parts[index]

    @property
    def sharded(self) -> bool:
        """Whether the queue has more than one shard."""
        return len(self._parts) > 1

    def writer(self) -> P:
        """The part the next write goes to: the parts in turn (thread-safe: ``next`` on a
        count is atomic in CPython)."""
        return self._parts[next(self._turn) % len(self._parts)]

    def for_group(self, group: Any, priority: int | None = None) -> P:
        """The part that holds ``group``'s items: a group lives in one shard, chosen by a
        CRC-32 of the group packed by the tuple layer (stable across processes).

        Raises:
            TypeError, ValueError: ``group`` cannot name a group
                (:func:`~fdbqueue._storage.groups.check_group`), or its keys (with
                ``priority``, a PriorityQueue's) would be too long.
        """
        packed = fdb.tuple.pack((check_group(group),))
        part = self._parts[zlib.crc32(packed) % len(self._parts)]
        part._store.groups.check_fits(group, priority)
        return part

    def holds_key(self, key: bytes) -> bool:
        """Whether ``key`` lies under one of the parts' (shards') leases."""
        try:
            part = self.holding(key)
        except ValueError:
            return False
        return bool(part._leases.leases.contains(key))

    def holding(self, key: bytes) -> P:
        """The part whose keys include ``key`` (a lease's key); the only part when unsharded.

        Raises:
            ValueError: ``key`` is not under any shard of this queue (a lease of another
                queue).
        """
        if len(self._parts) == 1:
            return self._parts[0]
        for length in (1, 2):  # pack((k,)) is 1 byte for k = 0, 2 bytes for 0 < k < 256
            part = self._by_prefix.get(key[: self._prefix_length + length])
            if part is not None:
                return part
        raise ValueError("the lease belongs to another queue")


def _composed(_part: Any, _store: ItemStore) -> None:
    """Nothing more to compose: the part has its store-bound parts already."""
