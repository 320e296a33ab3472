"""Every operation on every shape of queue, through the public API only.

A *shape* is one of {Queue, PriorityQueue} x {1 shard, 4 shards} x {plain,
``high_contention=True``, a consumer session} x {sync, asyncio}: 24 shapes. A session shape
is a plain queue whose takes and claims go through ``queue.consumer(db)``; every other
operation goes to the queue itself. :class:`Shape` adapts them, so each test writes its
operation once: ``put`` is ``enqueue`` or ``push``, ``take`` is ``dequeue`` or ``pop_min``
(or the session's ``take``), and an asyncio shape runs the coroutine twin of each call on an
event loop of its own (one per test, so a session lives across calls); each call is a task
of its own there, so on a sharded queue each asyncio call is a new consumer with a home of its
own (docs/sharding.rst), as the calls of separate request handlers would be.

Each cell asserts what the documentation promises. Where an operation does not exist for a
queue type the test runs only on the shapes that have it: ``dequeue_many`` and
``enqueue_many`` are a Queue's (a PriorityQueue has no ``pop_many`` or ``push_many``).

The database is a fresh ``fdbqueue.memory.open()`` per test; waits for delays and leases to
run out move its clock with ``advance_time`` (documented in ``docs/memory.rst``), except the
blocking takes, which wait in real time.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from helpers import pass_time

import fdbqueue
import fdbqueue.asyncio as fa
from fdbqueue import LeaseExpiredError, LeaseNotHeldError, Subspace, _clock, memory

#: Values with their priorities: a PriorityQueue pops b, d, a, c; a Queue takes a, b, c, d.
ITEMS = [("a", 2), ("b", 0), ("c", 3), ("d", 1)]
#: Seconds of a short delay or lease, and how far the clock moves to get past one
#: (``pass_time``: no real time passes). Long enough that a loaded machine's own time, between
#: a put and the take that must find it not due, never reaches it.
SHORT = 5.0
PAST_SHORT = 6.0
LONG = 60.0
MAX_DELIVERIES = 3


@dataclass(frozen=True)
class Spec:
    """One shape: the queue type, its shards, how it takes, and which API calls it."""

    priority: bool
    shards: int
    mode: str  # "plain", "contention" (high_contention=True) or "session"
    api: str  # "sync" or "asyncio"

    @property
    def id(self) -> str:
        kind = "PriorityQueue" if self.priority else "Queue"
        return f"{kind}-{self.shards}shard-{self.mode}-{self.api}"


SHAPES = [
    Spec(priority, shards, mode, api)
    for priority in (False, True)
    for shards in (1, 4)
    for mode in ("plain", "contention", "session")
    for api in ("sync", "asyncio")
]
FIFO_SHAPES = [spec for spec in SHAPES if not spec.priority]


def shapes(specs: list[Any]) -> pytest.MarkDecorator:
    """Parametrize ``shape`` over ``specs`` (Specs, or pytest.params of them)."""
    ids = [(s.values[0] if hasattr(s, "values") else s).id for s in specs]
    return pytest.mark.parametrize("shape", specs, ids=ids, indirect=True)


#: Every shape, the asyncio ones slow: for the tests of hundreds of transactions a cell.
SYNC_FIRST = [
    s if s.api == "sync" else pytest.param(s, marks=pytest.mark.slow("hundreds of transactions"))
    for s in SHAPES
]


def _on_queue(name: str) -> Callable[..., Any]:
    """A Shape method calling the queue's ``name(db, ...)`` (awaited on asyncio shapes)."""

    def method(self: Shape, *args: Any, **kwargs: Any) -> Any:
        return self.run(getattr(self.queue, name)(self.db, *args, **kwargs))

    method.__name__ = name
    return method


