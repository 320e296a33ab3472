"""Jobs after jobs (``submit(..., after=[...])``, docs/jobs.rst "Jobs after jobs"): a job
waits ``deferred`` until every job it waits for succeeded, then is enqueued in the last one's
acknowledgement, exactly once; one that ends dead or cancelled cancels it. On Queue and
PriorityQueue, 1 and 4 shards, sync and asyncio."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from helpers import all_keys

import fdbqueue.asyncio as fa
from fdbqueue import JobFailedError, PriorityQueue, Queue, Subspace, memory, transactional

KINDS = [(False, 1), (False, 4), (True, 1), (True, 4)]
KIND_IDS = ["Queue-1", "Queue-4", "PriorityQueue-1", "PriorityQueue-4"]


class Shape:
    def __init__(self, priority: bool, shards: int, api: str = "sync") -> None:
        self.db = memory.open()
        kind: Any = PriorityQueue if priority else Queue
        self.sync = kind(
            Subspace(("after", uuid.uuid4().hex)), codec="json", shards=shards, max_deliveries=1
        )
        self.priority = priority
        self.queue = self.sync
        if api == "asyncio":
            self.queue = (fa.PriorityQueue if priority else fa.Queue).from_sync(self.sync)

    def call(self, result: Any) -> Any:
        if asyncio.iscoroutine(result):

            async def awaited() -> Any:
                return await result

            return asyncio.run(awaited())
        return result

    def submit(self, value: Any, tr: Any = None, **options: Any) -> Any:
        if self.priority:
            options.setdefault("priority", 0)
        return self.call(self.queue.submit(self.db if tr is None else tr, value, **options))

    def work(self, handler: Any) -> Any:
        return self.call(
            self.queue.work(self.db, handler, lease=30, until_empty=True, handle_signals=False)
        )

    def state(self, job: Any) -> str:
        return self.sync.job(self.db, job.id).state


@pytest.mark.parametrize("api", ["sync", "asyncio"])
@pytest.mark.parametrize(("priority", "shards"), KINDS, ids=KIND_IDS)
def test_a_chain_runs_in_order_and_a_job_waits_for_all_it_names(
    priority: bool, shards: int, api: str
):
    shape = Shape(priority, shards, api)
    first = shape.submit({"n": 1})
    second = shape.submit({"n": 2})
    both = shape.submit({"n": 3}, after=[first, second.id])  # a Job or an id
    last = shape.submit({"n": 4}, after=[both])
    assert shape.state(both) == "deferred" and shape.state(last) == "deferred"
    info = shape.sync.job(shape.db, both.id)
    assert set(info.waiting_for) == {first.id, second.id}
    assert shape.sync.size(shape.db) == 2  # deferred jobs are not counted
    order: list[int] = []
    summary = shape.work(lambda value: order.append(value["n"]))
    assert summary.succeeded == 4
    assert sorted(order[:2]) == [1, 2] and order[2:] == [3, 4]
    assert all(shape.state(job) == "succeeded" for job in (first, second, both, last))
    assert shape.sync.job(shape.db, last.id).waiting_for == ()


@pytest.mark.parametrize(("priority", "shards"), KINDS, ids=KIND_IDS)
def test_a_job_after_one_that_ends_dead_is_cancelled_naming_it(priority: bool, shards: int):
    shape = Shape(priority, shards)
    fails = shape.submit({"fail": True})
    child = shape.submit({"n": 2}, after=[fails])
    grandchild = shape.submit({"n": 3}, after=[child])

    def handle(value: Any) -> None:
        if value.get("fail"):
            raise ValueError("no")

    summary = shape.work(handle)
    assert summary.dead_lettered == 1 and summary.succeeded == 0
    for job in (child, grandchild):
        info = shape.sync.job(shape.db, job.id)
        assert info.state == "cancelled"
        with pytest.raises(JobFailedError):
            shape.sync.result(shape.db, job.id, timeout=1)
    assert fails.id in shape.sync.job(shape.db, child.id).error[1]
    assert child.id in shape.sync.job(shape.db, grandchild.id).error[1]
    assert shape.sync.size(shape.db) == 0


def test_a_chain_can_be_submitted_in_one_transaction():
    shape = Shape(False, 1)

    @transactional
    def chain(tr: Any) -> list[Any]:
        first = shape.queue.submit(tr, {"n": 1})
        second = shape.queue.submit(tr, {"n": 2}, after=[first])
        return [first, second, shape.queue.submit(tr, {"n": 3}, after=[second])]

    jobs = chain(shape.db)
    order: list[int] = []
    assert shape.work(lambda value: order.append(value["n"])).succeeded == 3
    assert order == [1, 2, 3]
    assert [shape.state(job) for job in jobs] == ["succeeded"] * 3


def test_after_jobs_that_ended_already():
    shape = Shape(False, 1)
    done = shape.submit({"n": 1})
    shape.work(lambda value: None)
    runs_now = shape.submit({"n": 2}, after=[done])
    assert shape.state(runs_now) == "waiting" and shape.sync.size(shape.db) == 1
    cancelled = shape.submit({"n": 3})
    assert shape.sync.cancel(shape.db, cancelled.id)
    never = shape.submit({"n": 4}, after=[done, cancelled])
    info = shape.sync.job(shape.db, never.id)
    assert info.state == "cancelled" and cancelled.id in info.error[1]


def test_cancelling_a_deferred_job_clears_it_and_its_dependents():
    shape = Shape(False, 1)
    first = shape.submit({"n": 1})
    child = shape.submit({"n": 2}, after=[first])
    grandchild = shape.submit({"n": 3}, after=[child])
    assert shape.sync.cancel(shape.db, child.id)
    assert shape.state(child) == "cancelled" and shape.state(grandchild) == "cancelled"
    order: list[int] = []
    shape.work(lambda value: order.append(value["n"]))
    assert order == [1]
    leftovers = [key for key, _ in all_keys(shape.db, shape.sync.subspace) if b"job_after" in key]
    assert leftovers == []


def test_bad_after_changes_nothing():
    shape = Shape(False, 1)
    other = Queue(Subspace(("after-other", uuid.uuid4().hex)), codec="json")
    foreign = other.submit(shape.db, {"n": 0})
    before = all_keys(shape.db, shape.sync.subspace)
    for after, error in [
        ([], TypeError),
        ("abc", TypeError),
        ([foreign], ValueError),  # another queue's job
        (["0" * 32], ValueError),
    ]:
        with pytest.raises(error):
            shape.submit({"n": 1}, after=after)
    first = shape.submit({"n": 1})
    with pytest.raises(ValueError):
        shape.submit({"n": 2}, after=[first], delay=5)
    ghost = shape.queue.submit(shape.db.create_transaction(), {"n": 0})  # never committed
    with pytest.raises(ValueError, match="not a job of this queue"):
        shape.submit({"n": 2}, after=[first, ghost])
    assert len(all_keys(shape.db, shape.sync.subspace)) > len(before)  # only `first`
    assert shape.sync.size(shape.db) == 1


@pytest.mark.parametrize(("priority", "shards"), KINDS, ids=KIND_IDS)
def test_chains_submitted_and_run_under_unknown_results_run_each_job_once(
    priority: bool, shards: int
):
    """Commits that end 1021 (half of them applied) and recoveries, while chains are
    submitted and worked: every job runs exactly once, each after the one before it."""
    shape = Shape(priority, shards)
    shape.db = memory.open(seed=11)  # the same faults at every run
    shape.db.faults = memory.Faults(commit_unknown_result=0.3, recovery=0.05)
    runs: list[tuple[int, int]] = []
    try:
        for chain in range(3):
            previous = None
            for step in range(4):
                after = None if previous is None else [previous]
                previous = shape.submit({"chain": chain, "step": step}, after=after)
        shape.work(lambda value: runs.append((value["chain"], value["step"])))
    finally:
        shape.db.faults = memory.Faults()
    stats = shape.db.stats()
    assert stats["injected_commit_unknown_result_applied"] + stats["injected_recovery_applied"] > 0
    assert sorted(runs) == [(chain, step) for chain in range(3) for step in range(4)]
    for chain in range(3):
        assert [step for c, step in runs if c == chain] == [0, 1, 2, 3]
    assert shape.sync.size(shape.db) == 0
