"""The fdbqueue command line, run in-process against the backend's database (``db``).

Queues are named under the test's subspace: ``queue_path(subspace, "jobs")`` is the
``--queue`` argument of ``subspace["jobs"]``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import fdb.tuple
import pytest
from click.testing import CliRunner
from helpers import BytesDescriptionError, pass_time, run

from fdbqueue import PriorityQueue, Queue, Subspace, _clock, memory
from fdbqueue.cli import cli, jsonable


def queue_path(subspace, name):
    """The ``--queue`` argument (comma-separated tuple prefix) naming ``subspace[name]``."""
    return ",".join([*fdb.tuple.unpack(subspace.key()), name])


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


def test_push_peek_pop_round_trip(db, subspace):
    jobs = queue_path(subspace, "jobs")
    assert ok(db, "--queue", jobs, "push", "first") == "pushed 'first'\n"
    ok(db, "--queue", jobs, "push", "--int", "2")
    assert Queue(subspace["jobs"]).peek_many(db, 5) == ["first", 2]
    assert ok(db, "--queue", jobs, "peek", "-n", "5") == "'first'\n2\n"
    assert ok(db, "--queue", jobs, "pop") == "'first'\n"
    assert json.loads(ok(db, "--json", "--queue", jobs, "pop", "-n", "3")) == [2]
    assert ok(db, "--queue", jobs, "pop") == "(empty)\n"


@pytest.mark.memory_only("expires a lease with db.advance_time()")
def test_info_reports_size_oldest_requests_leases_and_dead_letters(db, subspace):
    jobs = queue_path(subspace, "jobs")
    queue = Queue(subspace["jobs"], max_deliveries=1)
    queue.enqueue_many(db, ["a", "b", "c"])
    queue.claim(db, lease=30)
    expiring = queue.claim(db, lease=0.5)
    pass_time(db, 1)
    queue.claim(db, lease=30)  # moves the expired "b" to the dead letters, leases "c"
    assert expiring.value == "b"
    queue.enqueue(db, "later", delay=600)
    facts = json.loads(ok(db, "--json", "--queue", jobs, "info"))
    assert facts.pop("read_version") > 0
    assert facts == {
        "size": 0,
        "oldest": None,
        "requests_in_line": 0,
        "leases_in_flight": 2,
        "expired_leases": 0,
        "dead_letters": 1,
        "delayed": 1,
        "groups": 0,
        "groups_in_flight": 0,
        "oldest_age": None,
        "enqueued": 4,  # "later" counts when enqueued, not when it falls due
        "paused": False,
        "rate_limited": False,  # (no rate_limit: the command line opens the queue without)
        "codec": "tuple",
    }
    text = ok(db, "--queue", jobs, "info")
    assert "dead letters      1" in text
    assert "leases in flight  2" in text
    assert "oldest age        -" in text


@pytest.mark.parametrize("priority", [False, True])
@pytest.mark.parametrize("shards", [1, 4])
def test_info_prints_the_age_of_the_oldest_item(db, subspace, monkeypatch, priority, shards):
    now = [1_000.0]
    monkeypatch.setattr(_clock, "now", lambda: now[0])
    queue_class = PriorityQueue if priority else Queue
    queue = queue_class(subspace["aged"], shards=shards)
    for value in ("a", "b"):
        queue.push(db, value, 1) if priority else queue.enqueue(db, value)
    now[0] += 12.34
    options = ["--queue", queue_path(subspace, "aged")]
    options += ["--priority-queue"] if priority else []
    facts = json.loads(ok(db, "--json", *options, "info"))
    assert facts["oldest_age"] == pytest.approx(12.34)
    assert "oldest age        12.3 s" in ok(db, *options, "info")
    if shards > 1:
        assert max(shard["oldest_age"] or 0 for shard in facts["shards"]) == facts["oldest_age"]


def test_priority_queue_commands(db, subspace):
    tasks = queue_path(subspace, "tasks")
    ok(db, "--priority-queue", "--queue", tasks, "push", "low", "--priority", "5")
    ok(db, "--priority-queue", "--queue", tasks, "push", "high", "--priority", "1")
    assert json.loads(ok(db, "--json", "--priority-queue", "--queue", tasks, "peek")) == [
        "high",
        "low",
    ]
    assert ok(db, "--priority-queue", "--queue", tasks, "pop", "--max") == "'low'\n"
    assert PriorityQueue(subspace["tasks"]).peek_many(db, 5) == ["high"]


def test_raw_codec_pushes_bytes_and_json_shows_base64(db, subspace):
    raw = queue_path(subspace, "raw")
    ok(db, "--codec", "raw", "--queue", raw, "push", "hi")
    assert Queue(subspace["raw"], codec="raw").peek(db) == b"hi"
    assert json.loads(ok(db, "--json", "--codec", "raw", "--queue", raw, "peek")) == [
        {"base64": "aGk="}
    ]


def test_clear_needs_yes(db, subspace):
    jobs = queue_path(subspace, "jobs")
    queue = Queue(subspace["jobs"])
    queue.enqueue(db, "x")
    assert "--yes" in fails(db, "--queue", jobs, "clear")[-1]
    assert queue.size(db) == 1
    ok(db, "--queue", jobs, "clear", "--yes")
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
def test_usage_errors_are_one_clear_line(db, subspace, args, message):
    args = tuple(queue_path(subspace, "q") if arg == "q" else arg for arg in args)
    before = list(db.create_transaction().get_range_startswith(subspace.key()))
    lines = fails(db, *args, code=2)
    assert message in lines[-1]
    assert list(db.create_transaction().get_range_startswith(subspace.key())) == before


def test_a_subspace_that_holds_no_queue_is_a_one_line_error(db, subspace):
    notaqueue = queue_path(subspace, "notaqueue")
    db[subspace["notaqueue"].pack(("text key",))] = b"whatever"
    lines = fails(db, "--queue", notaqueue, "peek")
    assert len(lines) == 1
    assert "is another queue or other data stored inside" in lines[0]
    assert len(fails(db, "--queue", notaqueue, "pop")) == 1
    assert bytes(db[subspace["notaqueue"].pack(("text key",))]) == b"whatever"  # untouched


@pytest.mark.memory_only("the refusal is the in-memory database's")
def test_directory_on_the_in_memory_database_is_refused(db):
    lines = fails(db, "--directory", "app/jobs", "info")
    assert lines == [
        "fdbqueue: error: --directory needs FoundationDB's directory layer, which needs "
        "libfdb_c and a cluster; name the queue with --queue on the in-memory database"
    ]


def test_a_cluster_that_cannot_be_opened_is_a_one_line_error(tmp_path):
    """In a child interpreter: once the fdb backend ran memory.install() in this process,
    ``fdb.open()`` answers any cluster file name with an in-memory cluster."""
    unusable = tmp_path / "unusable.cluster"
    unusable.write_text("not a cluster file\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "fdbqueue.cli",
            "--cluster-file",
            str(unusable),
            "--queue",
            "q",
            "info",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith("fdbqueue: error: cannot open the FoundationDB cluster")
    assert len(result.stderr.strip().splitlines()) == 1


def test_bench_runs_the_benchmark_on_the_given_database_and_leaves_nothing(db):
    prefix = Subspace(("fdbqueue-benchmark",)).key()

    def benchmark_keys():
        return run(db, lambda tr: len(list(tr.get_range_startswith(prefix))))

    before = benchmark_keys()
    output = ok(db, "bench", "--consumers", "2", "--items", "10", "--modes", "queue")
    assert "drain phase" in output and "steady phase" in output
    assert "claims-high-contention" in output
    assert "drain: high-contention / plain,  2 consumers = " in output
    assert "steady: claims-high-contention / claims,  2 consumers = " in output
    assert "NO" not in output  # every run delivered every item exactly once
    assert benchmark_keys() == before  # every run cleared its own subspace


def test_jsonable():
    assert jsonable((1, b"\x00", None, ["x"])) == [1, {"base64": "AA=="}, None, ["x"]]
    assert jsonable({"a": (1,)}) == {"a": [1]}


# -- opening a real cluster: fdbqueue.binding, and error text (R5, R6) ------------------------


class OpenedCluster:
    """What the patched ``fdbqueue.binding.open_database`` returns: records the timeout."""

    def __init__(self):
        self.timeouts = []
        self.options = self

    def set_transaction_timeout(self, milliseconds):
        self.timeouts.append(milliseconds)


def test_cluster_is_opened_through_fdbqueue_binding_with_the_api_version_chosen(
    monkeypatch, tmp_path
):
    import fdbqueue.cli

    cluster_file = tmp_path / "c.cluster"
    cluster_file.write_text("")

    calls = []

    def open_cluster(cluster_file, api_version):
        calls.append((cluster_file, api_version))
        raise RuntimeError("stop here")

    monkeypatch.setattr(fdbqueue.cli._context, "open_cluster", open_cluster)
    for args, api_version in (([], None), (["--api-version", "630"], 630)):
        result = CliRunner().invoke(
            cli, ["--cluster-file", str(cluster_file), *args, "--queue", "q", "info"], obj={}
        )
        assert result.exit_code == 1, result.output
        assert calls[-1] == (str(cluster_file), api_version)
    assert "[default: (chosen automatically)]" in " ".join(
        CliRunner().invoke(cli, ["--help"]).output.split()
    )


def test_the_transaction_timeout_is_set_on_the_opened_cluster(monkeypatch):
    import fdbqueue.cli

    opened = OpenedCluster()
    monkeypatch.setattr(
        fdbqueue.cli._context, "open_cluster", lambda cluster_file, api_version: opened
    )
    context = fdbqueue.cli.Context(
        {"cluster_file": "c", "api_version": None, "use_memory": False, "timeout": 2.5}, None
    )
    assert context.database() is opened
    assert opened.timeouts == [2500]


def test_a_binding_newer_than_libfdb_c_is_one_line_saying_what_to_install(monkeypatch, tmp_path):
    import fdbqueue.cli
    from fdbqueue import binding

    cluster_file = tmp_path / "c.cluster"
    cluster_file.write_text("")

    def open_cluster(cluster_file, api_version):
        raise binding.BindingMismatchError(
            "the 'foundationdb' binding 8.0.0 is newer than libfdb_c 7.1.67: ... Install the "
            'binding series of your client library: pip install "fdbqueue[fdb71]"'
        )

    monkeypatch.setattr(fdbqueue.cli._context, "open_cluster", open_cluster)
    result = CliRunner().invoke(
        cli, ["--cluster-file", str(cluster_file), "--queue", "q", "info"], obj={}
    )
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    assert lines[0].startswith(
        "fdbqueue: error: cannot open the FoundationDB cluster: the 'foundationdb'"
    )
    assert lines[0].endswith('pip install "fdbqueue[fdb71]"')


class FailingDatabase:
    def __init__(self, error):
        self.error = error

    def create_transaction(self):
        raise self.error


def test_foundationdb_errors_print_text_not_bytes():
    error = BytesDescriptionError(2004, b"Key outside legal range")
    lines = fails(FailingDatabase(error), "--queue", "q", "info")
    assert lines == ["fdbqueue: error: FoundationDB error 2004: Key outside legal range (2004)"]


# -- shared options before or after the command -----------------------------------------------


def test_shared_options_go_before_or_after_the_command(db, subspace):
    jobs = queue_path(subspace, "jobs")
    Queue(subspace["jobs"]).enqueue_many(db, ["a", "b"])
    before = json.loads(ok(db, "--queue", jobs, "--json", "info"))
    after = json.loads(ok(db, "info", "--queue", jobs, "--json"))
    mixed = json.loads(ok(db, "--json", "info", "--queue", jobs))
    for facts in (before, after, mixed):
        facts.pop("read_version")
        assert facts.pop("oldest_age") < 60  # read at a different time each
    assert before == after == mixed
    assert before["size"] == 2
    assert json.loads(ok(db, "peek", "--json", "--queue", jobs)) == ["a", "b"]
    # given in both places, the command's wins
    assert ok(db, "--queue", queue_path(subspace, "other"), "peek", "--queue", jobs) == "'a'\n'b'\n"


def test_priority_queue_options_after_the_command(db, subspace):
    tasks = queue_path(subspace, "tasks")
    ok(db, "push", "low", "--priority", "5", "--priority-queue", "--queue", tasks)
    ok(db, "push", "high", "--priority", "1", "--priority-queue", "--queue", tasks)
    assert ok(db, "pop", "--max", "--queue", tasks, "--priority-queue") == "'low'\n"


def test_version():
    from fdbqueue import __version__

    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"fdbqueue {__version__}\n"


def test_every_option_has_help_and_help_has_no_markup():
    for name, command in [("", cli), *cli.commands.items()]:
        for param in command.params:
            if isinstance(param, click.Option):
                assert param.help, f"{name} {param.name}"
        text = CliRunner().invoke(cli, [name, "--help"] if name else ["--help"]).output
        assert "``" not in text and ":mod:" not in text, name


# -- a missing queue, and bad shared options ----------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["info"],
        ["peek"],
        ["pop"],
        ["leases"],
        ["dead-letters"],
    ],
)
def test_a_queue_with_nothing_under_its_prefix_is_reported_missing(db, subspace, command):
    typo = queue_path(subspace, "job")
    Queue(subspace["jobs"]).enqueue(db, "x")
    lines = fails(db, "--queue", typo, *command)
    assert lines == [
        f"fdbqueue: error: queue {tuple(typo.split(','))!r} does not exist "
        "(nothing stored under its prefix)"
    ]
    assert not list(db.create_transaction().get_range_startswith(subspace["job"].key()))


def test_push_creates_a_queue(db, subspace):
    jobs = queue_path(subspace, "new")
    fails(db, "--queue", jobs, "peek")
    ok(db, "--queue", jobs, "push", "x")
    assert ok(db, "--queue", jobs, "peek") == "'x'\n"
    ok(db, "--queue", jobs, "pop")
    assert ok(db, "--queue", jobs, "pop") == "(empty)\n"  # empty, but it exists


def test_a_cluster_file_that_does_not_exist_is_a_usage_error(tmp_path, subspace):
    missing = str(tmp_path / "missing.cluster")
    for args in (
        ["--cluster-file", missing, "--queue", "q", "info"],
        ["info", "--cluster-file", missing, "--queue", "q"],
    ):
        result = CliRunner().invoke(cli, args, obj={})
        assert result.exit_code == 2, result.output
        assert "does not exist" in result.output.splitlines()[-1]


def test_memory_and_cluster_file_exclude_each_other(tmp_path, db, subspace):
    cluster_file = tmp_path / "fdb.cluster"
    cluster_file.write_text("")
    for args in (
        ["--memory", "--cluster-file", str(cluster_file), "--queue", "q", "info"],
        ["--memory", "info", "--cluster-file", str(cluster_file), "--queue", "q"],
    ):
        lines = fails(db, *args, code=2)
        assert "--memory and --cluster-file exclude each other" in lines[-1]


@pytest.mark.parametrize("timeout", ["0", "-1", "nan", "inf", "soon"])
def test_timeout_must_be_a_positive_number(db, subspace, timeout):
    for args in (("--timeout", timeout, "--queue", "q", "info"), ("info", "--timeout", timeout)):
        lines = fails(db, *args, code=2)
        assert "--timeout" in lines[-1]


# -- dead letters, leases, peek ----------------------------------------------------------------


def make_dead_letters(db, queue, values):
    """Items whose leases ran out of deliveries (max_deliveries=1), through released leases."""
    queue.enqueue_many(db, values)
    for _ in values:
        queue.dead_letter(db, queue.claim(db, lease=60), "failed in a test")


def test_dead_letters_list_requeue_and_purge(db, subspace):
    jobs = queue_path(subspace, "jobs")
    queue = Queue(subspace["jobs"])
    make_dead_letters(db, queue, ["a", "b", "c"])
    text = ok(db, "--queue", jobs, "dead-letters")
    assert text.splitlines()[0].split() == ["id", "del", "reason", "value"]
    assert [line.split()[-1] for line in text.splitlines()[1:]] == ["'a'", "'b'", "'c'"]
    listed = json.loads(ok(db, "--queue", jobs, "dead-letters", "--json"))
    assert [(d["value"], d["deliveries"], d["reason"]) for d in listed] == [
        ("a", 1, "failed in a test"),
        ("b", 1, "failed in a test"),
        ("c", 1, "failed in a test"),
    ]
    result = invoke(db, "--queue", jobs, "dead-letters", "-n", "2", "--json")
    assert result.exit_code == 0
    assert [d["value"] for d in json.loads(result.stdout)] == ["a", "b"]
    assert "more exist" in result.stderr
    assert len(json.loads(ok(db, "--queue", jobs, "dead-letters", "--all", "--json"))) == 3
    assert ok(db, "--queue", jobs, "dead-letters", "--requeue", "-n", "1") == (
        "requeued 1 dead letter\n"
    )
    assert queue.peek_many(db, None) == ["a"]
    assert "--yes" in fails(db, "--queue", jobs, "dead-letters", "--purge")[-1]
    assert len(queue.dead_letters(db)) == 2
    assert json.loads(ok(db, "--queue", jobs, "dead-letters", "--purge", "--yes", "--json")) == {
        "purged": 2
    }
    assert ok(db, "--queue", jobs, "dead-letters") == "(no dead letters)\n"


def test_dead_letters_requeue_takes_them_all(db, subspace):
    jobs = queue_path(subspace, "jobs")
    queue = Queue(subspace["jobs"])
    make_dead_letters(db, queue, ["a", "b"])
    assert json.loads(ok(db, "--json", "--queue", jobs, "dead-letters", "--requeue")) == {
        "requeued": 2
    }
    assert queue.peek_many(db, None) == ["a", "b"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--requeue", "--purge", "--yes"), "not both"),
        (("--yes",), "--yes confirms --purge"),
        (("-n", "3", "--all"), "not both"),
        (("-n", "-1"), "-1"),
    ],
)
def test_dead_letters_usage_errors_change_nothing(db, subspace, args, message):
    jobs = queue_path(subspace, "jobs")
    queue = Queue(subspace["jobs"])
    make_dead_letters(db, queue, ["a"])
    lines = fails(db, "--queue", jobs, "dead-letters", *args, code=2)
    assert message in lines[-1]
    assert len(queue.dead_letters(db)) == 1


def test_leases_lists_seconds_left(db, subspace):
    jobs = queue_path(subspace, "jobs")
    queue = Queue(subspace["jobs"])
    queue.enqueue_many(db, ["a", "b", "c"])
    released = queue.claim(db, lease=60)
    queue.release(db, released)
    queue.claim(db, lease=60)  # takes the released "a" again
    held = queue.claim(db, lease=100)
    document = json.loads(ok(db, "--queue", jobs, "leases", "--json"))
    assert document["read_version"] > 0
    leases = document["leases"]
    assert [lease["value"] for lease in leases] == ["a", "b"]
    assert leases[1]["id"] == held.id
    assert 90 < leases[1]["seconds_left"] <= 100
    assert not leases[1]["expired"] and not leases[1]["released"]
    assert leases[0]["deliveries"] == 2
    text = ok(db, "leases", "--queue", jobs)
    assert "s left" in text.splitlines()[2] and held.id in text.splitlines()[2]
    result = invoke(db, "--queue", jobs, "leases", "-n", "1")
    assert result.exit_code == 0 and "more exist" in result.stderr


def test_leases_show_released_and_expired(db, subspace):
    jobs = queue_path(subspace, "jobs")
    queue = Queue(subspace["jobs"])
    queue.enqueue(db, "a")
    queue.release(db, queue.claim(db, lease=60))
    (lease,) = json.loads(ok(db, "--queue", jobs, "leases", "--json"))["leases"]
    assert lease["released"] and lease["expired"] and lease["state"] == "waiting"
    assert "waiting since its release" in ok(db, "--queue", jobs, "leases")
    assert ok(db, "--queue", queue_path(subspace, "jobs"), "leases", "--all").count("\n") == 2


def test_leases_show_a_retry_waiting_out_its_delay_as_delayed(db, subspace):
    """A release with a delay (a worker's retry backoff) is delayed, not in flight."""
    jobs = queue_path(subspace, "jobs")
    queue = Queue(subspace["jobs"])
    queue.enqueue(db, "a")
    queue.release(db, queue.claim(db, lease=60), delay=30)
    (lease,) = json.loads(ok(db, "--queue", jobs, "leases", "--json"))["leases"]
    assert lease["released"] and not lease["expired"] and lease["state"] == "delayed"
    assert "delayed, due in" in ok(db, "--queue", jobs, "leases")


def test_peek_all_and_the_note_when_more_exist(db, subspace):
    jobs = queue_path(subspace, "jobs")
    Queue(subspace["jobs"]).enqueue_many(db, list(range(15)))
    result = invoke(db, "--queue", jobs, "peek", "--json")
    assert json.loads(result.stdout) == list(range(10))
    assert "more exist" in result.stderr
    assert json.loads(ok(db, "--queue", jobs, "peek", "--all", "--json")) == list(range(15))
    result = invoke(db, "--queue", jobs, "peek", "-n", "15")
    assert result.exit_code == 0 and result.stderr == ""


# -- tail -------------------------------------------------------------------------------------


def test_tail_prints_items_until_the_count_or_idle_timeout(db, subspace):
    jobs = queue_path(subspace, "jobs")
    queue = Queue(subspace["jobs"])
    queue.enqueue_many(db, ["a", "b", "c"])
    assert ok(db, "--queue", jobs, "tail", "-n", "2") == "'a'\n'b'\n"
    assert ok(db, "--queue", jobs, "tail", "--idle-timeout", "0.2", "--json") == '"c"\n'
    assert queue.empty(db)


def test_tail_waits_for_items_pushed_later(db, subspace):
    import threading

    jobs = queue_path(subspace, "jobs")
    queue = Queue(subspace["jobs"])
    queue.enqueue(db, "first")
    later = threading.Timer(0.3, lambda: queue.enqueue(db, "later"))
    later.start()
    try:
        assert ok(db, "--queue", jobs, "tail", "-n", "2", "--idle-timeout", "5") == (
            "'first'\n'later'\n"
        )
    finally:
        later.join()


def test_tail_waits_on_a_queue_not_created_yet_as_work_does(db, subspace, monkeypatch):
    """Issue 36 item 10: tail refused a queue not created yet while work waited on it."""
    import threading

    jobs = queue_path(subspace, "new")
    queue = Queue(subspace["new"])
    assert ok(db, "--queue", jobs, "tail", "--idle-timeout", "0.1") == ""  # waited, then idle
    assert not list(db.create_transaction().get_range_startswith(subspace["new"].key()))
    waiting = threading.Event()
    dequeue = Queue.dequeue

    def watched(self, tr, **options):
        waiting.set()  # tail is taking: the queue is still not created
        return dequeue(self, tr, **options)

    monkeypatch.setattr(Queue, "dequeue", watched)
    pusher = threading.Thread(target=lambda: waiting.wait(30) and queue.enqueue(db, "first"))
    pusher.start()
    try:
        assert ok(db, "--queue", jobs, "tail", "-n", "1", "--idle-timeout", "30") == "'first'\n"
    finally:
        pusher.join()


def test_tail_on_a_priority_queue(db, subspace):
    tasks = queue_path(subspace, "tasks")
    queue = PriorityQueue(subspace["tasks"])
    queue.push(db, "low", priority=5)
    queue.push(db, "high", priority=1)
    args = ("--priority-queue", "--queue", tasks, "tail", "--idle-timeout", "0.1")
    assert ok(db, *args, "--max") == "'low'\n'high'\n"
    assert "priority queues" in fails(db, "--queue", tasks, "tail", "--max", code=2)[-1]


def test_tail_exits_0_quietly_on_ctrl_c(db, subspace, monkeypatch):
    jobs = queue_path(subspace, "jobs")
    queue = Queue(subspace["jobs"])
    queue.enqueue(db, "a")
    calls = []

    def dequeue(self, tr, *, block=False, timeout=None):
        calls.append(timeout)
        if len(calls) > 1:
            raise KeyboardInterrupt
        return "a"

    monkeypatch.setattr(Queue, "dequeue", dequeue)
    result = invoke(db, "--queue", jobs, "tail")
    assert result.exit_code == 0
    assert result.output == "'a'\n"
    assert calls == [1.0, 1.0]


@pytest.mark.parametrize("args", [("-n", "0"), ("--idle-timeout", "0"), ("--idle-timeout", "x")])
def test_tail_usage_errors(db, subspace, args):
    jobs = queue_path(subspace, "jobs")
    Queue(subspace["jobs"]).enqueue(db, "a")
    fails(db, "--queue", jobs, "tail", *args, code=2)
    assert Queue(subspace["jobs"]).size(db) == 1


# -- bench arguments ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--consumers", "0"], "--consumers"),
        (["--producers", "0"], "--producers"),
        (["--modes", "bogus"], "unknown mode 'bogus'"),
        (["--consumers", "a,b"], "--consumers"),
        (["--items", "-5"], "--items"),
        (["--phases", "later"], "unknown phase"),
        (["--grv", "-1"], "--grv"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bench_refuses_bad_arguments_before_running(db, args, message):
    lines = fails(db, "bench", *args, code=2)
    assert lines[-1].startswith("fdbqueue: error: ")
    assert message in lines[-1]
    assert len(lines) == 1  # the error alone, no usage block: nothing ran


def test_bench_help_lists_its_options_without_markup():
    result = CliRunner().invoke(cli, ["bench", "--help"])
    assert result.exit_code == 0
    assert "--consumers" in result.output and "--modes" in result.output
    assert "``" not in result.output


def test_bench_plot_without_matplotlib_fails_before_running(db, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    lines = fails(db, "bench", "--plot", "x.png", "--items", "10", "--consumers", "1")
    assert lines == [
        "fdbqueue: error: --plot needs matplotlib: pip install matplotlib (or the '.[bench]' extra)"
    ]


def test_errors_stay_one_line_of_text_on_stderr_with_json(db, subspace):
    missing = queue_path(subspace, "missing")
    result = invoke(db, "--json", "--queue", missing, "info")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("fdbqueue: error: queue (") and result.stderr.count("\n") == 1


def test_a_queue_opened_as_the_wrong_type_is_refused_and_left_alone():
    db = memory.open()
    tasks = PriorityQueue(Subspace(("typed-cli",)))
    tasks.push(db, "x", 3)
    for args in (["pop"], ["info"], ["push", "oops"], ["peek"]):
        result = invoke(db, "--queue", "typed-cli", *args)
        assert result.exit_code == 1, result.output
        assert "PriorityQueue" in result.output
    assert tasks.pop_max(db) == "x" and tasks.pop_max(db) is None


def test_python_dash_m_runs_the_command_line():
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "fdbqueue", "--version"], capture_output=True, text=True
    )
    assert result.returncode == 0 and "fdbqueue" in result.stdout


# -- the codec and type on record -------------------------------------------------------------


def test_the_codec_is_read_from_the_record_so_only_creation_needs_it(db, subspace):
    jobs = queue_path(subspace, "jobs")
    ok(db, "--queue", jobs, "--codec", "json", "push", '{"to": "ada"}')
    ok(db, "--queue", jobs, "push", '{"to": "bob"}')  # parsed as JSON: the record says json
    assert Queue(subspace["jobs"], codec="json").peek_many(db, 5) == [{"to": "ada"}, {"to": "bob"}]
    assert json.loads(ok(db, "--json", "--queue", jobs, "info"))["codec"] == "json"
    assert "codec" in ok(db, "--queue", jobs, "info")
    assert json.loads(ok(db, "--json", "--queue", jobs, "pop", "-n", "2")) == [
        {"to": "ada"},
        {"to": "bob"},
    ]
    assert Queue(subspace["jobs"], codec="json").dead_letters(db) == []


@pytest.mark.parametrize("command", [["push", "x"], ["pop"], ["peek"], ["info"], ["leases"]])
def test_a_codec_that_contradicts_the_record_is_refused_in_one_line(db, subspace, command):
    jobs = queue_path(subspace, "jobs")
    Queue(subspace["jobs"], codec="json").enqueue(db, {"n": 1})
    [line] = fails(db, "--queue", jobs, "--codec", "tuple", *command)
    assert "written with codec 'json'" in line and "drop --codec tuple" in line
    assert Queue(subspace["jobs"], codec="json").peek_many(db, 5) == [{"n": 1}]


def write_handler(tmp_path, monkeypatch):
    (tmp_path / "codec_jobs_for_test.py").write_text(
        "handled = []\n\ndef handle(value):\n    handled.append(value)\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "codec_jobs_for_test", raising=False)
    return "codec_jobs_for_test:handle"


def test_work_without_codec_reads_the_record_and_dead_letters_nothing(
    db, subspace, tmp_path, monkeypatch
):
    """New-user finding 1: a missing --codec moved every item to the dead letters."""
    handler = write_handler(tmp_path, monkeypatch)
    jobs = queue_path(subspace, "jobs")
    Queue(subspace["jobs"], codec="json").enqueue_many(db, [{"n": 1}, {"n": 2}])
    output = ok(db, "--json", "--queue", jobs, "work", handler, "--until-empty")
    assert json.loads(output.splitlines()[-1])["succeeded"] == 2
    assert sys.modules["codec_jobs_for_test"].handled == [{"n": 1}, {"n": 2}]


def test_work_time_limit_takes_back_a_job_that_runs_longer(db, subspace, tmp_path, monkeypatch):
    """Issue 43 item 15: ``work --time-limit SECONDS`` was refused with "Did you mean
    '--timeout'?" (the per-call database timeout: no time limit at all)."""
    (tmp_path / "time_limit_jobs_for_test.py").write_text(
        "import threading\n\nrelease = threading.Event()\n\n"
        "def handle(value):\n    if value == 'hangs':\n        release.wait(5)\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "time_limit_jobs_for_test", raising=False)
    jobs = queue_path(subspace, "jobs")
    Queue(subspace["jobs"]).enqueue_many(db, ["hangs", "quick"])
    flags = ["--time-limit", "0.1", "--max-deliveries", "1", "--until-empty"]
    try:
        output = ok(
            db, "--json", "--queue", jobs, "work", "time_limit_jobs_for_test:handle", *flags
        )
    finally:
        sys.modules["time_limit_jobs_for_test"].release.set()
    summary = json.loads(output.splitlines()[-1])
    assert (summary["timed_out"], summary["dead_lettered"], summary["succeeded"]) == (1, 1, 1)
    [letter] = Queue(subspace["jobs"]).dead_letters(db)
    assert letter.value == "hangs" and "time limit exceeded" in letter.reason
    assert "--time-limit SECONDS" in ok(db, "work", "--help")


@pytest.mark.parametrize("written_as", ["Queue", "PriorityQueue"])
def test_work_checks_the_queue_type_as_every_command_does(
    db, subspace, tmp_path, monkeypatch, written_as
):
    """Finding 3: work on the other queue type retried forever, or took a PriorityQueue's
    items as a Queue's."""
    handler = write_handler(tmp_path, monkeypatch)
    jobs = queue_path(subspace, "jobs")
    if written_as == "Queue":
        Queue(subspace["jobs"]).enqueue(db, "a")
        flags = ["--priority-queue"]
    else:
        PriorityQueue(subspace["jobs"]).push(db, "a", 1)
        flags = []
    [line] = fails(db, "--queue", jobs, *flags, "work", handler, "--until-empty")
    assert f"holds a {written_as}" in line
    assert sys.modules["codec_jobs_for_test"].handled == []


# -- every bad input is one line ---------------------------------------------------------------

LONG_PREFIX = "x" * 9_990


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--codec", "json", "push", "NaN"], 2, "JSON has no NaN or infinity"),
        (["--codec", "json", "push", '{"a": [Infinity]}'], 2, "JSON has no NaN or infinity"),
        (["--codec", "json", "push", "1e999"], 2, "JSON has no NaN or infinity"),
        (["--codec", "json", "push", '{"a": 1'], 2, "is not JSON"),
        (["push", "x", "--delay", "1e999"], 2, "'1e999' is too large"),
        (["push", "x", "--delay", "nan"], 2, "'nan' is not a finite number"),
        # issue 36 item 10: exit 1 where the docs say 2
        (["--codec", "json", "push", "null"], 2, "'null' is JSON null, which a queue cannot"),
        (["--codec", "json", "push", '"' + "x" * 100_001 + '"'], 2, "value size limit"),
        (["push", "x" * 100_001], 2, "value size limit"),
    ],
)
def test_a_bad_value_is_a_one_line_usage_error(db, subspace, args, code, message):
    """Finding 5 and new-user finding 4: tracebacks where one line was promised."""
    jobs = queue_path(subspace, "jobs")
    lines = fails(db, "--queue", jobs, *args, code=code)
    assert message in lines[-1]
    assert Queue(subspace["jobs"]).peek_many(db, 5) == []  # nothing was written


@pytest.mark.parametrize(
    ("queue", "message"),
    [
        ("", "has an empty element"),
        ("app,,jobs", "has an empty element"),
        (LONG_PREFIX, "use a prefix of at most 9,872 bytes"),
    ],
)
@pytest.mark.parametrize("command", [["push", "x"], ["info"]])
def test_a_bad_queue_name_is_a_one_line_usage_error(db, queue, message, command):
    lines = fails(db, "--queue", queue, *command, code=2)
    assert message in lines[-1]


def run_command_line(*args: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "fdbqueue", "--memory", *args],
        capture_output=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        ([b"--queue", b"t", b"push", b"\xff"], 2, b"use --codec raw for bytes"),
        ([b"--queue", b"\xff", b"push", b"x"], 2, b"--queue is not valid UTF-8"),
        ([b"--queue", b"t", b"--codec", b"json", b"push", b"\xff"], 2, b"not valid UTF-8"),
    ],
)
def test_arguments_that_are_not_utf8_are_one_line_errors(args, code, message):
    result = run_command_line(*args)
    assert result.returncode == code, result.stderr
    assert b"Traceback" not in result.stderr
    assert message in result.stderr.strip().splitlines()[-1]


