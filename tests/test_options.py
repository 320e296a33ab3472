"""The keyword arguments written once (``QueueOptions``, ``WorkOptions``) behave as explicit
keyword parameters did: a misspelt keyword or a missing ``lease`` is a one-line TypeError
naming the public call, raised before anything is read or written, and an option left out
takes its documented default."""

from __future__ import annotations

import asyncio
import threading

import pytest
from helpers import all_keys

import fdbqueue.asyncio as fa
from fdbqueue import PriorityQueue, Queue, Subspace

QUEUE_TYPES = [
    (Queue, "Queue"),
    (PriorityQueue, "PriorityQueue"),
    (fa.Queue, "Queue"),
    (fa.PriorityQueue, "PriorityQueue"),
]


@pytest.mark.parametrize(("queue_type", "name"), QUEUE_TYPES)
def test_a_misspelt_queue_option_is_refused(queue_type, name):
    with pytest.raises(TypeError) as raised:
        queue_type(Subspace(("Q",)), high_contension=True)
    assert (
        str(raised.value)
        == f"{name}.__init__() got an unexpected keyword argument 'high_contension'"
    )


@pytest.mark.parametrize(("queue_type", "_name"), QUEUE_TYPES)
def test_options_left_out_take_their_documented_defaults(queue_type, _name):
    queue = queue_type(Subspace(("Q",)))
    assert queue.high_contention is False
    assert queue.max_deliveries == 5
    assert queue.shards == 1
    given = queue_type(Subspace(("Q",)), high_contention=True, max_deliveries=None, shards=3)
    assert (given.high_contention, given.max_deliveries, given.shards) == (True, None, 3)


def test_options_are_checked_as_before():
    with pytest.raises(TypeError, match="high_contention must be True or False"):
        Queue(Subspace(("Q",)), high_contention="yes")
    with pytest.raises(ValueError, match="dedup_window"):
        PriorityQueue(Subspace(("Q",)), dedup_window=0)


def stop_at_once() -> threading.Event:
    stop = threading.Event()
    stop.set()
    return stop


@pytest.mark.parametrize("queue_type", [Queue, PriorityQueue])
def test_a_misspelt_work_option_is_refused_before_anything_is_claimed(db, subspace, queue_type):
    queue = queue_type(subspace)
    queue.enqueue(db, "job") if queue_type is Queue else queue.push(db, "job", 1)
    before = all_keys(db, subspace)
    with pytest.raises(TypeError) as raised:
        queue.work(db, print, lease=10, concurency=2, stop=stop_at_once())
    name = queue_type.__name__
    assert str(raised.value) == f"{name}.work() got an unexpected keyword argument 'concurency'"
    with pytest.raises(TypeError) as raised:
        queue.work(db, print, stop=stop_at_once())
    assert str(raised.value) == f"{name}.work() missing 1 required keyword-only argument: 'lease'"
    assert all_keys(db, subspace) == before


@pytest.mark.parametrize("queue_type", [fa.Queue, fa.PriorityQueue])
def test_a_misspelt_async_work_option_is_refused(db, subspace, queue_type):
    queue = queue_type(subspace)
    name = queue_type.__name__
    with pytest.raises(TypeError) as raised:
        asyncio.run(queue.work(db, print, lease=10, until_emtpy=True))
    assert str(raised.value) == f"{name}.work() got an unexpected keyword argument 'until_emtpy'"
    with pytest.raises(TypeError) as raised:
        asyncio.run(queue.work(db, print))
    assert str(raised.value) == f"{name}.work() missing 1 required keyword-only argument: 'lease'"
    assert all_keys(db, subspace) == []


@pytest.mark.parametrize("queue_type", [Queue, fa.Queue])
def test_work_options_left_out_take_their_defaults(db, subspace, queue_type):
    """One item, the default backoff and concurrency: it runs once and the call returns."""
    queue = queue_type(subspace)
    sync = queue if queue_type is Queue else queue.sync
    sync.enqueue(db, "job")
    seen: list[str] = []
    if queue_type is Queue:
        summary = queue.work(db, seen.append, lease=10, until_empty=True, handle_signals=False)
    else:
        summary = asyncio.run(queue.work(db, seen.append, lease=10, until_empty=True))
    assert seen == ["job"] and summary.succeeded == 1
