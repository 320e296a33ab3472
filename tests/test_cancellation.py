"""asyncio cancellation keeps the promise: a cancelled task ends promptly, nothing is lost.

The contract (docs/guarantees.rst, "Cancellation"): a task cancelled while it awaits an
``fdbqueue.asyncio`` call ends with CancelledError within about one commit's time. A call
cancelled before it sent its commit took no effect; one whose commit was in flight either took
no effect (CancelledError) or took effect and returns its result, the task being cancelled
again at its next suspension. So every test below checks both halves: how long the task took
to end, and that what the call returned matches what the database holds.

Every test runs on the in-memory database with a latency model (GRV and reads 1 ms, commits
3 ms), on ``fdbqueue.memory.open()``, through the real binding on ``memory.install()``, and on
uvloop.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, replace
from typing import Any

import pytest
from helpers import installed_fdb

import fdbqueue.asyncio as fa
from fdbqueue import Lease, Subspace, memory

LATENCY = memory.Latency(grv=0.001, read=0.001, commit=0.003)
#: How long a cancelled task may take to end: a few commits' time, with room for a slow
#: machine (a swallowed cancellation hangs for good).
PROMPT = 0.5
#: When the cancellation arrives, in seconds after the call started: every step of a call
#: (GRV, reads, commit, the next transaction) is hit by some of them.
OFFSETS = [step / 2000 for step in range(0, 18)]
LATE = 1.0  # seconds: a cancellation after the call has certainly returned


@dataclass
class Backend:
    """A database, the engine under it, and how to run a coroutine to its end."""

    name: str
    db: Any
    engine: memory.Database
    run: Callable[[Coroutine[Any, Any, Any]], Any]


@pytest.fixture(params=["memory", "binding", "uvloop"])
def target(request: pytest.FixtureRequest, tmp_path: Any) -> Backend:
    if request.param == "binding":
        fdb = installed_fdb()
        path = str(tmp_path / f"{uuid.uuid4().hex}.cluster")
        database = fdb.open(path)
        engine = memory.cluster(path)
        engine.latency = LATENCY
        return Backend("binding", database, engine, asyncio.run)
    db = memory.open(seed=11)
    db.latency = LATENCY
    if request.param == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        return Backend("uvloop", db, db, uvloop.run)
    return Backend("memory", db, db, asyncio.run)


@pytest.fixture
def space() -> Subspace:
    return Subspace(("fdbqueue-cancellation-test", uuid.uuid4().hex))


async def outcome_of(task: asyncio.Task[Any]) -> Any:
    """The task's result, or the CancelledError class when it ended cancelled."""
    try:
        return await task
    except asyncio.CancelledError:
        return asyncio.CancelledError


async def cancelled_after(offset: float, call: Awaitable[Any]) -> tuple[Any, float]:
    """Start ``call`` in a task, cancel it ``offset`` seconds later; its outcome and the
    seconds it took to end once cancelled."""
    task = asyncio.ensure_future(call)
    await asyncio.sleep(offset)
    task.cancel()
    started = time.monotonic()
    outcome = await outcome_of(task)
    return outcome, time.monotonic() - started


async def cancelled_leaving_tasks(
    offset: float, call: Awaitable[Any]
) -> tuple[Any, float, set[asyncio.Task[Any]]]:
    """:func:`cancelled_after`, and the tasks still running once the call ended."""
    outcome, took = await cancelled_after(offset, call)
    await asyncio.sleep(0)
    others = asyncio.all_tasks() - {asyncio.current_task()}  # type: ignore[operator]
    return outcome, took, others


# -- every call, cancelled at every step ------------------------------------------------------


@dataclass
class Case:
    """One call: ``prepare`` sets the queue up (synchronously) and returns what ``call``
    needs; ``check`` asserts that the database matches the call's outcome."""

    prepare: Callable[[Any, Any], Any]
    call: Callable[[Any, Any, Any], Awaitable[Any]]
    check: Callable[[Any, Any, Any, Any], None]
    priority: bool = False
    high_contention: bool = False
    shards: int = 1


def remaining(queue: Any, db: Any) -> list[Any]:
    """Every item still takeable (taken for the check, after the test's call); sorted on a
    queue of several shards, which number their items apart (a batch spreads over them)."""
    items: list[Any] = queue.sync.peek_many(db, None)
    return sorted(items) if queue.shards > 1 else items


