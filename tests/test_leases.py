"""Leases: claim, ack, release, expiry with redelivery, dead letters; errors change nothing."""

from __future__ import annotations

import pytest
from helpers import all_keys, raises_fdb_error

from fdbqueue import (
    DeadLetter,
    Lease,
    LeaseExpiredError,
    LeaseNotHeldError,
    PriorityQueue,
    Queue,
    Subspace,
    memory,
)


@pytest.fixture
def queue(db, subspace):
    queue = Queue(subspace["leased"], max_deliveries=3)
    queue.enqueue_many(db, ["a", "b", "c"])
    return queue


def test_a_claim_takes_the_front_item_into_a_lease(db, queue):
    lease = queue.claim(db, lease=30)
    assert isinstance(lease, Lease)
    assert (lease.value, lease.deliveries) == ("a", 1)
    assert len(lease.id) == 32
    assert queue.size(db) == 2
    assert queue.peek(db) == "b"  # invisible to others while leased
    assert [held.id for held in queue.leases(db)] == [lease.id]


@pytest.mark.memory_only("moves time on with db.advance_time()")
def test_ack_removes_the_item_for_good(db, queue):
    lease = queue.claim(db, lease=1)
    queue.ack(db, lease)
    db.advance_time(2)
    assert queue.leases(db) == []
    assert [queue.claim(db, lease=1).value for _ in range(2)] == ["b", "c"]
    assert queue.claim(db, lease=1) is None


@pytest.mark.memory_only("moves time on with db.advance_time()")
def test_an_expired_lease_is_delivered_again_with_a_higher_count(db, queue):
    first = queue.claim(db, lease=1)
    assert queue.claim(db, lease=1).value == "b"  # not expired yet: the next item
    db.advance_time(1.5)
    again = queue.claim(db, lease=1)
    assert (again.value, again.deliveries) == ("a", 2)  # expired leases come first
    assert again.id != first.id


def test_release_hands_the_item_to_the_next_claim_keeping_its_count(db, queue):
    lease = queue.claim(db, lease=60)
    queue.release(db, lease)
    again = queue.claim(db, lease=60)
    assert (again.value, again.deliveries) == ("a", 2)


def test_acking_twice_raises_and_changes_nothing(db, queue):
    subspace = queue.subspace
    lease = queue.claim(db, lease=1)
    queue.ack(db, lease)
    before = all_keys(db, subspace)
    with pytest.raises(LeaseNotHeldError):
        queue.ack(db, lease)
    with pytest.raises(LeaseNotHeldError):
        queue.release(db, lease)
    assert all_keys(db, subspace) == before


@pytest.mark.memory_only("moves time on with db.advance_time()")
def test_acking_after_expiry_raises_and_changes_nothing(db, queue):
    subspace = queue.subspace
    queue.ack(db, queue.claim(db, lease=1))
    expiring = queue.claim(db, lease=1)
    db.advance_time(1.5)
    before = all_keys(db, subspace)
    with pytest.raises(LeaseExpiredError):
        queue.ack(db, expiring)
    with pytest.raises(LeaseExpiredError):
        queue.release(db, expiring)
    assert all_keys(db, subspace) == before
    assert queue.claim(db, lease=1).value == "b"  # the expired item is delivered again


@pytest.mark.memory_only("moves time on with db.advance_time()")
def test_an_ack_and_a_claim_of_the_same_expired_lease_never_both_win(db, queue):
    lease = queue.claim(db, lease=1)
    acker = db.create_transaction()
    queue.ack(acker, lease)  # checked at a read version before the expiry
    db.advance_time(1.5)
    assert queue.claim(db, lease=1).value == "a"  # redelivered and committed first
    with raises_fdb_error(1020):
        acker.commit().wait()


@pytest.mark.memory_only("moves time on with db.advance_time()")
def test_after_max_deliveries_the_item_becomes_a_dead_letter_and_can_be_requeued(db, queue):
    for delivery in (1, 2, 3):
        lease = queue.claim(db, lease=1)
        assert (lease.value, lease.deliveries) == ("a", delivery)
        db.advance_time(1.5)
    assert queue.claim(db, lease=1).value == "b"  # "a" went to the dead letters
    dead = queue.dead_letters(db)
    assert [(d.value, d.deliveries) for d in dead] == [("a", 3)]
    assert isinstance(dead[0], DeadLetter)
    assert queue.requeue_dead_letters(db) == 1
    assert queue.dead_letters(db) == []
    assert queue.dequeue_many(db, 5) == ["c", "a"]  # "b" is leased; "a" is back at the back


