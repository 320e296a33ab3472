"""The enqueue counter (``QueueInfo.enqueued``, ``P + b"\\xff" + pack(("enqueued",))`` per
shard): every enqueue, push and requeue raises it by exactly the items it adds, a delayed
item when enqueued (not again when it falls due); takes, leases, dead-lettering and moves
between shards leave it alone, and a clear sets it back to 0. For both queue types, with one
shard and with four."""

from __future__ import annotations

import time
from typing import Any

import fdb.tuple
import pytest
from helpers import all_keys, run

from fdbqueue import PriorityQueue, Queue, QueueInfo, transactional

KINDS = pytest.mark.parametrize("kind", ["queue", "priority"])
SHARDS = pytest.mark.parametrize("shards", [1, 4])
DELAY = 0.2  # seconds


def make(kind: str, subspace: Any, shards: int) -> Any:
    if kind == "queue":
        return Queue(subspace, shards=shards, max_deliveries=5)
    return PriorityQueue(subspace, shards=shards, max_deliveries=5)


def put(queue: Any, tr: Any, value: Any, **options: Any) -> None:
    """Enqueue (a Queue) or push at priority 3 (a PriorityQueue) one value."""
    if isinstance(queue, Queue):
        queue.enqueue(tr, value, **options)
    else:
        queue.push(tr, value, 3, **options)


def take(queue: Any, db: Any) -> Any:
    return queue.dequeue(db) if isinstance(queue, Queue) else queue.pop_min(db)


def enqueued(queue: Any, db: Any) -> int:
    """The queue's enqueue counter, checked against the sum of its shards' counters."""
    info: QueueInfo = queue.info(db)
    if info.shards:
        assert info.enqueued == sum(shard.enqueued for shard in info.shards)
    return info.enqueued


@KINDS
@SHARDS
def test_each_enqueue_raises_the_counter_by_the_items_it_adds(db, subspace, kind, shards):
    queue = make(kind, subspace, shards)
    assert enqueued(queue, db) == 0
    put(queue, db, "one")  # given a Database: a Queue's steady path
    assert enqueued(queue, db) == 1
    transactional(lambda tr: put(queue, tr, "two"))(db)  # given a Transaction: layered
    assert enqueued(queue, db) == 2
    put(queue, db, "grouped", group="g")
    assert enqueued(queue, db) == 3
    if isinstance(queue, Queue):
        queue.enqueue_many(db, [f"batch-{n}" for n in range(10)])  # runs over the shards
        assert enqueued(queue, db) == 13
        assert queue.enqueue_many(db, ["a", "b"], dedup_ids=["x", "y"]) == [True, True]
        assert queue.enqueue_many(db, ["a", "c"], dedup_ids=["x", "z"]) == [False, True]
        assert enqueued(queue, db) == 16  # the duplicate is not enqueued, nor counted
    else:
        for priority in range(10):
            queue.push(db, f"p{priority}", priority)
        assert enqueued(queue, db) == 13
    assert queue.size(db) == enqueued(queue, db)


@KINDS
@SHARDS
def test_a_delayed_item_counts_when_enqueued_not_when_it_falls_due(db, subspace, kind, shards):
    """``held`` counts delayed items, so the item is counted as it enters them: once."""
    queue = make(kind, subspace, shards)
    put(queue, db, "later", delay=DELAY)
    if isinstance(queue, Queue):
        queue.enqueue_many(db, ["l1", "l2", "l3"], delay=DELAY)
    assert enqueued(queue, db) == (4 if isinstance(queue, Queue) else 1)
    assert queue.info(db).delayed == enqueued(queue, db)
    time.sleep(DELAY + 0.1)
    taken = [take(queue, db) for _ in range(4)]
    assert "later" in taken  # it fell due and was promoted into the queue, then taken
    assert enqueued(queue, db) == (4 if isinstance(queue, Queue) else 1)
    assert queue.info(db).delayed == 0


@KINDS
@SHARDS
def test_takes_leases_and_dead_letters_leave_the_counter_and_requeues_raise_it(
    db, subspace, kind, shards
):
    queue = make(kind, subspace, shards)
    for value in ("a", "b", "c", "d", "e"):
        put(queue, db, value)
    assert take(queue, db) is not None
    queue.ack(db, queue.claim(db, 30))
    queue.release(db, queue.claim(db, 30))
    for _ in range(2):
        queue.dead_letter(db, queue.claim(db, 30), "failed")
    assert enqueued(queue, db) == 5
    assert queue.info(db).dead_letters == 2
    letter = queue.dead_letters(db, limit=1)[0]
    assert queue.requeue_dead_letter(db, letter)
    assert enqueued(queue, db) == 6  # back in the queue: enqueued again
    assert queue.requeue_dead_letters(db) == 1
    assert enqueued(queue, db) == 7
    info = queue.info(db)
    # 7 enqueued, 4 gone: one dequeued, one acknowledged, two dead-lettered (and requeued)
    assert info.size + info.leases_in_flight + info.delayed == 3


def test_a_move_between_shards_leaves_the_counters(db, subspace):
    """A consumer whose home shard is empty moves a crowded shard's front into it
    (``FifoShard.move_front``): neither an enqueue nor a take."""
    queue = Queue(subspace, shards=4)
    crowded, home = queue._router.shards[0], queue._router.shards[1]
    crowded.write(db, [(crowded, [crowded.store.encode(n) for n in range(128)])], (), 0.0, None)
    before = queue.info(db)
    assert before.enqueued == 128 and before.shards[0].enqueued == 128  # one batch, one shard
    moved = run(db, lambda tr: crowded.move_front(tr, home, 64))
    assert moved == 64
    after = queue.info(db)
    assert [shard.size for shard in after.shards] == [64, 64, 0, 0]
    assert [shard.enqueued for shard in after.shards] == [128, 0, 0, 0]
    assert after.enqueued == 128


@KINDS
@SHARDS
def test_clear_sets_the_counter_back_to_zero(db, subspace, kind, shards):
    queue = make(kind, subspace, shards)
    for value in ("a", "b", "c"):
        put(queue, db, value)
    queue.clear(db)
    assert enqueued(queue, db) == 0
    put(queue, db, "d")
    assert enqueued(queue, db) == 1


@SHARDS
def test_the_counter_lives_beside_the_size_counter(db, subspace, shards):
    queue = Queue(subspace, shards=shards)
    queue.enqueue_many(db, list(range(8)))
    keys = dict(all_keys(db, subspace))
    prefixes = [subspace.key()] if shards == 1 else [
        subspace.key() + fdb.tuple.pack((shard,)) for shard in range(shards)
    ]  # fmt: skip
    counters = [keys.get(prefix + b"\xff" + fdb.tuple.pack(("enqueued",))) for prefix in prefixes]
    assert sum(int.from_bytes(counter or b"", "little", signed=True) for counter in counters) == 8
    assert all(counter is None or len(counter) == 8 for counter in counters)