def first(queue: Any, value: Any, expected: str = "a") -> bool:
    """Whether ``value`` is what a take of ``a`` and ``b`` returns first: ``a``, or either on
    a queue of several shards (the batch put them in two shards, taken in either order)."""
    return value == expected or (queue.shards > 1 and value in ("a", "b"))


OTHER = {"a": "b", "b": "a"}


def held(queue: Any, db: Any) -> int:
    """Leases held (``leases_in_flight``: a released lease's item waits, counted apart in
    ``expired_leases``, until a take or claim takes it)."""
    count: int = queue.sync.info(db).leases_in_flight
    return count


def released(queue: Any, db: Any) -> list[Any]:
    """The values of released leases, which the next claims take first."""
    return [lease.value for lease in queue.sync.leases(db, None) if lease.expiry_version == 0]


def two_items(queue: Any, db: Any) -> None:
    queue.sync.enqueue_many(db, ["a", "b"])


def one_lease(queue: Any, db: Any) -> Lease[Any]:
    queue.sync.enqueue(db, "a")
    lease: Lease[Any] = queue.sync.claim(db, 60.0)
    return lease


def check_enqueue(queue: Any, db: Any, _prepared: Any, outcome: Any) -> None:
    expected = [] if outcome is asyncio.CancelledError else ["x"]
    assert remaining(queue, db) == expected


def check_enqueue_many(queue: Any, db: Any, _prepared: Any, outcome: Any) -> None:
    expected = [] if outcome is asyncio.CancelledError else ["x", "y"]
    assert remaining(queue, db) == expected


def check_enqueue_deduplicated(queue: Any, db: Any, _prepared: Any, outcome: Any) -> None:
    """A cancelled enqueue recorded no id; one that returned recorded it: sent again, the
    value is enqueued once in all."""
    cancelled = outcome is asyncio.CancelledError
    assert cancelled or outcome is True
    assert remaining(queue, db) == ([] if cancelled else ["x"])
    assert queue.sync.enqueue(db, "x", dedup_id="x-1") is cancelled
    assert remaining(queue, db) == ["x"]


def check_take_one(queue: Any, db: Any, _prepared: Any, outcome: Any) -> None:
    if outcome is asyncio.CancelledError:
        assert remaining(queue, db) == ["a", "b"]
    else:
        assert first(queue, outcome)
        assert remaining(queue, db) == [OTHER[outcome]]


def check_take_either(queue: Any, db: Any, _prepared: Any, outcome: Any) -> None:
    """As :func:`check_take_one` for two items of one priority in different shards: either
    may come out first (ties between shards are broken at random)."""
    if outcome is asyncio.CancelledError:
        assert sorted(remaining(queue, db)) == ["a", "b"]
    else:
        assert outcome in ("a", "b")
        assert remaining(queue, db) == [{"a": "b", "b": "a"}[outcome]]


def check_take_two(queue: Any, db: Any, _prepared: Any, outcome: Any) -> None:
    if outcome is asyncio.CancelledError:
        assert remaining(queue, db) == ["a", "b"]
    else:
        assert outcome == ["a", "b"] or (queue.shards > 1 and sorted(outcome) == ["a", "b"])
        assert remaining(queue, db) == []


def check_claim_one(queue: Any, db: Any, _prepared: Any, outcome: Any) -> None:
    if outcome is asyncio.CancelledError:
        assert held(queue, db) == 0
        assert remaining(queue, db) == ["a", "b"]
    else:
        assert first(queue, outcome.value)
        assert held(queue, db) == 1
        queue.sync.ack(db, outcome)  # the lease returned is the one held
        assert remaining(queue, db) == [OTHER[outcome.value]]


def check_claim_two(queue: Any, db: Any, _prepared: Any, outcome: Any) -> None:
    if outcome is asyncio.CancelledError:
        assert held(queue, db) == 0
        assert remaining(queue, db) == ["a", "b"]
    else:
        values = [lease.value for lease in outcome]
        assert values == ["a", "b"] or (queue.shards > 1 and sorted(values) == ["a", "b"])
        queue.sync.ack_many(db, outcome)
        assert held(queue, db) == 0 and remaining(queue, db) == []


def check_ack(queue: Any, db: Any, lease: Any, outcome: Any) -> None:
    if outcome is asyncio.CancelledError:
        assert held(queue, db) == 1
        queue.sync.ack(db, lease)  # still held: the ack did not happen
    assert held(queue, db) == 0 and remaining(queue, db) == []


