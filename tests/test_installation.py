"""``memory.install()``: the real ``fdb`` binding running on in-memory clusters.

These tests drive the binding's own code (``fdb/impl.py``): its Database and Transaction,
lazy ``FDBRange`` batches, ``Value`` futures, callbacks, options, ``fdb.transactional`` and
the directory layer. The API version is selected once per process, so the few checks of other
API versions run in a child interpreter.
"""

from __future__ import annotations

import gc
import importlib.metadata
import os
import subprocess
import sys
import textwrap
import threading
import uuid
from typing import Any

import pytest
from helpers import installed_fdb

from fdbqueue import Queue, memory


@pytest.fixture
def fdb(tmp_path: Any) -> Any:
    """The ``fdb`` module with an API version selected, over memory.install()."""
    return installed_fdb()


@pytest.fixture
def path(tmp_path: Any) -> str:
    """A cluster file name of its own: a fresh in-memory cluster."""
    return str(tmp_path / f"{uuid.uuid4().hex}.cluster")


def test_open_returns_the_bindings_database_over_one_cluster_per_cluster_file(fdb, path):
    database = fdb.open(path)
    assert type(database) is fdb.impl.Database
    database[b"greeting"] = b"hello"
    assert fdb.open(path)[b"greeting"] == b"hello"
    assert fdb.open(path + ".other")[b"greeting"] is None
    assert memory.cluster(path).get(b"greeting") == b"hello"


def test_user_transactional_code_runs_with_retries_on_a_conflict(fdb, path):
    database = fdb.open(path)
    database[b"counter"] = b"0"
    attempts = []
    other = fdb.open(path)

    @fdb.transactional
    def increment(tr):
        attempts.append(1)
        value = int(tr[b"counter"])
        if len(attempts) == 1:  # a concurrent writer commits in between: 1020, then a retry
            other[b"counter"] = b"10"
        tr[b"counter"] = str(value + 1).encode()

    increment(database)
    assert len(attempts) == 2
    assert database[b"counter"] == b"11"


def test_errors_are_the_bindings_fdb_error(fdb, path):
    database = fdb.open(path)
    tr = database.create_transaction()
    with pytest.raises(fdb.FDBError) as raised:
        tr.get(b"\xff/key").wait()
    assert raised.value.code == 2004
    assert raised.value.description == b"Key outside legal range"


@pytest.mark.parametrize(
    ("read", "code"),
    [
        (lambda tr: tr.get(b"\xff/key"), 2004),
        (lambda tr: tr.get_key(tr_selector(b"\xff\xff")), 2004),
        (lambda tr: tr.get_range(b"a", b"\xff\xff"), 2004),
        (lambda tr: tr.get_range(b"\xff/a", b"\xff/b"), 2004),
    ],
)
def test_read_errors_come_from_the_reads_future_not_the_call(fdb, path, read, code):
    """Through the binding on memory.install(): each read call returns (a future, or a lazy
    ``FDBRange``); waiting on it, or iterating it, raises the read's error."""
    tr = fdb.open(path).create_transaction()
    result = read(tr)
    with pytest.raises(fdb.FDBError) as raised:
        list(result) if isinstance(result, fdb.impl.FDBRange) else result.wait()
    assert raised.value.code == code


def test_a_read_at_a_version_not_reached_fails_1009_from_its_future(fdb, path):
    tr = fdb.open(path).create_transaction()
    tr.set_read_version(0x7FFFFFFFFFFFFFF0)
    future = tr.get(b"foo")  # issued: the call returns
    with pytest.raises(fdb.FDBError) as raised:
        future.wait()
    assert raised.value.code == 1009


def tr_selector(key: bytes) -> Any:
    import fdb

    return fdb.KeySelector.first_greater_or_equal(key)


def test_range_iteration_fetches_lazily_and_conflicts_only_on_the_batches_read(fdb, path):
    database = fdb.open(path)

    @fdb.transactional
    def fill(tr):
        for index in range(2000):
            tr[b"row/%05d" % index] = b"x" * 20

    fill(database)
    reader = database.create_transaction()
    rows = iter(reader.get_range(b"row/", b"row0"))
    first = [next(rows) for _ in range(3)]
    assert [kv.key for kv in first] == [b"row/00000", b"row/00001", b"row/00002"]
    database[b"row/01999"] = b"changed"  # far beyond the first batch (4,096 bytes)
    reader[b"marker"] = b"1"
    reader.commit().wait()  # no conflict: only the batch fetched is in the read conflict range

    whole = database.create_transaction()
    assert len(list(whole.get_range(b"row/", b"row0"))) == 2000
    database[b"row/01999"] = b"changed again"
    whole[b"marker"] = b"2"
    with pytest.raises(fdb.FDBError) as raised:
        whole.commit().wait()
    assert raised.value.code == 1020


def test_watch_fires_through_a_callback_on_the_network_thread(fdb, path):
    database = fdb.open(path)
    database[b"watched"] = b"1"
    tr = database.create_transaction()
    watch = tr.watch(b"watched")
    tr.commit().wait()
    fired = threading.Event()
    threads = []

    def ready(future: Any) -> None:
        threads.append(threading.current_thread())
        fired.set()

    watch.on_ready(ready)
    assert not fired.is_set()
    database[b"watched"] = b"2"
    assert fired.wait(5)
    assert threads[0] is not threading.current_thread()
    watch.wait()  # fired, no error


