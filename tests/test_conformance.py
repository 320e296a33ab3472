"""FoundationDB conformance: each rule of fdbqueue.memory's contract (``fdb-semantics.md``,
FoundationDB's own semantics) and of the issue's fdbqueue.memory section, as a test.

Every test uses only the ``fdb`` binding's public API through the ``db`` fixture, so the same
test runs on ``fdbqueue.memory`` and on a real cluster. Keys live under the test's own
``subspace`` (``k(b"a")`` is the subspace's raw prefix + ``b"a"``); only the system-key tests
touch other keys, and they never write anything successfully.

Upstream sources for the finer points, in apple/foundationdb:

- ``fdbclient/ReadYourWrites.cpp`` (``RYWImpl::addConflictRange``): the read conflict range of
  a limited range read and of ``get_key``; ``watch`` reads its key with a conflict range;
  system keys (``key_outside_legal_range``) and size checks in ``set``/``atomicOp``.
- ``fdbclient/ThreadSafeTransaction.cpp``: ``set``, ``clear`` and atomic operations report
  their errors (2004, 2102, 2103) through the transaction's deferred error, that is at the
  next read or at commit, not from the call itself; the tests accept either place.
- ``fdbclient/include/fdbclient/Atomic.h``: the atomic operations byte by byte.
- ``fdbclient/NativeAPI.actor.cpp``: ``Transaction::onError`` (retryable codes), read-only
  commits return at once, a failed commit fails its watches with the same error.
- ``bindings/python/tests/cancellation_timeout_tests.py``: cancel, timeout and retry limit.
"""

from __future__ import annotations

import random
import struct
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from helpers import (
    Waiter,
    fdb_error_types,
    items,
    raises_fdb_error,
    read,
    read_range,
    run,
    value,
    write,
)

Key = Callable[[bytes], bytes]


@pytest.fixture
def k(subspace: Any) -> Key:
    """``k(suffix)``: a key under the test's subspace (raw prefix + suffix)."""
    prefix = subspace.key()
    return lambda suffix: prefix + suffix


def le64(n: int) -> bytes:
    return struct.pack("<Q", n)


def fill(db: Any, k: Key, suffixes: bytes | list[bytes]) -> None:
    """Commit ``k(s) = s`` for each suffix (one-letter suffixes when given a bytes string)."""
    names = [bytes([c]) for c in suffixes] if isinstance(suffixes, bytes) else suffixes
    write(db, {k(s): s for s in names})


def suffixes(db_items: list[tuple[bytes, bytes]], k: Key) -> list[bytes]:
    prefix = k(b"")
    assert all(key.startswith(prefix) for key, _ in db_items)
    return [key[len(prefix) :] for key, _ in db_items]


def commit_error(tr: Any) -> int | None:
    """Commit; the FDBError code on failure, None on success."""
    try:
        tr.commit().wait()
    except fdb_error_types() as exc:
        return int(exc.code)  # type: ignore[attr-defined]
    return None


def conflicts(db: Any, k: Key, reads: Callable[[Any], Any], writes: Callable[[Any], Any]) -> bool:
    """Whether a transaction that ``reads`` fails with 1020 after another one ``writes``.

    The reader takes its read version first, performs its reads (waiting for them), then
    writes a marker key (a read-only transaction is never checked for conflicts); the writer
    commits; then the reader commits. Any error other than 1020 fails the test.
    """
    reader = db.create_transaction()
    reader.get_read_version().wait()
    reads(reader)
    reader.set(k(b"~marker"), b"")
    writer = db.create_transaction()
    writes(writer)
    writer.commit().wait()
    code = commit_error(reader)
    assert code in (None, 1020), f"reader commit failed with {code}, expected success or 1020"
    return code == 1020


def setter(key: bytes, val: bytes = b"new") -> Callable[[Any], None]:
    return lambda tr: tr.set(key, val)


# -- data model ------------------------------------------------------------------------------


def test_keys_sort_by_unsigned_bytes_and_a_prefix_sorts_first(db, k):
    names = [b"b", b"\x80", b"a\x00", b"", b"\xff", b"ab", b"\x7f", b"a", b"a\xff", b"\x00"]
    fill(db, k, names)
    expected = [b"", b"\x00", b"a", b"a\x00", b"ab", b"a\xff", b"b", b"\x7f", b"\x80", b"\xff"]
    assert expected == sorted(names)
    assert suffixes(read_range(db, k(b""), k(b"\xff\xff")), k) == expected
    reverse = read_range(db, k(b""), k(b"\xff\xff"), reverse=True)
    assert suffixes(reverse, k) == expected[::-1]


# -- get / set / clear -----------------------------------------------------------------------


def test_missing_key_reads_as_absent_value(db, k):
    tr = db.create_transaction()
    v = tr.get(k(b"missing"))
    assert v == None  # noqa: E711 - the binding's Value compares equal to None when absent
    assert not v.present()
    assert tr[k(b"missing")] == None  # noqa: E711


def test_set_value_reads_back_present_and_bytes_equal(db, k):
    tr = db.create_transaction()
    tr.set(k(b"a"), b"value")
    tr[k(b"empty")] = b""
    tr.commit().wait()

    tr = db.create_transaction()
    v = tr.get(k(b"a"))
    assert v.present()
    assert v == b"value"
    assert bytes(v) == b"value"
    assert tr[k(b"a")] == b"value"
    empty = tr.get(k(b"empty"))
    assert empty.present(), "an empty value is present, unlike a missing key"
    assert empty == b""
    assert empty != None  # noqa: E711


def test_set_overwrites(db, k):
    write(db, {k(b"a"): b"1"})
    write(db, {k(b"a"): b"2"})
    assert read(db, k(b"a")) == b"2"


def test_clear_and_del_remove_a_key(db, k):
    fill(db, k, b"abc")

    def body(tr):
        tr.clear(k(b"a"))
        del tr[k(b"b")]
        tr.clear(k(b"never-set"))

    run(db, body)
    assert suffixes(read_range(db, k(b""), k(b"\xff")), k) == [b"c"]


