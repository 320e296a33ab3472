"""fdbqueue.asyncio: coroutine twins of the queues, run in greenlets on the event loop.

Every test runs on ``fdbqueue.memory.open()`` and on the ``fdb`` binding over the in-memory
engine (``memory.install()``, a cluster file of its own per test), so the greenlet-aware
``block_until_ready`` is exercised on both backends' futures. Each test drives its coroutines
with ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from helpers import installed_fdb

import fdbqueue
import fdbqueue.asyncio as fa
from fdbqueue import Subspace, memory
from fdbqueue._transactions import suspension
from fdbqueue.asyncio import _bridge as bridge

FAULTS = memory.Faults(not_committed=0.1, commit_unknown_result=0.3, transaction_too_old=0.1)


@dataclass
class Backend:
    """A database of the backend under test and the in-memory engine under it."""

    name: str
    db: Any
    engine: memory.Database

    def outstanding_watches(self) -> int:
        """Watches created and not yet ready (fired, failed or cancelled)."""
        return int(self.engine.outstanding_watches())


@pytest.fixture(params=["memory", "binding"])
def target(request: pytest.FixtureRequest, tmp_path: Any) -> Backend:
    if request.param == "memory":
        db = memory.open(seed=7)
        return Backend("memory", db, db)
    fdb = installed_fdb()
    path = str(tmp_path / f"{uuid.uuid4().hex}.cluster")
    database = fdb.open(path)
    return Backend("binding", database, memory.cluster(path))


@pytest.fixture
def space() -> Subspace:
    return Subspace(("fdbqueue-asyncio-test", uuid.uuid4().hex))


def eventually(condition: Callable[[], bool], seconds: float = 2.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


async def settled(task: asyncio.Task[Any]) -> Any:
    """The task's result, or the CancelledError class when it ended cancelled."""
    try:
        return await task
    except asyncio.CancelledError:
        return asyncio.CancelledError


# -- the twins --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sync_class", "async_class"),
    [
        (fdbqueue.Queue, fa.Queue),
        (fdbqueue.PriorityQueue, fa.PriorityQueue),
        (fdbqueue.Consumer, fa.Consumer),
    ],
)
def test_every_public_method_has_a_coroutine_twin(sync_class: type, async_class: type) -> None:
    for name, member in inspect.getmembers(sync_class):
        if name.startswith("_"):
            continue
        assert hasattr(async_class, name), name
        twin = getattr(async_class, name)
        if isinstance(member, property):
            assert isinstance(twin, property), name
        elif name == "consumer":
            assert not inspect.iscoroutinefunction(twin)
        elif name == "task":  # a decorator: the same registry, its submit awaited
            assert not inspect.iscoroutinefunction(twin)
            assert list(inspect.signature(twin).parameters) == list(
                inspect.signature(member).parameters
            )
        elif name == "work":  # its own loop, with tasks and an asyncio.Event for stop
            assert inspect.iscoroutinefunction(twin)
            parameters = inspect.signature(twin).parameters
            assert list(parameters) == list(inspect.signature(member).parameters)
        elif callable(member):
            assert inspect.iscoroutinefunction(twin), name
            assert twin.__doc__.startswith("Coroutine twin of :meth:`fdbqueue."), name
            assert inspect.signature(twin) == inspect.signature(member), name


def test_a_queue_wraps_a_synchronous_one_and_shows_its_properties(space: Subspace) -> None:
    queue = fa.Queue(space, codec="raw", high_contention=True)
    assert isinstance(queue.sync, fdbqueue.Queue)
    assert queue.subspace == queue.sync.subspace
    assert queue.codec is queue.sync.codec
    assert queue.high_contention
    existing = fdbqueue.PriorityQueue(space)
    twin = fa.PriorityQueue.from_sync(existing)
    assert twin.sync is existing and not twin.high_contention
    with pytest.raises(TypeError):
        fa.Queue(space, codec="raw", high_contention="yes")


def test_installing_is_idempotent_and_keeps_the_original_outside_greenlets() -> None:
    suspension.install()
    suspension.install()
    method = memory.Future.block_until_ready
    assert not hasattr(method.fdbqueue_original, "fdbqueue_original")
    future = memory.Future.completed(1, time.monotonic() + 0.02)
    started = time.monotonic()
    future.block_until_ready()  # a plain thread: blocks as before
    assert time.monotonic() - started >= 0.015


def test_a_nested_run_is_refused() -> None:
    def nested() -> None:
        coroutine = bridge.run(lambda: None)
        try:
            coroutine.send(None)
        finally:
            coroutine.close()

    with pytest.raises(RuntimeError, match="nested"):
        asyncio.run(bridge.run(nested))


