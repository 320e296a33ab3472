"""Delayed delivery: enqueue/push with ``delay=``, release with ``delay=``
(fdbqueue._delivery.delays)."""

from __future__ import annotations

import math
import threading
import time
import uuid
from typing import Any

import pytest
from helpers import all_keys, despite_timeouts, installed_fdb, pass_time

from fdbqueue import PriorityQueue, Queue, Subspace, memory
from fdbqueue._delivery.delays import MAX_DELAY_SECONDS, PROMOTE_RECORDS

SHORT = 0.3  # seconds: long enough to see an item is not early, short enough for a test


def make(kind: str, subspace: Any, **options: Any) -> tuple[Any, Any, Any]:
    """(queue, put(tr, value, delay), take(tr, **blocking))."""
    if kind == "queue":
        queue = Queue(subspace, **options)
        return queue, lambda tr, v, delay=None: queue.enqueue(tr, v, delay=delay), queue.dequeue
    priority_queue = PriorityQueue(subspace, **options)

    def push(tr: Any, value: Any, delay: float | None = None) -> None:
        priority_queue.push(tr, value, 3, delay=delay)

    return priority_queue, push, priority_queue.pop_min


KINDS = pytest.mark.parametrize("kind", ["queue", "priority"])
MODES = pytest.mark.parametrize("high_contention", [False, True])


@KINDS
@MODES
def test_a_delayed_item_is_not_delivered_early_and_is_delivered_when_due(
    db, subspace, kind, high_contention
):
    queue, put, take = make(kind, subspace, high_contention=high_contention)
    put(db, "later", SHORT)
    put(db, "now")
    assert take(db) == "now"
    assert take(db) is None  # not yet due: invisible
    assert queue.size(db) == 0
    time.sleep(SHORT + 0.05)
    assert take(db) == "later"
    assert take(db) is None


@KINDS
@MODES
def test_a_blocked_consumer_wakes_when_the_item_falls_due_without_any_write(
    db, subspace, kind, high_contention
):
    _queue, put, take = make(kind, subspace, high_contention=high_contention)
    put(db, "due", SHORT)
    started = time.monotonic()
    assert take(db, block=True, timeout=5) == "due"
    waited = time.monotonic() - started
    assert SHORT - 0.05 <= waited < SHORT + 1.0


def test_a_consumer_blocked_before_the_delayed_enqueue_wakes_when_it_falls_due(db, subspace):
    queue = Queue(subspace)
    got: list[Any] = []
    consumer = threading.Thread(target=lambda: got.append(queue.dequeue(db, block=True, timeout=5)))
    consumer.start()
    time.sleep(0.1)  # the consumer is waiting on its watch
    enqueued_at = time.monotonic()
    queue.enqueue(db, "x", delay=SHORT)
    consumer.join()
    assert got == ["x"]
    assert time.monotonic() - enqueued_at >= SHORT - 0.05


@MODES
def test_claims_and_consumer_sessions_see_delayed_items_only_when_due(
    db, subspace, high_contention
):
    queue = Queue(subspace, high_contention=high_contention)
    queue.enqueue(db, "job", delay=SHORT)
    assert queue.claim(db, lease=10) is None
    lease = queue.claim(db, lease=10, block=True, timeout=5)
    assert lease is not None and lease.value == "job"
    queue.ack(db, lease)
    with queue.consumer(db, prefetch=2) as session:  # its places come first in line
        queue.enqueue(db, "next", delay=SHORT)
        assert session.dequeue() is None
        assert session.dequeue(block=True, timeout=5) == "next"


def test_enqueue_many_with_a_delay_keeps_its_order_and_goes_behind_items_already_queued(
    db, subspace
):
    queue = Queue(subspace)
    queue.enqueue_many(db, ["d1", "d2", "d3", "d4"], delay=SHORT)
    queue.enqueue(db, "early")
    time.sleep(SHORT + 0.05)
    queue.enqueue(db, "after-due")  # enqueued after the delayed ones fell due, before promotion
    assert queue.dequeue_many(db, 10) == ["early", "after-due", "d1", "d2", "d3", "d4"]