def test_raw_values_are_the_bytes_given_even_when_not_utf8():
    result = run_command_line(b"--queue", b"t", b"--codec", b"raw", b"push", b"\xff\x01")
    assert result.returncode == 0, result.stderr
    assert b"pushed b'\\xff\\x01'" in result.stdout


def test_a_parent_prefix_error_shows_the_key_as_a_tuple(db, subspace):
    """New-user finding 8: the error printed raw key bytes."""
    Queue(subspace["app"]["jobs"]).enqueue(db, "x")
    parent = queue_path(subspace, "app")
    [line] = fails(db, "--queue", parent, "peek")
    assert "'app', 'jobs', 1, b" in line and "b'\\x02fdbqueue-test" not in line  # b'...' or b"..."


def test_the_memory_option_says_each_command_starts_empty(db):
    assert "each command starts with an empty one" in " ".join(ok(db, "--help").split())


# -- one line, no usage block; help laid out alike; plurals ---------------------------------------


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["pop", "-n", "0"],
            "fdbqueue: error: Invalid value for '-n' / '--limit': '0' is out of range: give a "
            "whole number from 1 to 9,223,372,036,854,775,807",
        ),
        (["work", "json:loads", "--concurrency", "0"], "fdbqueue: error: Invalid value for "),
        (["push", "--bogus", "x"], "fdbqueue: error: No such option '--bogus'."),
        (["bench", "--consumers", "0"], "fdbqueue: error: argument --consumers: "),
    ],
)
def test_a_usage_error_is_one_line_without_the_usage_block(db, subspace, args, line):
    jobs = queue_path(subspace, "jobs")
    result = invoke(db, "--queue", jobs, *args)
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1, result.output
    assert result.output.startswith(line)


