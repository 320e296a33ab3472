"""fdbqueue.memory's objects have the ``fdb`` binding's shapes (``fdb/impl.py``, 8.0.0).

Each test states what the binding does (its source, run over libfdb_c) and checks that the
in-memory database does the same: plain bytes and lists from ``Database`` reads, the ``Value``
and ``Key`` futures that stand for bytes, options, errors, ``KeyValue`` and ``Future``.
"""

from __future__ import annotations

import contextlib
import struct
import threading

import pytest

from fdbqueue import memory
from fdbqueue.memory import Key

Selector = memory.KeySelector


@pytest.fixture
def mdb():
    db = memory.open(seed=7)
    db[b"a"] = b"12"
    db[b"b"] = b"bee"
    db[b"c"] = b""
    return db


@contextlib.contextmanager
def raises_code(code):
    """pytest.raises for a memory FDBError with ``code``."""
    with pytest.raises(memory.FDBError) as info:
        yield info
    assert info.value.code == code, info.value


# -- Database reads: plain bytes and lists (impl._TransactionCreator) -------------------------


def test_database_get_returns_plain_bytes_or_none(mdb):
    # upstream: __creator_getitem returns tr[key].value; __creator_get_key .value
    assert type(mdb.get(b"a")) is bytes and mdb.get(b"a") == b"12"
    assert type(mdb[b"a"]) is bytes
    assert mdb.get(b"missing") is None
    assert mdb[b"missing"] is None
    assert type(mdb.get(b"c")) is bytes and mdb.get(b"c") == b""
    found = mdb.get_key(Selector.first_greater_than(b"a"))
    assert type(found) is bytes and found == b"b"


def test_database_get_range_returns_a_list(mdb):
    # upstream: __creator_get_range returns tr.get_range(...).to_list()
    rows = mdb.get_range(b"a", b"z")
    assert type(rows) is list and len(rows) == 3
    assert rows[0].key == b"a" and rows[-1].key == b"c"
    assert type(mdb[b"a":b"z"]) is list
    assert [kv.key for kv in mdb.get_range_startswith(b"b")] == [b"b"]
    assert type(mdb.get_range_startswith(b"b")) is list
    assert [kv.key for kv in mdb.get_range(b"a", b"z", limit=2, reverse=True)] == [b"c", b"b"]


def test_database_slice_with_step_minus_one_reads_in_reverse(mdb):
    # upstream: _TransactionCreator.__getitem__ passes reverse=(key.step == -1)
    assert [kv.key for kv in mdb[b"a":b"z":-1]] == [b"c", b"b", b"a"]


# -- Value: a future of bytes that stands for them (impl.FutureString/Value) ----------------


def test_truth_value_of_a_missing_key_raises_type_error(mdb):
    # upstream: FutureString has no __bool__; bool() uses the forwarded bytes.__len__(None)
    tr = mdb.create_transaction()
    with pytest.raises(TypeError):
        bool(tr[b"missing"])
    with pytest.raises(TypeError):
        if tr[b"missing"]:
            pass
    assert bool(tr[b"a"]) is True
    assert bool(tr[b"c"]) is False  # an empty value is present but falsy, as bytes


def test_value_is_a_bytes_instance_with_every_bytes_method(mdb):
    tr = mdb.create_transaction()
    value = tr[b"a"]
    assert isinstance(value, bytes)  # the binding's __class__ property
    assert isinstance(value, memory.Value)
    assert type(value) is memory.Value
    public = [name for name in dir(bytes) if not name.startswith("_")]
    missing = [name for name in public if not callable(getattr(value, name, None))]
    assert missing == []
    assert value.decode() == "12"
    assert value.upper() == b"12" and value.startswith(b"1") and value.endswith(b"2")
    assert value.split(b"2") == [b"1", b""] and value.hex() == "3132"
    assert value.replace(b"1", b"x") == b"x2" and value.zfill(4) == b"0012"
    assert value.find(b"2") == 1 and value.count(b"1") == 1 and value.isdigit()
    assert b"x" + value == b"x12" and value + b"x" == b"12x" and value + value == b"1212"
    assert value * 2 == b"1212" and 2 * value == b"1212"
    assert value < b"2" and value <= b"12" and value > b"1" and value >= b"12"
    assert value == b"12" and value != b"13" and value == tr[b"a"]
    assert int(value) == 12
    assert len(value) == 2 and value[0] == 0x31 and value[0:1] == b"1"
    assert list(value) == [0x31, 0x32]
    assert hash(value) == hash(b"12") and {b"12": "found"}[value] == "found"
    assert bytes(value) == b"12" and str(value) == "b'12'" and repr(value) == "b'12'"
    assert sorted([b"3", value, b"0"]) == [b"0", b"12", b"3"]
    assert tr[value].present() is False  # usable as a key (as_foundationdb_key)
    # upstream's makewrapper forwards positional arguments only
    with pytest.raises(TypeError):
        value.split(sep=b"2")
    # no __contains__ nor __iter__ upstream: ``in`` iterates __getitem__, which yields ints
    assert (b"1" in value) is False and (0x31 in value) is True


