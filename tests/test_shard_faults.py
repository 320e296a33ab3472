"""Attacks on sharded queues: consumer sessions that die or meet a clear() while they move
from shard to shard, commits whose outcome is unknown (1021) or that timed out (1031) on the
operations that span several shards, and threads taking while faults are injected at random.
Each test checks what a user relies on: nothing lost, nothing taken twice, the state after.

Memory only: the faults are the in-memory database's (:class:`fdbqueue.memory.Faults`), and
abandoned requests age with ``db.advance_time``."""

from __future__ import annotations

import collections
import functools
import threading
import time
from typing import Any

import pytest
from helpers import (
    TIMED_OUT,
    PoisonCodec,
    despite_timeouts,
    fault_on,
    or_timed_out,
    pass_time,
    write_into_shard,
)

from fdbqueue import LeaseNotHeldError, PriorityQueue, Queue, Subspace, memory
from fdbqueue._consuming.line import WITHDRAW_ATTEMPTS
from fdbqueue._consuming.sessions import REGISTERED
from fdbqueue._transactions.receipts import Receipts

SHARDS = 4
ABANDON_AFTER = 0.2


class Died(Exception):
    """The consumer's process died here (the session is dropped without being closed)."""


def shard_of(session: Any) -> int:
    """The shard whose line a sharded consumer session is in."""
    return int(session._end.ends.index(session._shard))


def into(queue: Queue[Any], shard: int, db: Any, values: list[Any]) -> None:
    """Enqueue ``values`` into one shard of ``queue`` (the shard's own write)."""
    for value in values:
        write_into_shard(db, queue, shard, value)


def on_move(consumer: Any, before_opening: Any = None, after_registering: Any = None) -> None:
    """When the sharded session ``consumer`` next moves: call ``before_opening()`` once it has
    closed its session in the old shard, before it opens one in the new; and
    ``after_registering()`` once its registration in the new shard's line has committed
    (at the start of the next attempt)."""
    move = consumer._move

    def moving(shard: Any, *, withdrawn: bool = False) -> None:
        consumer._move = move  # once
        if not withdrawn:  # its requests left with the read of the shards otherwise
            consumer._session.close()
        if before_opening is not None:
            before_opening()
        move(shard, withdrawn=True)
        attempt = consumer._session._attempt
        registered: list[bool] = []

        def attempt_then_act(*args: Any) -> Any:
            if any(registered) and after_registering is not None:
                consumer._session._attempt = attempt  # once
                after_registering()
            outcome = attempt(*args)
            registered.append(outcome[0] == REGISTERED)
            return outcome

        consumer._session._attempt = attempt_then_act

    consumer._move = moving


def die() -> None:
    raise Died


def home_emptied(db: Any, queue: Queue[Any], session: Any, in_b: list[str]) -> tuple[int, int]:
    """Put a0 and a1 in the session's shard A and ``in_b`` in the next shard B; the session
    takes a0 (its request then reserves a1's place in A's line), and another consumer takes
    a1, emptying A. Returns (A, B)."""
    a = shard_of(session)
    into(queue, a, db, ["a0", "a1"])
    into(queue, (a + 1) % SHARDS, db, in_b)
    assert session.take() == "a0"
    assert queue.requests_in_line(db) == 1
    assert queue._router.shards[a].ends["front"].take(db, False, None) == "a1"
    return a, (a + 1) % SHARDS


def drain_in_sessions(queue: Queue[Any], db: Any, count: int) -> list[Any]:
    """Take ``count`` values with a consumer session, letting versions pass when nothing is
    found (dead sessions' requests are abandoned after ``ABANDON_AFTER``); then close it."""
    taken: list[Any] = []
    with queue.consumer(db, prefetch=1, abandon_after=ABANDON_AFTER) as session:
        for _ in range(200):
            if len(taken) == count:
                break
            value = session.take()
            if value is None:
                pass_time(db, ABANDON_AFTER * 2)
            else:
                taken.append(value)
        assert session.take() is None
    return taken


# -- 1. a session that dies while it moves ---------------------------------------------------


