"""Pausing a queue's consumers: ``pause``, ``resume`` and ``QueueInfo.paused``.

Every shape of tests/test_matrix.py (Queue and PriorityQueue, 1 and 4 shards, plain,
``high_contention`` and consumer sessions, sync and asyncio): while paused, every take and
claim finds nothing and writes nothing, blocking ones wait until ``resume`` wakes them,
producers go on and peeks, sizes and ``info`` are unchanged. And what pausing costs a take:
at most one key read more per transaction, counted with the in-memory database's
``db.stats()`` against the same takes with the paused key's read left out.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from test_matrix import ITEMS, SHAPES, Shape, Spec, shapes

import fdbqueue
from fdbqueue import Subspace, memory, metrics
from fdbqueue._storage.pause import Pause

SYNC_SHAPES = [spec for spec in SHAPES if spec.api == "sync"]
#: The shapes of the tests that wait in real time: the sync ones by default, the asyncio ones
#: with the slow tests (CI runs them).
WAITING_SHAPES = [
    spec if spec.api == "sync" else pytest.param(spec, marks=pytest.mark.slow("waits in real time"))
    for spec in SHAPES
]


@pytest.fixture
def shape(request: pytest.FixtureRequest) -> Iterator[Shape]:
    """A queue of one shape (tests/test_matrix.py's), closed after the test."""
    made = Shape(request.param)
    yield made
    made.close()


def take_many(shape: Shape, n: int) -> list[Any]:
    """``dequeue_many`` (a Queue), or ``pop_many`` (a PriorityQueue)."""
    if shape.spec.priority:
        return list(shape.run(shape.queue.pop_many(shape.db, n)))
    return list(shape.take_many(n))


def pause(shape: Shape) -> Any:
    return shape.run(shape.queue.pause(shape.db))


def resume(shape: Shape) -> Any:
    return shape.run(shape.queue.resume(shape.db))


# -- what a paused queue does -----------------------------------------------------------------


@shapes(SHAPES)
def test_paused_takes_and_claims_find_nothing_and_write_nothing(shape: Shape) -> None:
    shape.put_items(ITEMS)
    assert shape.info().paused is False
    assert pause(shape) is True
    front = shape.peek()
    shape.db.reset_stats()
    assert shape.take() is None
    assert take_many(shape, 2) == []
    assert shape.claim(30.0) is None
    assert shape.claim_many(2, 30.0) == []
    stats = shape.db.stats()
    assert (stats["commits"], stats["keys_written"]) == (0, 0)  # no receipt either
    # Peeks, sizes and info are unaffected.
    assert shape.size() == len(ITEMS)
    assert front is not None
    if shape.peeks_for_the_taker:  # else each call peeks at another consumer's home
        assert shape.peek() == front
    info = shape.info()
    assert info.paused is True and info.size == len(ITEMS)
    assert all(one.paused for one in info.shards)
    assert resume(shape) is True
    assert shape.info().paused is False
    shape.check_takes([shape.take() for _ in ITEMS], ITEMS)


@shapes(SHAPES)
def test_producers_go_on_while_paused(shape: Shape) -> None:
    pause(shape)
    shape.put_items(ITEMS)
    assert shape.size() == len(ITEMS)
    assert shape.take() is None
    resume(shape)
    shape.check_takes([shape.take() for _ in ITEMS], ITEMS)


@shapes(SHAPES)
def test_pause_and_resume_are_idempotent(shape: Shape) -> None:
    assert resume(shape) is False  # not paused
    assert pause(shape) is True
    shape.db.reset_stats()
    assert pause(shape) is False  # paused already: nothing written, no receipt
    assert shape.db.stats()["keys_written"] == 0
    assert resume(shape) is True
    assert resume(shape) is False
    shape.put("x")
    assert shape.take() == "x"


@shapes(WAITING_SHAPES)
@pytest.mark.parametrize("verb", ["take", "claim"])
def test_a_blocked_take_or_claim_waits_until_resume_wakes_it(shape: Shape, verb: str) -> None:
    shape.put("x")
    pause(shape)
    timer = threading.Timer(0.2, shape.sync_queue.resume, (shape.db,))
    started = time.monotonic()
    timer.start()
    try:
        if verb == "take":
            value = shape.take(block=True, timeout=10.0)
        else:
            lease = shape.claim(30.0, block=True, timeout=10.0)
            value = None if lease is None else lease.value
    finally:
        timer.join()
    assert value == "x"
    assert 0.2 <= time.monotonic() - started < 5.0


@shapes(SYNC_SHAPES)
def test_a_blocked_take_of_a_paused_queue_does_not_spin_on_an_expired_lease(
    shape: Shape,
) -> None:
    # An expired lease would make its item takeable without any write: a blocked take wakes
    # when one expires. Paused, it must not (its take would find nothing, again and again).
    shape.put("x")
    assert shape.claim(0.2) is not None
    assert shape.take() is None  # it notes when the lease expires: a blocked take wakes then
    pause(shape)
    shape.advance(0.3)  # the lease has expired
    shape.db.reset_stats()
    assert shape.take(block=True, timeout=0.3) is None
    assert shape.db.stats()["transactions"] < 20  # a few attempts, not a loop (hundreds)
    assert shape.db.stats()["keys_written"] == 0
    resume(shape)
    assert shape.take() == "x"


def is_paused(shape: Shape) -> Any:
    return shape.run(shape.queue.is_paused(shape.db))


@shapes(SHAPES)
def test_the_worker_loop_claims_nothing_while_paused_and_says_so(
    shape: Shape, caplog: pytest.LogCaptureFixture
) -> None:
    """An ``until_empty`` run on a paused queue ends at once: its summary has ``paused`` and
    a WARNING names the queue (not zeros and silence: issue 43 item 19)."""
    shape.put_items(ITEMS)
    assert is_paused(shape) is False
    pause(shape)
    assert is_paused(shape) is True
    handled: list[Any] = []
    with caplog.at_level("WARNING", logger="fdbqueue.worker"):
        summary = shape.work(handled.append, lease=30.0, until_empty=True, handle_signals=False)
    assert (summary.succeeded, handled, summary.paused) == (0, [], True)
    name = metrics.queue_name(shape.sync_queue.subspace.key())
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        f"queue {name} is paused: the until_empty run ends here, its items not taken (resume "
        "it: queue.resume(db), or fdbqueue resume)"
    ]
    assert shape.size() == len(ITEMS)
    resume(shape)
    assert is_paused(shape) is False
    summary = shape.work(handled.append, lease=30.0, until_empty=True, handle_signals=False)
    assert summary.succeeded == len(ITEMS) and summary.paused is False
    assert sorted(handled) == sorted(value for value, _ in ITEMS)


