"""The feature record (fdbqueue._storage.features): a feature's first use racing takes, in
real threads, on every queue type and shard count; a clear racing a first use; the record's
bits always cover what the queue holds.

The invariant every test ends on, :func:`assert_bits_cover`: whenever the queue holds a
feature's keys (a delayed record, a group's item, a lease, a job record, the paused key), its
feature record has that feature's bit. A take plans its reads by the bits, so a key without
its bit would never be read by a queue's takes.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import fdb.tuple
import pytest
from helpers import all_keys, pass_time, read

import fdbqueue
from fdbqueue import Subspace, memory
from fdbqueue._storage import features

KINDS = [
    (fdbqueue.Queue, 1),
    (fdbqueue.Queue, 4),
    (fdbqueue.PriorityQueue, 1),
    (fdbqueue.PriorityQueue, 4),
]
IDS = ["Queue-1", "Queue-4", "PriorityQueue-1", "PriorityQueue-4"]

#: Each feature's bit, by the names of the metadata records that hold its keys.
BIT_OF_RECORD = {
    "delayed": features.DELAYS,
    "grouped": features.GROUPS,
    "leases": features.LEASES,
    "jobs": features.JOBS,
    "paused": features.PAUSE,
}


def feature_bits(db: Any, subspace: Subspace) -> int | None:
    """The bits of the queue's feature record (None: no record)."""
    value = read(db, subspace.key() + b"\xff" + fdb.tuple.pack(features.KEY))
    if value is None:
        return None
    return value[1] | value[2] << 8


def assert_bits_cover(db: Any, subspace: Subspace) -> None:
    """Every feature whose keys the queue holds (in any shard) has its bit."""
    bits = feature_bits(db, subspace)
    held = set()
    for key, _value in all_keys(db, subspace):
        metadata = key.find(b"\xff")
        if metadata < 0:
            continue
        try:
            name = fdb.tuple.unpack(key[metadata + 1 :])[0]
        except Exception:  # a key whose rest is not one tuple
            continue
        if name in BIT_OF_RECORD:
            held.add(name)
    if not held:
        return
    assert bits is not None, f"no feature record, yet the queue holds {sorted(held)}"
    for name in held:
        assert bits & BIT_OF_RECORD[name], f"{name} held without its bit ({bits:#x})"


def put(queue: Any, db: Any, value: Any, **kwargs: Any) -> Any:
    if isinstance(queue, fdbqueue.PriorityQueue):
        return queue.push(db, value, 0, **kwargs)
    return queue.enqueue(db, value, **kwargs)


def take(queue: Any, db: Any) -> Any:
    if isinstance(queue, fdbqueue.PriorityQueue):
        return queue.pop_min(db)
    return queue.dequeue(db)


@pytest.mark.parametrize(("kind", "shards"), KINDS, ids=IDS)
@pytest.mark.parametrize("feature", ["delay", "group", "lease", "job"])
def test_a_first_use_racing_takes_loses_nothing(kind: Any, shards: int, feature: str) -> None:
    # Four threads take from a queue that never used a feature while a fifth uses it for the
    # first time, every 5th value: each value is taken exactly once, whichever plan a take
    # made when it began.
    db = memory.open()
    subspace = Subspace(("features", "race", feature))
    # no limit of deliveries: the producer's claims may take a released item again and again
    producer = kind(subspace, shards=shards, max_deliveries=None)
    for value in range(20):
        put(producer, db, ("plain", value))
    consumers = [kind(subspace, shards=shards, max_deliveries=None) for _ in range(4)]
    taken: list[Any] = []
    for consumer in consumers:  # each plans by a record without the feature
        taken.append(tuple(take(consumer, db)))
    lock = threading.Lock()
    done = threading.Event()
    errors: list[BaseException] = []

    def consume(queue: Any) -> None:
        deadline = time.monotonic() + 30  # a queue that never empties fails, not hangs
        try:
            while (not done.is_set() or not queue.empty(db)) and time.monotonic() < deadline:
                value = take(queue, db)
                if value is not None:
                    with lock:
                        taken.append(tuple(value))
        except BaseException as error:  # reported by the test
            errors.append(error)

    def produce() -> None:
        try:
            for value in range(40):
                item = ("used", value)
                if value % 5:
                    put(producer, db, item)
                elif feature == "delay":
                    put(producer, db, item, delay=0.001)
                elif feature == "group":
                    put(producer, db, item, group=value % 3)
                elif feature == "job":
                    if isinstance(producer, fdbqueue.PriorityQueue):
                        producer.submit(db, item, priority=0)
                    else:
                        producer.submit(db, item)
                else:  # a lease, released at once: its item waits for the next take
                    put(producer, db, item)
                    lease = producer.claim(db, 30)
                    if lease is not None:
                        producer.release(db, lease)
        except BaseException as error:  # reported by the test
            errors.append(error)
        finally:
            done.set()

    threads = [threading.Thread(target=consume, args=(queue,)) for queue in consumers]
    threads.append(threading.Thread(target=produce))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    pass_time(db, 1)  # a delayed item not yet due by the wall clock
    while (value := take(consumers[0], db)) is not None:
        taken.append(tuple(value))
    expected = [("plain", v) for v in range(20)] + [("used", v) for v in range(40)]
    assert sorted(taken) == sorted(expected)
    assert feature_bits(db, subspace) is not None
    assert_bits_cover(db, subspace)


