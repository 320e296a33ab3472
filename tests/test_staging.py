"""High-contention mode: exactly-once delivery, FIFO, and nothing lost when a requester dies."""

from __future__ import annotations

import threading
import time

import pytest

from fdbqueue import PriorityQueue, Queue, Subspace, memory
from fdbqueue.staging import STALLED_AFTER, Staging

LATENCY = memory.Latency(grv=0.0005, read=0.0002, commit=0.001)


def consume_all(take, consumers):
    taken: list[list[object]] = [[] for _ in range(consumers)]
    errors: list[BaseException] = []

    def consumer(number):
        try:
            while (value := take()) is not None:
                taken[number].append(value)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=consumer, args=(n,)) for n in range(consumers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    return taken


@pytest.fixture
def contended(backend, db):
    """``contended(seed)``: on memory, a database with LATENCY (so consumers really overlap)
    seeded with ``seed``; on fdb, the session's database."""
    return lambda seed: memory.open(latency=LATENCY, seed=seed) if backend == "memory" else db


def test_many_consumers_get_every_item_exactly_once_in_fifo_order(contended, subspace):
    db = contended(7)
    queue = Queue(subspace, high_contention=True, batch_size=8)
    queue.enqueue_many(db, range(300))
    taken = consume_all(lambda: queue.dequeue(db), consumers=12)
    everything = [value for consumer in taken for value in consumer]
    assert sorted(everything) == list(range(300))
    for consumer in taken:  # items enqueued before the consumers started come out in order
        assert consumer == sorted(consumer)
    assert queue.size(db) == 0 and queue.empty(db)
    requests = list(db.create_transaction().get_range_startswith(queue.subspace.key() + b"\xff"))
    leftovers = [kv.key for kv in requests if b"requests" in kv.key or b"results" in kv.key]
    assert leftovers == []


@pytest.mark.parametrize("max_end", [False, True])
def test_priority_queue_ends_are_served_in_priority_order(contended, subspace, max_end):
    db = contended(3)
    queue = PriorityQueue(subspace, high_contention=True, batch_size=4)
    for n in range(120):
        queue.push(db, (n % 5, n), priority=n % 5)
    taken = consume_all(lambda: queue.pop(db, max=max_end), consumers=8)
    everything = [value for consumer in taken for value in consumer]
    assert sorted(everything) == sorted((n % 5, n) for n in range(120))
    for consumer in taken:
        priorities = [priority for priority, _ in consumer]
        assert priorities == sorted(priorities, reverse=max_end)
        for priority in set(priorities):  # FIFO within a priority
            order = [n for p, n in consumer if p == priority]
            assert order == sorted(order)


def test_with_a_transaction_high_contention_calls_stay_plain(db, subspace):
    queue = Queue(subspace, high_contention=True)
    queue.enqueue_many(db, ["a", "b"])
    tr = db.create_transaction()
    assert queue.dequeue(tr) == "a"
    tr.cancel()  # not committed: nothing taken, no request registered
    assert queue.dequeue_many(db, 5) == ["a", "b"]


@pytest.mark.parametrize("taker", ["staged", "plain", "claim", "blocking"])
def test_a_requester_that_dies_loses_nothing(taker):
    """A result served to a requester that never collects comes back through ordinary calls
    once abandon_after has passed, with no contention left and no serving transaction."""
    db = memory.open()
    subspace = Subspace(("dying",))
    queue = Queue(subspace, high_contention=True, abandon_after=1.0)
    queue.enqueue_many(db, ["first", "second"])
    staging: Staging = queue._staging  # type: ignore[assignment]
    request_key = staging._register(db)  # a requester registers, then dies
    assert staging.serve(db) == 1  # its request is served: "first" moves to its result slot
    assert queue.size(db) == 2  # counted while served and not collected
    assert queue.dequeue(db) == "second"
    assert queue.dequeue(db) is None  # "first" is parked in the dead requester's result
    assert queue.size(db) == 1 and queue.empty(db)
    db.advance_time(1.5)  # past abandon_after
    if taker == "staged":
        assert queue.dequeue(db) == "first"
    elif taker == "plain":
        assert Queue(subspace).dequeue(db) == "first"  # a plain queue object gives it back too
    elif taker == "claim":
        lease = Queue(subspace).claim(db, lease=30)
        assert lease is not None and lease.value == "first"
    else:
        assert queue.dequeue(db, block=True, timeout=1) == "first"
    assert queue.size(db) == 0
    state, _detail = staging._collect_or_watch(db.create_transaction(), request_key)
    assert state == "lost"  # had the requester come back, it would register again


def test_a_blocked_consumer_wakes_when_a_dead_requesters_result_falls_due(db, subspace):
    queue = Queue(subspace, high_contention=True, abandon_after=0.3)
    queue.enqueue(db, "only")
    staging: Staging = queue._staging  # type: ignore[assignment]
    staging._register(db)
    staging.serve(db)  # served to a requester that died: nothing signals its return
    started = time.monotonic()
    assert queue.dequeue(db, block=True, timeout=5) == "only"
    assert time.monotonic() - started < 2.0


def test_a_requester_that_dies_first_in_line_does_not_stop_the_line(db, subspace):
    """Nobody leads while the dead requester is first; a waiter serves after STALLED_AFTER."""
    queue = Queue(subspace, high_contention=True, abandon_after=60.0)
    queue.enqueue_many(db, ["first", "second"])
    staging: Staging = queue._staging  # type: ignore[assignment]
    staging._register(db)  # registers first in line, then dies without leading
    started = time.monotonic()
    assert queue.dequeue(db) == "second"  # "first" is parked in the dead requester's result
    waited = time.monotonic() - started
    assert STALLED_AFTER * 0.9 <= waited < STALLED_AFTER + 2.0
    assert queue.size(db) == 1  # "first" is counted until collected or given back


def test_a_slow_collector_and_a_giver_back_never_both_win():
    db = memory.open()
    queue = Queue(Subspace(("race",)), high_contention=True, abandon_after=1.0)
    queue.enqueue(db, "only")
    staging: Staging = queue._staging  # type: ignore[assignment]
    request_key = staging._register(db)
    staging.serve(db)
    collector = db.create_transaction()
    state, value = staging._collect_or_watch(collector, request_key)
    assert (state, value) == ("done", "only")
    db.advance_time(1.5)
    assert queue.dequeue(db) == "only"  # given back and taken again by an ordinary dequeue
    with pytest.raises(memory.FDBError) as raised:
        collector.commit().wait()  # the collector's read of its result now conflicts
    assert raised.value.code == 1020
    assert queue.size(db) == 0


def test_staging_arguments_are_checked():
    with pytest.raises(ValueError):
        Queue(("q",), high_contention=True, batch_size=0)
    with pytest.raises(ValueError):
        Queue(("q",), high_contention=True, abandon_after=0)
    with pytest.raises(TypeError):
        PriorityQueue(("q",), high_contention=True, abandon_after="soon")
    with pytest.raises(ValueError):
        Queue(("q",), high_contention=True, abandon_after=float("nan"))
    with pytest.raises(ValueError):
        Queue(("q",), high_contention=True, abandon_after=float("inf"))
    with pytest.raises(TypeError):
        Queue(("q",), high_contention="no")
    with pytest.raises(TypeError):
        Queue(("q",), batch_size=2.5)
