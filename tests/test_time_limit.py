"""The worker loop's time limit (``work(..., time_limit=)`` and the queue's ``time_limit``):
past it a hung job is taken back and settled as failed (released with the backoff, or
dead-lettered), its message group goes on, an asyncio handler is cancelled, a thread's
late return is discarded, and a transactional handler's writes never commit. Every case on
Queue and PriorityQueue, of 1 and 4 shards, with threads and with asyncio.

Real threads and real time, small: leases of 1 s, time limits of 0.5 s."""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from helpers import run

import fdbqueue.asyncio as aq
from fdbqueue import PriorityQueue, Queue, Subspace, TimeLimitExceeded, worker
from fdbqueue._delivery.settling import WorkSummary

LEASE = 1.0
LIMIT = 0.5
#: Retries come quickly: the backoff is not what is measured here.
FAST_RETRY: dict[str, Any] = {"backoff": 0.05, "max_backoff": 0.1}

#: The binding's cells (over the in-memory engine, or a cluster) run the same code: CI runs
#: them; a quick run keeps to the in-memory database's.
ON_FDB = pytest.mark.slow("real time, every queue type, shards and loop", backend="fdb")

KINDS = ["queue", "priority"]
SHARDS = [1, 4]
LOOPS = ["threads", "asyncio"]


@pytest.fixture(autouse=True)
def quick_stop(monkeypatch):
    """An idle thread looks at ``stop`` every 0.1 s, not every second: the tests end sooner."""
    monkeypatch.setattr(worker, "STOP_CHECK_SECONDS", 0.1)


def make_queue(kind: str, subspace: Any, shards: int, **options: Any) -> Any:
    if kind == "queue":
        return Queue(subspace, shards=shards, **options)
    return PriorityQueue(subspace, shards=shards, **options)


def put(queue: Any, db: Any, value: str, group: str | None = "g") -> None:
    if isinstance(queue, Queue):
        queue.enqueue(db, value, group=group)
    else:
        queue.push(db, value, 0, group=group)


def run_work(
    loop: str,
    queue: Any,
    db: Any,
    handler: Callable[..., Any],
    done: Callable[[], bool],
    **options: Any,
) -> WorkSummary:
    """``work`` with threads or asyncio until ``done()`` holds (at most 20 s)."""
    if loop == "threads":
        stop = threading.Event()

        def watch() -> None:
            deadline = time.monotonic() + 20
            while not done() and time.monotonic() < deadline:
                time.sleep(0.02)
            stop.set()

        threading.Thread(target=watch, daemon=True).start()
        summary: WorkSummary = queue.work(db, handler, stop=stop, **options)
        return summary

    async def main() -> WorkSummary:
        twin = (aq.Queue if isinstance(queue, Queue) else aq.PriorityQueue).from_sync(queue)
        event = asyncio.Event()

        async def watch() -> None:
            deadline = time.monotonic() + 20
            while not done() and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            event.set()

        watching = asyncio.ensure_future(watch())
        result: WorkSummary = await twin.work(db, handler, stop=event, **options)
        await watching
        return result

    return asyncio.run(main())


class Hang:
    """A handler whose first call on ``"hang"`` hangs: a thread waits for :attr:`release`
    (then returns, late), a coroutine sleeps (and is cancelled). Records every start and
    every completion."""

    def __init__(self, loop: str, coroutine: bool = True) -> None:
        self.starts: list[tuple[str, float]] = []
        self.completions: list[str] = []
        self.cancelled: list[str] = []
        self.release = threading.Event()
        self.hung_thread: threading.Thread | None = None
        self.lock = threading.Lock()
        self.coroutine = loop == "asyncio" and coroutine

    def first(self, value: str) -> bool:
        with self.lock:
            hang = value == "hang" and all(v != "hang" for v, _ in self.starts)
            self.starts.append((value, time.monotonic()))
            return hang

    def done(self, value: str) -> None:
        with self.lock:
            self.completions.append(value)

    def handler(self) -> Callable[[str], Any]:
        if self.coroutine:

            async def handle_async(value: str) -> None:
                if self.first(value):
                    try:
                        await asyncio.sleep(30)
                    except asyncio.CancelledError:
                        self.cancelled.append(value)
                        raise
                self.done(value)

            return handle_async

        def handle(value: str) -> None:
            if self.first(value):
                self.hung_thread = threading.current_thread()
                self.release.wait(20)
            self.done(value)

        return handle

    def started(self, value: str) -> list[float]:
        return [at for v, at in self.starts if v == value]

    def finish_late(self) -> None:
        """Let the hung thread return, and wait for its worker thread to end."""
        self.release.set()
        if self.hung_thread is not None:
            self.hung_thread.join(5)
            assert not self.hung_thread.is_alive()


def assert_nothing_left(queue: Any, db: Any) -> None:
    assert queue.leases(db) == [] and queue.size(db) == 0


