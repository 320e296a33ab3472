"""Jobs (fdbqueue._storage.jobs): what the shapes' matrix (tests/test_matrix.py, "jobs") does
not cover: faults, a caller's transaction, bad input, results in time, storage bounds."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import fdb.tuple
import pytest
from helpers import pass_time, raises_fdb_error
from hypothesis import given
from hypothesis import strategies as st

import fdbqueue
import fdbqueue.asyncio as fa
from fdbqueue import Job, JobFailedError, PriorityQueue, Queue, Subspace, _clock, memory
from fdbqueue._storage.job_records import (
    JOB_HEADER,
    job_element,
    job_header,
    job_hint,
    job_of_element,
)
from fdbqueue._storage.jobs import SWEEP_LIMIT, Jobs
from fdbqueue._storage.store import metadata_subspace
from fdbqueue._storage.taking import CANCELLED_PER_TAKE


def queue_of(kind: type[Any], name: str, **options: Any) -> Any:
    return kind(Subspace(("jobs", name)), **options)


def submit(queue: Any, tr: Any, value: Any, **kwargs: Any) -> Any:
    if isinstance(queue, PriorityQueue):
        return queue.submit(tr, value, priority=1, **kwargs)
    return queue.submit(tr, value, **kwargs)


def keys_under(db: Any, prefix: bytes) -> list[bytes]:
    @fdbqueue.transactional
    def read(tr: Any) -> list[bytes]:
        return [bytes(kv.key) for kv in tr.get_range_startswith(prefix)]

    return read(db)


KINDS = pytest.mark.parametrize("kind", [Queue, PriorityQueue])
SHARDS = pytest.mark.parametrize("shards", [1, 4])


@KINDS
@SHARDS
def test_a_job_submitted_in_a_transaction_that_never_commits_does_not_exist(kind, shards):
    db = memory.open()
    queue = queue_of(kind, "uncommitted", shards=shards)
    tr = db.create_transaction()
    job = submit(queue, tr, "never")
    assert isinstance(job, Job) and len(job.id) == 32  # known before the commit
    del tr  # never committed
    assert queue.job(db, job.id) is None and queue.size(db) == 0

    @fdbqueue.transactional
    def with_my_write(tr: Any) -> Job:
        tr[b"my-app-key"] = b"written with the job"
        submitted: Job = submit(queue, tr, "with my write")
        return submitted

    job = with_my_write(db)
    assert queue.job(db, job.id).state == "waiting"


@KINDS
@SHARDS
def test_submit_is_exactly_once_under_unknown_results(kind, shards):
    db = memory.open(seed=7)  # the same faults at every run
    queue = queue_of(kind, "faults", shards=shards)
    db.faults = memory.Faults(commit_unknown_result=0.5, recovery=0.05)
    try:
        jobs = [submit(queue, db, f"v{n}") for n in range(20)]
    finally:
        db.faults = memory.Faults()
    stats = db.stats()
    assert stats["injected_commit_unknown_result_applied"] + stats["injected_recovery_applied"] > 0
    assert queue.size(db) == 20
    assert {queue.job(db, job.id).state for job in jobs} == {"waiting"}
    taken = [queue.dequeue(db) if kind is Queue else queue.pop_min(db) for _ in range(20)]
    assert sorted(taken) == sorted(f"v{n}" for n in range(20))
    assert {queue.job(db, job.id).state for job in jobs} == {"succeeded"}


@KINDS
@pytest.mark.parametrize("loop", ["sync", "asyncio"])
def test_cancel_answers_true_for_a_waiting_job_under_unknown_results(kind, loop):
    """Issue 43, item 9: a cancel whose commit was applied but reported 1021 answers True
    (found by its receipt, as pause and resume do), not False from a second attempt that
    finds the job cancelled already (before: 22 of 60 answers False)."""
    db = memory.open(seed=5)
    queue = queue_of(kind, f"cancel-faults-{loop}")
    jobs = [submit(queue, db, n) for n in range(30)]
    db.faults = memory.Faults(commit_unknown_result=0.5)
    try:
        if loop == "sync":
            answers = [queue.cancel(db, job.id) for job in jobs]
        else:
            twin = (fa.Queue if kind is Queue else fa.PriorityQueue)(queue.subspace)

            async def cancel_all() -> list[bool]:
                return [await twin.cancel(db, job.id) for job in jobs]

            answers = asyncio.run(cancel_all())
    finally:
        db.faults = memory.Faults()
    assert db.stats()["injected_commit_unknown_result_applied"] > 0
    assert answers == [True] * 30
    assert {queue.job(db, job.id).state for job in jobs} == {"cancelled"}
    assert [queue.cancel(db, job.id) for job in jobs] == [False] * 30  # finished: False


@KINDS
@SHARDS
def test_work_under_faults_runs_each_job_once_and_keeps_each_result(kind, shards):
    db = memory.open()
    queue = queue_of(kind, "work-faults", shards=shards)
    jobs = [submit(queue, db, n) for n in range(30)]
    runs: list[int] = []
    lock = threading.Lock()

    def handler(value: int) -> int:
        with lock:
            runs.append(value)
        return value * 10

    db.faults = memory.Faults(commit_unknown_result=0.1, recovery=0.05)
    try:
        summary = queue.work(db, handler, lease=30, until_empty=True, concurrency=3)
    finally:
        db.faults = memory.Faults()
    assert summary.succeeded == 30 and sorted(runs) == list(range(30))
    assert [queue.result(db, job.id, timeout=1) for job in jobs] == [n * 10 for n in range(30)]


@KINDS
def test_result_returns_within_50_ms_of_the_ack(kind):
    db = memory.open()
    queue = queue_of(kind, "in-time")
    job = submit(queue, db, "x")
    returned: list[float] = []

    def wait() -> None:
        queue.result(db, job.id, timeout=10)
        returned.append(time.monotonic())

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.2)  # the waiter waits on its watch by now
    lease = queue.claim(db, 30)
    queue.ack(db, lease, result="done")
    acked = time.monotonic()
    waiter.join(10)
    assert returned and returned[0] - acked < 0.05


def test_result_times_out_and_a_plain_item_has_no_job():
    db = memory.open()
    queue = queue_of(Queue, "timeout")
    job = queue.submit(db, "x")
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        queue.result(db, job.id, timeout=0.2)
    assert 0.2 <= time.monotonic() - started < 2
    unknown = job.id[:8] + "0" * 24
    assert queue.job(db, unknown) is None
    with pytest.raises(KeyError, match="no job"):
        queue.result(db, unknown, timeout=0.1)


@KINDS
@pytest.mark.parametrize("shards", [1, 4])
def test_ack_refuses_a_result_for_a_plain_item_before_any_write(kind, shards):
    """A plain item's lease keeps no result: ``ack(lease, result=...)`` raises, and the lease
    stays held (issue 43 item 19: the result was dropped silently)."""
    db = memory.open()
    queue = queue_of(kind, "plain-result", shards=shards)
    queue.push(db, "plain", 1) if kind is PriorityQueue else queue.enqueue(db, "plain")
    lease = queue.claim(db, 30)
    assert lease is not None and lease.job_id is None
    db.reset_stats()
    with pytest.raises(ValueError, match=r"result= for lease .* a plain item's \(no job_id\)"):
        queue.ack(db, lease, result="kept nowhere")
    assert db.stats()["keys_written"] == 0
    queue.ack(db, lease, result=None)  # None is no result: acknowledged as ever
    assert queue.size(db) == 0


def test_result_given_a_transaction_speaks_of_result_not_block_or_enqueues():
    db = memory.open()
    queue = queue_of(Queue, "result-in-a-transaction")
    job = queue.submit(db, "x")
    with pytest.raises(TypeError) as refused:
        queue.result(db.create_transaction(), job.id, timeout=0.1)
    message = str(refused.value)
    assert message.startswith(
        "result() needs a Database: inside a transaction, waiting for the job's end is impossible"
    )
    assert "block=True" not in message and "enqueue" not in message


def test_asyncio_result_waits_on_the_watch():
    import asyncio

    async def main() -> float:
        db = memory.open()
        queue = fa.Queue(Subspace(("jobs", "asyncio-result")))
        job = await queue.submit(db, "x")
        waiting = asyncio.ensure_future(queue.result(db, job.id, timeout=5))
        await asyncio.sleep(0.1)
        lease = await queue.claim(db, 30)
        await queue.ack(db, lease, result="y")
        acked = time.monotonic()
        assert await waiting == "y"
        return time.monotonic() - acked

    assert asyncio.run(main()) < 0.05


@pytest.mark.parametrize(
    ("kind", "shards", "count"),
    [
        (Queue, 1, 1_000),
        *[
            pytest.param(kind, shards, 1_000, marks=pytest.mark.slow("a thousand jobs"))
            for kind, shards in [(Queue, 4), (PriorityQueue, 1), (PriorityQueue, 4)]
        ],
        pytest.param(Queue, 1, 10_000, marks=pytest.mark.slow("10,000 jobs, about a minute")),
    ],
)
def test_finished_jobs_leave_no_record_once_their_ttl_passed(kind, shards, count):
    db = memory.open()
    queue = queue_of(kind, "ttl", shards=shards, result_ttl=60)
    for start in range(0, count, 1_000):

        @fdbqueue.transactional
        def batch(tr: Any, start: int = start) -> None:
            for n in range(start, start + 1_000):
                submit(queue, tr, n)

        batch(db)
    leases = []
    while batch_leases := queue.claim_many(db, 500, 300):
        queue.ack_many(db, batch_leases)
        leases += batch_leases
    assert len(leases) == count
    records = keys_under(db, queue.subspace.key() + b"\xff")
    assert sum(b"jobs" in key for key in records) >= count  # kept within the TTL
    pass_time(db, 61)
    assert queue.clear_finished_jobs(db) == count
    metadata = queue.subspace.key() + b"\xff"
    names = ("jobs", "job_results", "jobs_finished")
    left = [key for name in names for key in keys_under(db, metadata + fdb.tuple.pack((name,)))]
    assert left == []


def fail_once(queue: Any, db: Any) -> None:
    """Run the worker loop once with a handler that raises: on ``max_deliveries=1``, each
    job dies."""

    def handler(value: Any) -> None:
        raise ValueError("fails")

    queue.work(db, handler, lease=5, until_empty=True)


@KINDS
@SHARDS
def test_a_requeued_dead_job_is_not_swept_by_its_old_finish(kind, shards):
    """Issue 43, item 10 (first repro): a dead job requeued is ``waiting`` again, and its
    record outlives its old finish's ``result_ttl`` while its item waits (before: the sweep
    cleared it, ``job()`` None)."""
    db = memory.open()
    queue = queue_of(kind, f"requeued-{shards}", shards=shards, result_ttl=60, max_deliveries=1)
    job = submit(queue, db, "v")
    fail_once(queue, db)
    assert queue.job(db, job.id).state == "dead"
    assert queue.requeue_dead_letters(db) == 1
    assert queue.job(db, job.id).state == "waiting"
    pass_time(db, 70)
    assert queue.clear_finished_jobs(db) == 0
    info = queue.job(db, job.id)
    assert info is not None and info.state == "waiting" and queue.size(db) == 1
    queue.work(db, lambda value: value + "!", lease=5, until_empty=True)
    assert queue.result(db, job.id, timeout=0) == "v!"
    pass_time(db, 59)
    assert queue.clear_finished_jobs(db) == 0
    assert queue.result(db, job.id, timeout=0) == "v!"
    pass_time(db, 2)  # result_ttl after its latest finish: cleared now
    assert queue.clear_finished_jobs(db) == 1
    assert queue.job(db, job.id) is None


@KINDS
def test_a_job_that_succeeded_after_a_requeue_keeps_its_result_for_result_ttl(kind):
    """Issue 43, item 10 (second repro): requeued and then succeeded, a job's result is
    kept ``result_ttl`` seconds from that success, not from its first (dead) finish (before:
    ``result()`` raised KeyError 20 s after the success)."""
    db = memory.open()
    queue = queue_of(kind, "requeued-result", result_ttl=60, max_deliveries=1)
    job = submit(queue, db, "v")
    fail_once(queue, db)
    pass_time(db, 50)
    queue.requeue_dead_letters(db)
    queue.work(db, lambda value: value + "!", lease=5, until_empty=True)
    pass_time(db, 20)  # 70 s after the dead finish, 20 s after the success
    assert queue.clear_finished_jobs(db) == 0
    assert queue.result(db, job.id, timeout=0) == "v!"


def test_a_sweep_under_way_never_clears_a_job_requeued_meanwhile():
    """A sweep that read an expired entry conflicts with a requeue of that job committed
    meanwhile (which clears the entry): its blind clear of the record never lands."""
    db = memory.open()
    queue = queue_of(Queue, "requeue-race", result_ttl=60, max_deliveries=1)
    job = queue.submit(db, "v")
    fail_once(queue, db)
    pass_time(db, 70)
    jobs = Jobs(metadata_subspace(queue.subspace), 60)
    sweeping = db.create_transaction()
    assert jobs.sweep(sweeping, round(_clock.now() * 1_000_000)) == 1  # the old finish's entry
    assert queue.requeue_dead_letters(db) == 1
    with raises_fdb_error(1020):
        sweeping.commit().wait()
    assert queue.job(db, job.id).state == "waiting"


def test_a_finish_sweeps_expired_jobs_at_most_once_a_second():
    db = memory.open()
    queue = queue_of(Queue, "sweep", result_ttl=1)
    jobs = [queue.submit(db, n) for n in range(SWEEP_LIMIT + 5)]
    for _ in jobs:
        queue.dequeue(db)
    pass_time(db, 2)
    queue.submit(db, "late")
    queue.dequeue(db)  # finishing it sweeps up to SWEEP_LIMIT expired ones
    cleared = [job for job in jobs if queue.job(db, job.id) is None]
    assert len(cleared) == SWEEP_LIMIT


def test_result_ttl_zero_keeps_no_result():
    db = memory.open()
    queue = queue_of(Queue, "no-results", result_ttl=0)
    job = queue.submit(db, "x")
    queue.ack(db, queue.claim(db, 30), result="lost on purpose")
    info = queue.job(db, job.id)
    assert info is not None and info.state == "succeeded" and not info.has_result
    pass_time(db, 1.5)
    queue.submit(db, "next")
    queue.dequeue(db)  # its finish sweeps: the record of the first is gone
    assert queue.job(db, job.id) is None


def test_a_dead_job_carries_its_traceback():
    db = memory.open()
    queue = queue_of(Queue, "traceback", max_deliveries=1)
    job = queue.submit(db, "x")

    def handler(value: str) -> None:
        raise RuntimeError(f"cannot handle {value}")

    queue.work(db, handler, lease=30, until_empty=True, handle_signals=False)
    with pytest.raises(JobFailedError) as failed:
        queue.result(db, job.id, timeout=1)
    kind, message, trace = failed.value.error
    assert (kind, message) == ("RuntimeError", "cannot handle x")
    assert "Traceback" in trace and "in handler" in trace


@KINDS
def test_bad_input_changes_nothing(kind):
    db = memory.open()
    queue = queue_of(kind, "bad-input")
    other = queue_of(kind, "another-queue")
    job = submit(queue, db, "x")
    before = keys_under(db, queue.subspace.key())
    foreign = submit(other, db, "y")
    for bad, error in [
        (42, TypeError),
        ("not hex" * 5, ValueError),
        ("ab" * 15, ValueError),
        ("ab" * 17, ValueError),
        (foreign.id, ValueError),
    ]:
        with pytest.raises(error):
            queue.job(db, bad)
        with pytest.raises(error):
            queue.cancel(db, bad)
        with pytest.raises(error):
            queue.result(db, bad, timeout=0.1)
    with pytest.raises(ValueError, match="another queue"):
        queue.cancel(db, foreign.id)
    with pytest.raises(TypeError):
        submit(queue, db, object())
    with pytest.raises(ValueError):
        submit(queue, db, "x" * 99_990)  # fits an item, not with a job's header
    with pytest.raises(ValueError):
        queue_of(kind, "bad-ttl", result_ttl=-1)
    with pytest.raises(TypeError):
        queue_of(kind, "bad-ttl", result_ttl="a day")
    with pytest.raises(ValueError):
        queue_of(kind, "bad-codec", result_codec="no such codec")
    with pytest.raises(TypeError):
        queue.result(db.create_transaction(), job.id)
    assert keys_under(db, queue.subspace.key()) == before
    assert other.cancel(db, foreign.id) is True


def test_a_deduplicated_submit_returns_none():
    db = memory.open()
    queue = queue_of(Queue, "dedup")
    first = queue.submit(db, "x", dedup_id="order-1")
    assert first is not None
    assert queue.submit(db, "x", dedup_id="order-1") is None
    assert queue.size(db) == 1


def test_a_jobs_value_is_the_value_submitted_everywhere():
    db = memory.open()
    queue = queue_of(Queue, "listings", max_deliveries=1)
    queue.submit(db, "a")
    assert queue.peek(db) == "a" and queue.peek_many(db, 5) == ["a"]
    lease = queue.claim(db, 30)
    assert [held.value for held in queue.leases(db)] == ["a"]
    assert queue.leases(db)[0].job_id == lease.job_id
    queue.dead_letter(db, lease, "no")
    assert [letter.value for letter in queue.dead_letters(db)] == ["a"]
    assert queue.requeue_dead_letters(db) == 1
    assert queue.dequeue(db) == "a"
    assert JOB_HEADER not in b"".join(keys_under(db, b"jobs-nothing"))


@KINDS
@SHARDS
def test_jobs_lists_them_by_state(kind, shards):
    db = memory.open()
    queue = queue_of(kind, "listing", shards=shards)
    jobs = [submit(queue, db, n) for n in range(5)]
    assert queue.cancel(db, jobs[0].id)
    lease = queue.claim(db, 30)
    states = sorted(info.state for info in queue.jobs(db))
    assert states == ["cancelled", "running", "waiting", "waiting", "waiting"]
    assert [info.id for info in queue.jobs(db, state="running")] == [lease.job_id]
    assert len(queue.jobs(db, limit=2)) == 2 and queue.jobs(db, limit=0) == []
    with pytest.raises(ValueError, match="state must be one of"):
        queue.jobs(db, state="done")
    with pytest.raises(ValueError):
        queue.jobs(db, limit=-1)


@KINDS
def test_each_scheduled_run_is_a_job(kind):
    db = memory.open()
    queue = queue_of(kind, "scheduled")
    if kind is Queue:
        queue.schedule(db, "tick", "tick", every=1)
    else:
        queue.schedule(db, "tick", "tick", every=1, priority=0)
    pass_time(db, 1.5)
    assert queue.enqueue_due_runs(db) == 1
    [run] = queue.jobs(db)
    assert run.state == "waiting"
    queue.work(db, lambda value: value + "!", lease=30, until_empty=True, handle_signals=False)
    assert queue.result(db, run.id, timeout=1) == "tick!"


def test_a_job_past_its_time_limit_is_retrying_with_that_error():
    db = memory.open()
    queue = queue_of(Queue, "time-limit", max_deliveries=1)
    job = queue.submit(db, "hangs")
    release = threading.Event()

    def handler(value: str) -> None:
        release.wait(5)

    try:
        queue.work(db, handler, lease=1, time_limit=0.3, until_empty=True, handle_signals=False)
    finally:
        release.set()
    info = queue.job(db, job.id)
    assert info.state == "dead" and info.error[0] == "TimeLimitExceeded"
    assert "time limit exceeded" in info.error[1]


class RefusingJson:
    """A JSON codec that cannot read the values in ``refused`` (a later version of it)."""

    def __init__(self) -> None:
        self.refused: set[str] = set()

    def encode(self, value: object) -> bytes:
        return json.dumps(value).encode()

    def decode(self, data: bytes) -> object:
        value = json.loads(data)
        if value in self.refused:
            raise ValueError(f"cannot read {value!r}")
        return value


@KINDS
@pytest.mark.parametrize("take", ["dequeue", "claim", "work"])
def test_a_job_whose_value_cannot_be_decoded_is_dead_and_says_why(kind, take):
    db = memory.open()
    codec = RefusingJson()
    queue = queue_of(kind, "poison-" + take, codec=codec)
    job = submit(queue, db, "poison")
    submit(queue, db, "fine")
    codec.refused.add("poison")
    if take == "dequeue":
        assert (queue.dequeue(db) if kind is Queue else queue.pop_min(db)) == "fine"
    elif take == "claim":
        assert queue.claim(db, lease=60).value == "fine"
    else:
        assert queue.work(db, lambda value: None, lease=60, until_empty=True).succeeded == 1
    info = queue.job(db, job.id)
    assert info.state == "dead" and "cannot read 'poison'" in info.error[1]
    with pytest.raises(JobFailedError, match="dead"):
        queue.result(db, job.id)  # no timeout: it must not wait for good
    assert len(queue.dead_letters(db)) == 1


def forget_where_items_are(db: Any, queue: Any) -> None:
    """Clear the notes of where each job's item is, as an fdbqueue before them left none:
    a cancel then leaves the items to the takes that meet them."""
    prefix = queue.subspace.key() + b"\xff" + fdb.tuple.pack(("job_items",))

    @fdbqueue.transactional
    def clear(tr: Any) -> None:
        del tr[prefix : prefix + b"\xff"]

    clear(db)


def submit_many(db: Any, queue: Any, values: list[Any], per_transaction: int = 500) -> list[Any]:
    jobs: list[Any] = []
    for start in range(0, len(values), per_transaction):

        @fdbqueue.transactional
        def some(tr: Any, part: list[Any] = values[start : start + per_transaction]) -> list[Any]:
            return [submit(queue, tr, value) for value in part]

        jobs += some(db)
    return jobs


def cancel_many(db: Any, queue: Any, jobs: list[Any], per_transaction: int = 500) -> None:
    for start in range(0, len(jobs), per_transaction):

        @fdbqueue.transactional
        def some(tr: Any, part: list[Any] = jobs[start : start + per_transaction]) -> None:
            assert all(queue.cancel(tr, job.id) for job in part)

        some(db)


@KINDS
@pytest.mark.parametrize("take", ["dequeue", "claim"])
def test_cancelled_items_a_take_meets_are_dropped_a_bounded_number_per_transaction(kind, take):
    """Items a cancel could not remove (here: written before cancels noted where items are)
    are dropped by the takes that meet them, at most CANCELLED_PER_TAKE per transaction,
    each batch committed: thousands never hold a take past the five-second limit."""
    db = memory.open()
    queue = queue_of(kind, "lazy-" + take)
    doomed = submit_many(db, queue, [f"doomed {n}" for n in range(300)])
    submit(queue, db, "live")
    forget_where_items_are(db, queue)
    cancel_many(db, queue, doomed)
    assert queue.size(db) == 301  # left to the takes
    db.reset_stats()
    if take == "dequeue":
        assert (queue.dequeue(db) if kind is Queue else queue.pop_min(db)) == "live"
    else:
        assert queue.claim(db, lease=60).value == "live"
    assert db.stats()["commits"] >= 300 // CANCELLED_PER_TAKE
    assert db.stats()["too_old"] == 0
    assert queue.size(db) == 0 and queue.empty(db)


@KINDS
@pytest.mark.parametrize(
    "count", [500, pytest.param(10_000, marks=pytest.mark.slow("10,000 jobs: seconds"))]
)
def test_cancelled_jobs_cost_the_next_take_nothing(kind, count):
    """A cancel removes its job's item, so the next take reads what an ordinary take reads."""
    db = memory.open()
    queue = queue_of(kind, "cancelled-head")

    def take() -> Any:
        return queue.dequeue(db) if kind is Queue else queue.pop_min(db)

    submit(queue, db, "warm")
    take()
    # Receipts and job records are swept at most once a second, by the first write after: a
    # second passed, then a write, so each measured take finds the same sweeps due.
    db.pass_time(1.1)
    submit(queue, db, "ordinary")
    db.reset_stats()
    assert take() == "ordinary"
    ordinary = db.stats()
    cancel_many(db, queue, submit_many(db, queue, [f"doomed {n}" for n in range(count)]))
    db.pass_time(1.1)
    submit(queue, db, "live")
    assert queue.size(db) == 1 and queue.peek(db) == "live"
    db.reset_stats()
    assert take() == "live"
    after = db.stats()
    assert (after["reads"], after["keys_read"], after["commits"]) == (
        ordinary["reads"],
        ordinary["keys_read"],
        ordinary["commits"],
    )