def test_clear_range_is_half_open(db, k):
    fill(db, k, b"abcdef")
    run(db, lambda tr: tr.clear_range(k(b"b"), k(b"d")))
    assert suffixes(read_range(db, k(b""), k(b"\xff")), k) == [b"a", b"d", b"e", b"f"]

    def slice_delete(tr):
        del tr[k(b"e") : k(b"f")]

    run(db, slice_delete)
    assert suffixes(read_range(db, k(b""), k(b"\xff")), k) == [b"a", b"d", b"f"]


def test_clear_range_startswith_clears_the_prefix_only(db, k):
    fill(db, k, [b"a", b"b", b"b\x00", b"bz", b"b\xff\xff", b"c"])
    run(db, lambda tr: tr.clear_range_startswith(k(b"b")))
    assert suffixes(read_range(db, k(b""), k(b"\xff")), k) == [b"a", b"c"]


# -- get_range -------------------------------------------------------------------------------


def test_get_range_limit_and_reverse(db, k):
    fill(db, k, b"abcde")
    begin, end = k(b"a"), k(b"z")
    assert suffixes(read_range(db, begin, end), k) == [b"a", b"b", b"c", b"d", b"e"]
    assert suffixes(read_range(db, begin, end, limit=2), k) == [b"a", b"b"]
    assert suffixes(read_range(db, begin, end, reverse=True), k) == [b"e", b"d", b"c", b"b", b"a"]
    assert suffixes(read_range(db, begin, end, limit=2, reverse=True), k) == [b"e", b"d"]
    assert suffixes(read_range(db, k(b"b"), k(b"d")), k) == [b"b", b"c"], "end is exclusive"
    assert read_range(db, k(b"d"), k(b"b")) == [], "an inverted range is empty"
    assert read_range(db, k(b"c"), k(b"c")) == []


def test_get_range_yields_key_values_that_unpack(db, k):
    write(db, {k(b"a"): b"1", k(b"b"): b"2"})
    tr = db.create_transaction()
    kvs = list(tr.get_range(k(b"a"), k(b"z")))
    assert [(bytes(kv.key), bytes(kv.value)) for kv in kvs] == [(k(b"a"), b"1"), (k(b"b"), b"2")]
    assert [(bytes(key), bytes(val)) for key, val in kvs] == [(k(b"a"), b"1"), (k(b"b"), b"2")]
    assert items(tr.get_range_startswith(k(b"b"))) == [(k(b"b"), b"2")]


def test_get_range_with_key_selectors(db, binding, k):
    fill(db, k, b"abcde")
    ks = binding.KeySelector
    tr = db.create_transaction()

    def names(begin, end):
        return suffixes(items(tr.get_range(begin, end)), k)

    assert names(ks.first_greater_than(k(b"a")), ks.first_greater_or_equal(k(b"d"))) == [b"b", b"c"]
    assert names(ks.last_less_or_equal(k(b"b")), ks.first_greater_than(k(b"d"))) == [
        b"b",
        b"c",
        b"d",
    ]
    assert names(ks.last_less_than(k(b"c")), k(b"c\x00")) == [b"b", b"c"]
    assert names(
        ks.first_greater_or_equal(k(b"a")) + 1, ks.first_greater_or_equal(k(b"e")) - 1
    ) == [
        b"b",
        b"c",
    ]
    assert names(ks.first_greater_or_equal(k(b"b\x00")), k(b"z")) == [b"c", b"d", b"e"]


# -- get_key ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("constructor", "ref", "offset", "expected"),
    [
        ("first_greater_or_equal", b"b", 0, b"c"),
        ("first_greater_or_equal", b"c", 0, b"c"),
        ("first_greater_than", b"b", 0, b"c"),
        ("first_greater_than", b"c", 0, b"e"),
        ("last_less_than", b"c", 0, b"a"),
        ("last_less_than", b"d", 0, b"c"),
        ("last_less_or_equal", b"c", 0, b"c"),
        ("last_less_or_equal", b"d", 0, b"c"),
        ("first_greater_or_equal", b"a", 1, b"c"),
        ("first_greater_or_equal", b"a", 2, b"e"),
        ("first_greater_than", b"a", 1, b"e"),
        ("last_less_or_equal", b"e", -1, b"c"),
        ("last_less_or_equal", b"e", -2, b"a"),
        ("last_less_than", b"e", -1, b"a"),
    ],
)
def test_get_key_resolves_each_selector(db, binding, k, constructor, ref, offset, expected):
    fill(db, k, b"ace")
    selector = getattr(binding.KeySelector, constructor)(k(ref)) + offset
    tr = db.create_transaction()
    assert bytes(tr.get_key(selector).wait()) == k(expected)
    assert bytes(tr.snapshot.get_key(selector).wait()) == k(expected)


# -- read your writes ------------------------------------------------------------------------


def test_reads_see_own_sets_clears_and_clear_ranges(db, binding, k):
    write(db, {k(b"a"): b"1", k(b"b"): b"2", k(b"c"): b"3", k(b"d"): b"4", k(b"f"): b"6"})
    tr = db.create_transaction()
    tr.set(k(b"b"), b"B")
    tr.set(k(b"bb"), b"X")
    tr.clear(k(b"c"))
    tr.clear_range(k(b"d"), k(b"e"))
    expected = [(k(b"a"), b"1"), (k(b"b"), b"B"), (k(b"bb"), b"X"), (k(b"f"), b"6")]
    for reader in (tr, tr.snapshot):
        assert value(reader.get(k(b"b"))) == b"B"
        assert value(reader.get(k(b"bb"))) == b"X"
        assert value(reader.get(k(b"c"))) is None
        assert value(reader.get(k(b"d"))) is None
        assert items(reader.get_range(k(b"a"), k(b"z"))) == expected
        assert items(reader.get_range(k(b"a"), k(b"z"), reverse=True)) == expected[::-1]
        assert items(reader.get_range(k(b"a"), k(b"z"), limit=3)) == expected[:3]
        selector = binding.KeySelector.first_greater_or_equal(k(b"c"))
        assert bytes(reader.get_key(selector).wait()) == k(b"f")
    assert read(db, k(b"b")) == b"2", "nothing is visible to others before commit"


