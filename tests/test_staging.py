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


def test_many_consumers_get_every_item_exactly_once_in_fifo_order():
    db = memory.open(latency=LATENCY, seed=7)
    queue = Queue(Subspace(("staged",)), high_contention=True, batch_size=8)
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
def test_priority_queue_ends_are_served_in_priority_order(max_end):
    db = memory.open(latency=LATENCY, seed=3)
    queue = PriorityQueue(Subspace(("staged-priority",)), high_contention=True, batch_size=4)
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


def test_with_a_transaction_high_contention_calls_stay_plain():
    db = memory.open()
    queue = Queue(Subspace(("plain-inside",)), high_contention=True)
    queue.enqueue_many(db, ["a", "b"])
    tr = db.create_transaction()
    assert queue.dequeue(tr) == "a"
    tr.cancel()  # not committed: nothing taken, no request registered
    assert queue.dequeue_many(db, 5) == ["a", "b"]


def test_a_requester_that_dies_loses_nothing():
    """A request served to a requester that never collects goes back to the front."""
    db = memory.open()
    queue = Queue(Subspace(("dying",)), high_contention=True, abandon_after=1.0)
    queue.enqueue_many(db, ["first", "second"])
    staging: Staging = queue._staging  # type: ignore[assignment]
    request_key = staging._register(db)  # a requester registers, then dies
    assert staging.serve(db) == 1  # its request is served: "first" moves to its result slot
    assert queue.size(db) == 1
    assert queue.dequeue(db) == "second"
    assert queue.dequeue(db) is None  # "first" is parked in the dead requester's result
    db.advance_time(1.5)  # past abandon_after: the next server gives it back
    staging.serve(db)
    assert queue.size(db) == 1
    assert queue.dequeue(db) == "first"
    state, _detail = staging._collect_or_watch(db.create_transaction(), request_key)
    assert state == "lost"  # had the requester come back, it would register again


def test_a_requester_that_dies_first_in_line_does_not_stop_the_line():
    """Nobody leads while the dead requester is first; a waiter serves after STALLED_AFTER."""
    db = memory.open()
    queue = Queue(Subspace(("dead-first",)), high_contention=True, abandon_after=60.0)
    queue.enqueue_many(db, ["first", "second"])
    staging: Staging = queue._staging  # type: ignore[assignment]
    staging._register(db)  # registers first in line, then dies without leading
    started = time.monotonic()
    assert queue.dequeue(db) == "second"  # "first" is parked in the dead requester's result
    waited = time.monotonic() - started
    assert STALLED_AFTER <= waited < STALLED_AFTER + 2.0
    assert queue.size(db) == 0


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
    staging.serve(db)  # gives the result back: the collector's read now conflicts
    with pytest.raises(memory.FDBError) as raised:
        collector.commit().wait()
    assert raised.value.code == 1020
    assert queue.dequeue(db) == "only"  # delivered once, by the queue


def test_staging_arguments_are_checked():
    with pytest.raises(ValueError):
        Queue(("q",), high_contention=True, batch_size=0)
    with pytest.raises(ValueError):
        Queue(("q",), high_contention=True, abandon_after=0)
    with pytest.raises(ValueError):
        PriorityQueue(("q",), high_contention=True, abandon_after="soon")
