"""The queue type recorded in the metadata: opening a queue as the wrong type is an error
that changes nothing (a PriorityQueue written as a Queue would get malformed keys)."""

from __future__ import annotations

import pytest
from helpers import all_keys

from fdbqueue import PriorityQueue, Queue, QueueTypeError, transactional


def test_a_priority_queue_refuses_to_write_into_a_queue(db, subspace):
    Queue(subspace).enqueue(db, "job")
    before = all_keys(db, subspace)
    priority_queue = PriorityQueue(subspace)
    for write in (
        lambda: priority_queue.push(db, "x", 1),
        lambda: priority_queue.push(db, "x", 1, delay=5),
    ):
        with pytest.raises(QueueTypeError, match="holds a Queue, not a PriorityQueue"):
            write()
    assert all_keys(db, subspace) == before


def test_a_queue_refuses_to_write_into_a_priority_queue(db, subspace):
    PriorityQueue(subspace).push(db, "task", 3)
    before = all_keys(db, subspace)
    queue = Queue(subspace)
    for write in (
        lambda: queue.enqueue(db, "x"),
        lambda: queue.enqueue_many(db, ["x", "y"]),
        lambda: queue.enqueue(db, "x", delay=5),
    ):
        with pytest.raises(QueueTypeError, match=r"open it as fdbqueue\.PriorityQueue"):
            write()
    assert all_keys(db, subspace) == before
    assert PriorityQueue(subspace).pop_max(db) == "task"


def test_the_error_is_a_value_error_raised_inside_a_transaction_too(db, subspace):
    PriorityQueue(subspace).push(db, "task", 3)
    queue = Queue(subspace)

    @transactional
    def enqueue_in(tr):
        queue.enqueue(tr, "x")

    with pytest.raises(ValueError):
        enqueue_in(db)


def test_the_first_write_records_the_type_and_clear_forgets_it(db, subspace):
    queue = Queue(subspace)
    queue.enqueue(db, "x")
    with pytest.raises(QueueTypeError):
        PriorityQueue(subspace).push(db, "y", 1)
    queue.clear(db)
    PriorityQueue(subspace).push(db, "y", 1)  # an empty subspace takes any type
    with pytest.raises(QueueTypeError):
        queue.enqueue(db, "z")


def test_requeueing_dead_letters_checks_the_type(db, subspace):
    queue = Queue(subspace)
    queue.enqueue(db, "x")
    queue.dead_letter(db, queue.claim(db, lease=10), "test")
    with pytest.raises(QueueTypeError):
        PriorityQueue(subspace).requeue_dead_letters(db)
    assert queue.requeue_dead_letters(db) == 1


def test_a_queue_written_before_types_were_recorded_takes_its_type_on_the_next_write(db, subspace):
    # items as FoundationDB's recipe writes them, without fdbqueue's metadata
    db[subspace.pack((1, b"r" * 20))] = b"\x02recipe\x00"
    queue = Queue(subspace)
    queue.enqueue(db, "fdbqueue")
    with pytest.raises(QueueTypeError):
        PriorityQueue(subspace).push(db, "x", 1)
    assert [queue.dequeue(db), queue.dequeue(db)] == ["recipe", "fdbqueue"]
