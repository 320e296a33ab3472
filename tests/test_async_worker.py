"""The asyncio worker loop (fdbqueue.asyncio._worker through fdbqueue.asyncio.Queue.work): ack,
retry, dead letters, heartbeat, shutdown, cancellation, signals and faults."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from typing import Any

import pytest
from helpers import despite_timeouts

import fdbqueue.asyncio as aq
from fdbqueue import Subspace, memory


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


async def set_when(condition: Any, event: asyncio.Event, limit: float = 20.0) -> None:
    deadline = time.monotonic() + limit
    while not await condition() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    event.set()


@pytest.mark.parametrize("kind", ["queue", "priority"])
def test_every_item_is_handled_and_acknowledged(db, subspace, kind):
    async def main() -> None:
        if kind == "queue":
            queue: Any = aq.Queue(subspace)
            await queue.enqueue_many(db, range(20))
        else:
            queue = aq.PriorityQueue(subspace)
            for value in range(20):
                await queue.push(db, value, priority=value % 3)
        handled: list[int] = []

        async def handler(value: int) -> None:
            await asyncio.sleep(0)
            handled.append(value)

        summary = await queue.work(db, handler, lease=10, concurrency=4, until_empty=True)
        assert sorted(handled) == list(range(20)) and summary.succeeded == 20
        assert await queue.leases(db) == [] and await queue.size(db) == 0

    run(main())


def test_retry_with_backoff_then_dead_letter(db, subspace):
    async def main() -> None:
        queue = aq.Queue(subspace, max_deliveries=3)
        await queue.enqueue_many(db, ["flaky", "broken"])
        calls: dict[str, int] = {}

        async def handler(value: str) -> None:
            calls[value] = calls.get(value, 0) + 1
            if value == "broken" or calls[value] == 1:
                raise ValueError(f"{value} failed")

        stop = asyncio.Event()

        async def finished() -> bool:
            return calls.get("flaky", 0) == 2 and bool(await queue.dead_letters(db))

        watcher = asyncio.ensure_future(set_when(finished, stop))
        summary = await queue.work(db, handler, lease=10, stop=stop, backoff=0.01, max_backoff=0.02)
        await watcher
        assert calls == {"flaky": 2, "broken": 3}
        assert (summary.succeeded, summary.retried, summary.dead_lettered) == (1, 3, 1)
        [letter] = await queue.dead_letters(db)
        assert letter.value == "broken" and "ValueError: broken failed" in letter.reason

    run(main())


def test_a_long_job_keeps_its_lease_through_the_heartbeat(db, subspace):
    async def main() -> None:
        queue = aq.Queue(subspace)
        await queue.enqueue(db, "long")
        others: list[Any] = []

        async def handler(value: str) -> None:
            for _ in range(12):  # 1.2 s: four leases
                others.append(await queue.claim(db, lease=5))
                await asyncio.sleep(0.1)

        summary = await queue.work(db, handler, lease=0.3, until_empty=True)
        assert summary.succeeded == 1 and summary.lost == 0
        assert all(other is None for other in others)

    run(main())


def test_a_plain_function_handler_runs_off_the_loop(db, subspace):
    async def main() -> None:
        queue = aq.Queue(subspace)
        await queue.enqueue(db, "job")
        threads: list[int] = []

        def handler(value: str) -> None:
            threads.append(threading.get_ident())
            time.sleep(0.05)  # would block the loop if run on it

        summary = await queue.work(db, handler, lease=10, until_empty=True)
        assert summary.succeeded == 1 and threads[0] != threading.get_ident()

    run(main())


def test_stop_cancels_a_waiting_claim_and_lets_a_running_job_finish(db, subspace):
    async def main() -> None:
        engine_watches = watches(db)
        queue = aq.Queue(subspace)
        await queue.enqueue(db, "a")
        stop = asyncio.Event()
        finished = []

        async def handler(value: str) -> None:
            stop.set()  # asked to stop while this job runs
            await asyncio.sleep(0.2)
            finished.append(value)

        started = time.monotonic()
        summary = await queue.work(db, handler, lease=10, concurrency=3, stop=stop)
        assert time.monotonic() - started < 2  # the idle claims did not wait their timeouts
        assert finished == ["a"] and summary.succeeded == 1
        assert await queue.leases(db) == []
        if engine_watches is not None:
            assert watches(db) == engine_watches  # no watch left behind

    run(main())


def test_cancelling_work_releases_the_items_of_running_jobs(db, subspace):
    async def main() -> None:
        queue = aq.Queue(subspace)
        await queue.enqueue(db, "job")
        running = asyncio.Event()

        async def handler(value: str) -> None:
            running.set()
            await asyncio.sleep(60)

        task = asyncio.ensure_future(queue.work(db, handler, lease=30))
        await running.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        lease = await queue.claim(db, lease=10)
        assert lease is not None and lease.value == "job"  # released, not left to expire

    run(main())


def test_sigterm_sets_stop_through_the_loop(db, subspace):
    async def main() -> None:
        queue = aq.Queue(subspace)
        await queue.enqueue(db, "x")
        asyncio.get_running_loop().call_later(0.3, os.kill, os.getpid(), signal.SIGTERM)
        summary = await queue.work(db, lambda value: None, lease=10)
        assert summary.succeeded == 1

    before = signal.getsignal(signal.SIGTERM)
    run(main())
    assert signal.getsignal(signal.SIGTERM) == before


def test_under_faults_every_item_is_handled():
    db = memory.open(
        seed=43,
        faults=memory.Faults(not_committed=0.05, commit_unknown_result=0.1, timed_out=0.05),
    )
    queue = aq.Queue(Subspace(("async-worker-faults",)), max_deliveries=None)
    despite_timeouts(lambda: queue.sync.enqueue_many(db, range(30)))
    handled: set[int] = set()

    async def main() -> None:
        async def handler(value: int) -> None:
            if value % 7 == 0 and value not in failed:
                failed.add(value)
                raise RuntimeError("first delivery fails")
            handled.add(value)

        failed: set[int] = set()
        stop = asyncio.Event()

        async def done() -> bool:
            return len(handled) == 30

        watcher = asyncio.ensure_future(set_when(done, stop))
        await queue.work(db, handler, lease=10, concurrency=3, stop=stop, backoff=0.01)
        await watcher

    run(main())
    db.faults = memory.Faults()
    db.settle()
    assert handled == set(range(30))
    assert queue.sync.claim(db, lease=1) is None and queue.sync.leases(db) == []


@pytest.mark.parametrize(
    "arguments",
    [{"lease": 0}, {"concurrency": 0}, {"stop": object()}, {"backoff": -1}],
)
def test_bad_arguments_are_refused(db, subspace, arguments):
    queue = aq.Queue(subspace)
    call = {"lease": 10, **arguments}
    with pytest.raises((TypeError, ValueError)):
        run(queue.work(db, lambda value: None, **call))


def watches(db: Any) -> int | None:
    """Watches the in-memory engine behind ``db`` holds (None when it is not reachable)."""
    count = getattr(db, "outstanding_watches", None)
    return None if count is None else int(count())


def test_until_empty_returns_once_every_failed_item_was_retried_to_an_end(db, subspace):
    """New-user finding 3, with tasks."""
    queue = aq.Queue(subspace, max_deliveries=3)
    queue.sync.enqueue_many(db, ["a", "b", "poison"])
    failed: set[Any] = set()

    async def handler(value: Any) -> None:
        if value == "poison" or value not in failed:
            failed.add(value)
            raise RuntimeError(f"try of {value}")

    async def main() -> Any:
        return await queue.work(
            db, handler, lease=10, concurrency=2, backoff=0.1, max_backoff=0.2, until_empty=True
        )

    summary = run(main())
    assert (summary.succeeded, summary.dead_lettered) == (2, 1)
    assert queue.sync.leases(db) == [] and queue.sync.empty(db)
    assert [letter.value for letter in queue.sync.dead_letters(db)] == ["poison"]


@pytest.mark.parametrize("concurrency", [0, -3])
def test_concurrency_below_one_is_refused(db, subspace, concurrency):
    async def main() -> Any:
        return await aq.Queue(subspace).work(db, print, lease=10, concurrency=concurrency)

    with pytest.raises(ValueError, match="concurrency must be >= 1"):
        run(main())


def test_until_empty_waits_for_items_failing_to_their_dead_letters(db, subspace):
    queue = aq.Queue(subspace, max_deliveries=2)
    queue.sync.enqueue(db, "poison job")

    async def always_fails(value: Any) -> None:
        raise ValueError("never works")

    async def main() -> Any:
        return await queue.work(
            db, always_fails, lease=10, backoff=0.1, handle_signals=False, until_empty=True
        )

    summary = run(main())
    assert (summary.retried, summary.dead_lettered) == (1, 1)
    assert [letter.value for letter in queue.sync.dead_letters(db)] == ["poison job"]


def test_a_backoff_above_the_release_cap_is_capped(db, subspace):
    """Finding 4, with tasks: a backoff over 12 hours crashed the loop at the first failure."""
    queue = aq.Queue(subspace)
    queue.sync.enqueue(db, "x")

    async def main() -> Any:
        stop = asyncio.Event()

        async def fail_then_stop(value: Any) -> None:
            stop.set()
            raise RuntimeError("fails")

        return await queue.work(
            db,
            fail_then_stop,
            lease=10,
            backoff=100_000,
            max_backoff=100_000,
            stop=stop,
            handle_signals=False,
        )

    summary = run(main())
    assert summary.retried == 1
    [lease] = queue.sync.leases(db)
    read_version = db.create_transaction().get_read_version().wait()
    assert lease.expiry_version - read_version <= 12 * 3600 * 1_000_000