@pytest.mark.parametrize(("kind", "shards"), KINDS, ids=IDS)
@pytest.mark.parametrize("feature", ["delay", "group", "lease", "job", "pause"])
def test_a_clear_racing_a_first_use_never_leaves_a_feature_without_its_bit(
    kind: Any, shards: int, feature: str
) -> None:
    # A clear keeps the record's bits (it drops only the type); a first use sets its bit in
    # its own transaction. Whichever commits first, the keys left have their bits.
    for round_ in range(6):
        db = memory.open(seed=round_)
        subspace = Subspace(("features", "clear", feature, round_))
        put(kind(subspace, shards=shards), db, "before")
        race_a_clear(db, kind(subspace, shards=shards), kind(subspace, shards=shards), feature)
        assert_bits_cover(db, subspace)


def race_a_clear(db: Any, queue: Any, other: Any, feature: str) -> None:
    """``queue.clear`` in one thread, ``other``'s first use of ``feature`` in another, let go
    together."""
    start = threading.Barrier(2)

    def clear() -> None:
        start.wait()
        queue.clear(db)

    def use() -> None:
        start.wait()
        if feature == "delay":
            put(other, db, "delayed", delay=30)
        elif feature == "group":
            put(other, db, "grouped", group="g")
        elif feature == "job":
            if isinstance(other, fdbqueue.PriorityQueue):
                other.submit(db, "a job", priority=0)
            else:
                other.submit(db, "a job")
        elif feature == "pause":
            other.pause(db)
        else:
            put(other, db, "leased")
            other.claim(db, 30)

    threads = [threading.Thread(target=clear), threading.Thread(target=use)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)


def test_a_cleared_queue_keeps_its_bits_and_forgets_its_type() -> None:
    db = memory.open()
    subspace = Subspace(("features", "cleared"))
    queue = fdbqueue.Queue(subspace)
    queue.enqueue(db, "x", delay=60)
    assert feature_bits(db, subspace) == features.DELAYS
    queue.clear(db)
    assert feature_bits(db, subspace) == features.DELAYS
    fdbqueue.PriorityQueue(subspace).push(db, "another type", 1)  # the type went
    assert feature_bits(db, subspace) == features.DELAYS


def test_a_queue_written_before_the_record_gets_every_bit_at_its_next_write() -> None:
    db = memory.open()
    subspace = Subspace(("features", "older"))
    queue = fdbqueue.Queue(subspace)
    queue.enqueue(db, "old")
    metadata = subspace.key() + b"\xff"
    db.clear(metadata + fdb.tuple.pack(features.KEY))  # as an older fdbqueue left it
    db[metadata + fdb.tuple.pack(("type",))] = b"Queue"
    db[metadata + fdb.tuple.pack(("codec",))] = b"tuple"
    with pytest.raises(fdbqueue.QueueTypeError):
        fdbqueue.Queue(subspace, codec="json").enqueue(db, [1])
    fresh = fdbqueue.Queue(subspace)
    assert fresh.dequeue(db) == "old"
    fresh.enqueue(db, "new")
    assert feature_bits(db, subspace) == features.ALL


