"""The JSON codec (``codec="json"``): dicts and lists out of the box, refusals before writing."""

from __future__ import annotations

import pytest

from fdbqueue import JsonCodec, PriorityQueue, Queue

JOB = {"id": 7, "name": "résumé", "tags": ["a", "b"], "retry": None, "ratio": 0.5, "ok": True}


def test_dicts_and_lists_go_through_a_queue_unchanged(db, subspace):
    queue = Queue(subspace, codec="json")
    queue.enqueue_many(db, [JOB, [1, 2, [3]], "text", 12])
    assert queue.dequeue_many(db, 4) == [JOB, [1, 2, [3]], "text", 12]


def test_a_priority_queue_and_a_lease_carry_json(db, subspace):
    queue = PriorityQueue(subspace, codec="json")
    queue.push(db, {"job": 1}, priority=2)
    queue.push(db, {"job": 2}, priority=1)
    lease = queue.claim(db, lease=30)
    assert lease.value == {"job": 2}
    queue.ack(db, lease)
    assert queue.pop_max(db) == {"job": 1}


def test_the_stored_bytes_are_compact_utf8_json():
    assert JsonCodec().encode({"a": [1, "é"]}) == '{"a":[1,"é"]}'.encode()


@pytest.mark.parametrize(
    "value",
    [
        {1: "int key"},
        {"nested": {(1, 2): 3}},
        float("nan"),
        [float("inf")],
        {"s": {1, 2}},
        b"x",
        (1, 2),
        {"pair": [("a", 1)]},
    ],
    ids=["int key", "tuple key", "nan", "inf", "set", "bytes", "tuple", "nested tuple"],
)
def test_what_json_would_change_or_cannot_carry_is_refused_and_nothing_is_written(
    db, subspace, value
):
    queue = Queue(subspace, codec="json")
    with pytest.raises(TypeError):
        queue.enqueue(db, value)
    assert queue.empty(db) and queue.size(db) == 0


def test_bytes_that_are_not_json_go_to_the_dead_letters(db, subspace):
    queue = Queue(subspace, codec="json")
    queue.enqueue(db, {"fine": 1})
    db[subspace.pack((-1, b"r" * 20))] = b"\xff not json"  # another writer's bytes, first
    assert queue.dequeue(db) == {"fine": 1}
    (letter,) = queue.dead_letters(db)
    assert letter.value.raw == b"\xff not json"


@pytest.mark.parametrize("value", [(1, 2), {"pair": [("a", 1)]}], ids=["tuple", "nested tuple"])
def test_a_tuple_is_refused_saying_to_pass_a_list(value):
    # JSON has no tuple: it would come back as a list, unequal to what was enqueued
    with pytest.raises(TypeError, match=r"tuple.*would come back as a list.*pass a list"):
        JsonCodec().encode(value)


def test_a_batch_holding_a_tuple_writes_none_of_its_items(db, subspace):
    queue = Queue(subspace, codec="json")
    with pytest.raises(TypeError, match="tuple"):
        queue.enqueue_many(db, [{"fine": 1}, ("a", 1)])
    assert queue.empty(db) and queue.size(db) == 0
