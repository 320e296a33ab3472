"""The worker loop (fdbqueue.worker): ack, retry with backoff, dead letters, heartbeat,
shutdown, signals, faults, and the ``fdbqueue work`` command."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import re
import signal
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import despite_timeouts, pass_time

import fdbqueue.asyncio as aq
from fdbqueue import PriorityQueue, Queue, Subspace, memory
from fdbqueue._delivery.heartbeat import Heartbeat, Job
from fdbqueue._delivery.settling import retry_delay
from fdbqueue.cli import cli
from fdbqueue.worker import STOP_CHECK_SECONDS


def stop_after(seconds: float) -> threading.Event:
    stop = threading.Event()
    threading.Timer(seconds, stop.set).start()
    return stop


def stop_when(condition: Any, stop: threading.Event | None = None) -> threading.Event:
    """An event set once ``condition()`` holds (checked every 20 ms, at most 20 s)."""
    stop = stop or threading.Event()

    def watch() -> None:
        deadline = time.monotonic() + 20
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.02)
        stop.set()

    threading.Thread(target=watch, daemon=True).start()
    return stop


@pytest.mark.parametrize("kind", ["queue", "priority"])
def test_every_item_is_handled_and_acknowledged(db, subspace, kind):
    if kind == "queue":
        queue: Any = Queue(subspace)
        queue.enqueue_many(db, range(20))
    else:
        queue = PriorityQueue(subspace)
        for value in range(20):
            queue.push(db, value, priority=value % 3)
    handled: list[int] = []
    lock = threading.Lock()

    def handler(value: int) -> None:
        with lock:
            handled.append(value)

    summary = queue.work(db, handler, lease=10, concurrency=3, until_empty=True)
    assert sorted(handled) == list(range(20))
    assert summary.succeeded == 20 and summary.retried == summary.dead_lettered == 0
    assert queue.leases(db) == [] and queue.size(db) == 0


def test_a_failing_job_is_released_with_a_backoff_then_succeeds(db, subspace):
    queue = Queue(subspace)
    queue.enqueue(db, "flaky")
    calls: list[float] = []

    def handler(value: str) -> None:
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise RuntimeError("temporary")

    stop = stop_when(lambda: len(calls) >= 2)
    summary = queue.work(db, handler, lease=10, stop=stop, backoff=0.4, max_backoff=0.4)
    assert summary.retried == 1 and summary.succeeded == 1
    assert calls[1] - calls[0] >= 0.4 * 0.5 - 0.05  # jitter: at least half the backoff
    assert queue.leases(db) == [] and queue.dead_letters(db) == []


def test_a_job_failing_every_time_becomes_a_dead_letter_with_the_error(db, subspace):
    queue = Queue(subspace, max_deliveries=3)
    queue.enqueue(db, "poison-job")
    calls = []

    def handler(value: str) -> None:
        calls.append(value)
        raise ZeroDivisionError("division by zero")

    stop = stop_when(lambda: bool(queue.dead_letters(db)))
    summary = queue.work(db, handler, lease=10, stop=stop, backoff=0.01, max_backoff=0.02)
    assert len(calls) == 3
    assert (summary.retried, summary.dead_lettered) == (2, 1)
    [letter] = queue.dead_letters(db)
    assert letter.value == "poison-job" and letter.deliveries == 3
    assert "ZeroDivisionError: division by zero" in letter.reason


def test_a_long_job_keeps_its_item_through_the_heartbeat(db, subspace):
    queue = Queue(subspace)
    queue.enqueue(db, "long")
    calls = []
    others: list[Any] = []

    def handler(value: str) -> None:
        calls.append(value)
        deadline = time.monotonic() + 1.2  # four leases long
        while time.monotonic() < deadline:
            others.append(queue.claim(db, lease=5))  # another consumer finds nothing
            time.sleep(0.1)

    summary = queue.work(db, handler, lease=0.3, until_empty=True)
    assert calls == ["long"] and summary.succeeded == 1 and summary.lost == 0
    assert all(other is None for other in others)


def test_a_job_whose_lease_is_lost_is_not_acknowledged_and_runs_again():
    db = memory.open(seed=2)
    queue = Queue(Subspace(("lost",)))
    queue.enqueue(db, "job")
    calls = []
    stolen = []

    def handler(value: str) -> None:
        calls.append(value)
        if len(calls) == 1:
            pass_time(db, 20)  # the lease expires before the heartbeat extends it
            stolen.append(queue.claim(db, lease=60))  # and another consumer takes the item
            time.sleep(0.5)  # the heartbeat now finds the lease gone

    summary = queue.work(db, handler, lease=3, stop=stop_after(1.5))
    assert summary.lost == 1 and summary.succeeded == 0
    assert stolen[0] is not None and stolen[0].deliveries == 2
    queue.ack(db, stolen[0])  # the thief holds it; nothing else changed it


def test_a_job_settled_as_the_heartbeat_beats_is_not_reported_lost(db, subspace, caplog):
    """The handler returns and its job is acknowledged just before the heartbeat takes the
    job's lock to extend it: the beat finds it finished and leaves it (no extension tried, no
    "lost the lease" warning), instead of extending an acknowledged lease."""
    queue = Queue(subspace)
    queue.enqueue(db, "job")
    lease = queue.claim(db, lease=30)
    job = Job(lease)
    beat_done = threading.Event()

    class SettledFirst:
        """``job.lock``, whose first taker finds the job settled just before."""

        def __init__(self) -> None:
            self.lock = threading.Lock()
            self.settled = False

        def acquire(self, blocking: bool = True) -> bool:
            if not self.settled:
                self.settled = True
                assert job.timing.finish()
                queue.ack(db, lease)
            return self.lock.acquire(blocking)

        def release(self) -> None:
            self.lock.release()
            beat_done.set()

    job.lock = SettledFirst()  # type: ignore[assignment]
    heartbeat = Heartbeat(queue, db, 0.3)
    try:
        with caplog.at_level(logging.WARNING, logger="fdbqueue.worker"), heartbeat.running(job):
            assert beat_done.wait(10)
    finally:
        heartbeat.close()
    assert not job.lost
    assert not [r for r in caplog.records if "lost the lease" in r.getMessage()]


def test_stop_lets_a_running_job_finish_and_acknowledges_it(db, subspace):
    queue = Queue(subspace)
    queue.enqueue_many(db, ["a", "b"])
    started = threading.Event()
    stop = threading.Event()
    finished = []

    def handler(value: str) -> None:
        started.set()
        stop.set()  # asked to stop while this job runs
        time.sleep(0.3)
        finished.append(value)

    summary = queue.work(db, handler, lease=10, stop=stop)
    assert finished == ["a"] and summary.succeeded == 1
    assert queue.leases(db) == [] and queue.dequeue(db) == "b"  # "b" was not claimed


def test_an_idle_worker_returns_soon_after_stop(db, subspace):
    queue = Queue(subspace)
    stop = stop_after(0.2)
    started = time.monotonic()
    summary = queue.work(db, lambda value: None, lease=10, concurrency=2, stop=stop)
    assert time.monotonic() - started < 0.2 + STOP_CHECK_SECONDS + 1.0
    assert summary.succeeded == 0


def test_sigterm_stops_the_worker_in_the_main_thread_and_restores_the_handlers(db, subspace):
    queue = Queue(subspace)
    queue.enqueue(db, "x")
    before = signal.getsignal(signal.SIGTERM)
    threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGTERM)).start()
    summary = queue.work(db, lambda value: None, lease=10)
    assert summary.succeeded == 1
    assert signal.getsignal(signal.SIGTERM) is before


def test_an_item_claimed_after_stop_is_released_at_once():
    db = memory.open(seed=3)
    queue = Queue(Subspace(("released",)))
    stop = threading.Event()
    original_claim = queue.claim

    def claim_then_stop(*args: Any, **kwargs: Any) -> Any:
        lease = original_claim(*args, **kwargs)
        if lease is not None:
            stop.set()  # stop arrives while the claim returns
        return lease

    queue.claim = claim_then_stop  # type: ignore[method-assign]
    queue.enqueue(db, "x")
    summary = Queue.work(queue, db, lambda value: pytest.fail("handled"), lease=10, stop=stop)
    assert summary.released == 1
    lease = original_claim(db, lease=10)
    assert lease is not None and lease.value == "x"


def test_a_handler_raising_system_exit_gives_its_item_back_and_stops_the_worker(db, subspace):
    queue = Queue(subspace)
    queue.enqueue(db, "x")

    def handler(value: str) -> None:
        raise SystemExit(3)

    with pytest.raises(SystemExit):
        queue.work(db, handler, lease=60, concurrency=2)
    lease = queue.claim(db, lease=10)
    assert lease is not None and lease.value == "x"


EVERY_FAULT = memory.Faults(
    not_committed=0.05,
    commit_unknown_result=0.1,
    transaction_too_old=0.05,
    timed_out=0.05,
)


def test_under_faults_every_item_is_handled_and_none_is_left_behind():
    # unknown results twice as often as EVERY_FAULT's: about 70 commits, of which (with three
    # threads, the draws are not the seed's alone) one or more must be applied: at EVERY_FAULT's
    # rate none was, about one run in 35
    faults = dataclasses.replace(EVERY_FAULT, commit_unknown_result=0.25)
    db = memory.open(faults=faults, seed=41)
    queue = Queue(Subspace(("worker-faults",)), max_deliveries=None)
    despite_timeouts(lambda: queue.enqueue_many(db, range(30)))
    handled: set[int] = set()
    failed_once: set[int] = set()
    lock = threading.Lock()

    def handler(value: int) -> None:
        with lock:
            if value % 7 == 0 and value not in failed_once:
                failed_once.add(value)
                raise RuntimeError("first delivery fails")
            handled.add(value)

    stop = stop_when(lambda: len(handled) == 30)
    queue.work(db, handler, lease=10, concurrency=3, stop=stop, backoff=0.01, max_backoff=0.05)
    db.faults = memory.Faults()
    db.settle()
    assert handled == set(range(30))
    assert db.stats()["injected_commit_unknown_result_applied"] > 0
    assert queue.claim(db, lease=1) is None and queue.dead_letters(db) == []
    assert queue.leases(db) == []  # every lease acknowledged or released, none left behind


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"handler": "not callable"}, TypeError),
        ({"lease": 0}, ValueError),
        ({"lease": float("inf")}, ValueError),
        ({"concurrency": 0}, ValueError),
        ({"concurrency": 1.5}, TypeError),
        ({"backoff": -1}, ValueError),
        ({"backoff": 5, "max_backoff": 1}, ValueError),
        ({"stop": "yes"}, TypeError),
        ({"until_empty": "yes"}, TypeError),
    ],
)
def test_bad_arguments_are_refused_before_anything_runs(db, subspace, arguments, error):
    queue = Queue(subspace)
    queue.enqueue(db, "x")
    call: dict[str, Any] = {"handler": lambda value: None, "lease": 10, **arguments}
    handler = call.pop("handler")
    with pytest.raises(error):
        queue.work(db, handler, **call)
    assert queue.dequeue(db) == "x"


def test_work_needs_a_database(db, subspace):
    queue = Queue(subspace)
    tr = db.create_transaction()
    with pytest.raises(TypeError, match="Database"):
        queue.work(tr, lambda value: None, lease=10)


def test_retry_delays_double_per_delivery_with_jitter_up_to_the_cap():
    for deliveries, full in [(1, 1.0), (2, 2.0), (3, 4.0), (10, 60.0), (200, 60.0)]:
        delay = retry_delay(deliveries, 1.0, 60.0)
        assert full * 0.5 <= delay <= full


# -- the command ---------------------------------------------------------------------------


def test_the_work_command_runs_a_handler_from_a_module(tmp_path, monkeypatch):
    (tmp_path / "jobs_for_test.py").write_text(
        textwrap.dedent(
            """
            handled = []

            def handle(value):
                if value == "bad":
                    raise ValueError("bad job")
                handled.append(value)
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "jobs_for_test", raising=False)
    db = memory.open()
    queue = Queue(Subspace(("cli-work",)))
    queue.enqueue_many(db, ["a", "bad", "b"])
    result = CliRunner().invoke(
        cli,
        [
            *("--json", "--queue", "cli-work", "work", "jobs_for_test:handle"),
            *("--until-empty", "--max-deliveries", "1"),
        ],
        obj={"database": db},
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert summary["succeeded"] == 2 and summary["dead_lettered"] == 1
    assert sorted(sys.modules["jobs_for_test"].handled) == ["a", "b"]
    [letter] = queue.dead_letters(db)
    assert "ValueError: bad job" in letter.reason


@pytest.mark.parametrize(
    ("handler", "message"),
    [
        ("nocolon", "module:function"),
        ("no_such_module_xyz:f", "cannot load"),
        ("os:no_such_function", "cannot load"),
        ("os:sep", "not callable"),
    ],
)
def test_the_work_command_explains_a_bad_handler(handler, message):
    result = CliRunner().invoke(
        cli, ["--queue", "q", "work", handler], obj={"database": memory.open()}
    )
    assert result.exit_code == 2
    assert message in result.output


def test_the_work_command_refuses_a_bad_lease():
    result = CliRunner().invoke(
        cli, ["--queue", "q", "work", "os:fspath", "--lease", "0"], obj={"database": memory.open()}
    )
    assert result.exit_code == 2 and "lease" in result.output


def test_push_with_a_delay_and_json_values_from_the_command_line():
    db = memory.open()
    result = CliRunner().invoke(
        cli,
        ["--queue", "cli-delay", "--codec", "json", "push", '{"job": 1}', "--delay", "0.3"],
        obj={"database": db},
    )
    assert result.exit_code == 0, result.output
    queue = Queue(Subspace(("cli-delay",)), codec="json")
    assert queue.dequeue(db) is None
    assert queue.dequeue(db, block=True, timeout=5) == {"job": 1}


# -- a batch run finishes what it starts -------------------------------------------------------


def failing_once(failed: set[Any]) -> Callable[[Any], None]:
    def handle(value: Any) -> None:
        if value not in failed:
            failed.add(value)
            raise RuntimeError(f"first try of {value}")

    return handle


def test_until_empty_returns_once_every_failed_item_was_retried_to_an_end(db, subspace):
    """New-user finding 3: work(until_empty=True) returned before a job that failed once
    was retried (it was left released with its backoff delay)."""
    queue = Queue(subspace)
    queue.enqueue_many(db, ["a", "b", "c"])
    summary = queue.work(
        db,
        failing_once(set()),
        lease=30,
        concurrency=2,
        backoff=0.2,
        max_backoff=0.3,
        handle_signals=False,
        until_empty=True,
    )
    assert (summary.succeeded, summary.retried) == (3, 3)
    assert queue.leases(db) == [] and queue.empty(db)


def test_until_empty_waits_for_items_failing_to_their_dead_letters(db, subspace):
    queue = Queue(subspace, max_deliveries=2)
    queue.enqueue(db, "poison job")

    def always_fails(value: Any) -> None:
        raise ValueError("never works")

    summary = queue.work(
        db, always_fails, lease=30, backoff=0.1, handle_signals=False, until_empty=True
    )
    assert (summary.retried, summary.dead_lettered) == (1, 1)
    assert [letter.value for letter in queue.dead_letters(db)] == ["poison job"]


def test_a_backoff_above_the_release_cap_is_capped(db, subspace):
    """Finding 4: a backoff over 12 hours crashed the loop at the first failure, the item
    staying leased for its whole lease."""
    queue = Queue(subspace)
    queue.enqueue(db, "x")
    stop = threading.Event()

    def fail_then_stop(value: Any) -> None:
        stop.set()
        raise RuntimeError("fails")

    summary = queue.work(
        db,
        fail_then_stop,
        lease=30,
        backoff=100_000,
        max_backoff=100_000,
        stop=stop,
        handle_signals=False,
    )
    assert summary.retried == 1
    [lease] = queue.leases(db)
    assert lease.expiry_version - db.create_transaction().get_read_version().wait() <= (
        12 * 3600 * 1_000_000
    )
    assert retry_delay(30, 100_000, 100_000) <= 12 * 3600


@pytest.mark.parametrize("concurrency", [0, -1])
def test_concurrency_below_one_is_refused_in_one_line(db, subspace, concurrency):
    with pytest.raises(ValueError, match="concurrency must be >= 1"):
        Queue(subspace).work(db, print, lease=30, concurrency=concurrency)


@pytest.mark.parametrize(
    ("handler", "transactional"),
    [
        (lambda value: None, True),
        (lambda tr, value: None, False),
        (lambda: None, False),
        (lambda a, b, c: None, True),
    ],
    ids=["one-argument-transactional", "two-arguments-plain", "none", "three"],
)
def test_a_handler_of_the_wrong_arity_is_refused_before_anything_is_claimed(handler, transactional):
    db = memory.open()
    queue = Queue(Subspace(("arity",)))
    queue.enqueue(db, "job")
    with pytest.raises(TypeError, match="handler"):
        queue.work(db, handler, lease=5, until_empty=True, transactional=transactional)
    assert queue.leases(db) == [] and queue.size(db) == 1 and queue.dead_letters(db) == []


def test_the_work_command_runs_a_transactional_handler_and_checks_its_arity(tmp_path):
    db = memory.open()
    Queue(Subspace(("cli-tx",))).enqueue_many(db, [1, 2])
    (tmp_path / "cli_tx_handlers.py").write_text(
        "def effect(tr, value):\n    tr[b'cli-tx-effect-%d' % value] = b'1'\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        plain = CliRunner().invoke(
            cli,
            ["--queue", "cli-tx", "work", "cli_tx_handlers:effect", "--lease", "5"],
            obj={"database": db},
        )
        assert plain.exit_code == 2 and "transactional=True" in plain.output
        result = CliRunner().invoke(
            cli,
            [
                *("--queue", "cli-tx", "work", "cli_tx_handlers:effect", "--lease", "5"),
                *("--until-empty", "--transactional"),
            ],
            obj={"database": db},
        )
    finally:
        sys.path.remove(str(tmp_path))
    assert result.exit_code == 0, result.output
    assert db[b"cli-tx-effect-1"] == b"1" and db[b"cli-tx-effect-2"] == b"1"


# -- what the worker logs ---------------------------------------------------------------------


def work_quickly(queue: Any, db: Any, handler: Any, loop: str) -> Any:
    """``work`` until the queue is empty, retries 10 to 20 ms apart, on the thread loop or
    (``loop`` "asyncio") the asyncio one; its summary."""
    options: dict[str, Any] = {"lease": 30, "backoff": 0.01, "max_backoff": 0.02}
    options.update(handle_signals=False, until_empty=True)
    if loop == "thread":
        return queue.work(db, handler, **options)
    return asyncio.run(aq.Queue.from_sync(queue).work(db, handler, **options))


def run_worker_logging(caplog: Any, loop: str, name: str) -> tuple[Any, list[Any]]:
    """Run a worker (``loop``: the thread or the asyncio one) until empty on a queue with a
    job that succeeds, one that fails once and one that always fails (two deliveries at
    most), with every fdbqueue record captured; the summary and the worker's and leases'
    records."""
    db = memory.open(seed=4)
    queue: Any = Queue(Subspace((name,)), max_deliveries=2)
    queue.enqueue_many(db, ["fine", "flaky", "broken"])
    failed: set[str] = set()

    def handler(value: str) -> None:
        if value == "broken" or (value == "flaky" and value not in failed):
            failed.add(value)
            raise RuntimeError(f"{value} failed")

    with caplog.at_level(logging.DEBUG, logger="fdbqueue"):
        summary = work_quickly(queue, db, handler, loop)
    assert (summary.succeeded, summary.retried, summary.dead_lettered) == (2, 2, 1)
    records = [r for r in caplog.records if r.name in ("fdbqueue.worker", "fdbqueue.leases")]
    return summary, records


@pytest.mark.parametrize("loop", ["thread", "asyncio"])
def test_worker_logs_name_jobs_readably_without_a_doubled_prefix(caplog, loop):
    """Issue 36: worker logs printed raw key bytes, and each message began with
    "fdbqueue: " although the logger's name says so."""
    _summary, records = run_worker_logging(caplog, loop, f"job-log-{loop}")
    messages = [record.getMessage().split("\n")[0] for record in records]  # then a traceback
    assert messages and not [m for m in messages if m.startswith("fdbqueue:")]
    assert not [m for m in messages if "b'" in m or 'b"' in m or "\\x" in m], messages
    queue = f"\\('job-log-{loop}',\\)"
    # enqueued plainly, so named "item <lease id>" ("item of" begins the leases' lines)
    jobs = [m for m in messages if m.startswith("item ") and not m.startswith("item of ")]
    assert len(jobs) == 5  # 2 done, 2 retried, 1 dead letter
    assert all(re.match(f"item [0-9a-f]{{32}} of {queue} ", m) for m in jobs), jobs
    assert any(re.search("failed .*RuntimeError: flaky failed; value 'flaky'$", m) for m in jobs)
    again = [m for m in messages if "delivered again" in m]
    assert len(again) == 2
    redelivered = f"item of {queue} delivered again as lease [0-9a-f]{{32}} "
    assert all(re.match(redelivered, m) for m in again), again


@pytest.mark.parametrize("loop", ["thread", "asyncio"])
def test_worker_logs_name_a_job_by_its_job_id_at_every_delivery(caplog, loop):
    """Issue 43 item 14: the log named a job by the first 8 digits of its lease id, new at
    each delivery (and a queue's job ids share their first 8 digits, its tag): a job's lines
    could not be found by its id. They give its full job id, as ``fdbqueue job`` and
    ``queue.job`` take it; a plain item's give ``item`` and its full lease id."""
    db = memory.open(seed=5)
    queue: Any = Queue(Subspace((f"job-id-log-{loop}",)), max_deliveries=3)
    job = queue.submit(db, "report")
    queue.enqueue(db, "plain")
    leases: dict[str, list[str]] = {"report": [], "plain": []}

    def handler(value: str) -> None:
        if not leases[value]:
            leases[value].append("failed")
            raise RuntimeError(f"{value} failed")

    with caplog.at_level(logging.DEBUG, logger="fdbqueue.worker"):
        summary = work_quickly(queue, db, handler, loop)
    assert (summary.succeeded, summary.retried) == (2, 2)
    messages = [
        r.getMessage().split("\n")[0] for r in caplog.records if r.name == "fdbqueue.worker"
    ]
    about_job = [m for m in messages if m.endswith("value 'report'")]
    assert len(about_job) == 2  # failed, then done: the same id at both deliveries
    assert all(m.startswith(f"job {job.id} of ") for m in about_job), about_job
    about_item = [m for m in messages if m.endswith("value 'plain'")]
    assert len(about_item) == 2
    assert all(re.match("item [0-9a-f]{32} of ", m) for m in about_item), about_item
    assert len({m.split(" ")[1] for m in about_item}) == 2  # a lease id: new at each delivery


@pytest.mark.parametrize("loop", ["thread", "asyncio"])
def test_worker_logs_routine_deliveries_at_debug_and_only_failures_above_info(caplog, loop):
    """One line per redelivery at INFO was noise (examples/worker.py printed 285 lines): a
    redelivery and a job done are DEBUG; INFO and above are the start and the stop, one
    WARNING per failed delivery retried, one ERROR per job that became a dead letter."""
    _summary, records = run_worker_logging(caplog, loop, f"level-log-{loop}")
    loud = [(r.levelname, r.getMessage()) for r in records if r.levelno >= logging.INFO]
    kinds = sorted((level, message.split(" ")[0]) for level, message in loud)
    assert (
        kinds
        == [("ERROR", "item"), ("INFO", "worker"), ("INFO", "worker")] + [("WARNING", "item")] * 2
    ), loud
    debug = [r.getMessage() for r in records if r.levelno == logging.DEBUG]
    assert len([m for m in debug if "delivered again" in m]) == 2
    assert len([m for m in debug if " done " in m]) == 2


class _Counted:
    """A value that counts how often it was shown (``repr``)."""

    shown = 0

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __repr__(self) -> str:
        _Counted.shown += 1
        return f"_Counted({self.data!r})"


class _CountingCodec:
    name = "counting"

    def encode(self, value: _Counted) -> bytes:
        return value.data

    def decode(self, data: bytes) -> _Counted:
        return _Counted(bytes(data))


def test_a_worker_formats_no_log_line_that_no_handler_keeps(db, subspace, caplog):
    """The settlement's log line (the job, its value shortened, a traceback) is formatted only
    when the ``fdbqueue.worker`` logger keeps its level: at WARNING, a job that succeeded
    shows its value to nobody; at DEBUG, its line shows it."""
    queue = Queue(subspace, codec=_CountingCodec())
    queue.submit(db, _Counted(b"quiet"))
    _Counted.shown = 0
    with caplog.at_level(logging.WARNING, logger="fdbqueue.worker"):
        queue.work(db, lambda value: None, lease=30, until_empty=True, handle_signals=False)
    assert _Counted.shown == 0
    queue.submit(db, _Counted(b"told"))
    with caplog.at_level(logging.DEBUG, logger="fdbqueue.worker"):
        queue.work(db, lambda value: None, lease=30, until_empty=True, handle_signals=False)
    assert _Counted.shown == 1
    assert any("_Counted(b'told')" in record.getMessage() for record in caplog.records)
