"""fdbqueue.memory's simulated latency runs from a read's issue, as with the binding's futures.

Upstream: a read is a request sent when it is issued (``tr.get`` returns a future at once;
``FDBRange.__init__`` in ``bindings/python/fdb/impl.py`` fires its first batch's request, and
``FDBRange.__iter__`` requests each later batch before it hands out the previous batch's last
row); the developer guide's advice is to issue reads together and then wait, so that their
latencies overlap. The read sees the transaction's writes as of its issue: the read-your-writes
layer snapshots its write map when the read starts (``WriteMap::iterator`` takes ``at(ver)``,
``fdbclient/WriteMap.h``; ``RYWImpl::read`` in ``fdbclient/ReadYourWrites.cpp``). A commit
first waits for the reads still running (``RYWImpl::commit`` waits for ``reading``).

The bounds are generous: a read latency of 50 ms, one overlapped pair must take well under two.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
from helpers import installed_fdb

from fdbqueue import memory
from fdbqueue.memory import Future, KeySelector

READ = 0.05
OVERLAPPED = 0.085  # well under 2 * READ
SLACK = 0.005  # timer granularity below a latency


def loaded(latency: memory.Latency, count: int = 10) -> memory.Database:
    db = memory.open()
    for index in range(count):
        db[b"k%02d" % index] = b"v%02d" % index
    db.latency = latency
    return db


def with_version(db: memory.Database) -> memory.Transaction:
    """A transaction whose read version is already fetched (so only read latency remains)."""
    tr = db.create_transaction()
    tr.get_read_version().wait()
    return tr


def elapsed(since: float) -> float:
    return time.monotonic() - since


# -- the direct API ---------------------------------------------------------------------------


def test_two_point_reads_issued_together_cost_one_read_latency():
    db = loaded(memory.Latency(read=READ))
    tr = with_version(db)
    started = time.monotonic()
    first, second = tr.get(b"k01"), tr.get(b"k02")
    assert elapsed(started) < READ / 2  # issuing does not wait
    assert first == b"v01" and second == b"v02"
    assert READ - SLACK <= elapsed(started) < OVERLAPPED


def test_one_point_read_still_costs_its_latency_and_is_ready_only_then():
    db = loaded(memory.Latency(read=READ))
    tr = with_version(db)
    started = time.monotonic()
    value = tr.get(b"k01")
    assert not value.is_ready()
    assert value.wait() == b"v01"
    assert elapsed(started) >= READ - SLACK
    assert value.is_ready()


def test_two_range_reads_issued_together_cost_one_read_latency():
    db = loaded(memory.Latency(read=READ))
    tr = with_version(db)
    started = time.monotonic()
    low, high = tr.get_range(b"k00", b"k05"), tr.get_range(b"k05", b"k10")
    assert elapsed(started) < READ / 2
    assert [kv.key for kv in low] == [b"k%02d" % i for i in range(5)]
    assert len(list(high)) == 5
    assert READ - SLACK <= elapsed(started) < OVERLAPPED


def test_one_range_read_costs_its_latency_from_its_issue():
    db = loaded(memory.Latency(read=READ))
    tr = with_version(db)
    started = time.monotonic()
    result = tr.get_range(b"k00", b"k10")
    assert len(result.to_list()) == 10
    assert elapsed(started) >= READ - SLACK
    # Work done between issue and use hides the latency.
    result = tr.get_range(b"k00", b"k10")
    time.sleep(READ)
    again = time.monotonic()
    assert len(list(result)) == 10
    assert elapsed(again) < READ / 2


def test_point_read_range_read_and_get_key_overlap():
    db = loaded(memory.Latency(read=READ))
    tr = with_version(db)
    started = time.monotonic()
    value = tr.get(b"k03")
    rows = tr.get_range(b"k05", b"k08")
    key = tr.get_key(KeySelector.first_greater_than(b"k08"))
    assert (value, len(list(rows)), key) == (b"v03", 3, b"k09")
    assert READ - SLACK <= elapsed(started) < OVERLAPPED


def test_first_reads_share_the_read_version_fetch_and_overlap():
    db = loaded(memory.Latency(grv=0.03, read=READ))
    tr = db.create_transaction()
    started = time.monotonic()
    first, second = tr.get(b"k01"), tr.get(b"k02")
    assert first == b"v01" and second == b"v02"
    assert 0.03 + READ - SLACK <= elapsed(started) < 0.03 + OVERLAPPED
    assert db.stats()["read_versions"] == 1


def test_later_batches_are_requested_with_the_previous_batchs_last_row():
    # Values of ~1,000 bytes: the iterator mode's first batch (4,096 bytes) holds 4 rows.
    db = memory.open()
    for index in range(12):
        db[b"r%02d" % index] = b"x" * 1000
    db.latency = memory.Latency(read=READ)
    tr = with_version(db)
    rows = iter(tr.get_range(b"r", b"s"))
    started = time.monotonic()
    first_batch = [next(rows) for _ in range(4)]  # the 4th row's hand-out requests batch 2
    assert READ - SLACK <= elapsed(started) < OVERLAPPED
    time.sleep(READ)  # the caller works on the last row while batch 2 is read
    resumed = time.monotonic()
    assert next(rows).key == b"r04"
    assert elapsed(resumed) < READ / 2
    assert [kv.key for kv in first_batch] == [b"r00", b"r01", b"r02", b"r03"]


def test_stats_count_each_read_once():
    db = loaded(memory.Latency(read=READ))
    db.reset_stats()
    tr = db.create_transaction()
    values = [tr.get(b"k%02d" % i) for i in range(3)]
    result = tr.get_range(b"k00", b"k10")
    assert [bytes(v) for v in values] == [b"v00", b"v01", b"v02"]
    assert len(list(result)) == 10
    assert tr.get(b"k01") == b"v01"  # answered from the transaction's cache of reads
    stats = db.stats()
    assert (stats["reads"], stats["read_versions"]) == (4, 1)


def test_a_read_sees_the_writes_made_before_its_issue_not_after():
    db = loaded(memory.Latency(read=READ))
    tr = with_version(db)
    before = tr.get(b"k01")
    before_range = tr.get_range(b"k00", b"k03")
    tr[b"k01"] = b"new"
    tr[b"k015"] = b"inserted"
    after = tr.get(b"k01")
    after_range = tr.get_range(b"k00", b"k03")
    assert before == b"v01"
    assert [(kv.key, kv.value) for kv in before_range] == [
        (b"k00", b"v00"),
        (b"k01", b"v01"),
        (b"k02", b"v02"),
    ]
    assert after == b"new"
    assert [kv.key for kv in after_range] == [b"k00", b"k01", b"k015", b"k02"]


def test_a_commit_waits_for_the_reads_still_running():
    db = loaded(memory.Latency(read=READ))
    tr = with_version(db)
    started = time.monotonic()
    tr.get(b"k01")  # never waited on
    tr.commit().wait()  # read-only: no commit latency, but the read's
    assert elapsed(started) >= READ - SLACK


def test_a_read_error_comes_from_its_future_after_its_latency():
    """As the binding's: the call returns a future at once; waiting on it raises the error
    once the read's latency has run."""
    db = loaded(memory.Latency(read=READ))
    tr = with_version(db)
    db.advance_time(6)
    started = time.monotonic()
    future = tr.get(b"k01")
    assert elapsed(started) < READ / 2  # issued, not waited for
    assert not future.is_ready()
    with pytest.raises(memory.FDBError) as raised:
        future.wait()
    assert raised.value.code == 1007
    assert elapsed(started) >= READ - SLACK