def test_reads_see_own_atomic_operations(db, k):
    write(db, {k(b"n"): le64(5)})
    tr = db.create_transaction()
    tr.add(k(b"n"), le64(3))
    tr.add(k(b"fresh"), le64(7))
    tr.byte_max(k(b"s"), b"abc")
    assert value(tr.get(k(b"n"))) == le64(8)
    assert value(tr.snapshot.get(k(b"n"))) == le64(8)
    assert value(tr.get(k(b"fresh"))) == le64(7)
    assert value(tr.snapshot.get(k(b"s"))) == b"abc"
    assert items(tr.get_range(k(b"a"), k(b"z"))) == [
        (k(b"fresh"), le64(7)),
        (k(b"n"), le64(8)),
        (k(b"s"), b"abc"),
    ]


# -- versions and MVCC -----------------------------------------------------------------------


def test_transaction_keeps_reading_its_read_version(db, k):
    write(db, {k(b"a"): b"old", k(b"c"): b"doomed"})
    tr = db.create_transaction()
    tr.get_read_version().wait()
    write(db, {k(b"a"): b"new", k(b"b"): b"created"})
    run(db, lambda other: other.clear(k(b"c")))
    assert value(tr.get(k(b"a"))) == b"old"
    assert value(tr.get(k(b"b"))) is None
    assert value(tr.get(k(b"c"))) == b"doomed"
    assert items(tr.get_range(k(b"a"), k(b"z"))) == [(k(b"a"), b"old"), (k(b"c"), b"doomed")]
    assert read(db, k(b"a")) == b"new", "a new transaction sees the commit"
    assert read(db, k(b"c")) is None


def test_read_version_is_taken_at_the_first_read(db, k):
    tr = db.create_transaction()
    write(db, {k(b"a"): b"committed after create_transaction"})
    assert value(tr.get(k(b"a"))) == b"committed after create_transaction"


def test_read_versions_never_go_backwards(db, k):
    first = db.create_transaction().get_read_version().wait()
    write(db, {k(b"a"): b"1"})
    second = db.create_transaction().get_read_version().wait()
    assert second > first, "a commit in between advances the version"


def test_versions_advance_about_a_million_per_second(db, k):
    def commit_version() -> int:
        tr = db.create_transaction()
        tr.set_versionstamped_value(k(b"v"), b"\x00" * 10 + struct.pack("<I", 0))
        stamp = tr.get_versionstamp()
        tr.commit().wait()
        return int(struct.unpack(">Q", bytes(stamp.wait())[:8])[0])

    start = time.monotonic()
    v1 = commit_version()
    time.sleep(0.5)
    v2 = commit_version()
    elapsed = time.monotonic() - start
    assert 0.25e6 <= v2 - v1 <= 3e6 * elapsed + 0.5e6, (v1, v2, elapsed)


# -- conflicts -------------------------------------------------------------------------------


WRITER_ACTIONS = {
    "set": lambda k, tr: tr.set(k(b"c"), b"new"),
    "clear": lambda k, tr: tr.clear(k(b"c")),
    "clear_range": lambda k, tr: tr.clear_range(k(b"b"), k(b"d")),
    "add": lambda k, tr: tr.add(k(b"c"), le64(1)),
    "set-key-after": lambda k, tr: tr.set(k(b"c\x00"), b"new"),
    "set-key-before": lambda k, tr: tr.set(k(b"b\xff"), b"new"),
}


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("set", True),
        ("clear", True),
        ("clear_range", True),
        ("add", True),
        ("set-key-after", False),
        ("set-key-before", False),
    ],
)
def test_point_read_conflicts_with_a_later_commit_to_that_key(db, k, action, expected):
    fill(db, k, b"c")
    reads = lambda tr: tr.get(k(b"c")).wait()  # noqa: E731
    writes = lambda tr: WRITER_ACTIONS[action](k, tr)  # noqa: E731
    assert conflicts(db, k, reads, writes) is expected


def test_read_of_a_missing_key_conflicts_when_another_transaction_creates_it(db, k):
    reads = lambda tr: tr.get(k(b"ghost")).wait()  # noqa: E731
    assert conflicts(db, k, reads, setter(k(b"ghost")))


def test_snapshot_reads_add_no_conflict(db, k):
    fill(db, k, b"abc")

    def reads(tr):
        tr.snapshot.get(k(b"b")).wait()
        list(tr.snapshot.get_range(k(b"a"), k(b"z")))

    def writes(tr):
        tr.set(k(b"b"), b"changed")
        tr.set(k(b"bb"), b"inserted")

    assert not conflicts(db, k, reads, writes)


def test_commit_before_the_read_version_does_not_conflict(db, k):
    write(db, {k(b"a"): b"1"})
    tr = db.create_transaction()
    assert value(tr.get(k(b"a"))) == b"1"
    tr.set(k(b"b"), b"x")
    tr.commit().wait()


@pytest.mark.parametrize(
    ("written", "expected"),
    [(b"a", True), (b"a\x00", True), (b"b", True), (b"b\x00", False), (b"c", False), (b"e", False)],
)
def test_limited_range_read_conflicts_only_on_what_it_read(db, k, written, expected):
    fill(db, k, b"abcde")

    def reads(tr):
        assert suffixes(items(tr.get_range(k(b"a"), k(b"z"), limit=2)), k) == [b"a", b"b"]

    assert conflicts(db, k, reads, setter(k(written))) is expected