#: A value another program could write: it begins with the bytes that mark a job's value.
LOOKS_LIKE_A_JOB = b"\xfe\x00fdbqueue.job\x00" + bytes(range(16)) + b"the rest"


@pytest.mark.parametrize(("kind", "shards"), KINDS, ids=IDS)
@pytest.mark.parametrize(
    "how", ["take", "take in a transaction", "claim", "take many", "peek", "take in line"]
)
def test_a_queue_that_never_had_a_job_delivers_every_value_whole(
    kind: Any, shards: int, how: str
) -> None:
    """Only a queue whose feature record shows jobs has a job's header to strip: a value that
    merely begins with those bytes reaches a consumer as it was enqueued, byte for byte."""
    db = memory.open(seed=7)
    queue = kind(Subspace(("whole",)), codec="raw", shards=shards)
    put(queue, db, LOOKS_LIKE_A_JOB)
    priority = isinstance(queue, fdbqueue.PriorityQueue)
    if how == "take":
        got = take(queue, db)
    elif how == "take in a transaction":
        tr = db.create_transaction()
        got = queue.pop_min(tr) if priority else queue.dequeue(tr)
        tr.commit().wait()
    elif how == "claim":
        lease = queue.claim(db, 30.0)
        assert lease is not None and lease.job_id is None
        got = lease.value
        queue.ack(db, lease)
    elif how == "take in line":
        in_line = kind(Subspace(("whole",)), codec="raw", shards=shards, high_contention=True)
        got = take(in_line, db)
    elif how == "take many":
        (got,) = queue.pop_many(db, 5) if priority else queue.dequeue_many(db, 5)
    else:
        got = queue.peek(db)
    assert got == LOOKS_LIKE_A_JOB
    assert feature_bits(db, queue.subspace) is not None


@pytest.mark.parametrize(("kind", "shards"), KINDS, ids=IDS)
@pytest.mark.parametrize("how", ["plain", "in a transaction", "many", "group"])
def test_a_queue_that_never_had_a_job_notes_no_job_for_a_value_that_looks_like_one(
    kind: Any, shards: int, how: str
) -> None:
    """A value that merely begins with a job's header, enqueued on a queue without jobs, is
    no job's: its write notes no job's location (a cancel of the job whose id it carries
    would otherwise remove it), and nothing is left behind once it is taken."""
    db = memory.open(seed=7)
    queue = kind(Subspace(("whole",)), codec="raw", shards=shards)
    priority = isinstance(queue, fdbqueue.PriorityQueue)
    if how == "plain":
        put(queue, db, LOOKS_LIKE_A_JOB)
    elif how == "in a transaction":
        tr = db.create_transaction()
        put(queue, tr, LOOKS_LIKE_A_JOB)
        tr.commit().wait()
    elif how == "many":
        if priority:
            pytest.skip("a PriorityQueue pushes one value at a time")
        queue.enqueue_many(db, [LOOKS_LIKE_A_JOB])
    else:
        put(queue, db, LOOKS_LIKE_A_JOB, group="g")
    metadata = queue.subspace.key() + b"\xff"
    located = metadata + fdb.tuple.pack(("job_items",))
    assert db.get_range_startswith(located) == []
    assert take(queue, db) == LOOKS_LIKE_A_JOB
    assert db.get_range_startswith(located) == []


def test_a_claim_of_a_queue_that_never_had_a_group_looks_for_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pay for use: a claim of a queue whose feature record shows no group makes its lease
    without asking which group its item is of; a queue with groups still gets its group."""
    from fdbqueue._storage.groups import Groups

    db = memory.open()
    plain = fdbqueue.Queue(Subspace(("claims", "plain")))
    grouped = fdbqueue.Queue(Subspace(("claims", "grouped")))
    plain.enqueue(db, "a")
    grouped.enqueue(db, "b", group="g")
    asked: list[bytes] = []
    real = Groups.group_of

    def group_of(self: Groups, item_key: bytes) -> Any:
        asked.append(item_key)
        return real(self, item_key)

    monkeypatch.setattr(Groups, "group_of", group_of)
    lease = plain.claim(db, 30.0)
    assert lease is not None and lease.group is None
    assert asked == []
    grouped_lease = grouped.claim(db, 30.0)
    assert grouped_lease is not None and grouped_lease.group == "g"