class Shape:
    """A queue of one shape on a fresh in-memory database, with each operation written once."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.db = memory.open()
        self.space = Subspace(("matrix", uuid.uuid4().hex))
        api: Any = fa if spec.api == "asyncio" else fdbqueue
        queue_class = api.PriorityQueue if spec.priority else api.Queue
        self.queue: Any = queue_class(
            self.space,
            shards=spec.shards,
            high_contention=spec.mode == "contention",
            max_deliveries=MAX_DELIVERIES,
        )
        self.loop = asyncio.new_event_loop() if spec.api == "asyncio" else None
        self.session: Any = self.queue.consumer(self.db) if spec.mode == "session" else None

    def close(self) -> None:
        if self.session is not None:
            self.run(self.session.close())
        if self.loop is not None:
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    # -- running ----------------------------------------------------------------------------

    @property
    def is_async(self) -> bool:
        return self.loop is not None

    def run(self, result: Any) -> Any:
        """The result of a call: a synchronous call's value, or the coroutine's, run here."""
        if self.loop is None:
            return result
        return self.loop.run_until_complete(result)

    @property
    def sync_queue(self) -> Any:
        """The synchronous queue over the same keys (what another thread uses)."""
        return self.queue.sync if self.is_async else self.queue

    # -- what the documentation promises ----------------------------------------------------

    @property
    def exact_order(self) -> bool:
        """Whether one consumer's takes come out in an exact order: a PriorityQueue's by
        priority (sharded too: the best of every shard's first item), a Queue's FIFO in one
        shard (across shards the order is only bounded)."""
        return self.spec.priority or self.spec.shards == 1

    @property
    def peeks_for_the_taker(self) -> bool:
        """Whether ``peek`` shows what this shape's next take returns: it shows what the
        calling thread's (or asyncio task's) next take returns, and a sharded Queue's takes
        go to the taker's home shard; a session is a consumer of its own, and each asyncio
        call here runs in a task of its own, so on a sharded Queue those take elsewhere."""
        if self.spec.priority or self.spec.shards == 1:
            return True
        return self.spec.mode != "session" and self.spec.api != "asyncio"

    def order(self, items: list[tuple[str, int]]) -> list[str]:
        """The values of ``items`` (put in this order) in the order takes return them."""
        if self.spec.priority:
            return [value for value, _ in sorted(items, key=lambda item: item[1])]
        return [value for value, _ in items]

    def check_takes(self, taken: list[Any], items: list[tuple[str, int]]) -> None:
        """``taken`` is every value of ``items`` once, in take order when exact."""
        if self.exact_order:
            assert taken == self.order(items)
        else:
            assert sorted(taken) == sorted(value for value, _ in items)

    def advance(self, seconds: float) -> None:
        """Move the database's clock (read versions) forward."""
        pass_time(self.db, seconds)

    # -- writing ----------------------------------------------------------------------------

    def put(self, value: Any, priority: int = 0, **kwargs: Any) -> Any:
        """``enqueue`` or ``push`` (each returns a bool: whether the value was written)."""
        if self.spec.priority:
            return self.run(self.queue.push(self.db, value, priority, **kwargs))
        return self.run(self.queue.enqueue(self.db, value, **kwargs))

    def put_items(self, items: list[tuple[str, int]], **kwargs: Any) -> None:
        for value, priority in items:
            self.put(value, priority, **kwargs)

    def put_from_thread(self, value: Any, priority: int = 0) -> None:
        """Put with the synchronous queue (call it from another thread)."""
        if self.spec.priority:
            self.sync_queue.push(self.db, value, priority)
        else:
            self.sync_queue.enqueue(self.db, value)

    def put_many(self, values: list[Any], **kwargs: Any) -> list[bool]:
        return self.run(self.queue.enqueue_many(self.db, values, **kwargs))

    # -- taking -----------------------------------------------------------------------------

    def _take_call(self, session: Any, **kwargs: Any) -> Any:
        if session is not None:
            return session.take(**kwargs)
        if self.spec.priority:
            return self.queue.pop_min(self.db, **kwargs)
        return self.queue.dequeue(self.db, **kwargs)

    def take(self, **kwargs: Any) -> Any:
        """``dequeue`` / ``pop_min``, or the session's ``take``."""
        return self.run(self._take_call(self.session, **kwargs))

    def take_all(self) -> list[Any]:
        taken = []
        while (value := self.take()) is not None:
            taken.append(value)
        return taken

    def take_many(self, n: int) -> list[Any]:
        return self.run(self.queue.dequeue_many(self.db, n))

    def take_concurrently(self, n: int) -> list[Any]:
        """``n`` takes at once: threads (sync) or tasks (asyncio), each with a session of
        its own on session shapes."""
        if self.is_async:

            async def one() -> Any:
                if self.session is None:
                    return await self._take_call(None)
                async with self.queue.consumer(self.db) as session:
                    return await session.take()

            async def all_at_once() -> list[Any]:
                return list(await asyncio.gather(*(one() for _ in range(n))))

            return self.run(all_at_once())
        results: list[Any] = []
        barrier = threading.Barrier(n)

        def consume() -> None:
            barrier.wait()
            if self.session is None:
                results.append(self._take_call(None))
            else:
                with self.queue.consumer(self.db) as session:
                    results.append(session.take())

        threads = [threading.Thread(target=consume) for _ in range(n)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        return results

    def claim(self, lease: float, **kwargs: Any) -> Any:
        """The queue's ``claim``, or the session's."""
        if self.session is not None:
            return self.run(self.session.claim(lease, **kwargs))
        return self.run(self.queue.claim(self.db, lease, **kwargs))

    def work(self, handler: Callable[..., Any], **kwargs: Any) -> Any:
        """The queue's worker loop (asyncio: its own, with a coroutine handler unless
        ``transactional``, which takes a plain function)."""
        if self.is_async and not kwargs.get("transactional"):
            plain = handler

            async def handler(value: Any) -> Any:
                return plain(value)

        return self.run(self.queue.work(self.db, handler, **kwargs))

    def submit(self, value: Any, priority: int = 0, **kwargs: Any) -> Any:
        """``submit`` (a PriorityQueue's with ``priority``): the Job, or None."""
        if self.spec.priority:
            return self.run(self.queue.submit(self.db, value, priority=priority, **kwargs))
        return self.run(self.queue.submit(self.db, value, **kwargs))

    claim_many = _on_queue("claim_many")
    job = _on_queue("job")
    result = _on_queue("result")
    cancel = _on_queue("cancel")
    ack = _on_queue("ack")
    ack_many = _on_queue("ack_many")
    release = _on_queue("release")
    extend = _on_queue("extend")
    dead_letter = _on_queue("dead_letter")
    dead_letters = _on_queue("dead_letters")
    requeue_dead_letters = _on_queue("requeue_dead_letters")
    purge_dead_letters = _on_queue("purge_dead_letters")
    peek = _on_queue("peek")
    peek_many = _on_queue("peek_many")
    size = _on_queue("size")
    empty = _on_queue("empty")
    info = _on_queue("info")
    oldest_age = _on_queue("oldest_age")
    leases = _on_queue("leases")
    clear = _on_queue("clear")


@pytest.fixture
def shape(request: pytest.FixtureRequest) -> Iterator[Shape]:
    made = Shape(request.param)
    yield made
    made.close()


def values_of(leases: list[Any]) -> list[Any]:
    return [lease.value for lease in leases]


# -- writing and taking -----------------------------------------------------------------------


@shapes(SHAPES)
def test_put_and_take(shape: Shape) -> None:
    for value, priority in ITEMS:
        assert shape.put(value, priority) is True
    assert shape.size() == len(ITEMS)
    shape.check_takes([shape.take() for _ in ITEMS], ITEMS)
    assert shape.take() is None
    assert shape.size() == 0


@shapes(SHAPES)
def test_put_with_delay(shape: Shape) -> None:
    # The delayed item has the best priority: a PriorityQueue would pop it first if due.
    shape.put("later", -1, delay=SHORT)
    shape.put("now", 5)
    assert shape.take() == "now"
    assert shape.take() is None  # not due yet
    shape.advance(PAST_SHORT)
    assert shape.take() == "later"
    assert shape.take() is None


@shapes(SHAPES)
def test_put_into_groups(shape: Shape) -> None:
    # A group's items come out in put order whatever their priorities; a PriorityQueue
    # serves the group whose first item has the best priority: b-1 (3) before a-1 (5).
    items = [("a-1", 5), ("a-2", 1), ("b-1", 3)]
    for value, priority in items:
        shape.put(value, priority, group=value[0])
    first_turns = ["b-1", "a-1"] if shape.spec.priority else ["a-1", "b-1"]
    taken = [shape.take() for _ in items]
    assert shape.take() is None
    assert sorted(taken) == ["a-1", "a-2", "b-1"]
    assert taken.index("a-1") < taken.index("a-2")
    if shape.exact_order:
        assert taken == [*first_turns, "a-2"]

    # Under leases, one item of a group in flight at a time.
    for value, priority in items:
        shape.put(value, priority, group=value[0])
    first, second = shape.claim(LONG), shape.claim(LONG)
    assert first is not None and second is not None
    if shape.exact_order:
        assert [first.value, second.value] == first_turns
    assert sorted([first.value, second.value]) == ["a-1", "b-1"]
    assert {first.group, second.group} == {"a", "b"}
    info = shape.info()
    assert (info.groups, info.groups_in_flight) == (2, 2)
    assert shape.claim(LONG) is None  # a-2 waits for a-1's lease to end
    shape.ack(first if first.value == "a-1" else second)
    third = shape.claim(LONG)
    assert third is not None and (third.value, third.group) == ("a-2", "a")


@shapes(SHAPES)
def test_a_dead_holders_group_is_released_to_plain_takes(shape: Shape) -> None:
    """A consumer claimed a group's first item and died: once its lease expired, takes of
    every kind (not only claims) deliver that item again, then the group's other items."""
    items = [("g-1", 1), ("g-2", 1), ("g-3", 1)]
    for value, priority in items:
        shape.put(value, priority, group="g")
    dead = shape.claim(SHORT)
    assert dead is not None and dead.value == "g-1"
    assert shape.take() is None  # held: the group waits for its lease
    shape.advance(PAST_SHORT)
    assert shape.take_all() == ["g-1", "g-2", "g-3"]
    with pytest.raises(LeaseNotHeldError):
        shape.ack(dead)
    info = shape.info()
    assert (info.groups, info.groups_in_flight, info.size) == (0, 0, 0)
    assert shape.leases() == [] and shape.dead_letters() == []


@shapes(SHAPES)
def test_put_with_dedup_id(shape: Shape) -> None:
    assert shape.put("order 42", dedup_id="order-42") is True
    assert shape.put("order 42", dedup_id="order-42") is False
    assert shape.put("order 42", 7, dedup_id="order-42") is False  # an id is the queue's
    assert shape.put("order 43", 1, dedup_id="order-43") is True
    assert shape.put("no id") is True
    assert shape.size() == 3
    assert sorted(shape.take_all()) == ["no id", "order 42", "order 43"]
    assert shape.put("order 42", dedup_id="order-42") is False  # the id outlives the item
    assert shape.put("later", delay=SHORT, dedup_id="later") is True
    assert shape.put("later", delay=SHORT, dedup_id="later") is False
    assert shape.take() is None
    shape.advance(PAST_SHORT)
    assert shape.take_all() == ["later"]


@shapes(FIFO_SHAPES)
def test_enqueue_many_with_dedup_ids(shape: Shape) -> None:
    # A PriorityQueue has no push_many.
    assert shape.put("x", dedup_id="x") is True
    assert shape.put_many(["x", "y", "z"], dedup_ids=["x", "y", "y"]) == [False, True, False]
    assert sorted(shape.take_all()) == ["x", "y"]


@shapes(FIFO_SHAPES)
def test_dequeue_many(shape: Shape) -> None:
    # A PriorityQueue has no pop_many.
    values = ["a", "b", "c", "d", "e"]
    shape.put_many(values)
    first = shape.take_many(3)
    assert len(first) == 3
    rest = shape.take_many(10)
    assert len(rest) == 2
    if shape.exact_order:
        assert (first, rest) == (values[:3], values[3:])
    assert sorted(first + rest) == values
    assert shape.take_many(10) == []
    assert shape.size() == 0


@shapes(FIFO_SHAPES)
def test_enqueue_many(shape: Shape) -> None:
    # A PriorityQueue has no push_many.
    values = ["a", "b", "c", "d"]
    assert shape.put_many(values) == [True] * 4
    assert shape.size() == 4
    shape.check_takes(shape.take_all(), [(v, 0) for v in values])
    assert shape.put_many(["later-1", "later-2"], delay=SHORT) == [True, True]
    assert shape.take() is None
    shape.advance(PAST_SHORT)
    shape.check_takes(shape.take_all(), [("later-1", 0), ("later-2", 0)])


@shapes(SHAPES)
def test_concurrent_takes_take_the_first_items(shape: Shape) -> None:
    # Each take removes the first item at its read version (a PriorityQueue: the best
    # priority among every shard's first item), so 4 takes at once from 8 items take the
    # first 4 in a Queue of one shard and the 4 best priorities in a PriorityQueue.
    items = [(f"v{i}", i) for i in range(8)]
    shape.put_items(items)
    taken = shape.take_concurrently(4)
    assert None not in taken and len(set(taken)) == 4
    rest = shape.take_all()
    assert sorted(taken + rest) == sorted(v for v, _ in items)  # each exactly once
    if shape.exact_order:
        assert sorted(taken) == sorted(shape.order(items)[:4])


# -- blocking takes ---------------------------------------------------------------------------


@shapes(SYNC_FIRST)
def test_blocking_take_wakes_for_an_item_put_by_another_thread(shape: Shape) -> None:
    started = time.monotonic()
    assert shape.take(block=True, timeout=0.05) is None
    assert time.monotonic() - started >= 0.05
    producer = threading.Timer(0.2, shape.put_from_thread, ("wake", 1))
    started = time.monotonic()
    producer.start()
    try:
        assert shape.take(block=True, timeout=5) == "wake"
    finally:
        producer.join()
    assert 0.15 <= time.monotonic() - started < 4


@shapes(SYNC_FIRST)
def test_blocking_take_wakes_for_a_delayed_item(shape: Shape) -> None:
    started = time.monotonic()
    shape.put("later", 1, delay=0.3)
    assert shape.take(block=True, timeout=2) == "later"
    assert 0.25 <= time.monotonic() - started < 2


# -- claims -----------------------------------------------------------------------------------


@shapes(SHAPES)
def test_claim_and_ack(shape: Shape) -> None:
    shape.put_items(ITEMS[:2])
    lease = shape.claim(LONG)
    assert lease is not None
    if shape.exact_order:
        assert lease.value == shape.order(ITEMS[:2])[0]
    assert lease.value in ("a", "b") and lease.deliveries == 1 and lease.group is None
    assert [held.id for held in shape.leases()] == [lease.id]
    assert shape.size() == 1  # a leased item is not counted
    shape.ack(lease)
    assert shape.leases() == []
    with pytest.raises(LeaseNotHeldError):
        shape.ack(lease)
    other = shape.claim(LONG)
    assert other is not None and {lease.value, other.value} == {"a", "b"}
    shape.ack(other)
    assert shape.claim(LONG) is None
    assert shape.empty() and shape.size() == 0


@shapes(SHAPES)
def test_claim_many_and_ack_many(shape: Shape) -> None:
    items = ITEMS[:3]
    shape.put_items(items)
    batch = shape.claim_many(2, LONG)
    assert len(batch) == 2 and all(lease.deliveries == 1 for lease in batch)
    if shape.exact_order:
        assert values_of(batch) == shape.order(items)[:2]
    assert sorted(lease.id for lease in shape.leases()) == sorted(lease.id for lease in batch)
    shape.ack_many(batch)
    assert shape.leases() == []
    with pytest.raises(LeaseNotHeldError):
        shape.ack_many(batch)
    rest = shape.claim_many(5, LONG)
    assert len(rest) == 1
    assert sorted(values_of(batch + rest)) == sorted(v for v, _ in items)
    shape.ack_many(rest)
    assert shape.claim_many(5, LONG) == []
    assert shape.claim(LONG) is None


@shapes(SHAPES)
def test_release(shape: Shape) -> None:
    shape.put_items([("a", 1), ("b", 2)])
    lease = shape.claim(LONG)
    assert lease is not None
    shape.release(lease)
    again = shape.claim(LONG)  # a released item is claimed first
    assert again is not None and (again.value, again.deliveries) == (lease.value, 2)
    with pytest.raises(LeaseNotHeldError):
        shape.ack(lease)
    shape.release(again, delay=SHORT)
    other = shape.claim(LONG)
    assert other is not None and other.value != lease.value
    assert shape.claim(LONG) is None  # the released item is not due yet
    shape.advance(PAST_SHORT)
    third = shape.claim(LONG)
    assert third is not None and (third.value, third.deliveries) == (lease.value, 3)
    shape.ack_many([other, third])
    assert shape.leases() == []


@shapes(SHAPES)
def test_extend(shape: Shape) -> None:
    shape.put("job", 1)
    lease = shape.claim(SHORT)
    assert lease is not None
    extended = shape.extend(lease, LONG)
    assert extended.value == "job" and extended.expiry_version > lease.expiry_version
    shape.advance(PAST_SHORT)  # past the first lease, well within the extended one
    assert shape.claim(LONG) is None
    assert [held.id for held in shape.leases()] == [extended.id]
    with pytest.raises(LeaseNotHeldError):
        shape.ack(lease)
    shape.ack(extended)
    assert shape.leases() == []


@shapes(SHAPES)
def test_an_expired_lease_is_claimed_again_until_max_deliveries(shape: Shape) -> None:
    shape.put("job", 1)
    first = shape.claim(SHORT)
    assert first is not None and (first.value, first.deliveries) == ("job", 1)
    shape.put("other", 0)  # at the front (a better priority): an expired item comes first
    leases = [first]
    for delivery in range(2, MAX_DELIVERIES + 1):
        shape.advance(PAST_SHORT)
        assert shape.info().expired_leases == 1
        lease = shape.claim(SHORT)
        assert lease is not None and (lease.value, lease.deliveries) == ("job", delivery)
        leases.append(lease)
    shape.advance(PAST_SHORT)
    with pytest.raises(LeaseExpiredError):
        shape.ack(leases[-1])  # expired
    with pytest.raises(LeaseNotHeldError):
        shape.ack(leases[0])  # expired and claimed again
    other = shape.claim(LONG)  # "job" is out of deliveries: a dead letter on the way
    assert other is not None and (other.value, other.deliveries) == ("other", 1)
    [letter] = shape.dead_letters()
    assert (letter.value, letter.deliveries) == ("job", MAX_DELIVERIES)
    assert letter.reason.startswith("max_deliveries")
    shape.ack(other)
    assert shape.leases() == [] and shape.claim(LONG) is None


@shapes(SHAPES)
def test_dead_letter(shape: Shape) -> None:
    shape.put("broken", 1)
    lease = shape.claim(LONG)
    assert lease is not None
    shape.dead_letter(lease, "handler failed")
    [letter] = shape.dead_letters()
    assert (letter.value, letter.reason, letter.deliveries) == ("broken", "handler failed", 1)
    assert shape.leases() == []
    assert shape.claim(LONG) is None and shape.take() is None
    with pytest.raises(LeaseNotHeldError):
        shape.ack(lease)
    assert shape.info().dead_letters == 1


# -- dead letters -----------------------------------------------------------------------------


def make_dead_letters(shape: Shape, items: list[tuple[str, int]]) -> list[str]:
    """Put ``items``, claim each and dead-letter it; the values in dead-letter order."""
    shape.put_items(items)
    order = []
    for _ in items:
        lease = shape.claim(LONG)
        assert lease is not None
        shape.dead_letter(lease, f"failed {lease.value}")
        order.append(lease.value)
    assert shape.claim(LONG) is None
    return order


@shapes(SHAPES)
def test_dead_letters(shape: Shape) -> None:
    assert shape.dead_letters() == []
    order = make_dead_letters(shape, ITEMS[:3])
    letters = shape.dead_letters()
    assert sorted(values_of(letters)) == sorted(order)
    assert all(letter.reason == f"failed {letter.value}" for letter in letters)
    assert all(letter.deliveries == 1 for letter in letters)
    assert len({letter.id for letter in letters}) == 3
    assert len(shape.dead_letters(limit=2)) == 2
    assert shape.info().dead_letters == 3
    assert values_of(letters) == order  # oldest first
    assert values_of(shape.dead_letters(limit=1)) == order[:1]


@shapes(SHAPES)
def test_requeue_dead_letters(shape: Shape) -> None:
    items = ITEMS[:3]
    order = make_dead_letters(shape, items)
    assert shape.requeue_dead_letters(limit=1) == 1
    assert len(shape.dead_letters()) == 2
    assert shape.requeue_dead_letters() == 2
    assert shape.dead_letters() == []
    assert shape.info().dead_letters == 0
    assert shape.size() == 3
    requeued = [(value, dict(items)[value]) for value in order]  # back in, oldest first
    shape.check_takes(shape.take_all(), requeued)
    assert shape.requeue_dead_letters() == 0
    # A requeued item's delivery count starts again.
    shape.put("again", 4)
    lease = shape.claim(LONG)
    assert lease is not None
    shape.release(lease)
    lease = shape.claim(LONG)
    assert lease is not None and (lease.value, lease.deliveries) == ("again", 2)
    shape.dead_letter(lease, "failed twice")
    assert shape.requeue_dead_letters() == 1
    lease = shape.claim(LONG)
    assert lease is not None and (lease.value, lease.deliveries) == ("again", 1)


@shapes(SHAPES)
def test_purge_dead_letters(shape: Shape) -> None:
    order = make_dead_letters(shape, ITEMS[:3])
    assert shape.purge_dead_letters(limit=1) == 1
    left = shape.dead_letters()
    assert len(left) == 2
    assert shape.purge_dead_letters() == 2
    assert shape.dead_letters() == []
    assert shape.info().dead_letters == 0
    assert shape.purge_dead_letters() == 0
    assert shape.claim(LONG) is None and shape.take() is None
    assert values_of(left) == order[1:]  # the oldest was purged


# -- looking ----------------------------------------------------------------------------------


@shapes(SHAPES)
def test_peek(shape: Shape) -> None:
    assert shape.peek() is None
    shape.put_items(ITEMS)
    taken = []
    for left in range(len(ITEMS), 0, -1):
        front = shape.peek()
        assert shape.size() == left  # peek removes nothing
        taken.append(shape.take())
        if shape.peeks_for_the_taker:
            assert taken[-1] == front  # peek shows what the same consumer's next take returns
    shape.check_takes(taken, ITEMS)
    assert shape.peek() is None


@shapes(SHAPES)
def test_peek_many(shape: Shape) -> None:
    assert shape.peek_many(3) == []
    shape.put_items(ITEMS)
    every = shape.peek_many(None)
    assert sorted(every) == sorted(v for v, _ in ITEMS)
    first_two = shape.peek_many(2)
    assert first_two == every[:2]
    assert shape.size() == len(ITEMS)  # nothing removed
    taken = shape.take_all()
    shape.check_takes(taken, ITEMS)
    assert shape.peek_many(None) == []
    if shape.exact_order:
        assert every == taken  # the next takes, in their order


@shapes(SHAPES)
def test_size_and_empty(shape: Shape) -> None:
    assert (shape.size(), shape.empty()) == (0, True)
    shape.put_items(ITEMS[:3])
    assert (shape.size(), shape.empty()) == (3, False)
    assert shape.take() is not None
    assert (shape.size(), shape.empty()) == (2, False)
    lease = shape.claim(LONG)
    assert lease is not None
    assert (shape.size(), shape.empty()) == (1, False)  # leased items are not counted
    assert shape.take() is not None
    assert (shape.size(), shape.empty()) == (0, True)
    shape.release(lease)
    assert (shape.size(), shape.empty()) == (1, False)  # released: it waits (issue 36)
    shape.put("later", 0, delay=LONG)
    assert (shape.size(), shape.empty()) == (1, False)  # a delayed item waits once due
    assert shape.take() == lease.value  # the released item: every take takes it
    assert (shape.size(), shape.empty()) == (0, True)


@shapes(SHAPES)
def test_info(shape: Shape) -> None:
    empty = shape.info()
    assert (empty.size, empty.oldest, empty.leases_in_flight, empty.dead_letters) == (
        0,
        None,
        0,
        0,
    )
    assert (empty.delayed, empty.groups, empty.requests_in_line) == (0, 0, 0)
    shape.put_items(ITEMS)
    held = shape.claim(LONG)
    failed = shape.claim(LONG)
    assert held is not None and failed is not None
    shape.dead_letter(failed, "failed")
    short = shape.claim(SHORT)
    assert short is not None
    shape.advance(PAST_SHORT)
    info = shape.info()
    assert info.size == 2  # the item left, and the expired lease's item: both wait
    assert info.leases_in_flight == 1 and info.expired_leases == 1
    assert (info.dead_letters, info.delayed) == (1, 0)
    assert (info.groups, info.groups_in_flight, info.requests_in_line) == (0, 0, 0)
    assert info.read_version > empty.read_version
    if shape.spec.shards == 1:
        assert info.shards == ()
    else:
        assert len(info.shards) == shape.spec.shards
        assert sum(part.size for part in info.shards) == info.size
        assert sum(part.leases_in_flight for part in info.shards) == info.leases_in_flight
        assert sum(part.dead_letters for part in info.shards) == info.dead_letters
    claimed = {held.value, failed.value, short.value}
    [left] = [value for value, _ in ITEMS if value not in claimed]
    if shape.exact_order:
        assert [held.value, failed.value, short.value, left] == shape.order(ITEMS)
    # the expired lease's item comes first (on several shards, first in its shard)
    assert info.oldest == short.value or (shape.spec.shards > 1 and info.oldest == left)
    first = shape.take()
    if shape.peeks_for_the_taker:
        assert first == info.oldest  # oldest: what the next take returns
    shape.put("later", 0, delay=LONG)
    delayed = shape.info()
    rest = ({short.value, left} - {first}).pop()
    assert (delayed.delayed, delayed.size, delayed.oldest) == (1, 1, rest)


@shapes(SHAPES)
def test_oldest_age(shape: Shape, monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1_000.0]
    monkeypatch.setattr(_clock, "now", lambda: now[0])
    assert (shape.info().oldest_age, shape.oldest_age()) == (None, None)
    shape.put_items(ITEMS)
    now[0] += 7.5
    info = shape.info()
    assert (info.oldest_age, shape.oldest_age()) == (7.5, 7.5)
    if shape.spec.shards > 1:  # each shard's, and the queue's the oldest of them
        assert {part.oldest_age for part in info.shards} <= {7.5, None}
    shape.put("later", 0, delay=LONG)  # not in the queue yet: not counted
    held = shape.claim(LONG)  # in a lease: not waiting in the queue
    assert held is not None
    while shape.take() is not None:
        pass
    assert shape.oldest_age() is None
    shape.put("new", 0)
    now[0] += 2
    assert shape.info().oldest_age == 2
    shape.clear()
    assert shape.oldest_age() is None
    shape.put("grouped", 0, group="g")  # a message group's items count too
    now[0] += 3
    assert (shape.info().oldest_age, shape.oldest_age()) == (3, 3)
    assert shape.take() == "grouped"
    assert shape.oldest_age() is None


@shapes(SHAPES)
def test_leases(shape: Shape) -> None:
    assert shape.leases() == []
    shape.put_items(ITEMS[:2])
    long = shape.claim(LONG)
    short = shape.claim(SHORT)
    assert long is not None and short is not None
    listed = shape.leases()
    assert {lease.id: (lease.value, lease.deliveries) for lease in listed} == {
        short.id: (short.value, 1),
        long.id: (long.value, 1),
    }
    first = shape.leases(limit=1)
    assert len(first) == 1
    shape.advance(PAST_SHORT)
    expired = shape.leases()  # an expired lease is still listed
    assert sorted(lease.id for lease in expired) == sorted([short.id, long.id])
    shape.ack(long)
    assert [lease.id for lease in shape.leases()] == [short.id]
    again = shape.claim(LONG)
    assert again is not None and (again.value, again.deliveries) == (short.value, 2)
    assert [lease.id for lease in shape.leases()] == [again.id]
    # Soonest expiry first.
    assert [lease.id for lease in listed] == [short.id, long.id]
    assert [lease.id for lease in first] == [short.id]
    assert [lease.id for lease in expired] == [short.id, long.id]


@shapes(SHAPES)
def test_clear(shape: Shape) -> None:
    shape.put_items(ITEMS)
    held = shape.claim(LONG)
    failed = shape.claim(LONG)
    assert held is not None and failed is not None
    shape.dead_letter(failed, "failed")
    shape.clear()
    info = shape.info()
    assert (info.size, info.oldest, info.leases_in_flight, info.dead_letters) == (0, None, 0, 0)
    assert shape.empty() and shape.size() == 0
    assert shape.leases() == [] and shape.dead_letters() == []
    with pytest.raises(LeaseNotHeldError):
        shape.ack(held)
    assert shape.take() is None and shape.claim(LONG) is None
    shape.put("after", 1)
    assert shape.take() == "after"
    # Delayed items go too.
    shape.put("later", 0, delay=SHORT)
    assert shape.info().delayed == 1
    shape.clear()
    assert shape.info().delayed == 0
    shape.advance(PAST_SHORT)
    assert shape.take() is None and shape.claim(LONG) is None


# -- the worker loop --------------------------------------------------------------------------


@shapes(SHAPES)
def test_work(shape: Shape) -> None:
    shape.put_items(ITEMS)
    handled: list[Any] = []
    summary = shape.work(handled.append, lease=5, until_empty=True)
    assert summary.succeeded == len(ITEMS)
    assert (summary.retried, summary.dead_lettered, summary.lost) == (0, 0, 0)
    shape.check_takes(handled, ITEMS)  # one worker: claim order
    assert shape.empty() and shape.leases() == [] and shape.dead_letters() == []


@shapes(SHAPES)
def test_work_transactional(shape: Shape) -> None:
    effects = Subspace(("matrix-effects", uuid.uuid4().hex))
    shape.put_items(ITEMS)
    handled: list[Any] = []

    def handler(tr: Any, value: Any) -> None:
        tr.set(effects.pack((value,)), b"done")
        handled.append(value)

    summary = shape.work(handler, lease=5, until_empty=True, transactional=True)
    assert summary.succeeded == len(ITEMS)
    assert (summary.retried, summary.dead_lettered, summary.lost) == (0, 0, 0)
    assert sorted(handled) == sorted(v for v, _ in ITEMS)  # no attempt retried here

    def read(tr: Any) -> list[Any]:
        return [effects.unpack(kv.key)[0] for kv in tr.get_range_startswith(effects.key())]

    assert sorted(fdbqueue.transactional(read)(shape.db)) == sorted(v for v, _ in ITEMS)
    assert shape.empty() and shape.leases() == []


# -- jobs -------------------------------------------------------------------------------------


@shapes(SHAPES)
def test_a_job_is_followed_from_submit_to_its_result(shape: Shape) -> None:
    job = shape.submit("a", 2)
    info = shape.job(job.id)
    assert (info.state, info.deliveries, info.started_at, info.finished_at) == (
        "waiting",
        0,
        None,
        None,
    )
    assert info.priority == (2 if shape.spec.priority else None) and info.group is None
    lease = shape.claim(LONG)
    assert lease.value == "a" and lease.job_id == job.id
    running = shape.job(job.id)
    assert (running.state, running.deliveries) == ("running", 1) and running.started_at
    shape.ack(lease, result=("answer", 42))
    done = shape.job(job.id)
    assert done.state == "succeeded" and done.finished_at and done.has_result
    assert done.result == ("answer", 42)
    assert shape.result(job.id, timeout=1) == ("answer", 42)


@shapes(SHAPES)
def test_a_taken_job_succeeded_and_a_plain_item_is_no_job(shape: Shape) -> None:
    job = shape.submit("a", 1)
    shape.put("b", 2)
    taken = sorted([shape.take(), shape.take()])
    assert taken == ["a", "b"]
    assert shape.job(job.id).state == "succeeded"
    shape.put("c", 0)
    lease = shape.claim(LONG)
    assert lease.job_id is None
    with pytest.raises(ValueError, match="only a job keeps a result"):
        shape.ack(lease, result="kept nowhere")  # a plain item keeps no result: refused
    shape.ack(lease)


@shapes(SHAPES)
def test_a_cancelled_job_never_reaches_a_consumer(shape: Shape) -> None:
    cancelled = shape.submit("a", 1)
    kept = shape.submit("b", 2)
    assert shape.cancel(cancelled.id) is True
    assert shape.cancel(cancelled.id) is False  # finished already
    assert shape.job(cancelled.id).state == "cancelled"
    lease = shape.claim(LONG)
    assert lease is not None and lease.value == "b" and lease.job_id == kept.id
    assert shape.claim(LONG) is None and shape.take() is None
    shape.ack(lease)
    assert shape.size() == 0 and shape.empty()
    with pytest.raises(fdbqueue.JobFailedError) as failed:
        shape.result(cancelled.id, timeout=1)
    assert failed.value.info.state == "cancelled"


#: Every kind of take, as :func:`drain_by` runs it.
TAKE_KINDS = ["dequeue", "dequeue_many", "claim", "claim_many", "work"]


def drain_by(shape: Shape, kind: str) -> list[Any]:
    """Every value the takes of ``kind`` find now, in the order they return them (leases
    acknowledged as they come)."""
    if kind == "dequeue_many" and shape.spec.priority:
        pytest.skip("a PriorityQueue has no pop_many")
    if kind == "work":
        seen: list[Any] = []
        shape.work(seen.append, lease=LONG, until_empty=True)
        return seen
    found: list[Any] = []
    for _ in range(20):
        if kind == "dequeue":
            value = shape.take()
            values = [] if value is None else [value]
        elif kind == "dequeue_many":
            values = shape.take_many(1)
        else:
            lease = shape.claim(LONG) if kind == "claim" else None
            leases = [lease] if lease else [] if kind == "claim" else shape.claim_many(1, LONG)
            for each in leases:
                shape.ack(each)
            values = values_of(leases)
        if not values:
            return found
        found += values
    raise AssertionError(f"takes go on for ever: {found}")


@shapes(SHAPES)
@pytest.mark.parametrize("kind", TAKE_KINDS)
def test_a_cancelled_job_leaves_its_group_at_once(shape: Shape, kind: str) -> None:
    """The cancel removes a group's first item itself: the group's turn passes to its next
    item, and size, empty and peek agree with what every kind of take then finds."""
    doomed = shape.submit("doomed", 1, group="g")
    shape.put("a", 1, group="g")
    shape.put("b", 1, group="g")
    assert shape.cancel(doomed.id) is True
    assert (shape.size(), shape.empty(), shape.peek()) == (2, False, "a")
    assert drain_by(shape, kind) == ["a", "b"]
    assert (shape.size(), shape.empty(), shape.peek()) == (0, True, None)
    assert shape.info().groups == 0 and shape.job(doomed.id).state == "cancelled"


@shapes(SHAPES)
@pytest.mark.parametrize("kind", TAKE_KINDS)
def test_a_cancelled_job_a_take_meets_passes_its_groups_turn_on(shape: Shape, kind: str) -> None:
    """A cancelled job next in a group whose item is in flight is dropped by the take that
    meets it (the cancel cannot pass a turn the group does not have), and that take gives
    the group its next turn: the group's later items come out, nothing jams."""
    shape.put("a", 1, group="g")
    held = shape.claim(LONG)
    assert held is not None and held.value == "a"
    doomed = shape.submit("doomed", 1, group="g")
    shape.put("b", 1, group="g")
    shape.put("c", 1, group="g")
    assert shape.cancel(doomed.id) is True
    shape.ack(held)
    assert drain_by(shape, kind) == ["b", "c"]
    info = shape.info()
    assert (info.size, info.groups, info.groups_in_flight) == (0, 0, 0)
    assert shape.leases() == [] and shape.dead_letters() == []


@shapes(SHAPES)
@pytest.mark.parametrize("where", ["queue", "delayed", "group"])
def test_a_cancelled_job_is_gone_from_every_count_at_once(shape: Shape, where: str) -> None:
    """A cancel removes a waiting, delayed or grouped job's item in its own transaction."""
    options: dict[str, Any] = {
        "queue": {},
        "delayed": {"delay": SHORT},
        "group": {"group": "g"},
    }[where]
    doomed = shape.submit("doomed", 0, **options)
    shape.put("kept", 1)
    assert shape.cancel(doomed.id) is True
    assert (shape.size(), shape.peek_many(None)) == (1, ["kept"])
    shape.advance(PAST_SHORT)
    assert shape.take_all() == ["kept"]
    assert (shape.size(), shape.empty(), shape.peek()) == (0, True, None)
    info = shape.info()
    assert (info.size, info.delayed, info.groups) == (0, 0, 0)


@shapes(SHAPES)
def test_size_empty_and_peek_agree_with_the_next_take(shape: Shape) -> None:
    """A grouped item, and a delayed item that fell due, are what the next take returns:
    size, empty, peek and peek_many say so first."""
    shape.put("grouped", 3, group="g")
    assert (shape.size(), shape.empty(), shape.peek(), shape.peek_many(None)) == (
        1,
        False,
        "grouped",
        ["grouped"],
    )
    assert shape.take() == "grouped"
    assert (shape.size(), shape.empty(), shape.peek()) == (0, True, None)
    shape.put("queued", 3)
    shape.put("due", 1, delay=SHORT)
    assert (shape.size(), shape.peek_many(None)) == (1, ["queued"])
    shape.advance(PAST_SHORT)
    # promoted by the next take: behind the queued item, or a PriorityQueue's by priority
    # (in one shard: over several, a pop ranks the shards by the items they hold)
    expected = ["due", "queued"] if shape.spec.priority else ["queued", "due"]
    assert shape.size() == 2 and not shape.empty()
    first = shape.peek()
    if shape.spec.shards == 1:
        assert first == expected[0]
    assert sorted(shape.peek_many(None)) == sorted(expected)
    taken = [shape.take(), shape.take()]
    if shape.spec.shards == 1:
        assert taken == expected
    assert sorted(taken) == sorted(expected)
    assert shape.take() is None and shape.empty() and shape.peek() is None


@shapes(SHAPES)
def test_a_running_job_cancelled_is_not_retried(shape: Shape) -> None:
    job = shape.submit("a", 1)
    lease = shape.claim(LONG)
    assert shape.cancel(job.id) is True
    info = shape.job(job.id)
    assert info.state == "running" and info.cancel_requested
    shape.release(lease, error=RuntimeError("it failed"))
    assert shape.job(job.id).state == "cancelled"
    assert shape.claim(LONG) is None and shape.leases() == []


@shapes(SHAPES)
@pytest.mark.parametrize("group", [None, "g"])
def test_a_retrying_job_cancelled_leaves_its_lease_at_once(shape: Shape, group: Any) -> None:
    """A retrying job waits in the lease its release gave it back in: the cancel removes it
    there (its held value, its group's turn passed on), so no count, lease listing or take
    meets it, whether its delay is over or not."""
    job = shape.submit("doomed", 1, group=group)
    lease = shape.claim(LONG)
    assert lease is not None and lease.job_id == job.id
    shape.put("next", 1, group=group)
    shape.release(lease, delay=SHORT, error=ValueError("first"))
    assert shape.job(job.id).state == "retrying"
    assert shape.cancel(job.id) is True
    assert shape.leases() == [] and shape.job(job.id).state == "cancelled"
    shape.advance(PAST_SHORT)
    assert (shape.size(), shape.peek()) == (1, "next")
    again = shape.claim(LONG)
    assert again is not None and again.value == "next"
    shape.ack(again)
    assert shape.claim(LONG) is None and shape.take() is None
    info = shape.info()
    assert (info.size, info.groups, info.groups_in_flight, info.dead_letters) == (0, 0, 0, 0)


@shapes(SHAPES)
def test_a_failed_job_retries_then_dies_with_its_error(shape: Shape) -> None:
    job = shape.submit("a", 1)
    lease = shape.claim(LONG)
    shape.release(lease, delay=SHORT, error=ValueError("first"))
    info = shape.job(job.id)
    assert info.state == "retrying" and info.error[:2] == ("ValueError", "first")
    assert info.due_at is not None
    shape.advance(PAST_SHORT)
    again = shape.claim(LONG)
    assert again.job_id == job.id and shape.job(job.id).deliveries == 2
    shape.dead_letter(again, "gave up", error=KeyError("second"))
    dead = shape.job(job.id)
    assert dead.state == "dead" and dead.error[:2] == ("KeyError", "'second'")
    with pytest.raises(fdbqueue.JobFailedError, match="dead: KeyError"):
        shape.result(job.id, timeout=1)


@shapes(SHAPES)
def test_work_keeps_a_jobs_result(shape: Shape) -> None:
    jobs = [shape.submit(value, priority) for value, priority in ITEMS]
    summary = shape.work(lambda value: value.upper(), lease=5, until_empty=True)
    assert summary.succeeded == len(ITEMS)
    for job, (value, _priority) in zip(jobs, ITEMS, strict=True):
        assert shape.result(job.id, timeout=1) == value.upper()


#: What handlers return most, each kept as it was whatever the queue's codec (docs/jobs.rst,
#: "Results"), and a set, which no result codec built in keeps.
RETURNED = {
    "dict": {"a": [1, b"\x00"], "b": None},
    "list": [1, "x"],
    "tuple": (2.5, True),
    "bytes": b"\xff",
    "none": None,
    "set": {1, 2},
}


@shapes(SHAPES)
def test_work_keeps_what_handlers_return_most_and_says_what_it_cannot(shape: Shape) -> None:
    jobs = {name: shape.submit(name, 1) for name in RETURNED}
    summary = shape.work(lambda name: RETURNED[name], lease=5, until_empty=True)
    assert summary.succeeded == len(RETURNED)
    for name, value in RETURNED.items():
        if name == "set":
            with pytest.raises(fdbqueue.ResultNotKeptError, match="result not kept"):
                shape.result(jobs[name].id, timeout=1)
            assert shape.job(jobs[name].id).result_error.startswith("result not kept: ")
        else:
            result = shape.result(jobs[name].id, timeout=1)
            assert result == value and type(result) is type(value)


@shapes(SHAPES)
def test_a_delayed_job_is_delayed_then_waits(shape: Shape) -> None:
    job = shape.submit("a", 1, delay=SHORT)
    assert shape.job(job.id).state == "delayed"
    shape.advance(PAST_SHORT)
    assert shape.job(job.id).state == "waiting"
    assert shape.take() == "a" and shape.job(job.id).state == "succeeded"


# -- recoveries -------------------------------------------------------------------------------


def current_version(db: Any) -> int:
    """A read version taken now: what every lease returned before must outlive."""
    version: int = db.create_transaction().get_read_version().wait()
    return version


@shapes(SYNC_FIRST)
def test_a_claim_never_returns_an_expired_lease_under_recoveries(shape: Shape) -> None:
    """A recovery moves versions about 100 s on and fails the commit with 1021; a claim
    whose commit was applied finds its receipt, and must not return the lease it granted
    if it already expired then (it claims again instead). Leases last their seconds by the
    wall clock too, so the recoveries expire none: every item is delivered once."""
    items = [(f"v{n}", n % 4) for n in range(120)]
    shape.put_items(items)
    shape.db.faults = memory.Faults(recovery=0.1, commit_unknown_result=0.1, recovery_seconds=0)
    claimed = expired = delivered_again = 0
    try:
        for _ in range(len(items)):
            lease = shape.claim(30)
            if lease is None:
                break
            claimed += 1
            expired += lease.expired(current_version(shape.db))
            delivered_again += lease.deliveries > 1
    finally:
        shape.db.faults = memory.Faults()
    assert shape.db.stats()["injected_recovery"] > 0
    assert (claimed, expired, delivered_again) == (len(items), 0, 0)


# -- the feature record: a feature's first use ---------------------------------------------

FIRST_USES = ["delay", "group", "lease", "pause", "job"]


@shapes(SYNC_FIRST)
@pytest.mark.parametrize("feature", FIRST_USES)
def test_a_features_first_use_reaches_a_consumer_that_planned_without_it(
    shape: Shape, feature: str
) -> None:
    # The consumer took from the queue while its feature record showed no feature, so its
    # takes read nothing for any (fdbqueue._storage.features); another object then uses
    # one for the first time, and the consumer's next take finds what it left.
    shape.put("plain")
    assert shape.take() == "plain"
    kind: Any = fdbqueue.PriorityQueue if shape.spec.priority else fdbqueue.Queue
    other: Any = kind(shape.space, shards=shape.spec.shards, max_deliveries=MAX_DELIVERIES)
    db = shape.db

    def put(value: str, **kwargs: Any) -> Any:
        if shape.spec.priority:
            return other.push(db, value, 0, **kwargs)
        return other.enqueue(db, value, **kwargs)

    if feature == "delay":
        put("due", delay=SHORT)
        assert shape.take() is None
        shape.advance(PAST_SHORT)
        assert shape.take() == "due"
    elif feature == "group":
        put("grouped", group="g")
        assert shape.take() == "grouped"
        assert shape.info().groups == 0
    elif feature == "lease":
        put("leased")
        assert other.claim(db, SHORT).value == "leased"
        shape.advance(PAST_SHORT)
        assert shape.take() == "leased"
    elif feature == "pause":
        assert other.pause(db)
        put("held back")
        assert shape.take() is None
        assert other.resume(db)
        assert shape.take() == "held back"
    else:
        job = (
            other.submit(db, "a job", priority=0)
            if shape.spec.priority
            else other.submit(db, "a job")
        )
        assert shape.take() == "a job"
        assert shape.job(job.id).state == "succeeded"
    assert shape.take() is None and shape.size() == 0
