"""Consumer sessions (``queue.consumer(db, prefetch=...)``): rank-matched consumption."""

from __future__ import annotations

import threading
import time

import pytest
from helpers import despite_timeouts, pass_time, run, run_threads

from fdbqueue import PriorityQueue, Queue, memory


def line_requests(db, queue):
    line = queue._store.metadata.pack(("line",))
    return run(db, lambda tr: list(tr.get_range(line, line + b"\xff")))


@pytest.mark.parametrize("prefetch", [0, 1, 3])
def test_a_session_takes_in_fifo_order_and_leaves_nothing_in_line(db, subspace, prefetch):
    queue = Queue(subspace)
    queue.enqueue_many(db, list(range(10)))
    with queue.consumer(db, prefetch=prefetch) as consumer:
        assert [consumer.take() for _ in range(4)] == [0, 1, 2, 3]
        assert len(line_requests(db, queue)) == prefetch
    assert line_requests(db, queue) == []  # closing withdrew the reservations
    assert queue.size(db) == 6
    assert queue.peek_many(db, 10) == [4, 5, 6, 7, 8, 9]


def test_a_priority_session_takes_the_lowest_priority_first(db, subspace):
    queue = PriorityQueue(subspace)
    for value, priority in [("b", 2), ("a", 1), ("c", 3)]:
        queue.push(db, value, priority=priority)
    with queue.consumer(db, prefetch=1) as consumer:
        assert [consumer.pop(), consumer.pop(), consumer.pop(), consumer.pop()] == [
            "a",
            "b",
            "c",
            None,
        ]


def test_an_empty_queue_returns_none_and_keeps_no_request_without_prefetch(db, subspace):
    queue = Queue(subspace)
    with queue.consumer(db) as consumer:
        assert consumer.take() is None
        assert line_requests(db, queue) == []
        started = time.monotonic()
        assert consumer.take(block=True, timeout=0.2) is None
        assert time.monotonic() - started >= 0.19
        assert line_requests(db, queue) == []


@pytest.mark.parametrize("prefetch", [0, 1])
def test_threads_of_sessions_deliver_every_item_once(db, subspace, prefetch):
    queue = Queue(subspace)
    items = list(range(200))
    for start in range(0, len(items), 50):
        queue.enqueue_many(db, items[start : start + 50])
    taken: list[int] = []
    lock = threading.Lock()

    def consume() -> None:
        with queue.consumer(db, prefetch=prefetch) as consumer:
            while (value := consumer.take()) is not None:
                with lock:
                    taken.append(value)

    run_threads(consume, 8)
    assert sorted(taken) == items
    assert queue.size(db) == 0
    assert line_requests(db, queue) == []


@pytest.mark.memory_only("counts conflicts with stats() under a latency model")
def test_sessions_under_contention_do_not_conflict():
    db = memory.open(latency=memory.Latency(grv=0.001, read=0.0005, commit=0.003), seed=3)
    queue = Queue(("contended",))
    queue.enqueue_many(db, list(range(160)))
    db.reset_stats()
    taken: list[int] = []

    def consume() -> None:
        with queue.consumer(db, prefetch=1) as consumer:
            while (value := consumer.take()) is not None:
                taken.append(value)

    run_threads(consume, 8)
    assert sorted(taken) == list(range(160))
    assert db.stats()["conflicts"] <= 0.1 * 160


def test_blocking_session_wakes_on_enqueue(db, subspace):
    queue = Queue(subspace)
    result: list[object] = []
    with queue.consumer(db) as consumer:
        waiter = threading.Thread(
            target=lambda: result.append(consumer.take(block=True, timeout=10)), daemon=True
        )
        waiter.start()
        time.sleep(0.2)
        assert result == []
        queue.enqueue(db, "late")
        waiter.join(10)
    assert result == ["late"]


@pytest.mark.memory_only("moves the version clock with advance_time")
def test_a_dead_sessions_reservation_goes_to_the_next_in_line_after_abandon_after():
    db = memory.open()
    queue = Queue(("abandoned",))
    queue.enqueue_many(db, ["i0", "i1", "i2", "i3"])
    dead = queue.consumer(db, prefetch=1, abandon_after=2)
    assert dead.take() == "i0"  # and reserves i1 for its next call; then it "dies"
    with queue.consumer(db, abandon_after=2) as live:
        assert live.take() == "i2"  # i1 stays reserved while the reservation is fresh
        pass_time(db, 3)
        assert live.take() == "i1"  # the stale reservation was cleared: i1 is next in line
        assert live.take() == "i3"


