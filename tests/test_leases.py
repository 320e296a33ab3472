"""Leases: claim, ack, release, expiry with redelivery, dead letters; errors change nothing."""

from __future__ import annotations

import threading
import time

import pytest
from helpers import PoisonCodec, all_keys, despite_timeouts, pass_time, raises_fdb_error

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
    pass_time(db, 2)
    assert queue.leases(db) == []
    assert [queue.claim(db, lease=1).value for _ in range(2)] == ["b", "c"]
    assert queue.claim(db, lease=1) is None


@pytest.mark.memory_only("moves time on with db.advance_time()")
def test_an_expired_lease_is_delivered_again_with_a_higher_count(db, queue):
    first = queue.claim(db, lease=1)
    assert queue.claim(db, lease=1).value == "b"  # not expired yet: the next item
    pass_time(db, 1.5)
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
    pass_time(db, 1.5)
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
    pass_time(db, 1.5)
    assert queue.claim(db, lease=1).value == "a"  # redelivered and committed first
    with raises_fdb_error(1020):
        acker.commit().wait()


@pytest.mark.memory_only("moves time on with db.advance_time()")
def test_after_max_deliveries_the_item_becomes_a_dead_letter_and_can_be_requeued(db, queue):
    for delivery in (1, 2, 3):
        lease = queue.claim(db, lease=1)
        assert (lease.value, lease.deliveries) == ("a", delivery)
        pass_time(db, 1.5)
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
    pass_time(db, 0.5)
    longer = queue.extend(db, lease, 10)
    assert (longer.id, longer.deliveries, longer.value) == (lease.id, 1, "a")
    assert longer.expiry_version > lease.expiry_version
    pass_time(db, 1)  # past the first expiry, not the new one
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
    pass_time(db, 1.5)
    with pytest.raises(LeaseExpiredError):
        queue.extend(db, lease, 10)
    assert queue.claim(db, lease=1).value == "a"  # delivered again


# -- blocking claims, claim_many, ack_many ------------------------------------------------------


def _claim_in_thread(call):
    """Start ``call()`` in a thread; return the thread and the list its result lands in."""
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(call()), daemon=True)
    thread.start()
    return thread, result


@pytest.mark.parametrize("kind", ["queue", "priority"])
def test_a_blocking_claim_wakes_on_enqueue(db, subspace, kind):
    if kind == "queue":
        queue = Queue(subspace)
        add = queue.enqueue
    else:
        queue = PriorityQueue(subspace)
        add = lambda db, value: queue.push(db, value, priority=3)  # noqa: E731
    thread, result = _claim_in_thread(lambda: queue.claim(db, lease=30, block=True, timeout=10))
    time.sleep(0.2)
    assert result == []  # still waiting
    started = time.monotonic()
    add(db, "wake up")
    thread.join(10)
    assert time.monotonic() - started < 3  # woken by the enqueue, not by the timeout
    [lease] = result
    assert isinstance(lease, Lease)
    assert (lease.value, lease.deliveries) == ("wake up", 1)
    assert [held.id for held in queue.leases(db)] == [lease.id]


def test_a_blocking_claim_returns_an_item_already_there_at_once(db, subspace):
    queue = Queue(subspace)
    queue.enqueue(db, "here")
    started = time.monotonic()
    assert queue.claim(db, lease=30, block=True, timeout=5).value == "here"
    assert queue.claim(db, lease=30, block=True, timeout=0) is None
    assert time.monotonic() - started < 2


def test_a_blocking_claim_returns_none_after_its_timeout(db, subspace):
    queue = PriorityQueue(subspace)
    started = time.monotonic()
    assert queue.claim(db, lease=30, max=True, block=True, timeout=0.5) is None
    assert 0.45 <= time.monotonic() - started < 3


@pytest.mark.memory_only("counts reads and watches with db.stats()")
@pytest.mark.parametrize("leased", [False, True])
def test_a_blocking_claim_times_out_without_polling(db, subspace, leased):
    queue = Queue(subspace)
    if leased:  # a lease in flight that expires long after the timeout: no reason to wake
        queue.enqueue(db, "x")
        queue.claim(db, lease=3600)
    db.reset_stats()
    started = time.monotonic()
    assert queue.claim(db, lease=30, block=True, timeout=0.6) is None
    assert 0.55 <= time.monotonic() - started < 3
    stats = db.stats()
    # An attempt (the type and codec records, the paused key, expired leases, the queue, the
    # message groups' count, served results, the first lease), the watch's read, one more
    # attempt: no loop (the paused key: one read more per attempt, 15 before it). Polling
    # every 50 ms would read about a hundred times.
    assert stats["reads"] <= 17, stats
    assert stats["watches"] == 1
    assert stats["transactions"] <= 3


