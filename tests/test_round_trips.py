"""Reads that do not depend on each other are sent together: serial round trips per call.

Measured with the in-memory database's latency model (:class:`fdbqueue.memory.Latency`): only
read latency is set (read versions and commits are free), and a read's latency runs from its
issue, so reads issued together overlap; a call's wall time over that latency counts the
reads it waited for one after another. Each queue object is used once first (a fresh object
checks its codec record on its first take), and each count is the fewest of three tries on
fresh databases (a loaded machine only adds to a call's wall time).

* A claim sends its snapshot probe of the first lease with the front's read, as a dequeue
  does, and reads the waiting leases (with their conflict range) only when the probe finds
  one expired: a claim of a plain item waits for 1 read, a claim that finds an expired lease
  for 2 (the probe, then the waiting leases with the held value the probe pointed to).
* A job's record is read by the take or claim of its item. Which job's it is depends on the
  item the front returns, so a queue object's first claim waits for 2 reads; each take or
  claim looks at the item behind the one it took (by snapshot, in the same range read), and
  the next one sends the read of that job's record with the front: 1 read in a loop. When
  another consumer took that item meanwhile, the guess misses: 2 reads, and the right job.
* A job's ack reads its lease and its job record together (the job id is on the Lease): 1;
  an ``ack_many`` of jobs reads every lease and record together: 1.

The probe is a snapshot read: what keeps two claims of one expired lease from both winning
is the read of the waiting leases, with its read conflict range, that follows it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from helpers import raises_fdb_error

import fdbqueue._queues.base
from fdbqueue import Queue, Subspace, memory

READ = 0.1  # seconds per read: 1 serial read is well apart from 2 on a loaded machine
MARGIN = 0.5  # reads: the call's own work and the timer, well under a read's latency
TRIES = 3  # a loaded machine (the suite runs on 2 workers) can slow any one of them


def serial_reads(prepare: Callable[[memory.Database], Callable[[], Any]]) -> float:
    """The fewest reads waited for one after another by the call ``prepare(db)`` returns
    (its wall time over the latency), over :data:`TRIES` fresh databases."""
    counts = []
    for _ in range(TRIES):
        db = memory.open(seed=1)
        call = prepare(db)
        db.latency = memory.Latency(read=READ)
        started = time.monotonic()
        call()
        counts.append((time.monotonic() - started) / READ)
    return min(counts)


def used(db: memory.Database, name: str, *, jobs: bool = False) -> Queue[bytes]:
    """A raw queue holding ``a`` and ``b`` (submitted as jobs with ``jobs``), whose object
    claimed and acknowledged an item once already."""
    queue = Queue(Subspace((name,)), codec="raw")
    for value in (b"o", b"a", b"b"):
        if jobs:
            queue.submit(db, value)
        else:
            queue.enqueue(db, value)
    queue.ack(db, queue.claim(db, 30))
    return queue


def test_a_claim_of_a_plain_item_waits_for_one_read():
    def prepare(db):
        queue = used(db, "claims")
        return lambda: queue.claim(db, 30)

    assert 1 - MARGIN < serial_reads(prepare) < 1 + MARGIN


def test_a_first_claim_of_a_job_waits_for_the_front_then_its_record():
    def prepare(db):
        used(db, "job claims", jobs=True)
        fresh = Queue(Subspace(("job claims",)), codec="raw")
        fresh.peek(db)  # (a fresh object's first look reads its records)
        return lambda: fresh.claim(db, 30)

    assert 2 - MARGIN < serial_reads(prepare) < 2 + MARGIN


@pytest.mark.parametrize("ids", ["random", "with NUL bytes"])
def test_a_claim_of_a_job_after_another_sends_its_record_read_with_the_front(ids, monkeypatch):
    """Also for a job whose id holds ``\x00`` bytes (about 1 id in 22): the read-ahead finds
    the id in the item's key, where the tuple layer escapes each ``\x00`` (so it moves)."""
    if ids == "with NUL bytes":
        counter = iter(range(1, 1 << 16))
        monkeypatch.setattr(
            fdbqueue._queues.base,
            "new_job_id",
            lambda tag: tag + b"\x00\xff\x00" * 3 + next(counter).to_bytes(3, "big"),
        )
    taken: list[Any] = []

    def prepare(db):
        queue = used(db, "job loop", jobs=True)
        assert queue.claim(db, 30).value == b"a"  # b"b" is behind: its record comes next
        taken.append((queue, db))
        return lambda: taken.append(queue.claim(db, 30))

    assert 1 - MARGIN < serial_reads(prepare) < 1 + MARGIN
    (queue, db), lease = taken[-2:]
    assert lease.value == b"b" and queue.job(db, lease.job_id).state == "running"
    if ids == "with NUL bytes":
        assert b"\x00" in bytes.fromhex(lease.job_id)


def paused_once(queue: Queue[bytes], db: memory.Database) -> None:
    queue.pause(db)
    queue.resume(db)


def delays_used(queue: Queue[bytes], db: memory.Database) -> None:
    queue.enqueue(db, b"later", delay=60)