@pytest.mark.parametrize(
    ("written", "expected"),
    [(b"e", True), (b"d", True), (b"y", True), (b"c\xff", False), (b"c", False), (b"z", False)],
)
def test_limited_reverse_range_read_conflicts_only_on_what_it_read(db, k, written, expected):
    fill(db, k, b"abcde")

    def reads(tr):
        got = items(tr.get_range(k(b"a"), k(b"z"), limit=2, reverse=True))
        assert suffixes(got, k) == [b"e", b"d"]

    assert conflicts(db, k, reads, setter(k(written))) is expected


@pytest.mark.parametrize(
    ("written", "expected"),
    [(b"a", True), (b"m", True), (b"y\xff", True), (b"0", False), (b"z", False)],
)
def test_unlimited_range_read_conflicts_on_the_whole_range(db, k, written, expected):
    fill(db, k, b"abcde")

    def reads(tr):
        assert len(items(tr.get_range(k(b"a"), k(b"z")))) == 5

    assert conflicts(db, k, reads, setter(k(written))) is expected


@pytest.mark.parametrize(
    ("constructor", "ref", "found", "written", "expected"),
    [
        # first_greater_or_equal(b) finds c: [b, c\x00) was read.
        ("first_greater_or_equal", b"b", b"c", b"b", True),
        ("first_greater_or_equal", b"b", b"c", b"b\x00", True),
        ("first_greater_or_equal", b"b", b"c", b"c", True),
        ("first_greater_or_equal", b"b", b"c", b"c\x00", False),
        ("first_greater_or_equal", b"b", b"c", b"a", False),
        # first_greater_than(c) finds e: [c\x00, e\x00).
        ("first_greater_than", b"c", b"e", b"c", False),
        ("first_greater_than", b"c", b"e", b"d", True),
        ("first_greater_than", b"c", b"e", b"e", True),
        ("first_greater_than", b"c", b"e", b"e\x00", False),
        # last_less_than(d) finds c: [c, d).
        ("last_less_than", b"d", b"c", b"c", True),
        ("last_less_than", b"d", b"c", b"c\x00", True),
        ("last_less_than", b"d", b"c", b"d", False),
        ("last_less_than", b"d", b"c", b"b", False),
        # last_less_or_equal(c) finds c: [c, c\x00).
        ("last_less_or_equal", b"c", b"c", b"c", True),
        ("last_less_or_equal", b"c", b"c", b"c\x00", False),
        ("last_less_or_equal", b"c", b"c", b"b", False),
    ],
)
def test_get_key_conflicts_on_the_span_it_resolved(
    db, binding, k, constructor, ref, found, written, expected
):
    fill(db, k, b"ace")

    def reads(tr):
        selector = getattr(binding.KeySelector, constructor)(k(ref))
        assert bytes(tr.get_key(selector).wait()) == k(found)

    assert conflicts(db, k, reads, setter(k(written))) is expected


@pytest.mark.parametrize(("written", "expected"), [(b"b", True), (b"c", True), (b"d", False)])
def test_explicit_read_conflict_range(db, k, written, expected):
    reads = lambda tr: tr.add_read_conflict_range(k(b"b"), k(b"d"))  # noqa: E731
    assert conflicts(db, k, reads, setter(k(written))) is expected


@pytest.mark.parametrize(("written", "expected"), [(b"c", True), (b"c\x00", False)])
def test_explicit_read_conflict_key(db, k, written, expected):
    reads = lambda tr: tr.add_read_conflict_key(k(b"c"))  # noqa: E731
    assert conflicts(db, k, reads, setter(k(written))) is expected


def test_write_conflict_key_alone_makes_readers_conflict(db, k):
    write(db, {k(b"c"): b"unchanged"})
    reads = lambda tr: tr.get(k(b"c")).wait()  # noqa: E731
    writes = lambda tr: tr.add_write_conflict_key(k(b"c"))  # noqa: E731
    assert conflicts(db, k, reads, writes)
    assert read(db, k(b"c")) == b"unchanged", "a write conflict range writes nothing"


def test_write_conflict_range_makes_readers_conflict(db, k):
    fill(db, k, b"c")
    reads = lambda tr: tr.get(k(b"c")).wait()  # noqa: E731
    writes = lambda tr: tr.add_write_conflict_range(k(b"b"), k(b"d"))  # noqa: E731
    assert conflicts(db, k, reads, writes)


def test_conflicting_commit_applies_none_of_its_writes(db, k):
    fill(db, k, b"c")
    reader = db.create_transaction()
    reader.get(k(b"c")).wait()
    reader.set(k(b"x"), b"1")
    reader.add(k(b"n"), le64(1))
    reader.clear(k(b"c"))
    write(db, {k(b"c"): b"changed"})
    assert commit_error(reader) == 1020
    assert read(db, k(b"x")) is None
    assert read(db, k(b"n")) is None
    assert read(db, k(b"c")) == b"changed"


def test_blind_writes_never_conflict_and_the_last_commit_wins(db, k):
    fill(db, k, b"ab")
    first, second = db.create_transaction(), db.create_transaction()
    first.get_read_version().wait()
    second.get_read_version().wait()
    first.set(k(b"a"), b"first")
    first.clear(k(b"b"))
    second.set(k(b"a"), b"second")
    second.set(k(b"b"), b"second")
    second.commit().wait()
    first.commit().wait()
    assert read(db, k(b"a")) == b"first"
    assert read(db, k(b"b")) is None


def test_atomic_operations_never_conflict(db, k):
    write(db, {k(b"n"): le64(10)})
    transactions = [db.create_transaction() for _ in range(3)]
    for tr in transactions:
        tr.get_read_version().wait()
        tr.add(k(b"n"), le64(1))
        tr.max(k(b"m"), le64(7))
    for tr in transactions:
        tr.commit().wait()
    assert read(db, k(b"n")) == le64(13)
    assert read(db, k(b"m")) == le64(7)