def test_a_blocking_claim_wakes_when_a_lease_expires(db, subspace):
    queue = Queue(subspace)
    queue.enqueue(db, "a")
    first = queue.claim(db, lease=0.4)  # never acknowledged: its worker "crashed"
    started = time.monotonic()
    again = queue.claim(db, lease=30, block=True, timeout=10)
    elapsed = time.monotonic() - started
    assert again is not None, "the expired lease did not wake the blocked claim"
    assert (again.value, again.deliveries) == ("a", 2)
    assert again.id != first.id
    assert 0.2 <= elapsed < 5  # woke at the expiry, not at the timeout


def test_a_blocking_claim_wakes_when_a_lease_is_released(db, subspace):
    queue = Queue(subspace)
    queue.enqueue(db, "a")
    held = queue.claim(db, lease=600)
    thread, result = _claim_in_thread(lambda: queue.claim(db, lease=30, block=True, timeout=10))
    time.sleep(0.2)
    assert result == []
    started = time.monotonic()
    queue.release(db, held)
    thread.join(10)
    assert time.monotonic() - started < 3
    assert [(lease.value, lease.deliveries) for lease in result] == [("a", 2)]


def test_blocking_claims_share_a_burst_of_items_each_once(db, subspace):
    queue = Queue(subspace)
    results: list[object] = []
    lock = threading.Lock()

    def worker() -> None:
        while (lease := queue.claim(db, lease=30, block=True, timeout=1)) is not None:
            with lock:
                results.append(lease.value)
            queue.ack(db, lease)

    workers = [threading.Thread(target=worker, daemon=True) for _ in range(4)]
    for thread in workers:
        thread.start()
    time.sleep(0.1)
    for start in range(0, 40, 10):
        queue.enqueue_many(db, range(start, start + 10))
        time.sleep(0.05)
    for thread in workers:
        thread.join(15)
    assert sorted(results) == list(range(40))
    assert queue.leases(db) == [] and queue.size(db) == 0


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda q, db: q.claim(db, lease=30, block="yes"), TypeError),
        (lambda q, db: q.claim(db, lease=30, block=1), TypeError),
        (lambda q, db: q.claim(db, lease=30, timeout=1), ValueError),
        (lambda q, db: q.claim(db, lease=30, block=True, timeout=-1), ValueError),
        (lambda q, db: q.claim(db, lease=30, block=True, timeout=float("nan")), ValueError),
        (lambda q, db: q.claim(db, lease=30, block=True, timeout="1"), TypeError),
        (lambda q, db: q.claim(db, lease=0, block=True, timeout=1), ValueError),
        (lambda q, db: q.claim(db, lease="1", block=True), TypeError),
        (lambda q, db: q.claim(db.create_transaction(), lease=30, block=True), TypeError),
        (lambda q, db: q.claim_many(db, -1, lease=30), ValueError),
        (lambda q, db: q.claim_many(db, "2", lease=30), TypeError),
        (lambda q, db: q.claim_many(db, True, lease=30), TypeError),
        (lambda q, db: q.claim_many(db, 2, lease=0), ValueError),
        (lambda q, db: q.claim_many(db, 2, lease=None), TypeError),
        (lambda q, db: q.ack_many(db, None), TypeError),
        (lambda q, db: q.ack_many(db, ["not a lease"]), TypeError),
        (lambda q, db: q.ack_many(db, q.leases(db)[0]), TypeError),  # one Lease, not a list
        (lambda q, db: q.ack_many(db, q.leases(db) * 2), ValueError),  # the same one twice
    ],
)
def test_bad_arguments_of_blocking_and_batch_calls_raise_before_anything(db, queue, call, error):
    queue.claim(db, lease=600)  # a lease in flight, for ack_many
    before = all_keys(db, queue.subspace)
    reset = getattr(db, "reset_stats", None)
    if reset is not None:
        reset()
    with pytest.raises(error):
        call(queue, db)
    if reset is not None:  # memory: not even a transaction was started after the arguments
        stats = db.stats()
        assert stats["commits"] == 0, stats
    assert all_keys(db, queue.subspace) == before
    assert queue.size(db) == 2 and [lease.value for lease in queue.leases(db)] == ["a"]


