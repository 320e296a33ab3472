"""The in-memory database's timed-out and recovery faults, and its transaction size."""

from __future__ import annotations

import pathlib
import re
import threading
import time

import pytest

from fdbqueue import Queue, Subspace, memory

MAX_VERSIONS_IN_FLIGHT = 100_000_000
LIMIT = 10_000_000


def codes_of(db, count, prefix=b"k"):
    """Commit ``count`` blind writes of ``prefix + n``; return the error code of each."""
    codes = []
    for n in range(count):
        tr = db.create_transaction()
        tr[prefix + b"%03d" % n] = b"v"
        try:
            tr.commit().wait()
            codes.append(None)
        except memory.FDBError as error:
            codes.append(error.code)
    return codes


def commit_in_flight(db, body):
    """Run ``body(tr)`` and commit under a certain ``timed_out`` fault until the commit is
    left in flight (the fault's second draw); the faults are off afterwards."""
    db.faults = memory.Faults(timed_out=1.0)
    try:
        for _ in range(100):
            tr = db.create_transaction()
            body(tr)
            with pytest.raises(memory.FDBError) as raised:
                tr.commit().wait()
            assert raised.value.code == 1031
            if db.in_flight:
                return tr
        raise AssertionError("no commit was left in flight")
    finally:
        db.faults = memory.Faults()


# -- the Faults fields ---------------------------------------------------------------------


def test_faults_keep_the_three_fields_and_add_two():
    faults = memory.Faults(0.1, 0.1, 0.1, 0.2, 0.3)
    assert (faults.timed_out, faults.recovery) == (0.2, 0.3)
    assert faults.total == pytest.approx(0.8)
    assert memory.Faults() == memory.Faults(0, 0, 0, 0, 0)
    with pytest.raises(ValueError):
        memory.Faults(timed_out=0.6, recovery=0.6)
    with pytest.raises(ValueError):
        memory.Faults(recovery=-0.1)
    with pytest.raises(ValueError):
        memory.Faults(timed_out=True)


# -- timed_out -----------------------------------------------------------------------------


def test_timed_out_fails_with_1031_and_about_half_stay_in_flight():
    db = memory.open(faults=memory.Faults(timed_out=1.0), seed=5)
    assert codes_of(db, 100) == [1031] * 100
    stats = db.stats()
    assert stats["injected_timed_out"] == 100
    landed, pending = stats["injected_timed_out_applied"], db.in_flight
    assert landed > 0  # later commits, failing ones included, landed some
    assert pending > 0
    assert len(list(db.get_range(b"", b"\xff"))) == landed
    db.faults = memory.Faults()
    assert db.settle() == pending  # blind writes: nothing stops them
    assert db.in_flight == 0
    stats = db.stats()
    assert 25 <= stats["injected_timed_out_applied"] == landed + pending <= 75
    assert len(list(db.get_range(b"", b"\xff"))) == landed + pending
    assert stats["commits"] == landed + pending
    assert db.settle() == 0


def test_timed_out_is_not_retried_and_fails_the_transactions_futures():
    db = memory.open(faults=memory.Faults(timed_out=1.0), seed=1)
    tr = db.create_transaction()
    tr[b"k"] = b"v"
    watch = tr.watch(b"w")
    stamp = tr.get_versionstamp()
    with pytest.raises(memory.FDBError) as raised:
        tr.commit().wait()
    assert raised.value.code == 1031
    # The watch fails with the commit's error, the versionstamp with 2020 (upstream
    # commitAndWatch: transaction_invalid_version).
    for future, code in ((stamp, 2020), (watch, 1031)):
        with pytest.raises(memory.FDBError) as raised:
            future.wait()
        assert raised.value.code == code
    with pytest.raises(memory.FDBError) as retried:
        tr.on_error(raised.value).wait()
    assert retried.value.code == 1031


def test_a_commit_in_flight_lands_at_a_later_commit_and_fires_watches():
    db = memory.open(seed=3)
    watch = db.get_and_watch(b"late")[1]
    tr = commit_in_flight(db, lambda tr: tr.set(b"late", b"1"))
    assert db.get(b"late") == None  # noqa: E711 (Value compares with None)
    for n in range(64):  # each later writing commit lands it with probability 1/2
        db.set(b"other%02d" % n, b"x")
        if not db.in_flight:
            break
    assert db.in_flight == 0
    assert db.get(b"late") == b"1"
    assert db.stats()["injected_timed_out_applied"] == 1
    watch.wait()  # fired by the late commit
    assert tr.get_committed_version() == -1  # the caller was told 1031