def test_destroying_or_cancelling_a_pending_watch_ends_it(fdb, path):
    database = fdb.open(path)
    engine = memory.cluster(path)

    def outstanding() -> int:
        return sum(len(waiting) for waiting in engine._watches.values())

    tr = database.create_transaction()
    watch = tr.watch(b"k")
    tr.commit().wait()
    assert outstanding() == 1
    del watch, tr  # the binding's Future.__del__ destroys it: libfdb_c cancels it
    gc.collect()
    assert outstanding() == 0

    tr = database.create_transaction()
    cancelled = tr.watch(b"k")
    tr.commit().wait()
    cancelled.cancel()
    with pytest.raises(fdb.FDBError) as raised:
        cancelled.wait()
    assert raised.value.code == 1101
    assert outstanding() == 0


def test_database_options_become_defaults_of_its_transactions(fdb, path):
    database = fdb.open(path)
    database.options.set_transaction_retry_limit(0)
    try:
        tr = database.create_transaction()
        with pytest.raises(fdb.FDBError) as raised:
            tr.on_error(fdb.FDBError(1020)).wait()
        assert raised.value.code == 1020  # no retry allowed
    finally:
        database.options.set_transaction_retry_limit(-1)


def test_injected_faults_reach_the_binding(fdb, path):
    database = fdb.open(path)
    memory.cluster(path).faults = memory.Faults(not_committed=1.0)
    tr = database.create_transaction()
    tr[b"k"] = b"v"
    with pytest.raises(fdb.FDBError) as raised:
        tr.commit().wait()
    assert raised.value.code == 1020
    memory.cluster(path).faults = memory.Faults()
    assert database[b"k"] is None


def test_directory_layer_and_fdbqueue_share_one_cluster(fdb, path):
    database = fdb.open(path)
    directory = fdb.directory.create_or_open(database, ("app", "jobs"))
    queue = Queue(directory)
    queue.enqueue_many(database, ["a", "b"])
    assert fdb.directory.exists(database, ("app", "jobs"))
    assert queue.dequeue(database) == "a"
    assert Queue(fdb.directory.open(database, ("app", "jobs"))).peek(database) == "b"


def test_tenants_are_not_served(fdb, path):
    database = fdb.open(path)
    if not hasattr(database, "open_tenant") or fdb.get_api_version() < 710:
        pytest.skip("this binding has no tenants")
    with pytest.raises(Exception):  # noqa: B017 - FDBError on 7.x, None returned on 8.0
        tenant = database.open_tenant(b"tenant")
        if tenant is None:
            raise LookupError("no tenant")
        tenant.create_transaction()


def test_client_status_is_a_future_of_a_json_document_reporting_a_healthy_client(fdb, path):
    """``Database.get_client_status()``: a future whose value is a JSON document with
    ``"Healthy": true`` once the database is reachable (upstream's
    ``GetClientStatusIntegrationTest``), naming the cluster file it was opened with."""
    import json

    database = fdb.open(path)
    if not hasattr(database, "get_client_status"):
        pytest.skip("this fdb binding has no Database.get_client_status (before 7.1)")
    database.create_transaction().get_read_version().wait()
    future = database.get_client_status()
    status = json.loads(future.wait())
    assert status["Healthy"] is True
    assert status["InitializationState"] == "initialized"
    assert status["ConnectionRecord"] == os.path.abspath(path)
    assert status["Coordinators"] == [] and status["Connections"] == []


def test_install_after_the_real_library_was_loaded_is_an_error(tmp_path):
    script = textwrap.dedent(
        """
        import sys, types
        sys.modules["fdb.impl"] = types.SimpleNamespace(_capi=object())
        from fdbqueue import memory
        try:
            memory.install()
        except RuntimeError as error:
            print("refused:", error)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert "refused: fdb.impl already loaded" in done.stdout, done.stdout + done.stderr


def newest_api_version() -> int:
    """The installed binding's header API version: 6.3.25 knows 630, 8.0.0 knows 800."""
    major, minor = importlib.metadata.version("foundationdb").split(".")[:2]
    return int(major) * 100 + int(minor) * 10


@pytest.mark.parametrize("api_version", [630, 710, newest_api_version()])
def test_every_api_version_the_binding_knows_works(tmp_path, api_version):
    if api_version > newest_api_version():
        pytest.skip(f"binding {importlib.metadata.version('foundationdb')} predates it")
    script = textwrap.dedent(
        f"""
        import fdb
        from fdbqueue import Queue, Subspace, memory
        memory.install()
        fdb.api_version({api_version})
        db = fdb.open({str(tmp_path / "c.cluster")!r})
        queue = Queue(Subspace(("q",)))
        queue.enqueue_many(db, [1, 2])
        print(fdb.get_api_version(), queue.dequeue(db), queue.size(db))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.split() == [str(api_version), "1", "1"], done.stdout + done.stderr


def test_install_checks_its_arguments():
    with pytest.raises(TypeError, match="latency"):
        memory.install(latency=0.1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="faults"):
        memory.install(faults=0.5)  # type: ignore[arg-type]
