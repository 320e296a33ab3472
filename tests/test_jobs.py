"""Jobs (fdbqueue._storage.jobs): what the shapes' matrix (tests/test_matrix.py, "jobs") does
not cover: faults, a caller's transaction, bad input, results in time, storage bounds."""

from __future__ import annotations

import threading
import time
from typing import Any

import fdb.tuple
import pytest
from helpers import pass_time

import fdbqueue
import fdbqueue.asyncio as fa
from fdbqueue import Job, JobFailedError, PriorityQueue, Queue, Subspace, memory
from fdbqueue._storage.jobs import JOB_HEADER, SWEEP_LIMIT


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


def test_a_result_the_codec_cannot_encode_is_not_kept(caplog):
    db = memory.open()
    queue = queue_of(Queue, "unencodable", codec="json")
    job = queue.submit(db, {"a": 1})
    queue.ack(db, queue.claim(db, 30), result=object())
    info = queue.job(db, job.id)
    assert info.state == "succeeded" and not info.has_result
    assert "is not kept" in caplog.text
    with_codec = queue_of(Queue, "result-codec", codec="json", result_codec="raw")
    other = with_codec.submit(db, {"a": 1})
    with_codec.ack(db, with_codec.claim(db, 30), result=b"\x00raw bytes")
    assert with_codec.result(db, other.id, timeout=1) == b"\x00raw bytes"


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