def test_the_binding_futures_are_made_greenlet_aware_once_loaded(target: Backend) -> None:
    asyncio.run(fa.wait_future(target.db.create_transaction().get_read_version()))
    asyncio.run(bridge.run(lambda: None))
    classes = [memory.Future]
    if target.name == "binding":
        import fdb

        classes.append(fdb.impl.Future)
    for future_class in classes:
        assert hasattr(future_class.block_until_ready, "fdbqueue_original")


# -- both backends ----------------------------------------------------------------------------


def test_async_and_sync_calls_share_a_queue(target: Backend, space: Subspace) -> None:
    db = target.db
    queue = fa.Queue(space)

    async def main() -> None:
        await queue.enqueue(db, "a")
        await queue.enqueue_many(db, ["b", "c"])
        assert queue.sync.dequeue(db) == "a"
        queue.sync.enqueue(db, "d")
        assert await queue.size(db) == 3
        assert await queue.peek(db) == "b"
        assert await queue.dequeue(db) == "b"
        assert await queue.dequeue_many(db, 5) == ["c", "d"]
        assert await queue.dequeue(db) is None
        assert await queue.empty(db)

        await queue.enqueue(db, "job")
        lease = await queue.claim(db, 30.0)
        assert lease is not None and lease.value == "job"
        assert [held.id for held in await queue.leases(db)] == [lease.id]
        await queue.ack(db, lease)
        assert await queue.leases(db) == []
        with pytest.raises(fdbqueue.LeaseNotHeldError):
            await queue.ack(db, lease)  # the synchronous call's exception, raised here

    asyncio.run(main())


def test_priority_queue_twins(target: Backend, space: Subspace) -> None:
    db = target.db
    queue = fa.PriorityQueue(space)

    async def main() -> None:
        await queue.push(db, "low", 1)
        await queue.push(db, "high", 9)
        queue.sync.push(db, "middle", 5)
        assert await queue.peek_max(db) == "high"
        assert await queue.pop_max(db) == "high"
        assert await queue.pop(db) == "low"
        assert queue.sync.pop_min(db) == "middle"
        assert await queue.pop_min(db) is None
        await queue.push(db, "leased", 3)
        lease = await queue.claim(db, 30.0)
        assert lease.value == "leased"
        await queue.release(db, lease)
        again = await queue.claim(db, 30.0)
        assert again.value == "leased" and again.id != lease.id
        await queue.ack_many(db, [again])
        assert await queue.size(db) == 0

    asyncio.run(main())


def test_raw_futures_and_composed_transactions(target: Backend, space: Subspace) -> None:
    db = target.db
    source, destination = fa.Queue(space["source"]), fa.Queue(space["destination"])
    key = space.pack(("moved",))
    runs = []

    @fa.transactional
    async def move(tr: Any) -> Any:
        runs.append(1)
        value = await source.dequeue(tr)
        if value is not None:
            await destination.enqueue(tr, value)
            before = await fa.wait_future(tr.get(key))
            count = int(before.value or b"0")
            tr.set(key, b"%d" % (count + 1))
        return value

    async def main() -> None:
        await source.enqueue_many(db, range(20))
        target.engine.faults = memory.Faults(not_committed=0.4)
        moved = [await move(db) for _ in range(20)]
        target.engine.faults = memory.Faults()
        assert moved == list(range(20))
        assert await destination.dequeue_many(db, 50) == list(range(20))
        assert await source.empty(db)
        assert await fa.wait_future(db.create_transaction().get(key)) == b"20"

        tr = db.create_transaction()  # given a transaction, nothing is committed
        await source.enqueue(db, "kept")
        assert await move(tr) == "kept"
        assert await source.dequeue(db) == "kept"

    asyncio.run(main())
    assert len(runs) > 20  # conflicts were retried
    assert target.engine.stats()["injected_not_committed"] > 0


def test_transactional_refuses_plain_functions() -> None:
    def plain(tr: Any) -> None:
        pass

    with pytest.raises(TypeError, match="async def"):
        fa.transactional(plain)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="no positional parameter"):
        fa.transactional(parameter="tx")(_async_with_tr)

    async def main() -> None:
        with pytest.raises(TypeError, match="must be a Database"):
            await fa.transactional(_async_with_tr)(object())

    asyncio.run(main())


async def _async_with_tr(tr: Any) -> None:
    pass