@KINDS
@SHARDS
@pytest.mark.parametrize("take", ["claim", "dequeue"])
def test_consumers_in_threads_sharing_the_next_jobs_record_read_get_each_job_once(
    kind, shards, take
):
    """A take or claim of a job sends the read of the record it expects (the job behind the
    one its end took last, :meth:`fdbqueue._consuming.ends.End._front_ahead`) with the front:
    a guess shared by the threads of one queue object, often wrong when they race. Each job
    still goes to one consumer, with its own record, while cancels race them."""
    db = memory.open(seed=3)
    shared = queue_of(kind, "racing", codec="raw", shards=shards)
    other = queue_of(kind, "racing", codec="raw", shards=shards)
    jobs = {submit(shared, db, b"%03d" % i).id: b"%03d" % i for i in range(120)}
    by_value = {value: job for job, value in jobs.items()}
    cancelled = set(list(jobs)[5::17])
    got: list[tuple[bytes, str | None]] = []
    failures: list[BaseException] = []

    def consume(queue: Any) -> None:
        try:
            while True:
                if take == "claim":
                    lease = queue.claim(db, 60)
                    if lease is None:
                        return
                    got.append((lease.value, lease.job_id))
                    queue.ack(db, lease)
                else:
                    value = queue.pop_min(db) if kind is PriorityQueue else queue.dequeue(db)
                    if value is None:
                        return
                    got.append((value, by_value[value]))
        except BaseException as error:  # reported below
            failures.append(error)

    def cancel() -> None:
        for job in cancelled:
            shared.cancel(db, job)

    threads = [threading.Thread(target=consume, args=(queue,)) for queue in [shared] * 3 + [other]]
    threads.append(threading.Thread(target=cancel))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failures == []
    values = [value for value, _ in got]
    assert len(values) == len(set(values))  # each once
    assert all(job == by_value[value] for value, job in got)  # the lease's job is its item's
    delivered = {by_value[value] for value in values}
    assert delivered | cancelled >= set(jobs) and len(delivered) + len(cancelled) >= len(jobs)
    for job in jobs:
        state = shared.job(db, job).state
        assert state == ("succeeded" if job in delivered else "cancelled"), (job, state)