def test_closing_a_session_returns_its_reservation_at_once(db, subspace):
    queue = Queue(subspace)
    queue.enqueue_many(db, ["i0", "i1", "i2"])
    first = queue.consumer(db, prefetch=1)
    assert first.take() == "i0"
    first.close()
    with queue.consumer(db) as second:
        assert second.take() == "i1"
    with pytest.raises(RuntimeError, match="closed"):
        first.take()


def test_clear_in_the_middle_of_a_session(db, subspace):
    queue = Queue(subspace)
    queue.enqueue_many(db, [1, 2, 3])
    with queue.consumer(db, prefetch=1) as consumer:
        assert consumer.take() == 1
        queue.clear(db)  # removes the items and the session's reservation
        assert consumer.take() is None
        queue.enqueue(db, 4)
        assert consumer.take() == 4


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"prefetch": -1}, ValueError),
        ({"prefetch": 1.5}, TypeError),
        ({"abandon_after": 0}, ValueError),
        ({"abandon_after": "1"}, TypeError),
    ],
)
def test_bad_session_arguments_are_refused(db, subspace, arguments, error):
    with pytest.raises(error):
        Queue(subspace).consumer(db, **arguments)


def test_a_session_needs_a_database(db, subspace):
    tr = db.create_transaction()
    with pytest.raises(TypeError, match="Database"):
        Queue(subspace).consumer(tr)


@pytest.mark.memory_only("injects faults")
@pytest.mark.parametrize("prefetch", [0, 1])
def test_under_every_fault_kind_sessions_deliver_every_item_once(prefetch):
    db = memory.open(seed=11)
    queue = Queue(("faulty",))
    queue.enqueue_many(db, list(range(120)))
    db.faults = memory.Faults(
        not_committed=0.05,
        commit_unknown_result=0.05,
        transaction_too_old=0.03,
        timed_out=0.03,
        recovery=0.01,
    )
    taken: list[int] = []
    lock = threading.Lock()

    def consume() -> None:
        consumer = queue.consumer(db, prefetch=prefetch)
        while True:
            value = despite_timeouts(consumer.take)
            if value is None:
                break
            with lock:
                taken.append(value)
        despite_timeouts(consumer.close)

    run_threads(consume, 4, timeout=120)
    db.faults = memory.Faults()
    db.settle()
    # Anything a dead reservation held is taken by a last, fault-free session.
    pass_time(db, 10)
    with queue.consumer(db) as last:
        while (value := last.take()) is not None:
            taken.append(value)
    assert sorted(taken) == list(range(120))


def test_a_session_claims_in_line_and_the_lease_acks(db, subspace):
    queue = Queue(subspace)
    queue.enqueue_many(db, ["a", "b", "c"])
    with queue.consumer(db, prefetch=1) as consumer:
        first = consumer.claim(30)
        second = consumer.claim(30)
        assert (first.value, second.value) == ("a", "b")
        queue.ack(db, first)
        queue.release(db, second)  # released: the next claim gets it again first
        again = consumer.claim(30)
        assert again.value == "b" and again.deliveries == 2
        queue.ack_many(db, [again])
    assert queue.size(db) == 1
    assert queue.leases(db) == []


def test_a_blocking_session_claim_wakes_on_enqueue(db, subspace):
    queue = Queue(subspace)
    result: list[object] = []
    with queue.consumer(db) as consumer:
        waiter = threading.Thread(
            target=lambda: result.append(consumer.claim(30, block=True, timeout=10)),
            daemon=True,
        )
        waiter.start()
        time.sleep(0.2)
        queue.enqueue(db, "job")
        waiter.join(10)
    assert [lease.value for lease in result] == ["job"]


def test_threads_of_sessions_claim_every_item_once(db, subspace):
    queue = Queue(subspace)
    queue.enqueue_many(db, list(range(120)))
    claimed: list[int] = []
    lock = threading.Lock()

    def work() -> None:
        with queue.consumer(db, prefetch=1) as consumer:
            while (lease := consumer.claim(30)) is not None:
                queue.ack(db, lease)
                with lock:
                    claimed.append(lease.value)

    run_threads(work, 6)
    assert sorted(claimed) == list(range(120))


def test_a_session_claim_checks_the_lease_before_anything_changes(db, subspace):
    queue = Queue(subspace)
    queue.enqueue(db, "x")
    with queue.consumer(db) as consumer, pytest.raises((TypeError, ValueError)):
        consumer.claim(-1)
    assert queue.size(db) == 1


