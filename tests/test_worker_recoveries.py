"""The worker loop under cluster recoveries and unknown results (issue 31): plain and
transactional, sync and asyncio, one and four shards, with groups, for several seeds.

Each recovery fails a commit with 1021 (applied or not) and moves versions about 100 s on, so
every lease in flight expires at once. What must hold all the same: nothing is lost, every
item is processed; with ``transactional=True`` each item's effect commits exactly once and a
group's effects commit in the group's order (a handler never runs for a lease its group has
moved past); and ``until_empty`` ends (a ``faulthandler`` dump of every thread if not).
"""

from __future__ import annotations

import asyncio
import collections
import faulthandler
import struct
import sys
import threading
import time
from typing import Any

import pytest

import fdbqueue.asyncio as fa
from fdbqueue import Queue, Subspace, memory, transactional

FAULTS = memory.Faults(recovery=0.05, commit_unknown_result=0.1, recovery_seconds=0.005)
GROUPS = ["g0", "g1", "g2"]
PER_GROUP = 15
#: Seconds a run may take before it counts as stuck.
BOUND = 120.0


def load(db: Any, space: Subspace, shards: int) -> Queue[Any]:
    queue: Queue[Any] = Queue(space, shards=shards)
    for group in GROUPS:
        queue.enqueue_many(db, [(group, n) for n in range(PER_GROUP)], group=group)
    return queue


def run_bounded(run: Any) -> None:
    """``run()`` in a thread; fail with every thread's stack if it does not end in BOUND."""
    failures: list[BaseException] = []

    def target() -> None:
        try:
            run()
        except BaseException as error:  # reported below
            failures.append(error)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(BOUND)
    if thread.is_alive():
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        pytest.fail(f"the worker loop did not end within {BOUND} s (until_empty)")
    if failures:
        raise failures[0]


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("shards", [1, 4])
@pytest.mark.parametrize("api", ["sync", "asyncio"])
def test_transactional_work_under_recoveries(seed, shards, api):
    db = memory.open(seed=seed)
    space = Subspace(("worker-recoveries", api, shards, seed))
    effects = space["effects"]
    queue = load(db, space["queue"], shards)
    disorder: list[Any] = []

    def handler(tr: Any, value: Any) -> None:
        group, n = value
        last = tr[effects.pack(("last", group))]
        done = struct.unpack("<q", bytes(last))[0] if last.present() else -1
        if n != done + 1:
            # the handler runs for an item its group has moved past (or not reached): kept
            # whether or not the transaction commits, as any effect outside it would be
            disorder.append((group, done, n))
        tr[effects.pack(("last", group))] = struct.pack("<q", n)
        tr.add(effects.pack(("count", group, n)), struct.pack("<q", 1))
        tr[effects.pack(("order", group, n))] = struct.pack("<q", len(disorder))

    db.faults = FAULTS
    try:
        if api == "sync":
            run_bounded(
                lambda: queue.work(
                    db, handler, lease=30, concurrency=3, until_empty=True, transactional=True
                )
            )
        else:
            aqueue = fa.Queue(space["queue"], shards=shards)
            run_bounded(
                lambda: asyncio.run(
                    aqueue.work(
                        db, handler, lease=30, concurrency=3, until_empty=True, transactional=True
                    )
                )
            )
    finally:
        db.faults = memory.Faults()
    assert db.stats()["injected_recovery"] > 0

    @transactional
    def read(tr: Any) -> tuple[dict[Any, int], dict[str, int]]:
        counts = {
            tuple(effects.unpack(kv.key)[1:]): struct.unpack("<q", bytes(kv.value))[0]
            for kv in tr.get_range_startswith(effects.pack(("count",)))
        }
        last = {
            effects.unpack(kv.key)[1]: struct.unpack("<q", bytes(kv.value))[0]
            for kv in tr.get_range_startswith(effects.pack(("last",)))
        }
        return counts, last

    counts, last = read(db)
    expected = {(group, n): 1 for group in GROUPS for n in range(PER_GROUP)}
    assert counts == expected  # every effect exactly once, nothing lost
    assert last == dict.fromkeys(GROUPS, PER_GROUP - 1)
    # a committed effect always followed its group's previous one (order within the group)
    assert read_disorder(db, effects) == 0
    assert queue.size(db) == 0 and queue.leases(db) == []
    assert disorder == []  # the handler ran only for the item next in its group


def read_disorder(db: Any, effects: Subspace) -> int:
    """Committed effects that did not follow their group's previous one."""

    @transactional
    def read(tr: Any) -> int:
        done: dict[str, int] = collections.defaultdict(lambda: -1)
        bad = 0
        for kv in tr.get_range_startswith(effects.pack(("order",))):
            group, n = effects.unpack(kv.key)[1:]
            bad += n != done[group] + 1
            done[group] = n
        return bad

    return int(read(db))


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("shards", [1, 4])
@pytest.mark.parametrize("api", ["sync", "asyncio"])
def test_plain_work_under_recoveries_loses_nothing_and_ends(seed, shards, api):
    """Every item handled once, in its group's order, one item of a group at a time, nothing
    left: recoveries expire no lease (its 30 s have not passed by the clock), so no item is
    delivered again while its holder runs. Before leases were bound by the wall clock, an
    item ran twice at once 20 times in these runs, and beside another of its group."""
    db = memory.open(seed=seed)
    space = Subspace(("worker-recoveries-plain", api, shards, seed))
    queue = load(db, space, shards)
    handled: list[Any] = []
    running: collections.Counter[str] = collections.Counter()
    overlaps: list[Any] = []
    lock = threading.Lock()

    def handler(value: Any) -> None:
        group = value[0]
        with lock:
            handled.append(tuple(value))
            running[group] += 1
            if running[group] > 1:
                overlaps.append(tuple(value))
        time.sleep(0.002)  # a handler's work: a second run of its group would overlap it
        with lock:
            running[group] -= 1

    db.faults = FAULTS
    try:
        if api == "sync":
            run_bounded(lambda: queue.work(db, handler, lease=30, concurrency=3, until_empty=True))
        else:
            aqueue = fa.Queue(space, shards=shards)

            async def handle(value: Any) -> None:
                handler(value)

            run_bounded(
                lambda: asyncio.run(
                    aqueue.work(db, handle, lease=30, concurrency=3, until_empty=True)
                )
            )
    finally:
        db.faults = memory.Faults()
    assert sorted(handled) == sorted((group, n) for group in GROUPS for n in range(PER_GROUP))
    assert overlaps == []  # one item of a group at a time
    for group in GROUPS:  # in the group's order
        firsts = list(dict.fromkeys(n for g, n in handled if g == group))
        assert firsts == list(range(PER_GROUP))
    assert queue.size(db) == 0 and queue.leases(db) == [] and queue.dead_letters(db) == []
