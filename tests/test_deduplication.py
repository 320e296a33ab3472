"""Deduplication records (fdbqueue._delivery.deduplication): an id is admitted once within its
window of versions, again after it; distinct ids never conflict; expired records are cleaned
a few per admitting enqueue, without clearing a record written again; clear() keeps them."""

from __future__ import annotations

import asyncio
import functools
import threading

import fdb.tuple
import pytest
from helpers import TIMED_OUT, all_keys, fault_on, or_timed_out, pass_time, run, run_threads

import fdbqueue.asyncio as fa
from fdbqueue import PriorityQueue, Queue, Subspace, memory
from fdbqueue._delivery.deduplication import (
    CLEANED_PER_ENQUEUE,
    MAX_DEDUP_ID_BYTES,
    Deduplication,
    check_dedup_id,
    check_dedup_window,
)
from fdbqueue._storage.store import ItemStore


def records(seconds: float = 300.0) -> tuple[ItemStore, Deduplication]:
    store = ItemStore(Subspace(("dedup",)), "tuple")
    return store, Deduplication(store, seconds)


def admit(db, deduplication: Deduplication, *ids) -> list[bool]:
    packed = [check_dedup_id(dedup_id) for dedup_id in ids]
    return run(db, lambda tr: deduplication.admit(tr, packed))


def test_an_id_is_admitted_once_within_its_window_and_again_after_it(monkeypatch):
    db = memory.open()
    _store, deduplication = records(seconds=10)
    assert admit(db, deduplication, "job-1") == [True]
    assert admit(db, deduplication, "job-1") == [False]
    assert admit(db, deduplication, "job-2", "job-1", "job-2") == [True, False, False]
    pass_time(db, 11)
    assert admit(db, deduplication, "job-1") == [True]
    assert admit(db, deduplication, "job-1") == [False]


def test_ids_of_every_type_are_distinct():
    db = memory.open()
    _store, deduplication = records()
    assert admit(db, deduplication, "1", b"1", 1) == [True, True, True]


@pytest.mark.parametrize(
    ("dedup_id", "error"),
    [(None, TypeError), (True, TypeError), (1.5, TypeError), ("", ValueError), (b"", ValueError)],
)
def test_bad_ids_are_refused(dedup_id, error):
    with pytest.raises(error):
        check_dedup_id(dedup_id)


def test_an_id_too_long_is_refused_with_its_size():
    with pytest.raises(ValueError, match=str(MAX_DEDUP_ID_BYTES)):
        check_dedup_id("x" * MAX_DEDUP_ID_BYTES)


@pytest.mark.parametrize(
    ("window", "error"),
    [
        (0, ValueError),
        (-1, ValueError),
        (float("nan"), ValueError),
        (10**6, ValueError),
        ("300", TypeError),
    ],
)
def test_bad_windows_are_refused(window, error):
    with pytest.raises(error):
        check_dedup_window(window)


def test_expired_records_are_cleaned_a_few_per_admitting_enqueue(monkeypatch):
    db = memory.open()
    store, deduplication = records(seconds=1)
    old = CLEANED_PER_ENQUEUE + 10
    admit(db, deduplication, *[f"old-{n}" for n in range(old)])
    pass_time(db, 2)
    before = len(all_keys(db, store.deduplication))
    admit(db, deduplication, "new")  # adds an id and its expiry entry, cleans 2 + 16 expired
    after = len(all_keys(db, store.deduplication))
    assert after == before + 2 - 2 * (CLEANED_PER_ENQUEUE + 2)
    for _ in range(5):
        admit(db, deduplication, "new")  # refused: cleans nothing, writes nothing
    assert len(all_keys(db, store.deduplication)) == after


def test_cleaning_keeps_a_record_written_again_after_it_expired(monkeypatch):
    db = memory.open()
    _store, deduplication = records(seconds=1)
    admit(db, deduplication, "again")
    pass_time(db, 2)
    assert admit(db, deduplication, "again") == [True]  # replaces its record and its entry
    assert admit(db, deduplication, "other") == [True]  # cleans nothing of "again"'s new record
    assert admit(db, deduplication, "again") == [False]


