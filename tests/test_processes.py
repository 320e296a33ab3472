"""Handlers in child processes (``work(..., processes=N)``): results come back, a job past its
time limit has its child killed whatever it is stuck in, a child that dies fails only its
delivery, and no child is left once ``work`` returns.

Real processes and real time: a time limit here is a wall-clock second or less.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import uuid
from typing import Any

import process_handlers
import pytest
from helpers import all_keys

import fdbqueue.asyncio as fa
from fdbqueue import PriorityQueue, Queue, Subspace, memory

KINDS = [(False, 1), (False, 4), (True, 1), (True, 4)]
KIND_IDS = ["Queue-1", "Queue-4", "PriorityQueue-1", "PriorityQueue-4"]
RUN = {"lease": 30, "until_empty": True, "handle_signals": False, "backoff": 0.01}


def fresh(priority: bool = False, shards: int = 1, **options: Any) -> Any:
    subspace = Subspace(("processes", uuid.uuid4().hex))
    kind: Any = PriorityQueue if priority else Queue
    return kind(subspace, codec="json", shards=shards, **options)


def submit(queue: Any, db: Any, value: Any, **options: Any) -> Any:
    if isinstance(queue, PriorityQueue):
        options.setdefault("priority", 0)
    return queue.submit(db, value, **options)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize(("priority", "shards"), KINDS, ids=KIND_IDS)
def test_handlers_run_in_child_processes_and_their_results_come_back(priority: bool, shards: int):
    db = memory.open()
    queue = fresh(priority, shards)
    jobs = [submit(queue, db, {"n": n}) for n in range(6)]
    summary = queue.work(db, process_handlers.double, processes=2, **RUN)
    assert summary.succeeded == 6
    results = [queue.result(db, job.id) for job in jobs]
    assert [result["twice"] for result in results] == [0, 2, 4, 6, 8, 10]
    pids = {result["pid"] for result in results}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    assert all(gone(pid) for pid in pids)  # no child is left
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize(
    "how",
    [
        "busy",
        pytest.param("sleep", marks=pytest.mark.slow("a child killed after a real second")),
        pytest.param("socket", marks=pytest.mark.slow("a child killed after a real second")),
    ],
)
def test_a_job_past_its_time_limit_has_its_child_killed_whatever_it_is_stuck_in(
    how: str, tmp_path: Any
):
    """A pure-Python loop, a blocking C call, a socket nobody writes to: the child is
    killed at the limit (its CPU freed), the job fails with TimeLimitExceeded, and the next
    job runs in a new child."""
    db = memory.open()
    queue = fresh(max_deliveries=1)
    pid_file = tmp_path / "pid"
    stuck = queue.submit(db, {"how": how, "pid_file": str(pid_file)}, time_limit=0.5)
    after = queue.submit(db, {"how": "done"})
    summary = queue.work(db, process_handlers.behave, processes=1, **RUN)
    info = queue.job(db, stuck.id)
    assert (info.state, info.error[0]) == ("dead", "TimeLimitExceeded")
    assert "killed" in info.error[1]
    assert gone(int(pid_file.read_text()))
    assert queue.result(db, after.id) == "done"
    assert (summary.timed_out, summary.succeeded) == (1, 1)


@pytest.mark.parametrize(
    ("how", "error"),
    [
        ("exit", "exited with code 3"),
        ("signal", "killed by SIGKILL"),
        ("memory", "MemoryError"),
        ("fail", "failed in the child"),
    ],
)
def test_a_child_that_dies_fails_only_its_delivery(how: str, error: str):
    db = memory.open()
    queue = fresh(max_deliveries=1)
    doomed = queue.submit(db, {"how": how})
    fine = queue.submit(db, {"how": "fine"})
    summary = queue.work(db, process_handlers.behave, processes=1, **RUN)
    info = queue.job(db, doomed.id)
    assert info.state == "dead" and error in " ".join(info.error[:2])
    assert queue.result(db, fine.id) == "fine"
    assert summary.succeeded == 1 and summary.dead_lettered == 1
    assert multiprocessing.active_children() == []


def test_the_time_limit_runs_from_the_handlers_start_in_the_child():
    """A child's start-up (an interpreter, the handler's imports) is not the job's time: a
    first job that naps 0.3 s under a 1 s limit succeeds, however long the child took to
    start."""
    db = memory.open()
    queue = fresh(max_deliveries=1)
    job = queue.submit(db, {"how": "nap", "seconds": 0.3}, time_limit=1.0)
    assert queue.work(db, process_handlers.behave, processes=1, **RUN).succeeded == 1
    assert queue.result(db, job.id) == "rested"


def test_tasks_run_in_child_processes_by_name():
    db = memory.open()
    queue = process_handlers.tasks_queue
    queue.clear(db)
    job = process_handlers.add.submit(db, 2, 3)
    assert queue.work(db, processes=2, **RUN).succeeded == 1
    result = queue.result(db, job.id)
    assert result["sum"] == 5 and result["pid"] != os.getpid()


def test_what_a_child_cannot_run_is_refused_before_anything_is_read():
    db = memory.open()
    queue = fresh()
    queue.enqueue(db, {"n": 1})
    for handler in (lambda value: value, functools.partial(process_handlers.double)):
        with pytest.raises(TypeError, match="child process"):
            queue.work(db, handler, processes=1, **RUN)
    with pytest.raises(ValueError, match="transactional"):
        queue.work(db, lambda tr, value: None, processes=1, transactional=True, **RUN)
    with pytest.raises(ValueError, match="concurrency"):
        queue.work(db, process_handlers.double, processes=2, concurrency=3, **RUN)
    for bad, error in ((0, ValueError), (True, TypeError), (1.5, TypeError)):
        with pytest.raises(error):
            queue.work(db, process_handlers.double, processes=bad, **RUN)
    with pytest.raises(TypeError, match="thread worker"):
        import asyncio

        asyncio.run(fa.Queue.from_sync(queue).work(db, process_handlers.double, processes=1, **RUN))
    assert queue.size(db) == 1 and len(all_keys(db, queue.subspace)) >= 1


def test_the_command_line_runs_handlers_in_processes(tmp_path: Any, monkeypatch: Any):
    import json

    from click.testing import CliRunner

    from fdbqueue.cli import cli

    db = memory.open()
    queue = fresh()
    for n in range(3):
        queue.enqueue(db, {"n": n})
    prefix = ",".join(__import__("fdb").tuple.unpack(queue.subspace.key()))
    args = ["--json", "--queue", prefix, "work", "process_handlers:double", "--processes", "2"]
    result = CliRunner().invoke(cli, [*args, "--until-empty"], obj={"database": db})
    assert result.exit_code == 0, result.output
    assert json.loads(result.output.splitlines()[-1])["succeeded"] == 3
    bad = CliRunner().invoke(cli, [*args, "--concurrency", "3"], obj={"database": db})
    assert bad.exit_code == 2 and "leave --concurrency out" in bad.output
