"""How the drain phase's items are preloaded: the load shapes of ``--loads``.

A sharded queue's drain depends on where its items are: spread evenly over its shards, in
runs of one batch per shard, or all in one shard (consumers then leave their empty homes and
meet in that shard). Each shape is one entry of :data:`LOADS`; without ``--loads`` the
drain preloads as it always did (:data:`DEFAULT_LOAD`, and the tables show no ``load``
column). The steady phase keeps its own preload (a backlog in batches of
:data:`~fdbqueue.benchmark.workload.BATCH`, then producers): the shapes do not apply to it.

``batches-10``
    ``enqueue_many`` of :data:`~fdbqueue.benchmark.workload.BATCH` (10) values per
    transaction, by the ``--producers`` loader threads: what the drain did before
    ``--loads`` existed (:data:`DEFAULT_LOAD`). A sharded queue's writes go to its shards in
    turn, so each shard gets runs of 10 items.
``batches-1000``
    ``enqueue_many`` of :data:`BIG_BATCH` (1,000) values per transaction, by the loader
    threads: each batch is written where the queue puts a batch (today one shard per
    batch, so N items fill at most N / 1,000 shards; once batches are spread, all of them).
``single``
    one value per transaction (``enqueue_many`` of one value, which writes as ``enqueue``
    does), by the loader threads: a sharded queue's items end up spread evenly, one by one.
``one-shard``
    every item in shard 0 of a sharded queue (:func:`load_one_shard`), in enqueue order. No
    public call puts items of no message group into a chosen shard, so this loader writes
    them itself at the sharded key layout. A queue of one shard (the unsharded modes,
    priority queues, the private queues of the ideal) holds its items in its one shard
    anyway: it is loaded as ``batches-1000``.

``one-shard`` depends on the key layout of a sharded queue, which ``fdbqueue._queues.router``
documents (the layout of the data on disk, not a Python interface); everything else here
goes through the queues' public methods.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any

import fdb.tuple

from fdbqueue import Queue, transactional
from fdbqueue.benchmark.counting import CountingDatabase
from fdbqueue.benchmark.workload import BATCH, Mode

__all__ = ["BIG_BATCH", "DEFAULT_LOAD", "LOADS", "load", "load_one_shard"]

#: Values per ``enqueue_many`` of the ``batches-1000`` shape.
BIG_BATCH = 1_000
#: Items the ``one-shard`` loader writes per transaction.
ONE_SHARD_BATCH = 1_000
#: The shard the ``one-shard`` loader fills.
ONE_SHARD = 0
#: The shape of the drain's preload when ``--loads`` is not given.
DEFAULT_LOAD = "batches-10"
#: The load shapes, by ``--loads`` name: the values per enqueue transaction (None: the
#: ``one-shard`` loader), in the order the runs and tables show them.
LOADS: dict[str, int | None] = {
    DEFAULT_LOAD: BATCH,
    "batches-1000": BIG_BATCH,
    "single": 1,
    "one-shard": None,
}

_COUNTER = struct.Struct("<q")  # the size counter and signal key: int64 little-endian
_RANDOM_BYTES = 20  # the random element of an item key, as the recipe's os.urandom(20)


def load(
    mode: Mode,
    queues: list[Any],
    counting: CountingDatabase,
    values: Sequence[int],
    threads: int,
    shape: str = DEFAULT_LOAD,
) -> None:
    """Enqueue ``values`` spread evenly over ``queues`` (the n-th of them gets every n-th
    value) in the load ``shape`` (:data:`LOADS`; not timed): in batches of the shape's size
    to one queue, with ``threads`` threads; ``one-shard``: every value of a sharded queue into
    its shard :data:`ONE_SHARD` (:func:`load_one_shard`), a queue of one shard as
    ``batches-1000``. Re-raises the first error a thread met.

    Raises:
        KeyError: ``shape`` is not in :data:`LOADS`.
        ValueError: ``one-shard`` with a sharded queue that is not a
            :class:`~fdbqueue.Queue` (:func:`load_one_shard`).
    """
    size = LOADS[shape]
    shares = [values[n :: len(queues)] for n in range(len(queues))]
    if size is None:
        role = getattr(counting.local, "role", None)
        counting.local.role = "loader"
        try:
            for queue, share in zip(queues, shares, strict=True):
                if _shards(queue) > 1:
                    load_one_shard(mode, queue, counting, list(share))
        finally:
            if role is None:
                del counting.local.role
            else:
                counting.local.role = role
        shares = [
            [] if _shards(queue) > 1 else share for queue, share in zip(queues, shares, strict=True)
        ]
        size = BIG_BATCH
    batches = [
        (queue, list(share[start : start + size]))
        for queue, share in zip(queues, shares, strict=True)
        for start in range(0, len(share), size)
    ]
    _in_threads(batches, lambda queue, batch: mode.put(queue, counting, batch), counting, threads)


def _shards(queue: Any) -> int:
    shards: int = getattr(queue, "shards", 1)
    return shards


def _in_threads(
    batches: list[tuple[Any, list[int]]],
    put: Callable[[Any, list[int]], None],
    counting: CountingDatabase,
    threads: int,
) -> None:
    errors: list[Exception] = []

    def work(mine: list[tuple[Any, list[int]]]) -> None:
        counting.local.role = "loader"
        try:
            for queue, batch in mine:
                put(queue, batch)
        except Exception as error:
            errors.append(error)

    workers = [
        threading.Thread(target=work, args=(batches[n::threads],), daemon=True)
        for n in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if errors:
        raise errors[0]


def load_one_shard(mode: Mode, queue: Any, db: Any, values: list[int]) -> None:
    """Put every value of ``values`` into shard :data:`ONE_SHARD` of the sharded ``queue``, in
    order: a benchmark-only loader, not a way to use a queue.

    First the library records the queue's type and codec as its first writes do: one value
    (-1, a value the runs never enqueue) is enqueued into each shard through ``mode.put``
    (the writes of a sharded queue go to its shards in turn), and taken away again through
    another object of the queue (so that the run's queue object, whose consumers keep their
    home shards, has not taken anything). Then the values are written with FoundationDB's
    tuple layer directly at the key layout of a sharded queue (``fdbqueue._queues.router``):
    with ``P`` the queue's subspace prefix and ``k`` = :data:`ONE_SHARD`, each value encoded
    by the queue's codec at ``P + pack((k, index, random))`` (indexes from the shard's last
    one + 1, ``random`` 20 bytes of ``os.urandom`` as the recipe's), and, per transaction,
    the shard's size counter ``P + pack((k,)) + b"\\xff" + pack(("size",))``, its enqueue
    counter (``... pack(("enqueued",))``) and its signal key (``... pack(("signal",))``)
    raised by atomic adds of int64 little-endian, as an enqueue raises them;
    :data:`ONE_SHARD_BATCH` values per transaction.

    Raises:
        ValueError: ``queue`` is not a sharded :class:`~fdbqueue.Queue` (a priority queue's
            items have another layout), or the values -1 were not all taken away.
    """
    shards = _shards(queue)
    if shards < 2 or not isinstance(queue, Queue):
        raise ValueError("the one-shard loader writes into a sharded Queue only")
    for _ in range(shards):
        mode.put(queue, db, [-1])
    other = mode.make(queue.subspace)
    taken: list[Any] = []
    while batch := other.dequeue_many(db, shards):
        taken.extend(batch)
    if taken != [-1] * shards:
        raise ValueError(f"the one-shard loader took {taken!r} back, not {shards} x -1")
    shard = queue.subspace.subspace((ONE_SHARD,))
    metadata = shard.key() + b"\xff"
    size_key = metadata + fdb.tuple.pack(("size",))
    enqueued_key = metadata + fdb.tuple.pack(("enqueued",))
    signal_key = metadata + fdb.tuple.pack(("signal",))
    encode = queue.codec.encode
    items = shard.range()

    @transactional
    def write(tr: Any, encoded: list[bytes]) -> None:
        last = list(tr.snapshot.get_range(items.start, items.stop, limit=1, reverse=True))
        index: int = shard.unpack(last[0].key)[0] if last else 0
        for value in encoded:
            index += 1
            tr[shard.pack((index, os.urandom(_RANDOM_BYTES)))] = value
        tr.add(size_key, _COUNTER.pack(len(encoded)))
        tr.add(enqueued_key, _COUNTER.pack(len(encoded)))
        tr.add(signal_key, _COUNTER.pack(1))

    for start in range(0, len(values), ONE_SHARD_BATCH):
        write(db, [encode(value) for value in values[start : start + ONE_SHARD_BATCH]])