def ack_with_a_mark(queue: Any, db: Any, lease: Any) -> Any:
    """``ack_with`` whose body sets a mark beside the queue: it commits with the ack."""
    mark = b"processed:" + queue.subspace.key()  # outside the queue's prefix
    return queue.ack_with(db, lease, lambda tr: tr.set(mark, b"done"))


def check_ack_with(queue: Any, db: Any, lease: Any, outcome: Any) -> None:
    """The body's write and the ack commit together, or neither does."""
    mark = b"processed:" + queue.subspace.key()  # outside the queue's prefix
    written = db.create_transaction()[mark].present()
    if outcome is asyncio.CancelledError and held(queue, db) == 1:
        assert not written  # neither happened
        queue.sync.ack(db, lease)
    else:
        assert written  # both happened
    assert held(queue, db) == 0 and remaining(queue, db) == []


def check_enqueue_spread(queue: Any, db: Any, _prepared: Any, outcome: Any) -> None:
    """A batch spread over the shards in one transaction: all of it, or none."""
    expected = [] if outcome is asyncio.CancelledError else [str(i) for i in range(300)]
    assert sorted(remaining(queue, db), key=int) == expected


def check_release(queue: Any, db: Any, lease: Any, outcome: Any) -> None:
    if outcome is asyncio.CancelledError:
        assert held(queue, db) == 1
        queue.sync.release(db, lease)
    assert held(queue, db) == 0 and released(queue, db) == ["a"]


def check_extend(queue: Any, db: Any, lease: Any, outcome: Any) -> None:
    assert held(queue, db) == 1
    queue.sync.ack(db, lease if outcome is asyncio.CancelledError else outcome)
    assert held(queue, db) == 0 and remaining(queue, db) == []


def check_dead_letter(queue: Any, db: Any, lease: Any, outcome: Any) -> None:
    if outcome is asyncio.CancelledError:
        assert held(queue, db) == 1
        assert queue.sync.dead_letters(db) == []
    else:
        assert held(queue, db) == 0
        assert [letter.value for letter in queue.sync.dead_letters(db)] == ["a"]


def two_grouped(queue: Any, db: Any) -> None:
    queue.sync.enqueue_many(db, ["a", "b"], group="g")


def one_grouped_lease(queue: Any, db: Any) -> Lease[Any]:
    two_grouped(queue, db)
    lease: Lease[Any] = queue.sync.claim(db, 60.0)
    return lease


def check_enqueue_grouped(queue: Any, db: Any, _prepared: Any, outcome: Any) -> None:
    """A cancelled enqueue into a group left no item and no group; one that returned left
    both, the group's items in order."""
    cancelled = outcome is asyncio.CancelledError
    assert remaining(queue, db) == ([] if cancelled else ["x", "y"])
    assert queue.sync.info(db).groups == (0 if cancelled else 1)
    if not cancelled:
        assert [queue.sync.dequeue(db) for _ in range(3)] == ["x", "y", None]


def check_claim_grouped(queue: Any, db: Any, _prepared: Any, outcome: Any) -> None:
    """A cancelled claim left the group free; one that returned holds its one item in
    flight, and the next follows the ack."""
    lease = queue.sync.claim(db, 60.0) if outcome is asyncio.CancelledError else outcome
    assert lease.value == "a" and lease.group == "g" and held(queue, db) == 1
    assert queue.sync.claim(db, 60.0) is None  # one in flight per group
    queue.sync.ack(db, lease)
    assert queue.sync.claim(db, 60.0).value == "b"


def check_ack_grouped(queue: Any, db: Any, lease: Any, outcome: Any) -> None:
    """A cancelled ack left the group busy; one that returned freed it."""
    if outcome is asyncio.CancelledError:
        assert held(queue, db) == 1 and queue.sync.claim(db, 60.0) is None
        queue.sync.ack(db, lease)
    assert held(queue, db) == 0 and queue.sync.claim(db, 60.0).value == "b"


async def take_in_session(queue: Any, db: Any) -> Any:
    async with queue.consumer(db, prefetch=1) as consumer:
        return await consumer.take()


def moved(destination: Any) -> Callable[[Any, Any, Any], Awaitable[Any]]:
    """A transactional function that moves the head of a queue to ``destination``."""

    @fa.transactional
    async def move(tr: Any, queue: Any) -> Any:
        value = await queue.dequeue(tr)
        await destination.enqueue(tr, value)
        return value

    async def call(queue: Any, db: Any, _prepared: Any) -> Any:
        return await move(db, queue)

    return call