def takes_in_real_time_order(takes):
    """Pairs of takes (start, end, item) where one returned before the other started, yet
    took a later item: what FIFO in request order forbids when each take registers its
    request within its own call (``prefetch=0``)."""
    ordered = sorted(takes)
    return [
        (first, second)
        for first in ordered
        for second in ordered
        if first[1] < second[0] and first[2] > second[2]
    ]


def fifo_queue(db, subspace, kind, count):
    """A high-contention queue (or priority queue, one priority) holding 0..count-1 in
    order, and its take."""
    if kind == "queue":
        queue = Queue(subspace, high_contention=True)
        for start in range(0, count, 50):
            queue.enqueue_many(db, list(range(start, min(count, start + 50))))
        return queue, queue.dequeue
    queue = PriorityQueue(subspace, high_contention=True)
    for value in range(count):
        queue.push(db, value, priority=1)
    return queue, queue.pop_min


def timed_takes(take, threads, timeouts=None):
    """Run ``take()`` in ``threads`` threads until it returns None; (start, end, item) each."""
    takes: list[tuple[float, float, int]] = []
    lock = threading.Lock()

    def consume() -> None:
        while True:
            started = time.monotonic()
            value = despite_timeouts(take, timeouts)
            if value is None:
                return
            with lock:
                takes.append((started, time.monotonic(), value))

    run_threads(consume, threads, timeout=120)
    return takes


@pytest.mark.parametrize("kind", ["queue", "priority"])
def test_takes_in_line_are_fifo_in_request_order_under_threads(db, subspace, kind):
    """A take that returned before another started took an earlier item: with 8 threads of
    one-call takes in line, no pair is out of order, and every item came out once."""
    queue, take = fifo_queue(db, subspace, kind, 160)
    takes = timed_takes(lambda: take(db), 8)
    assert sorted(item for _, _, item in takes) == list(range(160))
    assert takes_in_real_time_order(takes) == []
    assert line_requests(db, queue) == []


@pytest.mark.memory_only("injects faults")
@pytest.mark.parametrize("kind", ["queue", "priority"])
def test_takes_in_line_are_fifo_in_request_order_under_faults_retried_within_a_call(kind):
    """As above, while commits fail with 1020, 1021 (applied or not) and 1007, which every
    call retries or resolves itself: still each item once, in request order. (A call that
    raises 1031 leaves its request in line until it is withdrawn, and a recovery makes
    waiting requests look abandoned: their items then go to later requests, see
    docs/high-contention.rst; exactly-once under those is tested above.)"""
    db = memory.open(seed=5, latency=memory.Latency(grv=0.0002, read=0.0001, commit=0.0005))
    _queue, take = fifo_queue(db, ("fifo-faults",), kind, 120)
    db.faults = memory.Faults(
        not_committed=0.05, commit_unknown_result=0.05, transaction_too_old=0.05
    )
    takes = timed_takes(lambda: take(db), 6)
    db.faults = memory.Faults()
    db.settle()
    stats = db.stats()
    assert stats["injected_commit_unknown_result"] > 0 and stats["injected_not_committed"] > 0
    assert sorted(item for _, _, item in takes) == list(range(120))
    assert takes_in_real_time_order(takes) == []


@pytest.mark.memory_only("counts transactions with db.stats()")
def test_the_contended_hint_clears_once_a_call_finds_the_line_empty(db, subspace):
    """Finding 7: once a one-call take met another consumer in line, every later call cost
    two transactions, even for a lone consumer on an empty line."""
    queue = Queue(subspace, high_contention=True)
    queue.enqueue_many(db, [f"item {n}" for n in range(6)])
    other = queue.consumer(db, prefetch=1)
    assert other.take() == "item 0"  # its next request stays in line
    assert queue.dequeue(db) == "item 2"  # met it: rank 1, behind the other's place
    other.close()
    queue.dequeue(db)  # finds nobody else in line: the hint clears
    for _ in range(2):
        db.reset_stats()
        assert queue.dequeue(db) is not None
        assert db.stats()["commits"] == 1  # one transaction per call again
    assert queue.dequeue_many(db, 10) == ["item 5"]
    db.reset_stats()
    assert queue.dequeue(db) is None and queue.dequeue(db) is None  # on an empty line too
    assert db.stats()["transactions"] == 2
