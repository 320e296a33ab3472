"""fdbqueue.transactional: fdb.transactional's contract, on the in-memory backend too."""

from __future__ import annotations

import threading

import pytest
from helpers import raises_fdb_error

import fdbqueue
from fdbqueue import Subspace, memory, transactional


def test_database_gets_its_own_committed_transaction(db, subspace):
    @transactional
    def write(tr, value):
        tr[subspace.pack(("k",))] = value

    write(db, b"v")

    @transactional
    def read(tr):
        return tr[subspace.pack(("k",))]

    assert read(db) == b"v"


def test_transaction_is_used_as_is_and_not_committed(db, subspace):
    @transactional
    def write(tr):
        tr[subspace.pack(("k",))] = b"v"

    tr = db.create_transaction()
    write(tr)
    assert db.create_transaction().get(subspace.pack(("k",))).wait() == None  # noqa: E711
    tr.commit().wait()
    assert db.create_transaction().get(subspace.pack(("k",))).wait() == b"v"


def test_named_parameter_and_keyword_passing(db, subspace):
    @transactional(parameter="txn")
    def write(key, txn=None):
        txn[key] = b"x"
        return "done"

    assert write(subspace.pack(("a",)), txn=db) == "done"
    assert write(subspace.pack(("b",)), db) == "done"

    class Store:
        @transactional
        def put(self, tr, key):
            tr[key] = b"y"

    Store().put(db, subspace.pack(("c",)))
    Store().put(tr=db, key=subspace.pack(("d",)))
    keys = [kv.key for kv in db.create_transaction().get_range_startswith(subspace.key())]
    assert keys == [subspace.pack((name,)) for name in "abcd"]


def increment_twice_with_a_conflict(db, counter):
    """Two increments of ``counter``; the first attempt of the first one conflicts with the
    second. Returns how many times the body ran."""
    runs = []
    started = threading.Event()
    proceed = threading.Event()

    @transactional
    def increment(tr):
        runs.append(1)
        value = tr[counter]
        current = int(bytes(value)) if value.present() else 0
        if len(runs) == 1:
            started.set()
            proceed.wait(5)
        tr[counter] = str(current + 1).encode()

    worker = threading.Thread(target=increment, args=(db,))
    worker.start()
    assert started.wait(10)
    increment(db)  # commits first; the worker's first attempt must conflict
    proceed.set()
    worker.join(10)
    assert not worker.is_alive()
    return len(runs)


def test_retries_the_body_after_a_conflict(db, subspace):
    counter = subspace.pack(("counter",))
    assert increment_twice_with_a_conflict(db, counter) == 3
    assert db.create_transaction().get(counter).wait() == b"2"


@pytest.mark.memory_only("counts conflicts with db.stats()")
def test_a_conflict_is_retried_once(db, subspace):
    counter = subspace.pack(("counter",))
    assert increment_twice_with_a_conflict(db, counter) == 3
    assert db.create_transaction().get(counter).wait() == b"2"
    assert db.stats()["conflicts"] == 1


def test_other_exceptions_propagate_and_nothing_commits(db, subspace):
    @transactional
    def fail(tr):
        tr[subspace.pack(("k",))] = b"v"
        raise KeyError("boom")

    with pytest.raises(KeyError):
        fail(db)
    assert list(db.create_transaction().get_range_startswith(subspace.key())) == []


def test_non_retryable_fdb_errors_propagate(db):
    @transactional
    def write_system_key(tr):
        tr[b"\xff/forbidden"] = b"x"  # refused: nothing is written

    with raises_fdb_error(2004):
        write_system_key(db)


def test_generators_are_refused():
    with pytest.raises(ValueError, match="generators"):

        @transactional
        def generate(tr):
            yield tr


def test_missing_parameter_is_refused_at_decoration():
    with pytest.raises(TypeError, match="no positional parameter named 'tr'"):

        @transactional
        def no_tr(db):
            return db


@pytest.mark.parametrize("wrong", [None, 1, "tr", object()])
def test_wrong_context_type_raises_type_error(wrong):
    @transactional
    def body(tr):
        return tr

    with pytest.raises(TypeError, match="Database, Tenant or Transaction"):
        body(wrong)


def test_the_context_kinds_remembered_by_type_never_let_a_read_only_view_write() -> None:
    """runs_own_transaction and check_writable remember the types they found (a Database's,
    a writable Transaction's): whatever was seen before, a snapshot view and an object of
    another type are still refused, each with its own message, and nothing is written."""
    from fdbqueue._transactions.transactional import check_writable, runs_own_transaction

    db = memory.open()
    queue = fdbqueue.Queue(Subspace(("kinds",)))
    for _ in range(2):  # the second time, every type is known
        assert runs_own_transaction(db, "enqueue") is True
        tr = db.create_transaction()
        assert runs_own_transaction(tr, "enqueue") is False
        check_writable(tr, "enqueue")
        check_writable(db, "enqueue")
        queue.enqueue(tr, "x")
        tr.commit().wait()
        with pytest.raises(TypeError, match="read-only"):
            runs_own_transaction(db.create_transaction().snapshot, "enqueue")
        with pytest.raises(TypeError, match="read-only"):
            queue.dequeue(db.create_transaction().snapshot)
        with pytest.raises(TypeError, match="must be a Database, Tenant or Transaction"):
            runs_own_transaction(object(), "enqueue")
        with pytest.raises(TypeError, match="must be a Database, Tenant or Transaction"):
            check_writable(3, "enqueue")
    assert queue.size(db) == 2
