"""Listings without silent caps (``dead_letters``, ``leases``, ``peek_many`` with ``None``),
``purge_dead_letters`` and ``info``, on both backends."""

from __future__ import annotations

import pytest
from helpers import pass_time, run

from fdbqueue import PriorityQueue, Queue, memory
from fdbqueue._queues.base import PAGE_SIZE
from fdbqueue._storage.queue_info import QueueInfo


def add_dead_letters(db, queue, count, per_transaction=500):
    """Write ``count`` small dead letters (value ``i``, in order) straight into the store."""
    dead = queue._store.dead_letters

    def batch(tr, start, stop):
        for i in range(start, stop):
            encoded = queue.codec.encode(i)
            dead.add(tr, queue.subspace.pack((i, b"x")), 1, "test", encoded=encoded)

    for start in range(0, count, per_transaction):
        stop = min(count, start + per_transaction)
        run(db, lambda tr, start=start, stop=stop: batch(tr, start, stop))


class CountingDatabase:
    """A Database that counts the transactions created through it."""

    def __init__(self, db):
        self.db = db
        self.transactions = 0

    def create_transaction(self):
        self.transactions += 1
        return self.db.create_transaction()

    def __getattr__(self, name):
        return getattr(self.db, name)


def test_150_dead_letters_are_all_listed_with_limit_none(db, subspace):
    queue = Queue(subspace)
    add_dead_letters(db, queue, 150)
    assert len(queue.dead_letters(db)) == 100  # the default stays 100
    letters = queue.dead_letters(db, limit=None)
    assert sorted(letter.value for letter in letters) == list(range(150))
    assert len({letter.id for letter in letters}) == 150
    assert len(run(db, lambda tr: queue.dead_letters(tr, None))) == 150
    assert queue.dead_letters(db, 0) == []


@pytest.mark.slow("pages of items through the binding", backend="fdb")
def test_a_database_pages_through_in_several_transactions(db, subspace):
    queue = Queue(subspace)
    add_dead_letters(db, queue, 2_500)
    counting = CountingDatabase(db)
    letters = queue.dead_letters(counting, limit=None)
    assert len(letters) == 2_500
    assert len({letter.key for letter in letters}) == 2_500
    assert [letter.key for letter in letters] == sorted(letter.key for letter in letters)
    assert counting.transactions == 3  # pages of 1,000, 1,000 and 500
    counting.transactions = 0
    assert len(queue.dead_letters(counting, limit=1_200)) == 1_200
    assert counting.transactions == 2
    counting.transactions = 0
    assert len(queue.dead_letters(counting, limit=PAGE_SIZE)) == PAGE_SIZE
    assert counting.transactions == 1


def test_purge_dead_letters_removes_them_and_their_held_values(db, subspace):
    queue = Queue(subspace)
    add_dead_letters(db, queue, 1_050)
    held = queue._store.held.subspace.range()

    def held_count(tr):
        return len(list(tr.get_range(held.start, held.stop)))

    assert run(db, held_count) == 1_050
    assert queue.purge_dead_letters(db, limit=10) == 10
    assert queue.info(db).dead_letters == 1_040
    counting = CountingDatabase(db)
    assert queue.purge_dead_letters(counting) == 1_040
    assert counting.transactions >= 2  # a transaction per page
    assert queue.dead_letters(db, None) == []
    assert run(db, held_count) == 0
    assert queue.purge_dead_letters(db) == 0


def test_purge_in_a_transaction_commits_with_it(db, subspace):
    queue = Queue(subspace)
    add_dead_letters(db, queue, 5)
    tr = db.create_transaction()
    assert queue.purge_dead_letters(tr, limit=None) == 5
    assert queue.dead_letters(db) != []  # not committed yet
    tr.commit().wait()
    assert queue.dead_letters(db) == []


@pytest.mark.parametrize("bad", [-1, 1.5, True, "10"])
def test_bad_limits_are_refused_before_anything_changes(db, subspace, bad):
    queue = Queue(subspace)
    add_dead_letters(db, queue, 3)
    with pytest.raises((TypeError, ValueError)):
        queue.purge_dead_letters(db, bad)
    with pytest.raises((TypeError, ValueError)):
        queue.dead_letters(db, bad)
    with pytest.raises((TypeError, ValueError)):
        queue.leases(db, bad)
    with pytest.raises((TypeError, ValueError)):
        queue.peek_many(db, bad)
    assert len(queue.dead_letters(db)) == 3


