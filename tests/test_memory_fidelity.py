"""fdbqueue.memory follows upstream FoundationDB's engine rules (the memory audit's M1, M3-M6
and L1-L23 items); each test states the upstream source of the rule it checks."""

from __future__ import annotations

import gc
import struct
import time

import pytest

from fdbqueue import memory
from fdbqueue.memory import FDBError, KeySelector

ONE = struct.pack("<q", 1)


def code_of(call) -> int:
    with pytest.raises(FDBError) as raised:
        call()
    return raised.value.code


def wait_ready(future, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not future.is_ready() and time.monotonic() < deadline:
        time.sleep(0.005)
    return future.is_ready()


def conflicting_write(db, key: bytes, value: bytes = b"other") -> None:
    other = db.create_transaction()
    other[key] = value
    other.commit().wait()


def stamped_key(prefix: bytes, suffix: bytes = b"") -> bytes:
    """A versionstamped key: prefix, 10 placeholder bytes, suffix, the 4-byte offset."""
    return prefix + b"\x00" * 10 + suffix + struct.pack("<I", len(prefix))


# -- M1: a committed transaction is spent (RYW commitStarted, checkUsedDuringCommit) ---------


def test_after_commit_every_operation_raises_2017_and_a_second_commit_applies_nothing():
    db = memory.open()
    tr = db.create_transaction()
    tr.add(b"n", ONE)
    stamp = tr.get_versionstamp()
    tr.commit().wait()
    assert len(stamp.wait().value) == 10
    assert code_of(lambda: tr.get(b"n").wait()) == 2017
    assert code_of(lambda: tr.get_range(b"", b"\xff").to_list()) == 2017
    assert code_of(lambda: tr.get_key(KeySelector.first_greater_or_equal(b"")).wait()) == 2017
    assert code_of(lambda: tr.get_versionstamp().wait()) == 2017
    assert code_of(lambda: tr.watch(b"n").wait()) == 2017
    tr.add(b"n", ONE)  # a write does not raise: its 2017 comes with the commit
    tr[b"x"] = b"1"
    assert code_of(lambda: tr.commit().wait()) == 2017
    assert db.get(b"n") == ONE
    assert db.get(b"x") is None
    tr.reset()
    assert tr.get(b"n") == ONE


def test_after_a_failed_commit_the_transaction_is_spent_until_on_error():
    db = memory.open()
    tr = db.create_transaction()
    tr.get(b"k").wait()
    tr[b"k"] = b"mine"
    conflicting_write(db, b"k")
    with pytest.raises(FDBError) as raised:
        tr.commit().wait()
    assert raised.value.code == 1020
    tr.on_error(raised.value).wait()
    assert tr.get(b"k") == b"other"  # usable again after on_error


def test_using_a_spent_transaction_makes_on_error_raise_2017_until_reset():
    db = memory.open()
    tr = db.create_transaction()
    tr.get(b"k").wait()
    tr[b"k"] = b"mine"
    conflicting_write(db, b"k")
    assert code_of(lambda: tr.commit().wait()) == 1020
    assert code_of(lambda: tr.get(b"k").wait()) == 2017  # spent, though the commit failed
    assert code_of(lambda: tr.on_error(FDBError(1020)).wait()) == 2017  # RYW resetPromise
    tr.reset()
    assert tr.get(b"k") == b"other"


def test_on_error_clears_the_committed_state():
    db = memory.open()
    tr = db.create_transaction()
    tr[b"k"] = b"v"
    tr.commit().wait()
    tr.on_error(FDBError(1020)).wait()
    assert tr.get(b"k") == b"v"


# -- M3: watches (RYWImpl::watch, triggerWatches, Transaction::watch) ------------------------


def test_a_watch_fires_at_once_when_its_own_transaction_changes_the_key():
    db = memory.open()
    db[b"a"] = b"1"
    tr = db.create_transaction()
    same, changed, cleared, atomic = (tr.watch(k) for k in (b"a", b"b", b"a", b"c"))
    tr[b"a"] = b"1"  # the value the watch read: no change
    assert not same.is_ready()
    tr[b"b"] = b"new"
    assert changed.is_ready() and changed.wait() is None
    tr.clear_range(b"a", b"a\x00")
    assert cleared.is_ready() and same.is_ready()
    tr.add(b"c", ONE)
    assert atomic.is_ready()
    tr.cancel()
    for watch in (same, changed, cleared, atomic):
        assert watch.wait() is None  # fired successfully before the cancel


def test_a_watch_of_a_key_the_transaction_wrote_adds_no_read_conflict():
    db = memory.open()
    tr = db.create_transaction()
    tr.get(b"elsewhere").wait()  # a read version
    tr[b"k"] = b"mine"
    tr.watch(b"k")
    conflicting_write(db, b"k")
    tr.commit().wait()  # no conflict on k
    assert db.get(b"k") == b"mine"


def test_watch_of_a_key_over_10000_bytes_fails_with_2102():
    tr = memory.open().create_transaction()
    watch = tr.watch(b"x" * 10_001)
    assert watch.is_ready()
    assert code_of(watch.wait) == 2102


def test_the_watch_limit_applies_when_the_watch_is_made_counting_uncommitted_ones():
    db = memory.open()
    tr = db.create_transaction()
    watches = [tr.watch(b"k%d" % i) for i in range(10_000)]
    refused = tr.watch(b"one too many")
    assert refused.is_ready()
    assert code_of(refused.wait) == 1032
    tr.cancel()
    assert all(w.is_ready() for w in watches)
    again = db.create_transaction().watch(b"k")  # the cancelled ones no longer count
    assert not again.is_ready()


def test_destroying_an_uncommitted_transaction_fails_its_watches_with_1025():
    db = memory.open()
    tr = db.create_transaction()
    watch = tr.watch(b"k")
    tr.destroy()
    assert wait_ready(watch)
    assert code_of(watch.wait) == 1025


def test_garbage_collecting_an_uncommitted_transaction_fails_its_watches_with_1025():
    db = memory.open()
    tr = db.create_transaction()
    watch = tr.watch(b"k")
    del tr
    gc.collect()
    assert wait_ready(watch)
    assert code_of(watch.wait) == 1025


def test_destroying_a_committed_transaction_keeps_its_watches():
    db = memory.open()
    tr = db.create_transaction()
    watch = tr.watch(b"k")
    tr.commit().wait()
    tr.destroy()
    assert not wait_ready(watch, 0.05)
    db[b"k"] = b"v"
    assert wait_ready(watch)
    assert watch.wait() is None


# -- M4: versionstamped keys (RYW atomicOp, getVersionstampKeyRange, commit proxy) -----------


def test_a_versionstamped_key_conflicts_only_on_its_final_key():
    db = memory.open()
    reader = db.create_transaction()
    assert reader.get(b"log/" + b"\x00" * 10) == None  # noqa: E711 -- in the old, wide span
    reader[b"w"] = b"1"
    writer = db.create_transaction()
    writer.set_versionstamped_key(stamped_key(b"log/"), b"entry")
    writer.commit().wait()
    reader.commit().wait()  # the final key is not what the reader read


def test_a_range_reader_of_the_final_key_conflicts():
    db = memory.open()
    reader = db.create_transaction()
    assert reader.get_range(b"log/", b"log0").to_list() == []
    reader[b"w"] = b"1"
    writer = db.create_transaction()
    writer.set_versionstamped_key(stamped_key(b"log/"), b"entry")
    writer.commit().wait()
    assert code_of(lambda: reader.commit().wait()) == 1020


def test_older_versionstamped_keys_stay_readable_and_1036_needs_the_read_to_get_there():
    db = memory.open()
    first = db.create_transaction()
    first.set_versionstamped_key(stamped_key(b"log/"), b"old")
    stamp = first.get_versionstamp()
    first.commit().wait()
    old_key = b"log/" + stamp.wait().value
    tr = db.create_transaction()
    tr.get_read_version().wait()
    tr.set_versionstamped_key(stamped_key(b"log/"), b"new")
    assert tr[old_key] == b"old"  # below (read version + 1, 0): readable
    [only] = tr.get_range(b"log/", b"log0", limit=1).to_list()  # stops before the pending key
    assert (only.key, only.value) == (old_key, b"old")
    assert code_of(lambda: tr.get_range(b"log/", b"log0").to_list()) == 1036
    after_old = KeySelector.first_greater_than(old_key)
    assert code_of(lambda: tr.get_key(after_old).wait()) == 1036
    assert tr.get_key(KeySelector.first_greater_or_equal(b"log/")) == old_key


def test_without_a_read_version_every_stamp_of_the_key_is_unreadable():
    db = memory.open()
    db[b"log/" + b"\x00" * 10] = b"zero"
    tr = db.create_transaction()
    tr.set_versionstamped_key(stamped_key(b"log/"), b"new")
    assert code_of(lambda: tr.get(b"log/" + b"\x00" * 10).wait()) == 1036


# -- M5: add_read_conflict_* skips what the transaction wrote (updateConflictMap) -------------


def test_add_read_conflict_key_on_a_key_the_transaction_wrote_adds_nothing():
    db = memory.open()
    tr = db.create_transaction()
    tr.get(b"elsewhere").wait()
    tr[b"k"] = b"mine"
    tr.add_read_conflict_key(b"k")
    tr.add_read_conflict_range(b"k", b"k\x00")
    conflicting_write(db, b"k")
    tr.commit().wait()


def test_add_read_conflict_range_still_covers_keys_written_only_by_atomic_operations():
    db = memory.open()
    tr = db.create_transaction()
    tr.get(b"elsewhere").wait()
    tr.add(b"k", ONE)
    tr.add_read_conflict_range(b"j", b"l")
    conflicting_write(db, b"k")
    assert code_of(lambda: tr.commit().wait()) == 1020


# -- M6: lazy range reads (FDBRange, validate_and_update_parameters) -------------------------


def fill(db, count: int, value: bytes = b"v" * 100) -> None:
    tr = db.create_transaction()
    for index in range(count):
        tr[b"r%05d" % index] = value
    tr.commit().wait()


def test_an_abandoned_range_iteration_conflicts_only_on_the_batches_fetched():
    db = memory.open()
    fill(db, 2000)
    tr = db.create_transaction()
    for index, _kv in enumerate(tr.get_range(b"r", b"s")):
        if index == 5:
            break
    tr[b"w"] = b"1"
    conflicting_write(db, b"r01500")
    tr.commit().wait()


def test_range_batches_are_fetched_as_the_iteration_goes_and_grow():
    db = memory.open()
    fill(db, 2000)
    tr = db.create_transaction()
    db.reset_stats()
    result = tr.get_range(b"r", b"s")
    assert db.stats()["reads"] == 1  # the first batch, about 4 KB
    iterator = iter(result)
    rows = [next(iterator) for _ in range(40)]
    assert db.stats()["reads"] == 2
    assert [kv.key for kv in rows] == [b"r%05d" % i for i in range(40)]
    assert len(list(iterator)) == 1960
    assert 8 <= db.stats()["reads"] <= 20  # growing batches, not one per 4 KB


def test_a_range_result_can_be_iterated_twice_and_to_list_reads_in_big_batches():
    db = memory.open()
    fill(db, 300)
    tr = db.create_transaction()
    result = tr.get_range(b"r", b"s", limit=250)
    expected = [b"r%05d" % i for i in range(250)]
    assert [kv.key for kv in result] == [kv.key for kv in result] == expected
    db.reset_stats()
    assert len(result.to_list()) == 250
    assert db.stats()["reads"] == 1  # exact: the rest of the limit in one batch
    assert [kv.key for kv in tr.get_range(b"r", b"s", reverse=True, limit=3)] == [
        b"r00299",
        b"r00298",
        b"r00297",
    ]


def test_a_read_error_still_surfaces_where_get_range_is_iterated():
    db = memory.open()
    tr = db.create_transaction()
    tr.get(b"k").wait()
    db.advance_time(6)
    result = tr.get_range(b"a", b"b")  # the call returns, as the binding's FDBRange
    assert code_of(lambda: list(result)) == 1007


# -- L1-L23 -----------------------------------------------------------------------------


def test_l1_an_inverted_conflict_range_raises_2005_at_once():
    tr = memory.open().create_transaction()
    assert code_of(lambda: tr.add_read_conflict_range(b"b", b"a")) == 2005
    assert code_of(lambda: tr.add_write_conflict_range(b"b", b"a")) == 2005


def test_l2_a_conflict_range_into_system_keys_defers_2004_to_the_commit():
    tr = memory.open().create_transaction()
    tr.add_read_conflict_range(b"a", b"\xff\x01")
    tr.add_write_conflict_range(b"a", b"\xff")  # up to \xff itself is allowed
    assert code_of(lambda: tr.commit().wait()) == 2004
    tr = memory.open().create_transaction()
    tr.add_write_conflict_range(b"\xff", b"\xff\x01")
    assert code_of(lambda: tr.commit().wait()) == 2004


def test_l3_clearing_a_key_over_10000_bytes_is_a_no_op():
    db = memory.open()
    tr = db.create_transaction()
    tr.clear(b"x" * 10_001)
    tr[b"k"] = b"v"
    tr.commit().wait()
    assert db.get(b"k") == b"v"


def test_l4_system_keys_may_be_up_to_30000_bytes():
    db = memory.open()
    tr = db.create_transaction()
    tr.options.set_access_system_keys()
    tr[b"\xff" + b"x" * 29_999] = b"v"
    tr.commit().wait()
    tr = db.create_transaction()
    tr.options.set_access_system_keys()
    tr[b"\xff" + b"x" * 30_000] = b"v"
    assert code_of(lambda: tr.commit().wait()) == 2102


def test_l5_versionstamped_size_limits_count_the_4_byte_offset():
    tr = memory.open().create_transaction()
    tr.set_versionstamped_value(b"k", b"\x00" * 99_997 + struct.pack("<I", 0))
    assert code_of(lambda: tr.commit().wait()) == 2103
    tr = memory.open().create_transaction()
    tr.set_versionstamped_key(b"k" * 9_987 + b"\x00" * 10 + struct.pack("<I", 9_987), b"v")
    assert code_of(lambda: tr.commit().wait()) == 2102


def test_l6_setting_the_read_version_twice_defers_2010():
    tr = memory.open().create_transaction()
    version = tr.get_read_version().wait()
    tr.set_read_version(version - 1)  # does not raise
    assert code_of(lambda: tr.get(b"k").wait()) == 2010


def test_l8_an_on_error_that_raises_cancels_the_transaction():
    tr = memory.open().create_transaction()
    assert code_of(lambda: tr.on_error(FDBError(2004)).wait()) == 2004
    assert code_of(lambda: tr.get(b"k").wait()) == 1025
    tr.reset()
    assert tr.get(b"k") == None  # noqa: E711


def test_l9_system_key_access_does_not_survive_on_error():
    db = memory.open()
    tr = db.create_transaction()
    tr.options.set_access_system_keys()
    tr.options.set_retry_limit(5)
    tr.get(b"\xff/x").wait()
    tr.on_error(FDBError(1020)).wait()
    assert code_of(lambda: tr.get(b"\xff/x").wait()) == 2004


def test_l10_once_timed_out_on_error_raises_1031_whatever_the_error():
    tr = memory.open().create_transaction()
    tr.options.set_timeout(1)
    time.sleep(0.01)
    assert code_of(lambda: tr.on_error(FDBError(2004)).wait()) == 1031


@pytest.mark.parametrize("code", [1038, 1042, 1051, 1078, 1021])
def test_l11_on_error_retries_the_other_retryable_codes(code):
    tr = memory.open().create_transaction()
    tr.options.set_max_retry_delay(1)
    tr.on_error(FDBError(code)).wait()
    assert memory.is_retryable(code)


def test_l12_the_retry_delay_after_1007_and_1009_is_a_fixed_10_ms():
    tr = memory.open(seed=3).create_transaction()
    for code in (1007, 1009) * 4:
        started = time.perf_counter()
        tr.on_error(FDBError(code)).wait()
        assert 0.009 <= time.perf_counter() - started < 0.2
    tr.options.set_max_retry_delay(2)
    started = time.perf_counter()
    tr.on_error(FDBError(1007)).wait()
    assert time.perf_counter() - started < 0.009


def test_l14_the_versionstamp_of_a_failed_commit_fails_with_2020():
    db = memory.open()
    tr = db.create_transaction()
    tr.get(b"k").wait()
    tr[b"k"] = b"mine"
    stamp = tr.get_versionstamp()
    conflicting_write(db, b"k")
    assert code_of(lambda: tr.commit().wait()) == 1020
    assert code_of(stamp.wait) == 2020


def test_l15_a_key_read_before_is_answered_from_the_cache_without_1007():
    db = memory.open()
    db[b"k"] = b"v"
    tr = db.create_transaction()
    assert tr[b"k"] == b"v"
    assert tr.snapshot[b"absent"] == None  # noqa: E711
    db.advance_time(6)
    assert tr[b"k"] == b"v"
    assert tr[b"absent"] == None  # noqa: E711
    assert code_of(lambda: tr.get(b"other").wait()) == 1007


def test_l16_the_metadata_version_key_is_readable_without_system_access():
    tr = memory.open().create_transaction()
    assert tr[b"\xff/metadataVersion"] == None  # noqa: E711
    tr.add_read_conflict_key(b"\xff/metadataVersion")
    tr.commit().wait()


def test_l17_get_key_with_a_reference_past_the_readable_keys_raises_2004():
    tr = memory.open().create_transaction()
    past = KeySelector.first_greater_or_equal(b"\xff\x01")
    assert code_of(lambda: tr.get_key(past).wait()) == 2004
    assert tr.get_key(KeySelector.last_less_than(b"\xff")) == b""


def test_l18_get_read_version_reports_a_deferred_write_error():
    tr = memory.open().create_transaction()
    tr[b"\xff/x"] = b"v"
    assert code_of(lambda: tr.get_read_version().wait()) == 2004


def test_l20_writes_never_raise_even_on_a_cancelled_or_timed_out_transaction():
    tr = memory.open().create_transaction()
    tr.cancel()
    tr[b"k"] = b"v"
    tr.clear(b"k")
    tr.clear_range(b"a", b"b")
    tr.add(b"n", ONE)
    tr.add_write_conflict_key(b"k")
    assert code_of(lambda: tr.commit().wait()) == 1025
    tr = memory.open().create_transaction()
    tr.options.set_timeout(1)
    time.sleep(0.01)
    tr[b"k"] = b"v"
    assert code_of(lambda: tr.commit().wait()) == 1031


def test_l21_limit_minus_one_means_unlimited():
    db = memory.open()
    fill(db, 3)
    tr = db.create_transaction()
    assert len(tr.get_range(b"r", b"s", limit=-1).to_list()) == 3
    assert code_of(lambda: list(tr.get_range(b"r", b"s", limit=-2))) == 2012


def test_l22_exact_streaming_mode_without_a_limit_raises_2210():
    db = memory.open()
    fill(db, 3)
    tr = db.create_transaction()
    assert code_of(lambda: list(tr.get_range(b"r", b"s", streaming_mode=0))) == 2210
    assert len(list(tr.get_range(b"r", b"s", limit=2, streaming_mode=0))) == 2
    assert len(list(tr.get_range(b"r", b"s", streaming_mode=-2))) == 3


def test_l23_a_slice_with_step_minus_one_reads_in_reverse():
    db = memory.open()
    fill(db, 3)
    tr = db.create_transaction()
    assert [kv.key for kv in tr[b"r":b"s":-1]] == [b"r00002", b"r00001", b"r00000"]
    assert [kv.key for kv in tr.snapshot[b"r":b"s":-1]] == [b"r00002", b"r00001", b"r00000"]