def check_submit(queue: Any, db: Any, _prepared: Any, outcome: Any) -> None:
    """A cancelled submit left neither item nor record; one that returned left both."""
    if outcome is asyncio.CancelledError:
        assert remaining(queue, db) == [] and queue.sync.jobs(db) == []
    else:
        assert remaining(queue, db) == ["x"] and queue.sync.job(db, outcome.id).state == "waiting"


def check_submit_after(queue: Any, db: Any, parent: Any, outcome: Any) -> None:
    """A cancelled ``submit(after=...)`` left no job but its parent; one that returned left a
    deferred job waiting for it, whose item no take meets."""
    jobs = queue.sync.jobs(db)
    if outcome is asyncio.CancelledError:
        assert [job.id for job in jobs] == [parent.id]
    else:
        info = queue.sync.job(db, outcome.id)
        assert info.state == "deferred" and info.waiting_for == (parent.id,)
    assert remaining(queue, db) == ["a"]


def check_submit_task(queue: Any, db: Any, _prepared: Any, outcome: Any) -> None:
    """A cancelled ``submit_task`` left nothing; one that returned left its task call."""
    if outcome is asyncio.CancelledError:
        assert remaining(queue, db) == [] and queue.sync.jobs(db) == []
    else:
        assert remaining(queue, db) == [("fdbqueue.task", "t", (1,), ())]
        assert queue.sync.job(db, outcome.id).state == "waiting"


def jobs_after_a_claim(queue: Any, db: Any) -> dict[str, str]:
    """Jobs ``o``, ``a`` and ``b``, ``o`` claimed and acknowledged already: the next claim of
    this queue object sends the read of ``a``'s record with its front read."""
    ids = {value: queue.sync.submit(db, value).id for value in ("o", "a", "b")}
    queue.sync.ack(db, queue.sync.claim(db, 60.0))
    return ids


def check_claim_of_a_job(queue: Any, db: Any, ids: dict[str, str], outcome: Any) -> None:
    """A cancelled claim left ``a`` waiting and its job too; one that returned holds ``a``,
    whose job runs."""
    if outcome is asyncio.CancelledError:
        assert held(queue, db) == 0 and remaining(queue, db) == ["a", "b"]
        assert queue.sync.job(db, ids["a"]).state == "waiting"
    else:
        assert (outcome.value, outcome.job_id) == ("a", ids["a"])
        assert queue.sync.job(db, ids["a"]).state == "running"
        queue.sync.ack(db, outcome)
        assert queue.sync.job(db, ids["a"]).state == "succeeded"
        assert remaining(queue, db) == ["b"]


def a_job_then_b(group: str | None) -> Callable[[Any, Any], Any]:
    """A job ``a`` then an item ``b`` (in ``group``, when given): the job to cancel."""

    def prepare(queue: Any, db: Any) -> Any:
        job = queue.sync.submit(db, "a", group=group)
        queue.sync.enqueue(db, "b", group=group)
        return job

    return prepare


def check_cancel(queue: Any, db: Any, job: Any, outcome: Any) -> None:
    """A cancelled cancel left the job waiting with its item; one that returned removed the
    item in the same transaction, and (in a group) passed the group's turn to ``b``."""
    if outcome is asyncio.CancelledError:
        assert queue.sync.job(db, job.id).state == "waiting"
        assert remaining(queue, db) == ["a", "b"]
    else:
        assert outcome is True and queue.sync.job(db, job.id).state == "cancelled"
        assert remaining(queue, db) == ["b"] and queue.sync.size(db) == 1
        assert queue.sync.claim(db, 60.0).value == "b"


