"""PriorityQueue: priority order, FIFO within a priority at both ends, layout, bad input."""

from __future__ import annotations

import os

import fdb.tuple
import pytest
from helpers import all_keys

from fdbqueue import PriorityQueue, transactional


def test_pop_min_takes_lowest_priority_first(db, subspace):
    queue = PriorityQueue(subspace)
    for value, priority in [("c", 3), ("a", 1), ("b", 2)]:
        queue.push(db, value, priority=priority)
    assert [queue.pop_min(db) for _ in range(3)] == ["a", "b", "c"]
    assert queue.pop_min(db) is None


def test_pop_max_takes_highest_priority_first(db, subspace):
    queue = PriorityQueue(subspace)
    for value, priority in [("c", 3), ("a", 1), ("b", 2)]:
        queue.push(db, value, priority)
    assert [queue.pop_max(db) for _ in range(3)] == ["c", "b", "a"]
    assert queue.pop_max(db) is None


def test_fifo_within_a_priority_at_both_ends(db, subspace):
    queue = PriorityQueue(subspace)
    for value in ["old", "mid", "new"]:
        queue.push(db, value, priority=5)
    queue.push(db, "low", priority=0)
    assert queue.peek_max(db) == "old"
    assert queue.pop_max(db) == "old"
    assert queue.pop(db, max=True) == "mid"
    assert queue.pop_min(db) == "low"
    assert queue.pop_min(db) == "new"


def test_negative_and_huge_priorities_order_numerically(db, subspace):
    queue = PriorityQueue(subspace)
    priorities = [2**200, -(2**200), -1, 0, 1, 2**64, -(2**64)]
    for priority in priorities:
        queue.push(db, priority, priority)
    popped = [queue.pop_min(db) for _ in priorities]
    assert popped == sorted(priorities)


def test_peek_does_not_remove(db, subspace):
    queue = PriorityQueue(subspace)
    queue.push(db, "x", 1)
    queue.push(db, "y", 2)
    assert queue.peek_min(db) == "x"
    assert queue.peek(db) == "x"
    assert queue.peek(db, max=True) == "y"
    assert queue.size(db) == 2
    assert not queue.empty(db)


def test_empty_size_clear(db, subspace):
    queue = PriorityQueue(subspace)
    assert queue.empty(db) and queue.size(db) == 0
    assert queue.peek_max(db) is None and queue.peek_min(db) is None
    queue.push(db, "a", 1)
    queue.push(db, "b", 1)
    assert queue.size(db) == 2
    queue.pop_max(db)
    assert queue.size(db) == 1
    queue.clear(db)
    assert queue.empty(db) and queue.size(db) == 0
    receipts = subspace.key() + b"\xff" + fdb.tuple.pack(("receipts",))
    assert [key for key, _ in all_keys(db, subspace) if not key.startswith(receipts)] == []


def test_key_layout_is_priority_count_random(db, subspace):
    queue = PriorityQueue(subspace)
    queue.push(db, "a", 7)
    queue.push(db, "b", 7)
    queue.push(db, "c", 3)
    items = [(k, v) for k, v in all_keys(db, subspace) if k < subspace.range().stop]
    positions = [subspace.unpack(k) for k, _ in items]
    assert [(p[0], p[1]) for p in positions] == [(3, 0), (7, 0), (7, 1)]
    assert all(isinstance(p[2], bytes) and len(p[2]) == 20 for p in positions)
    assert [fdb.tuple.unpack(v)[0] for _, v in items] == ["c", "a", "b"]


def test_java_recipe_items_are_popped_in_order(db, subspace):
    """MicroPriority stores (priority, count, 20 random bytes) -> Tuple.from(value).pack()."""

    @transactional
    def java_push(tr, value, priority, count):
        tr[subspace.pack((priority, count, os.urandom(20)))] = fdb.tuple.pack((value,))

    java_push(db, "java-1", 1, 0)
    queue = PriorityQueue(subspace)
    queue.push(db, "ours-1", 1)  # continues the count Java used
    java_push(db, "java-0", 0, 0)
    assert [queue.pop_min(db) for _ in range(3)] == ["java-0", "java-1", "ours-1"]


def test_composes_with_a_queue_in_one_transaction(db, subspace):
    from fdbqueue import Queue

    jobs = Queue(subspace["jobs"])
    urgent = PriorityQueue(subspace["urgent"])
    jobs.enqueue(db, "job")

    @transactional
    def move(tr):
        job = jobs.dequeue(tr)
        if job is not None:
            urgent.push(tr, job, priority=1)

    move(db)
    assert jobs.empty(db)
    assert urgent.pop_max(db) == "job"


@pytest.mark.parametrize("priority", [True, 1.0, "1", None, (1,)])
def test_non_int_priority_is_rejected_and_nothing_changes(db, subspace, priority):
    queue = PriorityQueue(subspace)
    queue.push(db, "keep", 0)
    before = all_keys(db, subspace)
    with pytest.raises(TypeError, match="priority must be an int"):
        queue.push(db, "x", priority)
    assert all_keys(db, subspace) == before


def test_bad_values_are_rejected_and_nothing_changes(db, subspace):
    queue = PriorityQueue(subspace)
    before = all_keys(db, subspace)
    with pytest.raises(ValueError, match="None"):
        queue.push(db, None, 1)
    with pytest.raises(TypeError):
        queue.push(db, object(), 1)
    with pytest.raises(ValueError, match="100,000 bytes"):
        PriorityQueue(subspace, codec="raw").push(db, b"x" * 100_001, 1)
    with pytest.raises(ValueError):
        queue.push(db, "x", 2 ** (8 * 256))  # beyond the tuple layer's integers
    assert all_keys(db, subspace) == before


def test_tr_must_be_a_database_or_transaction(subspace):
    queue = PriorityQueue(subspace)
    with pytest.raises(TypeError, match="Database, Tenant or Transaction"):
        queue.push("not a db", "x", 1)
    with pytest.raises(TypeError):
        queue.pop_max(None)
