"""Deduplication records (fdbqueue._delivery.deduplication): an id is admitted once within its
window of versions, again after it; distinct ids never conflict; expired records are cleaned
a few per admitting enqueue, without clearing a record written again; clear() keeps them."""

from __future__ import annotations

import threading

import pytest
from helpers import all_keys, run, run_threads

from fdbqueue import Queue, Subspace, memory
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


def test_an_id_is_admitted_once_within_its_window_and_again_after_it():
    db = memory.open()
    _store, deduplication = records(seconds=10)
    assert admit(db, deduplication, "job-1") == [True]
    assert admit(db, deduplication, "job-1") == [False]
    assert admit(db, deduplication, "job-2", "job-1", "job-2") == [True, False, False]
    db.advance_time(11)
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


def test_expired_records_are_cleaned_a_few_per_admitting_enqueue():
    db = memory.open()
    store, deduplication = records(seconds=1)
    admit(db, deduplication, *[f"old-{n}" for n in range(5)])
    db.advance_time(2)
    before = len(all_keys(db, store.deduplication))
    admit(db, deduplication, "new")  # adds an id and its expiry entry, cleans two expired
    after = len(all_keys(db, store.deduplication))
    assert after == before + 2 - 2 * CLEANED_PER_ENQUEUE
    for _ in range(5):
        admit(db, deduplication, "new")  # refused: cleans nothing, writes nothing
    assert len(all_keys(db, store.deduplication)) == after


def test_cleaning_keeps_a_record_written_again_after_it_expired():
    db = memory.open()
    _store, deduplication = records(seconds=1)
    admit(db, deduplication, "again")
    db.advance_time(2)
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