def test_a_blocking_claim_refuses_a_transaction(db, queue):
    with pytest.raises(TypeError, match="block=True needs a Database"):
        queue.claim(db.create_transaction(), lease=30, block=True)
    with pytest.raises(TypeError, match="block=True needs a Database"):
        PriorityQueue(queue.subspace["p"]).claim(db.create_transaction(), 30, True, block=True)


def test_claim_many_takes_released_leases_first_then_the_front(db, subspace):
    queue = Queue(subspace)
    queue.enqueue_many(db, ["a", "b", "c", "d", "e"])
    queue.release(db, queue.claim(db, lease=600))
    batch = queue.claim_many(db, 3, lease=30)
    assert [(lease.value, lease.deliveries) for lease in batch] == [("a", 2), ("b", 1), ("c", 1)]
    assert len({lease.id for lease in batch}) == 3
    assert queue.size(db) == 2
    assert [lease.value for lease in queue.claim_many(db, 10, lease=30)] == ["d", "e"]
    assert queue.claim_many(db, 10, lease=30) == []
    assert queue.claim_many(db, 0, lease=30) == []
    held = queue.leases(db)
    assert len(held) == 5 and {lease.id for lease in batch} <= {lease.id for lease in held}


def test_priority_claim_many_takes_from_either_end(db, subspace):
    queue = PriorityQueue(subspace)
    for value, priority in [("low", 1), ("high", 9), ("mid", 5), ("high2", 9)]:
        queue.push(db, value, priority=priority)
    assert [lease.value for lease in queue.claim_many(db, 2, 30, max=True)] == ["high", "high2"]
    assert [lease.value for lease in queue.claim_many(db, 5, 30)] == ["low", "mid"]
    assert queue.claim_many(db, 5, 30, max=True) == []


@pytest.mark.memory_only("moves time on with db.advance_time()")
def test_claim_many_takes_what_repeated_claims_would(db, subspace):
    """Expired leases (soonest expiry first), dead letters past max_deliveries and poison
    moved aside on the way, then the front: the same items, in the same order, as claims."""
    queues = [
        Queue(subspace[name], codec=PoisonCodec(), max_deliveries=2) for name in ("one", "all")
    ]
    for queue in queues:
        queue.enqueue_many(db, [b"a", b"b", b"c", b"!poison", b"d", b"e", b"f"])
        queue.claim(db, lease=1)  # "a": expires twice, then a dead letter
        queue.claim(db, lease=2)  # "b"
    pass_time(db, 1.5)
    for queue in queues:
        assert queue.claim(db, lease=1).value == b"a"  # delivery 2 of "a", expires at once
    pass_time(db, 3)
    by_claims = [queues[0].claim(db, lease=30) for _ in range(4)]
    by_batch = queues[1].claim_many(db, 4, lease=30)
    shape = [(lease.value, lease.deliveries) for lease in by_claims]
    assert shape == [(b"b", 2), (b"c", 1), (b"d", 1), (b"e", 1)]
    assert [(lease.value, lease.deliveries) for lease in by_batch] == shape
    for queue in queues:
        letters = queue.dead_letters(db)
        dead = [(getattr(d.value, "raw", d.value), d.deliveries) for d in letters]
        assert sorted(dead) == [(b"!poison", 0), (b"a", 2)]  # one version: in any order
        assert queue.size(db) == 1


@pytest.mark.memory_only("fills a transaction: large values on the in-memory database")
def test_claim_many_stops_at_the_transaction_byte_budget():
    db = memory.open()
    queue = Queue(Subspace(("budget",)), codec="raw")
    values = [bytes([n]) * 90_000 for n in range(80)]  # 7.2 MB: more than one claim can move
    for start in range(0, 80, 20):
        queue.enqueue_many(db, values[start : start + 20])
    first = queue.claim_many(db, 80, lease=30)
    assert 1 < len(first) < 80  # stopped within the budget (else 2101 transaction_too_large)
    claimed = list(first)
    while batch := queue.claim_many(db, 80, lease=30):
        claimed.extend(batch)
    assert [lease.value for lease in claimed] == values  # in order, each once
    assert len(queue.leases(db, limit=100)) == 80
    queue.ack_many(db, claimed[:40])
    queue.ack_many(db, claimed[40:])
    assert queue.leases(db) == [] and queue.size(db) == 0


