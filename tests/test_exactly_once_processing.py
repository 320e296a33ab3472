"""Exactly-once processing: ``work(db, handler, transactional=True)`` runs ``handler(tr, value)``
inside the transaction that acknowledges the item, so its writes and the acknowledgement
commit together or not at all, once, under every fault kind; a handler that raises changes
nothing and its item is retried or dead-lettered as in the plain mode. Sync and asyncio."""

from __future__ import annotations

import asyncio
import struct
import threading
from typing import Any

import pytest
from helpers import despite_timeouts, pass_time

import fdbqueue.asyncio as fa
from fdbqueue import (
    LeaseExpiredError,
    LeaseNotHeldError,
    Queue,
    Subspace,
    memory,
    transactional,
    worker,
)
from fdbqueue.asyncio import _worker as async_worker

EFFECTS = Subspace(("effects",))
EVERY_FAULT = memory.Faults(
    not_committed=0.05, commit_unknown_result=0.15, transaction_too_old=0.05, timed_out=0.05
)


def effect(tr: Any, value: int) -> None:
    """The handler's write: count the value's processing (an atomic add per value)."""
    tr.add(EFFECTS.pack((value,)), struct.pack("<q", 1))


@transactional
def effects(tr: Any) -> dict[int, int]:
    return {
        EFFECTS.unpack(bytes(kv.key))[0]: struct.unpack("<q", bytes(kv.value))[0]
        for kv in tr.get_range(EFFECTS.range().start, EFFECTS.range().stop)
    }


def test_a_transactional_handler_writes_with_the_acknowledgement_once_each():
    db = memory.open()
    queue = Queue(Subspace(("transactional",)))
    queue.enqueue_many(db, range(20))
    summary = queue.work(db, effect, lease=10, concurrency=3, until_empty=True, transactional=True)
    assert summary.succeeded == 20
    assert effects(db) == dict.fromkeys(range(20), 1)
    assert queue.size(db) == 0 and queue.leases(db) == []


def test_a_handler_that_raises_commits_nothing_and_its_item_is_retried_then_dead_lettered():
    db = memory.open()
    queue = Queue(Subspace(("transactional-fails",)), max_deliveries=2)
    queue.enqueue_many(db, [1, 2])

    def handler(tr: Any, value: int) -> None:
        effect(tr, value)
        if value == 2:
            raise RuntimeError("fails after writing")

    summary = queue.work(
        db, handler, lease=10, until_empty=True, transactional=True, backoff=0.01, max_backoff=0.02
    )
    assert (summary.succeeded, summary.retried, summary.dead_lettered) == (1, 1, 1)
    assert effects(db) == {1: 1}  # the failing handler's write never committed
    assert [letter.value for letter in queue.dead_letters(db)] == [2]


@pytest.mark.parametrize("seed", [3, 11])
def test_under_every_fault_kind_each_effect_commits_exactly_once(seed):
    db = memory.open(faults=EVERY_FAULT, seed=seed)
    queue = Queue(Subspace(("transactional-faults", seed)), max_deliveries=None)
    despite_timeouts(lambda: queue.enqueue_many(db, range(30)))
    stop = threading.Event()

    def handler(tr: Any, value: int) -> None:
        effect(tr, value)

    def stop_when_done() -> None:
        while not stop.wait(0.05):
            try:
                if len(effects(db)) == 30 and queue.size(db) == 0 and not queue.leases(db):
                    stop.set()
            except Exception:  # a fault on this check: look again
                continue

    watcher = threading.Thread(target=stop_when_done)
    watcher.start()
    queue.work(db, handler, lease=10, concurrency=3, stop=stop, transactional=True, backoff=0.01)
    watcher.join()
    db.faults = memory.Faults()
    db.settle()
    assert db.stats()["injected_commit_unknown_result_applied"] > 0
    assert effects(db) == dict.fromkeys(range(30), 1)  # not lost, not twice


def test_asyncio_transactional_handlers_write_with_the_acknowledgement_once_each():
    db = memory.open()
    queue = fa.Queue(Subspace(("async-transactional",)))

    async def main() -> Any:
        await queue.enqueue_many(db, range(10))
        return await queue.work(
            db, effect, lease=10, concurrency=3, until_empty=True, transactional=True
        )

    summary = asyncio.run(main())
    assert summary.succeeded == 10
    assert effects(db) == dict.fromkeys(range(10), 1)


def test_asyncio_refuses_a_coroutine_as_a_transactional_handler():
    db = memory.open()
    queue = fa.Queue(Subspace(("async-refused",)))

    async def handler(tr: Any, value: Any) -> None:
        pass

    with pytest.raises(TypeError, match="plain function"):
        asyncio.run(queue.work(db, handler, lease=10, transactional=True))