@pytest.mark.parametrize("high_contention", [False, True])
def test_concurrent_tasks_take_every_item_exactly_once(
    target: Backend, space: Subspace, high_contention: bool
) -> None:
    db = target.db
    target.engine.latency = memory.Latency(read=0.002)
    queue = fa.Queue(space, high_contention=high_contention)
    producers, per_producer = 4, 25
    taken: list[Any] = []

    async def produce(producer: int) -> None:
        for index in range(per_producer):
            await queue.enqueue(db, (producer, index))

    async def consume() -> None:
        while (value := await queue.dequeue(db, block=True, timeout=0.5)) is not None:
            taken.append(value)

    async def main() -> None:
        await asyncio.gather(*(consume() for _ in range(4)), *map(produce, range(producers)))

    asyncio.run(main())
    expected = {(producer, index) for producer in range(producers) for index in range(per_producer)}
    assert len(taken) == len(expected) and set(taken) == expected


def test_under_faults_async_operations_stay_exactly_once(target: Backend, space: Subspace) -> None:
    db = target.db
    queue = fa.Queue(space)
    taken: list[Any] = []

    async def produce(producer: int) -> None:
        for index in range(15):
            await queue.enqueue(db, (producer, index))

    async def consume(producing: asyncio.Future[Any]) -> None:
        while True:
            value = await queue.dequeue(db, block=True, timeout=0.3)
            if value is not None:
                taken.append(value)
            elif producing.done():
                return

    async def main() -> None:
        target.engine.faults = FAULTS
        producing = asyncio.gather(*map(produce, range(3)))
        await asyncio.gather(producing, *(consume(producing) for _ in range(3)))
        target.engine.faults = memory.Faults()

    asyncio.run(main())
    assert sorted(taken) == [(p, i) for p in range(3) for i in range(15)]
    assert queue.sync.size(db) == 0
    assert target.engine.stats()["injected_commit_unknown_result_applied"] > 0


def test_a_blocked_dequeue_leaves_the_loop_free_and_wakes_on_an_enqueue(
    target: Backend, space: Subspace
) -> None:
    db = target.db
    queue = fa.Queue(space)
    ticks = []

    async def tick() -> None:
        while True:
            ticks.append(1)
            await asyncio.sleep(0.005)

    async def main() -> Any:
        ticker = asyncio.create_task(tick())
        blocked = asyncio.create_task(queue.dequeue(db, block=True, timeout=5))
        await asyncio.sleep(0.1)
        assert not blocked.done()
        assert len(ticks) >= 5  # the loop kept running while the dequeue waited
        await queue.enqueue(db, "from a task")
        value = await asyncio.wait_for(blocked, 2)
        ticker.cancel()
        return value

    assert asyncio.run(main()) == "from a task"


def test_a_blocked_claim_wakes_on_a_synchronous_enqueue_from_another_thread(
    target: Backend, space: Subspace
) -> None:
    db = target.db
    queue = fa.Queue(space)

    async def main() -> Any:
        blocked = asyncio.create_task(queue.claim(db, 30.0, block=True, timeout=5))
        await asyncio.sleep(0.05)
        thread = threading.Thread(target=lambda: queue.sync.enqueue(db, "from a thread"))
        thread.start()
        lease = await asyncio.wait_for(blocked, 2)
        thread.join()
        return lease

    lease = asyncio.run(main())
    assert lease.value == "from a thread"


# -- cancellation -----------------------------------------------------------------------------


@pytest.mark.parametrize("operation", ["dequeue", "claim", "dequeue in line", "pop"])
def test_cancelling_a_blocked_take_raises_and_leaves_no_watch(
    target: Backend, space: Subspace, operation: str
) -> None:
    db = target.db
    queue: Any = fa.Queue(space, high_contention=operation == "dequeue in line")
    if operation == "pop":
        queue = fa.PriorityQueue(space)
    before = target.outstanding_watches()

    def call() -> Any:
        if operation == "claim":
            return queue.claim(db, 30.0, block=True)
        if operation == "pop":
            return queue.pop(db, block=True)
        return queue.dequeue(db, block=True)

    async def main() -> Any:
        blocked = asyncio.create_task(call())
        await asyncio.sleep(0.1)
        assert target.outstanding_watches() == before + 1
        blocked.cancel()
        return await settled(blocked)

    assert asyncio.run(main()) is asyncio.CancelledError
    assert eventually(lambda: target.outstanding_watches() == before)
    assert queue.sync.requests_in_line(db) == 0  # a request in line was withdrawn
    if operation == "pop":
        queue.sync.push(db, "after", 1)
        assert queue.sync.pop(db) == "after"
    else:
        queue.sync.enqueue(db, "after")
        assert queue.sync.dequeue(db) == "after"  # nothing waits to take it any more


