"""Live workers (fdbqueue._delivery.workers through Queue.workers): every worker loop, sync
and asyncio, registers in its queue's metadata, beats, deregisters when it stops, and drops
out of the listing once its heartbeat lapsed."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time
from typing import Any

import fdb.tuple
import pytest
from helpers import eventually, pass_time, read_range, write

import fdbqueue.asyncio as aq
from fdbqueue import PriorityQueue, Queue, Subspace, WorkerInfo, _clock, memory
from fdbqueue._delivery import workers as registry
from fdbqueue._delivery.workers import Registration

SHAPES = [(kind, shards) for kind in ("queue", "priority") for shards in (1, 4)]
#: Seconds a test waits for a condition that a beat makes true (a beat every 20 ms here).
PATIENCE = 20.0


@pytest.fixture(autouse=True)
def quick_beats(monkeypatch: pytest.MonkeyPatch) -> None:
    """Beats every 20 ms, so that a record follows its loop without a test waiting 5 s; the
    lapse stays 15 s of the core's clock (moved by ``pass_time``)."""
    monkeypatch.setattr(registry, "HEARTBEAT_SECONDS", 0.02)


def make_queue(kind: str, shards: int, name: str) -> Any:
    space = Subspace((name, kind, shards))
    kind_class: Any = PriorityQueue if kind == "priority" else Queue
    return kind_class(space, shards=shards)


def put(db: Any, queue: Any, value: Any) -> None:
    if isinstance(queue, PriorityQueue):
        queue.push(db, value, 1)
    else:
        queue.enqueue(db, value)


def records(db: Any, queue: Any) -> list[tuple[bytes, bytes]]:
    """The worker records as stored (key, value), read raw."""
    prefix = queue.subspace.key() + b"\xff" + fdb.tuple.pack(("workers",))
    return read_range(db, prefix, prefix + b"\xff")


def running_job(db: Any, queue: Any) -> str:
    """The id of the one job running: its lease's."""
    [lease] = queue.leases(db)
    return str(lease.id)


def check_record(info: WorkerInfo, started_by: float) -> None:
    assert info.host == socket.gethostname() and info.pid == os.getpid()
    assert len(info.id) == 32 and int(info.id, 16) >= 0
    assert started_by - 60 < info.started_at <= info.last_seen <= _clock.now()


# -- a running loop is listed, with what it runs -----------------------------------------------


@pytest.mark.parametrize(("kind", "shards"), SHAPES)
def test_a_running_loop_is_listed_with_its_job_then_gone_once_stopped(kind, shards):
    db = memory.open()
    queue = make_queue(kind, shards, "listed")
    put(db, queue, "job")
    started = _clock.now()
    seen: list[WorkerInfo] = []

    def handler(value: str) -> None:
        job = running_job(db, queue)
        [info] = eventually(
            lambda: [w for w in queue.workers(db) if w.running == [job]], "the job listed"
        )
        seen.append(info)

    stop = threading.Event()
    thread = threading.Thread(
        target=queue.work, args=(db, handler), kwargs={"lease": 30, "stop": stop}
    )
    thread.start()
    [done] = eventually(
        lambda: [w for w in queue.workers(db) if w.jobs_done == 1 and not w.running], "job done"
    )
    stop.set()
    thread.join()
    [info] = seen
    check_record(info, started)
    assert info.jobs_done == 0 and done.id == info.id and done.started_at == info.started_at
    assert queue.workers(db) == [] and records(db, queue) == []  # deregistered


