"""``fdbqueue submit``, ``job``, ``jobs`` and ``cancel``, run in-process against the backend's
database as tests/test_cli.py runs the other commands, on a Queue and a PriorityQueue (one
shard and four), and in the shell."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import all_keys
from test_cli import fails, invoke, ok, queue_path

from fdbqueue import JobInfo, PriorityQueue, Queue, Subspace, memory
from fdbqueue.cli import cli

SHAPES = [
    pytest.param(priority, shards, id=f"{'PriorityQueue' if priority else 'Queue'}-{shards}shard")
    for priority in (False, True)
    for shards in (1, 4)
]
KINDS = pytest.mark.parametrize(
    "priority", [pytest.param(False, id="Queue"), pytest.param(True, id="PriorityQueue")]
)
FIELDS = set(JobInfo.__dataclass_fields__)


class Jobs:
    """One test's queue, as the library and the command line name it."""

    def __init__(self, db: Any, subspace: Any, priority: bool, shards: int = 1, **options: Any):
        self.db = db
        kind: Any = PriorityQueue if priority else Queue
        self.queue = kind(subspace["jobs"], shards=shards, **options)
        self.priority = priority
        self.options = ["--queue", queue_path(subspace, "jobs")]
        self.options += ["--priority-queue"] if priority else []
        self.options += ["--shards", str(shards)] if shards > 1 else []
        self.level = ["--priority", "3"] if priority else []

    def ok(self, *args: str) -> str:
        return ok(self.db, *args, *self.options)

    def fails(self, *args: str, code: int = 1) -> list[str]:
        return fails(self.db, *args, *self.options, code=code)

    def submit(self, *args: str) -> str:
        """``fdbqueue submit ...``: the id it printed."""
        [job_id] = self.ok("submit", *args, *self.level).splitlines()
        return job_id

    def library_submit(self, value: Any, **options: Any) -> str:
        if self.priority:
            options.setdefault("priority", 3)
        job = self.queue.submit(self.db, value, **options)
        assert job is not None
        return str(job.id)

    def finish(self, result: Any) -> None:
        """Claim the next job and acknowledge it with ``result``, as a worker would."""
        lease = self.queue.claim(self.db, 30)
        assert lease is not None
        self.queue.ack(self.db, lease, result=result)

    def fail(self) -> None:
        """Run the worker loop over the jobs with a handler that raises."""

        def handler(value: Any) -> None:
            raise RuntimeError(f"cannot handle {value!r}\nsecond line")

        self.queue.work(self.db, handler, lease=30, until_empty=True, handle_signals=False)


def fields(text: str) -> dict[str, str]:
    """``job``'s lines as {name: text} (the traceback's lines left out)."""
    found = {}
    for line in text.splitlines():
        if line[:1] != " ":
            name, _, value = line.partition("  ")
            found[name] = value.strip()
    return found


def records(db: Any, subspace: Any) -> list[tuple[bytes, bytes]]:
    """Every key-value pair under the subspace but the receipts of the library's calls (a
    command clears those of its own calls as it ends, :mod:`fdbqueue.cli._context`)."""
    return [(key, value) for key, value in all_keys(db, subspace) if b"receipts" not in key]


def another_id(job_id: str) -> str:
    """An id of the same queue (its first 8 digits) that no job has."""
    return job_id[:8] + ("0" * 24 if job_id[8:] != "0" * 24 else "1" * 24)


# -- submit ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("priority", "shards"), SHAPES)
def test_submit_prints_the_id_and_job_shows_every_field(db, subspace, priority, shards):
    jobs = Jobs(db, subspace, priority, shards)
    job_id = jobs.submit("resize", "--group", "photos")
    info = jobs.queue.job(db, job_id)
    assert info is not None and info.state == "waiting" and info.group == "photos"
    assert jobs.queue.peek(db) == "resize"
    shown = fields(jobs.ok("job", job_id))
    assert shown["id"] == job_id and shown["state"] == "waiting"
    assert shown["deliveries"] == "0" and shown["group"] == "'photos'"
    assert shown["enqueued"].endswith(" s ago)") and "+00:00 (" in shown["enqueued"]
    assert shown["started"] == shown["finished"] == shown["result"] == shown["error"] == "-"
    assert shown["priority"] == ("3" if priority else "-")
    document = json.loads(jobs.ok("--json", "job", job_id))
    assert set(document) == FIELDS
    assert (document["id"], document["state"], document["priority"]) == (
        job_id,
        "waiting",
        3 if priority else None,
    )
    assert abs(document["enqueued_at"] - info.enqueued_at) < 1e-6