def test_enqueues_of_distinct_ids_never_conflict():
    db = memory.open(latency=memory.Latency(commit=0.002))
    _store, deduplication = records(seconds=0.001)  # every record expires: cleaning races too
    counter = iter(range(10_000))
    lock = threading.Lock()

    def producer() -> None:
        for _ in range(20):
            with lock:
                dedup_id = f"id-{next(counter)}"
            assert admit(db, deduplication, dedup_id) == [True]

    run_threads(producer, 6)
    assert db.stats()["conflicts"] == 0


def test_two_enqueues_of_one_id_admit_it_once():
    db = memory.open(latency=memory.Latency(commit=0.002))
    _store, deduplication = records()
    results: list[bool] = []
    lock = threading.Lock()

    def producer() -> None:
        admitted = admit(db, deduplication, "the-same")
        with lock:
            results.extend(admitted)

    run_threads(producer, 6)
    assert sorted(results) == [False] * 5 + [True]


def test_clear_keeps_the_records():
    db = memory.open()
    queue = Queue(Subspace(("dedup",)))
    queue.enqueue(db, "item")
    store, deduplication = records()
    admit(db, deduplication, "kept")
    queue.clear(db)
    assert queue.size(db) == 0
    assert admit(db, deduplication, "kept") == [False]
    assert all_keys(db, store.deduplication)


# -- through Queue.enqueue and enqueue_many -------------------------------------------------


@pytest.mark.parametrize("shards", [1, 4])
def test_enqueue_with_an_id_enqueues_once_and_says_so(shards):
    db = memory.open()
    queue = Queue(Subspace(("jobs", shards)), shards=shards, dedup_window=10)
    assert queue.enqueue(db, "job") is True  # no id: always
    assert queue.enqueue(db, "once", dedup_id="order-42") is True
    assert queue.enqueue(db, "again", dedup_id="order-42") is False
    assert queue.enqueue_many(db, ["x", "y", "z"], dedup_ids=["x", "order-42", "x"]) == [
        True,
        False,
        False,
    ]
    assert sorted(queue.peek_many(db, None)) == ["job", "once", "x"]
    while queue.dequeue(db) is not None:  # taking the items does not forget the ids
        pass
    assert queue.enqueue(db, "again", dedup_id="order-42") is False
    pass_time(db, 11)
    assert queue.enqueue(db, "after the window", dedup_id="order-42") is True
    assert queue.enqueue(db, "delayed", dedup_id="later", delay=5) is True
    assert queue.enqueue(db, "delayed", dedup_id="later", delay=5) is False


def test_bad_ids_and_windows_change_nothing():
    db = memory.open()
    queue = Queue(Subspace(("bad-ids",)))
    with pytest.raises(TypeError):
        queue.enqueue(db, "value", dedup_id=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="2 dedup_ids for 3 values"):
        queue.enqueue_many(db, ["a", "b", "c"], dedup_ids=["a", "b"])
    with pytest.raises(ValueError):
        queue.enqueue_many(db, ["a", "b"], dedup_ids=["a", ""])
    assert queue.size(db) == 0 and all_keys(db, queue.subspace) == []
    with pytest.raises(ValueError):
        Queue(Subspace(("bad-window",)), dedup_window=0)


# -- through PriorityQueue.push --------------------------------------------------------------


@pytest.mark.parametrize("shards", [1, 4])
def test_push_with_an_id_pushes_once_whatever_the_priority_and_says_so(shards):
    db = memory.open()
    tasks = PriorityQueue(Subspace(("tasks", shards)), shards=shards, dedup_window=10)
    assert tasks.push(db, "job", 3) is True  # no id: always
    assert tasks.push(db, "once", 1, dedup_id="task-42") is True
    assert tasks.push(db, "again", 1, dedup_id="task-42") is False
    assert tasks.push(db, "again", -5, dedup_id="task-42") is False  # the queue's id
    assert tasks.push(db, "grouped", 0, dedup_id="task-42", group="g") is False
    assert tasks.push(db, "other", 2, dedup_id=42) is True  # another id (an int)
    assert tasks.peek_many(db, None) == ["once", "other", "job"]
    while tasks.pop_max(db) is not None:  # taking the items does not forget the ids
        pass
    assert tasks.push(db, "again", 1, dedup_id="task-42") is False
    pass_time(db, 9)
    assert tasks.push(db, "again", 7, dedup_id="task-42") is False  # still within it
    pass_time(db, 2)
    assert tasks.push(db, "after the window", 7, dedup_id="task-42") is True
    assert tasks.push(db, "delayed", 0, dedup_id="later", delay=5) is True
    assert tasks.push(db, "delayed", 0, dedup_id="later", delay=5) is False
    assert tasks.peek_many(db, None) == ["after the window"]
    pass_time(db, 6)
    assert [tasks.pop_min(db), tasks.pop_min(db), tasks.pop_min(db)] == [
        "delayed",
        "after the window",
        None,
    ]


