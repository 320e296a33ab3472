"""The age of the oldest item (QueueInfo.oldest_age, Queue.oldest_age; the gauge
fdbqueue.queue.oldest_age is in test_observability.py): its accuracy bound (under 5 s too
large, at one item a second and one a minute, time let pass with ``db.pass_time``), clock
skew with a controlled clock, faults and recoveries, clear(), and the records it keeps
bounded. Every queue type and shard count, grouped items, the steady and the layered paths,
and asyncio (here and in test_matrix.py's test_oldest_age)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from helpers import all_keys, despite_timeouts, pass_time

import fdbqueue.asyncio as fa
from fdbqueue import PriorityQueue, Queue, Subspace, _clock, memory, transactional

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
    """A wall clock the test moves (fdbqueue._clock.now)."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    made = Clock()
    monkeypatch.setattr(_clock, "now", made)
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
def test_oldest_age_is_an_upper_bound_within_five_seconds(clock, kind, shards):
    """One item a second: the reported age is never below the oldest item's true age, and
    above it by less than 5 s (before: the time its shard took to receive 64 items)."""
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
        assert true_age <= info.oldest_age < true_age + 5
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
    assert true_age <= queue.oldest_age(db) < true_age + 5


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
        assert age is not None and true_age <= age < true_age + 5
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
    assert queue.oldest_age(db) == 5  # "b" came 10 s after "a": a slot of its own
    queue.ack(db, lease)
    assert queue.oldest_age(db) == 5
    assert take(queue, db) == "b"
    assert queue.oldest_age(db) is None


# -- the bound in seconds, with time let pass (db.pass_time) -----------------------------------

#: The documented bound: an age is too large by at most this many seconds
#: (:data:`fdbqueue._storage.ages.SLOT_SECONDS`), whatever the rate of enqueues.
BOUND = 5.0
RATES = [
    pytest.param(1.0, id="1-a-second"),
    pytest.param(60.0, id="1-a-minute", marks=pytest.mark.slow("hours of controlled time")),
]


class Ages:
    """The times around each put (the wall clock fdbqueue reads, moved by db.pass_time), and
    the check that a reported age lies within its bound of the oldest waiting item's."""

    def __init__(self) -> None:
        self.before: dict[Any, float] = {}
        self.after: dict[Any, float] = {}

    def put(self, value: Any, putting: Any) -> Any:
        self.before[value] = memory.wall_clock()
        result = putting()
        self.after[value] = memory.wall_clock()
        return result

    def check(self, waiting: list[Any], read_age: Any) -> None:
        """The true age lies in [low, high] (the clock moves a little while we read it); the
        reported one between the lowest and the highest plus the bound."""
        start = memory.wall_clock()
        age = read_age()
        end = memory.wall_clock()
        low = start - min(self.after[value] for value in waiting)
        high = end - min(self.before[value] for value in waiting)
        assert age is not None
        assert low <= age <= high + BOUND, (low, age, high)


def put_any(queue: Any, db: Any, value: Any, grouped: bool) -> None:
    if grouped:
        put_grouped(queue, db, value, f"g{value % 3}")
    else:
        put(queue, db, value)


@pytest.mark.parametrize("grouped", [False, True], ids=["plain", "grouped"])
@pytest.mark.parametrize("interval", RATES)
@pytest.mark.parametrize(("kind", "shards"), KINDS)
def test_ages_are_too_large_by_under_five_seconds_at_low_rates(kind, shards, interval, grouped):
    """Before, an age was that of the front item's bucket of 64 positions: at one item a
    second up to 63 s too large per shard (a 0 s old front read 30 s), at one a minute up to
    63 minutes. Now under 5 s at both rates, for every shape."""
    db = memory.open()
    queue = make(kind, shards)
    ages_seen = Ages()
    for i in range(130):
        ages_seen.put(i, lambda i=i: put_any(queue, db, i, grouped))
        db.pass_time(interval)
    while waiting := queue.peek_many(db, None):
        ages_seen.check(waiting, lambda: queue.oldest_age(db))
        ages_seen.check(waiting, lambda: queue.info(db).oldest_age)
        for _ in range(3):
            take(queue, db)
        db.pass_time(interval / 2)
    assert queue.oldest_age(db) is None


@pytest.mark.parametrize("interval", RATES)
@pytest.mark.parametrize("shards", [1, 4])
def test_the_bound_holds_for_enqueues_inside_transactions(shards, interval):
    """Given a Transaction, an enqueue takes the layered path (a Database's, the steady one),
    enqueue_many writes several items at once: the same bound."""
    db = memory.open()
    queue = make("queue", shards)

    @transactional
    def put_in(tr: Any, values: list[int]) -> None:
        queue.enqueue_many(tr, values)

    ages_seen = Ages()
    for i in range(0, 150, 2):
        ages_seen.put(i, lambda i=i: put_in(db, [i, i + 1]))
        ages_seen.after[i + 1], ages_seen.before[i + 1] = ages_seen.after[i], ages_seen.before[i]
        db.pass_time(interval)
    while waiting := queue.peek_many(db, None):
        ages_seen.check(waiting, lambda: queue.oldest_age(db))
        for _ in range(4):
            queue.dequeue(db)
        db.pass_time(interval / 3)


@pytest.mark.parametrize("interval", RATES)
@pytest.mark.parametrize("shards", [1, 4])
@pytest.mark.parametrize("kind", ["queue", "priority"])
def test_the_bound_holds_for_the_asyncio_twins(kind, shards, interval):
    db = memory.open()
    twin = fa.PriorityQueue if kind == "priority" else fa.Queue
    queue: Any = twin(Subspace(("ages-async",)), shards=shards)
    ages_seen = Ages()

    async def scenario() -> None:
        for i in range(100):
            ages_seen.before[i] = memory.wall_clock()
            await (queue.push(db, i, 0) if kind == "priority" else queue.enqueue(db, i))
            ages_seen.after[i] = memory.wall_clock()
            db.pass_time(interval)
        while waiting := await queue.peek_many(db, None):
            start = memory.wall_clock()
            age = await queue.oldest_age(db)
            end = memory.wall_clock()
            low = start - min(ages_seen.after[value] for value in waiting)
            high = end - min(ages_seen.before[value] for value in waiting)
            assert age is not None and low <= age <= high + BOUND
            for _ in range(3):
                await (queue.pop_min(db) if kind == "priority" else queue.dequeue(db))
            db.pass_time(interval / 2)

    asyncio.run(scenario())


@pytest.mark.parametrize(("kind", "shards"), KINDS)
def test_at_low_rates_records_stay_about_one_per_five_seconds_of_waiting_items(kind, shards):
    """Ten items waiting, taken as they come: the records stay at most one per waiting item
    plus those of the items taken from each shard's front bucket (64 at most); at one item a
    second into one shard, one per five seconds of its bucket (13) plus the waiting ones."""
    db = memory.open()
    queue = make(kind, shards)
    most = 0
    for i in range(400):
        put(queue, db, i)
        if i >= 10:
            take(queue, db)
        db.pass_time(1)
        most = max(most, began_records(db, queue))
    assert most <= 10 + 65 * shards
    if shards == 1:
        assert most <= 10 + 64 // 5 + 1
    most = 0
    for i in range(200):
        put(queue, db, i)
        take(queue, db)
        db.pass_time(60)
        most = max(most, began_records(db, queue))
    assert most <= 10 + 65 * shards