@KINDS
def test_submit_json_delay_int_and_a_deduplicated_submit(db, subspace, priority):
    jobs = Jobs(db, subspace, priority)
    document = json.loads(jobs.ok("--json", "submit", "-5", "--int", "--delay", "60", *jobs.level))
    assert document["submitted"] is True and len(document["id"]) == 32
    info = jobs.queue.job(db, document["id"])
    assert info.state == "delayed"
    shown = fields(jobs.ok("job", document["id"]))
    assert shown["state"] == "delayed" and shown["due"].endswith(" s)") and "(in " in shown["due"]
    assert jobs.submit("x", "--dedup-id", "order-1")
    assert jobs.ok("submit", "x", "--dedup-id", "order-1", *jobs.level) == (
        "nothing submitted: dedup id 'order-1' was accepted within the window\n"
    )
    again = jobs.ok("--json", "submit", "x", "--dedup-id", "order-1", *jobs.level)
    assert json.loads(again) == {"id": None, "submitted": False}
    assert len(jobs.queue.jobs(db)) == 2
    assert jobs.queue.peek_many(db, 5) == ["x"]  # the delayed -5 is not due


def test_a_priority_queue_needs_a_priority_and_a_queue_refuses_one(db, subspace):
    pq = Jobs(db, subspace, True)
    assert pq.fails("submit", "x", code=2)[-1].endswith("a priority queue needs --priority")
    lines = fails(
        db, "--queue", queue_path(subspace, "q"), "submit", "x", "--priority", "1", code=2
    )
    assert lines[-1].endswith("--priority applies to priority queues (--priority-queue)")
    assert all_keys(db, subspace) == []


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--delay", "-1"], "delay"),
        (["--delay", "nan"], "not a finite number"),
        (["--dedup-id", ""], "--dedup-id"),
        (["--group", "g" * 5_000], "Invalid value for --group: group is 5,002 bytes"),
        (["--int"], "'x' is not an integer"),
    ],
)
def test_bad_submit_options_are_one_line_and_change_nothing(db, subspace, arguments, message):
    lines = fails(db, "--queue", queue_path(subspace, "jobs"), "submit", "x", *arguments, code=2)
    assert len(lines) == 1 and lines[0].startswith("fdbqueue: error: ")
    assert message in lines[0]
    assert all_keys(db, subspace) == []


# -- job ---------------------------------------------------------------------------------------


@KINDS
def test_job_shows_the_result_as_json_and_wait_prints_it(db, subspace, priority):
    jobs = Jobs(db, subspace, priority)
    job_id = jobs.submit("photo")
    jobs.finish(("done", 2))  # the tuple codec keeps a tuple: JSON shows it as a list
    shown = fields(jobs.ok("job", job_id))
    assert shown["state"] == "succeeded" and shown["deliveries"] == "1"
    assert shown["result"] == '["done", 2]'
    assert shown["finished"] != "-" and shown["started"] != "-"
    assert jobs.ok("job", job_id, "--wait") == '["done", 2]\n'
    assert json.loads(jobs.ok("--json", "job", job_id, "--wait")) == {
        "id": job_id,
        "state": "succeeded",
        "result": ["done", 2],
    }
    assert json.loads(jobs.ok("--json", "job", job_id))["result"] == ["done", 2]


def test_a_result_that_is_not_json_is_shown_as_python(db, subspace):
    jobs = Jobs(db, subspace, False)
    job_id = jobs.submit("photo")
    jobs.finish(b"\x00raw")
    assert fields(jobs.ok("job", job_id))["result"] == "b'\\x00raw'"
    assert jobs.ok("job", job_id, "--wait") == "b'\\x00raw'\n"
    assert json.loads(jobs.ok("--json", "job", job_id, "--wait"))["result"] == {
        "base64": "AHJhdw=="
    }


def test_a_result_not_kept_is_shown_and_wait_fails_in_one_line(db, subspace):
    jobs = Jobs(db, subspace, False)
    job_id = jobs.submit("photo")
    jobs.finish({"a set": {1, 2}})  # the result codec keeps no set
    shown = fields(jobs.ok("job", job_id))
    assert shown["state"] == "succeeded"
    assert shown["result"].startswith("result not kept: the result codec raised TypeError")
    document = json.loads(jobs.ok("--json", "job", job_id))
    assert document["has_result"] is False and document["result"] is None
    assert document["result_error"] == shown["result"]
    [line] = jobs.fails("job", job_id, "--wait")
    assert line.startswith(f"fdbqueue: error: job {job_id} succeeded, but result not kept: ")