def test_errors_are_one_line_from_the_console_script_too(tmp_path):
    """Through ``python -m fdbqueue``: stderr holds the one line, stdout nothing."""
    for args, code in (
        (["--memory", "--queue", "jobs", "pop", "-n", "0"], 2),
        (["--memory", "--codec", "json", "--queue", "jobs", "push", "NaN"], 2),
        (["--memory", "--queue", "jobs", "info"], 1),
        (["--memory", "--codec", "json", "--queue", "jobs", "push", "null"], 2),
        (["--memory", "--queue", "jobs", "peek", "-n", "9" * 30], 2),
        (["--memory", "--queue", "jobs", "push", "9" * 700, "--int"], 2),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "fdbqueue", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == code, result.stderr
        assert result.stdout == ""
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("fdbqueue: error: ")


def test_bench_help_is_laid_out_as_the_other_commands():
    text = CliRunner().invoke(cli, ["bench", "--help"]).output
    assert text.startswith("Usage: fdbqueue bench [OPTIONS]\n")
    assert "\nOptions:\n" in text and "usage:" not in text and "options:" not in text
    assert "  -h, --help" in text and "Show this message and exit." in text
    assert "--consumers N,N,..." in text and "--items INTEGER" in text
    for line in text.splitlines():
        assert not line.rstrip().endswith("-"), line  # no word broken at a hyphen


def test_the_command_list_has_one_whole_line_per_command():
    text = CliRunner().invoke(cli, ["--help"]).output
    commands = text[text.index("Commands:") :].splitlines()[1:]
    assert [line.split()[0] for line in commands] == sorted(cli.commands)
    assert not any(line.endswith("...") for line in commands)


def test_listing_notes_count_in_words(db, subspace):
    jobs = queue_path(subspace, "jobs")
    Queue(subspace["jobs"]).enqueue_many(db, ["a", "b"])
    result = invoke(db, "--queue", jobs, "peek", "-n", "1")
    assert "(the first 1 item; more exist" in result.output


# -- sharded queues -----------------------------------------------------------------------


def test_push_creates_a_sharded_queue_and_info_shows_each_shard(db, subspace):
    jobs = queue_path(subspace, "sharded")
    for value in ["a", "b", "c", "d", "e"]:
        ok(db, "--queue", jobs, "push", "--shards", "4", value)
    ok(db, "--queue", jobs, "push", "f")  # the count is read from the record
    queue = Queue(subspace["sharded"], shards=4)
    assert queue.size(db) == 6
    facts = json.loads(ok(db, "--json", "--queue", jobs, "info"))
    assert facts["size"] == 6 and len(facts["shards"]) == 4
    assert sum(shard["size"] for shard in facts["shards"]) == 6
    text = ok(db, "--queue", jobs, "info")
    assert "shard 3" in text and "size" in text
    popped = json.loads(ok(db, "--json", "--queue", jobs, "pop", "-n", "10"))
    assert sorted(popped) == ["a", "b", "c", "d", "e", "f"]


def test_another_shard_count_is_refused_in_one_line(db, subspace):
    jobs = queue_path(subspace, "sharded")
    ok(db, "--queue", jobs, "push", "--shards", "4", "a")
    (line,) = fails(db, "--queue", jobs, "push", "--shards", "2", "b")
    assert "has 4 shards: drop --shards 2" in line
    assert fails(db, "--queue", jobs, "push", "--shards", "0", "b", code=2)
    assert Queue(subspace["sharded"], shards=4).size(db) == 1


def test_push_with_a_dedup_id_pushes_once(db, subspace):
    jobs = queue_path(subspace, "deduplicated")
    assert ok(db, "--queue", jobs, "push", "job", "--dedup-id", "job-1") == "pushed 'job'\n"
    again = ok(db, "--queue", jobs, "push", "job", "--dedup-id", "job-1")
    assert again.startswith("nothing pushed: dedup id 'job-1'")
    said = json.loads(ok(db, "--json", "--queue", jobs, "push", "job", "--dedup-id", "job-1"))
    assert said["pushed"] is None and said["dedup_id"] == "job-1"
    assert Queue(subspace["deduplicated"]).peek_many(db, None) == ["job"]
    assert "--dedup-id" in "\n".join(
        fails(db, "--queue", jobs, "push", "x", "--dedup-id", "", code=2)
    )
    assert Queue(subspace["deduplicated"]).size(db) == 1


def test_push_with_a_dedup_id_into_a_priority_queue_pushes_once(db, subspace):
    tasks = queue_path(subspace, "deduplicated-tasks")
    push = ("--priority-queue", "--queue", tasks, "push")
    assert ok(db, *push, "task", "--priority", "1", "--dedup-id", "task-1") == "pushed 'task'\n"
    again = ok(db, *push, "task", "--priority", "5", "--dedup-id", "task-1")  # the queue's id
    assert again.startswith("nothing pushed: dedup id 'task-1'")
    said = json.loads(ok(db, "--json", *push, "task", "--priority", "1", "--dedup-id", "task-1"))
    assert said == {"pushed": None, "seen": "task", "dedup_id": "task-1"}
    said = json.loads(ok(db, "--json", *push, "other", "--priority", "2", "--dedup-id", "task-2"))
    assert said == {"pushed": "other", "priority": 2, "delay": None, "group": None}
    assert "--dedup-id" in "\n".join(
        fails(db, *push, "x", "--priority", "1", "--dedup-id", "", code=2)
    )
    assert PriorityQueue(subspace["deduplicated-tasks"]).peek_many(db, None) == ["task", "other"]


def test_push_with_a_group_and_info_counts_the_groups(db, subspace):
    jobs = queue_path(subspace, "grouped")
    assert ok(db, "--queue", jobs, "push", "a1", "--group", "tenant-a") == (
        "pushed 'a1' to group 'tenant-a'\n"
    )
    ok(db, "--queue", jobs, "push", "a2", "--group", "tenant-a")
    said = json.loads(ok(db, "--json", "--queue", jobs, "push", "b1", "--group", "tenant-b"))
    assert said["group"] == "tenant-b"
    queue = Queue(subspace["grouped"])
    lease = queue.claim(db, 30)
    assert lease is not None and lease.group == "tenant-a"
    facts = json.loads(ok(db, "--json", "--queue", jobs, "info"))
    assert (facts["groups"], facts["groups_in_flight"], facts["size"]) == (2, 1, 2)
    assert "groups in flight" in ok(db, "--queue", jobs, "info")
    assert "(group 'tenant-a')" in ok(db, "--queue", jobs, "leases")
    assert (
        json.loads(ok(db, "--json", "--queue", jobs, "leases"))["leases"][0]["group"] == "tenant-a"
    )
    # take order: tenant-b's turn, then tenant-a's next item once its lease ends
    assert ok(db, "--queue", jobs, "peek").splitlines() == ["'b1'", "'a2'"]
    tasks = queue_path(subspace, "grouped-tasks")
    ok(db, "--priority-queue", "--queue", tasks, "push", "t", "--priority", "1", "--group", "a")
    assert PriorityQueue(subspace["grouped-tasks"]).claim(db, 30).group == "a"


# -- issue 36 item 10: the command line's bad inputs ---------------------------------------------

HUGE = "9" * 700
BIG = "9" * 30


def test_a_negative_number_is_a_value_without_dashes(db, subspace):
    jobs, tasks = queue_path(subspace, "jobs"), queue_path(subspace, "tasks")
    assert ok(db, "--queue", jobs, "push", "-5", "--int") == "pushed -5\n"
    assert ok(db, "--queue", jobs, "push", "--int", "-7") == "pushed -7\n"
    assert ok(db, "--queue", jobs, "push", "-1.5") == "pushed '-1.5'\n"
    assert ok(db, "--queue", jobs, "push", "--int", "--", "-2") == "pushed -2\n"
    assert Queue(subspace["jobs"]).peek_many(db, 5) == [-5, -7, "-1.5", -2]
    ok(db, "--queue", tasks, "--priority-queue", "push", "-3", "--int", "--priority", "-2")
    assert PriorityQueue(subspace["tasks"]).peek(db) == -3
    json_jobs = queue_path(subspace, "json")
    ok(db, "--queue", json_jobs, "--codec", "json", "push", "-2.5e3")
    assert Queue(subspace["json"], codec="json").peek(db) == -2500.0
    # an unknown option is still one
    assert fails(db, "--queue", jobs, "push", "-x", code=2) == [
        "fdbqueue: error: No such option '-x'."
    ]


#: Internal names and library wording that a bad input must not show (issue 36 item 10).
INTERNALS = ("Subspace(", "rawPrefix", "islice", "ubyte", "Shard", ".write", " inf", "sys.maxsize")


@pytest.mark.parametrize(
    ("args", "shown", "allowed"),
    [
        (["--priority-queue", "push", "x", "--priority", HUGE], "(700 characters)", "2**2040"),
        (["push", HUGE, "--int"], "(700 characters)", "2**2040"),
        (["push", "x", "--delay", HUGE], "(700 characters)", "from 0 to 2,592,000"),
        (["push", "x", "--delay", "1e999"], "'1e999' is too large", "from 0 to 2,592,000"),
        (["peek", "-n", BIG], "(30 characters)", "from 0 to 9,223,372,036,854,775,807"),
        (["leases", "-n", BIG], "(30 characters)", "from 0 to"),
        (["dead-letters", "-n", HUGE], "(700 characters)", "from 0 to"),
        (["pop", "-n", BIG], "(30 characters)", "from 1 to"),
        (["tail", "-n", "-1"], "'-1' is out of range", "from 1 to"),
        (["tail", "--idle-timeout", HUGE], "(700 characters)", "above 0"),
        (["work", "json:loads", "--lease", HUGE], "(700 characters)", "up to 43,200"),
        (["work", "json:loads", "--lease", "50000"], "--lease", "<= 43200"),
        (["work", "json:loads", "--backoff", "500"], "--max-backoff", ">= --backoff"),
        (["work", "json:loads", "--concurrency", BIG], "(30 characters)", "from 1 to 1,024"),
        (["work", "json:loads", "--max-deliveries", "0"], "'0'", "from 1 to"),
        # issue 43 item 15: --time-limit was refused ("Did you mean '--timeout'?")
        (["work", "json:loads", "--time-limit", HUGE], "(700 characters)", "up to 43,200"),
        (["work", "json:loads", "--time-limit", "nan"], "'nan' is not a finite", "up to 43,200"),
        (["work", "json:loads", "--time-limit", "50000"], "--time-limit", "<= 43200"),
        (["work", "json:loads", "--time-limit", "0"], "--time-limit", "> 0"),
        (["work", "json:loads", "--time-limit", "-1"], "--time-limit", "> 0"),
        (["--timeout", HUGE, "info"], "(700 characters)", "above 0"),
        (["--shards", BIG, "push", "x"], "(30 characters)", "from 1 to 256"),
    ],
)
def test_a_huge_or_out_of_range_number_says_what_was_typed_and_what_is_allowed(
    db, subspace, args, shown, allowed
):
    jobs = queue_path(subspace, "jobs")
    # in its own transaction: no receipt, which a command's clean-up of this process's
    # finished receipts would clear (housekeeping, not a change)
    run(db, lambda tr: Queue(subspace["jobs"]).enqueue(tr, "a"))
    before = stored(db, subspace)
    [line] = fails(db, "--queue", jobs, *args, code=2)
    assert line.startswith("fdbqueue: error: ") and shown in line and allowed in line, line
    assert HUGE not in line and not any(name in line for name in INTERNALS), line
    assert stored(db, subspace) == before


def stored(db, subspace):
    """Every key and value under ``subspace``, as bytes."""
    found = db.create_transaction().get_range_startswith(subspace.key())
    return [(bytes(pair.key), bytes(pair.value)) for pair in found]


@pytest.mark.parametrize(
    ("command", "priority"), [(["push", "x"], ["--priority", "1"]), (["clear", "--yes"], [])]
)
def test_a_push_into_the_other_queue_type_names_the_option_not_the_subspace(
    db, subspace, command, priority
):
    tasks, jobs = queue_path(subspace, "tasks"), queue_path(subspace, "jobs")
    PriorityQueue(subspace["tasks"]).push(db, "t", 1)
    Queue(subspace["jobs"]).enqueue(db, "j")
    [line] = fails(db, "--queue", tasks, *command)
    assert line == (
        f"fdbqueue: error: queue {tuple(tasks.split(','))!r} holds a PriorityQueue, not a "
        "Queue: add --priority-queue"
    )
    [line] = fails(db, "--queue", jobs, "--priority-queue", *command, *priority)
    assert "holds a Queue, not a PriorityQueue: drop --priority-queue" in line
    assert not any(name in line for name in INTERNALS)
    assert PriorityQueue(subspace["tasks"]).peek_many(db, 5) == ["t"]
    assert Queue(subspace["jobs"]).peek_many(db, 5) == ["j"]


def test_the_whitespace_around_the_queue_s_parts_is_dropped(db, subspace):
    spaced = ", ".join([*fdb.tuple.unpack(subspace.key()), " app ", "jobs "])
    assert ok(db, "--queue", spaced, "push", "x") == "pushed 'x'\n"
    assert Queue(subspace["app"]["jobs"]).peek_many(db, 5) == ["x"]
    lines = fails(db, "--queue", queue_path(subspace, "app, jobs") + "x", "info")
    assert f"{(*fdb.tuple.unpack(subspace.key()), 'app', 'jobsx')!r}" in lines[0]
    assert "has an empty element" in fails(db, "--queue", "app, ,jobs", "info", code=2)[0]


def test_dashboard_demo_implies_the_in_memory_database(monkeypatch):
    """Issue 36 item 10: without --memory the demo blamed libfdb_c."""
    uvicorn = pytest.importorskip("uvicorn")
    served = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: served.append(app))
    result = CliRunner().invoke(cli, ["dashboard", "--demo", "--port", "0"], obj={})
    assert result.exit_code == 0, result.output
    assert "libfdb_c" not in result.output and len(served) == 1
    assert "queue(s) at http://localhost:0/" in result.output


