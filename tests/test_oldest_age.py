"""The age of the oldest item (QueueInfo.oldest_age, Queue.oldest_age; the gauge
fdbqueue.queue.oldest_age is in test_observability.py): its accuracy bound with a controlled
clock, clock skew, faults and recoveries, clear(), and the records it keeps bounded. Every
queue type and shard count (and asyncio, in test_matrix.py's test_oldest_age)."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import all_keys, despite_timeouts, pass_time

from fdbqueue import PriorityQueue, Queue, Subspace, memory
from fdbqueue._storage import ages

KINDS = [
    pytest.param(kind, shards, id=f"{kind}-{shards}shard")
    for kind in ("queue", "priority")
    for shards in (1, 4)
]


def quick_only(quick: str) -> list[Any]:
    """KINDS, every cell but ``quick`` marked slow: for the tests of thousands of
    transactions, which take seconds a cell."""
    slow = pytest.mark.slow("thousands of transactions")
    return [k if k.id == quick else pytest.param(*k.values, id=k.id, marks=slow) for k in KINDS]


class Clock:
    """A wall clock the test moves (fdbqueue._storage.ages.clock)."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    made = Clock()
    monkeypatch.setattr(ages, "clock", made)
    return made


def make(kind: str, shards: int, name: str = "ages", **kwargs: Any) -> Any:
    queue_class = PriorityQueue if kind == "priority" else Queue
    return queue_class(Subspace((name,)), shards=shards, **kwargs)


def put(queue: Any, db: Any, value: Any, priority: int = 0) -> None:
    if isinstance(queue, PriorityQueue):
        queue.push(db, value, priority)
    else:
        queue.enqueue(db, value)


def take(queue: Any, db: Any) -> Any:
    return queue.pop_min(db) if isinstance(queue, PriorityQueue) else queue.dequeue(db)


def began_records(db: Any, queue: Any) -> int:
    return sum(1 for key, _ in all_keys(db, queue.subspace) if b"began" in key)


@pytest.mark.parametrize(("kind", "shards"), quick_only("priority-1shard"))
def test_oldest_age_is_an_upper_bound_within_the_time_of_64_positions(clock, kind, shards):
    """One item a second: the reported age is never below the oldest item's true age, and
    above it by at most the time its shard took to receive 64 items (64 s per shard)."""
    db = memory.open()
    queue = make(kind, shards)
    enqueued_at = {}
    for i in range(400):
        put(queue, db, i)
        enqueued_at[i] = clock.now
        clock.now += 1
    for taken in range(400):
        waiting = queue.peek_many(db, None)
        true_age = clock.now - min(enqueued_at[value] for value in waiting)
        info = queue.info(db)
        assert info.oldest_age == queue.oldest_age(db)
        assert true_age <= info.oldest_age <= true_age + 64 * shards
        if taken in (0, 100, 399) and shards > 1:  # the queue's: the oldest of its shards
            assert info.oldest_age == max(
                part.oldest_age for part in info.shards if part.oldest_age is not None
            )
        take(queue, db)
        clock.now += 0.5
    assert queue.info(db).oldest_age is None
    assert queue.oldest_age(db) is None


@pytest.mark.parametrize(("kind", "shards"), KINDS)
def test_a_slow_queue_reports_each_front_item_exactly_at_bucket_starts(clock, kind, shards):
    """A bucket's first item carries its record: with one item per bucket boundary the age
    is exact; everything read is measured in wall-clock seconds, not versions."""
    db = memory.open()
    queue = make(kind, shards)
    put(queue, db, "first")
    clock.now += 42.5
    pass_time(db, 1000)  # versions move, the wall clock does not: no change
    assert queue.info(db).oldest_age == 42.5
    put(queue, db, "second")
    clock.now += 10
    assert queue.oldest_age(db) == 52.5
    take(queue, db)
    take(queue, db)
    assert queue.oldest_age(db) is None
    clock.now += 100
    put(queue, db, "after empty")  # a new run: its own record, not the old one's
    clock.now += 3
    assert queue.oldest_age(db) == 3