@pytest.mark.parametrize("kind", ["queue", "priority"])
def test_under_faults_claim_many_and_ack_many_take_effect_once(kind):
    db = memory.open(seed=17)
    if kind == "queue":
        queue = Queue(Subspace(("eo-many",)), max_deliveries=None)
        despite_timeouts(lambda: queue.enqueue_many(db, list(range(60))))
    else:
        queue = PriorityQueue(Subspace(("eo-many",)), max_deliveries=None)
        for n in range(60):
            queue.push(db, n, priority=0)
    db.faults = memory.Faults(
        not_committed=0.1, commit_unknown_result=0.3, transaction_too_old=0.1, timed_out=0.1
    )
    claimed = []
    while batch := despite_timeouts(lambda: queue.claim_many(db, 7, lease=3600)):
        claimed.extend(batch)
    assert [lease.value for lease in claimed] == list(range(60))  # none lost, none twice
    assert all(lease.deliveries == 1 for lease in claimed)  # no claim applied twice
    assert len(queue.leases(db, limit=100)) == 60
    for start in range(0, 60, 2):  # a retried ack_many whose first attempt landed must not raise
        despite_timeouts(lambda start=start: queue.ack_many(db, claimed[start : start + 2]))
    db.faults = memory.Faults()
    db.settle()
    assert queue.leases(db) == [] and queue.claim_many(db, 5, lease=1) == []
    stats = db.stats()
    assert stats["injected_commit_unknown_result_applied"] > 0
    assert stats["injected_timed_out"] > 0


def test_ack_many_is_all_or_none(db, subspace):
    queue = Queue(subspace)
    queue.enqueue_many(db, ["a", "b", "c"])
    leases = queue.claim_many(db, 3, lease=600)
    queue.ack(db, leases[1])
    before = all_keys(db, subspace)
    with pytest.raises(LeaseNotHeldError, match=rf"leases\[1\]: lease {leases[1].id}"):
        queue.ack_many(db, leases)
    assert all_keys(db, subspace) == before  # "a" and "c" are still leased
    assert sorted(lease.value for lease in queue.leases(db)) == ["a", "c"]
    tr = db.create_transaction()  # inside a transaction too, nothing is left half done
    with pytest.raises(LeaseNotHeldError):
        queue.ack_many(tr, [leases[0], leases[2], leases[1]])
    tr.commit().wait()
    assert all_keys(db, subspace) == before
    queue.ack_many(db, [leases[0], leases[2]])
    assert queue.leases(db) == [] and queue.size(db) == 0
    with pytest.raises(LeaseNotHeldError):
        queue.ack_many(db, [leases[0]])


@pytest.mark.memory_only("moves time on with db.advance_time()")
def test_ack_many_refuses_an_expired_lease_and_changes_nothing(db, subspace):
    queue = Queue(subspace)
    queue.enqueue_many(db, ["a", "b"])
    short = queue.claim(db, lease=1)
    long = queue.claim(db, lease=60)
    pass_time(db, 1.5)
    before = all_keys(db, subspace)
    with pytest.raises(LeaseExpiredError, match=rf"leases\[1\]: lease {short.id}"):
        queue.ack_many(db, [long, short])
    assert all_keys(db, subspace) == before
    assert queue.claim(db, lease=30).value == "a"  # the expired one goes to the next claim
    queue.ack_many(db, [long])
    assert [lease.value for lease in queue.leases(db)] == ["a"]


def test_ack_many_composes_with_the_callers_writes(db, subspace):
    queue = Queue(subspace)
    queue.enqueue_many(db, ["a", "b"])
    leases = queue.claim_many(db, 2, lease=600)
    result = subspace.pack(("result",))
    tr = db.create_transaction()
    queue.ack_many(tr, iter(leases))  # any iterable
    tr[result] = b"both processed"
    tr.commit().wait()
    assert queue.leases(db) == []
    assert bytes(db.get(result)) == b"both processed"


@pytest.mark.memory_only("counts transactions with db.stats()")
def test_empty_batches_start_no_transaction(db, subspace):
    queue = Queue(subspace)
    db.reset_stats()
    assert queue.claim_many(db, 0, lease=30) == []
    queue.ack_many(db, [])
    assert db.stats()["transactions"] == 0
