"""Many threads on one queue: nothing lost, nothing duplicated, enqueues never conflict."""

from __future__ import annotations

import threading

import pytest

from fdbqueue import PriorityQueue, Queue, Subspace, memory

PRODUCERS = 4
CONSUMERS = 4
PER_PRODUCER = 60


def run_producers_and_consumers(db, queue, push, pop):
    produced_done = threading.Event()
    taken: list[list[tuple[int, int]]] = [[] for _ in range(CONSUMERS)]
    errors: list[BaseException] = []

    def producer(number):
        try:
            for sequence in range(PER_PRODUCER):
                push(db, (number, sequence))
        except BaseException as error:
            errors.append(error)

    def consumer(number):
        try:
            while True:
                value = pop(db)
                if value is None:
                    if produced_done.is_set() and queue.empty(db):
                        return
                    continue
                taken[number].append(value)
        except BaseException as error:
            errors.append(error)

    producers = [threading.Thread(target=producer, args=(n,)) for n in range(PRODUCERS)]
    consumers = [threading.Thread(target=consumer, args=(n,)) for n in range(CONSUMERS)]
    for thread in producers + consumers:
        thread.start()
    for thread in producers:
        thread.join(60)
    produced_done.set()
    for thread in consumers:
        thread.join(60)
    assert not errors, errors
    return taken


def check_delivery(taken):
    everything = [value for consumer in taken for value in consumer]
    expected = {(p, s) for p in range(PRODUCERS) for s in range(PER_PRODUCER)}
    assert len(everything) == len(expected), "an item was lost or duplicated"
    assert set(everything) == expected
    for consumer in taken:  # each consumer sees each producer's items in order
        for producer in range(PRODUCERS):
            sequences = [s for p, s in consumer if p == producer]
            assert sequences == sorted(sequences)


def test_queue_threads_lose_and_duplicate_nothing_and_keep_producer_order(db, subspace):
    queue = Queue(subspace)
    taken = run_producers_and_consumers(db, queue, queue.enqueue, queue.dequeue)
    check_delivery(taken)
    assert queue.size(db) == 0


def test_priority_queue_threads_lose_and_duplicate_nothing(db, subspace):
    queue = PriorityQueue(subspace)
    taken = run_producers_and_consumers(
        db, queue, lambda tr, value: queue.push(tr, value, priority=value[0] % 2), queue.pop_min
    )
    everything = sorted(value for consumer in taken for value in consumer)
    assert everything == sorted((p, s) for p in range(PRODUCERS) for s in range(PER_PRODUCER))


@pytest.mark.parametrize("kind", ["queue", "priority"])
def test_concurrent_enqueues_and_pushes_never_conflict(kind):
    """Memory only: Latency makes the commits overlap, and db.stats() counts conflicts."""
    latency = memory.Latency(grv=0.0005, read=0.0005, commit=0.001)
    db = memory.open(latency=latency)
    subspace = Subspace(("concurrent", kind))
    if kind == "queue":
        queue = Queue(subspace)
        write = queue.enqueue
    else:
        priority_queue = PriorityQueue(subspace)

        def write(tr, value):
            priority_queue.push(tr, value, priority=value % 3)

    def producer(start):
        for value in range(start, start + 40):
            write(db, value)

    threads = [threading.Thread(target=producer, args=(n * 1000,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    stats = db.stats()
    assert stats["conflicts"] == 0
    assert stats["retries"] == 0
    size = Queue(subspace).size(db) if kind == "queue" else priority_queue.size(db)
    assert size == 8 * 40


def dequeue_concurrently(db, queue):
    """Six threads dequeue ``queue`` until it is empty; what they took, in taking order."""
    taken: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def consumer():
        try:
            while (value := queue.dequeue(db)) is not None:
                with lock:
                    taken.append(value)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=consumer) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    return taken


def test_concurrent_dequeues_deliver_once(db, subspace):
    queue = Queue(subspace)
    queue.enqueue_many(db, range(80))
    taken = dequeue_concurrently(db, queue)
    assert sorted(taken) == list(range(80))
    assert queue.empty(db)


def test_concurrent_dequeues_do_conflict_and_still_deliver_once():
    """The other side of the claim above: plain dequeues contend, and retries resolve it.
    Memory only: Latency makes the attempts overlap, and db.stats() counts the conflicts."""
    db = memory.open(latency=memory.Latency(grv=0.0005, read=0.0005, commit=0.001))
    queue = Queue(Subspace(("contended",)))
    queue.enqueue_many(db, range(80))
    taken = dequeue_concurrently(db, queue)
    assert sorted(taken) == list(range(80))
    assert db.stats()["conflicts"] > 0