@pytest.mark.parametrize(("kind", "shards"), SHAPES)
def test_a_running_asyncio_loop_is_listed_with_its_job_then_gone_once_stopped(kind, shards):
    db = memory.open()
    sync = make_queue(kind, shards, "listed-async")
    queue: Any = (aq.PriorityQueue if kind == "priority" else aq.Queue).from_sync(sync)
    put(db, sync, "job")
    started = _clock.now()

    async def main() -> tuple[WorkerInfo, WorkerInfo]:
        seen: list[WorkerInfo] = []
        stop = asyncio.Event()

        async def handler(value: str) -> None:
            [lease] = await queue.leases(db)
            while not seen:
                seen.extend(w for w in await queue.workers(db) if w.running == [lease.id])
                await asyncio.sleep(0.01)

        async def watch() -> WorkerInfo:
            deadline = time.monotonic() + PATIENCE
            while time.monotonic() < deadline:
                done = [w for w in await queue.workers(db) if w.jobs_done == 1 and not w.running]
                if done:
                    stop.set()
                    return done[0]
                await asyncio.sleep(0.01)
            stop.set()
            pytest.fail("the job never counted as done")

        watching = asyncio.ensure_future(watch())
        await queue.work(db, handler, lease=30, stop=stop, handle_signals=False)
        return seen[0], await watching

    info, done = asyncio.run(main())
    check_record(info, started)
    assert info.jobs_done == 0 and done.id == info.id
    assert sync.workers(db) == [] and records(db, sync) == []
    assert asyncio.run(queue.workers(db)) == []


def test_the_record_is_in_the_queues_own_metadata_not_a_shards():
    db = memory.open()
    queue = Queue(Subspace(("own-metadata",)), shards=4)
    registration = Registration(queue._worker_registry, db, lambda: (0, []))
    assert registration.register()
    [(key, value)] = records(db, queue)
    assert key == queue.subspace.key() + b"\xff" + fdb.tuple.pack(("workers", registration.id))
    form, host, pid, started_at, last_seen, done, running, abandoned = fdb.tuple.unpack(value)
    assert (form, host, pid, done, running) == (1, socket.gethostname(), os.getpid(), 0, ())
    assert abandoned == () and started_at <= last_seen


def test_a_record_written_before_abandoned_handlers_were_kept_reads_with_none():
    db = memory.open()
    queue = Queue(Subspace(("old-record",)))
    now = _clock.now()
    old = fdb.tuple.pack((1, "host-a", 12, now - 3, now, 5, ("ab" * 16,)))
    write(db, {queue._worker_registry.key("c" * 32): old})
    [info] = queue.workers(db)
    assert (info.id, info.host, info.pid, info.jobs_done) == ("c" * 32, "host-a", 12, 5)
    assert info.running == ["ab" * 16] and info.abandoned == []
    later = fdb.tuple.pack((1, "host-b", 13, now - 3, now, 5, (), ("cd" * 16,), "a later field"))
    write(db, {queue._worker_registry.key("d" * 32): later})
    assert [info.abandoned for info in queue.workers(db)] == [[], ["cd" * 16]]


# -- jobs done, two loops ----------------------------------------------------------------------


def test_jobs_done_counts_every_job_ended(caplog):
    caplog.set_level(logging.CRITICAL, "fdbqueue.worker")
    db = memory.open()
    queue = Queue(Subspace(("done",)), max_deliveries=1)
    queue.enqueue_many(db, ["ok", "ok", "fails"])

    def handler(value: str) -> None:
        if value == "fails":
            raise RuntimeError("no")

    stop = threading.Event()
    thread = threading.Thread(
        target=queue.work, args=(db, handler), kwargs={"lease": 30, "stop": stop}
    )
    thread.start()
    eventually(lambda: [w for w in queue.workers(db) if w.jobs_done == 3], "three jobs done")
    assert len(queue.dead_letters(db)) == 1  # a dead-lettered job counts as done too
    stop.set()
    thread.join()