def test_a_read_version_request_never_resolves_a_commit_in_flight():
    db = memory.open(seed=3)
    commit_in_flight(db, lambda tr: tr.set(b"late", b"1"))
    for _ in range(20):
        db.create_transaction().get_read_version().wait()
        assert db.get(b"late") == None  # noqa: E711 (read-only transactions resolve nothing)
    assert db.in_flight == 1


def test_a_commit_in_flight_with_a_read_conflict_is_dropped_once_a_writer_of_that_key_commits():
    """How a client makes an unknown commit final: commit a write into its read conflict
    ranges (upstream's commitDummyTransaction); the commit in flight then conflicts."""
    for seed in range(50):
        db = memory.open(seed=seed)

        def body(tr):
            tr.get(b"K").wait()
            tr[b"K"] = b"mine"
            tr[b"L"] = b"mine"

        commit_in_flight(db, body)
        fence = db.create_transaction()
        fence.add_read_conflict_key(b"K")
        fence.add_write_conflict_key(b"K")
        fence.commit().wait()
        if db.in_flight:  # the fence's own commit did not land it first: the usual race
            break
    else:
        raise AssertionError("every seed landed the commit before the fence")
    assert db.settle() == 0  # conflicted: dropped
    assert db.get(b"K") == None  # noqa: E711
    assert db.get(b"L") == None  # noqa: E711
    assert db.stats()["injected_timed_out_applied"] == 0
    assert db.stats()["conflicts"] == 0  # nobody was told


def test_a_commit_in_flight_with_reads_is_dropped_once_its_read_version_is_too_old():
    db = memory.open(seed=2)

    def body(tr):
        tr.get(b"K").wait()
        tr[b"L"] = b"mine"

    commit_in_flight(db, body)
    db.advance_time(6)
    assert db.settle() == 0
    assert db.get(b"L") == None  # noqa: E711


def test_a_commit_in_flight_without_conflicting_writes_lands_at_settle():
    db = memory.open(seed=4)

    def body(tr):
        tr.get(b"K").wait()
        tr[b"L"] = b"mine"

    commit_in_flight(db, body)
    db.set(b"unrelated", b"x")  # may or may not land it; either way it must land
    db.settle()
    assert db.get(b"L") == b"mine"
    assert db.stats()["injected_timed_out_applied"] == 1


# -- recovery ------------------------------------------------------------------------------


def test_a_recovery_makes_the_database_unavailable_for_its_duration():
    db = memory.open(faults=memory.Faults(recovery=1.0, recovery_seconds=0.3), seed=1)
    assert codes_of(db, 1) == [1021]
    db.faults = memory.Faults()
    started = time.monotonic()
    db.create_transaction().get_read_version().wait()  # waits for the recovery to end
    assert 0.25 <= time.monotonic() - started < 3
    started = time.monotonic()
    assert codes_of(db, 1, b"after") == [None]  # then serves at once
    assert time.monotonic() - started < 0.2


@pytest.mark.parametrize("duration", [-1, float("nan"), 3601, "1", True])
def test_a_recovery_duration_must_be_a_number_of_seconds(duration):
    with pytest.raises(ValueError, match="recovery_seconds"):
        memory.Faults(recovery_seconds=duration)


@pytest.mark.slow("64 threads for five seconds of real time")
def test_sessions_survive_a_high_recovery_rate_without_unknown_results():
    """Finding 9: 64 sessions under recoveries at rate 0.2 (with latency) raised
    UnknownResultError: with instant recoveries, the versions of more than a receipt's
    lifetime passed while a call retried. A recovery takes time, as on a cluster: at most one
    per ``recovery_seconds``, so versions cannot run ahead of a call."""
    db = memory.open(seed=4)
    queue = Queue(Subspace(("recovery-storm",)), high_contention=True)
    items = list(range(3000))
    queue.enqueue_many(db, items)
    db.faults = memory.Faults(recovery=0.2)
    db.latency = memory.Latency(grv=0.001, read=0.001, commit=0.003)
    errors: list[BaseException] = []
    taken: list[int] = []
    stop = threading.Event()

    def consume() -> None:
        with queue.consumer(db, prefetch=1) as session:
            while not stop.is_set():
                try:
                    value = session.take()
                except Exception as error:
                    errors.append(error)
                    return
                if value is not None:
                    taken.append(value)

    threads = [threading.Thread(target=consume) for _ in range(64)]
    for thread in threads:
        thread.start()
    time.sleep(5)
    stop.set()
    for thread in threads:
        thread.join()
    db.faults = memory.Faults()
    db.latency = memory.Latency()
    assert errors == []
    assert db.stats()["injected_recovery"] > 50
    assert len(taken) == len(set(taken))
    assert sorted(taken + queue.dequeue_many(db, len(items))) == items