def test_read_only_commit_succeeds_despite_concurrent_writes(db, k):
    fill(db, k, b"a")
    tr = db.create_transaction()
    assert value(tr.get(k(b"a"))) == b"a"
    list(tr.get_range(k(b"a"), k(b"z")))
    write(db, {k(b"a"): b"changed", k(b"b"): b"new"})
    tr.commit().wait()
    assert read(db, k(b"a")) == b"changed"


# -- atomic operations -----------------------------------------------------------------------


ATOMIC_CASES = [
    # (operation, existing value or None, param, expected value or None)
    ("add", None, le64(5), le64(5)),
    ("add", le64(5), le64(3), le64(8)),
    ("add", le64(10), struct.pack("<q", -1), le64(9)),
    ("add", b"\xff", b"\x01\x00", b"\x00\x01"),  # shorter value: zero-extended to param's width
    ("add", b"\xff\xff", b"\x01", b"\x00"),  # longer value: result has param's width
    ("add", le64(2**64 - 1), le64(1), le64(0)),  # overflow wraps
    ("max", None, le64(7), le64(7)),
    ("max", le64(10), le64(7), le64(10)),
    ("max", le64(10), le64(12), le64(12)),
    ("max", b"\x05", b"\x03\x00", b"\x05\x00"),
    ("max", b"\x00\x00\x01", b"\x02", b"\x02"),  # existing truncated to param's width
    ("min", None, le64(7), le64(7)),
    ("min", le64(10), le64(7), le64(7)),
    ("min", le64(10), le64(12), le64(10)),
    ("min", b"\x05", b"\x03\x01", b"\x05\x00"),
    ("byte_max", None, b"ab", b"ab"),
    ("byte_max", b"abc", b"abd", b"abd"),
    ("byte_max", b"abc", b"ab", b"abc"),
    ("byte_min", None, b"ab", b"ab"),
    ("byte_min", b"abc", b"abd", b"abc"),
    ("byte_min", b"abc", b"ab", b"ab"),
    ("bit_and", None, b"\x0f\x0f", b"\x0f\x0f"),
    ("bit_and", b"\x0f\xf0", b"\xff\x0f", b"\x0f\x00"),
    ("bit_and", b"\xff", b"\x0f\x0f", b"\x0f\x00"),
    ("bit_or", None, b"\x01", b"\x01"),
    ("bit_or", b"\x0f\x00", b"\xf0\x01", b"\xff\x01"),
    ("bit_or", b"\x01\x02\x03", b"\x10", b"\x11"),
    ("bit_xor", None, b"\x0f", b"\x0f"),
    ("bit_xor", b"\xff\x00", b"\x0f\x0f", b"\xf0\x0f"),
    ("compare_and_clear", b"x", b"x", None),
    ("compare_and_clear", b"x", b"y", b"x"),
    ("compare_and_clear", None, b"x", None),
    ("append_if_fits", None, b"cd", b"cd"),
    ("append_if_fits", b"ab", b"cd", b"abcd"),
    ("append_if_fits", b"a" * 60_000, b"b" * 40_000, b"a" * 60_000 + b"b" * 40_000),
    ("append_if_fits", b"a" * 60_000, b"b" * 50_000, b"a" * 60_000),  # over 100,000: unchanged
]


@pytest.mark.parametrize(
    ("operation", "existing", "param", "expected"),
    ATOMIC_CASES,
    ids=[f"{op}-{i}" for i, (op, *_) in enumerate(ATOMIC_CASES)],
)
def test_atomic_operation(db, k, operation, existing, param, expected):
    key = k(b"x")
    if existing is not None:
        write(db, {key: existing})
    run(db, lambda tr: getattr(tr, operation)(key, param))
    assert read(db, key) == expected


# -- versionstamps ---------------------------------------------------------------------------


def test_versionstamped_key(db, k):
    prefix = k(b"vs/")
    template = prefix + b"\x00" * 10 + b"/tail" + struct.pack("<I", len(prefix))
    tr = db.create_transaction()
    tr.set_versionstamped_key(template, b"payload")
    stamp = tr.get_versionstamp()
    tr.commit().wait()
    versionstamp = bytes(stamp.wait())
    assert len(versionstamp) == 10
    assert read_range(db, prefix, prefix + b"\xff") == [
        (prefix + versionstamp + b"/tail", b"payload")
    ]


def test_versionstamped_value(db, k):
    tr = db.create_transaction()
    tr.set_versionstamped_value(k(b"v"), b"pre" + b"\x00" * 10 + b"post" + struct.pack("<I", 3))
    stamp = tr.get_versionstamp()
    tr.commit().wait()
    versionstamp = bytes(stamp.wait())
    assert read(db, k(b"v")) == b"pre" + versionstamp + b"post"


def test_versionstamps_are_unique_and_increase_with_commit_order(db, k):
    stamps = []
    for i in range(3):
        tr = db.create_transaction()
        read_version = tr.get_read_version().wait()
        tr.set_versionstamped_value(k(b"v%d" % i), b"\x00" * 10 + struct.pack("<I", 0))
        stamp = tr.get_versionstamp()
        tr.commit().wait()
        versionstamp = bytes(stamp.wait())
        commit_version = struct.unpack(">Q", versionstamp[:8])[0]
        assert commit_version > read_version
        later = db.create_transaction().get_read_version().wait()
        assert later >= commit_version, "a read version after the commit includes it"
        stamps.append(versionstamp)
    assert stamps == sorted(stamps)
    assert len(set(stamps)) == 3
    for i, stamp in enumerate(stamps):
        assert read(db, k(b"v%d" % i)) == stamp


def test_reading_a_versionstamped_key_in_its_transaction_raises_1036(db, k):
    prefix = k(b"vs/")
    tr = db.create_transaction()
    tr.set_versionstamped_key(prefix + b"\x00" * 10 + struct.pack("<I", len(prefix)), b"x")
    with raises_fdb_error(1036):
        list(tr.get_range(prefix, prefix + b"\xff"))


