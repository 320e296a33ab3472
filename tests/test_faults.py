"""Fault injection in the in-memory database: memory.Faults."""

from __future__ import annotations

import os

import pytest

from fdbqueue import memory
from fdbqueue._transactions.transactional import run_in_retry_loop


def commit_one(db, key, value=b"v"):
    tr = db.create_transaction()
    tr[key] = value
    try:
        tr.commit().wait()
        return None
    except memory.FDBError as error:
        return error.code


@pytest.mark.parametrize(
    "arguments",
    [
        {"not_committed": -0.1},
        {"commit_unknown_result": 1.5},
        {"transaction_too_old": "often"},
        {"not_committed": True},
        {"not_committed": 0.6, "commit_unknown_result": 0.6},
    ],
)
def test_bad_probabilities_are_refused(arguments):
    with pytest.raises(ValueError):
        memory.Faults(**arguments)


def test_open_and_the_setter_accept_only_faults():
    with pytest.raises(TypeError):
        memory.open(faults={"not_committed": 0.1})
    db = memory.open()
    with pytest.raises(TypeError):
        db.faults = None
    assert db.faults == memory.Faults()


@pytest.mark.parametrize(
    ("field", "code"), [("not_committed", 1020), ("transaction_too_old", 1007)]
)
def test_a_certain_fault_fails_every_writing_commit_and_applies_nothing(field, code):
    db = memory.open(faults=memory.Faults(**{field: 1.0}))
    assert [commit_one(db, b"k%d" % n) for n in range(5)] == [code] * 5
    db.faults = memory.Faults()
    assert list(db.get_range(b"", b"\xff")) == []
    reader = db.create_transaction()
    reader.get(b"k0").wait()
    db.faults = memory.Faults(**{field: 1.0})
    reader.commit().wait()  # a read-only commit never fails
    stats = db.stats()
    assert stats[f"injected_{field}"] == 5
    assert stats["conflicts"] == stats["too_old"] == 0  # only genuine ones are counted there


def test_unknown_results_are_applied_about_half_the_time_and_counted():
    db = memory.open(faults=memory.Faults(commit_unknown_result=1.0), seed=7)
    codes = [commit_one(db, b"k%03d" % n) for n in range(200)]
    assert codes == [1021] * 200
    db.faults = memory.Faults()
    present = len(list(db.get_range(b"", b"\xff")))
    assert 60 <= present <= 140
    stats = db.stats()
    assert stats["injected_commit_unknown_result"] == 200
    assert stats["injected_commit_unknown_result_applied"] == present


def test_an_applied_unknown_commit_fires_other_watches_and_fails_its_own():
    db = memory.open()
    watch = db.get_and_watch(b"k")[1]
    db.faults = memory.Faults(commit_unknown_result=1.0)
    for _ in range(50):  # until one attempt is applied
        tr = db.create_transaction()
        tr[b"k"] = b"new"
        own = tr.watch(b"other")
        with pytest.raises(memory.FDBError):
            tr.commit().wait()
        with pytest.raises(memory.FDBError) as raised:
            own.wait()
        assert raised.value.code == 1021
        if db.stats()["injected_commit_unknown_result_applied"]:
            break
    watch.wait()  # fired: the value changed


def test_the_same_seed_gives_the_same_faults():
    def outcomes(seed):
        faults = memory.Faults(
            not_committed=0.2, commit_unknown_result=0.2, transaction_too_old=0.1
        )
        db = memory.open(faults=faults, seed=seed)
        codes = [commit_one(db, b"k%03d" % n) for n in range(100)]
        db.faults = memory.Faults()
        return codes, [kv.key for kv in db.get_range(b"", b"\xff")]

    assert outcomes(3) == outcomes(3)
    assert outcomes(3) != outcomes(4)


def test_a_retry_loop_survives_faults_but_a_plain_body_can_write_twice():
    """The hazard fdbqueue's receipts remove: a retried 'append' after 1021 writes twice."""
    db = memory.open(faults=memory.Faults(commit_unknown_result=0.5), seed=1)

    def append(tr):
        tr[b"log/" + os.urandom(8)] = b"entry"

    calls = 100
    for _ in range(calls):
        run_in_retry_loop(db, append)
    db.faults = memory.Faults()
    written = len(list(db.get_range_startswith(b"log/")))
    assert written > calls  # some bodies committed, were reported unknown, and ran again
    assert db.stats()["retries"] >= db.stats()["injected_commit_unknown_result"]