def test_cancelling_during_a_read_of_a_blocking_take_raises_at_the_watch_wait(
    target: Backend, space: Subspace
) -> None:
    db = target.db
    queue = fa.Queue(space)
    before = target.outstanding_watches()

    async def main() -> Any:
        target.engine.latency = memory.Latency(read=0.2)
        blocked = asyncio.create_task(queue.dequeue(db, block=True))
        await asyncio.sleep(0.05)  # in the first attempt's read
        blocked.cancel()
        started = time.monotonic()
        outcome = await settled(blocked)
        target.engine.latency = memory.Latency()
        return outcome, time.monotonic() - started

    outcome, waited = asyncio.run(main())
    assert outcome is asyncio.CancelledError
    assert waited < 5
    assert eventually(lambda: target.outstanding_watches() == before)


def test_cancelling_during_a_commit_returns_the_value_taken(
    target: Backend, space: Subspace
) -> None:
    db = target.db
    queue = fa.Queue(space)
    queue.sync.enqueue_many(db, ["first", "second"])

    async def main() -> tuple[Any, bool]:
        target.engine.latency = memory.Latency(commit=0.2)
        taking = asyncio.create_task(queue.dequeue(db))
        await asyncio.sleep(0.1)  # the read is done: the commit is in flight
        assert not taking.done()
        taking.cancel()
        value = await settled(taking)
        target.engine.latency = memory.Latency()
        return value, taking.cancelled()

    value, cancelled = asyncio.run(main())
    assert value == "first"  # the dequeue committed: its value is returned, not lost
    assert not cancelled
    assert queue.sync.dequeue_many(db, 5) == ["second"]


def test_a_cancelled_consumer_session_withdraws_its_requests(
    target: Backend, space: Subspace
) -> None:
    db = target.db
    queue = fa.Queue(space)
    before = target.outstanding_watches()

    async def session(got: list[Any]) -> None:
        async with queue.consumer(db, prefetch=1) as consumer:
            got.append(await consumer.dequeue())
            got.append(await consumer.take(block=True))

    async def main() -> list[Any]:
        await queue.enqueue(db, "one")
        got: list[Any] = []
        task = asyncio.create_task(session(got))
        await asyncio.sleep(0.1)
        assert got == ["one"]
        assert await queue.requests_in_line(db) == 1
        task.cancel()
        assert await settled(task) is asyncio.CancelledError
        return got

    assert asyncio.run(main()) == ["one"]
    assert queue.sync.requests_in_line(db) == 0
    assert eventually(lambda: target.outstanding_watches() == before)

    async def again() -> Any:
        await queue.enqueue(db, "two")
        async with queue.consumer(db) as consumer:
            return await consumer.pop(block=True, timeout=1)

    assert asyncio.run(again()) == "two"
    assert queue.sync.requests_in_line(db) == 0


def test_a_timeout_around_a_blocked_take_ends_it_cleanly(target: Backend, space: Subspace) -> None:
    db = target.db
    queue = fa.Queue(space)
    before = target.outstanding_watches()

    async def main() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(queue.dequeue(db, block=True), 0.1)
        assert await queue.dequeue(db, block=True, timeout=0.05) is None  # the own timeout

    asyncio.run(main())
    assert eventually(lambda: target.outstanding_watches() == before)
    queue.sync.enqueue(db, "after")
    assert queue.sync.dequeue(db) == "after"


def test_memory_waits_hand_over_to_the_loop() -> None:
    db = memory.open()
    db[b"k"] = b"v"
    ticks: list[float] = []

    def sync_waits() -> tuple[int, bytes, int]:
        tr = db.create_transaction()
        tr.get_read_version().wait()
        slow = tr.get(b"k")
        index = memory.Future.wait_for_any(slow)
        retry = tr.on_error(memory.FDBError(1020))
        retries = 0
        while retry.ready_at == 0:  # the backoff grows: some on_error future is delayed
            retry = tr.on_error(memory.FDBError(1020))
            retries += 1
        retry.wait()
        return index, bytes(slow), retries

    async def tick() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.002)

    async def main() -> tuple[int, bytes, int]:
        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0)
        db.latency = memory.Latency(read=0.05)
        try:
            return await bridge.run(sync_waits)
        finally:
            ticker.cancel()

    index, value, _ = asyncio.run(main())
    assert (index, value) == (0, b"v")
    assert len(ticks) >= 10  # the loop ran during the read's latency