@pytest.mark.parametrize("shards", [1, 4])
@pytest.mark.parametrize("kind", [fdbqueue.Queue, fdbqueue.PriorityQueue])
def test_a_prefetching_session_hands_out_nothing_while_paused(kind: Any, shards: int) -> None:
    db = memory.open()
    queue = kind(Subspace(("pause", "prefetch")), shards=shards)
    for value, priority in ITEMS:
        queue.enqueue(db, value) if kind is fdbqueue.Queue else queue.push(db, value, priority)
    with queue.consumer(db, prefetch=3) as session:
        assert session.take() is not None  # its places in line are registered now
        queue.pause(db)
        db.reset_stats()
        assert session.take() is None
        assert session.claim(30.0) is None
        assert db.stats()["keys_written"] == 0
        queue.resume(db)
        taken = [session.take() for _ in ITEMS[1:]]
    assert None not in taken and queue.size(db) == 0


@pytest.mark.parametrize("kind", [fdbqueue.Queue, fdbqueue.PriorityQueue])
def test_in_a_transaction_a_pause_holds_for_the_takes_after_it(kind: Any) -> None:
    db = memory.open()
    queue = kind(Subspace(("pause", "in-transaction")))
    queue.enqueue(db, "x") if kind is fdbqueue.Queue else queue.push(db, "x", 0)
    take = queue.dequeue if kind is fdbqueue.Queue else queue.pop_min

    @fdbqueue.transactional
    def pause_then_take(tr: Any) -> Any:
        assert queue.pause(tr) is True
        return take(tr)

    assert pause_then_take(db) is None
    assert queue.info(db).paused is True

    @fdbqueue.transactional
    def resume_then_take(tr: Any) -> Any:
        assert queue.resume(tr) is True
        return take(tr)

    assert resume_then_take(db) == "x"


def test_a_take_that_read_before_the_pause_commits_may_still_take() -> None:
    # The paused key is a snapshot read: a take whose read version is before the pause's
    # commit does not see it, and nothing makes the two conflict (one transaction's worth).
    db = memory.open()
    queue = fdbqueue.Queue(Subspace(("pause", "race")))
    queue.enqueue_many(db, ["a", "b"])
    tr = db.create_transaction()
    tr.get_read_version().wait()
    assert queue.pause(db) is True
    assert queue.dequeue(tr) == "a"
    tr.commit().wait()  # no conflict
    assert queue.dequeue(db) is None  # the takes after the pause find nothing
    assert queue.size(db) == 1


@pytest.mark.parametrize("shards", [1, 4])
def test_a_paused_queue_stays_paused_through_clear(shards: int) -> None:
    db = memory.open()
    queue = fdbqueue.Queue(Subspace(("pause", "clear")), shards=shards)
    queue.enqueue(db, "x")
    queue.pause(db)
    queue.clear(db)
    assert queue.info(db).paused is True
    queue.enqueue(db, "y")
    assert queue.dequeue(db) is None
    queue.resume(db)
    assert queue.dequeue(db) == "y"


def test_a_sharded_queue_has_one_paused_key() -> None:
    db = memory.open()
    space = Subspace(("pause", "one-key"))
    queue = fdbqueue.Queue(space, shards=4)
    queue.pause(db)
    metadata = space.key() + b"\xff"
    keys = [kv.key for kv in db.get_range(space.key(), space.key() + b"\xff\xff")]
    assert [k for k in keys if k.endswith(fdbqueue.Subspace(("paused",)).key())] == [
        metadata + fdbqueue.Subspace(("paused",)).key()
    ]