@pytest.mark.parametrize("death", ["holding_in_a", "between_a_and_b", "took_in_b"])
def test_a_session_dying_mid_move_loses_and_repeats_nothing(death):
    """A move: the take in A finds nothing (the session's request stays in A's line), one
    transaction withdraws it and reads the shards, the session opens in B, and its first take
    there takes b0 and registers its next request. It dies before each step after the first."""
    db = memory.open(seed=1)
    subspace = Subspace(("dying-move",))
    dying_queue = Queue(subspace, shards=SHARDS)  # the dying process's own queue object
    queue = Queue(subspace, shards=SHARDS)  # another process's
    dying = dying_queue.consumer(db, prefetch=1, abandon_after=ABANDON_AFTER)
    a, b = home_emptied(db, queue, dying, ["b0", "b1", "b2"])
    expected = ["b0", "b1", "b2"]
    if death == "took_in_b":
        assert dying.take() == "b0"
        expected.remove("b0")
    else:
        if death == "holding_in_a":
            dying._session.line.withdraw = lambda *_arguments: die()
        else:
            on_move(dying, before_opening=die)
        with pytest.raises(Died):
            dying.take()
    in_line = {"holding_in_a": 1, "between_a_and_b": 0, "took_in_b": 1}[death]
    assert queue.requests_in_line(db) == in_line
    del dying  # dropped without close, as a dead process's

    into(queue, a, db, ["a2", "a3"])  # A holds items again: behind the dead request, if any
    for shard in range(SHARDS):
        if shard not in (a, b):
            into(queue, shard, db, [f"s{shard}"])
    expected += ["a2", "a3"] + [f"s{k}" for k in range(SHARDS) if k not in (a, b)]
    taken = drain_in_sessions(queue, db, len(expected))
    assert sorted(taken) == sorted(expected)  # each once, none lost
    assert queue.size(db) == 0 and queue.dequeue(db) is None
    assert queue.requests_in_line(db) == 0  # the dead request was cleared, not left behind


# -- 2. clear() while a session moves --------------------------------------------------------


@pytest.mark.parametrize("moment", ["between_a_and_b", "took_in_b"])
def test_clear_during_a_move_leaves_nothing_stale(moment):
    db = memory.open(seed=2)
    subspace = Subspace(("clear-move",))
    queue = Queue(subspace, shards=SHARDS)
    session = queue.consumer(db, prefetch=1, abandon_after=30)
    home_emptied(db, queue, session, ["b0", "b1"])

    def clear_in_another_thread() -> None:
        clearer = threading.Thread(target=queue.clear, args=(db,))
        clearer.start()
        clearer.join(10)
        assert not clearer.is_alive()

    cleared: list[bool] = []

    def clear_once() -> None:
        clear_in_another_thread()
        cleared.append(True)

    if moment == "between_a_and_b":
        on_move(session, before_opening=clear_once)
    else:
        on_move(session)
    value = session.take()
    if moment == "took_in_b":
        assert value == "b0"  # and the session holds the next place in B's line
        clear_in_another_thread()
    else:
        assert cleared and value is None  # B's items went with the clear
    assert session.take() is None
    assert queue.size(db) == 0 and queue.peek(db) is None
    values = [f"new{n}" for n in range(12)]
    for value in values:
        queue.enqueue(db, value)  # the shards in turn
    taken = []
    while (value := session.take()) is not None:
        taken.append(value)
    assert sorted(taken) == sorted(values)  # nothing stale held any line
    session.close()
    assert queue.size(db) == 0 and queue.requests_in_line(db) == 0
    with queue.consumer(db, prefetch=1) as other:  # nor does anything block another session
        queue.enqueue(db, "last")
        assert other.take() == "last"


def test_a_move_whose_withdrawal_timed_out_leaves_the_session_usable():
    """The withdrawal from A (with the read of the shards, or closing A's session) times out
    (1031) every time it is tried: the take raises 1031, as any call may, and the session
    must still take afterwards."""
    db = memory.open(seed=6)
    queue = Queue(Subspace(("withdraw-timed-out",)), shards=SHARDS)
    session = queue.consumer(db, prefetch=1, abandon_after=ABANDON_AFTER)
    home_emptied(db, queue, session, ["b0"])
    line = session._session.line
    withdraw = line.withdraw

    def withdraw_timing_out(*arguments: Any) -> Any:
        line.withdraw = withdraw  # once
        with fault_on("timed_out", applied=False, times=WITHDRAW_ATTEMPTS):
            return withdraw(*arguments)

    line.withdraw = withdraw_timing_out
    assert or_timed_out(session.take) is TIMED_OUT
    pass_time(db, ABANDON_AFTER * 2)  # the place left in A's line is abandoned
    assert session.take() == "b0"  # not "this consumer session is closed"
    session.close()
    assert queue.size(db) == 0