# -- a job's item: its value as submitted, its id in its key (issue 44, decision 4) -----------


def _items(db: Any, space: Subspace) -> list[tuple[bytes, bytes]]:
    """The (key, value) pairs of the items under ``space`` (not its metadata), in key order."""
    span = space.range()
    return [
        (bytes(kv.key), bytes(kv.value)) for kv in db.create_transaction()[span.start : span.stop]
    ]


@KINDS
def test_a_jobs_item_holds_the_value_submitted_and_its_id_in_its_key(kind):
    """A reader of the recipe's layout reads exactly the value submitted, even one that starts
    as a job's header does; the key's last element, the recipe's random one, names the job."""
    db = memory.open()
    queue = queue_of(kind, "value-as-submitted", codec="raw")
    lookalike = JOB_HEADER + bytes(range(16)) + b"payload"
    jobs = [submit(queue, db, b"first"), submit(queue, db, lookalike)]
    stored = _items(db, queue.subspace)
    assert [value for _key, value in stored] == [b"first", lookalike]
    assert [queue.subspace.unpack(key)[-1] for key, _value in stored] == [
        b"\xfe" + bytes.fromhex(job.id) for job in jobs
    ]
    assert queue.peek(db) == b"first"
    lease = queue.claim(db, lease=60)
    assert (lease.value, lease.job_id) == (b"first", jobs[0].id)
    queue.ack(db, lease)
    taken = queue.dequeue(db) if kind is Queue else queue.pop_min(db)
    assert taken == lookalike
    assert [queue.job(db, job.id).state for job in jobs] == ["succeeded", "succeeded"]