@pytest.mark.parametrize("shards", [1, 4])
def test_the_oldest_item_of_any_priority_counts_not_only_the_front(clock, shards):
    db = memory.open()
    queue = make("priority", shards)
    queue.push(db, "old, low priority", 9)
    clock.now += 100
    for i in range(10):
        queue.push(db, f"urgent {i}", 1)
    clock.now += 5
    assert queue.oldest_age(db) == 105  # the front (pop_min) is 5 s old; the oldest 105
    for _ in range(10):
        queue.pop_min(db)
    assert queue.oldest_age(db) == 105
    assert queue.pop_max(db) == "old, low priority"
    assert queue.oldest_age(db) is None


@pytest.mark.parametrize(("kind", "shards"), KINDS)
def test_a_producer_clock_ahead_lowers_ages_by_the_skew_never_below_zero(clock, kind, shards):
    db = memory.open()
    queue = make(kind, shards)
    clock.now += 30  # the producer's clock is 30 s ahead of the reader's
    put(queue, db, "x")
    clock.now -= 30
    assert queue.oldest_age(db) == 0.0  # -30 s, shown as 0
    clock.now += 50
    assert queue.oldest_age(db) == 20  # 50 s old, 30 s of skew


@pytest.mark.parametrize(("kind", "shards"), KINDS)
def test_under_unknown_results_and_recoveries_ages_keep_their_bound(clock, kind, shards):
    """Commits fail with 1021 (applied or not), 1021 with a cluster recovery (versions jump
    100,000,000 ahead), 1020 and timeouts: a retried enqueue records its retry's time, so the
    bound holds; a recovery changes no age."""
    faults = memory.Faults(
        not_committed=0.05, commit_unknown_result=0.15, timed_out=0.05, recovery=0.05
    )
    db = memory.open(faults=faults, seed=7)
    queue = make(kind, shards)
    enqueued_at = {}
    for i in range(150):
        despite_timeouts(lambda i=i: put(queue, db, i))
        enqueued_at[i] = clock.now
        clock.now += 1
    assert db.stats()["injected_recovery"] > 0
    for _ in range(60):
        despite_timeouts(lambda: take(queue, db))
    db.faults = memory.Faults()
    waiting = queue.peek_many(db, None)
    true_age = clock.now - min(enqueued_at[value] for value in waiting)
    assert true_age <= queue.oldest_age(db) <= true_age + 64 * shards


@pytest.mark.parametrize(("kind", "shards"), quick_only("queue-1shard"))
def test_clear_removes_the_records_and_takes_keep_them_few(clock, kind, shards):
    db = memory.open()
    queue = make(kind, shards)
    for _round in range(3):
        for i in range(64 * 20):
            put(queue, db, i)
        for _ in range(64 * 20 - 10):
            take(queue, db)
        # ten items left: per shard a few records (two buckets kept, a third begun)
        assert began_records(db, queue) <= 3 * shards
    queue.clear(db)
    assert began_records(db, queue) == 0
    assert queue.oldest_age(db) is None
    put(queue, db, "new")
    clock.now += 1
    assert queue.oldest_age(db) == 1


@pytest.mark.parametrize("shards", [1, 4])
@pytest.mark.parametrize("highest", [False, True], ids=["pop_min", "pop_max"])
def test_priorities_that_pops_emptied_leave_no_records(clock, shards, highest):
    """A queue that uses each priority once (a time as the priority, say) keeps no record of
    the priorities its pops passed: a plain pop clears those of the priorities it read
    empty."""
    db = memory.open()
    queue = make("priority", shards)
    for priority in range(300):
        queue.push(db, priority, priority)
        clock.now += 1
    assert began_records(db, queue) == 300
    for _ in range(150):
        (queue.pop_max if highest else queue.pop_min)(db)
    assert began_records(db, queue) <= 150 + shards  # the priorities left, and one each
    waiting = queue.peek_many(db, None)
    assert queue.oldest_age(db) == clock.now - 1_000_000.0 - min(waiting)
    while (queue.pop_max if highest else queue.pop_min)(db) is not None:
        pass
    assert began_records(db, queue) <= shards
    assert queue.oldest_age(db) is None


