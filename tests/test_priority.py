"""PriorityQueue: priority order, FIFO within a priority at both ends, layout, bad input."""

from __future__ import annotations

import asyncio
import itertools
import os

import fdb.tuple
import pytest
from helpers import all_keys

import fdbqueue.asyncio as fa
from fdbqueue import PriorityQueue, Subspace, memory, transactional


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
    features = subspace.key() + b"\xff" + fdb.tuple.pack(("features",))
    left = [(key, value) for key, value in all_keys(db, subspace) if not key.startswith(receipts)]
    assert left == [(features, b"\x01\x00\x00")]  # its bits (none used) stay, the type goes


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


# -- pop_many -------------------------------------------------------------------------------

PUSHED = [("e", 5), ("b", 1), ("c", 3), ("b2", 1), ("i", 9), ("c2", 3), ("g", 7), ("a", 0)]


def push_all(db, queue):
    for value, priority in PUSHED:
        queue.push(db, value, priority)


@pytest.mark.parametrize("at_max", [False, True], ids=["min", "max"])
def test_pop_many_takes_what_as_many_pops_would_on_one_shard(db, subspace, at_max):
    queue = PriorityQueue(subspace)
    push_all(db, queue)
    popped = [queue.pop(db, max=at_max) for _ in PUSHED]
    push_all(db, queue)
    assert queue.pop_many(db, 3, max=at_max) == popped[:3]
    assert queue.pop_many(db, 100, max=at_max) == popped[3:]
    assert queue.pop_many(db, 5, max=at_max) == [] and queue.size(db) == 0
    assert queue.pop_many(db, 0, max=at_max) == []


@pytest.mark.parametrize("at_max", [False, True], ids=["min", "max"])
def test_pop_many_on_four_shards_starts_at_the_best_and_takes_every_item_once(db, subspace, at_max):
    queue = PriorityQueue(subspace, shards=4)
    pushed = [(f"{p}-{k}", p) for k in range(6) for p in (4, 0, 7, 2, 9)]  # 30 items
    for value, priority in pushed:
        queue.push(db, value, priority)
    best = max(pushed, key=lambda item: item[1]) if at_max else min(pushed, key=lambda i: i[1])
    first = queue.pop_many(db, 4, max=at_max)
    assert len(first) == 4 and int(first[0].split("-")[0]) == best[1]
    rest = queue.pop_many(db, 100, max=at_max)
    assert sorted(first + rest) == sorted(value for value, _ in pushed)
    assert queue.size(db) == 0 and queue.pop_many(db, 1, max=at_max) == []
    # shard after shard, each in its pop order: per call, at most 4 runs in that order
    for values in (first, rest):
        priorities = [int(value.split("-")[0]) for value in values]
        steps = itertools.pairwise(priorities)
        assert sum(a < b if at_max else a > b for a, b in steps) <= 3, values


@pytest.mark.parametrize("shards", [1, 4])
def test_pop_many_takes_each_item_exactly_once_despite_unknown_results(shards):
    db = memory.open(seed=5, faults=memory.Faults(commit_unknown_result=0.5))
    queue = PriorityQueue(Subspace(("pop-many-unknown", shards)), shards=shards)
    for number in range(40):
        queue.push(db, number, number % 4)
    taken = []
    while batch := queue.pop_many(db, 7, max=bool(len(taken) % 2)):
        taken.extend(batch)
    assert db.stats()["injected_commit_unknown_result"] > 0
    assert sorted(taken) == list(range(40))


def test_pop_many_in_your_transaction_takes_nothing_when_it_fails(db, subspace):
    queue = PriorityQueue(subspace, shards=1)
    push_all(db, queue)

    @transactional
    def move_two(tr):
        values = queue.pop_many(tr, 2)
        raise RuntimeError(f"not committed: {values}")

    with pytest.raises(RuntimeError, match=r"\['a', 'b'\]"):
        move_two(db)
    assert queue.size(db) == len(PUSHED)


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda q, db: q.pop_many(db, -1), ValueError),
        (lambda q, db: q.pop_many(db, "2"), TypeError),
        (lambda q, db: q.pop_many(db, True), TypeError),
        (lambda q, db: q.pop_many(db, 2.0), TypeError),
        (lambda q, db: q.pop_many(db, 2, max="yes"), TypeError),
        (lambda q, db: q.pop_many(db, 2, True), TypeError),  # max is keyword-only
        (lambda q, db: q.pop_many("not a db", 2), TypeError),
    ],
    ids=["negative", "str", "bool", "float", "max str", "max positional", "tr"],
)
def test_pop_many_refuses_bad_arguments_and_nothing_changes(db, subspace, call, error):
    queue = PriorityQueue(subspace)
    push_all(db, queue)
    before = all_keys(db, subspace)
    with pytest.raises(error):
        call(queue, db)
    assert all_keys(db, subspace) == before


@pytest.mark.parametrize("shards", [1, 4])
def test_the_asyncio_twin_pops_many(shards):
    db = memory.open()
    queue = fa.PriorityQueue(Subspace(("async-pop-many", shards)), shards=shards)

    async def main():
        for value, priority in PUSHED:
            await queue.push(db, value, priority)
        first = await queue.pop_many(db, 1, max=True)
        rest = await queue.pop_many(db, 100)
        with pytest.raises(ValueError):
            await queue.pop_many(db, -1)
        return first, rest

    first, rest = asyncio.run(main())
    assert first == ["i"]
    assert sorted(rest) == sorted(value for value, _ in PUSHED if value != "i")
    if shards == 1:
        assert rest == ["a", "b", "b2", "c", "c2", "e", "g"]
