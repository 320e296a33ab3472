"""What the in-memory database bills: ``keys_read``, ``bytes_read``, ``keys_written`` and
``bytes_written`` in ``Database.stats()``, counted as FoundationDB's client transaction
metrics count them (``KeysRead``, ``BytesRead``, ``CommittedMutations``,
``CommittedMutationBytes`` in ``fdbclient/NativeAPI.actor.cpp``)."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from helpers import installed_fdb

from fdbqueue import memory

#: ``sizeof(MutationRef)``: what upstream's ``expectedSize()`` counts a mutation besides its
#: two parameters.
MUTATION = 40


def billed(db: memory.Database) -> tuple[int, int, int, int]:
    stats = db.stats()
    return stats["keys_read"], stats["bytes_read"], stats["keys_written"], stats["bytes_written"]


@pytest.fixture
def db() -> memory.Database:
    database = memory.open()
    database[b"a"] = b"12345"
    for index in range(10):
        database[b"k%d" % index] = b"value"  # each pair: 2 + 5 = 7 bytes
    database.reset_stats()
    return database


def test_a_new_database_and_reset_stats_bill_nothing(db):
    assert billed(memory.open()) == (0, 0, 0, 0)
    db[b"x"] = b"y"
    assert db[b"x"] == b"y"
    db.reset_stats()
    assert billed(db) == (0, 0, 0, 0)


# -- reads --------------------------------------------------------------------------------------


def test_a_point_read_counts_one_key_and_its_value_bytes_present_or_absent(db):
    tr = db.create_transaction()
    assert tr[b"a"] == b"12345"
    assert billed(db) == (1, 5, 0, 0)  # upstream getValue: the value's bytes, not the key's
    assert not tr[b"absent"].present()
    assert billed(db) == (2, 5, 0, 0)  # an absent key is a key read of no bytes


def test_a_point_read_answered_by_the_transaction_itself_counts_nothing(db):
    tr = db.create_transaction()
    tr[b"a"].wait()
    tr[b"a"].wait()  # from the values read before (upstream's SnapshotCache)
    tr[b"new"] = b"written"
    assert tr[b"new"] == b"written"  # from its own writes
    tr.clear(b"k1")
    assert not tr[b"k1"].present()
    assert billed(db)[:2] == (1, 5)


def test_a_point_read_of_a_key_with_only_atomic_operations_reads_the_database(db):
    tr = db.create_transaction()
    tr.add(b"a", b"\x01")
    tr[b"a"].wait()
    assert billed(db)[:2] == (1, 5)


def test_snapshot_reads_count_as_other_reads(db):
    tr = db.create_transaction()
    assert tr.snapshot[b"a"] == b"12345"
    assert len(list(tr.snapshot.get_range(b"k", b"l", limit=2))) == 2
    assert billed(db)[:2] == (3, 5 + 2 * 7)


def test_a_range_read_counts_each_pair_returned_key_and_value(db):
    tr = db.create_transaction()
    assert len(list(tr.get_range(b"k", b"l", limit=3))) == 3
    assert billed(db)[:2] == (3, 21)
    assert len(list(tr.get_range(b"k", b"l", limit=4, reverse=True))) == 4
    assert billed(db)[:2] == (7, 49)
    assert list(tr.get_range(b"m", b"n")) == []
    assert billed(db)[:2] == (7, 49)
    assert len(list(tr.get_range(b"k", b"l"))) == 10  # every batch of an unlimited read
    assert billed(db)[:2] == (17, 119)


def test_get_key_counts_nothing_as_upstream_counts_none(db):
    tr = db.create_transaction()
    assert tr.get_key(memory.KeySelector.first_greater_than(b"k3")) == b"k4"
    assert tr.get_key(memory.KeySelector.last_less_than(b"k3")) == b"k2"
    assert billed(db)[:2] == (0, 0)
    assert db.stats()["reads"] == 2


def test_a_range_read_with_key_selectors_counts_only_the_pairs_returned(db):
    tr = db.create_transaction()
    begin = memory.KeySelector.first_greater_than(b"k3")
    end = memory.KeySelector.first_greater_or_equal(b"k6")
    assert [pair.key for pair in tr.get_range(begin, end)] == [b"k4", b"k5"]
    assert billed(db)[:2] == (2, 14)


def test_a_read_that_fails_counts_nothing(db):
    tr = db.create_transaction()
    tr.get_read_version().wait()
    db.advance_time(6)  # the read version is now more than five seconds old: 1007
    with pytest.raises(memory.FDBError) as error:
        tr[b"a"].wait()
    assert error.value.code == 1007
    assert billed(db) == (0, 0, 0, 0)


# -- writes -------------------------------------------------------------------------------------


def committed(db: memory.Database, write: Any) -> tuple[int, int]:
    """What one committed transaction doing ``write`` adds to keys_written, bytes_written."""
    db.reset_stats()
    tr = db.create_transaction()
    write(tr)
    tr.commit().wait()
    return billed(db)[2:]


def test_each_kind_of_mutation_is_counted_at_commit_with_its_bytes(db):
    assert committed(db, lambda tr: tr.set(b"key", b"value")) == (1, MUTATION + 3 + 5)
    # a single-key clear is sent as the clear of [key, key + b"\x00")
    assert committed(db, lambda tr: tr.clear(b"key")) == (1, MUTATION + 3 + 4)
    assert committed(db, lambda tr: tr.clear_range(b"a", b"c")) == (1, MUTATION + 2)
    assert committed(db, lambda tr: tr.add(b"n", struct.pack("<q", 1))) == (1, MUTATION + 9)
    assert committed(db, lambda tr: tr.bit_or(b"n", b"\x01")) == (1, MUTATION + 2)


def test_versionstamped_keys_and_values_are_counted_with_their_offsets(db):
    key = b"vs" + bytes(10) + struct.pack("<I", 2)
    assert committed(db, lambda tr: tr.set_versionstamped_key(key, b"x")) == (1, MUTATION + 17)
    value = bytes(10) + struct.pack("<I", 0)
    expected = (1, MUTATION + 2 + 14)
    assert committed(db, lambda tr: tr.set_versionstamped_value(b"vv", value)) == expected


def test_mutations_are_counted_merged_as_the_client_sends_them(db):
    def write(tr):
        tr[b"a"] = b"1"
        tr[b"a"] = b"22"  # the later set replaces the earlier one
        tr.add(b"n", b"\x01")
        tr.add(b"n", b"\x02")  # repeated adds of one length are one add
        tr.clear(b"k1")
        tr.clear(b"k1\x00")  # touching clears are one clear
        tr.clear_range(b"p", b"r")
        tr[b"q"] = b"v"  # a set inside a cleared range cuts it in two
        tr.set_versionstamped_value(b"s", bytes(14))

    sizes = [
        MUTATION + 1 + 2,  # a = 22
        MUTATION + 1 + 1,  # add n
        MUTATION + 2 + 4,  # clear [k1, k1\x00\x00)
        MUTATION + 1 + 1,  # clear [p, q)
        MUTATION + 2 + 1,  # clear [q\x00, r)
        MUTATION + 1 + 1,  # q = v
        MUTATION + 1 + 14,  # versionstamped value
    ]
    assert committed(db, write) == (len(sizes), sum(sizes))


def test_the_bytes_written_are_the_mutations_part_of_the_approximate_size(db):
    tr = db.create_transaction()
    tr.options.set_next_write_no_write_conflict_range()
    tr[b"a"] = b"22"
    size = tr.get_approximate_size().wait()
    tr.commit().wait()
    assert billed(db)[2:] == (1, size) == (1, MUTATION + 3)


def test_a_transaction_that_writes_nothing_bills_no_write(db):
    assert committed(db, lambda tr: tr[b"a"].wait()) == (0, 0)
    assert committed(db, lambda tr: tr.add_write_conflict_key(b"a")) == (0, 0)


def test_a_conflicting_commit_counts_no_mutation(db):
    tr = db.create_transaction()
    tr[b"a"].wait()
    db[b"a"] = b"other"  # 1 mutation of 40 + 1 + 5 bytes
    tr[b"a"] = b"mine"
    with pytest.raises(memory.FDBError) as error:
        tr.commit().wait()
    assert error.value.code == 1020
    assert billed(db)[2:] == (1, MUTATION + 6)
    tr.on_error(error.value).wait()
    tr[b"a"] = b"22"
    tr.commit().wait()  # the retry counts only its own mutations
    assert billed(db)[2:] == (2, MUTATION + 6 + MUTATION + 3)


def test_a_reset_transaction_counts_the_writes_made_before_the_reset_nowhere(db):
    tr = db.create_transaction()
    tr[b"a"] = b"gone"
    tr.reset()
    tr[b"b"] = b"1"
    tr.commit().wait()
    assert billed(db)[2:] == (1, MUTATION + 2)


def test_a_too_large_commit_counts_no_mutation(db):
    tr = db.create_transaction()
    tr.options.set_size_limit(32)
    tr[b"a"] = b"x" * 64
    with pytest.raises(memory.FDBError) as error:
        tr.commit().wait()
    assert error.value.code == 2101
    assert billed(db)[2:] == (0, 0)


@pytest.mark.parametrize(
    "faults",
    [
        memory.Faults(not_committed=1.0),
        memory.Faults(commit_unknown_result=1.0),
        memory.Faults(timed_out=1.0),
        memory.Faults(recovery=1.0, recovery_seconds=0),
    ],
)
def test_a_commit_whose_success_the_client_never_hears_counts_no_mutation(db, faults):
    db.faults = faults
    for index in range(20):
        tr = db.create_transaction()
        tr[b"x%d" % index] = b"v"
        with pytest.raises(memory.FDBError):
            tr.commit().wait()
    db.faults = memory.Faults()
    db.settle()
    assert billed(db)[2:] == (0, 0)
    if not faults.not_committed:  # some were applied, unknown to their clients
        assert db.stats()["commits"] > 0


# -- the binding over memory.install() ----------------------------------------------------------


def test_the_binding_over_install_is_billed_as_the_engine_is(tmp_path):
    fdb = installed_fdb()
    path = str(tmp_path / f"{uuid.uuid4().hex}.cluster")
    database = fdb.open(path)
    for index in range(10):
        database[b"k%d" % index] = b"value"
    engine = memory.cluster(path)
    assert engine.stats()["keys_written"] == 10
    assert engine.stats()["bytes_written"] == 10 * (MUTATION + 7)
    engine.reset_stats()
    tr = database.create_transaction()
    assert tr[b"k1"] == b"value"
    assert tr[b"absent"] is None or not tr[b"absent"].present()
    assert len(list(tr.snapshot.get_range(b"k", b"l", limit=3))) == 3
    assert len(list(tr.get_range(b"k", b"l"))) == 10
    tr[b"k1"] = b"22"
    tr.clear_range(b"k5", b"k7")
    tr.commit().wait()
    stats = engine.stats()
    assert (stats["keys_read"], stats["bytes_read"]) == (2 + 3 + 10, 5 + 13 * 7)
    expected = (MUTATION + 2 + 2) + (MUTATION + 2 + 2)
    assert (stats["keys_written"], stats["bytes_written"]) == (2, expected)