@pytest.mark.parametrize(
    ("shards", "before"),
    [(4, lambda queue, db: None), (1, paused_once), (1, delays_used)],
    ids=["4 shards", "paused once", "delays used"],
)
def test_a_claim_of_a_job_by_the_full_plan_sends_its_record_read_with_the_front(shards, before):
    """A queue whose plan reads more than the front (another shard's leases, the paused key,
    the delayed items' hint) sends the next job's record read with them too."""
    taken: list[Any] = []

    def prepare(db):
        queue = Queue(Subspace(("full plan",)), codec="raw", shards=shards)
        before(queue, db)
        for value in range(3 * shards):  # each shard holds three
            queue.submit(db, b"%d" % value)
        queue.ack(db, queue.claim(db, 30))  # the item behind it: its record comes next
        taken.append((queue, db))
        return lambda: taken.append(queue.claim(db, 30))

    assert 1 - MARGIN < serial_reads(prepare) < 1 + MARGIN
    (queue, db), lease = taken[-2:]
    assert queue.job(db, lease.job_id).state == "running"


def test_a_dequeue_of_a_job_after_another_sends_its_record_read_with_the_front():
    taken: list[Any] = []

    def prepare(db):
        queue = Queue(Subspace(("job takes",)), codec="raw")
        jobs = [queue.submit(db, value) for value in (b"o", b"a", b"b")]
        assert queue.dequeue(db) == b"o"  # b"a" is behind: its record comes next
        taken.append((queue, db, jobs[1]))
        return lambda: taken.append(queue.dequeue(db))

    assert 1 - MARGIN < serial_reads(prepare) < 1 + MARGIN
    (queue, db, job), value = taken[-2:]
    assert value == b"a" and queue.job(db, job.id).state == "succeeded"


def test_a_claim_whose_job_another_consumer_took_waits_for_two_reads_and_gets_its_own():
    def prepare(db):
        queue = used(db, "job race", jobs=True)
        queue.submit(db, b"c")
        assert queue.claim(db, 30).value == b"a"  # it expects b"b" next
        other = Queue(Subspace(("job race",)), codec="raw")
        assert other.claim(db, 30).value == b"b"

        return lambda: leases.append((queue, db, queue.claim(db, 30)))

    leases: list[Any] = []
    assert 2 - MARGIN < serial_reads(prepare) < 2 + MARGIN
    queue, db, lease = leases[-1]
    assert lease.value == b"c" and queue.job(db, lease.job_id).state == "running"


def test_a_change_of_the_record_read_with_the_front_conflicts_with_the_claim():
    """The record read with the front is a snapshot read; the claim adds the read conflict
    that the record's point read adds, so a cancel (or any write of the record) committed
    meanwhile makes the claim retry."""
    db = memory.open(seed=1)
    queue = used(db, "job conflict", jobs=True)
    assert queue.claim(db, 30).value == b"a"
    tr = db.create_transaction()
    lease = queue.claim(tr, 30)  # the record of b"b"'s job was read with the front
    assert lease.value == b"b"
    record_key = queue._store.jobs.key(bytes.fromhex(lease.job_id))
    other = db.create_transaction()
    other[record_key] = other[record_key]  # the same bytes: still a write of the key
    other.commit().wait()
    with raises_fdb_error(1020):
        tr.commit().wait()


@pytest.mark.parametrize("take", ["claim", "dequeue"])
def test_a_take_that_finds_an_expired_lease_reads_the_leases_then_takes_it_first(take):
    def prepare(db):
        queue = used(db, "expired")
        released = queue.claim(db, 30)
        queue.release(db, released)

        def claim():
            lease = queue.claim(db, 30)
            assert (lease.value, lease.deliveries) == (released.value, 2)

        def dequeue():
            assert queue.dequeue(db) == released.value

        return claim if take == "claim" else dequeue

    # the probe with the front, then the waiting leases with the held value
    assert 2 - MARGIN < serial_reads(prepare) < 2 + MARGIN


#: A lease holder's calls, each given the queue, the database and the lease.
HOLDER_CALLS = {
    "ack": lambda queue, db, lease: queue.ack(db, lease),
    "release": lambda queue, db, lease: queue.release(db, lease, error=ValueError("x")),
    "dead_letter": lambda queue, db, lease: queue.dead_letter(db, lease, "gave up"),
}


@pytest.mark.parametrize("call", list(HOLDER_CALLS))
@pytest.mark.parametrize("jobs", [False, True], ids=["item", "job"])
def test_an_ack_waits_for_one_read(jobs, call):
    """An ack, a release and a dead letter read the lease and its job's record together."""

    def prepare(db):
        queue = used(db, "acks", jobs=jobs)
        lease = queue.claim(db, 30)
        return lambda: HOLDER_CALLS[call](queue, db, lease)

    assert 1 - MARGIN < serial_reads(prepare) < 1 + MARGIN


def test_an_ack_of_many_jobs_waits_for_one_read():
    def prepare(db):
        queue = used(db, "acks of jobs", jobs=True)
        leases = queue.claim_many(db, 2, 30)
        return lambda: queue.ack_many(db, leases)

    assert 1 - MARGIN < serial_reads(prepare) < 1 + MARGIN


def test_a_claimed_job_runs_and_an_acknowledged_one_succeeded():
    db = memory.open(seed=1)
    queue = used(db, "acked", jobs=True)
    lease = queue.claim(db, 30)
    assert queue.job(db, lease.job_id).state == "running"
    queue.ack(db, lease)
    assert queue.job(db, lease.job_id).state == "succeeded"


def test_two_claims_of_one_released_lease_never_both_win():
    db = memory.open(seed=1)
    queue = used(db, "race")
    queue.release(db, queue.claim(db, 30))
    first, second = db.create_transaction(), db.create_transaction()
    assert queue.claim(first, 30).value == b"a"
    assert queue.claim(second, 30).value == b"a"  # both found it by their probes
    first.commit().wait()
    with raises_fdb_error(1020):  # the second's read of the waiting leases conflicts
        second.commit().wait()