def test_a_move_whose_closing_withdrawal_fails_still_moves():
    """A move that closes the old session (not the withdrawal read together with the shards)
    and whose withdrawal raises: the error reaches the caller, and the session is in the new
    shard's line for its next call (the old requests are left to abandon_after)."""
    db = memory.open(seed=7)
    queue = Queue(Subspace(("close-fails",)), shards=SHARDS)
    session = queue.consumer(db, prefetch=1, abandon_after=ABANDON_AFTER)
    _a, b = home_emptied(db, queue, session, ["b0"])
    old = session._session

    def failing_close() -> None:
        raise memory.FDBError(TIMED_OUT)

    old.close = failing_close
    with pytest.raises(memory.FDBError):
        session._move(queue._router.shards[b].ends["front"])
    assert session._session is not old
    assert session.take() == "b0"
    session.close()


# -- 3. unknown results and timeouts on operations spanning shards ---------------------------

KINDS = ["commit_unknown_result", "timed_out"]


def spread(db: Any, queue: Queue[Any], per_shard: int) -> list[str]:
    """``per_shard`` values in each shard; returns them all."""
    values = []
    for shard in range(SHARDS):
        batch = [f"{shard}-{n}" for n in range(per_shard)]
        into(queue, shard, db, batch)
        values += batch
    return values


@pytest.mark.parametrize("applied", [True, False])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("times", [1, 2])
def test_take_many_across_shards_is_exactly_once(kind, applied, times):
    db = memory.open(seed=3)
    queue = Queue(Subspace(("faulty-take-many",)), shards=SHARDS)
    values = spread(db, queue, 3)
    with fault_on(kind, applied, times) as injected:
        first = or_timed_out(lambda: queue.dequeue_many(db, 8))  # three shards at least
    assert 1 <= len(injected) <= times  # an applied 1021's resolution finds its receipt
    db.settle()  # a commit left in flight lands now, or is dropped
    taken = [] if first is TIMED_OUT else list(first)
    assert len(taken) == (0 if first is TIMED_OUT else 8)
    while batch := queue.dequeue_many(db, 5):
        taken.extend(batch)
    assert sorted(taken) == sorted(values)
    assert queue.size(db) == 0 and queue.info(db).size == 0


@pytest.mark.parametrize("applied", [True, False])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("times", [1, 2])
def test_a_batch_spread_over_the_shards_lands_exactly_once(kind, applied, times):
    """enqueue_many of 600 values: runs into 4 shards in one transaction, exactly once by
    the first run's shard's receipts; with dedup ids, each id admitted once."""
    db = memory.open(seed=6)
    queue = Queue(Subspace(("faulty-spread",)), shards=SHARDS)
    values = [str(n) for n in range(600)]
    with fault_on(kind, applied, times) as injected:
        outcome = or_timed_out(lambda: queue.enqueue_many(db, values, dedup_ids=values))
    assert injected
    db.settle()
    if outcome is TIMED_OUT:  # 1031: surely not applied, or applied later: either way once
        outcome = queue.enqueue_many(db, values, dedup_ids=values)
    assert [shard.size > 0 for shard in queue.info(db).shards] == [True] * SHARDS
    taken: list[str] = []
    while batch := queue.dequeue_many(db, 200):
        taken.extend(batch)
    assert sorted(taken, key=int) == values  # every value once, none twice
    assert queue.enqueue_many(db, values[:3], dedup_ids=values[:3]) == [False] * 3


@pytest.mark.parametrize("applied", [True, False])
@pytest.mark.parametrize("kind", KINDS)
def test_claim_many_across_shards_is_exactly_once(kind, applied):
    db = memory.open(seed=4)
    queue = Queue(Subspace(("faulty-claim-many",)), shards=SHARDS)
    values = spread(db, queue, 3)
    with fault_on(kind, applied) as injected:
        first = or_timed_out(lambda: queue.claim_many(db, 8, 60))
    assert injected
    db.settle()
    leases = [] if first is TIMED_OUT else list(first)
    while batch := queue.claim_many(db, 5, 60):
        leases.extend(batch)
    assert sorted(lease.value for lease in leases) == sorted(values)
    assert len(queue.leases(db, None)) == len(values)  # none leased twice, none left out
    queue.ack_many(db, leases)
    assert queue.leases(db, None) == [] and queue.size(db) == 0
    assert queue.claim(db, 60) is None