def test_value_of_a_missing_key(mdb):
    tr = mdb.create_transaction()
    value = tr[b"missing"]
    assert value == None  # noqa: E711 -- the binding's documented idiom
    assert (value != None) is False  # noqa: E711
    assert value.present() is False and value.value is None
    assert value.wait() is value and value.is_ready() and value.done()
    assert str(value) == "None" and repr(value) == "None"
    assert isinstance(value, bytes)  # upstream's __class__ answers bytes whatever the value
    for use in (bytes, hash, len, int, lambda v: v.decode(), lambda v: v < b"a"):
        with pytest.raises(TypeError):
            use(value)


def test_present_value_wait_and_result_return_the_future_itself(mdb):
    # upstream LazyFuture.wait returns self; Future.result returns self.wait()
    value = mdb.create_transaction()[b"a"]
    assert value.wait() is value
    assert value.result() is value
    assert value.exception() is None and value.cancelled() is False
    assert value.value == b"12" and type(value.value) is bytes


def test_get_key_returns_a_key_future(mdb):
    tr = mdb.create_transaction()
    key = tr.get_key(Selector.first_greater_or_equal(b"b"))
    assert type(key) is Key and isinstance(key, bytes)
    assert key == b"b" and type(key.value) is bytes
    assert not hasattr(key, "present")  # impl.Key has no present()
    assert key.wait() is key


def test_get_versionstamp_is_a_key_future_with_a_value_attribute(mdb):
    tr = mdb.create_transaction()
    tr[b"k"] = b"v"
    stamp = tr.get_versionstamp()
    assert type(stamp) is Key and isinstance(stamp, bytes)
    assert not stamp.is_ready()
    tr.commit().wait()
    assert stamp.is_ready()
    assert type(stamp.value) is bytes and len(stamp.value) == 10
    assert stamp.wait() is stamp and stamp == stamp.value and len(stamp) == 10


def test_versionstamp_of_a_read_only_transaction_fails_with_2021_from_value(mdb):
    tr = mdb.create_transaction()
    tr[b"a"].wait()
    stamp = tr.get_versionstamp()
    tr.commit().wait()
    with raises_code(2021) as info:
        stamp.value  # noqa: B018
    assert info.value.description == (
        b"Transaction is read-only and therefore does not have a commit version"
    )


# -- options (fdboptions.py; NativeAPI/ReadYourWrites setOption) -----------------------------

COMMON_TRANSACTION_OPTIONS = {
    "set_timeout": (1000,),
    "set_retry_limit": (3,),
    "set_max_retry_delay": (100,),
    "set_size_limit": (1_000_000,),
    "set_next_write_no_write_conflict_range": (),
    "set_read_your_writes_disable": (),
    "set_snapshot_ryw_disable": (),
    "set_snapshot_ryw_enable": (),
    "set_lock_aware": (),
    "set_read_lock_aware": (),
    "set_used_during_commit_protection_disable": (),
    "set_report_conflicting_keys": (),
    "set_causal_read_risky": (),
    "set_causal_write_risky": (),
    "set_priority_batch": (),
    "set_priority_system_immediate": (),
    "set_debug_transaction_identifier": ("job-1",),
    "set_log_transaction": (),
    "set_transaction_logging_enable": ("job-1",),
    "set_bypass_unreadable": (),
    "set_tag": ("tag",),
    "set_auto_throttle_tag": (b"tag",),
    "set_read_priority_low": (),
    "set_read_server_side_cache_disable": (),
    "set_access_system_keys": (),
    "set_read_system_keys": (),
}


def test_transaction_options_include_the_common_ones(mdb):
    tr = mdb.create_transaction()
    for name, args in COMMON_TRANSACTION_OPTIONS.items():
        getattr(tr.options, name)(*args)
    tr[b"k"] = b"v"
    tr.commit().wait()