CASES: dict[str, Case] = {
    "submit": Case(lambda q, db: None, lambda q, db, _: q.submit(db, "x"), check_submit),
    "submit after a job": Case(
        lambda q, db: q.sync.submit(db, "a"),
        lambda q, db, parent: q.submit(db, "x", after=[parent]),
        check_submit_after,
    ),
    "submit_task": Case(
        lambda q, db: None, lambda q, db, _: q.submit_task(db, "t", [1]), check_submit_task
    ),
    "cancel of a waiting job": Case(
        a_job_then_b(None), lambda q, db, job: q.cancel(db, job.id), check_cancel
    ),
    "cancel of a group's first job": Case(
        a_job_then_b("g"), lambda q, db, job: q.cancel(db, job.id), check_cancel
    ),
    "enqueue": Case(lambda q, db: None, lambda q, db, _: q.enqueue(db, "x"), check_enqueue),
    "enqueue_many": Case(
        lambda q, db: None, lambda q, db, _: q.enqueue_many(db, ["x", "y"]), check_enqueue_many
    ),
    "enqueue with a dedup_id": Case(
        lambda q, db: None,
        lambda q, db, _: q.enqueue(db, "x", dedup_id="x-1"),
        check_enqueue_deduplicated,
    ),
    "enqueue into a group": Case(
        lambda q, db: None,
        lambda q, db, _: q.enqueue_many(db, ["x", "y"], group="g"),
        check_enqueue_grouped,
    ),
    "claim of a group's item": Case(
        two_grouped, lambda q, db, _: q.claim(db, 60.0), check_claim_grouped
    ),
    "ack of a group's item": Case(
        one_grouped_lease, lambda q, db, lease: q.ack(db, lease), check_ack_grouped
    ),
    "dequeue": Case(two_items, lambda q, db, _: q.dequeue(db), check_take_one),
    "dequeue_many": Case(two_items, lambda q, db, _: q.dequeue_many(db, 2), check_take_two),
    "dequeue in line": Case(
        two_items, lambda q, db, _: q.dequeue(db), check_take_one, high_contention=True
    ),
    "session take": Case(two_items, lambda q, db, _: take_in_session(q, db), check_take_one),
    "claim": Case(two_items, lambda q, db, _: q.claim(db, 60.0), check_claim_one),
    "claim in line": Case(
        two_items, lambda q, db, _: q.claim(db, 60.0), check_claim_one, high_contention=True
    ),
    "claim_many": Case(two_items, lambda q, db, _: q.claim_many(db, 2, 60.0), check_claim_two),
    "claim of a job after another": Case(
        jobs_after_a_claim, lambda q, db, _: q.claim(db, 60.0), check_claim_of_a_job
    ),
    "ack": Case(one_lease, lambda q, db, lease: q.ack(db, lease), check_ack),
    "ack_with": Case(one_lease, ack_with_a_mark, check_ack_with),
    "release": Case(one_lease, lambda q, db, lease: q.release(db, lease), check_release),
    "extend": Case(one_lease, lambda q, db, lease: q.extend(db, lease, 90.0), check_extend),
    "dead_letter": Case(
        one_lease, lambda q, db, lease: q.dead_letter(db, lease, "test"), check_dead_letter
    ),
    "push": Case(lambda q, db: None, lambda q, db, _: q.push(db, "x", 1), check_enqueue, True),
    "pop": Case(
        lambda q, db: (
            q.sync.push_many(db, ["a", "b"], 1)
            if hasattr(q.sync, "push_many")
            else [q.sync.push(db, value, 1) for value in ("a", "b")]
        ),
        lambda q, db, _: q.pop(db),
        check_take_one,
        True,
    ),
}
# The same calls on a queue of 4 shards: a take may be two transactions (its first shard, then
# every shard's counter and the take), a session may move between the shards' lines.
CASES.update(
    {
        f"sharded {name}": replace(CASES[name], shards=4)
        for name in [
            "enqueue_many",
            "enqueue with a dedup_id",
            "enqueue into a group",
            "claim of a group's item",
            "ack of a group's item",
            "dequeue",
            "dequeue_many",
            "dequeue in line",
            "session take",
            "claim",
            "claim_many",
            "ack",
            "cancel of a waiting job",
            "cancel of a group's first job",
        ]
    }
)
CASES["sharded pop"] = replace(CASES["pop"], check=check_take_either, shards=4)
CASES["sharded ack_with"] = replace(CASES["ack_with"], shards=4)
CASES["sharded enqueue_many spread over the shards"] = Case(
    lambda q, db: None,
    lambda q, db, _: q.enqueue_many(db, [str(i) for i in range(300)]),
    check_enqueue_spread,
    shards=4,
)


#: The every-step test on the binding and on uvloop takes over a minute of real time: slow.
EVERY_LOOP = [
    "memory",
    *(
        pytest.param(loop, marks=pytest.mark.slow("every call at every offset on " + loop))
        for loop in ("binding", "uvloop")
    ),
]


#: The calls of the every-step test: the sharded ones (seconds each) run with the slow tests.
EVERY_CALL = [
    pytest.param(name, marks=pytest.mark.slow("a sharded call at every offset"))
    if name.startswith("sharded")
    else name
    for name in CASES
]