def test_ack_composes_with_the_callers_writes(db, subspace, queue):
    result = subspace.pack(("result",))
    lease = queue.claim(db, lease=30)
    tr = db.create_transaction()
    queue.ack(tr, lease)
    tr[result] = b"processed a"
    tr.cancel()  # nothing committed: still leased, no result
    assert [held.id for held in queue.leases(db)] == [lease.id]
    assert db.get(result) == None  # noqa: E711 - the binding's Value compares equal to None
    tr = db.create_transaction()
    queue.ack(tr, lease)
    tr[result] = b"processed a"
    tr.commit().wait()
    assert queue.leases(db) == []
    assert bytes(db.get(result)) == b"processed a"


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda q, db: q.claim(db, lease=0), ValueError),
        (lambda q, db: q.claim(db, lease=-1), ValueError),
        (lambda q, db: q.claim(db, lease=13 * 3600), ValueError),
        (lambda q, db: q.claim(db, lease="soon"), TypeError),
        (lambda q, db: q.claim(db, lease=True), TypeError),
        (lambda q, db: q.ack(db, "not a lease"), TypeError),
        (lambda q, db: q.release(db, None), TypeError),
        (lambda q, db: q.leases(db, limit=-1), ValueError),
        (lambda q, db: q.dead_letters(db, limit="all"), TypeError),
        (lambda q, db: q.requeue_dead_letters(db, limit=-2), ValueError),
    ],
)
def test_bad_arguments_raise_before_anything_changes(db, queue, call, error):
    before = all_keys(db, queue.subspace)
    with pytest.raises(error):
        call(queue, db)
    assert all_keys(db, queue.subspace) == before


def test_a_lease_of_another_queue_is_refused(db, subspace, queue):
    other = Queue(subspace["other"])
    other.enqueue(db, "x")
    foreign = other.claim(db, lease=30)
    before = all_keys(db, queue.subspace)
    with pytest.raises(ValueError, match="another queue"):
        queue.ack(db, foreign)
    assert all_keys(db, queue.subspace) == before


def test_max_deliveries_is_checked():
    with pytest.raises(ValueError):
        Queue(("q",), max_deliveries=0)
    with pytest.raises(TypeError):
        PriorityQueue(("q",), max_deliveries=1.5)
    Queue(("q",), max_deliveries=None)  # no limit


def test_priority_queue_claims_from_either_end(db, subspace):
    queue = PriorityQueue(subspace)
    for value, priority in [("low", 1), ("high", 9), ("mid", 5)]:
        queue.push(db, value, priority=priority)
    top = queue.claim(db, lease=30, max=True)
    bottom = queue.claim(db, lease=30)
    assert (top.value, bottom.value) == ("high", "low")
    queue.release(db, top)
    assert queue.claim(db, lease=30).value == "high"  # released: claimed first


def test_under_unknown_commit_results_claims_and_acks_take_effect_once():
    db = memory.open(seed=3)
    queue = Queue(Subspace(("eo-leases",)))
    queue.enqueue_many(db, range(40))
    db.faults = memory.Faults(commit_unknown_result=0.3, not_committed=0.1)
    done = []
    while (lease := queue.claim(db, lease=30)) is not None:
        queue.ack(db, lease)  # a retried ack whose first attempt committed must not raise
        done.append(lease.value)
        assert lease.deliveries == 1  # no claim was applied twice
    assert done == list(range(40))
    db.faults = memory.Faults()
    assert queue.leases(db) == []
    assert db.stats()["injected_commit_unknown_result_applied"] > 0


@pytest.mark.memory_only("moves time on with db.advance_time()")
def test_extend_keeps_the_item_leased_past_the_first_expiry(db, queue):
    lease = queue.claim(db, lease=1)
    db.advance_time(0.5)
    longer = queue.extend(db, lease, 10)
    assert (longer.id, longer.deliveries, longer.value) == (lease.id, 1, "a")
    assert longer.expiry_version > lease.expiry_version
    db.advance_time(1)  # past the first expiry, not the new one
    assert queue.claim(db, lease=1).value == "b"  # "a" is still leased
    with pytest.raises(LeaseNotHeldError):
        queue.ack(db, lease)  # the old object is no longer held
    queue.ack(db, longer)
    before = all_keys(db, queue.subspace)
    with pytest.raises(ValueError):
        queue.extend(db, longer, 0)
    with pytest.raises(LeaseNotHeldError):
        queue.extend(db, longer, 5)
    assert all_keys(db, queue.subspace) == before


@pytest.mark.memory_only("moves time on with db.advance_time()")
def test_an_expired_lease_cannot_be_extended(db, queue):
    lease = queue.claim(db, lease=1)
    db.advance_time(1.5)
    with pytest.raises(LeaseExpiredError):
        queue.extend(db, lease, 10)
    assert queue.claim(db, lease=1).value == "a"  # delivered again