def test_a_delayed_push_joins_the_back_of_its_priority(db, subspace):
    queue = PriorityQueue(subspace)
    queue.push(db, "late-1", 1, delay=SHORT)
    queue.push(db, "p1", 1)
    queue.push(db, "p2", 2)
    time.sleep(SHORT + 0.05)
    assert [queue.pop_min(db) for _ in range(4)] == ["p1", "late-1", "p2", None]


def test_pop_max_promotes_too(db, subspace):
    queue = PriorityQueue(subspace)
    queue.push(db, "top", 9, delay=SHORT)
    queue.push(db, "low", 1)
    assert queue.pop_max(db) == "low"
    assert queue.pop_max(db, block=True, timeout=5) == "top"


@pytest.mark.parametrize(
    ("delay", "error"),
    [
        (-1, ValueError),
        (math.nan, ValueError),
        (math.inf, ValueError),
        (MAX_DELAY_SECONDS + 1, ValueError),
        (True, TypeError),
        ("5", TypeError),
    ],
)
@KINDS
def test_a_bad_delay_is_refused_and_nothing_is_written(db, subspace, kind, delay, error):
    _queue, put, _take = make(kind, subspace)
    with pytest.raises(error, match="delay"):
        put(db, "x", delay)
    assert all_keys(db, subspace) == []


@KINDS
def test_a_zero_or_none_delay_enqueues_at_once(db, subspace, kind):
    _queue, put, take = make(kind, subspace)
    put(db, "a", 0)
    put(db, "b", None)
    assert [take(db), take(db)] == ["a", "b"]


def test_a_delayed_push_whose_key_would_be_too_large_is_refused(db):
    # the longest prefix fdbqueue accepts, and a priority whose item key still fits
    prefix = b"\x01" + b"p" * (10_000 - 128 - 3) + b"\x00"
    queue = PriorityQueue(Subspace(rawPrefix=prefix))
    priority = 2 ** (8 * 79)
    with pytest.raises(ValueError, match="delayed item's key"):
        queue.push(db, "x", priority, delay=1)
    queue.push(db, "x", priority)  # without a delay it fits
    assert queue.pop_min(db) == "x"


def test_largest_values_delayed_in_bulk_are_promoted_over_several_transactions():
    db = memory.open(seed=3)
    queue = Queue(Subspace(("big-delayed",)), codec="raw")
    value = b"x" * 100_000
    count = 25  # 2.5 MB of values: more than one promotion's byte budget
    for _ in range(count):
        queue.enqueue(db, value, delay=1)
    pass_time(db, 2)
    taken = []
    while (item := queue.dequeue(db)) is not None:
        taken.append(item)
    assert taken == [value] * count


def test_more_due_records_than_one_promotion_takes_all_arrive_in_order():
    db = memory.open(seed=4)
    queue = Queue(Subspace(("many-delayed",)))
    n = PROMOTE_RECORDS * 2 + 7
    queue.enqueue_many(db, range(n), delay=1)
    pass_time(db, 2)
    taken = []
    while batch := queue.dequeue_many(db, 10_000):
        taken.extend(batch)  # each transaction promotes at most PROMOTE_RECORDS
    assert taken == list(range(n))


def test_clear_removes_delayed_items(db, subspace):
    queue = Queue(subspace)
    queue.enqueue(db, "x", delay=SHORT)
    queue.clear(db)
    time.sleep(SHORT + 0.05)
    assert queue.dequeue(db) is None
    assert not [key for key, _value in all_keys(db, subspace) if b"delayed" in key]


def test_delays_are_measured_in_read_versions_not_the_client_clock():
    db = memory.open(seed=5)
    queue = Queue(Subspace(("versions",)))
    queue.enqueue(db, "x", delay=3600)
    assert queue.dequeue(db) is None
    pass_time(db, 3599)
    assert queue.dequeue(db) is None
    pass_time(db, 2)
    assert queue.dequeue(db) == "x"


EVERY_FAULT = memory.Faults(
    not_committed=0.05,
    commit_unknown_result=0.15,
    transaction_too_old=0.05,
    timed_out=0.1,
)


@KINDS
@MODES
def test_under_faults_every_delayed_item_is_enqueued_once_and_delivered_once(kind, high_contention):
    db = memory.open(faults=EVERY_FAULT, seed=29)
    _queue, put, take = make(kind, Subspace(("delayed-faults",)), high_contention=high_contention)
    for value in range(40):
        despite_timeouts(lambda value=value: put(db, value, 1 + value % 3))
    assert despite_timeouts(lambda: take(db)) is None
    pass_time(db, 5)
    taken = []
    while (value := despite_timeouts(lambda: take(db))) is not None:
        taken.append(value)
    db.faults = memory.Faults()
    db.settle()
    assert sorted(taken) == list(range(40))  # none lost, none twice
    assert db.stats()["injected_commit_unknown_result_applied"] > 0