@pytest.mark.parametrize("name", EVERY_CALL)
@pytest.mark.parametrize("target", EVERY_LOOP, indirect=True)
def test_every_call_cancelled_at_every_step_ends_promptly_and_loses_nothing(
    target: Backend, space: Subspace, name: str
) -> None:
    case = CASES[name]
    outcomes: set[str] = set()
    for offset in [*OFFSETS, LATE]:
        if offset == LATE and "returned" in outcomes:
            break  # a loaded machine may need longer than the offsets for the call to return
        subspace = space[offset]
        queue: Any
        options = {"high_contention": case.high_contention, "shards": case.shards}
        if case.priority:
            queue = fa.PriorityQueue(subspace, **options)
        else:
            queue = fa.Queue(subspace, **options)
        prepared = case.prepare(queue, target.db)
        call = case.call(queue, target.db, prepared)
        outcome, took = target.run(cancelled_after(offset, call))
        assert took < PROMPT, f"{name} cancelled at {offset * 1000:.1f} ms took {took:.2f} s"
        case.check(queue, target.db, prepared, outcome)
        assert queue.sync.requests_in_line(target.db) == 0
        outcomes.add("cancelled" if outcome is asyncio.CancelledError else "returned")
    assert outcomes == {"cancelled", "returned"}  # both halves of the contract were met


def test_a_transactional_function_cancelled_at_every_step_commits_all_or_nothing(
    target: Backend, space: Subspace
) -> None:
    outcomes: set[str] = set()
    for offset in [*OFFSETS, LATE]:
        if offset == LATE and "returned" in outcomes:
            break  # a loaded machine may need longer than the offsets for the call to return
        source = fa.Queue(space["source", offset])
        destination = fa.Queue(space["destination", offset])
        source.sync.enqueue_many(target.db, ["a", "b"])
        call = moved(destination)(source, target.db, None)
        outcome, took = target.run(cancelled_after(offset, call))
        assert took < PROMPT
        if outcome is asyncio.CancelledError:
            assert remaining(source, target.db) == ["a", "b"]
            assert remaining(destination, target.db) == []
            outcomes.add("cancelled")
        else:
            assert outcome == "a"
            assert remaining(source, target.db) == ["b"]
            assert remaining(destination, target.db) == ["a"]
            outcomes.add("returned")
    assert outcomes == {"cancelled", "returned"}


# -- loops of calls, and the ways asyncio cancels them ----------------------------------------


async def produce(queue: Any, db: Any, made: list[int]) -> None:
    for number in range(1_000_000):
        await queue.enqueue(db, number)
        made.append(number)


async def consume(queue: Any, db: Any, taken: list[Any]) -> None:
    while True:
        lease = await queue.claim(db, 60.0)
        if lease is None:
            await queue.enqueue(db, "more")
            continue
        await queue.ack(db, lease)
        taken.append(lease.value)


def test_a_loop_of_calls_ends_when_its_task_is_cancelled(target: Backend, space: Subspace) -> None:
    """Finding 1a: ``task.cancel()`` on ``while True: await q.enqueue(db, i)``."""
    randomness = random.Random(3)
    for run in range(12):
        queue = fa.Queue(space[run])
        made: list[int] = []
        loop = produce(queue, target.db, made)
        outcome, took = target.run(cancelled_after(randomness.uniform(0.005, 0.05), loop))
        assert outcome is asyncio.CancelledError
        assert took < PROMPT
        # Every enqueue that returned is there; one more may have landed as it was cancelled.
        assert remaining(queue, target.db)[: len(made)] == made
        assert len(remaining(queue, target.db)) - len(made) in (0, 1)


def test_a_claim_and_ack_loop_ends_when_cancelled_holding_no_lease(
    target: Backend, space: Subspace
) -> None:
    randomness = random.Random(5)
    for run in range(8):
        queue = fa.Queue(space[run])
        taken: list[Any] = []
        loop = consume(queue, target.db, taken)
        outcome, took = target.run(cancelled_after(randomness.uniform(0.005, 0.05), loop))
        assert outcome is asyncio.CancelledError and took < PROMPT
        assert held(queue, target.db) <= 1  # at most the lease the cancelled claim returned


