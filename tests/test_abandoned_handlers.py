"""Handlers abandoned past their time limit (issue 43, items 6 and 7): a worker loop says so
(a WARNING naming each abandoned job in full, and a WARNING while every slot waits for one,
at once and at each beat), lists them in its record (``WorkerInfo.abandoned``) until they
return; with asyncio, a job's time is its handler's own (a coroutine that blocks the event
loop fails no other job), and a hung plain handler does not keep the program from exiting.

Real threads and short time limits (0.1 s); beats every 20 ms; events, not sleeps."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from helpers import eventually

import fdbqueue.asyncio as aq
from fdbqueue import Queue, Subspace, WorkerInfo, memory, worker
from fdbqueue._delivery import workers as registry

LIMIT = 0.1
#: Seconds a test waits at most for what a beat (every 20 ms here) makes true.
PATIENCE = 20.0
ABANDONED = "its handler is abandoned"
WEDGED = "is wedged"


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Beats every 20 ms; an idle thread looks at ``stop`` every 0.1 s."""
    monkeypatch.setattr(registry, "HEARTBEAT_SECONDS", 0.02)
    monkeypatch.setattr(worker, "STOP_CHECK_SECONDS", 0.1)


def warnings_with(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == "fdbqueue.worker" and r.levelno == logging.WARNING and text in r.getMessage()
    ]


class Hung:
    """A handler whose values starting with ``hang`` hang on their first delivery until
    :attr:`release` (then return, late); records what ran and, for plain items, the lease id
    each hung delivery held."""

    def __init__(self, db: Any, queue: Any) -> None:
        self.db, self.queue = db, queue
        self.release = threading.Event()
        self.ran: list[str] = []
        self.leases: dict[str, str] = {}

    def __call__(self, value: str) -> str:
        self.ran.append(value)
        if value.startswith("hang") and self.ran.count(value) == 1:
            [lease] = [lease for lease in self.queue.leases(self.db) if lease.value == value]
            self.leases[value] = lease.id
            self.release.wait(PATIENCE)
        return value


def put(db: Any, queue: Any, kind: str, values: list[str]) -> list[str]:
    """Submit (``job``) or enqueue (``item``) ``values``; the job ids (none for items)."""
    if kind == "item":
        queue.enqueue_many(db, values)
        return []
    return [queue.submit(db, value).id for value in values]


def check_wedged(
    caplog: pytest.LogCaptureFixture, info: WorkerInfo, ids: list[str], concurrency: int = 1
) -> None:
    """``info`` lists ``ids`` abandoned, each named in full by one WARNING, and the loop said
    it is wedged at once and again at its beats (not in a tight loop)."""
    assert info.abandoned == ids and info.running == []
    assert all(re.fullmatch("[0-9a-f]{32}", job) for job in ids)
    said = warnings_with(caplog, ABANDONED)
    assert [[job for job in ids if job in r.getMessage()] for r in said] == [[job] for job in ids]
    assert f"{concurrency} of {concurrency} slots waiting" in said[-1].getMessage()

    def said_thrice() -> list[logging.LogRecord]:
        found = warnings_with(caplog, WEDGED)
        return found if len(found) >= 3 else []

    wedged = eventually(said_thrice, "the wedge said at once and at two beats")
    assert all(all(job in r.getMessage() for job in ids) for r in wedged)
    assert wedged[0].created >= said[-1].created  # said at once, then at each beat:
    assert wedged[2].created - wedged[1].created >= 0.01  # a beat apart


@pytest.mark.parametrize("kind", ["job", "item"])
def test_a_wedged_thread_loop_says_so_and_lists_its_abandoned_handlers(kind, caplog):
    """concurrency=1, two hung handlers past the limit: nothing more runs, and the loop says
    so; once they return, the list empties and the next job runs."""
    caplog.set_level(logging.WARNING, "fdbqueue.worker")
    db = memory.open()
    queue = Queue(Subspace(("wedged", kind)), max_deliveries=1)
    ids = put(db, queue, kind, ["hang-a", "hang-b", "c"])
    hung = Hung(db, queue)
    stop = threading.Event()
    loop = threading.Thread(
        target=queue.work,
        args=(db, hung),
        kwargs={"lease": 30, "time_limit": LIMIT, "stop": stop, "handle_signals": False},
    )
    loop.start()
    try:
        try:
            [info] = eventually(
                lambda: [w for w in queue.workers(db) if len(w.abandoned) == 2], "both listed"
            )
            expected = ids[:2] if kind == "job" else [hung.leases[v] for v in ("hang-a", "hang-b")]
            check_wedged(caplog, info, expected)
            assert "c" not in hung.ran  # wedged: it runs nothing
        finally:
            hung.release.set()
        eventually(
            lambda: [w for w in queue.workers(db) if not w.abandoned and w.jobs_done == 3],
            "the abandoned handlers returned, the list emptied and c ran",
        )
    finally:
        stop.set()
        loop.join(PATIENCE)
    assert hung.ran == ["hang-a", "hang-b", "c"]
    assert len(queue.dead_letters(db)) == 2  # both settled at their limit, without them
    assert len(warnings_with(caplog, "past its time limit of 0.1s; the job was settled")) == 2


