"""The queue type recorded in the metadata: opening a queue as the wrong type is an error
that changes nothing (a PriorityQueue written as a Queue would get malformed keys)."""

from __future__ import annotations

import fdb.tuple
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


# -- the codec on record ----------------------------------------------------------------------


def in_session(queue, db, call, prefetch=0):
    with queue.consumer(db, prefetch=prefetch) as consumer:
        return call(consumer)


QUEUE_CALLS = {
    "enqueue": lambda q, db: q.enqueue(db, 1),
    "enqueue delayed": lambda q, db: q.enqueue(db, 1, delay=5),
    "enqueue_many": lambda q, db: q.enqueue_many(db, [1]),
    "dequeue": lambda q, db: q.dequeue(db),
    "dequeue blocking": lambda q, db: q.dequeue(db, block=True, timeout=1),
    "dequeue_many": lambda q, db: q.dequeue_many(db, 5),
    "peek": lambda q, db: q.peek(db),
    "peek_many": lambda q, db: q.peek_many(db, 5),
    "claim": lambda q, db: q.claim(db, 30),
    "claim_many": lambda q, db: q.claim_many(db, 5, 30),
    "session take": lambda q, db: in_session(q, db, lambda c: c.take(), prefetch=2),
    "session claim": lambda q, db: in_session(q, db, lambda c: c.claim(30)),
    "requeue_dead_letters": lambda q, db: q.requeue_dead_letters(db),
    "work": lambda q, db: q.work(db, lambda value: None, lease=30, until_empty=True),
}
PRIORITY_CALLS = {
    "push": lambda q, db: q.push(db, 1, 1),
    "pop": lambda q, db: q.pop(db),
    "pop_max": lambda q, db: q.pop_max(db),
    "peek_min": lambda q, db: q.peek_min(db),
    "peek_max": lambda q, db: q.peek_max(db),
    "claim": lambda q, db: q.claim(db, 30),
    "claim max": lambda q, db: q.claim(db, 30, max=True),
    "claim_many": lambda q, db: q.claim_many(db, 5, 30),
    "session pop": lambda q, db: in_session(q, db, lambda c: c.pop(), prefetch=1),
    "work": lambda q, db: q.work(db, lambda value: None, lease=30, until_empty=True),
}


def state(db, subspace):
    """Every key and value of the queue but its receipts (a session that registered in line
    and withdrew on the error leaves the receipts of those calls, which change nothing)."""
    receipts = subspace.key() + b"\xff" + fdb.tuple.pack(("receipts",))
    return [(key, value) for key, value in all_keys(db, subspace) if not key.startswith(receipts)]


def written_with_json(db, subspace, queue_class):
    """A queue of ``queue_class`` written with the json codec: an item queued, one leased
    (expired, so the next claim would deliver it again) and a dead letter."""
    queue = queue_class(subspace, codec="json")
    put = queue.enqueue_many if queue_class is Queue else lambda tr, vs: queue.push_many(tr, vs, 1)
    if queue_class is PriorityQueue and not hasattr(queue, "push_many"):
        put = lambda tr, vs: [queue.push(tr, v, 1) for v in vs]  # noqa: E731
    put(db, [{"n": 1}, {"n": 2}, {"n": 3}])
    queue.dead_letter(db, queue.claim(db, lease=30), "test")
    queue.release(db, queue.claim(db, lease=30))
    return queue


@pytest.mark.parametrize(
    ("queue_class", "name", "call"),
    [(Queue, name, call) for name, call in QUEUE_CALLS.items()]
    + [(PriorityQueue, name, call) for name, call in PRIORITY_CALLS.items()],
)
@pytest.mark.parametrize("high_contention", [False, True])
def test_opened_with_another_codec_every_operation_refuses_and_changes_nothing(
    db, subspace, queue_class, name, call, high_contention
):
    written_with_json(db, subspace, queue_class)
    before = state(db, subspace)
    wrong = queue_class(subspace, high_contention=high_contention)  # the tuple codec
    with pytest.raises(QueueTypeError, match=r"written with codec 'json'.*opened with 'tuple'"):
        call(wrong, db)
    assert state(db, subspace) == before  # no item moved, not to the dead letters either
    right = queue_class(subspace, codec="json")
    assert len(right.dead_letters(db)) == 1


def test_the_asyncio_queues_refuse_another_codec_too(db, subspace):
    import asyncio

    import fdbqueue.asyncio as fa

    written_with_json(db, subspace, Queue)
    before = state(db, subspace)
    wrong = fa.Queue(subspace)

    async def main():
        for call in (
            lambda: wrong.enqueue(db, 1),
            lambda: wrong.dequeue(db),
            lambda: wrong.claim(db, 30),
            lambda: wrong.peek(db),
            lambda: wrong.work(db, lambda value: None, lease=30, until_empty=True),
        ):
            with pytest.raises(QueueTypeError, match="codec 'json'"):
                await call()

    asyncio.run(main())
    assert state(db, subspace) == before


def test_the_codec_is_recorded_at_the_first_write_and_the_right_one_works(db, subspace):
    Queue(subspace, codec="raw").enqueue(db, b"x")
    with pytest.raises(QueueTypeError, match="open it with codec='raw'"):
        Queue(subspace, codec="json").dequeue(db)
    assert Queue(subspace, codec="raw").dequeue(db) == b"x"