def test_a_queue_and_a_priority_queue_keep_the_same_records():
    """The records' layout is the queue's metadata, whatever its type: a Queue and a
    PriorityQueue in distinct subspaces keep distinct ids, in the same keys under each."""
    db = memory.open()
    jobs, tasks = Queue(Subspace(("same", "q"))), PriorityQueue(Subspace(("same", "p")))
    assert jobs.enqueue(db, "job", dedup_id="one") is True
    assert tasks.push(db, "task", 1, dedup_id="one") is True  # another queue: its own ids
    assert dedup_records(db, jobs) == dedup_records(db, tasks) == 1

    def layout(queue) -> list[tuple]:
        """The records' keys under the queue's metadata ``P + b"\\xff"``, versions left out."""
        metadata = queue.subspace.key() + b"\xff"
        found = [
            fdb.tuple.unpack(key[len(metadata) :])
            for key, _value in all_keys(db, queue.subspace)
            if key.startswith(metadata + fdb.tuple.pack(("deduplication",)))
        ]
        return [tuple("version" if isinstance(e, int) else e for e in key) for key in found]

    assert layout(jobs) == layout(tasks)
    assert sorted(layout(tasks)) == [
        ("deduplication", "expiry", "version", "one"),
        ("deduplication", "id", "one"),
    ]


@pytest.mark.parametrize(
    ("dedup_id", "error"),
    [
        (1.5, TypeError),
        (True, TypeError),
        (("a", "tuple"), TypeError),
        ("", ValueError),
        (2**2040, ValueError),
        ("x" * MAX_DEDUP_ID_BYTES, ValueError),
    ],
)
def test_a_push_with_a_bad_id_changes_nothing(dedup_id, error):
    db = memory.open()
    tasks = PriorityQueue(Subspace(("bad-push-ids",)))
    with pytest.raises(error):
        tasks.push(db, "value", 1, dedup_id=dedup_id)
    with pytest.raises(error):
        tasks.push(db, "value", 1, delay=5, dedup_id=dedup_id, group="g")
    assert tasks.size(db) == 0 and all_keys(db, tasks.subspace) == []
    with pytest.raises(ValueError):
        PriorityQueue(Subspace(("bad-window",)), dedup_window=0)
    with pytest.raises(TypeError):
        PriorityQueue(Subspace(("bad-window",)), dedup_window="300")


def test_a_priority_queue_window_in_seconds_holds_across_recoveries():
    db = memory.open()
    tasks = PriorityQueue(Subspace(("push-recoveries",)))
    assert tasks.push(db, "task", 1, dedup_id="task-1") is True
    recover(db, 4)
    assert tasks.push(db, "task again", 2, dedup_id="task-1") is False
    pass_time(db, 301)  # the window passed by both clocks
    assert tasks.push(db, "task later", 2, dedup_id="task-1") is True
    assert tasks.size(db) == 2


@pytest.mark.parametrize("queue_type", ["Queue", "PriorityQueue"])
@pytest.mark.parametrize("kind", ["commit_unknown_result", "timed_out"])
@pytest.mark.parametrize("applied", [True, False])
def test_a_producer_retrying_after_an_unknown_result_or_a_timeout_enqueues_once(
    kind, applied, queue_type
):
    db = memory.open(seed=3)
    if queue_type == "Queue":
        queue = Queue(Subspace(("retrying",)))
        send = functools.partial(queue.enqueue, db, "job", dedup_id="job-1")
    else:
        queue = PriorityQueue(Subspace(("retrying",)))
        send = functools.partial(queue.push, db, "job", 1, dedup_id="job-1")
    with fault_on(kind, applied=applied) as injected:
        first = or_timed_out(send)
    assert injected
    db.settle()  # a commit left in flight lands (or not) now
    again = send()  # the producer sends it again
    assert queue.peek_many(db, None) == ["job"]
    if first is TIMED_OUT:
        assert again is (not applied)
    else:
        assert first is True and again is False  # 1021: the receipt answers for the attempt


