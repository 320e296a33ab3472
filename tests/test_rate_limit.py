"""A rate limit that every worker shares (``Queue(..., rate_limit=(jobs, seconds))``,
docs/jobs.rst "A rate limit"): exact, by the commit versions of the start slots, without
conflicts; jobs it holds back wait, and ``until_empty`` waits for them; ``info()`` says when
it holds jobs back. Time passes by ``pass_time``: the windows here are an hour long.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

import pytest
from helpers import pass_time

import fdbqueue.asyncio as fa
from fdbqueue import PriorityQueue, Queue, Subspace, memory
from fdbqueue._delivery.rate_limit import RateLimit
from fdbqueue._storage.store import metadata_subspace

KINDS = [(False, 1), (False, 4), (True, 1), (True, 4)]
KIND_IDS = ["Queue-1", "Queue-4", "PriorityQueue-1", "PriorityQueue-4"]
HOUR = 3600.0


def test_start_slots_taken_in_many_threads_allow_exactly_the_limit_without_conflicts():
    """Eight threads take slots as fast as they can: five are allowed in the hour, every
    other one is refused with the time to wait, and no transaction conflicts. An hour later,
    five more."""
    db = memory.open()
    limit = RateLimit(metadata_subspace(Subspace(("rate", uuid.uuid4().hex))), 5, HOUR)
    db.reset_stats()
    allowed: list[bytes] = []
    waits: list[float] = []
    lock = threading.Lock()

    def taker() -> None:
        for _ in range(10):
            slot, wait = limit.take(db)
            with lock:
                (allowed.append(slot) if slot is not None else waits.append(wait))

    threads = [threading.Thread(target=taker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(allowed) == 5 and len(waits) == 75
    assert all(0 < wait <= HOUR for wait in waits)
    assert db.stats()["conflicts"] == 0
    pass_time(db, HOUR + 1)
    again = [limit.take(db)[0] for _ in range(7)]
    assert sum(slot is not None for slot in again) == 5


def test_a_slot_given_back_starts_nothing_and_frees_its_place():
    db = memory.open()
    limit = RateLimit(metadata_subspace(Subspace(("rate", uuid.uuid4().hex))), 1, HOUR)
    slot, _ = limit.take(db)
    assert slot is not None and limit.take(db)[0] is None
    limit.give_back(db, slot)
    assert limit.take(db)[0] is not None


def run_worker(queue: Any, db: Any, handler: Any, **options: Any) -> Any:
    options = {"lease": 30, "handle_signals": False, **options}
    if isinstance(queue, (fa.Queue, fa.PriorityQueue)):
        return asyncio.run(queue.work(db, handler, **options))
    return queue.work(db, handler, **options)


#: Every shape, most of them slow (a second of real time each, the worker's look-again).
SHAPES = [
    pytest.param(
        priority,
        shards,
        api,
        id=f"{name}-{api}",
        marks=()
        if (name, api) in (("Queue-1", "sync"), ("PriorityQueue-4", "asyncio"))
        else pytest.mark.slow("a second of real time: the worker looks again every second"),
    )
    for (priority, shards), name in zip(KINDS, KIND_IDS, strict=True)
    for api in ("sync", "asyncio")
]


@pytest.mark.parametrize(("priority", "shards", "api"), SHAPES)
def test_jobs_held_back_wait_and_until_empty_waits_for_them(priority: bool, shards: int, api: str):
    """Three starts an hour: of five jobs, three run and two wait (``info().rate_limited``);
    ``work(until_empty=True)`` does not return while they are left, and runs them once the
    hour has passed."""
    db = memory.open()
    subspace = Subspace(("rate", uuid.uuid4().hex))
    kind: Any = (fa.PriorityQueue if priority else fa.Queue) if api == "asyncio" else None
    sync_kind: Any = PriorityQueue if priority else Queue
    sync = sync_kind(subspace, codec="json", shards=shards, rate_limit=(3, HOUR))
    queue = kind.from_sync(sync) if kind is not None else sync
    assert sync.rate_limit == (3, HOUR)
    for n in range(5):
        if priority:
            sync.submit(db, {"n": n}, priority=0)
        else:
            sync.submit(db, {"n": n})
    started: list[int] = []
    three = threading.Semaphore(0)

    def handle(value: Any) -> None:
        started.append(value["n"])
        three.release()

    summaries: list[Any] = []
    worker = threading.Thread(
        target=lambda: summaries.append(run_worker(queue, db, handle, until_empty=True))
    )
    worker.start()
    for _ in range(3):
        assert three.acquire(timeout=10)
    time.sleep(0.3)  # the worker is held back: nothing more starts
    assert len(started) == 3 and worker.is_alive()
    info = sync.info(db)
    assert info.rate_limited and info.size == 2
    pass_time(db, HOUR + 1)
    worker.join(10)
    assert not worker.is_alive() and summaries[0].succeeded == 5
    assert sorted(started) == [0, 1, 2, 3, 4]
    assert not sync.info(db).rate_limited


def test_two_worker_loops_share_the_limit():
    """Two loops of two threads each, on one queue: four starts in the hour between them."""
    db = memory.open()
    queue = Queue(Subspace(("rate", uuid.uuid4().hex)), codec="json", rate_limit=(4, HOUR))
    for n in range(10):
        queue.enqueue(db, {"n": n})
    started: list[int] = []
    stop = threading.Event()
    loops = [
        threading.Thread(
            target=queue.work,
            args=(db, lambda value: started.append(value["n"])),
            kwargs={"lease": 30, "concurrency": 2, "stop": stop, "handle_signals": False},
        )
        for _ in range(2)
    ]
    for loop in loops:
        loop.start()
    deadline = time.monotonic() + 10
    while len(started) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    stop.set()
    for loop in loops:
        loop.join(10)
    assert len(started) == 4 and queue.size(db) == 6


@pytest.mark.parametrize(
    ("rate_limit", "error"),
    [
        ((0, 1.0), ValueError),
        ((1, 0), ValueError),
        ((1, -1.0), ValueError),
        ((1, 50_000.0), ValueError),
        ((True, 1.0), TypeError),
        ((1.5, 1.0), TypeError),
        ([1, 1.0], TypeError),
        ((1, "1"), TypeError),
        (5, TypeError),
    ],
)
def test_a_bad_rate_limit_is_refused(rate_limit: Any, error: type):
    with pytest.raises(error):
        Queue(Subspace(("rate",)), rate_limit=rate_limit)


def hold_back(db: Any, subspace: Subspace) -> None:
    """Four items on a queue limited to two starts an hour; a worker starts two."""
    queue = Queue(subspace, codec="json", rate_limit=(2, HOUR))
    for n in range(4):
        queue.enqueue(db, {"n": n})
    started: list[int] = []
    stop = threading.Event()
    worker = threading.Thread(
        target=queue.work,
        args=(db, lambda value: started.append(value["n"])),
        kwargs={"lease": 30, "stop": stop, "handle_signals": False},
    )
    worker.start()
    deadline = time.monotonic() + 10
    while len(started) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    worker.join(10)
    assert len(started) == 2


def test_any_queue_object_sees_a_limit_holding_jobs_back():
    """``info().rate_limited`` on a queue object opened without the limit (the dashboard's,
    the command line's) judges by the limit its last start slot was taken under, which the
    feature record says was used; a queue that never had a limit reads nothing for it."""
    from test_features import feature_bits

    from fdbqueue._storage import features

    db = memory.open()
    subspace = Subspace(("rate", uuid.uuid4().hex))
    hold_back(db, subspace)
    viewer = Queue(subspace, codec="json")
    assert viewer.rate_limit is None and viewer.info(db).rate_limited
    plain = Queue(Subspace(("rate", uuid.uuid4().hex)), codec="json")
    plain.enqueue(db, {"n": 0})
    assert not plain.info(db).rate_limited
    # the bit that makes info read the slots: set by the first slot, absent elsewhere
    assert feature_bits(db, subspace) & features.RATE
    assert not feature_bits(db, plain.subspace) & features.RATE
    pass_time(db, HOUR + 1)
    assert not viewer.info(db).rate_limited
