"""``fdbqueue schedule add|list|remove``, run in-process against the backend's database, as
tests/test_cli.py runs the other commands."""

from __future__ import annotations

import json

import pytest
from helpers import all_keys
from test_cli import fails, ok, queue_path

from fdbqueue import PriorityQueue, Queue


def test_add_list_and_remove(db, subspace):
    jobs = queue_path(subspace, "jobs")
    out = ok(db, "--queue", jobs, "schedule", "add", "tick", "hello", "--every", "60")
    assert out.startswith("scheduled 'tick': 'hello' every 60s, next due ")
    ok(
        db,
        "--queue",
        jobs,
        "schedule",
        "add",
        "n",
        "-5",
        "--int",
        "--cron",
        "0 3 * * *",
        "--group",
        "g",
    )
    [nightly, tick] = Queue(subspace["jobs"]).schedules(db)
    assert (nightly.value, nightly.cron, nightly.group) == (-5, "0 3 * * *", "g")
    assert (tick.value, tick.every) == ("hello", 60.0)
    listed = json.loads(ok(db, "--json", "--queue", jobs, "schedule", "list"))
    assert [(s["name"], s["every"], s["cron"], s["runs"]) for s in listed] == [
        ("n", None, "0 3 * * *", 0),
        ("tick", 60.0, None, 0),
    ]
    text = ok(db, "--queue", jobs, "schedule", "list").splitlines()
    assert text[0].startswith("n  cron '0 3 * * *'  next ")
    assert text[0].endswith("  0 runs  group 'g'  value -5")
    assert ok(db, "--queue", jobs, "schedule", "remove", "tick") == "removed schedule 'tick'\n"
    assert fails(db, "--queue", jobs, "schedule", "remove", "tick") == [
        f"fdbqueue: error: queue {tuple(jobs.split(','))!r} has no schedule named 'tick'"
    ]


def test_a_priority_queue_needs_a_priority(db, subspace):
    jobs = queue_path(subspace, "jobs")
    args = ["--queue", jobs, "--priority-queue", "schedule", "add", "p", "v", "--every", "5"]
    assert "needs --priority" in fails(db, *args, code=2)[-1]
    ok(db, *args, "--priority", "-3")
    [info] = PriorityQueue(subspace["jobs"]).schedules(db)
    assert info.priority == -3


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--cron", "61 * * * *"], "bad cron expression '61 * * * *': Bad minute"),
        (["--cron", "* * *"], "it needs 5 fields"),
        ([], "exactly one of --every or --cron, not neither"),
        (["--every", "1", "--cron", "* * * * *"], "not both"),
        (["--every", "0"], "every must be a number of seconds > 0"),
        (["--every", "nan"], "not a finite number"),
        (["--every", "1", "--priority", "2"], "--priority applies to priority queues"),
    ],
)
def test_bad_arguments_are_one_line_and_change_nothing(db, subspace, arguments, message):
    jobs = queue_path(subspace, "jobs")
    lines = fails(db, "--queue", jobs, "schedule", "add", "job", "v", *arguments, code=2)
    assert message in lines[-1]
    assert all_keys(db, subspace) == []


def test_an_empty_name_is_refused(db, subspace):
    jobs = queue_path(subspace, "jobs")
    lines = fails(db, "--queue", jobs, "schedule", "add", "", "v", "--every", "1", code=2)
    assert "name must not be empty" in lines[-1]
    assert all_keys(db, subspace) == []


def test_listing_a_queue_without_schedules(db, subspace):
    jobs = queue_path(subspace, "jobs")
    Queue(subspace["jobs"]).enqueue(db, "x")
    assert ok(db, "--queue", jobs, "schedule", "list") == "(no schedules)\n"
    assert json.loads(ok(db, "--json", "--queue", jobs, "schedule", "list")) == []