@KINDS
@pytest.mark.parametrize("take", ["claim", "dequeue"])
def test_a_jobs_item_stored_with_its_header_in_its_value_is_still_its_jobs(kind, take):
    """An item an fdbqueue wrote before jobs moved to the key (the header in its value, a
    random last element) is read as its job's: taken, claimed and finished as before."""
    db = memory.open()
    queue = queue_of(kind, f"header-in-value-{take}", codec="json")
    job = submit(queue, db, {"n": 1})
    ((key, value),) = _items(db, queue.subspace)
    position = queue.subspace.unpack(key)[:-1]
    tr = db.create_transaction()
    del tr[key]
    tr[queue.subspace.pack((*position, b"r" * 20))] = JOB_HEADER + bytes.fromhex(job.id) + value
    tr.commit().wait()
    assert queue.peek(db) == {"n": 1}
    if take == "claim":
        lease = queue.claim(db, lease=60)
        assert (lease.value, lease.job_id) == ({"n": 1}, job.id)
        assert queue.job(db, job.id).state == "running"
        queue.ack(db, lease, result="done")
        assert queue.result(db, job.id, timeout=1) == "done"
    else:
        assert (queue.dequeue(db) if kind is Queue else queue.pop_min(db)) == {"n": 1}
        assert queue.job(db, job.id).state == "succeeded"