def test_reading_a_versionstamped_value_in_its_transaction_raises_1036(db, k):
    tr = db.create_transaction()
    tr.set_versionstamped_value(k(b"v"), b"\x00" * 10 + struct.pack("<I", 0))
    with raises_fdb_error(1036):
        tr.get(k(b"v")).wait()


# -- watches ---------------------------------------------------------------------------------

WATCH_TIMEOUT = 10.0  # seconds a watch may take to report a change on a real cluster


@pytest.mark.parametrize(
    ("initial", "change"),
    [
        pytest.param(b"1", lambda key: setter(key, b"2"), id="value-changed"),
        pytest.param(b"1", lambda key: lambda tr: tr.clear(key), id="key-cleared"),
        pytest.param(None, lambda key: setter(key, b"created"), id="key-created"),
    ],
)
def test_watch_fires_when_another_transaction_changes_the_key(db, k, initial, change):
    key = k(b"w")
    if initial is not None:
        write(db, {key: initial})
    tr = db.create_transaction()
    watch = tr.watch(key)
    tr.commit().wait()
    waiter = Waiter(watch)
    assert not waiter.done(0.3), "nothing changed yet"
    run(db, change(key))
    assert waiter.done(WATCH_TIMEOUT), "the watch did not fire after the change"
    assert waiter.error is None


def test_watch_with_a_write_conflicts_when_the_key_changes_first(db, k):
    key = k(b"w")
    write(db, {key: b"1"})
    tr = db.create_transaction()
    tr.get_read_version().wait()
    watch = tr.watch(key)
    tr.set(k(b"other"), b"x")
    write(db, {key: b"2"})
    assert commit_error(tr) == 1020
    assert read(db, k(b"other")) is None
    waiter = Waiter(watch)
    assert waiter.done(WATCH_TIMEOUT), "the watch of a failed commit must fail"
    assert waiter.error is not None and waiter.error.code == 1020  # type: ignore[attr-defined]


def test_watch_reports_a_change_made_before_its_commit_only_after_the_commit(db, k):
    key = k(b"w")
    write(db, {key: b"1"})
    tr = db.create_transaction()
    tr.get_read_version().wait()  # the watch reads b"1" whenever its read runs
    watch = tr.watch(key)
    write(db, {key: b"2"})
    waiter = Waiter(watch)
    assert not waiter.done(0.3), "a watch reports nothing before its transaction commits"
    tr.commit().wait()  # read-only: no conflict check
    assert waiter.done(WATCH_TIMEOUT), "the value differs from the one the watch read"
    assert waiter.error is None


def test_watch_compares_with_the_transactions_own_write(db, k):
    key = k(b"w")
    write(db, {key: b"1"})
    tr = db.create_transaction()
    tr.set(key, b"2")
    watch = tr.watch(key)
    tr.commit().wait()
    waiter = Waiter(watch)
    assert not waiter.done(0.3), "the committed value is the one the watch saw"
    write(db, {key: b"3"})
    assert waiter.done(WATCH_TIMEOUT)
    assert waiter.error is None


@pytest.mark.memory_only("10,000 outstanding watches would load a shared cluster")
def test_more_than_10000_outstanding_watches_raise_1032(db, k):
    tr = db.create_transaction()
    watches = [tr.watch(k(b"w%05d" % i)) for i in range(10_001)]
    tr.commit().wait()
    with raises_fdb_error(1032):
        watches[-1].wait()
    assert not Waiter(watches[0]).done(0.1), "the first 10,000 watches are registered"


# -- limits ----------------------------------------------------------------------------------


def padded(k: Key, total: int) -> bytes:
    key = k(b"big/")
    return key + b"k" * (total - len(key))


def test_key_of_10000_bytes_is_accepted(db, k):
    key = padded(k, 10_000)
    write(db, {key: b"v"})
    assert read(db, key) == b"v"


@pytest.mark.parametrize("operation", ["set", "add"])
def test_key_over_10000_bytes_raises_2102_and_writes_nothing(db, k, operation):
    key = padded(k, 10_001)
    tr = db.create_transaction()
    tr.set(k(b"side"), b"1")
    with raises_fdb_error(2102):  # from the call or, on a real client, at commit
        getattr(tr, operation)(key, le64(1))
        tr.commit().wait()
    assert read_range(db, k(b""), k(b"\xff")) == []


def test_value_of_100000_bytes_is_accepted(db, k):
    write(db, {k(b"v"): b"x" * 100_000})
    assert read(db, k(b"v")) == b"x" * 100_000


@pytest.mark.parametrize("operation", ["set", "append_if_fits"])
def test_value_over_100000_bytes_raises_2103_and_writes_nothing(db, k, operation):
    tr = db.create_transaction()
    tr.set(k(b"side"), b"1")
    with raises_fdb_error(2103):  # from the call or, on a real client, at commit
        getattr(tr, operation)(k(b"v"), b"x" * 100_001)
        tr.commit().wait()
    assert read_range(db, k(b""), k(b"\xff")) == []


def test_transaction_over_10mb_raises_2101_and_writes_nothing(db, k):
    tr = db.create_transaction()
    with raises_fdb_error(2101):
        for i in range(105):  # 105 values of 100,000 bytes: 10.5 MB of mutations
            tr.set(k(b"chunk%03d" % i), b"x" * 100_000)
        tr.commit().wait()
    assert read_range(db, k(b""), k(b"\xff"), limit=1) == []


# -- system keys -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "read_system",
    [
        pytest.param(lambda tr: tr.get(b"\xff").wait(), id="get-xff"),
        pytest.param(lambda tr: tr.get(b"\xff/fdbqueue-test").wait(), id="get"),
        pytest.param(lambda tr: tr.snapshot.get(b"\xff/fdbqueue-test").wait(), id="snapshot-get"),
        pytest.param(lambda tr: list(tr.get_range(b"\xff", b"\xff\xff")), id="get-range"),
        pytest.param(lambda tr: list(tr.get_range(b"\xfe", b"\xff\x01")), id="range-ends-inside"),
    ],
)
def test_reading_system_keys_raises_2004(db, read_system):
    tr = db.create_transaction()
    with raises_fdb_error(2004):
        read_system(tr)