def test_a_range_reads_error_is_raised_on_iteration_after_its_latency():
    """As the binding's ``FDBRange``: ``get_range`` returns at once; iterating raises the
    first batch's error (1007 here) once the read's latency has run."""
    db = loaded(memory.Latency(read=READ))
    tr = with_version(db)
    db.advance_time(6)
    started = time.monotonic()
    result = tr.get_range(b"k", b"l")
    assert elapsed(started) < READ / 2  # issued, not waited for
    with pytest.raises(memory.FDBError) as raised:
        list(result)
    assert raised.value.code == 1007
    assert elapsed(started) >= READ - SLACK


@pytest.mark.parametrize("read", ["get", "get_key"])
def test_a_read_at_a_version_the_database_has_not_reached_fails_with_1009(read):
    db = loaded(memory.Latency())
    tr = db.create_transaction()
    tr.set_read_version(0x7FFFFFFFFFFFFFF0)
    started = time.monotonic()
    selector = memory.KeySelector.first_greater_or_equal(b"k")
    future = tr.get(b"k01") if read == "get" else tr.get_key(selector)
    with pytest.raises(memory.FDBError) as raised:
        future.wait()
    assert raised.value.code == 1009
    assert elapsed(started) >= 0.9  # a storage server waits a second for the version first
    with pytest.raises(memory.FDBError) as committed:
        tr.commit().wait()  # the commit waits for the reads and reports the failure
    assert committed.value.code == 1009


def test_on_ready_and_wait_for_any_fire_when_the_latency_has_run():
    db = loaded(memory.Latency(read=READ))
    tr = with_version(db)
    fired = threading.Event()
    fired_at: list[float] = []
    started = time.monotonic()
    value = tr.get(b"k01")
    value.on_ready(lambda _future: (fired_at.append(time.monotonic()), fired.set()))
    assert not fired.is_set()
    assert fired.wait(2)
    assert fired_at[0] - started >= READ - SLACK
    slow, fast = tr.get(b"k02"), Future.completed(1)
    assert Future.wait_for_any(slow, fast) == 1


# -- the fdb binding over memory.install() ------------------------------------------------------


@pytest.fixture
def fdb(tmp_path: Any) -> Any:
    return installed_fdb()


@pytest.fixture
def slow_database(fdb: Any, tmp_path: Any) -> Any:
    path = str(tmp_path / f"{uuid.uuid4().hex}.cluster")
    database = fdb.open(path)
    for index in range(10):
        database[b"k%02d" % index] = b"v%02d" % index
    memory.cluster(path).latency = memory.Latency(read=READ)
    return database


def test_binding_reads_issued_together_overlap(slow_database):
    tr = slow_database.create_transaction()
    tr.get_read_version().wait()
    started = time.monotonic()
    first, second = tr.get(b"k01"), tr.get(b"k02")
    low, high = tr.get_range(b"k00", b"k05"), tr.get_range(b"k05", b"k10")
    assert elapsed(started) < READ / 2
    assert first == b"v01" and second == b"v02"
    assert len(list(low)) == 5 and len(list(high)) == 5
    assert READ - SLACK <= elapsed(started) < OVERLAPPED


def test_binding_future_is_ready_and_its_callback_fires_after_the_latency(slow_database):
    tr = slow_database.create_transaction()
    tr.get_read_version().wait()
    fired = threading.Event()
    fired_at: list[float] = []
    started = time.monotonic()
    value = tr.get(b"k01")
    assert not value.is_ready()
    value.on_ready(lambda _future: (fired_at.append(time.monotonic()), fired.set()))
    assert fired.wait(2)
    assert fired_at[0] - started >= READ - SLACK
    assert value.is_ready() and value == b"v01"