@ON_FDB
@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("shards", SHARDS)
@pytest.mark.parametrize("kind", KINDS)
def test_a_hung_job_is_retried_after_the_limit_and_its_group_goes_on(
    db, subspace, kind, shards, loop, caplog
):
    queue = make_queue(kind, subspace, shards)
    put(queue, db, "hang")
    put(queue, db, "next")
    hang = Hang(loop)
    with caplog.at_level(logging.WARNING, logger="fdbqueue.worker"):
        summary = run_work(
            loop,
            queue,
            db,
            hang.handler(),
            lambda: sorted(hang.completions) == ["hang", "next"],
            lease=LEASE,
            time_limit=LIMIT,
            **FAST_RETRY,
        )
        [first, retry] = hang.started("hang")
        [following] = hang.started("next")
        assert LIMIT <= retry - first < LIMIT + 1.0  # taken back at the limit, retried
        assert following - first < LIMIT + 1.0  # the group went on
        assert (summary.timed_out, summary.retried, summary.succeeded) == (1, 1, 2)
        assert summary.dead_lettered == summary.lost == 0
        assert_nothing_left(queue, db)
        assert queue.dead_letters(db) == []
        if loop == "asyncio":
            assert hang.cancelled == ["hang"]  # the coroutine was cancelled
        else:  # the abandoned thread returns late: logged, not acknowledged
            hang.finish_late()
            assert sorted(hang.completions) == ["hang", "hang", "next"]
            assert any("past its time limit" in r.getMessage() for r in caplog.records)
            assert summary.succeeded == 2  # nothing more was acknowledged
            assert_nothing_left(queue, db)
    failures = [r for r in caplog.records if "TimeLimitExceeded" in r.getMessage()]
    assert failures and "time limit exceeded" in failures[0].getMessage()


@ON_FDB
@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("shards", SHARDS)
@pytest.mark.parametrize("kind", KINDS)
def test_a_hung_job_on_its_last_delivery_becomes_a_dead_letter(db, subspace, kind, shards, loop):
    queue = make_queue(kind, subspace, shards, max_deliveries=1)
    put(queue, db, "hang")
    put(queue, db, "next")
    hang = Hang(loop)
    try:
        summary = run_work(
            loop,
            queue,
            db,
            hang.handler(),
            lambda: "next" in hang.completions,
            lease=LEASE,
            time_limit=LIMIT,
        )
    finally:
        hang.finish_late()
    [letter] = queue.dead_letters(db)
    assert letter.value == "hang" and letter.deliveries == 1
    assert "time limit exceeded" in letter.reason and "TimeLimitExceeded" in letter.reason
    [first] = hang.started("hang")
    [following] = hang.started("next")
    assert following - first < LIMIT + 1.0
    assert (summary.timed_out, summary.dead_lettered, summary.succeeded) == (1, 1, 1)
    assert hang.completions.count("next") == 1
    assert_nothing_left(queue, db)


def counter(db: Any, key: bytes) -> int:
    found = run(db, lambda tr: tr[key])
    return int.from_bytes(bytes(found), "little") if found.present() else 0


@ON_FDB
@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("shards", SHARDS)
@pytest.mark.parametrize("kind", KINDS)
def test_a_transactional_handler_past_the_limit_commits_nothing(db, subspace, kind, shards, loop):
    queue = make_queue(kind, subspace, shards)
    effects = Subspace(("fdbqueue-test-effects", uuid.uuid4().hex))
    put(queue, db, "hang")
    put(queue, db, "next")
    calls: list[str] = []
    returned: list[str] = []
    hung: list[threading.Thread] = []

    def handler(tr: Any, value: str) -> None:
        tr.add(effects.pack((value,)), (1).to_bytes(8, "little"))
        first = value == "hang" and "hang" not in calls
        calls.append(value)
        if first:
            hung.append(threading.current_thread())
            # a thread is abandoned and returns late; on asyncio this blocks the loop, and
            # the late return is refused before the commit
            time.sleep(1.2 if loop == "threads" else 0.8)
        returned.append(value)

    try:
        summary = run_work(
            loop,
            queue,
            db,
            handler,
            lambda: returned.count("hang") == 2 and "next" in returned,
            lease=LEASE,
            time_limit=LIMIT,
            transactional=True,
            **FAST_RETRY,
        )
        if loop == "threads":
            hung[0].join(5)  # its late attempt to commit is over
            assert not hung[0].is_alive()
        assert counter(db, effects.pack(("hang",))) == 1  # the retry's, not the late one's
        assert counter(db, effects.pack(("next",))) == 1
        assert (summary.timed_out, summary.retried, summary.succeeded) == (1, 1, 2)
        assert_nothing_left(queue, db)
    finally:
        run(db, lambda tr: tr.clear_range(effects.range().start, effects.range().stop))


