"""Blocking consumption: wakes on enqueue, times out, waits on a watch instead of polling."""

from __future__ import annotations

import threading
import time

import pytest

from fdbqueue import PriorityQueue, Queue, Subspace, memory


@pytest.mark.parametrize("high_contention", [False, True])
def test_blocking_dequeue_wakes_on_enqueue(db, subspace, high_contention):
    queue = Queue(subspace, high_contention=high_contention)
    result: list[object] = []
    consumer = threading.Thread(
        target=lambda: result.append(queue.dequeue(db, block=True)), daemon=True
    )
    consumer.start()
    time.sleep(0.2)
    assert result == []  # still waiting
    queue.enqueue(db, "wake up")
    consumer.join(10)
    assert result == ["wake up"]


@pytest.mark.parametrize("high_contention", [False, True])
def test_blocking_pop_wakes_on_push(db, subspace, high_contention):
    queue = PriorityQueue(subspace, high_contention=high_contention)
    result: list[object] = []
    threads = [
        threading.Thread(target=lambda: result.append(queue.pop_max(db, block=True, timeout=10))),
        threading.Thread(target=lambda: result.append(queue.pop_min(db, block=True, timeout=10))),
    ]
    for thread in threads:
        thread.start()
    time.sleep(0.1)
    queue.push(db, "high", priority=9)
    queue.push(db, "low", priority=1)
    for thread in threads:
        thread.join(12)
    assert sorted(result) == ["high", "low"]


def test_blocking_dequeue_returns_none_after_the_timeout(db, subspace):
    queue = Queue(subspace)
    started = time.monotonic()
    assert queue.dequeue(db, block=True, timeout=0.5) is None
    assert 0.45 <= time.monotonic() - started < 3


@pytest.mark.memory_only("counts reads and watches with db.stats()")
def test_blocking_dequeue_returns_none_after_the_timeout_without_polling(db, subspace):
    queue = Queue(subspace)
    started = time.monotonic()
    assert queue.dequeue(db, block=True, timeout=0.5) is None
    assert 0.45 <= time.monotonic() - started < 3
    stats = db.stats()
    # an attempt (the front, the type and codec records, the delayed items' hint, the
    # message groups' count, the paused key, the waiting leases and the first lease's
    # expiry, for the wake-up), the watch's read, one more attempt: no loop (the paused
    # key: one read more per attempt, 15 before it)
    assert stats["reads"] <= 17
    assert stats["watches"] == 1


def test_blocking_returns_an_item_already_there_at_once(db, subspace):
    queue = Queue(subspace)
    queue.enqueue(db, "here")
    queue.enqueue(db, "there")
    assert queue.dequeue(db, block=True, timeout=0) == "here"
    started = time.monotonic()
    assert queue.dequeue(db, block=True, timeout=5) == "there"
    assert time.monotonic() - started < 2  # did not wait out the timeout
    assert queue.dequeue(db, block=True, timeout=0) is None


@pytest.mark.memory_only("counts transactions and watches with db.stats()")
def test_blocking_on_an_item_already_there_takes_one_transaction_and_no_watch(db, subspace):
    queue = Queue(subspace)
    queue.enqueue(db, "there")
    db.reset_stats()
    assert queue.dequeue(db, block=True, timeout=5) == "there"
    assert db.stats()["transactions"] == 1  # an item already there: no watch, no extra read
    assert db.stats()["watches"] == 0


def test_blocking_needs_a_database(db, subspace):
    queue = Queue(subspace["tx"])
    with pytest.raises(TypeError, match="block=True needs a Database"):
        queue.dequeue(db.create_transaction(), block=True)
    with pytest.raises(TypeError):
        PriorityQueue(subspace["tx2"]).pop(db.create_transaction(), block=True)
    with pytest.raises(ValueError):
        queue.dequeue(db, block=True, timeout=-1)
    with pytest.raises(ValueError, match="block=True"):
        queue.dequeue(db, timeout=1)
    with pytest.raises(TypeError):
        queue.dequeue(db, block=True, timeout="1")


def test_enqueue_bumps_the_signal_without_conflicts():
    """Memory only: Latency makes the commits overlap, and db.stats() counts conflicts."""
    db = memory.open(latency=memory.Latency(commit=0.001))
    queue = Queue(Subspace(("signal",)))
    threads = [
        threading.Thread(target=lambda: [queue.enqueue(db, n) for n in range(30)]) for _ in range(6)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert db.stats()["conflicts"] == 0
    assert queue.size(db) == 180
