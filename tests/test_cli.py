"""The fdbqueue command line, run in-process against an in-memory database."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from fdbqueue import PriorityQueue, Queue, Subspace, memory
from fdbqueue.cli import cli, jsonable


@pytest.fixture
def db():
    return memory.open()


def invoke(db, *args):
    return CliRunner().invoke(cli, list(args), obj={"database": db})


def ok(db, *args):
    result = invoke(db, *args)
    assert result.exit_code == 0, result.output
    return result.output


def fails(db, *args, code=1):
    result = invoke(db, *args)
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    return lines


def test_push_peek_pop_round_trip(db):
    assert ok(db, "--queue", "app,jobs", "push", "first") == "pushed 'first'\n"
    ok(db, "--queue", "app,jobs", "push", "--int", "2")
    assert Queue(Subspace(("app", "jobs"))).peek_many(db, 5) == ["first", 2]
    assert ok(db, "--queue", "app,jobs", "peek", "-n", "5") == "'first'\n2\n"
    assert ok(db, "--queue", "app,jobs", "pop") == "'first'\n"
    assert json.loads(ok(db, "--json", "--queue", "app,jobs", "pop", "-n", "3")) == [2]
    assert ok(db, "--queue", "app,jobs", "pop") == "(empty)\n"


def test_info_reports_size_oldest_requests_leases_and_dead_letters(db):
    queue = Queue(Subspace(("jobs",)), max_deliveries=1)
    queue.enqueue_many(db, ["a", "b", "c"])
    queue.claim(db, lease=30)
    expiring = queue.claim(db, lease=0.5)
    db.advance_time(1)
    queue.claim(db, lease=30)  # moves the expired "b" to the dead letters, leases "c"
    assert expiring.value == "b"
    facts = json.loads(ok(db, "--json", "--queue", "jobs", "info"))
    assert facts == {
        "size": 0,
        "oldest": None,
        "pending_requests": 0,
        "leases": 2,
        "dead_letters": 1,
    }
    text = ok(db, "--queue", "jobs", "info")
    assert "dead letters      1" in text


def test_priority_queue_commands(db):
    ok(db, "--priority-queue", "--queue", "tasks", "push", "low", "--priority", "5")
    ok(db, "--priority-queue", "--queue", "tasks", "push", "high", "--priority", "1")
    assert json.loads(ok(db, "--json", "--priority-queue", "--queue", "tasks", "peek")) == [
        "high",
        "low",
    ]
    assert ok(db, "--priority-queue", "--queue", "tasks", "pop", "--max") == "'low'\n"
    assert PriorityQueue(Subspace(("tasks",))).peek_many(db, 5) == ["high"]


def test_raw_codec_pushes_bytes_and_json_shows_base64(db):
    ok(db, "--codec", "raw", "--queue", "raw", "push", "hi")
    assert Queue(Subspace(("raw",)), codec="raw").peek(db) == b"hi"
    assert json.loads(ok(db, "--json", "--codec", "raw", "--queue", "raw", "peek")) == [
        {"base64": "aGk="}
    ]


def test_clear_needs_yes(db):
    queue = Queue(Subspace(("jobs",)))
    queue.enqueue(db, "x")
    assert "--yes" in fails(db, "--queue", "jobs", "clear")[-1]
    assert queue.size(db) == 1
    ok(db, "--queue", "jobs", "clear", "--yes")
    assert queue.empty(db)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("info",), "exactly one of --queue or --directory"),
        (("--queue", "q", "--directory", "a/b", "info"), "exactly one of"),
        (("--queue", "q", "push", "x", "--priority", "1"), "priority queues"),
        (("--priority-queue", "--queue", "q", "push", "x"), "needs --priority"),
        (("--queue", "q", "pop", "--max"), "priority queues"),
        (("--queue", "q", "push", "--int", "seven"), "not an integer"),
        (("--queue", "q", "pop", "-n", "0"), "0"),
    ],
)
def test_usage_errors_are_one_clear_line(db, args, message):
    lines = fails(db, *args, code=2)
    assert message in lines[-1]


def test_a_subspace_that_holds_no_queue_is_a_one_line_error(db):
    db[Subspace(("notaqueue",)).pack(("text key",))] = b"whatever"
    lines = fails(db, "--queue", "notaqueue", "peek")
    assert len(lines) == 1
    assert "does --queue/--directory name a queue" in lines[0]
    assert len(fails(db, "--queue", "notaqueue", "pop")) == 1
    assert bytes(db[Subspace(("notaqueue",)).pack(("text key",))]) == b"whatever"  # untouched


def test_directory_on_the_in_memory_database_is_refused(db):
    lines = fails(db, "--directory", "app/jobs", "info")
    assert lines == [
        "Error: --directory needs FoundationDB's directory layer, which needs libfdb_c and a "
        "cluster; name the queue with --queue on the in-memory database"
    ]


def test_a_cluster_that_cannot_be_opened_is_a_one_line_error(tmp_path):
    result = CliRunner().invoke(
        cli, ["--cluster-file", str(tmp_path / "missing.cluster"), "--queue", "q", "info"], obj={}
    )
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert result.output.startswith("Error: cannot open the FoundationDB cluster")
    assert len(result.output.strip().splitlines()) == 1


def test_bench_runs_the_benchmark_on_the_given_database(db):
    output = ok(db, "bench", "--consumers", "2", "--items", "10", "--modes", "queue")
    assert "queue high-contention" in output
    assert "high-contention/plain throughput" in output
    assert "NO" not in output  # every run delivered every item exactly once


def test_jsonable():
    assert jsonable((1, b"\x00", None, ["x"])) == [1, {"base64": "AA=="}, None, ["x"]]
    assert jsonable({"a": (1,)}) == {"a": [1]}
