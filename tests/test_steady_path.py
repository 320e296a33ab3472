"""A one-shard Queue's steady path (fdbqueue._queues.steady_path): its plainest calls run in
one function each, and whatever it does not handle goes to the layered path, with the same
result, in the same transaction."""

from __future__ import annotations

import time

import pytest
from helpers import PoisonCodec, all_keys, run

from fdbqueue import PriorityQueue, Queue, QueueTypeError, memory
from fdbqueue._consuming.ends import End
from fdbqueue._queues.shard import Shard


@pytest.fixture
def layered_calls(monkeypatch):
    """How many times the layered take and write ran."""
    calls = {"take_in": 0, "put": 0}
    take_in, put = End.take_in, Shard.put

    def counted_take_in(self, tr):
        calls["take_in"] += 1
        return take_in(self, tr)

    def counted_put(self, *args):
        calls["put"] += 1
        return put(self, *args)

    monkeypatch.setattr(End, "take_in", counted_take_in)
    monkeypatch.setattr(Shard, "put", counted_put)
    return calls


def warm(db, queue):
    """Enqueue and dequeue a few values, so the type is on record and the hints are quiet."""
    for value in (b"w1", b"w2", b"w3"):
        queue.enqueue(db, value)
    assert sorted(queue.dequeue(db) for _ in range(3)) == [b"w1", b"w2", b"w3"]


@pytest.mark.parametrize("shards", [1, 4])
def test_plain_calls_in_the_steady_state_take_the_steady_path(db, subspace, layered_calls, shards):
    queue = Queue(subspace, codec="raw", shards=shards)
    for _ in range(shards):  # every shard's type on record, every hint found quiet
        warm(db, queue)
    layered_calls.update(take_in=0, put=0)
    values = [b"%02d" % n for n in range(20)]
    for value in values:
        assert queue.enqueue(db, value) is True
    taken = [queue.dequeue(db) for _ in values]
    assert taken == values if shards == 1 else sorted(taken) == values
    # Only a take that found its shard empty (the next shard's turn) reads the hints.
    assert layered_calls["put"] == 0
    assert layered_calls["take_in"] <= (0 if shards == 1 else shards)
    assert queue.size(db) == 0


def test_the_first_enqueue_records_the_type_through_the_layered_path(db, subspace):
    Queue(subspace, codec="raw").enqueue(db, b"a")
    with pytest.raises(QueueTypeError):
        PriorityQueue(subspace, codec="raw").push(db, b"b", priority=1)
    with pytest.raises(QueueTypeError):
        Queue(subspace, codec="json").enqueue(db, "c")


def test_a_priority_queue_on_record_refuses_a_steady_enqueue_and_dequeue(db, subspace):
    PriorityQueue(subspace, codec="raw").push(db, b"p", priority=1)
    queue = Queue(subspace, codec="raw")
    before = all_keys(db, subspace)
    with pytest.raises(QueueTypeError):
        queue.enqueue(db, b"x")
    with pytest.raises(QueueTypeError):
        queue.dequeue(db)
    assert all_keys(db, subspace) == before


def test_a_foreign_key_at_the_back_is_refused_and_nothing_is_written(db, subspace):
    queue = Queue(subspace, codec="raw")
    warm(db, queue)
    foreign = subspace.pack(("not-an-index",))
    run(db, lambda tr: tr.__setitem__(foreign, b"other data"))
    before = all_keys(db, subspace)
    with pytest.raises(ValueError, match="not one of its items"):
        queue.enqueue(db, b"x")
    assert all_keys(db, subspace) == before


def test_a_foreign_key_at_the_front_is_refused_and_nothing_changes(db, subspace):
    queue = Queue(subspace, codec="raw")
    warm(db, queue)
    run(db, lambda tr: tr.__setitem__(subspace.pack(("a-string",)), b"other data"))
    before = all_keys(db, subspace)
    with pytest.raises(ValueError, match="not one of its items"):
        queue.dequeue(db)
    assert all_keys(db, subspace) == before


def test_a_poison_item_at_the_front_goes_to_the_dead_letters_and_the_next_comes_out(db, subspace):
    queue = Queue(subspace, codec=PoisonCodec())
    warm(db, queue)
    for value in (b"a", b"!poison", b"b"):
        queue.enqueue(db, value)
    assert queue.dequeue(db) == b"a"
    assert queue.dequeue(db) == b"b"  # the poison moved aside in the same transaction
    assert queue.dequeue(db) is None
    assert [letter.reason for letter in queue.dead_letters(db)] == [
        "undecodable: ValueError: poison"
    ]


def test_a_group_started_by_another_queue_object_is_served(db, subspace):
    queue = Queue(subspace, codec="raw")
    warm(db, queue)
    Queue(subspace, codec="raw").enqueue(db, b"grouped", group="g")
    queue.enqueue(db, b"plain")
    taken = {queue.dequeue(db), queue.dequeue(db)}
    assert taken == {b"grouped", b"plain"}
    assert queue.dequeue(db) is None


def test_a_delayed_item_comes_out_once_due(db, subspace):
    queue = Queue(subspace, codec="raw")
    warm(db, queue)
    queue.enqueue(db, b"later", delay=0.05)
    assert queue.dequeue(db) is None
    time.sleep(0.1)
    assert queue.dequeue(db) == b"later"


def test_under_unknown_results_steady_calls_take_effect_exactly_once():
    database = memory.open(seed=3)
    queue = Queue(("steady", "faults"), codec="raw")
    warm(database, queue)
    database.faults = memory.Faults(commit_unknown_result=0.3, not_committed=0.1)
    values = [b"%03d" % n for n in range(60)]
    for value in values:
        queue.enqueue(database, value)
    taken = [queue.dequeue(database) for _ in values]
    assert database.stats()["injected_commit_unknown_result_applied"] > 0
    database.faults = memory.Faults()
    assert taken == values
    assert queue.dequeue(database) is None
    assert queue.size(database) == 0