def test_two_loops_are_both_listed_each_with_its_job():
    db = memory.open()
    queue = Queue(Subspace(("two",)))
    queue.enqueue_many(db, ["a", "b"])
    both = threading.Barrier(2, timeout=PATIENCE)
    listed: list[list[WorkerInfo]] = []

    def handler(value: str) -> None:
        both.wait()  # each loop runs one job
        jobs = {lease.id for lease in queue.leases(db)}

        def both_listed() -> list[WorkerInfo]:
            found = queue.workers(db)
            return found if {job for info in found for job in info.running} == jobs else []

        found = eventually(both_listed, "both loops with their jobs")
        listed.append(found)
        both.wait()

    stops = [threading.Event(), threading.Event()]
    threads = [
        threading.Thread(
            target=queue.work,
            args=(db, handler),
            kwargs={"lease": 30, "stop": stop, "handle_signals": False},
        )
        for stop in stops
    ]
    for thread in threads:
        thread.start()
    eventually(lambda: len(listed) == 2, "both handlers saw both loops")
    for stop in stops:
        stop.set()
    for thread in threads:
        thread.join()
    for found in listed:
        assert len(found) == 2 and len({info.id for info in found}) == 2
        assert all(len(info.running) == 1 for info in found)
    assert queue.workers(db) == []


# -- a dead loop drops out -----------------------------------------------------------------------


def test_a_dead_loop_drops_out_after_the_lapse_and_the_next_registration_clears_it():
    db = memory.open()
    queue = Queue(Subspace(("dead",)))
    dead = Registration(queue._worker_registry, db, lambda: (7, ["0" * 32]))
    assert dead.register()  # then it never beats again: its process died
    [info] = queue.workers(db)
    assert (info.id, info.jobs_done, info.running) == (dead.id, 7, ["0" * 32])
    pass_time(db, registry.LAPSE_SECONDS - 1)
    assert [info.id for info in queue.workers(db)] == [dead.id]  # still within the lapse
    pass_time(db, 2)
    assert queue.workers(db) == []
    assert len(records(db, queue)) == 1  # skipped, still stored
    alive = Registration(queue._worker_registry, db, lambda: (0, []))
    assert alive.register()
    assert [info.id for info in queue.workers(db)] == [alive.id]
    assert len(records(db, queue)) == 1  # the dead record cleared


def test_a_live_loop_outlasts_the_lapse_by_beating():
    db = memory.open()
    queue = Queue(Subspace(("outlasts",)))
    stop = threading.Event()
    thread = threading.Thread(
        target=queue.work,
        args=(db, lambda value: None),
        kwargs={"lease": 30, "stop": stop, "handle_signals": False},
    )
    thread.start()
    [first] = eventually(lambda: queue.workers(db), "registered")
    pass_time(db, registry.LAPSE_SECONDS + 5)
    [later] = eventually(lambda: queue.workers(db), "a beat after the lapse")
    assert later.id == first.id and later.last_seen >= first.last_seen + registry.LAPSE_SECONDS
    stop.set()
    thread.join()


def test_a_record_this_version_cannot_read_is_skipped_and_left_alone():
    db = memory.open()
    queue = Queue(Subspace(("unreadable",)))
    stranger = queue._worker_registry.key("newer")
    write(db, {stranger: fdb.tuple.pack((2, "a newer format"))})
    pass_time(db, registry.LAPSE_SECONDS * 2)
    assert queue.workers(db) == []
    assert Registration(queue._worker_registry, db, lambda: (0, [])).register()
    assert stranger in [key for key, _value in records(db, queue)]


def test_a_clear_removes_the_records_and_a_live_loops_comes_back_at_its_next_beat():
    db = memory.open()
    queue = Queue(Subspace(("cleared",)))
    stop = threading.Event()
    thread = threading.Thread(
        target=queue.work,
        args=(db, lambda value: None),
        kwargs={"lease": 30, "stop": stop, "handle_signals": False},
    )
    thread.start()
    [info] = eventually(lambda: queue.workers(db), "registered")
    queue.clear(db)
    [again] = eventually(lambda: queue.workers(db), "back after the clear")
    assert again.id == info.id
    stop.set()
    thread.join()
    assert records(db, queue) == []