@pytest.mark.parametrize("after", [0.0, 0.004, 0.012, 0.03])
def test_cancelling_an_asyncio_transactional_worker_loses_nothing_and_repeats_nothing(after):
    """Cancelled at any point (before a claim, during a handler's transaction, around its
    commit): each item's effect committed once with its acknowledgement, or not at all and
    the item is still there (queued, or released to be claimed again)."""
    db = memory.open(latency=memory.Latency(read=0.0005, commit=0.002))
    queue = fa.Queue(Subspace(("async-cancelled", after)))

    async def main() -> None:
        await queue.enqueue_many(db, range(8))
        task = asyncio.ensure_future(
            queue.work(db, effect, lease=10, concurrency=2, transactional=True)
        )
        await asyncio.sleep(after)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    done = effects(db)
    assert set(done.values()) <= {1}  # nothing twice
    info = queue.sync.info(db)
    assert info.leases_in_flight == 0  # none held: released items wait
    left = queue.sync.peek_many(db, None)  # the released items first: they wait
    assert sorted([*done, *left]) == list(range(8))  # nothing lost


@pytest.mark.memory_only("moves time on with db.advance_time()")
@pytest.mark.parametrize("shards", [1, 4])
def test_the_lease_is_checked_before_the_handler_runs(shards):
    """A transactional handler runs only for an item whose lease is still held: once the
    lease expired (its item may be another consumer's, its group moved on), ack_with raises
    before it calls the handler, sync and asyncio alike."""
    db = memory.open()
    queue = Queue(Subspace(("checked-first", shards)), shards=shards)
    queue.enqueue_many(db, ["a", "b"])
    called: list[Any] = []
    expired = queue.claim(db, lease=1)
    pass_time(db, 2)
    with pytest.raises(LeaseExpiredError):
        queue.ack_with(db, expired, lambda tr: called.append(expired.value))
    again = queue.claim(db, lease=30)  # delivered again, to another holder
    assert again.value == expired.value and again.deliveries == 2
    with pytest.raises(LeaseNotHeldError):
        queue.ack_with(db, expired, lambda tr: called.append(expired.value))
    aqueue = fa.Queue(Subspace(("checked-first", shards)), shards=shards)
    with pytest.raises(LeaseNotHeldError):
        asyncio.run(aqueue.ack_with(db, expired, lambda tr: called.append(expired.value)))
    assert called == []
    queue.ack_with(db, again, lambda tr: called.append(again.value))
    assert called == [expired.value]


@pytest.mark.parametrize("flavour", ["sync", "asyncio"])
@pytest.mark.parametrize("seed", [1, 2])
def test_an_unknown_or_timed_out_acknowledging_commit_is_tried_again_not_failed(
    flavour, seed, monkeypatch
):
    """Issue 43, item 8: the effect-and-ack transaction's commit ending in 1031 (timed out)
    or 1021 (unknown result) is resolved by its receipt and tried again; it never spends a
    delivery. With ``max_deliveries=1`` every job whose handler returned ends succeeded, its
    effect committed once, no dead letters (before: about 1 in 10 ended dead with
    ``FDBError (1031)``, its effect never committed)."""
    for module in (worker, async_worker):  # a failed claim is tried again at once
        monkeypatch.setattr(module, "CLAIM_ERROR_BACKOFF", (0.001, 0.002))
    db = memory.open(seed=seed)
    queue = Queue(Subspace(("ack-faults", flavour, seed)), max_deliveries=1)
    jobs = [queue.submit(db, value) for value in range(20)]
    db.faults = memory.Faults(timed_out=0.25, commit_unknown_result=0.25)

    def handler(tr: Any, value: int) -> int:
        effect(tr, value)
        return value * 10

    if flavour == "sync":
        queue.work(db, handler, lease=10, until_empty=True, transactional=True)
    else:
        aqueue = fa.Queue(Subspace(("ack-faults", flavour, seed)), max_deliveries=1)
        asyncio.run(aqueue.work(db, handler, lease=10, until_empty=True, transactional=True))
    db.faults = memory.Faults()
    db.settle()
    assert db.stats()["injected_timed_out"] > 0
    assert effects(db) == dict.fromkeys(range(20), 1)
    assert queue.dead_letters(db) == []
    states = {job.id: queue.job(db, job.id) for job in jobs}
    assert [info.state if info else None for info in states.values()] == ["succeeded"] * 20
    assert [queue.result(db, job.id, timeout=0) for job in jobs] == [v * 10 for v in range(20)]