def test_range_up_to_the_system_keys_is_allowed(db, k):
    fill(db, k, b"a")
    tr = db.create_transaction()
    assert items(tr.get_range(k(b""), b"\xff", limit=1)) == [(k(b"a"), b"a")]


@pytest.mark.parametrize(
    "write_system",
    [
        pytest.param(lambda tr: tr.set(b"\xff/fdbqueue-test", b"x"), id="set"),
        pytest.param(lambda tr: tr.clear(b"\xff/fdbqueue-test"), id="clear"),
        pytest.param(lambda tr: tr.clear_range(b"\xff/a", b"\xff/b"), id="clear-range"),
        pytest.param(lambda tr: tr.add(b"\xff/fdbqueue-test", le64(1)), id="add"),
    ],
)
def test_writing_system_keys_raises_2004_and_writes_nothing(db, k, write_system):
    tr = db.create_transaction()
    tr.set(k(b"side"), b"1")
    with raises_fdb_error(2004):  # from the call or, on a real client, at commit
        write_system(tr)
        tr.commit().wait()
    assert read(db, k(b"side")) is None


def test_clear_range_reaching_into_system_keys_raises_2004_and_clears_nothing(db, k):
    fill(db, k, b"a")
    tr = db.create_transaction()
    with raises_fdb_error(2004):
        tr.clear_range(k(b"a"), b"\xff\x00")
        tr.commit().wait()
    assert read(db, k(b"a")) == b"a"


# -- errors, on_error and retry options ------------------------------------------------------


def test_conflict_error_has_code_and_description(db, k):
    reader = db.create_transaction()
    reader.get(k(b"a")).wait()
    reader.set(k(b"b"), b"")
    write(db, {k(b"a"): b"1"})
    with raises_fdb_error(1020) as info:
        reader.commit().wait()
    description = info.value.description  # type: ignore[attr-defined]
    assert isinstance(description, (str, bytes)) and len(description) > 0


@pytest.mark.parametrize("code", [1007, 1009, 1020, 1021, 1037, 1213])
def test_on_error_retries_retryable_errors_and_resets(db, binding, k, code):
    tr = db.create_transaction()
    tr.set(k(b"discarded"), b"1")
    tr.on_error(binding.FDBError(code)).wait()  # returns: retryable
    assert value(tr.get(k(b"discarded"))) is None, "on_error reset the transaction"
    tr.set(k(b"kept"), b"2")
    tr.commit().wait()
    assert read(db, k(b"discarded")) is None
    assert read(db, k(b"kept")) == b"2"


@pytest.mark.parametrize("code", [1025, 1031, 2004, 2101, 2102, 2103])
def test_on_error_reraises_other_errors(db, binding, code):
    tr = db.create_transaction()
    with raises_fdb_error(code):
        tr.on_error(binding.FDBError(code)).wait()


def test_on_error_after_a_real_conflict_lets_the_retry_commit(db, k):
    write(db, {k(b"n"): le64(0)})
    tr = db.create_transaction()
    attempts = 0
    while True:
        attempts += 1
        try:
            current = struct.unpack("<Q", bytes(tr.get(k(b"n")).wait()))[0]
            if attempts == 1:
                write(db, {k(b"n"): le64(100)})
            tr.set(k(b"n"), le64(current + 1))
            tr.commit().wait()
            break
        except fdb_error_types() as exc:
            tr.on_error(exc).wait()
    assert attempts == 2
    assert read(db, k(b"n")) == le64(101)


def test_retry_limit_makes_on_error_reraise(db, binding):
    tr = db.create_transaction()
    tr.options.set_retry_limit(2)
    tr.on_error(binding.FDBError(1020)).wait()
    tr.on_error(binding.FDBError(1020)).wait()
    with raises_fdb_error(1020):
        tr.on_error(binding.FDBError(1020)).wait()


def test_retry_limit_zero_reraises_at_once(db, binding):
    tr = db.create_transaction()
    tr.options.set_retry_limit(0)
    with raises_fdb_error(1007):
        tr.on_error(binding.FDBError(1007)).wait()


def test_max_retry_delay_caps_the_backoff(db, binding):
    tr = db.create_transaction()
    tr.options.set_max_retry_delay(10)  # ms
    start = time.monotonic()
    for _ in range(15):  # uncapped, the backoff would double from 10 ms to 1 s
        tr.on_error(binding.FDBError(1020)).wait()
    assert time.monotonic() - start < 1.5


def test_timeout_raises_1031_which_is_not_retryable(db, k):
    tr = db.create_transaction()
    tr.options.set_timeout(50)  # ms
    tr.set(k(b"a"), b"1")
    time.sleep(0.3)
    with raises_fdb_error(1031) as info:
        tr.commit().wait()
    with raises_fdb_error(1031):
        tr.on_error(info.value).wait()
    assert read(db, k(b"a")) is None


def test_cancel_makes_later_operations_raise_1025(db, k):
    tr = db.create_transaction()
    tr.set(k(b"a"), b"1")
    tr.cancel()
    with raises_fdb_error(1025):
        tr.get(k(b"b")).wait()
    with raises_fdb_error(1025):
        tr.commit().wait()
    assert read(db, k(b"a")) is None


def test_on_error_of_a_cancelled_transaction_raises_1025(db, binding):
    tr = db.create_transaction()
    tr.cancel()
    with raises_fdb_error(1025):
        tr.on_error(binding.FDBError(1020)).wait()


