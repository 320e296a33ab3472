"""Behaviour specific to fdbqueue.memory: latency, statistics, threads, history, the clock."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fdbqueue import memory


def increment(db, key):
    tr = db.create_transaction()
    while True:
        try:
            value = tr[key]
            current = int(bytes(value)) if value.present() else 0
            tr[key] = str(current + 1).encode()
            tr.commit().wait()
            return
        except memory.FDBError as error:
            tr.on_error(error).wait()


def test_threads_doing_read_modify_write_lose_no_update():
    db = memory.open(latency=memory.Latency(read=0.0005, commit=0.0005), seed=1)
    threads = [
        threading.Thread(target=lambda: [increment(db, b"n") for _ in range(25)]) for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert db.get(b"n") == b"200"
    stats = db.stats()
    assert stats["conflicts"] > 0
    assert stats["retries"] == stats["conflicts"]
    assert stats["commits"] == 200 + 0  # only successful writing commits count


def test_latency_delays_each_step_and_threads_overlap():
    latency = memory.Latency(grv=0.02, read=0.02, commit=0.02)
    db = memory.open(latency=latency)
    started = time.perf_counter()
    tr = db.create_transaction()
    tr.get(b"k")  # read version + read
    tr[b"k"] = b"v"
    tr.commit().wait()
    single = time.perf_counter() - started
    assert single >= 0.06

    def one():
        t = db.create_transaction()
        t.get(b"x")
        t[b"y" + threading.current_thread().name.encode()] = b"1"
        t.commit().wait()

    threads = [threading.Thread(target=one) for _ in range(8)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    parallel = time.perf_counter() - started
    assert parallel < 8 * 0.06  # sleeps happen outside the lock, so threads overlap


def test_latency_is_validated():
    with pytest.raises(ValueError):
        memory.Latency(grv=-1)
    with pytest.raises(ValueError):
        memory.Latency(read="fast")
    with pytest.raises(TypeError):
        memory.open(latency=0.1)
    with pytest.raises(TypeError, match=r"memory\.Faults"):
        memory.open(faults=object())


def test_stats_count_reads_that_reach_the_database():
    db = memory.open()
    tr = db.create_transaction()
    tr[b"mine"] = b"1"
    assert tr[b"mine"] == b"1"  # served from the transaction's own write
    assert db.stats()["reads"] == 0
    tr.get(b"other")
    list(tr.get_range(b"a", b"z"))
    assert db.stats()["reads"] == 2
    assert db.stats()["read_versions"] == 1
    db.reset_stats()
    assert db.stats()["reads"] == 0


def test_advance_time_makes_old_read_versions_too_old():
    db = memory.open()
    db[b"k"] = b"v"
    tr = db.create_transaction()
    tr.get(b"k")
    db.advance_time(5.5)
    with pytest.raises(memory.FDBError) as raised:
        tr.get(b"other").wait()  # the read's future reports it, as the binding's
    assert raised.value.code == 1007
    assert db.stats()["too_old"] == 1
    tr.on_error(raised.value).wait()  # retryable: a new read version works
    assert tr.get(b"k") == b"v"


def version_of(db):
    return db.create_transaction().get_read_version().wait()


def test_pass_time_moves_the_versions_and_the_wall_clock_advance_time_the_versions_only():
    db = memory.open()
    before_version, before_clock = version_of(db), memory.wall_clock()
    before_passed = memory.time_passed()
    db.advance_time(100)  # as a recovery: versions jump, the wall clock does not
    assert version_of(db) - before_version >= 100_000_000
    assert memory.wall_clock() - before_clock < 1
    assert memory.time_passed() == before_passed
    before_version, before_clock = version_of(db), memory.wall_clock()
    db.pass_time(30)  # time passes: both move
    assert version_of(db) - before_version >= 30_000_000
    assert 29.9 < memory.wall_clock() - before_clock < 31
    assert memory.wall_clock() - time.time() > 29.9  # the process's clock: every database's
    # the hook fdbqueue's own clock (fdbqueue._clock) adds to time.time()
    assert memory.time_passed() == before_passed + 30


@pytest.mark.parametrize(
    ("seconds", "error"),
    [
        (-1, ValueError),
        (float("nan"), ValueError),
        (float("inf"), ValueError),
        (True, TypeError),
        ("1", TypeError),
    ],
)
def test_pass_time_refuses_what_is_not_a_time_to_pass_and_moves_nothing(seconds, error):
    db = memory.open()
    before_clock, before_passed = memory.wall_clock(), memory.time_passed()
    with pytest.raises(error):
        db.pass_time(seconds)
    assert memory.wall_clock() - before_clock < 1
    assert memory.time_passed() == before_passed


@pytest.mark.memory_internals("reads the engine's commit log")
def test_commit_log_is_pruned_after_the_window():
    db = memory.open()
    for n in range(50):
        db[b"k%d" % n] = b"v"
    assert len(db._storage.log) == 50
    db.advance_time(7)
    db[b"last"] = b"v"
    assert len(db._storage.log) == 1


def test_watch_fires_from_another_thread():
    db = memory.open()
    db[b"w"] = b"0"
    _value, watch = db.get_and_watch(b"w")
    assert not watch.is_ready()
    fired = threading.Event()
    watch.on_ready(lambda _future: fired.set())
    threading.Thread(target=lambda: db.set(b"w", b"1")).start()
    assert fired.wait(5)
    watch.wait()


def test_watch_that_sees_the_same_value_does_not_fire():
    db = memory.open()
    db[b"w"] = b"same"
    watch = db.get_and_watch(b"w")[1]
    db[b"w"] = b"same"
    db[b"other"] = b"x"
    assert not watch.is_ready()
    watch.cancel()
    with pytest.raises(memory.FDBError) as raised:
        watch.wait()
    assert raised.value.code == 1101


def test_versionstamps_increase_with_commit_order():
    db = memory.open()
    stamps = []
    for _ in range(5):
        tr = db.create_transaction()
        tr.set_versionstamped_value(b"vs", b"\x00" * 10 + (0).to_bytes(4, "little"))
        stamps.append(tr.get_versionstamp())
        tr.commit().wait()
    values = [bytes(stamp.wait()) for stamp in stamps]
    assert all(len(value) == 10 for value in values)
    assert values == sorted(values) and len(set(values)) == 5
    assert db.get(b"vs") == values[-1]


def test_versions_advance_about_a_million_per_second():
    db = memory.open()
    first = db.create_transaction().get_read_version().wait()
    time.sleep(0.2)
    second = db.create_transaction().get_read_version().wait()
    assert 190_000 <= second - first <= 2_000_000


# -- history: reads at an old read version against a brute-force model -------------------

KEYS = [bytes([k]) for k in b"abcdef"]
operations = st.lists(
    st.one_of(
        st.tuples(st.just("set"), st.sampled_from(KEYS), st.binary(min_size=1, max_size=3)),
        st.tuples(st.just("clear"), st.sampled_from(KEYS), st.sampled_from(KEYS)),
        st.tuples(st.just("snapshot"), st.just(b""), st.just(b"")),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(operations)
def test_readers_see_exactly_their_read_versions_state(ops):
    """Readers opened between commits keep seeing the state as of their read version."""
    db = memory.open()
    model: dict[bytes, bytes] = {}
    readers: list[tuple[memory.Transaction, dict[bytes, bytes]]] = []
    for kind, first, second in ops:
        if kind == "set":
            db[first] = second
            model[first] = second
        elif kind == "clear":
            begin, end = min(first, second), max(first, second)
            db.clear_range(begin, end)
            for key in [k for k in model if begin <= k < end]:
                del model[key]
        else:
            reader = db.create_transaction()
            reader.get_read_version().wait()
            readers.append((reader, dict(model)))
    for reader, expected in readers:
        assert [(kv.key, kv.value) for kv in reader.get_range(b"", b"\xff")] == sorted(
            expected.items()
        )
        reverse = [(kv.key, kv.value) for kv in reader.get_range(b"a", b"z", 2, True)]
        assert reverse == sorted(expected.items(), reverse=True)[:2]
        for key in KEYS:
            assert reader.get(key) == expected.get(key)


@pytest.mark.parametrize(
    ("read", "code"),
    [
        (lambda tr: tr.get(b"\xff\xff/system"), 2004),
        (lambda tr: tr.get_key(memory.KeySelector.first_greater_or_equal(b"\xff\xff")), 2004),
        (lambda tr: tr.snapshot.get(b"\xff\xffx"), 2004),
    ],
)
def test_a_read_error_is_its_futures_not_the_calls(read, code):
    """As the binding's (``ThreadSafeTransaction`` returns a failed future): the call
    returns, and waiting on what it returned raises."""
    tr = memory.open().create_transaction()
    future = read(tr)
    with pytest.raises(memory.FDBError) as raised:
        future.wait()
    assert raised.value.code == code


@pytest.mark.parametrize(
    ("begin", "end", "limit", "code"),
    [
        (b"a", b"\xff\xff", 0, 2004),  # key_outside_legal_range
        (b"\xff\xffa", b"\xff\xffb", 0, 2004),
        (b"a", b"b", -2, 2012),  # range_limits_invalid
    ],
)
def test_a_range_reads_error_is_raised_where_it_is_iterated_not_by_the_call(
    begin, end, limit, code
):
    """As the binding's ``FDBRange``: ``get_range`` returns, and iterating (or
    ``to_list()``) raises the read's error, each time."""
    tr = memory.open().create_transaction()
    result = tr.get_range(begin, end, limit)
    for consume in (list, lambda range_result: range_result.to_list()):
        with pytest.raises(memory.FDBError) as raised:
            consume(result)
        assert raised.value.code == code