@pytest.mark.parametrize(("kind", "shards"), KINDS)
def test_an_enqueue_reads_nothing_more_and_writes_blind(clock, kind, shards):
    """Enqueues never conflict over the records: a crowd of producers writing bucket starts
    at once all commit at the first attempt."""
    db = memory.open()
    queue = make(kind, shards)
    before = db.stats()
    for i in range(200):
        put(queue, db, i)
    stats = db.stats()
    assert stats["conflicts"] == before["conflicts"]
    assert queue.oldest_age(db) == 0


def put_grouped(queue: Any, db: Any, value: Any, group: str) -> None:
    if isinstance(queue, PriorityQueue):
        queue.push(db, value, 0, group=group)
    else:
        queue.enqueue(db, value, group=group)


@pytest.mark.parametrize(("kind", "shards"), KINDS)
def test_a_queue_of_grouped_items_reports_their_age(clock, kind, shards):
    """Items enqueued into message groups count: a queue holding only grouped items is not
    empty, and its age is its oldest waiting item's, within the same bound."""
    db = memory.open()
    queue = make(kind, shards)
    enqueued_at: dict[Any, float] = {}
    for i in range(200):
        put_grouped(queue, db, i, f"g{i % 3}")
        enqueued_at[i] = clock.now
        clock.now += 1
    for _ in range(150):
        waiting = queue.peek_many(db, None)
        true_age = clock.now - min(enqueued_at[value] for value in waiting)
        age = queue.oldest_age(db)
        assert age is not None and true_age <= age <= true_age + 64 * 3
        take(queue, db)
        clock.now += 1


@pytest.mark.parametrize(("kind", "shards"), KINDS)
def test_the_older_of_plain_and_grouped_items_counts(clock, kind, shards):
    db = memory.open()
    queue = make(kind, shards)
    put_grouped(queue, db, "grouped", "g")
    clock.now += 10
    put(queue, db, "plain")
    clock.now += 5
    assert queue.oldest_age(db) == 15  # the grouped item's
    queue2 = make(kind, shards, name="ages-2")
    put(queue2, db, "plain")
    clock.now += 10
    put_grouped(queue2, db, "grouped", "g")
    clock.now += 5
    assert queue2.oldest_age(db) == 15  # the plain item's


@pytest.mark.parametrize(("kind", "shards"), KINDS)
def test_groups_that_come_and_go_leave_no_records(clock, kind, shards):
    """A group's records go when it becomes inactive, taken plainly or through leases: a
    queue used with one group per job (an order id, say) keeps none of them."""
    db = memory.open()
    queue = make(kind, shards)
    for job in range(100):
        put_grouped(queue, db, job, f"order-{job}")
    assert began_records(db, queue) == 100
    for _ in range(50):
        take(queue, db)
    for _ in range(50):
        lease = queue.claim(db, lease=30)
        queue.ack(db, lease)
    assert began_records(db, queue) == 0
    assert queue.oldest_age(db) is None and queue.size(db) == 0


@pytest.mark.parametrize(("kind", "shards"), KINDS)
def test_a_grouped_item_in_a_lease_is_not_waiting(clock, kind, shards):
    db = memory.open()
    queue = make(kind, shards)
    put_grouped(queue, db, "a", "g")
    clock.now += 10
    put_grouped(queue, db, "b", "g")
    clock.now += 5
    lease = queue.claim(db, lease=30)
    assert lease.value == "a"
    assert queue.oldest_age(db) == 15  # "b" shares "a"'s bucket: the bound's upper end
    queue.ack(db, lease)
    assert queue.oldest_age(db) == 15
    assert take(queue, db) == "b"
    assert queue.oldest_age(db) is None