def test_a_record_lists_at_most_max_running_listed_jobs():
    db = memory.open()
    queue = Queue(Subspace(("many",)))
    jobs = [f"{n:032x}" for n in range(registry.MAX_RUNNING_LISTED + 5)]
    assert Registration(queue._worker_registry, db, lambda: (0, jobs)).register()
    [info] = queue.workers(db)
    assert info.running == jobs[: registry.MAX_RUNNING_LISTED]


# -- the registry never hurts the loop -----------------------------------------------------------


def test_failed_registry_writes_are_logged_retried_at_the_next_beat_and_fail_no_job(
    monkeypatch, caplog
):
    db = memory.open()
    queue = Queue(Subspace(("failing",)))
    queue.enqueue_many(db, range(3))
    failures = iter(range(3))
    original = registry.WorkerRegistry.write

    def flaky(self: Any, tr: Any, info: WorkerInfo) -> None:
        if next(failures, None) is not None:
            raise memory.FDBError(1031)  # timed out: not retried by the retry loop
        original(self, tr, info)

    monkeypatch.setattr(registry.WorkerRegistry, "write", flaky)
    handled: list[int] = []
    stop = threading.Event()

    def handler(value: int) -> None:
        handled.append(value)

    thread = threading.Thread(
        target=queue.work,
        args=(db, handler),
        kwargs={"lease": 30, "stop": stop, "handle_signals": False},
    )
    with caplog.at_level(logging.WARNING, "fdbqueue.worker"):
        thread.start()
        eventually(lambda: [w for w in queue.workers(db) if w.jobs_done == 3], "a later beat")
        stop.set()
        thread.join()
    assert sorted(handled) == [0, 1, 2] and queue.workers(db) == []
    messages = [r.getMessage() for r in caplog.records if "its record" in r.getMessage()]
    assert any("could not register" in m for m in messages)
    assert sum("could not beat" in m for m in messages) == 2


def test_a_failed_deregistration_is_logged_and_the_loop_still_returns(monkeypatch, caplog):
    db = memory.open()
    queue = Queue(Subspace(("stuck",)))
    queue.enqueue(db, "x")

    def broken(self: Any, tr: Any, worker: str) -> None:
        raise RuntimeError("cluster gone")

    monkeypatch.setattr(registry.WorkerRegistry, "clear", broken)
    with caplog.at_level(logging.WARNING, "fdbqueue.worker"):
        summary = queue.work(db, lambda value: None, lease=30, until_empty=True)
    assert summary.succeeded == 1
    assert any("could not deregister" in r.getMessage() for r in caplog.records)
    assert len(queue.workers(db)) == 1  # left to lapse
    pass_time(db, registry.LAPSE_SECONDS + 1)
    assert queue.workers(db) == []


# -- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["queue", "priority"])
def test_workers_refuses_what_is_not_a_database_in_one_clear_error(kind):
    queue = make_queue(kind, 1, "bad")
    name = type(queue).__name__
    with pytest.raises(TypeError) as error:
        queue.workers("not a db")
    assert str(error.value) == (
        f"{name}.workers(): 'tr' must be a Database, Tenant or Transaction (fdb or "
        "fdbqueue.memory), not builtins.str"
    )
    twin: Any = (aq.PriorityQueue if kind == "priority" else aq.Queue).from_sync(queue)
    with pytest.raises(TypeError, match="must be a Database, Tenant or Transaction"):
        asyncio.run(twin.workers("not a db"))


def test_workers_reads_in_a_transaction_given_one():
    db = memory.open()
    queue = Queue(Subspace(("in-tr",)))
    registration = Registration(queue._worker_registry, db, lambda: (0, []))
    assert registration.register()
    tr = db.create_transaction()
    assert [info.id for info in queue.workers(tr)] == [registration.id]
    assert [info.id for info in queue.workers(tr.snapshot)] == [registration.id]
