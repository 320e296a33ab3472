"""Home shards and turns: a process's consumers of a sharded queue spread over the shards,
stay where items are, move when their shard is empty, and take turns where they share one,
so that one process's plain takes do not conflict with each other."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import Counter
from typing import Any

import pytest
from helpers import run, run_threads, write_into_shard

import fdbqueue.asyncio as fa
from fdbqueue import Queue, Subspace, memory
from fdbqueue._queues import shard_homes
from fdbqueue._queues.shard_homes import Homes, Turns
from fdbqueue._queues.sharded_consumer import PLACES_IN_FLIGHT, PLACES_PER_SHARD


def test_consumers_of_one_process_get_different_homes_until_every_shard_has_one():
    homes = Homes(4)
    owners = [threading.Thread(target=time.sleep, args=(1,)) for _ in range(8)]
    for owner in owners:
        owner.start()
    try:
        first = [homes.home(owner) for owner in owners[:4]]
        assert sorted(first) == [0, 1, 2, 3]
        assert Counter(homes.home(owner) for owner in owners).most_common(1)[0][1] == 2
        assert homes.home(owners[0]) == first[0]  # a home is kept
    finally:
        for owner in owners:
            owner.join()


def test_a_thread_that_ended_and_a_session_that_left_no_longer_count():
    homes = Homes(2)
    ended = threading.Thread(target=lambda: None)
    ended.start()
    ended.join()
    assert homes.settle(ended, [0]) == 0
    alive = threading.current_thread()
    assert homes.settle(alive, [0, 1]) in (0, 1)
    assert homes.ranked(object(), [0, 1])[0] != homes.home(alive)  # the ended one is ignored

    class Session:
        pass

    session = Session()
    homes.move(session, 1 - homes.home(alive))
    assert sorted(homes.ranked(object(), [0, 1])) == [0, 1]
    homes.leave(session)
    assert homes.ranked(object(), [0, 1])[0] != homes.home(alive)


def test_settling_among_no_shard_is_refused():
    with pytest.raises(ValueError, match="no shard"):
        Homes(2).settle(object(), [])


def test_turns_are_served_in_the_order_they_were_asked_for():
    turns = Turns()
    served: list[int] = []
    holding = threading.Event()
    release = threading.Event()

    def first() -> None:
        with turns.turn():
            holding.set()
            release.wait(5)
            served.append(0)

    def later(number: int) -> None:
        with turns.turn():
            served.append(number)

    threads = [threading.Thread(target=first)]
    threads[0].start()
    assert holding.wait(5)
    for number in range(1, 6):
        thread = threading.Thread(target=later, args=(number,))
        thread.start()
        threads.append(thread)
        time.sleep(0.02)  # each asks after the one before
    release.set()
    for thread in threads:
        thread.join(5)
    assert served == [0, 1, 2, 3, 4, 5]


def test_a_turn_passes_on_when_its_holder_raises():
    turns = Turns()
    with pytest.raises(RuntimeError), turns.turn():
        raise RuntimeError("boom")
    done = threading.Event()
    thread = threading.Thread(target=lambda: (turns.turn().__enter__(), done.set()))
    thread.start()
    assert done.wait(5)


@pytest.mark.parametrize("threads", [4, 16])
def test_one_process_draining_a_sharded_queue_with_plain_takes_never_conflicts(threads):
    """More threads than shards (4 per shard) or as many: they settle in their own shards or
    take turns in a shared one; every item is taken once and no transaction conflicts."""
    db, queue = loaded("homes", 200, commit=0.002)
    taken: list[int] = []
    lock = threading.Lock()

    def consume() -> None:
        while (value := queue.dequeue(db)) is not None:
            with lock:
                taken.append(value)

    run_threads(consume, threads)
    assert sorted(taken) == list(range(200))
    assert db.stats()["conflicts"] == 0


@pytest.mark.parametrize("session", [False, True], ids=["dequeue", "session"])
def test_fewer_consumers_than_shards_still_visit_every_shard_in_turn(monkeypatch, session):
    """With a backlog in every shard, a consumer moves on after its stay, to the shard visited
    longest ago: no shard waits while another is drained (a stay of 3 takes here)."""
    monkeypatch.setattr(shard_homes, "STAY_TAKES", 3)
    db = memory.open()
    queue = Queue(Subspace(("stays",)), shards=4)
    for value in range(40):
        queue.enqueue(db, value)  # the shards in turn: value % 4 names the shard (up to a shift)
    if session:
        with queue.consumer(db, prefetch=1) as consumer:
            taken = [consumer.dequeue() for _ in range(12)]
    else:
        taken = [queue.dequeue(db) for _ in range(12)]
    runs = [{value % 4 for value in taken[start : start + 3]} for start in range(0, 12, 3)]
    assert all(len(run) == 1 for run in runs)  # a stay takes from one shard
    assert {next(iter(run)) for run in runs} == {0, 1, 2, 3}  # four stays, four shards
    assert all(b - a == 4 for run in range(4) for a, b in itertools.pairwise(taken[run * 3 :][:3]))


def test_threads_claiming_from_a_sharded_queue_get_every_item_once():
    db, queue = loaded("claims", 120, commit=0.001)
    taken: list[int] = []
    lock = threading.Lock()

    def consume() -> None:
        while (lease := queue.claim(db, lease=30)) is not None:
            queue.ack(db, lease)
            with lock:
                taken.append(lease.value)

    run_threads(consume, 6)
    assert sorted(taken) == list(range(120))
    assert queue.size(db) == 0 and queue.leases(db) == []


def test_asyncio_tasks_draining_a_sharded_queue_each_have_a_home_and_never_block_the_loop():
    """fdbqueue.asyncio runs every call on the event loop's thread: its tasks are the
    consumers (not the one thread), and a task never waits for a turn (the holder of the turn
    could not run again while the loop's thread waited)."""
    db = memory.open(latency=memory.Latency(read=0.001, commit=0.002))
    space = Subspace(("asyncio-homes",))
    queue = Queue(space, shards=4)
    for start in range(0, 160, 10):
        queue.enqueue_many(db, list(range(start, start + 10)))
    shared = fa.Queue(space, shards=4)

    async def consume() -> list[int]:
        taken = []
        while (value := await shared.dequeue(db)) is not None:
            taken.append(value)
        return taken

    async def main() -> list[list[int]]:
        return await asyncio.gather(*(consume() for _ in range(8)))

    results: list[list[list[int]]] = []
    loop = threading.Thread(target=lambda: results.append(asyncio.run(main())), daemon=True)
    loop.start()
    loop.join(30)
    assert not loop.is_alive(), "the event loop's thread is blocked"
    (taken,) = results
    assert sorted(value for values in taken for value in values) == list(range(160))
    assert sum(1 for values in taken if values) >= 4  # spread, not all in one task's shard


class Interrupted(BaseException):
    """Ends a wait, as a KeyboardInterrupt would."""


@pytest.mark.parametrize("handed", [False, True], ids=["before its turn", "as its turn came"])
def test_a_waiter_that_leaves_with_an_exception_does_not_stop_the_turns_after_it(handed):
    """A waiter whose wait ends in an exception, before its turn came or just as it was
    handed the turn (before it knew): the turns after it still come."""
    turns = Turns()
    holding, release, leaver_waits = threading.Event(), threading.Event(), threading.Event()
    served: list[str] = []

    def holder() -> None:
        with turns.turn():
            holding.set()
            release.wait(5)

    def interrupted(waiter: threading.Lock) -> None:
        leaver_waits.set()
        if handed:
            waiter.acquire()  # the turn is handed over, then the wait ends
        raise Interrupted

    def leaver() -> None:
        try:
            with turns.turn():
                served.append("leaver")
        except Interrupted:
            pass

    def later() -> None:
        with turns.turn():
            served.append("later")

    first = threading.Thread(target=holder)
    first.start()
    assert holding.wait(5)
    turns._wait = interrupted  # type: ignore[method-assign]
    leaving = threading.Thread(target=leaver)
    leaving.start()
    assert leaver_waits.wait(5)
    del turns._wait  # the later waiter waits as usual
    waiting = threading.Thread(target=later)
    waiting.start()
    time.sleep(0.05)  # it waits, after the leaver
    release.set()
    for thread in (first, leaving, waiting):
        thread.join(5)
    assert served == ["later"]


def test_sessions_of_one_process_beyond_its_places_share_them():
    """32 sessions on 4 shards: the first 16 open places of their own (4 in each shard's
    line), the other 16 take turns with them, so the lines hold 16 requests of this process,
    not 32; every item is taken once, and no transaction conflicts."""
    db, queue = loaded("shared-sessions", 320, commit=0.001)
    in_line = drain_with_sessions(db, queue, 320, 32)
    assert in_line == PLACES_IN_FLIGHT == 16


def test_sessions_gathered_at_one_shard_share_eight_places():
    """Every item in shard 0 of 4: the 16 sessions of one process all move there and share
    eight sessions (places in its line), not one for all (one take in flight) nor one each
    (a long line to read); every item is taken once, and no transaction conflicts."""
    db = memory.open(latency=memory.Latency(commit=0.001))
    queue: Queue[Any] = Queue(Subspace(("gathered-sessions",)), shards=4)
    for value in range(160):
        write_into_shard(db, queue, 0, value)
    in_line = drain_with_sessions(db, queue, 160, 16)
    assert in_line == PLACES_PER_SHARD == 8  # all in shard 0


def drain_with_sessions(db: Any, queue: Queue[Any], items: int, sessions: int) -> int:
    """Drain ``queue`` (holding 0 to ``items - 1``) with ``sessions`` sessions
    (``prefetch=1``) of threads of this process; return how many requests were in line once
    each had taken one. Asserted: every item taken once, no request left in line (the last to
    leave each shared session withdrew), no transaction conflicted once every session had
    taken its first item (before, a session finding the line empty takes the head at once,
    as ``docs/high-contention.rst`` says, so two opening together may conflict: the loser
    registers; at most once per session)."""
    taken: list[int] = []
    in_line: list[int] = []
    conflicts: list[int] = []
    lock = threading.Lock()
    all_took_one = threading.Barrier(sessions)

    def consume() -> None:
        with queue.consumer(db, prefetch=1) as session:
            first = session.dequeue()
            with lock:
                taken.append(first)
            if all_took_one.wait(10) == 0:
                in_line.append(queue.requests_in_line(db))
                conflicts.append(db.stats()["conflicts"])
            all_took_one.wait(10)
            while (value := session.dequeue()) is not None:
                with lock:
                    taken.append(value)

    run_threads(consume, sessions, 30)
    assert sorted(taken) == list(range(items))
    assert queue.requests_in_line(db) == 0
    (opening,) = conflicts
    assert opening < sessions
    assert db.stats()["conflicts"] == opening  # none in line
    (counted,) = in_line
    return counted


def loaded(name: str, items: int, commit: float) -> tuple[Any, Queue[Any]]:
    """A database with ``commit`` seconds of commit latency and a 4-shard queue holding
    0 to ``items - 1``, enqueued ten at a time (a batch goes to one shard, the shards in turn)."""
    db = memory.open(latency=memory.Latency(commit=commit))
    queue: Queue[Any] = Queue(Subspace((name,)), shards=4)
    for start in range(0, items, 10):
        queue.enqueue_many(db, list(range(start, start + 10)))
    return db, queue


class Consumer:
    """A consumer as Homes knows one (a key a weak reference can hold)."""


def test_a_consumer_leaving_its_home_looks_elsewhere_first():
    """The home has just found nothing for this consumer (its items may be another's in
    line): the shards looked at first are others, so a shard holding items is found even
    when the home was visited longest ago (it was sampled, and held the move, before)."""
    db = memory.open()
    queue = Queue(Subspace(("elsewhere",)), shards=4)
    end = queue._front
    for shard in (0, 1):
        write_into_shard(db, queue, shard, f"in {shard}")
    consumer = Consumer()
    end.homes.move(consumer, 0)  # home: shard 0, visited first
    for shard in (2, 3, 1):  # the others visited since, by consumers now gone
        passing = Consumer()
        end.homes.move(passing, shard)
        end.homes.leave(passing)
    found = run(db, lambda tr: end.holding(tr, consumer))
    assert end.ends[1] in found


def test_consumers_that_move_at_once_do_not_pile_into_one_sample(monkeypatch):
    """Two consumers settle in the shards a third sampled while it read them: it reads every
    shard and settles where none of its process is, not with them."""
    db = memory.open()
    queue = Queue(Subspace(("sample-taken",)), shards=4)
    end = queue._front
    for shard in (1, 2, 3):
        write_into_shard(db, queue, shard, f"in {shard}")
    mover = Consumer()
    end.homes.move(mover, 0)  # its home, empty
    arrived: list[Consumer] = []
    candidates = end._candidates

    def sampled_then_taken(tr, every_shard, among=None, taking=True):
        found = candidates(tr, every_shard, among, taking=taking)
        if among is not None:  # meanwhile, others of the process settle in the sample
            for sampled in among:
                arrived.append(Consumer())
                end.homes.move(arrived[-1], end.ends.index(sampled))
        return found

    monkeypatch.setattr(end, "_candidates", sampled_then_taken)
    first = run(db, lambda tr: end.holding(tr, mover))[0]
    assert len(arrived) == 2
    assert end.homes.fewest(mover, [end.ends.index(first)]) == 0  # a shard of its own