@pytest.mark.parametrize("applied", [True, False])
@pytest.mark.parametrize("kind", KINDS)
def test_ack_many_of_leases_of_several_shards_is_exactly_once(kind, applied):
    db = memory.open(seed=5)
    queue = Queue(Subspace(("faulty-ack-many",)), shards=SHARDS)
    values = spread(db, queue, 2)
    leases = []
    while batch := queue.claim_many(db, 3, 60):
        leases.extend(batch)
    assert sorted(lease.value for lease in leases) == sorted(values)
    with fault_on(kind, applied) as injected:
        outcome = or_timed_out(lambda: queue.ack_many(db, leases))
    assert injected
    db.settle()
    if outcome is TIMED_OUT:  # no effect: the leases are still held, and the ack goes through
        assert len(queue.leases(db, None)) == len(values)
        queue.ack_many(db, leases)
    assert queue.leases(db, None) == [] and queue.size(db) == 0
    with pytest.raises(LeaseNotHeldError):  # acknowledged once: a second ack is refused
        queue.ack_many(db, leases[:1])
    assert queue.claim(db, 60) is None


@pytest.mark.parametrize("applied", [True, False])
def test_clear_between_a_gathering_take_and_its_resolution(applied, monkeypatch):
    """Another client clears the queue while a take across shards finds out whether its
    commit (1021) was applied: the values returned are exactly those it removed, and no
    retry takes items enqueued after the clear."""
    db = memory.open(seed=7)
    queue = Queue(Subspace(("clear-resolving",)), shards=SHARDS)
    values = spread(db, queue, 2)
    resolve = Receipts._resolve

    def clear_then_resolve(self: Receipts, database: Any, attempt: Any) -> tuple[bool, int]:
        queue.clear(db)
        return resolve(self, database, attempt)

    monkeypatch.setattr(Receipts, "_resolve", clear_then_resolve)
    with fault_on("commit_unknown_result", applied) as injected:
        taken = queue.dequeue_many(db, 5)
    monkeypatch.undo()
    assert injected
    assert len(taken) == (5 if applied else 0) and set(taken) <= set(values)
    assert queue.size(db) == 0 and queue.dequeue(db) is None
    later = [f"later{n}" for n in range(6)]
    for value in later:
        queue.enqueue(db, value)
    assert sorted(queue.dequeue_many(db, 10)) == later


@pytest.mark.parametrize("applied", [True, False])
@pytest.mark.parametrize("kind", KINDS)
def test_a_sharded_priority_pop_under_a_fault_takes_the_best_once(kind, applied):
    db = memory.open(seed=8)
    queue = PriorityQueue(Subspace(("faulty-priority",)), shards=SHARDS)
    for number in range(12):
        queue.push(db, number, priority=number % 4)  # the shards in turn
    with fault_on(kind, applied) as injected:
        first = or_timed_out(functools.partial(queue.pop_min, db))
        last = or_timed_out(functools.partial(queue.pop_max, db))
    assert len(injected) == 1
    db.settle()
    assert first is TIMED_OUT or first % 4 == 0  # the best priority of every shard
    assert last % 4 == 3  # after the fault: the commits go through
    taken = [last] if first is TIMED_OUT else [first, last]
    while (value := queue.pop_min(db)) is not None:
        taken.append(value)
    assert sorted(taken) == list(range(12))
    assert queue.size(db) == 0


@pytest.mark.parametrize("best", ["min", "max"])
def test_a_sharded_priority_claim_takes_the_best_priority_of_every_shard(best):
    db = memory.open(seed=9)
    queue = PriorityQueue(Subspace(("priority-claims",)), shards=SHARDS)
    for shard in range(SHARDS):  # shard k holds the priorities k and k + SHARDS
        for priority in (shard, shard + SHARDS):
            write_into_shard(db, queue, shard, priority, priority)
    top = best == "max"
    claimed = []
    for _ in range(2 * SHARDS):
        lease = queue.claim(db, 60, max=top)
        assert lease is not None
        claimed.append(lease.value)
    assert claimed == sorted(range(2 * SHARDS), reverse=top)  # as an unsharded queue claims


@pytest.mark.parametrize("operation", ["dequeue_many", "claim_many"])
def test_a_gathering_take_that_only_moved_poison_aside_is_exactly_once(operation):
    """A gathering take across shards that found only poison wrote (the moves to the dead
    letters) though it returns nothing: a 1031 on it must mean "no effect", as unsharded."""
    outcomes = set()
    for seed in range(40):
        db = memory.open(seed=seed)
        queue = Queue(Subspace(("poison-shards",)), shards=SHARDS, codec=PoisonCodec())
        into(queue, seed % SHARDS, db, [b"!bad"])
        with fault_on("timed_out", applied=bool(seed % 2)):
            many = getattr(queue, operation)
            arguments = (db, 3) if operation == "dequeue_many" else (db, 3, 10)
            timed_out = or_timed_out(functools.partial(many, *arguments)) is TIMED_OUT
        db.settle()  # land or drop the commit left in flight
        moved = len(queue.dead_letters(db))
        assert moved == (0 if timed_out else 1), (seed, timed_out, moved)
        outcomes.add(timed_out)
    assert outcomes == {True, False}


