"""Lease lifetimes hold across recoveries (issue 31): a lease expires when both its read
versions and its wall-clock seconds have passed.

A cluster recovery moves read versions about 100 s on in a moment (upstream's
``MAX_VERSIONS_IN_FLIGHT``); ``db.advance_time`` moves the in-memory database's versions
alone, as a recovery does, and ``helpers.pass_time`` moves both clocks, as time passing does.
Before leases recorded the wall clock, every test here that lets a recovery happen saw the
lease expire at once: its item delivered again while its holder still held it.
"""

from __future__ import annotations

from typing import Any

import fdb.tuple
import helpers
import pytest
from helpers import pass_time, run

from fdbqueue import LeaseNotHeldError, PriorityQueue, Queue, _clock, memory, transactional
from fdbqueue._delivery.leases import LeaseRecord

pytestmark = pytest.mark.memory_only("moves versions alone with db.advance_time()")

#: A recovery's jump of the version clock, in seconds of versions.
RECOVERY = 100.0
SHAPES = [
    pytest.param("queue", 1, id="Queue-1"),
    pytest.param("queue", 4, id="Queue-4"),
    pytest.param("priority", 1, id="PriorityQueue-1"),
    pytest.param("priority", 4, id="PriorityQueue-4"),
]


def make(kind: str, shards: int, subspace: Any, db: Any, values: list[str]) -> Any:
    """A queue of ``kind`` and ``shards`` holding ``values``, in that order."""
    if kind == "queue":
        queue: Any = Queue(subspace, shards=shards)
        queue.enqueue_many(db, values)
    else:
        queue = PriorityQueue(subspace, shards=shards)
        for value in values:
            queue.push(db, value, 1)
    return queue


def read_version(db: Any) -> int:
    return int(run(db, lambda tr: tr.get_read_version().wait()))


@pytest.mark.parametrize(("kind", "shards"), SHAPES)
def test_a_recovery_does_not_expire_a_lease_its_seconds_have_not(db, subspace, kind, shards):
    queue = make(kind, shards, subspace, db, ["a", "b"])
    held = queue.claim(db, lease=30)
    db.advance_time(RECOVERY)  # versions jump, the clock does not
    assert not held.expired(read_version(db))
    again = queue.claim(db, lease=30)
    assert again is not None and again.value != held.value  # the next item, not the held one
    assert queue.info(db).expired_leases == 0
    queue.ack(db, held)  # still held: acknowledged
    queue.ack(db, again)
    assert queue.size(db) == 0 and queue.leases(db) == []


@pytest.mark.parametrize(("kind", "shards"), SHAPES)
def test_a_lease_expires_once_both_clocks_passed_its_seconds(db, subspace, kind, shards):
    queue = make(kind, shards, subspace, db, ["a"])
    held = queue.claim(db, lease=30)
    db.advance_time(RECOVERY)
    assert queue.claim(db, lease=30) is None  # held by its seconds
    pass_time(db, 31)
    again = queue.claim(db, lease=30)
    assert (again.value, again.deliveries) == (held.value, 2)
    with pytest.raises(LeaseNotHeldError):  # delivered again: the old lease is gone
        queue.ack(db, held)


def test_a_fast_client_clock_does_not_shorten_a_lease(db, subspace, monkeypatch):
    """The wall clock alone is not trusted: a lease lasts its versions too."""
    queue = make("queue", 1, subspace, db, ["a"])
    held = queue.claim(db, lease=30)
    # this client's clock runs a minute fast
    monkeypatch.setattr(_clock, "now", lambda: memory.wall_clock() + 60)
    assert queue.claim(db, lease=30) is None
    assert not held.expired(read_version(db))
    queue.extend(db, held, 30)


def test_a_held_lease_can_be_extended_and_released_after_a_recovery(db, subspace):
    queue = make("queue", 1, subspace, db, ["a", "b"])
    held = queue.claim(db, lease=30)
    db.advance_time(RECOVERY)
    extended = queue.extend(db, held, 30)
    assert extended.expiry_time is not None and extended.expiry_time > held.expiry_time
    db.advance_time(RECOVERY)
    queue.release(db, extended, delay=20)  # claimable in 20 s by both clocks
    assert queue.claim(db, lease=30).value == "b"
    db.advance_time(RECOVERY)
    assert queue.claim(db, lease=30) is None
    pass_time(db, 21)
    assert queue.claim(db, lease=30).value == "a"


def test_a_blocking_claim_waits_out_the_seconds_a_recovery_skipped(db, subspace):
    """A blocked claim sleeps until the first lease expires by both clocks: after a recovery,
    it does not wake to deliver a lease still held."""
    queue = make("queue", 1, subspace, db, ["a"])
    queue.claim(db, lease=30)
    db.advance_time(RECOVERY)
    assert queue.claim(db, lease=30, block=True, timeout=0.3) is None


def test_a_recovery_does_not_release_a_held_group_to_plain_takes(db, subspace):
    """A dead holder's group is released to plain takes when its lease expires, and a
    recovery does not make it expire."""
    queue: Queue[Any] = Queue(subspace)
    queue.enqueue_many(db, ["a", "b"], group="g")
    held = queue.claim(db, lease=30)
    assert held.value == "a"
    db.advance_time(RECOVERY)
    assert queue.dequeue(db) is None  # "a" is held, "b" waits for its turn
    pass_time(db, 31)
    assert queue.dequeue(db) == "a"  # the dead holder's item, then its group goes on
    assert queue.dequeue(db) == "b"


def test_a_lease_recorded_without_its_expiry_time_expires_by_versions(db, subspace):
    """Lease records written before the wall clock was recorded (three elements) still
    expire, by their versions alone."""
    queue = make("queue", 1, subspace, db, ["a"])
    held = queue.claim(db, lease=30)

    @transactional
    def strip_expiry_time(tr: Any) -> None:
        item_key, deliveries, held_id, *_times = LeaseRecord.parse(bytes(tr[held.key]))
        tr[held.key] = fdb.tuple.pack((item_key, deliveries, held_id))  # an old tuple record

    strip_expiry_time(db)
    listed = queue.leases(db)
    assert [lease.expiry_time for lease in listed] == [None]
    db.advance_time(31)  # versions only
    again = queue.claim(db, lease=30)
    assert (again.value, again.deliveries) == ("a", 2)


def test_a_claim_after_an_unknown_result_returns_a_lease_a_recovery_left_held(db, subspace):
    """A claim whose commit had an unknown result finds its receipt after the recovery; the
    lease it returns is still held (its seconds have not passed)."""
    queue = make("queue", 1, subspace, db, ["a", "b"])
    db.faults = memory.Faults(recovery=1.0, recovery_seconds=0.0)
    try:
        with helpers.fault_on("commit_unknown_result", applied=True):
            db.advance_time(RECOVERY)
            lease = queue.claim(db, lease=30)
    finally:
        db.faults = memory.Faults()
    assert lease is not None and not lease.expired(read_version(db))
    queue.ack(db, lease)
    assert queue.size(db) == 1