def test_reset_discards_writes_and_read_conflicts(db, k):
    fill(db, k, b"c")
    tr = db.create_transaction()
    tr.get(k(b"c")).wait()
    tr.set(k(b"a"), b"discarded")
    tr.reset()
    write(db, {k(b"c"): b"changed"})
    tr.set(k(b"b"), b"kept")
    tr.commit().wait()  # the read of c was discarded: no conflict
    assert read(db, k(b"a")) is None
    assert read(db, k(b"b")) == b"kept"


def test_reset_clears_a_cancellation(db, k):
    tr = db.create_transaction()
    tr.cancel()
    tr.reset()
    tr.set(k(b"a"), b"1")
    tr.commit().wait()
    assert read(db, k(b"a")) == b"1"


# -- the five-second window ------------------------------------------------------------------


def outlive_the_read_version(db: Any, engine: Any, k: Key, seconds: float = 6.0) -> None:
    """Let more than five seconds' worth of versions pass since the read versions taken.

    The in-memory engine (``db`` itself, or the one under the binding over
    ``memory.install()``) moves its version clock with ``Database.advance_time`` (its test
    hook); a real cluster (``engine`` None) needs the wall-clock time.
    """
    if engine is not None:
        engine.advance_time(seconds)
    else:
        time.sleep(seconds)
    write(db, {k(b"~tick"): b""})  # an idle cluster's storage servers see versions move on


@pytest.mark.slow("waits out the five-second window in real time", cluster=True)
def test_reads_and_checked_commits_five_seconds_after_the_read_version_raise_1007(db, engine, k):
    fill(db, k, b"a")
    reader, writer, read_only = (db.create_transaction() for _ in range(3))
    for tr in (reader, writer, read_only):
        tr.get_read_version().wait()
    writer.get(k(b"a")).wait()  # a read conflict range: the commit is checked
    read_only.get(k(b"a")).wait()
    outlive_the_read_version(db, engine, k)

    with raises_fdb_error(1007) as info:
        reader.get(k(b"b")).wait()
    writer.set(k(b"w"), b"1")
    with raises_fdb_error(1007):
        writer.commit().wait()
    assert read(db, k(b"w")) is None
    read_only.commit().wait()  # a read-only commit checks nothing

    reader.on_error(info.value).wait()  # 1007 is retryable: the retry gets a new read version
    assert value(reader.get(k(b"a"))) == b"a"


@pytest.mark.slow("waits out the five-second window in real time", cluster=True)
def test_blind_write_with_an_old_read_version_still_commits(db, engine, k):
    """Upstream, only a commit with read conflict ranges is too old (fdbserver/resolver/
    ConflictSet.cpp, ``ConflictBatch::addTransaction``); blind writes have none."""
    tr = db.create_transaction()
    tr.get_read_version().wait()
    outlive_the_read_version(db, engine, k)
    tr.set(k(b"blind"), b"1")
    tr.add(k(b"n"), le64(1))
    tr.commit().wait()
    assert read(db, k(b"blind")) == b"1"


# -- tuple layer and subspaces --------------------------------------------------------------


def test_tuple_packed_keys_come_back_in_tuple_order(db, subspace):
    marker = uuid.UUID(int=1)
    expected = [b"\x00b", b"b", "a", "b", ("n", 1), -(2**70), -1, 0, 1, 2**70, -1.5, 2.5, marker]
    shuffled = random.Random(7).sample(expected, len(expected))
    write(db, {subspace.pack((element,)): b"" for element in shuffled})
    begin, end = subspace.range().start, subspace.range().stop
    got = [subspace.unpack(key)[0] for key, _ in read_range(db, begin, end)]
    assert got == expected


def test_subspace_range_holds_items_only(db, subspace):
    prefix = subspace.key()
    write(
        db,
        {prefix: b"raw prefix", prefix + b"\xffmeta": b"after range()", subspace.pack((1,)): b""},
    )
    inside = read_range(db, subspace.range().start, subspace.range().stop)
    assert [key for key, _ in inside] == [subspace.pack((1,))]
    assert subspace.contains(prefix + b"\xffmeta") and subspace.contains(subspace.pack((1,)))
    everything = read_range(db, prefix, prefix + b"\xff\xff")
    assert len(everything) == 3, "clear_range_startswith(prefix) is what removes all three"


# -- fdbqueue.memory only: statistics and latency ---------------------------------------------


@pytest.mark.memory_only("db.stats() is an fdbqueue.memory feature")
def test_stats_count_transactions_commits_conflicts_retries_and_reads(db, k):
    counters = ("transactions", "commits", "conflicts", "retries", "reads")
    before = db.stats()
    assert set(counters) <= set(before)

    tr = db.create_transaction()
    tr.get(k(b"a")).wait()  # reaches the database
    list(tr.get_range(k(b"b"), k(b"c")))  # reaches the database
    tr.set(k(b"own"), b"1")
    tr.get(k(b"own")).wait()  # served from the transaction's own write
    writer = db.create_transaction()
    writer.set(k(b"a"), b"1")
    writer.commit().wait()
    with raises_fdb_error(1020) as info:
        tr.commit().wait()
    tr.on_error(info.value).wait()
    tr.set(k(b"x"), b"1")
    tr.commit().wait()

    after = db.stats()
    delta = {name: after[name] - before[name] for name in counters}
    assert delta == {"transactions": 2, "commits": 2, "conflicts": 1, "retries": 1, "reads": 2}


@pytest.mark.memory_only("Latency is an fdbqueue.memory feature")
def test_latency_delays_read_versions_reads_and_commits(binding, k):
    slow = binding.open(latency=binding.Latency(grv=0.05, read=0.05, commit=0.05), faults=None)

    def took(action: Callable[[], Any]) -> float:
        start = time.monotonic()
        action()
        return time.monotonic() - start

    tr = slow.create_transaction()
    assert took(lambda: tr.get_read_version().wait()) >= 0.05
    assert took(lambda: tr.get(k(b"a")).wait()) >= 0.05
    tr.set(k(b"a"), b"1")
    assert took(lambda: tr.commit().wait()) >= 0.05