def test_recovery_reports_1021_applies_about_half_and_is_counted():
    db = memory.open(faults=memory.Faults(recovery=1.0, recovery_seconds=0), seed=9)
    assert codes_of(db, 100) == [1021] * 100
    db.faults = memory.Faults()
    present = len(list(db.get_range(b"", b"\xff")))
    assert 25 <= present <= 75
    stats = db.stats()
    assert stats["injected_recovery"] == 100
    assert stats["injected_recovery_applied"] == present
    assert stats["injected_commit_unknown_result"] == 0


def test_recovery_moves_versions_fails_old_transactions_fires_watches_drops_commits_in_flight():
    for seed in range(50):
        db = memory.open(seed=seed)
        db.set(b"a", b"1")
        old = db.create_transaction()
        assert old.get(b"a") == b"1"
        before = old.get_read_version().wait()
        watch = db.get_and_watch(b"never-changed")[1]
        commit_in_flight(db, lambda tr: tr.set(b"late", b"1"))
        db.faults = memory.Faults(recovery=1.0)
        writer = db.create_transaction()
        writer[b"w"] = b"1"
        with pytest.raises(memory.FDBError) as raised:
            writer.commit().wait()
        assert raised.value.code == 1021
        db.faults = memory.Faults()
        if not db.stats()["injected_timed_out_applied"]:
            break  # the writer did not land the commit in flight before the recovery
    assert db.stats()["injected_recovery"] == 1
    after = db.create_transaction().get_read_version().wait()
    assert after >= before + MAX_VERSIONS_IN_FLIGHT
    with pytest.raises(memory.FDBError) as raised:
        old.get(b"b").wait()
    assert raised.value.code == 1007
    assert watch.is_ready()
    assert watch.wait() is None  # a spurious wake-up, not an error
    assert db.in_flight == 0
    assert db.settle() == 0
    assert db.get(b"late") == None  # noqa: E711
    db.set(b"next", b"1")  # the database goes on
    assert db.get(b"next") == b"1"


# -- transaction size ----------------------------------------------------------------------


def enqueue_like(tr, count):
    """``count`` sets of a 28-byte key and a 3-byte value, each with an add to one counter."""
    for n in range(count):
        tr[b"queue/items/" + n.to_bytes(8, "big") + b"\x00" * 8] = b"abc"
        tr.add(b"queue/count", (1).to_bytes(8, "little"))


@pytest.mark.slow("100,000 items")
def test_100000_small_enqueued_items_exceed_the_limit():
    db = memory.open()
    tr = db.create_transaction()
    enqueue_like(tr, 100_000)
    # per item: mutation 40 + 28 + 3, write conflict range 32 + 28 + 29
    assert tr.get_approximate_size().wait() == 100_000 * 160 + (40 + 11 + 8) + (32 + 11 + 12)
    with pytest.raises(memory.FDBError) as raised:
        tr.commit().wait()
    assert raised.value.code == 2101
    assert db.get(b"queue/count") == None  # noqa: E711


@pytest.mark.slow("50,000 items")
def test_50000_small_enqueued_items_commit():
    db = memory.open()
    tr = db.create_transaction()
    enqueue_like(tr, 50_000)
    assert tr.get_approximate_size().wait() == 50_000 * 160 + 59 + 55
    tr.commit().wait()
    assert db.get(b"queue/count") == (50_000).to_bytes(8, "little")


@pytest.mark.parametrize(("extra", "fails"), [(0, False), (1, True)])
def test_a_transaction_exactly_at_the_limit_commits_and_one_byte_more_fails(extra, fails):
    # 100 keys of 4 bytes: each set costs 40 + 4 + value, its write range 32 + 4 + 5.
    value_length = LIMIT // 100 - 85
    db = memory.open()
    tr = db.create_transaction()
    for n in range(100):
        tr[b"k%03d" % n] = b"x" * (value_length + (extra if n == 0 else 0))
    assert tr.get_approximate_size().wait() == LIMIT + extra
    if fails:
        with pytest.raises(memory.FDBError) as raised:
            tr.commit().wait()
        assert raised.value.code == 2101
        assert db.get(b"k000") == None  # noqa: E711
    else:
        tr.commit().wait()
        assert len(db.get(b"k099")) == value_length