def test_option_parameters_are_checked_as_the_binding_does(mdb):
    options = mdb.create_transaction().options
    with pytest.raises(TypeError):
        options.set_lock_aware(1)  # a flag takes no parameter
    with pytest.raises(struct.error):
        options.set_timeout("1000")  # packed with struct.pack("<q", ...)
    with pytest.raises(TypeError):
        options.set_span_parent("not bytes")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("set_retry_limit", -2),
        ("set_max_retry_delay", -1),
        ("set_size_limit", 31),
        ("set_size_limit", 10_000_001),
        ("set_transaction_logging_max_field_length", 0),
        ("set_debug_transaction_identifier", "x" * 101),
    ],
)
def test_option_values_out_of_upstreams_range_raise_2006(mdb, name, value):
    # upstream extractIntOption(value, min, max) throws invalid_option_value
    with raises_code(2006):
        getattr(mdb.create_transaction().options, name)(value)


def test_log_transaction_needs_a_debug_identifier_first(mdb):
    tr = mdb.create_transaction()
    with raises_code(2000):
        tr.options.set_log_transaction()
    tr.options.set_debug_transaction_identifier("job-1")
    tr.options.set_log_transaction()
    with raises_code(2000):
        tr.options.set_debug_transaction_identifier("job-2")


def test_size_limit_changes_the_2101_limit(mdb):
    tr = mdb.create_transaction()
    tr.options.set_size_limit(1000)
    tr[b"big"] = b"x" * 1024
    with raises_code(2101):
        tr.commit().wait()
    tr.reset()
    tr[b"big"] = b"x" * 1024
    tr.commit().wait()  # reset() dropped the option


def test_size_limit_is_not_persistent_across_on_error(mdb):
    # fdb.options: size_limit has no persistent="true"; TransactionState::cloneAndReset
    # starts from fresh options (API >= 16), so on_error restores the default
    tr = mdb.create_transaction()
    tr.options.set_size_limit(1000)
    tr.on_error(memory.FDBError(1020)).wait()
    tr[b"big"] = b"x" * 1024
    tr.commit().wait()


def test_database_size_limit_default_survives_on_error(mdb):
    # the binding's own size_limit_tests.py: "DB default survives on_error reset"
    mdb.options.set_transaction_size_limit(1000)
    tr = mdb.create_transaction()
    tr[b"t4"] = b"bar"
    tr.on_error(memory.FDBError(1007)).wait()
    tr[b"t4"] = b"x" * 1024
    with raises_code(2101):
        tr.commit().wait()
    # and a per-transaction option overrides the database's
    tr = mdb.create_transaction()
    tr.options.set_size_limit(1_000_000)
    tr[b"t5"] = b"x" * 1024
    tr.commit().wait()


def test_next_write_no_write_conflict_range_drops_only_the_next_writes_conflict(mdb):
    reader = mdb.create_transaction()
    reader[b"a"].wait()
    reader[b"b"].wait()
    reader[b"out"] = b"1"
    writer = mdb.create_transaction()
    writer.options.set_next_write_no_write_conflict_range()
    writer[b"a"] = b"changed"  # no write conflict range
    writer.commit().wait()
    reader.commit().wait()  # no 1020: nothing it read was in a write conflict range

    reader = mdb.create_transaction()
    reader[b"b"].wait()
    reader[b"out"] = b"2"
    writer = mdb.create_transaction()
    writer.options.set_next_write_no_write_conflict_range()
    writer[b"a"] = b"again"
    writer[b"b"] = b"changed"  # the write after the next one has its range
    writer.commit().wait()
    with raises_code(1020):
        reader.commit().wait()


def test_database_has_options(mdb):
    options = mdb.options
    for name, args in {
        "set_transaction_timeout": (60_000,),
        "set_transaction_retry_limit": (-1,),
        "set_transaction_max_retry_delay": (1000,),
        "set_transaction_size_limit": (10_000_000,),
        "set_location_cache_size": (100_000,),
        "set_max_watches": (10_000,),
        "set_datacenter_id": ("dc1",),
        "set_machine_id": ("m1",),
        "set_transaction_causal_read_risky": (),
        "set_transaction_report_conflicting_keys": (),
        "set_transaction_bypass_unreadable": (),
        "set_transaction_used_during_commit_protection_disable": (),
        "set_transaction_logging_max_field_length": (100,),
        "set_snapshot_ryw_disable": (),
        "set_snapshot_ryw_enable": (),
    }.items():
        getattr(options, name)(*args)
    mdb[b"k"] = b"v"
    assert mdb[b"k"] == b"v"


def test_database_retry_limit_applies_to_new_transactions_and_after_reset(mdb):
    mdb.options.set_transaction_retry_limit(0)
    tr = mdb.create_transaction()
    with raises_code(1020):
        tr.on_error(memory.FDBError(1020)).wait()
    tr.reset()  # the database's default again
    with raises_code(1020):
        tr.on_error(memory.FDBError(1020)).wait()
    tr.reset()
    tr.options.set_retry_limit(-1)  # its own option overrides the default
    tr.on_error(memory.FDBError(1020)).wait()