@pytest.mark.parametrize("shards", [1, 4])
def test_a_released_and_a_requeued_jobs_item_keeps_its_id_in_its_key(shards):
    """A job's item that comes back (a released lease's retry, a dead letter requeued) is
    written as a new item: its value alone, its id in its key again."""
    db = memory.open()
    queue = queue_of(Queue, f"comes-back-{shards}", codec="raw", shards=shards)
    job = queue.submit(db, b"again")
    element = b"\xfe" + bytes.fromhex(job.id)

    def item_elements() -> list[tuple[bytes, bytes]]:
        found = []
        for shard in range(shards):
            space = queue.subspace if shards == 1 else queue.subspace.subspace((shard,))
            found += [(space.unpack(key)[-1], value) for key, value in _items(db, space)]
        return found

    assert item_elements() == [(element, b"again")]
    queue.release(db, queue.claim(db, lease=60))
    queue.dead_letter(db, queue.claim(db, lease=60), reason="test")
    assert item_elements() == []
    assert queue.requeue_dead_letters(db) == 1
    assert item_elements() == [(element, b"again")]
    lease = queue.claim(db, lease=60)
    assert (lease.value, lease.job_id) == (b"again", job.id)


@pytest.mark.parametrize(
    "job_id",
    [
        bytes(range(1, 17)),
        b"\xff" * 16,
        b"\x00" * 16,
        b"a" * 7 + b"\x00" + b"b" * 8,
        b"\x00\xff" * 8,
        b"\x01\xfe\x00" * 5 + b"\x00",  # the mark's packed bytes inside the id
        b"tag\x00" + b"\x01" * 12,  # a queue's tag may hold a NUL
    ],
)
@pytest.mark.parametrize("position", [(0,), (2**70, 3), (-5, 0)])
def test_the_hint_of_a_jobs_key_is_its_id(job_id, position):
    """job_hint reads the id from the key's packed tail, also an id whose NUL bytes the tuple
    layer escapes; a header in the value still gives the hint for an older item."""
    key = Subspace(("hint",)).pack((*position, job_element(job_id)))
    assert job_of_element(Subspace(("hint",)).unpack(key)[-1]) == job_id
    assert job_hint(key, b"value") == job_id
    plain = Subspace(("hint",)).pack((*position, b"\x01" * 20))
    assert job_hint(plain, job_header(job_id) + b"value") == job_id  # an older item's
    assert job_hint(plain, b"value") is None