def test_wait_for_around_a_loop_of_calls_times_out_promptly(
    target: Backend, space: Subspace
) -> None:
    """Finding 1b."""
    queue = fa.Queue(space)

    async def main() -> float:
        started = time.monotonic()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(produce(queue, target.db, []), 0.05)
        return time.monotonic() - started

    assert target.run(main()) < 0.05 + PROMPT


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.timeout is Python 3.11 on")
def test_a_timeout_block_around_a_loop_of_calls_ends_promptly(
    target: Backend, space: Subspace
) -> None:
    """Finding 1c; and the block's end takes the cancellation back: the task goes on."""
    queue = fa.Queue(space)

    async def main() -> tuple[float, Any]:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):  # type: ignore[attr-defined]
                await produce(queue, target.db, [])
        took = time.monotonic() - started
        await asyncio.sleep(0.02)  # no stray cancellation arrives after the block
        await queue.enqueue(target.db, "after")
        return took, await queue.size(target.db)

    took, size = target.run(main())
    assert took < 0.05 + PROMPT
    assert size >= 1


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.TaskGroup is Python 3.11 on")
def test_a_task_group_whose_task_fails_cancels_a_loop_of_calls(
    target: Backend, space: Subspace
) -> None:
    queue = fa.Queue(space)

    async def fail() -> None:
        await asyncio.sleep(0.03)
        raise LookupError("a sibling failed")

    async def main() -> float:
        started = time.monotonic()
        with pytest.raises(BaseExceptionGroup):  # noqa: F821 - Python 3.11 on
            async with asyncio.TaskGroup() as group:  # type: ignore[attr-defined]
                group.create_task(produce(queue, target.db, []))
                group.create_task(fail())
        return time.monotonic() - started

    assert target.run(main()) < 0.03 + PROMPT


def test_asyncio_run_returns_though_main_left_a_producer_running(
    target: Backend, space: Subspace
) -> None:
    """Finding 1e: ``asyncio.run`` cancels the tasks left and waits for them."""
    queue = fa.Queue(space)

    async def main() -> None:
        left = asyncio.ensure_future(produce(queue, target.db, []))
        await asyncio.sleep(0.03)
        assert not left.done()

    finished = threading.Event()

    def run() -> None:
        target.run(main())
        finished.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert finished.wait(0.03 + 5 * PROMPT), "asyncio.run did not return"


def test_a_value_returned_after_a_cancellation_is_followed_by_the_cancellation(
    target: Backend, space: Subspace
) -> None:
    """A dequeue whose commit landed returns its value; the loop that called it is cancelled
    at its next await, and that value reached the loop."""
    queue = fa.Queue(space)
    queue.sync.enqueue_many(target.db, list(range(50)))
    taken: list[Any] = []

    async def drain() -> None:
        while True:
            taken.append(await queue.dequeue(target.db))
            await asyncio.sleep(0.01)  # the next await after a call: cancelled there

    for offset in OFFSETS[::3]:

        async def main(offset: float = offset) -> tuple[Any, float]:
            return await cancelled_after(offset + 0.02, drain())

        outcome, took = target.run(main())
        assert outcome is asyncio.CancelledError and took < PROMPT
    assert taken + remaining(queue, target.db) == list(range(50))  # nothing lost, in order


# -- the worker loop ---------------------------------------------------------------------------


def test_cancelling_work_releases_every_lease_and_ends_every_task(
    target: Backend, space: Subspace
) -> None:
    """Findings 1d and 2: 8 worker tasks, handlers awaiting 5-30 ms, cancelled at random."""
    randomness = random.Random(9)
    for run in range(6):
        queue = fa.Queue(space[run])
        items = list(range(60))
        queue.sync.enqueue_many(target.db, items)
        handled: list[int] = []

        async def handler(value: int, handled: list[int] = handled) -> None:
            await asyncio.sleep(randomness.uniform(0.005, 0.03))
            handled.append(value)

        work = queue.work(target.db, handler, lease=30.0, concurrency=8, handle_signals=False)
        outcome, took, others = target.run(
            cancelled_leaving_tasks(randomness.uniform(0.01, 0.1), work)
        )
        assert outcome is asyncio.CancelledError
        assert took < PROMPT
        assert not others, f"tasks still running after work() ended: {others}"
        assert held(queue, target.db) == 0, "an item stays leased by nobody"
        left = remaining(queue, target.db)  # released items wait: listed by peek_many
        assert sorted(left + [value for value in handled if value not in left]) == items


# -- the event loop keeps running --------------------------------------------------------------