def size_of(build):
    tr = memory.open().create_transaction()
    build(tr)
    return tr.get_approximate_size().wait()


def test_repeated_atomic_adds_on_one_key_count_once():
    def build(tr):
        for _ in range(1000):
            tr.add(b"counter", b"\x01\x00\x00\x00")

    assert size_of(build) == (40 + 7 + 4) + (32 + 7 + 8)


def test_atomic_operations_of_different_kinds_or_lengths_count_each():
    def build(tr):
        tr.add(b"c", b"\x01")
        tr.add(b"c", b"\x01\x00")  # add merges only parameters of the same length
        tr.bit_or(b"c", b"\x01")

    assert size_of(build) == (40 + 1 + 1) + (40 + 1 + 2) + (40 + 1 + 1) + (32 + 1 + 2)


def test_an_overwritten_set_counts_once_and_a_set_then_add_is_one_set():
    def build(tr):
        tr[b"key"] = b"first value"
        tr[b"key"] = b"v2"
        tr.add(b"key", b"\x01\x00")

    assert size_of(build) == (40 + 3 + 2) + (32 + 3 + 4)


def test_touching_write_conflict_ranges_merge():
    def build(tr):
        tr[b"a"] = b""
        tr[b"a\x00"] = b""

    # mutations 40+1 and 40+2; one write range [a, a\0\0)
    assert size_of(build) == (40 + 1) + (40 + 2) + (32 + 1 + 3)


def test_a_single_key_clear_is_a_range_clear():
    assert size_of(lambda tr: tr.clear(b"key")) == (40 + 3 + 4) + (32 + 3 + 4)


def test_a_set_inside_a_cleared_range_splits_the_clear():
    def build(tr):
        tr.clear_range(b"a", b"c")
        tr[b"b"] = b"v"

    # clears [a, b) and [b\0, c), the set, one write range [a, c)
    assert size_of(build) == (40 + 1 + 1) + (40 + 2 + 1) + (40 + 1 + 1) + (32 + 1 + 1)


def test_read_conflict_ranges_count_merged():
    def build(tr):
        tr.get(b"a").wait()
        tr.get(b"a").wait()
        list(tr.get_range(b"a", b"b"))

    assert size_of(build) == 32 + 1 + 1  # [a, a\0) inside [a, b)


def test_a_versionstamped_key_counts_its_mutation_but_no_write_conflict_range():
    key = b"log/" + b"\x00" * 10 + (4).to_bytes(4, "little")

    def build(tr):
        tr.set_versionstamped_key(key, b"value")

    assert size_of(build) == 40 + len(key) + 5


def test_get_approximate_size_is_what_the_commit_checks():
    db = memory.open()
    tr = db.create_transaction()
    tr.get(b"r").wait()
    tr[b"k" * 9_000] = b"v" * 90_000
    size = tr.get_approximate_size().wait()
    assert size == (32 + 1 + 2) + (40 + 9_000 + 90_000) + (32 + 9_000 + 9_001)
    for n in range(100):
        tr[b"%05d" % n + b"k" * 9_000] = b"v" * 90_000
    assert tr.get_approximate_size().wait() > LIMIT
    with pytest.raises(memory.FDBError) as raised:
        tr.commit().wait()
    assert raised.value.code == 2101


# -- independence --------------------------------------------------------------------------


def test_memory_imports_nothing_else_from_fdbqueue():
    package = pathlib.Path(memory.__file__).parent
    pattern = re.compile(
        r"fdbqueue\.(transactional|queue|store|consumers|ends|receipts|leases|codecs)"
    )
    for path in package.glob("*.py"):
        assert not pattern.search(path.read_text()), path.name


def test_database_conveniences_retry_on_their_own():
    db = memory.open(faults=memory.Faults(not_committed=0.5), seed=11)
    for n in range(20):
        db.set(b"k%02d" % n, b"v")
    db.faults = memory.Faults()
    assert len(list(db.get_range(b"", b"\xff"))) == 20
    assert db.stats()["retries"] == db.stats()["injected_not_committed"] > 0