def test_one_abandoned_handler_of_two_slots_is_listed_but_not_wedged(caplog):
    caplog.set_level(logging.WARNING, "fdbqueue.worker")
    db = memory.open()
    queue = Queue(Subspace(("not-wedged",)), max_deliveries=1)
    [job, _] = put(db, queue, "job", ["hang", "next"])
    hung = Hung(db, queue)
    stop = threading.Event()
    loop = threading.Thread(
        target=queue.work,
        args=(db, hung),
        kwargs={
            "lease": 30,
            "time_limit": LIMIT,
            "stop": stop,
            "concurrency": 2,
            "handle_signals": False,
        },
    )
    loop.start()
    try:
        [info] = eventually(
            lambda: [w for w in queue.workers(db) if w.abandoned and w.jobs_done == 2],
            "listed, the other job done",
        )
        assert info.abandoned == [job]
        [said] = warnings_with(caplog, ABANDONED)
        assert job in said.getMessage() and "0 of 2 slots" in said.getMessage()
        assert warnings_with(caplog, WEDGED) == []
    finally:
        hung.release.set()
        stop.set()
        loop.join(PATIENCE)


@pytest.mark.parametrize("handler_kind", ["def", "async def"])
def test_a_wedged_asyncio_loop_says_so_and_lists_its_abandoned_handlers(handler_kind, caplog):
    """With asyncio, the same rule: a plain handler's thread is abandoned (at most
    ``concurrency`` of them go on), a coroutine that does not end when cancelled holds its
    task."""
    caplog.set_level(logging.WARNING, "fdbqueue.worker")
    db = memory.open()
    sync = Queue(Subspace(("wedged-async", handler_kind)), max_deliveries=1)
    hanging = ["hang-a", "hang-b"] if handler_kind == "def" else ["hang-a"]
    ids = put(db, sync, "job", [*hanging, "c"])
    queue = aq.Queue.from_sync(sync)
    hung = Hung(db, sync)

    async def ignores_its_cancellation(value: str) -> str:
        hung.ran.append(value)
        if value.startswith("hang"):
            try:
                await asyncio.sleep(PATIENCE)
            except asyncio.CancelledError:
                while not hung.release.is_set():
                    await asyncio.sleep(0.01)
        return value

    handler = hung if handler_kind == "def" else ignores_its_cancellation

    async def main() -> None:
        stop = asyncio.Event()
        work = asyncio.ensure_future(
            queue.work(db, handler, lease=30, time_limit=LIMIT, stop=stop, handle_signals=False)
        )

        async def listed(condition: Callable[[WorkerInfo], bool]) -> WorkerInfo:
            deadline = time.monotonic() + PATIENCE
            while time.monotonic() < deadline:
                found = [w for w in await queue.workers(db) if condition(w)]
                if found:
                    return found[0]
                await asyncio.sleep(0.01)
            pytest.fail("never listed")

        try:
            try:
                info = await listed(lambda w: len(w.abandoned) == len(hanging))
                await asyncio.to_thread(check_wedged, caplog, info, ids[: len(hanging)])
                assert "c" not in hung.ran  # wedged: it runs nothing
            finally:
                hung.release.set()
            await listed(lambda w: not w.abandoned and w.jobs_done == len(hanging) + 1)
        finally:
            stop.set()
            await work

    asyncio.run(main())
    assert hung.ran == [*hanging, "c"]
    assert len(warnings_with(caplog, "past its time limit of 0.1s; the job was settled")) == len(
        hanging
    )


@pytest.mark.parametrize("order", [("block", "quick"), ("quick", "block")])
def test_a_coroutine_that_blocks_the_loop_fails_no_other_job(order):
    """The research's repro, shortened: "block" blocks the event loop past the limit, "quick"
    returns at once; only "block" dies of its limit (before: both did)."""
    db = memory.open()
    sync = Queue(Subspace(("blocking", *order)), max_deliveries=1)
    jobs = dict(zip(order, put(db, sync, "job", list(order)), strict=True))

    async def handler(value: str) -> str:
        if value == "block":
            time.sleep(LIMIT * 4)  # the user's bug: blocks the event loop
        return value

    summary = asyncio.run(
        aq.Queue.from_sync(sync).work(
            db,
            handler,
            lease=30,
            concurrency=2,
            time_limit=LIMIT,
            until_empty=True,
            handle_signals=False,
        )
    )
    assert sync.job(db, jobs["quick"]).state == "succeeded"
    assert sync.result(db, jobs["quick"]) == "quick"
    assert sync.job(db, jobs["block"]).state == "dead"  # its own time was past the limit
    assert (summary.succeeded, summary.dead_lettered, summary.timed_out) == (1, 1, 1)


def test_a_hung_plain_asyncio_handler_lets_the_program_exit(tmp_path):
    """``asyncio.run(q.work(..., until_empty=True, time_limit=...))`` with a plain handler
    that never returns: ``work`` returns, and so does ``asyncio.run``, and the process exits
    (before: ``asyncio.run`` waited for the default executor's thread for ever)."""
    script = tmp_path / "hung.py"
    script.write_text(
        textwrap.dedent(
            """
            import asyncio, threading
            import fdbqueue.asyncio as aq
            from fdbqueue import Subspace, memory

            db = memory.open()
            queue = aq.Queue(Subspace(("hung",)), max_deliveries=1)

            def handle(value):
                if value == "hang":
                    threading.Event().wait()  # for ever
                return value

            async def main():
                await queue.enqueue_many(db, ["hang", "ok"])
                return await queue.work(db, handle, lease=30, until_empty=True, time_limit=0.1)

            summary = asyncio.run(main())
            print("returned", summary.succeeded, summary.dead_lettered, flush=True)
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=30, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["returned", "1", "1"]
