"""Every waiting item is visible to every take (issue 36): an item waits when it is ready in
its shard, when its lease expired, or when it was released (its delay, if any, fell due).

Before issue 36 only claims took a released or expired lease's item: ``dequeue``/``pop``
returned None with it waiting, and their blocking forms waited out their whole timeout. A
client whose clock ran an hour fast stopped the redelivery of every later lease. A stored
value decoding to None (the Java recipes' ``Tuple.from(null)``) read as "empty".
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import fdb.tuple
import pytest
from helpers import pass_time, run
from test_lease_clocks import SHAPES, make

import fdbqueue.asyncio as fa
from fdbqueue import Queue, _clock, memory

#: Tests that let time pass with ``db.pass_time`` or skew the clock: the in-memory database.
controlled_time = pytest.mark.memory_only("lets time pass with db.pass_time()")


def take(queue: Any, db: Any, **options: Any) -> Any:
    return queue.dequeue(db, **options) if isinstance(queue, Queue) else queue.pop(db, **options)


def take_many(queue: Any, db: Any, n: int) -> list[Any]:
    if isinstance(queue, Queue):
        return queue.dequeue_many(db, n)  # type: ignore[no-any-return]
    return [v for v in (queue.pop(db) for _ in range(n)) if v is not None]


@pytest.mark.parametrize(("kind", "shards"), SHAPES)
def test_a_released_item_is_taken_by_a_plain_take_first(db, subspace, kind, shards):
    queue = make(kind, shards, subspace, db, ["a", "b"])
    lease = queue.claim(db, lease=30)
    queue.release(db, lease)
    assert take(queue, db) == lease.value
    assert take(queue, db) is not None
    assert take(queue, db) is None
    assert queue.leases(db) == []


@pytest.mark.parametrize(("kind", "shards"), SHAPES)
@controlled_time
def test_an_expired_lease_is_taken_by_a_plain_take(db, subspace, kind, shards):
    queue = make(kind, shards, subspace, db, ["a", "b"])
    first = queue.claim(db, lease=1)
    second = queue.claim(db, lease=1)
    pass_time(db, 2)
    taken = {take(queue, db), take(queue, db)}
    assert taken == {first.value, second.value}
    assert take(queue, db) is None
    assert queue.info(db).leases_in_flight == 0


@pytest.mark.parametrize(("kind", "shards"), SHAPES)
@controlled_time
def test_a_batch_take_takes_expired_leases_first(db, subspace, kind, shards):
    queue = make(kind, shards, subspace, db, ["a", "b", "c"])
    held = queue.claim(db, lease=1)
    pass_time(db, 2)
    got = take_many(queue, db, 5)
    assert sorted(got) == ["a", "b", "c"]
    if shards == 1:  # several shards' takes gather shard by shard
        assert got[0] == held.value


@controlled_time
def test_a_lease_expiring_while_its_hint_is_quiet_is_taken_by_a_short_front(db, subspace):
    queue = make("queue", 1, subspace, db, [str(i) for i in range(5)])
    held = queue.claim(db, lease=1)
    for _ in range(4):  # the waiting leases' hint falls quiet
        assert queue.dequeue(db) is not None
    pass_time(db, 2)
    assert queue.dequeue(db) == held.value  # the front is empty: the hint is read anyway
    assert queue.dequeue(db) is None


@pytest.mark.parametrize("prefetch", [0, 2])
@controlled_time
def test_a_consumer_session_takes_an_expired_lease(db, subspace, prefetch):
    queue = Queue(subspace, high_contention=True)
    queue.enqueue_many(db, ["a", "b"])
    held = queue.claim(db, lease=1)
    pass_time(db, 2)
    with queue.consumer(db, prefetch=prefetch) as consumer:
        assert consumer.take() == held.value
        assert consumer.take() == "b"
        assert consumer.take() is None


@pytest.mark.parametrize(("kind", "shards"), SHAPES)
def test_a_blocking_take_wakes_when_a_lease_expires(db, subspace, kind, shards):
    """Real time: the lease's versions and wall-clock seconds pass while the take waits."""
    queue = make(kind, shards, subspace, db, ["a"])
    held = queue.claim(db, lease=0.3)
    started = time.monotonic()
    assert take(queue, db, block=True, timeout=5) == held.value
    assert time.monotonic() - started < 3  # woke at the expiry, not at the timeout


def test_a_blocking_session_take_wakes_when_a_lease_expires(db, subspace):
    queue = Queue(subspace, high_contention=True)
    queue.enqueue(db, "a")
    held = queue.claim(db, lease=0.3)
    with queue.consumer(db, prefetch=1) as consumer:
        assert consumer.take(block=True, timeout=5) == held.value


@pytest.mark.parametrize("kind", ["queue", "priority"])
def test_the_asyncio_twins_take_released_and_expired_items(db, subspace, kind):
    async def main() -> list[Any]:
        if kind == "queue":
            queue: Any = fa.Queue(subspace, shards=4)
            await queue.enqueue_many(db, ["a", "b"])
            takes = queue.dequeue
        else:
            queue = fa.PriorityQueue(subspace, shards=4)
            await queue.push(db, "a", 1)
            await queue.push(db, "b", 1)
            takes = queue.pop
        first = await queue.claim(db, lease=30)
        await queue.release(db, first)
        got = [await takes(db)]
        await queue.claim(db, lease=0.3)
        got.append(await takes(db, block=True, timeout=5))
        got.append(await takes(db))
        return got

    got = asyncio.run(main())
    assert sorted(got[:2]) == ["a", "b"] and got[2] is None