def test_database_timeout_applies_to_new_transactions(mdb):
    mdb.options.set_transaction_timeout(1)
    tr = mdb.create_transaction()
    threading.Event().wait(0.01)  # the timeout runs on the monotonic clock
    with raises_code(1031):
        tr[b"a"].wait()


def test_database_default_out_of_range_fails_transaction_creation_with_2006(mdb):
    # upstream stores database defaults unchecked and applies them to each new transaction
    mdb.options.set_transaction_retry_limit(-5)
    with raises_code(2006):
        mdb.create_transaction()


def test_max_watches_database_option_sets_the_watch_limit(mdb):
    mdb.options.set_max_watches(1)
    first = mdb.create_transaction()
    watch = first.watch(b"a")
    first.commit().wait()
    with raises_code(1032):
        second = mdb.create_transaction()
        refused = second.watch(b"b")
        second.commit().wait()
        refused.wait()
    watch.cancel()
    with raises_code(2006):
        mdb.options.set_max_watches(1_000_001)


# -- errors (flow/include/flow/error_definitions.h; impl.FDBError) ---------------------------


def test_read_only_error_2021_has_upstream_description():
    assert memory.FDBError(2021).description == (
        b"Transaction is read-only and therefore does not have a commit version"
    )
    assert memory.FDBError(2020).description == b"Transaction does not have a valid commit version"


def test_fdb_error_str_and_description_are_the_bindings():
    # the binding reads fdb_get_error through ctypes.c_char_p: the description is bytes,
    # and __str__ is "%s (%d)" % (description, code)
    error = memory.FDBError(1020)
    assert error.description == (
        b"Transaction not committed due to conflict with another transaction"
    )
    assert str(error) == "%s (%d)" % (error.description, error.code)  # noqa: UP031
    assert (
        str(error) == "b'Transaction not committed due to conflict with another transaction' (1020)"
    )
    assert repr(error) == "FDBError(1020)" and error.args == (1020,)
    assert memory.FDBError(0).description == b"Success"
    assert memory.FDBError(1).description == b"UNKNOWN_ERROR"  # Error::what of an unknown code
    assert memory.FDBError(40000).description == b"An unknown error occurred"  # mapped to 4000


# -- KeyValue (impl.KeyValue) ------------------------------------------------------------------


def test_key_values_compare_by_identity(mdb):
    tr = mdb.create_transaction()
    (first,) = tr.get_range(b"a", b"b")
    (again,) = tr.get_range(b"a", b"b")
    assert first == first and first != again  # no __eq__: identity
    assert len({first, again}) == 2  # hashed by identity
    assert (first.key, first.value) == (again.key, again.value)
    key, value = again
    assert (key, value) == (b"a", b"12") and tuple(first) == (b"a", b"12")
    with pytest.raises(TypeError):
        first[0]  # not subscriptable, as upstream


# -- Future (impl.Future) ----------------------------------------------------------------------


def test_future_class_has_the_binding_helpers():
    assert isinstance(memory.Future.__dict__["wait_for_any"], staticmethod)
    pending, ready = memory.Future(), memory.Future.completed(5)
    assert memory.Future.wait_for_any(pending, ready) == 1
    assert memory.Future.wait_for_any(ready, pending) == 0
    with pytest.raises(ValueError):
        memory.Future.wait_for_any()

    assert pending.done() is False and pending.cancelled() is False
    for method in (pending.result, pending.exception):
        with pytest.raises(Exception, match="Future result not available"):
            method()
    assert ready.done() and ready.result() == 5 and ready.exception() is None
    failed = memory.Future.failed(memory.FDBError(1020))
    assert failed.exception().code == 1020 and failed.cancelled() is False
    with raises_code(1020):
        failed.result()
    pending.cancel()
    assert pending.done() and pending.cancelled() is True
    assert pending.exception().code == 1101


def test_wait_for_any_wakes_when_a_watch_fires(mdb):
    tr = mdb.create_transaction()
    watch = tr.watch(b"a")
    tr.commit().wait()
    idle = memory.Future()
    timer = threading.Timer(0.05, lambda: mdb.set(b"a", b"changed"))
    timer.start()
    try:
        assert memory.Future.wait_for_any(idle, watch) == 1
    finally:
        timer.join()
    idle.cancel()


def test_client_status_is_a_key_future_of_a_json_report_of_a_healthy_client(mdb):
    """As the binding's ``Database.get_client_status()``: a future of a JSON document whose
    ``Healthy`` is true."""
    import json

    future = mdb.get_client_status()
    assert isinstance(future, memory.Key)
    status = json.loads(future.wait().value)
    assert status["Healthy"] is True
    assert status["Coordinators"] == [] and status["Connections"] == []