def test_listings_refuse_what_is_not_a_database_or_transaction(subspace):
    queue = Queue(subspace)
    for call in (queue.dead_letters, queue.leases, queue.peek_many):
        with pytest.raises(TypeError, match="must be a Database"):
            call("db", None)


def test_peek_many_none_lists_every_item_across_pages(db, subspace):
    queue = Queue(subspace)
    for start in range(0, 2_100, 700):
        queue.enqueue_many(db, list(range(start, start + 700)))
    counting = CountingDatabase(db)
    assert queue.peek_many(counting, None) == list(range(2_100))
    assert counting.transactions == 3
    assert queue.peek_many(db, 3) == [0, 1, 2]
    assert run(db, lambda tr: len(queue.peek_many(tr, None))) == 2_100


@pytest.mark.slow("pages of items through the binding", backend="fdb")
def test_leases_none_lists_every_lease(db, subspace):
    queue = PriorityQueue(subspace)

    def push(tr, start):
        for i in range(start, start + 100):
            queue.push(tr, i, priority=i % 3)

    for start in range(0, 1_100, 100):
        run(db, lambda tr, start=start: push(tr, start))
    claimed = []
    while len(claimed) < 1_100:
        claimed += queue.claim_many(db, 500, lease=60)
    assert len(queue.leases(db)) == 100
    leases = queue.leases(db, None)
    assert sorted(lease.id for lease in leases) == sorted(lease.id for lease in claimed)
    assert [lease.key for lease in leases] == sorted(lease.key for lease in leases)


def info_of(db, queue):
    found = queue.info(db)
    assert isinstance(found, QueueInfo)
    return found


def test_info_of_an_empty_queue(db, subspace):
    found = info_of(db, Queue(subspace))
    assert (found.size, found.oldest, found.requests_in_line) == (0, None, 0)
    assert (found.leases_in_flight, found.expired_leases, found.dead_letters) == (0, 0, 0)
    assert found.delayed == 0
    assert found.read_version > 0


def test_info_figures(db, subspace):
    queue = Queue(subspace, max_deliveries=3)
    queue.enqueue_many(db, ["a", "b", "c", "d", "e"])
    first = queue.claim(db, lease=60)
    second = queue.claim(db, lease=60)
    queue.claim(db, lease=60)
    queue.release(db, second)  # a released item waits: the next take of any kind takes it
    add_dead_letters(db, queue, 4)
    queue.enqueue(db, "later", delay=600)
    queue.enqueue_many(db, ["x", "y"], delay=600)
    with queue.consumer(db, prefetch=2) as consumer:
        assert consumer.dequeue() == "b"  # the released item first; keeps places reserved
        waiting = queue.requests_in_line(db)
        found = info_of(db, queue)
    assert first.value == "a"
    assert found.size == 2  # "d" and "e"
    assert found.oldest == "d"
    assert found.requests_in_line == waiting
    assert waiting >= 1
    assert found.leases_in_flight == 2  # "a" and "c", held
    assert found.expired_leases == 0
    assert found.dead_letters == 4
    assert found.delayed == 3
    # inside a transaction, the same figures
    assert run(db, queue.info).dead_letters == 4


@pytest.mark.memory_only("expires a lease with db.advance_time()")
def test_info_counts_a_lease_expired_by_time(db, subspace):
    queue = Queue(subspace)
    queue.enqueue_many(db, ["a", "b"])
    queue.claim(db, lease=0.5)
    queue.claim(db, lease=60)
    pass_time(db, 1)
    found = queue.info(db)
    # the expired lease's item waits: counted in the size, not in flight
    assert (found.leases_in_flight, found.expired_leases, found.size) == (1, 1, 1)


def test_info_on_a_priority_queue(db, subspace):
    queue = PriorityQueue(subspace)
    queue.push(db, "low", priority=5)
    queue.push(db, "high", priority=1)
    queue.push(db, "soon", priority=0, delay=600)
    found = queue.info(db)
    assert (found.size, found.oldest, found.delayed) == (2, "high", 1)


@pytest.mark.slow("pages of items through the binding", backend="fdb")
def test_info_counts_more_than_one_count_page(subspace):
    db = memory.open()
    queue = Queue(subspace)
    add_dead_letters(db, queue, 10_001, per_transaction=2_500)
    assert queue.info(db).dead_letters == 10_001