def test_pause_checks_its_arguments_and_the_queue_type() -> None:
    db = memory.open()
    space = Subspace(("pause", "type"))
    fdbqueue.PriorityQueue(space).push(db, "x", 1)
    with pytest.raises(fdbqueue.QueueTypeError):
        fdbqueue.Queue(space).pause(db)
    with pytest.raises(TypeError):
        fdbqueue.Queue(space).pause("not a database")
    tr = db.create_transaction()
    with pytest.raises(TypeError):
        fdbqueue.PriorityQueue(space).pause(tr.snapshot)


# -- what pausing costs a take ----------------------------------------------------------------


class _Absent:
    """What the paused key's read returns when it is left out (the cost before pausing)."""

    def present(self) -> bool:
        return False


def _costs(
    spec: Spec,
    operation: Callable[[Any, Any, Any], Any],
    without_pause_read: bool,
    paused_once: bool = True,
) -> list[tuple[int, int, int, bool]]:
    """Per call of ``operation(queue, db, session)``, nine calls over eight items: the reads,
    keys read and transactions it cost, and whether it returned something. With
    ``paused_once``, the queue was paused and resumed before."""
    real_look = Pause.look
    if without_pause_read:
        Pause.look = lambda self, tr: _Absent()  # type: ignore[method-assign]
    try:
        random.seed(38)  # the same shards chosen, with and without the read
        db = memory.open()
        kind = fdbqueue.PriorityQueue if spec.priority else fdbqueue.Queue
        queue: Any = kind(
            Subspace(("pause", "cost")),
            shards=spec.shards,
            high_contention=spec.mode == "contention",
        )
        for k in range(8):
            queue.push(db, k, k) if spec.priority else queue.enqueue(db, k)
        if paused_once:
            queue.pause(db)
            queue.resume(db)
        session = queue.consumer(db, prefetch=1) if spec.mode == "session" else None
        costs = []
        for _ in range(9):
            db.reset_stats()
            found = operation(queue, db, session)
            stats = db.stats()
            costs.append((stats["reads"], stats["keys_read"], stats["transactions"], bool(found)))
        if session is not None:
            session.close()
        return costs
    finally:
        Pause.look = real_look  # type: ignore[method-assign]


def _take(queue: Any, db: Any, session: Any) -> Any:
    if session is not None:
        return session.take()
    return queue.pop_min(db) if isinstance(queue, fdbqueue.PriorityQueue) else queue.dequeue(db)


def _claim(queue: Any, db: Any, session: Any) -> Any:
    return session.claim(30.0) if session is not None else queue.claim(db, 30.0)


def _take_many(queue: Any, db: Any, session: Any) -> Any:
    if isinstance(queue, fdbqueue.PriorityQueue):
        return queue.pop_many(db, 2)
    return queue.dequeue_many(db, 2)


def _claim_many(queue: Any, db: Any, session: Any) -> Any:
    return queue.claim_many(db, 2, 30.0)


@pytest.mark.parametrize(
    "operation", [_take, _claim, _take_many, _claim_many], ids=lambda f: f.__name__[1:]
)
@pytest.mark.parametrize("spec", SYNC_SHAPES, ids=lambda spec: spec.id)
def test_pausing_costs_a_take_one_key_read_per_transaction(spec: Spec, operation: Any) -> None:
    # On a queue paused once, the same calls on the same items, with the paused key's read
    # left out (what a take cost before pausing existed) and with it: each call reads at
    # most one key more per
    # transaction, and exactly one more when it is one transaction (every take of an
    # unsharded queue, of a sharded PriorityQueue, and a sharded Queue's take at its home;
    # a sharded Queue's take that changes shards runs a read-only transaction choosing the
    # shard, then the take: one key each).
    before = _costs(spec, operation, without_pause_read=True)
    after = _costs(spec, operation, without_pause_read=False)
    assert [b[2:] for b in before] == [a[2:] for a in after]  # the same calls, results
    assert any(found for *_, found in after)
    for (reads, keys, transactions, _), (more_reads, more_keys, _, _) in zip(
        before, after, strict=True
    ):
        assert 1 <= more_reads - reads <= transactions
        assert 1 <= more_keys - keys <= transactions
        if transactions == 1:
            assert (more_reads - reads, more_keys - keys) == (1, 1)


@pytest.mark.parametrize(
    "operation", [_take, _claim, _take_many, _claim_many], ids=lambda f: f.__name__[1:]
)
@pytest.mark.parametrize(
    "spec",
    [spec for spec in SYNC_SHAPES if spec.mode == "plain" and spec.shards == 1],
    ids=lambda spec: spec.id,
)
def test_a_queue_never_paused_reads_nothing_for_pausing(spec: Spec, operation: Any) -> None:
    # Its feature record has no pause bit (fdbqueue._storage.features): its takes read
    # exactly what they read with the paused key's read left out. (The takes of several
    # shards, which choose among them, still read it.)
    never = _costs(spec, operation, without_pause_read=False, paused_once=False)
    assert never == _costs(spec, operation, without_pause_read=True, paused_once=False)
    assert any(found for *_, found in never)