@KINDS
def test_a_dead_job_shows_its_error_and_traceback_and_wait_fails_in_one_line(
    db, subspace, priority
):
    jobs = Jobs(db, subspace, priority, max_deliveries=1)
    job_id = jobs.submit("photo")
    jobs.fail()
    text = jobs.ok("job", job_id)
    shown = fields(text)
    assert shown["state"] == "dead"
    assert shown["error"] == "RuntimeError: cannot handle 'photo'"
    traceback = [line.strip() for line in text.splitlines() if line.startswith(" ")]
    assert traceback[0] == "Traceback (most recent call last):"
    assert any("in handler" in line for line in traceback)
    document = json.loads(jobs.ok("--json", "job", job_id))
    assert document["error"]["type"] == "RuntimeError"
    assert document["error"]["message"] == "cannot handle 'photo'\nsecond line"
    assert "Traceback" in document["error"]["traceback"]
    assert jobs.fails("job", job_id, "--wait") == [
        f"fdbqueue: error: job {job_id} ended dead: RuntimeError: cannot handle 'photo'"
    ]
    listed = jobs.ok("jobs", "--state", "dead").splitlines()
    assert listed[1].split()[:3] == [job_id, "dead", "1"]
    assert listed[1].endswith("  RuntimeError: cannot handle 'photo'")


def test_wait_returns_when_the_job_finishes(db, subspace):
    jobs = Jobs(db, subspace, False)
    job_id = jobs.submit("photo")
    finisher = threading.Timer(0.3, jobs.finish, args=(7,))
    started = time.monotonic()
    finisher.start()
    try:
        assert jobs.ok("job", job_id, "--wait", "--wait-timeout", "30") == "7\n"
    finally:
        finisher.join()
    assert time.monotonic() - started < 10


def test_wait_timeout(db, subspace):
    jobs = Jobs(db, subspace, False)
    job_id = jobs.submit("photo")
    assert jobs.fails("job", job_id, "--wait", "--wait-timeout", "0.2") == [
        f"fdbqueue: error: job {job_id} did not finish within 0.2 s"
    ]
    assert jobs.fails("job", job_id, "--wait-timeout", "1", code=2) == [
        "fdbqueue: error: --wait-timeout applies to --wait"
    ]
    [line] = jobs.fails("job", job_id, "--wait", "--wait-timeout", "-1", code=2)
    assert "must be a number of seconds >= 0" in line
    assert jobs.queue.job(db, job_id).state == "waiting"


@KINDS
def test_a_cancelled_job_ends_wait_in_one_line(db, subspace, priority):
    jobs = Jobs(db, subspace, priority)
    job_id = jobs.submit("photo")
    assert jobs.ok("cancel", job_id) == "cancelled\n"
    assert fields(jobs.ok("job", job_id))["state"] == "cancelled"
    assert jobs.fails("job", job_id, "--wait") == [f"fdbqueue: error: job {job_id} ended cancelled"]


# -- bad and unknown ids -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "command", [["job"], ["job", "--wait"], ["cancel"]], ids=["job", "wait", "cancel"]
)
def test_bad_ids_are_one_line_usage_errors(db, subspace, command):
    jobs = Jobs(db, subspace, False)
    jobs.submit("x")
    other = Queue(subspace["other"]).submit(db, "y")
    before = records(db, subspace)
    for bad, message in [
        ("123", "a job id is 32 hexadecimal digits, not '123'"),
        ("zz" * 16, "a job id is 32 hexadecimal digits"),
        ("ab" * 17, "a job id is 32 hexadecimal digits"),
        (other.id, f"job {other.id} is a job of another queue, not of this one"),
    ]:
        [line] = jobs.fails(*command, bad, code=2)
        assert line.startswith("fdbqueue: error: Invalid value for ID: ") and message in line
    assert records(db, subspace) == before


def test_unknown_ids_exit_with_status_1(db, subspace):
    jobs = Jobs(db, subspace, False)
    unknown = another_id(jobs.submit("x"))
    name = repr(tuple(jobs.options[1].split(",")))
    [line] = jobs.fails("job", unknown)
    assert line == (
        f"fdbqueue: error: queue {name} has no job {unknown}: never submitted, or cleared "
        "result_ttl seconds (a day by default) after it finished"
    )
    assert jobs.fails("job", unknown, "--wait") == [line]
    assert jobs.fails("cancel", unknown) == ["not cancelled: finished or unknown"]
    result = invoke(db, "--json", "cancel", unknown, *jobs.options)
    assert result.exit_code == 1 and json.loads(result.output) == {"cancelled": False}


@pytest.mark.parametrize("command", [["job", "ab" * 16], ["jobs"], ["cancel", "ab" * 16]])
def test_a_queue_that_does_not_exist_is_reported(db, subspace, command):
    Queue(subspace["jobs"]).submit(db, "x")
    [line] = fails(db, "--queue", queue_path(subspace, "job"), *command)
    assert line.endswith("does not exist (nothing stored under its prefix)")


