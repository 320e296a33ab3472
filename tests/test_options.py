"""The keyword arguments written once (``QueueOptions``, ``WorkOptions``) behave as explicit
keyword parameters did: a misspelt keyword or a missing ``lease`` is a one-line TypeError
naming the public call, raised before anything is read or written, and an option left out
takes its documented default."""

from __future__ import annotations

import asyncio
import inspect
import pydoc
import threading
from typing import Any

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


WORK_SIGNATURE = [
    ("lease", inspect.Parameter.empty),
    ("concurrency", 1),
    ("backoff", 1.0),
    ("max_backoff", 300.0),
    ("handle_signals", True),
    ("until_empty", False),
    ("transactional", False),
]


@pytest.mark.parametrize(("queue_type", "_name"), QUEUE_TYPES)
def test_work_lists_its_options_with_their_defaults(queue_type, _name):
    """Issue 43 item 16: ``work(database, handler, *, stop=None, **options)`` told help() and
    editors nothing of ``lease``, ``concurrency`` or ``time_limit``."""
    for work in (queue_type.work, queue_type(Subspace(("Q",))).work):
        parameters = inspect.signature(work).parameters
        names = [name for name in parameters if name not in ("self", "database", "handler")]
        assert names == ["stop"] + [name for name, _ in WORK_SIGNATURE] + [
            "time_limit",
            "processes",
        ]
        for name, default in WORK_SIGNATURE:
            assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY
            assert parameters[name].default == default, name
        assert repr(parameters["time_limit"].default) == "<the queue's time_limit>"
        assert parameters["lease"].annotation == "float"
    text = pydoc.render_doc(queue_type.work, renderer=pydoc.plaintext)
    assert "lease: 'float', concurrency: 'int' = 1" in text
    assert "time_limit: 'float | None' = <the queue's time_limit>" in text
    assert "processes: 'int | None' = None" in text


@pytest.mark.parametrize("queue_type", [Queue, fa.Queue])
def test_the_default_time_limit_shown_is_the_queues(db, subspace, queue_type):
    """The default help() shows for ``time_limit`` means the queue's: given explicitly, it
    is the queue's too (a hung handler is taken back at the queue's 0.1 s)."""
    queue = queue_type(subspace, max_deliveries=1, time_limit=0.1)
    sync = queue if queue_type is Queue else queue.sync
    sync.enqueue(db, "hangs")
    release = threading.Event()
    default = inspect.signature(queue.work).parameters["time_limit"].default
    options: dict[str, Any] = {"lease": 10, "until_empty": True, "time_limit": default}

    async def hangs(value: str) -> None:
        await asyncio.sleep(5)  # cancelled at the limit

    try:
        if queue_type is Queue:
            summary = queue.work(db, lambda value: release.wait(5), handle_signals=False, **options)
        else:
            summary = asyncio.run(queue.work(db, hangs, **options))
    finally:
        release.set()
    assert (summary.timed_out, summary.dead_lettered) == (1, 1)