def test_a_queue_recorded_before_codecs_were_is_not_checked(db, subspace):
    queue = Queue(subspace, codec="raw")
    queue.enqueue(db, b"x")
    # as fdbqueue wrote queues before codecs were recorded (and before the feature record)
    db.clear(queue._store.features.key)
    db[queue._store.type_key] = b"Queue"
    Queue(subspace, codec="json").enqueue(db, [1])  # no record, no check (and none recorded)
    assert db[queue._store.codec_key] is None or not db[queue._store.codec_key].present()
    assert Queue(subspace, codec="raw").dequeue(db) == b"x"


class Named:
    name = "reversed-bytes"

    def encode(self, value):
        return bytes(reversed(value))

    def decode(self, data):
        return bytes(reversed(data))


class Unnamed:
    def encode(self, value):
        return bytes(value)

    def decode(self, data):
        return bytes(data)


def test_a_custom_codec_is_recorded_by_its_name_and_one_without_a_name_is_unchecked(db, subspace):
    Queue(subspace, codec=Named()).enqueue(db, b"ab")
    with pytest.raises(QueueTypeError, match="'reversed-bytes'"):
        Queue(subspace, codec="raw").dequeue(db)
    assert Queue(subspace, codec=Unnamed()).peek(db) == b"ba"  # unchecked: its bytes as stored
    assert Queue(subspace, codec=Named()).dequeue(db) == b"ab"


def test_the_worker_ends_with_the_codec_error_instead_of_retrying(db, subspace):
    import threading
    import time

    written_with_json(db, subspace, Queue)
    wrong = Queue(subspace)
    stop = threading.Event()
    timer = threading.Timer(5, stop.set)  # a worker retrying forever would be stopped here
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(QueueTypeError):
            wrong.work(db, lambda value: None, lease=30, stop=stop, handle_signals=False)
    finally:
        timer.cancel()
    assert time.monotonic() - started < 4


def test_a_queue_recreated_with_another_codec_is_refused_not_dead_lettered(db, subspace):
    """A queue object checks the record once; when the queue is cleared and made again
    with another codec by someone else, a value it cannot decode makes it read the record
    again: QueueTypeError, and nothing moves to the dead letters."""
    mine = Queue(subspace, codec="json")
    mine.enqueue(db, {"n": 1})
    assert mine.dequeue(db) == {"n": 1}  # the record checked and remembered
    Queue(subspace).clear(db)
    Queue(subspace).enqueue(db, ("a tuple",))  # recorded with the tuple codec
    before = state(db, subspace)
    with pytest.raises(QueueTypeError, match="written with codec 'tuple'"):
        mine.dequeue(db)
    assert state(db, subspace) == before


@pytest.mark.memory_only("counts reads with db.stats()")
def test_after_the_first_check_a_take_reads_no_codec_record(db, subspace):
    queue = Queue(subspace, high_contention=False)
    queue.enqueue_many(db, ["a", "b", "c"])
    assert queue.dequeue(db) == "a"
    db.reset_stats()
    assert queue.dequeue(db) == "b"
    reads_then = db.stats()["reads"]
    queue.enqueue(db, "d")
    fresh = Queue(subspace)
    db.reset_stats()
    assert fresh.dequeue(db) == "c"
    # only the first take of an object reads more, issued together: the older type and codec
    # records (a queue written before the feature record has only those) and every
    # feature's hints (the object has not read the feature record yet)
    assert db.stats()["reads"] > reads_then
    db.reset_stats()
    assert fresh.dequeue(db) == "d"
    assert db.stats()["reads"] == reads_then


def test_the_asyncio_priority_queue_and_sessions_refuse_another_codec(db, subspace):
    import asyncio

    import fdbqueue.asyncio as fa

    written_with_json(db, subspace, PriorityQueue)
    before = state(db, subspace)
    wrong = fa.PriorityQueue(subspace)

    async def in_async_session(call):
        async with wrong.consumer(db, prefetch=1) as consumer:
            return await call(consumer)

    async def main():
        for call in (
            lambda: wrong.push(db, 1, 1),
            lambda: wrong.pop(db),
            lambda: wrong.pop_max(db),
            lambda: wrong.claim_many(db, 2, 30),
            lambda: wrong.peek_min(db),
            lambda: in_async_session(lambda consumer: consumer.pop()),
            lambda: in_async_session(lambda consumer: consumer.claim(30)),
        ):
            with pytest.raises(QueueTypeError, match="codec 'json'"):
                await call()

    asyncio.run(main())
    assert state(db, subspace) == before


def test_the_asyncio_worker_ends_with_the_codec_error_instead_of_retrying(db, subspace):
    import asyncio
    import time

    import fdbqueue.asyncio as fa

    written_with_json(db, subspace, Queue)
    wrong = fa.Queue(subspace)

    async def main():
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(5, stop.set)  # a loop retrying would stop here
        await wrong.work(db, lambda value: None, lease=30, stop=stop, handle_signals=False)

    started = time.monotonic()
    with pytest.raises(QueueTypeError):
        asyncio.run(main())
    assert time.monotonic() - started < 4
