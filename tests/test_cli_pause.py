"""``fdbqueue pause`` and ``fdbqueue resume``, and ``info``'s paused line, run in-process
against the backend's database as tests/test_cli.py runs the other commands; and both at the
shell's prompt."""

from __future__ import annotations

import json

import pytest
from test_cli import fails, ok, queue_path
from test_cli_shell import shell

from fdbqueue import PriorityQueue, Queue


@pytest.mark.parametrize("shards", [1, 4])
@pytest.mark.parametrize("priority", [False, True])
def test_pause_stops_pops_until_resume(db, subspace, priority, shards):
    kind = PriorityQueue if priority else Queue
    queue = kind(subspace["jobs"], shards=shards)
    queue.push(db, "a", 1) if priority else queue.enqueue(db, "a")
    args = ["--queue", queue_path(subspace, "jobs")] + (["--priority-queue"] if priority else [])
    assert ok(db, *args, "pause") == "paused\n"
    assert queue.info(db).paused is True
    assert ok(db, *args, "pause") == "paused already\n"
    assert ok(db, *args, "pop") == "(empty)\n"  # nothing taken while paused
    assert queue.size(db) == 1
    facts = json.loads(ok(db, "--json", *args, "info"))
    assert (facts["paused"], facts["size"]) == (True, 1)
    assert "paused" in ok(db, *args, "info")
    assert json.loads(ok(db, "--json", *args, "resume")) == {"paused": False, "changed": True}
    assert ok(db, *args, "resume") == "not paused\n"
    assert json.loads(ok(db, "--json", *args, "info"))["paused"] is False
    assert ok(db, *args, "pop") == "'a'\n"


def test_info_shows_paused(db, subspace):
    jobs = queue_path(subspace, "jobs")
    ok(db, "--queue", jobs, "push", "x")
    lines = ok(db, "--queue", jobs, "info").splitlines()
    assert [line.split() for line in lines if line.startswith("paused")] == [["paused", "no"]]
    ok(db, "--queue", jobs, "pause")
    lines = ok(db, "--queue", jobs, "info").splitlines()
    assert [line.split() for line in lines if line.startswith("paused")] == [["paused", "yes"]]


def test_pause_json_says_whether_it_changed_anything(db, subspace):
    jobs = queue_path(subspace, "jobs")
    ok(db, "--queue", jobs, "push", "x")
    assert json.loads(ok(db, "--json", "--queue", jobs, "pause")) == {
        "paused": True,
        "changed": True,
    }
    assert json.loads(ok(db, "--json", "--queue", jobs, "pause")) == {
        "paused": True,
        "changed": False,
    }


def test_work_until_empty_on_a_paused_queue_says_the_queue_is_paused(db, subspace):
    """Not zeros alone (issue 43 item 19): the summary line says why nothing was taken."""
    jobs = queue_path(subspace, "jobs")
    ok(db, "--queue", jobs, "push", "x")
    ok(db, "--queue", jobs, "pause")
    output = ok(db, "--queue", jobs, "work", "json:loads", "--until-empty")
    assert output.splitlines()[-1] == (
        "succeeded 0, retried 0, dead lettered 0, lost 0, released 0, timed out 0; queue is "
        "paused (fdbqueue resume)"
    )
    output = ok(db, "--json", "--queue", jobs, "work", "json:loads", "--until-empty")
    facts = json.loads(output.splitlines()[-1])
    assert (facts["paused"], facts["succeeded"]) == (True, 0)
    ok(db, "--queue", jobs, "resume")
    ok(db, "--queue", jobs, "pop")
    output = ok(db, "--queue", jobs, "work", "json:loads", "--until-empty")
    assert "paused" not in output.splitlines()[-1]


def test_a_queue_that_does_not_exist_is_one_line_error(db, subspace):
    missing = queue_path(subspace, "missing")
    for command in ("pause", "resume"):
        [line] = fails(db, "--queue", missing, command)
        assert line.startswith("fdbqueue: error: queue ") and "does not exist" in line


def test_the_other_queue_type_is_refused(db, subspace):
    Queue(subspace["jobs"]).enqueue(db, "x")
    [line] = fails(db, "--queue", queue_path(subspace, "jobs"), "--priority-queue", "pause")
    assert "holds a Queue, not a PriorityQueue" in line
    assert Queue(subspace["jobs"]).info(db).paused is False


def test_pause_and_resume_at_the_shell_prompt():
    lines = "push a\npause\npop\ninfo --json\nresume\npop\n"
    result = shell(lines, "--memory", "--queue", "q")
    assert result.exit_code == 0, result.output
    out = result.output.splitlines()
    assert out[:2] == ["pushed 'a'", "paused"]
    assert "resumed" in out and out[-1] == "'a'"
    assert out.count("'a'") == 1  # the pop while paused took nothing
