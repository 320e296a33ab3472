"""The fdbqueue command line, run in-process against the backend's database (``db``).

Queues are named under the test's subspace: ``queue_path(subspace, "jobs")`` is the
``--queue`` argument of ``subspace["jobs"]``.
"""

from __future__ import annotations

import json
import subprocess
import sys

import fdb.tuple
import pytest
from click.testing import CliRunner
from helpers import BytesDescriptionError, run

from fdbqueue import PriorityQueue, Queue, Subspace
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
    db.advance_time(1)
    queue.claim(db, lease=30)  # moves the expired "b" to the dead letters, leases "c"
    assert expiring.value == "b"
    facts = json.loads(ok(db, "--json", "--queue", jobs, "info"))
    assert facts == {
        "size": 0,
        "oldest": None,
        "requests_in_line": 0,
        "leases": 2,
        "dead_letters": 1,
    }
    text = ok(db, "--queue", jobs, "info")
    assert "dead letters      1" in text


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
    assert "does --queue/--directory name a queue" in lines[0]
    assert len(fails(db, "--queue", notaqueue, "pop")) == 1
    assert bytes(db[subspace["notaqueue"].pack(("text key",))]) == b"whatever"  # untouched


@pytest.mark.memory_only("the refusal is the in-memory database's")
def test_directory_on_the_in_memory_database_is_refused(db):
    lines = fails(db, "--directory", "app/jobs", "info")
    assert lines == [
        "Error: --directory needs FoundationDB's directory layer, which needs libfdb_c and a "
        "cluster; name the queue with --queue on the in-memory database"
    ]


def test_a_cluster_that_cannot_be_opened_is_a_one_line_error(tmp_path):
    """In a child interpreter: once the fdb backend ran memory.install() in this process,
    ``fdb.open()`` answers any cluster file name with an in-memory cluster."""
    missing = str(tmp_path / "missing.cluster")
    result = subprocess.run(
        [sys.executable, "-m", "fdbqueue.cli", "--cluster-file", missing, "--queue", "q", "info"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith("Error: cannot open the FoundationDB cluster")
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


def test_cluster_is_opened_through_fdbqueue_binding_with_the_api_version_chosen(monkeypatch):
    import fdbqueue.cli

    calls = []

    def open_cluster(cluster_file, api_version):
        calls.append((cluster_file, api_version))
        raise RuntimeError("stop here")

    monkeypatch.setattr(fdbqueue.cli, "open_cluster", open_cluster)
    for args, api_version in (([], None), (["--api-version", "630"], 630)):
        result = CliRunner().invoke(
            cli, ["--cluster-file", "c.cluster", *args, "--queue", "q", "info"], obj={}
        )
        assert result.exit_code == 1, result.output
        assert calls[-1] == ("c.cluster", api_version)
    assert "[default: (chosen automatically)]" in " ".join(
        CliRunner().invoke(cli, ["--help"]).output.split()
    )


def test_the_transaction_timeout_is_set_on_the_opened_cluster(monkeypatch):
    import fdbqueue.cli

    opened = OpenedCluster()
    monkeypatch.setattr(fdbqueue.cli, "open_cluster", lambda cluster_file, api_version: opened)
    context = fdbqueue.cli.Context(
        {"cluster_file": "c", "api_version": None, "use_memory": False, "timeout": 2.5}, None
    )
    assert context.database() is opened
    assert opened.timeouts == [2500]


def test_a_binding_newer_than_libfdb_c_is_one_line_saying_what_to_install(monkeypatch):
    import fdbqueue.cli
    from fdbqueue import binding

    def open_cluster(cluster_file, api_version):
        raise binding.BindingMismatchError(
            "the 'foundationdb' binding 8.0.0 is newer than libfdb_c 7.1.67: ... Install the "
            'binding series of your client library: pip install "fdbqueue[fdb71]"'
        )

    monkeypatch.setattr(fdbqueue.cli, "open_cluster", open_cluster)
    result = CliRunner().invoke(cli, ["--cluster-file", "c", "--queue", "q", "info"], obj={})
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    assert lines[0].startswith("Error: cannot open the FoundationDB cluster: the 'foundationdb'")
    assert lines[0].endswith('pip install "fdbqueue[fdb71]"')


class FailingDatabase:
    def __init__(self, error):
        self.error = error

    def create_transaction(self):
        raise self.error


def test_foundationdb_errors_print_text_not_bytes():
    error = BytesDescriptionError(2004, b"Key outside legal range")
    lines = fails(FailingDatabase(error), "--queue", "q", "info")
    assert lines == ["Error: FoundationDB error 2004: Key outside legal range (2004)"]
