"""Transaction timeouts as the ``fdb`` binding sees them, on ``memory.install()``.

Each test is one case of upstream's binding test ``test_timeouts``
(apple/foundationdb ``bindings/python/tests/cancellation_timeout_tests.py``), written anew
here with shorter sleeps, with ``test_db_timeouts`` (the database's default timeout): a
timeout is measured from the transaction's creation or last ``reset()`` (not from
``on_error()``), fires retroactively when set late, survives ``on_error()`` (a persistent
option), is cleared by ``reset()``, and once fired survives ``on_error()`` and
``set_timeout(0)``. Upstream's client: ``fdbclient/ReadYourWrites.cpp`` (``setOption``
``TIMEOUT``, ``resetTimeout``, ``onError``), ``fdbclient/NativeAPI.actor.cpp`` (a read at a
version the cluster has not reached fails with 1009, ``future_version``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import installed_fdb

#: A sleep long enough for every timeout below to have fired.
LONG = 0.3


@pytest.fixture
def fdb() -> Any:
    return installed_fdb()


@pytest.fixture
def db(fdb: Any, tmp_path: Any) -> Iterator[Any]:
    yield fdb.open(str(tmp_path / f"{uuid.uuid4().hex}.cluster"))


def code_of(call: Any) -> int | None:
    """The FDBError code ``call()`` raised, or None when it returned."""
    try:
        call()
    except Exception as error:  # the binding's FDBError
        code: int | None = getattr(error, "code", None)
        assert code is not None, error
        return code
    return None


def test_a_timeout_that_ran_out_fails_the_commit(db: Any) -> None:
    tr = db.create_transaction()
    tr.options.set_timeout(10)
    time.sleep(LONG)
    assert code_of(lambda: tr.commit().wait()) == 1031


def test_a_timeout_survives_on_error(fdb: Any, db: Any) -> None:
    tr = db.create_transaction()
    tr.options.set_timeout(100)
    tr.on_error(fdb.FDBError(1007)).wait()  # a persistent option (API 610 on)
    time.sleep(LONG)
    assert code_of(lambda: tr.commit().wait()) == 1031


def test_a_timeout_that_fired_survives_on_error(fdb: Any, db: Any) -> None:
    tr = db.create_transaction()
    tr.options.set_timeout(100)
    time.sleep(LONG)
    assert code_of(lambda: tr.on_error(fdb.FDBError(1007)).wait()) == 1031
    assert code_of(lambda: tr.commit().wait()) == 1031


def test_reset_clears_a_timeout(db: Any) -> None:
    tr = db.create_transaction()
    tr.options.set_timeout(100)
    tr.reset()
    time.sleep(LONG)
    assert code_of(lambda: tr.commit().wait()) is None


def test_reset_clears_a_timeout_that_fired(db: Any) -> None:
    tr = db.create_transaction()
    tr.options.set_timeout(100)
    time.sleep(LONG)
    assert code_of(lambda: tr.commit().wait()) == 1031
    tr.reset()
    assert code_of(lambda: tr.commit().wait()) is None


def test_a_timeout_set_late_fires_retroactively(db: Any) -> None:
    tr = db.create_transaction()
    tr[b"foo"] = b"bar"
    time.sleep(LONG)
    tr.options.set_timeout(10)
    assert code_of(lambda: tr.commit().wait()) == 1031


def test_reset_restarts_the_time_a_timeout_is_measured_from(db: Any) -> None:
    tr = db.create_transaction()
    tr[b"foo"] = b"bar"
    time.sleep(LONG)
    tr.reset()
    tr[b"foo"] = b"bar"
    tr.options.set_timeout(500)
    assert code_of(lambda: tr.commit().wait()) is None


def test_on_error_does_not_restart_the_time_a_timeout_is_measured_from(fdb: Any, db: Any) -> None:
    tr = db.create_transaction()
    tr[b"foo"] = b"bar"
    time.sleep(LONG)
    tr.on_error(fdb.FDBError(1007)).wait()
    tr[b"foo"] = b"bar"
    tr.options.set_timeout(100)
    assert code_of(lambda: tr.commit().wait()) == 1031


def test_a_timeout_can_be_unset(db: Any) -> None:
    tr = db.create_transaction()
    tr[b"foo"] = b"bar"
    tr.options.set_timeout(100)
    tr.options.set_timeout(0)
    time.sleep(LONG)
    assert code_of(lambda: tr.commit().wait()) is None


def test_unsetting_a_timeout_that_fired_does_not_help(db: Any) -> None:
    tr = db.create_transaction()
    tr[b"foo"] = b"bar"
    tr.options.set_timeout(100)
    time.sleep(LONG)
    tr.options.set_timeout(0)
    assert code_of(lambda: tr.commit().wait()) == 1031


def test_a_read_at_a_future_version_fails_1009_and_the_timeout_keeps_running(db: Any) -> None:
    """Upstream's case (11): a read at a version the database has not reached fails with
    1009 (``future_version``), surfacing at the commit that waits for it; the error does not
    restart the timeout, so the next attempt runs into it (1031)."""
    tr = db.create_transaction()
    codes = []
    for _ in range(2):
        tr.options.set_timeout(1500)
        tr.set_read_version(0x7FFFFFFFFFFFFFF0)
        tr[b"foo"]  # issued, never waited on: the commit waits for it
        code = code_of(lambda: tr.commit().wait())
        codes.append(code)
        if code == 1009:
            tr.on_error(tr_error(code)).wait()
    assert codes == [1009, 1031]


def tr_error(code: int) -> Any:
    import fdb

    return fdb.FDBError(code)


# -- the database's default timeout (upstream's test_db_timeouts) -----------------------------


@pytest.fixture
def db_with_timeout(db: Any) -> Any:
    db.options.set_transaction_timeout(150)
    return db


def test_the_database_timeout_applies_to_each_transaction(db_with_timeout: Any) -> None:
    tr = db_with_timeout.create_transaction()
    time.sleep(LONG)
    assert code_of(lambda: tr.commit().wait()) == 1031


def test_the_database_timeout_keeps_running_after_on_error(fdb: Any, db_with_timeout: Any) -> None:
    tr = db_with_timeout.create_transaction()
    tr[b"foo"] = b"bar"
    tr.on_error(fdb.FDBError(1007)).wait()
    time.sleep(LONG)
    tr[b"foo"]
    assert code_of(lambda: tr.commit().wait()) == 1031


def test_a_longer_transaction_timeout_replaces_the_database_one(
    fdb: Any, db_with_timeout: Any
) -> None:
    tr = db_with_timeout.create_transaction()
    tr.options.set_timeout(400)
    time.sleep(0.25)  # past the database's 150 ms, within the transaction's 400
    tr[b"foo"] = b"bar"
    tr.on_error(fdb.FDBError(1007)).wait()
    tr[b"foo"]
    time.sleep(0.25)  # past 400 ms since the start
    assert code_of(lambda: tr.commit().wait()) == 1031


def test_reset_brings_back_the_database_timeout(fdb: Any, db_with_timeout: Any) -> None:
    tr = db_with_timeout.create_transaction()
    tr.options.set_timeout(50)
    tr[b"foo"] = b"bar"
    time.sleep(0.1)
    assert code_of(lambda: tr.commit().wait()) == 1031
    tr.reset()
    tr[b"foo"] = b"bar"
    time.sleep(0.05)
    tr.on_error(fdb.FDBError(1007)).wait()  # within the database's 150 ms
    tr[b"foo"] = b"bar"
    time.sleep(LONG)
    assert code_of(lambda: tr.commit().wait()) == 1031