def test_dashboard_demo_refuses_a_cluster_file_in_one_line(tmp_path):
    pytest.importorskip("uvicorn")
    cluster_file = tmp_path / "fdb.cluster"
    cluster_file.write_text("")
    result = CliRunner().invoke(
        cli, ["dashboard", "--demo", "--cluster-file", str(cluster_file)], obj={}
    )
    assert result.exit_code == 2, result.output
    assert result.output == (
        "fdbqueue: error: --demo runs its workload on the in-memory database: drop "
        "--cluster-file (fdbqueue dashboard --demo)\n"
    )


def commands_of(group: click.Group, prefix: str = "") -> list[str]:
    """Every command of ``group`` and of its subgroups, as typed: ``schedule add``."""
    found = []
    for name, command in group.commands.items():
        found.append(prefix + name)
        if isinstance(command, click.Group):
            found += commands_of(command, f"{prefix}{name} ")
    return found


def test_every_command_and_subcommand_has_an_entry_in_the_cli_page():
    """docs/cli.rst lists each command as a term (a line starting ````name``), the
    ``schedule`` group's ``add``, ``list`` and ``remove`` too (issue 43 item 19)."""
    page = (Path(__file__).parent.parent / "docs" / "cli.rst").read_text()
    terms = [line for line in page.splitlines() if line.startswith("``")]
    missing = [
        command
        for command in commands_of(cli)
        if not any(f"``{command} " in term or f"``{command}``" in term for term in terms)
    ]
    assert "schedule add" in commands_of(cli)
    assert missing == []