def test_concurrent_delayed_enqueues_and_promotions_lose_no_item():
    """A promotion rewrites the hint; a delayed enqueue lowering it meanwhile must not be
    lost (the promotion conflicts on the hint and retries)."""
    db = memory.open(seed=8)
    queue = Queue(Subspace(("hint-race",)))
    n_producers, per_producer = 4, 30
    taken: list[Any] = []
    lock = threading.Lock()
    done = threading.Event()

    def produce(p: int) -> None:
        for i in range(per_producer):
            queue.enqueue(db, (p, i), delay=0.01 * (i % 4))

    def consume() -> None:
        while not done.is_set() or queue.size(db):
            value = queue.dequeue(db, block=True, timeout=0.2)
            if value is not None:
                with lock:
                    taken.append(value)

    consumers = [threading.Thread(target=consume) for _ in range(3)]
    producers = [threading.Thread(target=produce, args=(p,)) for p in range(n_producers)]
    for thread in consumers + producers:
        thread.start()
    for thread in producers:
        thread.join()
    time.sleep(0.2)  # the last delayed items fall due
    done.set()
    for thread in consumers:
        thread.join()
    while (value := queue.dequeue(db)) is not None:
        taken.append(value)
    expected = [(p, i) for p in range(n_producers) for i in range(per_producer)]
    assert sorted(taken) == expected


def test_delayed_items_through_the_fdb_binding(tmp_path):
    fdb = installed_fdb()
    database = fdb.open(str(tmp_path / f"{uuid.uuid4().hex}.cluster"))
    queue = Queue(Subspace(("binding-delayed",)))
    queue.enqueue(database, "x", delay=SHORT)
    assert queue.dequeue(database) is None
    assert queue.dequeue(database, block=True, timeout=5) == "x"


# -- release with a delay, and dead_letter ----------------------------------------------------


def test_release_with_a_delay_makes_the_item_claimable_only_then(db, subspace):
    queue = Queue(subspace)
    queue.enqueue(db, "job")
    lease = queue.claim(db, lease=30)
    queue.release(db, lease, delay=SHORT)
    assert queue.claim(db, lease=30) is None
    started = time.monotonic()
    again = queue.claim(db, lease=30, block=True, timeout=5)
    assert again is not None and again.value == "job" and again.deliveries == 2
    assert time.monotonic() - started >= SHORT - 0.1


@pytest.mark.parametrize(
    ("delay", "error"), [(-1, ValueError), (True, TypeError), ("1", TypeError)]
)
def test_release_with_a_bad_delay_changes_nothing(db, subspace, delay, error):
    queue = Queue(subspace)
    queue.enqueue(db, "job")
    lease = queue.claim(db, lease=30)
    with pytest.raises(error):
        queue.release(db, lease, delay=delay)
    queue.ack(db, lease)  # still held


def test_dead_letter_moves_a_held_item_with_the_reason(db, subspace):
    queue = Queue(subspace)
    queue.enqueue(db, "job")
    lease = queue.claim(db, lease=30)
    queue.dead_letter(db, lease, "ZeroDivisionError: division by zero")
    [letter] = queue.dead_letters(db)
    assert (letter.value, letter.deliveries, letter.reason) == (
        "job",
        1,
        "ZeroDivisionError: division by zero",
    )
    assert queue.claim(db, lease=30) is None
    assert queue.requeue_dead_letters(db) == 1
    assert queue.dequeue(db) == "job"


def test_dead_letter_of_a_lease_no_longer_held_raises_and_changes_nothing(db, subspace):
    from fdbqueue import LeaseNotHeldError

    queue = Queue(subspace)
    queue.enqueue(db, "job")
    lease = queue.claim(db, lease=30)
    queue.ack(db, lease)
    with pytest.raises(LeaseNotHeldError):
        queue.dead_letter(db, lease, "late")
    with pytest.raises(TypeError):
        queue.dead_letter(db, lease, 42)  # type: ignore[arg-type]
    assert queue.dead_letters(db) == []