@pytest.mark.parametrize("kind", KINDS)
def test_a_plain_asyncio_handler_is_abandoned_in_its_thread_and_its_late_return_discarded(
    db, subspace, kind, caplog
):
    queue = make_queue(kind, subspace, 1)
    put(queue, db, "hang")
    put(queue, db, "next")
    hang = Hang("asyncio", coroutine=False)

    def done() -> bool:
        if sorted(hang.completions) != ["hang", "next"]:
            return False
        # the job was settled without its thread: let it return now (its late return is
        # logged and discarded)
        hang.release.set()
        return True

    with caplog.at_level(logging.WARNING, logger="fdbqueue.worker"):
        summary = run_work(
            "asyncio", queue, db, hang.handler(), done, lease=LEASE, time_limit=LIMIT, **FAST_RETRY
        )
    assert (summary.timed_out, summary.retried, summary.succeeded) == (1, 1, 2)
    # work returns without waiting for the abandoned thread (a daemon thread nothing joins):
    # its late return comes when it comes
    deadline = time.monotonic() + 5
    while len(hang.completions) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(hang.completions) == ["hang", "hang", "next"]
    assert any("past its time limit" in r.getMessage() for r in caplog.records)
    assert_nothing_left(queue, db)


@ON_FDB
@pytest.mark.parametrize("kind", KINDS)
def test_a_new_thread_takes_an_abandoned_slot_up_to_concurrency_abandoned_threads(
    db, subspace, kind
):
    queue = make_queue(kind, subspace, 1)
    for value in ["hang-a", "hang-b", "c"]:
        put(queue, db, value, group=None)
    starts: list[str] = []
    release = threading.Event()

    def handler(value: str) -> None:
        first = value not in starts
        starts.append(value)
        if first and value.startswith("hang"):
            release.wait(20)

    def release_later() -> None:
        time.sleep(LIMIT * 2 + 0.8)  # both hung threads abandoned, and some time more
        release.set()

    threading.Thread(target=release_later, daemon=True).start()
    began = time.monotonic()
    c_at: list[float] = []

    def done() -> bool:
        if "c" in starts and not c_at:
            c_at.append(time.monotonic())
        return all(starts.count(v) >= 2 for v in ["hang-a", "hang-b"]) and "c" in starts

    summary = run_work("threads", queue, db, handler, done, lease=LEASE, time_limit=LIMIT)
    # hang-a's thread was replaced; hang-b's was not (one abandoned thread at most, as
    # concurrency): "c" waited for an abandoned handler to return
    assert starts[:2] == ["hang-a", "hang-b"]
    assert c_at[0] - began >= LIMIT * 2 + 0.7
    assert summary.timed_out == 2 and summary.succeeded == 3
    assert_nothing_left(queue, db)


@ON_FDB
@pytest.mark.parametrize("loop", LOOPS)
def test_the_queues_time_limit_applies_and_works_argument_overrides_it(db, subspace, loop):
    assert make_queue("priority", subspace, 4).time_limit is None  # the default: no limit
    queue = make_queue("queue", subspace, 1, time_limit=LIMIT)
    assert queue.time_limit == LIMIT and aq.Queue.from_sync(queue).time_limit == LIMIT
    put(queue, db, "hang")
    hang = Hang(loop)
    try:
        summary = run_work(
            loop,
            queue,
            db,
            hang.handler(),
            lambda: "hang" in hang.completions,
            lease=LEASE,
            **FAST_RETRY,
        )
    finally:
        hang.finish_late()
    assert summary.timed_out == 1 and summary.succeeded == 1

    put(queue, db, "slow")
    ran: list[str] = []

    def slow(value: str) -> None:
        time.sleep(LIMIT + 0.3)
        ran.append(value)

    summary = run_work(loop, queue, db, slow, lambda: bool(ran), lease=LEASE, time_limit=None)
    assert summary.timed_out == 0 and summary.succeeded == 1


BAD_LIMITS = [
    (0, ValueError),
    (-1, ValueError),
    (math.nan, ValueError),
    (math.inf, ValueError),
    (12 * 3600 + 1, ValueError),
    ("1", TypeError),
    (True, TypeError),
]


@pytest.mark.parametrize(("limit", "error"), BAD_LIMITS)
@pytest.mark.parametrize("loop", LOOPS)
def test_a_bad_time_limit_is_refused_before_anything_runs(db, subspace, loop, limit, error):
    queue = Queue(subspace)
    put(queue, db, "x", group=None)
    with pytest.raises(error, match="time_limit"):
        if loop == "threads":
            queue.work(db, lambda value: None, lease=LEASE, time_limit=limit)
        else:
            asyncio.run(
                aq.Queue.from_sync(queue).work(db, lambda v: None, lease=1, time_limit=limit)
            )
    with pytest.raises(error, match="time_limit"):
        Queue(subspace, time_limit=limit)
    with pytest.raises(error, match="time_limit"):
        aq.PriorityQueue(subspace, time_limit=limit)
    assert queue.dequeue(db) == "x"


def test_time_limit_exceeded_is_a_timeout_error():
    assert issubclass(TimeLimitExceeded, TimeoutError)
