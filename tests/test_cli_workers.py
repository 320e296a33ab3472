"""``fdbqueue workers``: the worker loops working on a queue, as lines or JSON, from the
command line and in the shell."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import pass_time

from fdbqueue import PriorityQueue, Queue, Subspace, memory
from fdbqueue._delivery import workers as registry
from fdbqueue._delivery.workers import Registration
from fdbqueue.cli import Context, cli
from fdbqueue.cli._shell import Shell

JOB = "ab" * 16


def invoke(db: Any, *arguments: str) -> Any:
    return CliRunner().invoke(cli, list(arguments), obj={"database": db})


def registered(
    db: Any,
    queue: Any,
    done: int = 2,
    running: tuple[str, ...] = (JOB,),
    abandoned: tuple[str, ...] = (),
) -> str:
    """A worker record written as a loop writes it; its id."""
    registration = Registration(
        queue._worker_registry, db, lambda: (done, list(running)), lambda: list(abandoned)
    )
    assert registration.register()
    return registration.id


@pytest.mark.parametrize(("priority", "shards"), [(False, 1), (True, 4)])
def test_workers_lists_each_loop_in_one_line(priority, shards):
    db = memory.open()
    space = Subspace(("cli-workers",))
    queue: Any = PriorityQueue(space, shards=shards) if priority else Queue(space, shards=shards)
    worker = registered(db, queue)
    options = ["--priority-queue"] if priority else []
    result = invoke(db, "workers", "--queue", "cli-workers", *options)
    assert result.exit_code == 0, result.output
    header, line = result.output.splitlines()
    assert header.split() == ["id", "host", "pid", "up", "seen", "done", "running"]
    assert line.split()[:3] == [worker, socket.gethostname(), str(os.getpid())]
    assert line.split()[-2:] == ["2", JOB]


def test_workers_json_gives_every_field():
    db = memory.open()
    queue = Queue(Subspace(("cli-json",)))
    worker = registered(db, queue, done=0, running=())
    result = invoke(db, "--json", "workers", "--queue", "cli-json")
    assert result.exit_code == 0, result.output
    [document] = json.loads(result.output)
    assert set(document) == {
        "id",
        "host",
        "pid",
        "started_at",
        "jobs_done",
        "running",
        "last_seen",
        "abandoned",
    }
    assert (document["id"], document["pid"], document["running"]) == (worker, os.getpid(), [])
    assert document["started_at"] <= document["last_seen"] and document["abandoned"] == []


def test_workers_shows_the_handlers_a_loop_abandoned_in_text_and_json():
    db = memory.open()
    queue = Queue(Subspace(("cli-abandoned",)))
    hung = ("cd" * 16, "ef" * 16)
    worker = registered(db, queue, done=3, running=(), abandoned=hung)
    result = invoke(db, "workers", "--queue", "cli-abandoned")
    assert result.exit_code == 0, result.output
    _header, line, second = result.output.splitlines()
    assert line.split()[0] == worker and line.split()[-2:] == ["3", "-"]
    assert second == f"  abandoned past the time limit, still running: {hung[0]} {hung[1]}"
    [document] = json.loads(invoke(db, "--json", "workers", "--queue", "cli-abandoned").output)
    assert document["abandoned"] == list(hung) and document["running"] == []


def test_workers_says_none_and_drops_a_lapsed_loop():
    db = memory.open()
    queue = Queue(Subspace(("cli-none",)))
    queue.enqueue(db, "x")
    assert invoke(db, "workers", "--queue", "cli-none").output == "(no workers)\n"
    registered(db, queue)
    pass_time(db, registry.LAPSE_SECONDS + 1)
    assert invoke(db, "workers", "--queue", "cli-none").output == "(no workers)\n"
    assert invoke(db, "--json", "workers", "--queue", "cli-none").output == "[]\n"


def test_workers_of_a_queue_that_does_not_exist_is_one_line():
    result = invoke(memory.open(), "workers", "--queue", "nothing-here")
    assert result.exit_code == 1
    [line] = result.output.splitlines()
    assert line.endswith("queue ('nothing-here',) does not exist (nothing stored under its prefix)")


def test_workers_in_the_shell_lists_a_worker_running_in_its_background(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "HEARTBEAT_SECONDS", 0.02)
    module = "cli_workers_blocked"
    (tmp_path / f"{module}.py").write_text(
        "import threading\nGO = threading.Event()\ndef handle(value):\n    GO.wait(20)\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    db = memory.open()
    queue = Queue(Subspace(("shell-workers",)))
    queue.enqueue(db, "job")
    session = Shell(Context({"queue": "shell-workers", "as_json": False}, db))
    runner = CliRunner()
    with runner.isolation() as (out, _err, *_rest):
        assert session.run_line(f"work {module}:handle --lease 30 --log-level WARNING")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any(w.running for w in queue.workers(db)):
            time.sleep(0.01)
        [lease] = queue.leases(db)
        assert session.run_line("workers")
        sys.modules[module].GO.set()
        assert session.run_line("stop 1")
        assert session.run_line("workers")
        printed = out.getvalue().decode().splitlines()
    [line] = [line for line in printed if line.endswith(lease.id)]
    assert socket.gethostname() in line.split() and str(os.getpid()) in line.split()
    assert printed[-1] == "(no workers)"  # the stopped worker deregistered
    assert not session.failed


def test_workers_is_listed_by_help():
    result = CliRunner().invoke(cli, ["--help"], obj={})
    assert "workers" in result.output
    text = " ".join(CliRunner().invoke(cli, ["workers", "--help"], obj={}).output.split())
    assert "heartbeat" in text and "--json" in text


def test_the_command_runs_while_a_loop_works(monkeypatch):
    """The command line and a loop of this process on one database: the loop is listed
    while it runs, with its jobs done once they are."""
    monkeypatch.setattr(registry, "HEARTBEAT_SECONDS", 0.02)
    db = memory.open()
    queue = Queue(Subspace(("cli-live",)))
    queue.enqueue_many(db, [1, 2])
    stop = threading.Event()
    thread = threading.Thread(
        target=queue.work,
        args=(db, lambda value: None),
        kwargs={"lease": 30, "stop": stop, "handle_signals": False},
    )
    thread.start()
    deadline = time.monotonic() + 20
    documents: list[Any] = []
    while time.monotonic() < deadline and not documents:
        found = json.loads(invoke(db, "--json", "workers", "--queue", "cli-live").output)
        documents = [d for d in found if d["jobs_done"] == 2]
        time.sleep(0.01)
    stop.set()
    thread.join()
    [document] = documents
    assert document["running"] == [] and document["host"] == socket.gethostname()