# -- jobs and cancel ----------------------------------------------------------------------------


@pytest.mark.parametrize(("priority", "shards"), SHAPES)
def test_jobs_lists_a_table_by_state(db, subspace, priority, shards):
    jobs = Jobs(db, subspace, priority, shards)
    ids = [jobs.submit(str(n)) for n in range(4)]
    jobs.ok("cancel", ids[0])
    lease = jobs.queue.claim(db, 30)
    text = jobs.ok("jobs").splitlines()
    assert text[0].split() == ["id", "state", "del", "enqueued", "finished", "error"]
    rows = {line.split()[0]: line for line in text[1:]}
    assert set(rows) == set(ids)
    assert rows[ids[0]].split()[1] == "cancelled"
    assert rows[lease.job_id].split()[1:3] == ["running", "1"]
    assert rows[lease.job_id].split()[3:6] == [rows[lease.job_id].split()[3], "s", "ago"]
    running = jobs.ok("jobs", "--state", "running").splitlines()
    assert [line.split()[0] for line in running[1:]] == [lease.job_id]
    assert jobs.ok("jobs", "--state", "dead") == "(no jobs)\n"
    listed = json.loads(jobs.ok("--json", "jobs", "--state", "waiting"))
    assert len(listed) == 2 and all(set(d) == FIELDS for d in listed)
    assert {d["state"] for d in listed} == {"waiting"}


def test_jobs_stops_at_its_limit_and_says_so_on_stderr(db, subspace):
    jobs = Jobs(db, subspace, False)
    for n in range(3):
        jobs.library_submit(n)
    result = CliRunner().invoke(
        cli, ["--json", "jobs", "-n", "2", *jobs.options], obj={"database": db}
    )
    assert result.exit_code == 0
    assert len(json.loads(result.stdout)) == 2
    assert "(the first 2 jobs; more exist" in result.stderr
    result = invoke(db, "--json", "jobs", "-n", "0", *jobs.options)
    assert json.loads(result.stdout) == [] and "(the first 0 jobs; more exist" in result.stderr


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--state", "done"], "Invalid value for '--state': 'done' is not one of 'waiting'"),
        (["-n", "-1"], "'-1' is out of range"),
        (["-n", "x"], "'x' is not a whole number"),
    ],
)
def test_bad_jobs_options_are_one_line(db, subspace, arguments, message):
    jobs = Jobs(db, subspace, False)
    jobs.library_submit("x")
    [line] = jobs.fails("jobs", *arguments, code=2)
    assert message in line


@KINDS
def test_cancel_a_running_job_and_a_finished_one(db, subspace, priority):
    jobs = Jobs(db, subspace, priority)
    job_id = jobs.submit("photo")
    lease = jobs.queue.claim(db, 30)
    assert json.loads(jobs.ok("--json", "cancel", job_id)) == {"cancelled": True}
    shown = fields(jobs.ok("job", job_id))
    assert shown["state"] == "running (cancel requested)"
    jobs.queue.ack(db, lease)
    assert jobs.fails("cancel", job_id) == ["not cancelled: finished or unknown"]
    assert fields(jobs.ok("job", job_id))["state"] == "succeeded (cancel requested)"


# -- in the shell ------------------------------------------------------------------------------


@KINDS
def test_the_job_commands_in_the_shell(priority):
    db = memory.open()
    jobs = Jobs(db, Subspace(("shell-jobs",)), priority)
    options = ["--queue", "shell-jobs,jobs", *(["--priority-queue"] if priority else [])]
    level = " --priority 3" if priority else ""
    first = jobs.library_submit("a")
    lines = f"""
        submit b{level}
        job {first}
        cancel {first}
        cancel {first}
        jobs --state cancelled
        job 123
        jobs --json --state waiting
    """
    result = CliRunner().invoke(cli, [*options, "shell"], input=lines, obj={"database": db})
    assert result.exit_code == 1  # the second cancel, and the bad id
    out = result.stdout.splitlines()
    submitted = out[0]
    assert jobs.queue.job(db, submitted).state == "waiting"
    assert fields("\n".join(out[1:14]))["state"] == "waiting"  # one field a line
    assert out[14:16] == ["cancelled", "not cancelled: finished or unknown"]
    assert out[17].split()[:2] == [first, "cancelled"]
    assert [d["id"] for d in json.loads(out[18])] == [submitted]
    assert result.stderr.splitlines() == [
        "fdbqueue: error: Invalid value for ID: a job id is 32 hexadecimal digits, not '123'"
    ]
