"""Every public method rejects bad input before it writes: the queue's keys stay unchanged."""

from __future__ import annotations

import pytest
from helpers import all_keys

from fdbqueue import PriorityQueue, Queue, memory

TOO_BIG = "x" * 100_001

QUEUE_CALLS = {
    "enqueue None": (lambda q, db: q.enqueue(db, None), ValueError),
    "enqueue too big": (lambda q, db: q.enqueue(db, TOO_BIG), ValueError),
    "enqueue unencodable": (lambda q, db: q.enqueue(db, object()), TypeError),
    "enqueue_many str": (lambda q, db: q.enqueue_many(db, "abc"), TypeError),
    "enqueue_many one bad": (lambda q, db: q.enqueue_many(db, ["ok", None]), ValueError),
    "dequeue_many negative": (lambda q, db: q.dequeue_many(db, -1), ValueError),
    "dequeue_many str": (lambda q, db: q.dequeue_many(db, "2"), TypeError),
    "dequeue negative timeout": (
        lambda q, db: q.dequeue(db, block=True, timeout=-1),
        ValueError,
    ),
    "dequeue block in a transaction": (
        lambda q, db: q.dequeue(db.create_transaction(), block=True),
        TypeError,
    ),
    "dequeue not a database": (lambda q, db: q.dequeue("db"), TypeError),
    "peek_many negative": (lambda q, db: q.peek_many(db, -3), ValueError),
    "claim no lease": (lambda q, db: q.claim(db, lease=None), TypeError),
    "claim zero lease": (lambda q, db: q.claim(db, lease=0), ValueError),
    "ack not a lease": (lambda q, db: q.ack(db, {"id": "x"}), TypeError),
    "requeue negative": (lambda q, db: q.requeue_dead_letters(db, limit=-1), ValueError),
}

PRIORITY_CALLS = {
    "push None": (lambda q, db: q.push(db, None, priority=1), ValueError),
    "push str priority": (lambda q, db: q.push(db, "v", priority="high"), TypeError),
    "push bool priority": (lambda q, db: q.push(db, "v", priority=True), TypeError),
    "push too big": (lambda q, db: q.push(db, TOO_BIG, priority=1), ValueError),
    "pop negative timeout": (lambda q, db: q.pop(db, block=True, timeout=-1), ValueError),
    "pop_max block in a transaction": (
        lambda q, db: q.pop_max(db.create_transaction(), block=True),
        TypeError,
    ),
    "claim bad lease": (lambda q, db: q.claim(db, lease="1s", max=True), TypeError),
    "release not a lease": (lambda q, db: q.release(db, 42), TypeError),
    "peek_many str": (lambda q, db: q.peek_many(db, "all"), TypeError),
}


def loaded(kind, high_contention):
    db = memory.open(faults=None)
    if kind == "queue":
        queue = Queue(("bad-input",), high_contention=high_contention)
        queue.enqueue_many(db, ["a", "b"])
    else:
        queue = PriorityQueue(("bad-input",), high_contention=high_contention)
        queue.push(db, "a", priority=1)
        queue.push(db, "b", priority=2)
    queue.claim(db, lease=30)  # a lease in flight too
    return db, queue


@pytest.mark.parametrize("high_contention", [False, True])
@pytest.mark.parametrize(
    ("kind", "name"),
    [("queue", name) for name in QUEUE_CALLS] + [("priority", name) for name in PRIORITY_CALLS],
)
def test_a_rejected_call_changes_nothing(kind, name, high_contention):
    call, error = (QUEUE_CALLS if kind == "queue" else PRIORITY_CALLS)[name]
    db, queue = loaded(kind, high_contention)
    before = all_keys(db, queue.subspace)
    with pytest.raises(error):
        call(queue, db)
    assert all_keys(db, queue.subspace) == before