def test_the_records_of_an_asyncio_queue_are_the_same():
    queue = fa.Queue(Subspace(("asyncio-dedup",)))
    db = memory.open()

    async def main() -> list[bool]:
        return [
            await queue.enqueue(db, "job", dedup_id="one"),
            await queue.enqueue(db, "job", dedup_id="one"),
            *(await queue.enqueue_many(db, ["a", "b"], dedup_ids=["one", "two"])),
        ]

    assert asyncio.run(main()) == [True, False, False, True]


def test_the_records_of_an_asyncio_priority_queue_are_the_same():
    tasks = fa.PriorityQueue(Subspace(("asyncio-push-dedup",)), dedup_window=10)
    db = memory.open()

    async def main() -> list[bool]:
        return [
            await tasks.push(db, "task", 1, dedup_id="one"),
            await tasks.push(db, "task", 2, dedup_id="one"),
            await tasks.push(db, "task", 2),
        ]

    assert asyncio.run(main()) == [True, False, True]
    assert tasks.sync.push(db, "task", 3, dedup_id="one") is False  # the same records


def dedup_records(db, queue) -> int:
    """The ids a queue remembers (their records, not their expiry entries)."""
    marker = fdb.tuple.pack(("deduplication", "id"))
    return sum(marker in key for key, _value in all_keys(db, queue.subspace))


@pytest.mark.slow("thousands of transactions")
@pytest.mark.parametrize("shards", [1, 4])
def test_records_are_cleaned_as_fast_as_they_are_added(shards):
    """Producers sending ids in batches keep at most about a window's worth of records: each
    admitting enqueue cleans at least twice as many expired records as it adds."""
    db = memory.open()
    queue = Queue(Subspace(("dedup-bound", shards)), dedup_window=0.01, shards=shards)
    batch, batches = 100, 150
    for n in range(batches):
        ids = range(n * batch, (n + 1) * batch)
        assert queue.enqueue_many(db, list(ids), dedup_ids=list(ids)) == [True] * batch
    left = dedup_records(db, queue)
    # a window (0.01 s) holds a few batches: what is left is those, not 15,000 records
    assert left <= 5 * batch, left
    pass_time(db, 1)
    for n in range(left // (2 + CLEANED_PER_ENQUEUE) + 1):  # each cleans 18, adds one
        queue.enqueue(db, n, dedup_id=f"late-{n}")
    assert dedup_records(db, queue) <= left // (2 + CLEANED_PER_ENQUEUE) + 1


def recover(db, times: int) -> None:
    """``times`` cluster recoveries: each moves versions about 100 s on in no time."""
    before = db.stats()["injected_recovery"]
    db.faults = memory.Faults(recovery=1.0, recovery_seconds=0)
    try:
        while db.stats()["injected_recovery"] < before + times:
            tr = db.create_transaction()
            tr.set(b"recovery-scratch", b"x")
            try:
                tr.commit().wait()
            except memory.FDBError as error:
                assert error.code == 1021
    finally:
        db.faults = memory.Faults()


@pytest.mark.parametrize("shards", [1, 4])
def test_a_window_in_seconds_holds_across_recoveries(shards):
    """Three recoveries move versions 300 s on in a moment: an id re-sent then, within its
    300 s window of wall-clock time, is still refused; once the window passed by both
    clocks, it is accepted again."""
    db = memory.open()
    queue = Queue(Subspace(("dedup-recoveries", shards)), shards=shards)
    assert queue.enqueue(db, "order", dedup_id="order-1") is True
    assert queue.enqueue_many(db, ["a", "b"], dedup_ids=["id-a", "id-b"]) == [True, True]
    recover(db, 4)
    assert queue.enqueue(db, "order again", dedup_id="order-1") is False
    assert queue.enqueue_many(db, ["a", "b", "c"], dedup_ids=["id-a", "id-b", "id-c"]) == [
        False,
        False,
        True,
    ]
    assert queue.size(db) == 4
    pass_time(db, 301)  # the window passed by both clocks
    assert queue.enqueue(db, "order later", dedup_id="order-1") is True