@given(
    job_id=st.binary(min_size=16, max_size=16),
    position=st.lists(st.integers(min_value=-(2**80), max_value=2**80), min_size=1, max_size=2),
)
def test_the_hint_of_any_jobs_key_is_its_id(job_id, position):
    """Whatever its bytes, a job's id is read back from its item's packed key."""
    key = Subspace(("hint", b"\x00\xff")).pack((*position, job_element(job_id)))
    assert job_hint(key, b"") == job_id


def test_a_move_between_shards_keeps_each_jobs_id_in_its_key():
    """A consumer's move of a crowded shard's front into its home
    (``FifoShard.move_front``) writes each item anew: a job's keeps its id in its key, its
    cancel finds it where it went, and a claim there delivers it as its job's."""
    db = memory.open()
    queue = queue_of(Queue, "moved-jobs", codec="raw", shards=4)
    crowded, home = queue._router.shards[0], queue._router.shards[1]
    jobs = {bytes.fromhex(job.id): job for job in submit_many(db, queue, [b"x"] * 1000)}

    def shard_items(shard: Any) -> list[tuple[bytes, bytes]]:
        return _items(db, queue.subspace.subspace((queue._router.shards.index(shard),)))

    before = shard_items(crowded)
    moved = fdbqueue.transactional(lambda tr: crowded.move_front(tr, home, 64))(db)
    assert moved == 64
    arrived = shard_items(home)[-moved:]
    assert [value for _key, value in arrived] == [b"x"] * moved
    ids = [job_of_element(Subspace(rawPrefix=b"").unpack(key)[-1]) for key, _value in arrived]
    first_moved = [job_of_element(queue.subspace.unpack(key)[-1]) for key, _ in before[:moved]]
    assert ids == first_moved and all(job in jobs for job in ids)
    assert queue.cancel(db, jobs[ids[0]].id)  # found where it went
    assert queue.job(db, jobs[ids[0]].id).state == "cancelled"