def _skewed(seconds: float) -> Any:
    return lambda: memory.wall_clock() + seconds


@pytest.mark.parametrize("skew", [3600.0, 60.0, -3600.0])
@pytest.mark.parametrize("shards", [1, 4])
@controlled_time
def test_a_skewed_client_clock_delays_only_its_own_lease(db, subspace, monkeypatch, skew, shards):
    queue = Queue(subspace, shards=shards)
    queue.enqueue_many(db, [str(i) for i in range(21)])
    with monkeypatch.context() as skewed:
        skewed.setattr(_clock, "now", _skewed(skew))
        own = queue.claim(db, lease=1)  # the skewed client's lease comes first in versions
    others = [queue.claim(db, lease=1) for _ in range(20)]
    pass_time(db, 2)
    expired = queue.info(db).expired_leases
    redelivered = []
    while (lease := queue.claim(db, lease=60)) is not None:
        redelivered.append(lease)
    assert {lease.value for lease in others} <= {lease.value for lease in redelivered}
    assert len(redelivered) == expired  # what info counts is what claims deliver
    if skew > 0:
        assert own.value not in {lease.value for lease in redelivered}


@controlled_time
def test_a_skewed_lease_does_not_hide_expired_leases_from_plain_takes(db, subspace, monkeypatch):
    queue = make("queue", 1, subspace, db, ["a", "b", "c"])
    with monkeypatch.context() as skewed:
        skewed.setattr(_clock, "now", _skewed(3600))
        queue.claim(db, lease=1)
    other = queue.claim(db, lease=1)
    pass_time(db, 2)
    assert queue.dequeue(db) == other.value
    assert queue.dequeue(db) == "c"
    assert queue.dequeue(db) is None


def _put_null(db: Any, queue: Any, index: int) -> None:
    """An item the Java recipes' producer writes for a null: ``Tuple.from(null).pack()``."""

    def body(tr: Any) -> None:
        tr[queue.subspace.pack((index, b"java"))] = fdb.tuple.pack((None,))

    run(db, body)


@pytest.mark.parametrize("exactly_once", [True, False])
def test_a_value_decoding_to_none_goes_to_the_dead_letters(db, subspace, exactly_once):
    queue: Queue[Any] = Queue(subspace, exactly_once=exactly_once)
    queue.enqueue(db, "a")
    _put_null(db, queue, 2)
    queue.enqueue(db, "b")  # index 3 (after the last index)
    assert queue.dequeue(db) == "a"
    assert queue.dequeue(db) == "b"  # not None with "b" waiting
    assert queue.dequeue(db) is None
    (letter,) = queue.dead_letters(db)
    assert "None" in letter.reason


def test_claims_and_peeks_pass_over_a_value_decoding_to_none(db, subspace):
    queue: Queue[Any] = Queue(subspace)
    _put_null(db, queue, 1)
    queue.enqueue(db, "b")
    assert queue.peek(db) == "b"
    lease = queue.claim(db, lease=30)
    assert lease is not None and lease.value == "b"
    assert len(queue.dead_letters(db)) == 1


def test_no_take_removes_two_items_under_unknown_results(subspace):
    """A take that moves a null item aside writes its receipt: retried after a 1021, it does
    not remove a second item and return one."""
    db = memory.open(seed=3, faults=memory.Faults(commit_unknown_result=0.5))
    queue: Queue[Any] = Queue(subspace)
    values = []
    for i in range(40):
        queue.enqueue(db, f"v{i}")
        _put_null(db, queue, 10_000 + 2 * i)  # after every value, a null
    while (value := queue.dequeue(db)) is not None:
        values.append(value)
    assert values == [f"v{i}" for i in range(40)]
    assert len(queue.dead_letters(db, limit=100)) == 40


@pytest.mark.parametrize(("kind", "shards"), SHAPES)
@controlled_time
def test_a_release_with_a_delay_is_delayed_then_waits(db, subspace, kind, shards):
    """A retry waiting out its delay is delayed, not in flight; once due, it waits."""
    queue = make(kind, shards, subspace, db, ["a", "b"])
    lease = queue.claim(db, lease=30)
    queue.release(db, lease, delay=5)
    found = queue.info(db)
    assert (found.delayed, found.leases_in_flight, found.expired_leases) == (1, 0, 0)
    assert found.size == 1  # "b" only
    (listed,) = queue.leases(db)
    assert listed.released and listed.value == lease.value
    assert take(queue, db) != lease.value  # not before its delay
    assert take(queue, db) is None
    pass_time(db, 6)
    found = queue.info(db)
    assert (found.delayed, found.expired_leases, found.size) == (0, 1, 1)
    assert queue.peek(db) == lease.value
    assert queue.oldest_age(db) is not None
    assert take(queue, db) == lease.value


@pytest.mark.parametrize(("kind", "shards"), SHAPES)
@controlled_time
def test_size_peek_and_oldest_age_count_an_expired_lease(db, subspace, kind, shards):
    queue = make(kind, shards, subspace, db, ["a"])
    held = queue.claim(db, lease=1)
    assert queue.size(db) == 0 and queue.empty(db) and queue.oldest_age(db) is None
    pass_time(db, 100)
    assert queue.size(db) == 1 and not queue.empty(db)
    assert queue.peek(db) == held.value
    assert queue.peek_many(db, 5) == [held.value]
    age = queue.oldest_age(db)
    assert age is not None and 98 <= age <= 100  # it waits since its lease expired
    found = queue.info(db)
    assert (found.size, found.expired_leases, found.leases_in_flight) == (1, 1, 0)
    assert found.oldest == held.value