# -- 4. threads under random faults ----------------------------------------------------------

RANDOM_FAULTS = memory.Faults(
    not_committed=0.05, commit_unknown_result=0.08, timed_out=0.05, recovery=0.01
)


@pytest.mark.parametrize("how", ["plain", "sessions"])
def test_threads_take_every_item_once_under_random_faults(how):
    db = memory.open(faults=RANDOM_FAULTS, seed=17)
    queue = Queue(Subspace(("threads-faults",)), shards=8)
    producers, consumers, count = 2, 8, 160
    taken: list[int] = []
    lock = threading.Lock()
    produced = threading.Event()
    errors: list[BaseException] = []

    def produce(offset: int) -> None:
        for value in range(offset, count, producers):
            if value % 10 == offset:  # now and then a batch: one shard, one transaction
                despite_timeouts(lambda value=value: queue.enqueue_many(db, [value]))
            else:
                despite_timeouts(lambda value=value: queue.enqueue(db, value))

    def consume(number: int) -> None:
        session = None
        if how == "sessions":  # half of them keep a place in line between calls
            session = queue.consumer(db, prefetch=number % 2, abandon_after=1)
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            if session is not None:
                got = [despite_timeouts(session.take)]
            elif number % 2:
                got = despite_timeouts(lambda: queue.dequeue_many(db, 3))
            else:
                got = [despite_timeouts(lambda: queue.dequeue(db))]
            got = [value for value in got if value is not None]
            with lock:
                taken.extend(got)
            if not got and produced.is_set():
                break
        if session is not None:
            despite_timeouts(session.close)

    def guarded(target: Any, *args: Any) -> None:
        try:
            target(*args)
        except BaseException as error:  # reported below, with the thread's traceback lost
            errors.append(error)

    makers = [threading.Thread(target=guarded, args=(produce, n)) for n in range(producers)]
    takers = [threading.Thread(target=guarded, args=(consume, n)) for n in range(consumers)]
    for thread in makers + takers:
        thread.start()
    for thread in makers:
        thread.join(40)
    produced.set()
    for thread in takers:
        thread.join(45)
    assert not errors, errors
    db.faults = memory.Faults()
    db.settle()
    taken += queue.dequeue_many(db, count)  # a consumer may have stopped before the last
    duplicates = [v for v, n in collections.Counter(taken).items() if n > 1]
    assert duplicates == []
    assert sorted(taken) == list(range(count))
    assert queue.size(db) == 0
    stats = db.stats()
    assert stats["injected_commit_unknown_result"] > 0 and stats["injected_timed_out"] > 0


@pytest.mark.parametrize("applied", [True, False])
@pytest.mark.parametrize("kind", KINDS)
def test_a_run_moved_between_shards_under_faults_keeps_every_item_once(kind, applied):
    """A consumer whose home is empty moves a run of a crowded shard into it (one
    transaction, no receipt: moving twice is harmless); an unknown result or a timeout of
    that move loses and duplicates nothing."""
    db = memory.open(seed=8)
    queue = Queue(Subspace(("faulty-move",)), shards=SHARDS)
    for n in range(600):
        write_into_shard(db, queue, 0, n)
    first: list[Any] = []
    second: list[Any] = []
    settled, done = threading.Event(), threading.Event()
    injected: list[int] = []

    def first_consumer() -> None:  # at home in shard 0, alive while the second moves
        first.append(queue.dequeue(db))
        settled.set()
        done.wait(30)

    def second_consumer() -> None:
        settled.wait(30)
        with fault_on(kind, applied) as faults:
            second.append(or_timed_out(lambda: queue.dequeue(db)))
        injected.extend(faults)

    threads = [threading.Thread(target=first_consumer), threading.Thread(target=second_consumer)]
    for thread in threads:
        thread.start()
    threads[1].join(30)
    done.set()
    threads[0].join(30)
    assert injected  # the move's commit met the fault
    db.settle()
    taken = [value for value in first + second if value is not TIMED_OUT]
    while batch := queue.dequeue_many(db, 200):
        taken.extend(batch)
    assert sorted(taken) == list(range(600))
    assert queue.size(db) == 0
