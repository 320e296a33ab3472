"""The order promises of sharded and grouped queues (issue 36 item 7), checked by measuring:

* a sharded Queue loaded by batches of any size, mixed with single enqueues, drains within
  the documented bound: no item is overtaken by more than (N - 1) x (128 + 1) items enqueued
  after it (docs/sharding.rst, "Order");
* a sharded PriorityQueue with one producer and one consumer takes the items of one
  priority FIFO but for at most N - 1 overtaken (round by round over the shards), at both
  ends;
* ``peek_many`` lists a grouped queue in the order takes take it: the groups in turn
  (a1 b1 c1 a2 ...), on 1 shard and within each shard of 4.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import fdb.tuple
import pytest

from fdbqueue import PriorityQueue, Queue, Subspace, memory
from fdbqueue._queues.shard_homes import STAY_TAKES
from fdbqueue.benchmark.measurement import overtaken

# -- a sharded Queue's order bound holds for batches of any size -------------------------------


def single(queue: Queue[int], db: object, start: int, count: int) -> None:
    for value in range(start, start + count):
        queue.enqueue(db, value)


def batch(queue: Queue[int], db: object, start: int, count: int) -> None:
    queue.enqueue_many(db, list(range(start, start + count)))


#: Loads: (shards, [(how, count), ...]) enqueued in order, values counting up.
LOADS = {
    # the measurement: 3,575 overtaken on main (bound about 2,000)
    "2000-batch-then-singles": (16, [(batch, 2000), (single, 2000)]),
    "6000-batch-then-singles": (16, [(batch, 6000), (single, 500)]),
    # small batches alternating with single items: on main the batches all land in every
    # other shard, which then lags further behind with every round
    "small-batches-and-singles": (16, [(batch, 100), (single, 1)] * 40),
    "4-shards-large-batches": (4, [(batch, 1500), (single, 3), (batch, 700), (single, 300)]),
}


@pytest.mark.parametrize(
    "load",
    [
        pytest.param(load, marks=pytest.mark.slow("thousands of items")) if "000-" in load else load
        for load in LOADS
    ],
)
def test_a_sharded_queue_loaded_by_batches_keeps_the_order_bound(load):
    shards, steps = LOADS[load]
    db = memory.open()
    queue: Queue[int] = Queue(Subspace(("order", load)), shards=shards)
    start = 0
    for how, count in steps:
        how(queue, db, start, count)
        start += count
    taken = []
    while (value := queue.dequeue(db)) is not None:
        taken.append(value)
    assert sorted(taken) == list(range(start))  # each once
    bound = (shards - 1) * (STAY_TAKES + 1)
    assert overtaken(taken) <= bound, f"overtaken {overtaken(taken)} > {bound}"


def test_a_batch_lands_as_its_values_enqueued_one_by_one_would():
    """A batch's values go to the shards in turn, and the next write goes on from there:
    every shard holds the same number of items, give or take one, whatever the batches'
    sizes (one transaction per batch still)."""
    db = memory.open()
    queue: Queue[int] = Queue(Subspace(("spread",)), shards=4)
    queue.enqueue_many(db, list(range(10)))
    queue.enqueue(db, 10)
    queue.enqueue_many(db, list(range(11, 14)))
    sizes = [shard.size for shard in queue.info(db).shards]
    assert sorted(sizes) == [3, 3, 4, 4], sizes
    db.reset_stats()
    queue.enqueue_many(db, list(range(14, 414)))
    assert db.stats()["commits"] == 1
    sizes = [shard.size for shard in queue.info(db).shards]
    assert max(sizes) - min(sizes) <= 1, sizes


def test_a_sharded_batch_with_dedup_ids_reports_each_value_in_its_place():
    db = memory.open()
    queue: Queue[int] = Queue(Subspace(("dedup",)), shards=4)
    assert queue.enqueue_many(db, [0, 1], dedup_ids=["a", "b"]) == [True, True]
    admitted = queue.enqueue_many(db, [2, 3, 4, 5, 6], dedup_ids=["c", "a", "d", "b", "e"])
    assert admitted == [True, False, True, False, True]
    taken = queue.dequeue_many(db, 100)
    assert sorted(taken) == [0, 1, 2, 4, 6]


# -- a sharded PriorityQueue: within a priority, FIFO but for N - 1 --------------------------


@pytest.mark.parametrize("shards", [4, 16])
def test_a_sharded_priority_queue_keeps_a_priority_within_n_minus_1_of_fifo(shards):
    """On main, 4 shards popped 0, 1, 3, 5, 2, 4, 6, 10, 8, 7, 11, 9 (ties at random)."""
    db = memory.open()
    queue: PriorityQueue[int] = PriorityQueue(Subspace(("fifo", shards)), shards=shards)
    for value in range(10 * shards):
        queue.push(db, value, 1)
    popped = [queue.pop_min(db) for _ in range(10 * shards)]
    assert sorted(popped) == list(range(10 * shards))
    assert overtaken(popped) <= shards - 1, popped
    # each round of N pops takes the next N items: every shard's count-k item before k + 1
    for start in range(0, 10 * shards, shards):
        assert sorted(popped[start : start + shards]) == list(range(start, start + shards))


@pytest.mark.parametrize("end", ["min", "max"])
def test_a_sharded_priority_queue_pops_by_priority_then_within_n_minus_1_of_push_order(end):
    db = memory.open()
    shards = 4
    queue: PriorityQueue[int] = PriorityQueue(Subspace(("mixed", end)), shards=shards)
    pushed = [(value % 3, value) for value in range(120)]
    for priority, value in pushed:
        queue.push(db, value, priority)
    pop: Callable[[object], int | None] = queue.pop_min if end == "min" else queue.pop_max
    popped = [pop(db) for _ in range(120)]
    order = [0, 1, 2] if end == "min" else [2, 1, 0]
    assert [value % 3 for value in popped] == sorted(
        (value % 3 for value in popped), key=order.index
    )
    for priority in order:
        within = [value for value in popped if value % 3 == priority]
        assert sorted(within) == [value for p, value in pushed if p == priority]
        assert overtaken(within) <= shards - 1, within


def test_a_sharded_priority_queue_peeks_and_claims_within_n_minus_1_of_push_order():
    db = memory.open()
    queue: PriorityQueue[int] = PriorityQueue(Subspace(("claims",)), shards=4)
    for value in range(40):
        queue.push(db, value, 5)
    peeked = queue.peek_many(db, 40)
    assert sorted(peeked) == list(range(40)) and overtaken(peeked) <= 3
    claimed = []
    for _ in range(40):
        lease = queue.claim(db, 60)
        claimed.append(lease.value)
        queue.ack(db, lease)
    assert sorted(claimed) == list(range(40)) and overtaken(claimed) <= 3


# -- peek_many lists a grouped queue in take order ---------------------------------------------


def same_shard_groups(shards: int, count: int) -> list[str]:
    """``count`` group names whose items go to one shard of ``shards`` (the router's CRC-32
    of the packed name, docs/groups.rst)."""
    names = [f"g{n}" for n in range(1000)]
    home = zlib.crc32(fdb.tuple.pack((names[0],))) % shards
    return [name for name in names if zlib.crc32(fdb.tuple.pack((name,))) % shards == home][:count]


@pytest.mark.parametrize("shards", [1, 4])
def test_peek_many_lists_a_grouped_queue_in_take_order(shards):
    db = memory.open()
    queue: Queue[str] = Queue(Subspace(("groups", shards)), shards=shards)
    a, b, c = same_shard_groups(shards, 3)
    for group, count in ((a, 3), (b, 2), (c, 1)):
        queue.enqueue_many(db, [f"{group}-{n}" for n in range(1, count + 1)], group=group)
    expected = [f"{a}-1", f"{b}-1", f"{c}-1", f"{a}-2", f"{b}-2", f"{a}-3"]
    assert queue.peek_many(db, None) == expected
    assert queue.peek_many(db, 4) == expected[:4]
    assert queue.peek(db) == expected[0]
    assert [queue.dequeue(db) for _ in expected] == expected


@pytest.mark.parametrize("shards", [1, 4])
def test_peek_many_lists_a_weighted_group_for_its_turns_items_in_a_row(shards):
    db = memory.open()
    queue: Queue[str] = Queue(Subspace(("weights", shards)), shards=shards)
    a, b = same_shard_groups(shards, 2)
    queue.set_group_weight(db, a, 2)
    for group in (a, b):
        queue.enqueue_many(db, [f"{group}-{n}" for n in range(1, 4)], group=group)
    expected = [f"{a}-1", f"{a}-2", f"{b}-1", f"{a}-3", f"{b}-2", f"{b}-3"]
    assert queue.peek_many(db, None) == expected
    assert [queue.dequeue(db) for _ in expected] == expected


@pytest.mark.parametrize("shards", [1, 4])
def test_peek_many_lists_a_group_in_flight_after_the_groups_in_turn(shards):
    db = memory.open()
    queue: Queue[str] = Queue(Subspace(("in-flight", shards)), shards=shards)
    a, b = same_shard_groups(shards, 2)
    for group in (a, b):
        queue.enqueue_many(db, [f"{group}-{n}" for n in range(1, 4)], group=group)
    lease = queue.claim(db, 60)
    assert lease.value == f"{a}-1"
    # a's next items wait for the lease to end: b's come first
    assert queue.peek_many(db, None) == [f"{b}-1", f"{b}-2", f"{b}-3", f"{a}-2", f"{a}-3"]


@pytest.mark.parametrize("shards", [1, 4])
def test_peek_many_pages_through_many_groups_in_take_order(shards):
    """More items than one page (PAGE_SIZE): the listing goes on in take order."""
    db = memory.open()
    queue: Queue[str] = Queue(Subspace(("pages", shards)), shards=shards)
    groups = same_shard_groups(shards, 30)
    for group in groups:
        queue.enqueue_many(db, [f"{group}-{n}" for n in range(40)], group=group)
    expected = [f"{group}-{n}" for n in range(40) for group in groups]
    assert queue.peek_many(db, None) == expected
    assert queue.peek_many(db, 1001) == expected[:1001]