# -- the hint: promotions conflict with each other and with delayed enqueues -------------------


def _promote_in(db: Any, queue: Any) -> Any:
    """A transaction that promoted the due items of ``queue`` (not committed yet)."""
    tr = db.create_transaction()
    delays = queue._router.shards[0].delays
    assert delays.promote(tr, delays.look(tr)) >= 1
    return tr


def test_two_promotions_of_the_same_item_conflict_so_it_is_promoted_once():
    db = memory.open(seed=1)
    queue = Queue(Subspace(("promote-once",)))
    queue.enqueue(db, "x", delay=1)
    pass_time(db, 2)
    first, second = _promote_in(db, queue), _promote_in(db, queue)
    first.commit().wait()
    with pytest.raises(memory.FDBError) as error:
        second.commit().wait()
    assert error.value.code == 1020
    assert queue.dequeue_many(db, 10) == ["x"]


def test_a_delayed_enqueue_committed_during_a_promotion_is_not_lost():
    db = memory.open(seed=2)
    queue = Queue(Subspace(("hint-kept",)))
    queue.enqueue(db, "a", delay=1)
    pass_time(db, 2)
    promotion = _promote_in(db, queue)  # promotes "a"; no record left, so it clears the hint
    queue.enqueue(db, "b", delay=1)  # lowers the hint meanwhile
    try:
        promotion.commit().wait()
    except memory.FDBError as error:
        assert error.code == 1020  # the promotion read the hint: it retries later
    pass_time(db, 2)
    assert [queue.dequeue(db), queue.dequeue(db)] == ["a", "b"]


@pytest.mark.memory_only("moves time on with db.advance_time()")
@pytest.mark.parametrize("high_contention", [False, True])
@pytest.mark.parametrize(
    ("take", "due", "queued"),
    [
        (lambda q, db: q.pop(db), 1, 5),
        (lambda q, db: q.pop_max(db), 5, 1),
        (lambda q, db: q.claim(db, 30).value, 1, 5),
        (lambda q, db: q.claim_many(db, 1, 30)[0].value, 1, 5),
        (lambda q, db: q.pop(db, block=True, timeout=1), 1, 5),
    ],
)
def test_a_due_delayed_item_is_taken_before_queued_items_of_a_worse_priority(
    db, subspace, high_contention, take, due, queued
):
    """Finding 6: the plain path took the queued item first, then promoted."""
    queue = PriorityQueue(subspace, high_contention=high_contention)
    queue.push(db, "queued", queued)
    queue.push(db, "delayed", due, delay=1)
    pass_time(db, 2)
    assert take(queue, db) == "delayed"


# -- every take reads the hint, at any call rate -----------------------------------------------


def test_a_delayed_item_of_another_queue_object_is_promoted_by_the_first_take_it_is_due_for():
    """Every take reads the delayed items' hint, whatever the queue object saw before and
    however recently it was called: a delayed item another queue object enqueued is promoted
    (joins the back) by the first take after it fell due, while the front holds items."""
    db = memory.open()
    queue = Queue(Subspace(("hint", "other-object")))
    queue.enqueue_many(db, [f"item-{n}" for n in range(50)])
    assert queue.dequeue(db) == "item-0" and queue.dequeue(db) == "item-1"  # no delay yet
    Queue(Subspace(("hint", "other-object"))).enqueue(db, "delayed", delay=5)
    assert queue.dequeue(db) == "item-2"
    assert "delayed" not in queue.peek_many(db, None)  # not due yet: it waits delayed
    pass_time(db, 6)
    assert queue.dequeue(db) == "item-3"
    assert queue.info(db).delayed == 0  # promoted by that take
    assert queue.dequeue_many(db, 100) == [f"item-{n}" for n in range(4, 50)] + ["delayed"]


def test_a_due_item_is_taken_from_an_empty_front():
    db = memory.open()
    queue = Queue(Subspace(("hint", "short-front")))
    queue.enqueue_many(db, ["a", "b", "c"])
    assert [queue.dequeue(db) for _ in range(3)] == ["a", "b", "c"]
    Queue(Subspace(("hint", "short-front"))).enqueue(db, "delayed", delay=5)
    pass_time(db, 6)
    assert queue.dequeue(db) == "delayed"