def test_transactional_functions_never_block_the_event_loop(
    target: Backend, space: Subspace
) -> None:
    """Finding 8: a 2 ms ticker keeps ticking while a transactional function reads raw keys,
    calls queue operations and commits, three times, on a database whose every wait is 80 ms
    or more. A wait that blocked the loop would show as a gap of at least 80 ms, once per wait
    (six or more per call, two of them the body's own: eighteen or more, or six when only
    :func:`fdbqueue.asyncio.wait_future` blocked); the machine's own scheduling (other processes
    on the same cores) makes a long gap now and then, and once made one of 112 ms. So at most
    two gaps may pass 60 ms."""
    target.engine.latency = memory.Latency(grv=0.08, read=0.08, commit=0.16)
    queue = fa.Queue(space)
    key = Subspace(("fdbqueue-cancellation-raw", uuid.uuid4().hex)).pack(("raw",))

    @fa.transactional
    async def body(tr: Any) -> Any:
        raw = await fa.wait_future(tr.get(key))
        tr[key] = b"written"
        await queue.enqueue(tr, "item")
        await fa.wait_future(tr.get(key + b"\x00"))  # a second wait of its own
        return raw

    async def main() -> tuple[float, int]:
        ticks: list[float] = []

        async def tick() -> None:
            while True:
                ticks.append(time.monotonic())
                await asyncio.sleep(0.002)

        ticker = asyncio.ensure_future(tick())
        await asyncio.sleep(0.01)
        for _ in range(3):
            await body(target.db)
        ticker.cancel()
        gaps = [later - earlier for earlier, later in itertools.pairwise(ticks)]
        return [gap for gap in gaps if gap > 0.06], len(ticks)

    long_gaps, ticks = target.run(main())
    assert ticks > 50
    assert len(long_gaps) <= 2, f"the event loop stalled: {[round(g * 1000) for g in long_gaps]} ms"
    assert remaining(queue, target.db) == ["item"] * 3


# -- under faults ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "high_contention", [False, pytest.param(True, marks=pytest.mark.slow("faults, seconds"))]
)
def test_random_cancellations_under_every_fault_lose_and_duplicate_nothing(
    target: Backend, space: Subspace, high_contention: bool
) -> None:
    """Consumer tasks cancelled at random moments while commits fail with 1020, 1021
    (applied or not), 1007 and recoveries between and inside their transactions: every item
    is taken once, by a call that returned it, or is still in the queue."""
    queue = fa.Queue(space, high_contention=high_contention)
    items = list(range(120))
    queue.sync.enqueue_many(target.db, items)
    target.engine.faults = memory.Faults(
        not_committed=0.05, commit_unknown_result=0.1, transaction_too_old=0.05, recovery=0.03
    )
    randomness = random.Random(17)
    taken: list[int] = []

    async def drain() -> None:
        while True:
            value = await queue.dequeue(target.db)
            if value is None:
                return
            taken.append(value)

    async def main() -> None:
        for _ in range(40):
            await cancelled_after(randomness.uniform(0.0, 0.03), drain())

    try:
        target.run(main())
    finally:
        target.engine.faults = memory.Faults()
    assert len(taken) == len(set(taken))  # nothing delivered twice
    assert sorted(taken + remaining(queue, target.db)) == items  # nothing lost
    assert queue.sync.requests_in_line(target.db) == 0


# -- the commit's mark -------------------------------------------------------------------------


def test_a_commit_marks_its_operation_greenlet_and_one_refused_takes_the_mark_back() -> None:
    """``commit`` skips looking for an operation greenlet until one was made in the process
    (``suspension.operations_started``); made, one is marked before its commit is sent, and
    a commit that conflicts (surely not applied) takes the mark back."""
    from fdbqueue._transactions import suspension
    from fdbqueue._transactions.transactional import commit

    db = memory.open()
    outcomes: list[bool] = []

    def attempt(tr: Any) -> None:
        operation = suspension.current_operation()
        assert operation is not None
        try:
            commit(tr)
        except memory.FDBError as error:
            assert error.code == 1020
        outcomes.append(operation.may_have_committed)

    applied = db.create_transaction()
    applied[b"k"] = b"v"
    plain = suspension.OperationGreenlet(run=lambda: attempt(applied))
    assert suspension.operations_started
    plain.switch()

    refused = db.create_transaction()
    refused.get(b"k").wait()  # a read conflict with the write below
    refused[b"other"] = b"v"
    db[b"k"] = b"newer"
    suspension.OperationGreenlet(run=lambda: attempt(refused)).switch()

    assert outcomes == [True, False]
    assert suspension.current_operation() is None  # the test's own greenlet
