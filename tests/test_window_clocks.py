"""Receipts, delays and ``abandon_after`` hold across recoveries (issue 36): each is bound by
both clocks, read versions and the wall clock, as leases are (tests/test_lease_clocks.py).

A cluster recovery moves read versions about 100 s on in a moment; ``db.advance_time`` moves
the in-memory database's versions alone, as a recovery does, and ``helpers.pass_time`` moves
both clocks, as time passing does. A client whose wall clock is off is played by replacing
fdbqueue's wall clock (``fdbqueue._clock.now``) for a while: an hour fast or slow,
it must neither shorten another client's window nor make another client's item early.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import fdb.tuple
import pytest
from helpers import fault_on, pass_time, run

from fdbqueue import PriorityQueue, Queue, Subspace, _clock, memory, transactional
from fdbqueue._transactions.receipts import Receipts
from fdbqueue.errors import UnknownResultError

pytestmark = pytest.mark.memory_only("moves versions alone with db.advance_time()")

#: A recovery's jump of the version clock, in seconds of versions.
RECOVERY = 100.0
HOUR = 3600.0
SHAPES = [
    pytest.param("queue", 1, False, id="Queue-1"),
    pytest.param("queue", 1, True, id="Queue-1-high-contention"),
    pytest.param("queue", 4, False, id="Queue-4"),
    pytest.param("priority", 1, False, id="PriorityQueue-1"),
    pytest.param("priority", 4, True, id="PriorityQueue-4-high-contention"),
]


@contextlib.contextmanager
def clock_off_by(seconds: float) -> Iterator[None]:
    """This client's wall clock runs ``seconds`` ahead (behind, when negative) meanwhile."""
    original = _clock.now
    _clock.now = lambda: memory.wall_clock() + seconds
    try:
        yield
    finally:
        _clock.now = original


def make(kind: str, shards: int, high_contention: bool, subspace: Any) -> tuple[Any, Any, Any]:
    """(queue, put(db, value, delay), take(db, **blocking))."""
    if kind == "queue":
        queue: Any = Queue(subspace, shards=shards, high_contention=high_contention)
        return queue, lambda db, v, delay=None: queue.enqueue(db, v, delay=delay), queue.dequeue
    queue = PriorityQueue(subspace, shards=shards, high_contention=high_contention)
    return queue, lambda db, v, delay=None: queue.push(db, v, 3, delay=delay), queue.pop_min


# -- delays -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "shards", "high_contention"), SHAPES)
def test_a_recovery_right_after_a_delay_starts_does_not_make_it_due(
    db, subspace, kind, shards, high_contention
):
    queue, put, take = make(kind, shards, high_contention, subspace)
    put(db, "later", 30)
    db.advance_time(RECOVERY)  # versions jump past the delay, the wall clock does not
    assert take(db) is None
    assert queue.claim(db, lease=10) is None
    with queue.consumer(db) as session:
        assert session.take() is None
    db.advance_time(RECOVERY)
    pass_time(db, 29)
    assert take(db) is None  # 29 s of wall clock: not yet
    pass_time(db, 2)
    assert take(db) == "later"
    assert take(db) is None


def test_a_blocked_take_waits_out_the_seconds_a_recovery_skipped(db, subspace):
    """A blocked consumer does not wake to deliver an item a recovery made due by versions
    alone (nor spin: it sleeps until the wall clock's due time, past its timeout here)."""
    queue, put, _take = make("queue", 1, False, subspace)
    put(db, "later", 30)
    db.advance_time(RECOVERY)
    assert queue.dequeue(db, block=True, timeout=0.3) is None
    assert queue.claim(db, lease=10, block=True, timeout=0.3) is None


@pytest.mark.parametrize("skew", [HOUR, -HOUR])
def test_a_client_whose_clock_is_off_by_an_hour_takes_no_item_early(db, subspace, skew):
    """Neither a consumer's clock an hour fast nor an enqueuer's an hour slow makes an item
    due before its versions do."""
    queue, put, take = make("queue", 1, False, subspace)
    if skew < 0:
        with clock_off_by(skew):
            put(db, "later", 30)
    else:
        put(db, "later", 30)
    with clock_off_by(max(skew, 0.0)):
        assert take(db) is None
        assert queue.claim(db, lease=10) is None
    pass_time(db, 31)
    assert take(db) == "later"


def test_a_delayed_record_without_its_due_time_falls_due_by_versions(db, subspace):
    """Records written before the wall clock was recorded (``(due version, batch id, i)``)
    fall due by their versions alone."""
    _queue, put, take = make("queue", 1, False, subspace)
    put(db, "old", 30)
    delayed = subspace.key() + b"\xff" + fdb.tuple.pack(("delayed",))

    @transactional
    def strip_due_time(tr: Any) -> None:
        for record in list(tr.get_range_startswith(delayed)):
            parts = fdb.tuple.unpack(record.key[len(subspace.key()) + 1 :])
            assert isinstance(parts[2], int)  # the wall-clock due time, in microseconds
            del tr[record.key]
            old = (parts[0], parts[1], *parts[3:])
            tr[subspace.key() + b"\xff" + fdb.tuple.pack(old)] = record.value

    strip_due_time(db)
    assert take(db) is None
    db.advance_time(31)  # versions only
    assert take(db) == "old"


# -- receipts -----------------------------------------------------------------------------------


def counter(tr: Any) -> int:
    value = tr.get(b"counter")
    return int(bytes(value)) if value.present() else 0


def increment(tr: Any) -> int:
    count = counter(tr) + 1
    tr[b"counter"] = str(count).encode()
    return count


def test_calls_under_recoveries_resolve_their_receipts_within_their_seconds():
    """The issue's measurement, small: recoveries advance versions past a receipt's lifetime
    (10 s here) between an attempt and its resolution; every call is still resolved (no
    UnknownResultError) and applied once."""
    db = memory.open(seed=3, faults=memory.Faults(recovery=0.3, recovery_seconds=0.0))
    receipts = Receipts(Subspace(("recoveries",)), lifetime=10.0)
    for n in range(1, 41):
        assert receipts.run(db, increment) == n
    db.faults = memory.Faults()
    assert run(db, counter) == 40
    assert db.stats()["injected_recovery"] > 5


def resolve_after(receipts: Receipts, meanwhile: Any) -> None:
    """Run ``meanwhile()`` just before ``receipts`` resolves an unknown result."""
    resolve = receipts._resolve

    def resolve_later(database: Any, attempt: Any) -> Any:
        meanwhile()
        return resolve(database, attempt)

    receipts._resolve = resolve_later  # type: ignore[method-assign]


@pytest.mark.parametrize("skew", [0.0, HOUR, -HOUR])
def test_a_receipt_survives_recoveries_and_other_clients_expiring_receipts(skew):
    """Between an applied 1021 and its resolution, recoveries move versions past the
    receipt's lifetime and another client (its clock an hour fast or slow, or right) writes,
    expiring old receipts: the receipt is still there, the call returns what it did once."""
    db = memory.open()
    subspace = Subspace(("survives",))
    mine = Receipts(subspace, lifetime=10.0)
    other = Receipts(subspace, lifetime=10.0)

    def recoveries_and_another_client() -> None:
        for _ in range(3):
            db.advance_time(RECOVERY)
            with clock_off_by(skew):
                other.run(db, lambda tr: tr.set(b"other", b"1"))  # expires old receipts

    resolve_after(mine, recoveries_and_another_client)
    with fault_on("commit_unknown_result", applied=True) as injected:
        assert mine.run(db, increment) == 1
    assert injected
    assert run(db, counter) == 1


def test_receipts_expire_once_both_clocks_passed_their_lifetime_and_the_skew():
    """A receipt left by a client that stopped goes once its lifetime passed in versions and,
    by the wall clock, its lifetime plus the clock skew allowed (an hour)."""
    db = memory.open()
    subspace = Subspace(("expiry",))
    stopped = Receipts(subspace, lifetime=10.0)
    other = Receipts(subspace, lifetime=10.0)
    start, stop = subspace["receipts"].range().start, subspace["receipts"].range().stop

    def receipts_stored() -> int:
        return len(run(db, lambda tr: list(tr.get_range(start, stop))))

    def the_client_stops() -> None:
        raise KeyboardInterrupt  # it never resolves: its receipt stays

    resolve_after(stopped, the_client_stops)
    with pytest.raises(KeyboardInterrupt), fault_on("commit_unknown_result", applied=True):
        stopped.run(db, increment)
    assert receipts_stored() == 1
    db.advance_time(RECOVERY)  # versions past the lifetime
    other.run(db, lambda tr: tr.set(b"other", b"1"))
    assert receipts_stored() == 2  # the wall clock has not passed it: kept, with other's
    with clock_off_by(HOUR):  # nor an hour-fast clock
        db.advance_time(RECOVERY)
        other.run(db, lambda tr: tr.set(b"other", b"2"))
    assert receipts_stored() == 2  # other's first went (its call returned), not the stopped's
    from fdbqueue._transactions.receipts import CLOCK_SKEW

    pass_time(db, 10 + CLOCK_SKEW + 1)
    other.run(db, lambda tr: tr.set(b"other", b"3"))
    assert receipts_stored() == 1  # the stopped client's went; the last call's own remains


def test_an_unknown_result_is_unknown_only_once_both_clocks_passed_the_lifetime():
    db = memory.open()
    receipts = Receipts(Subspace(("meta",)), lifetime=10.0)
    resolve_after(receipts, lambda: db.advance_time(11))  # versions only: it finds out
    with fault_on("commit_unknown_result", applied=True):
        assert receipts.run(db, increment) == 1
    resolve = Receipts._resolve.__get__(receipts)
    receipts._resolve = resolve  # type: ignore[method-assign]
    resolve_after(receipts, lambda: pass_time(db, 11))  # both clocks: too old to tell
    with fault_on("commit_unknown_result", applied=True), pytest.raises(UnknownResultError):
        receipts.run(db, increment)
    assert run(db, counter) == 2


# -- abandon_after ------------------------------------------------------------------------------


def dead_and_live(db: Any, subspace: Any) -> tuple[Any, Any]:
    """A queue holding i0-i4 and a session that took i0, reserved i1 and died, and a live
    session that took i2 (i1 stays reserved)."""
    queue: Any = Queue(subspace)
    queue.enqueue_many(db, ["i0", "i1", "i2", "i3", "i4"])
    dead = queue.consumer(db, prefetch=1, abandon_after=2)
    assert dead.take() == "i0"  # and reserves i1 for its next call; then it "dies"
    live = queue.consumer(db, abandon_after=2)
    assert live.take() == "i2"
    return queue, live


def test_a_recovery_does_not_shorten_abandon_after(db, subspace):
    _queue, live = dead_and_live(db, subspace)
    db.advance_time(RECOVERY)  # versions say abandoned, the wall clock does not
    assert live.take() == "i3"  # the reservation still holds i1
    pass_time(db, 3)
    assert live.take() == "i1"  # now it was abandoned: i1 is next in line
    assert live.take() == "i4"
    live.close()


@pytest.mark.parametrize("skew", [HOUR, -HOUR])
def test_a_client_whose_clock_is_off_by_an_hour_does_not_clear_fresh_requests(db, subspace, skew):
    if skew < 0:  # the dead session's clock was slow: its request looks an hour old
        queue: Any = Queue(subspace)
        queue.enqueue_many(db, ["i0", "i1", "i2", "i3", "i4"])
        with clock_off_by(skew):
            dead = queue.consumer(db, prefetch=1, abandon_after=2)
            assert dead.take() == "i0"
        live = queue.consumer(db, abandon_after=2)
        assert live.take() == "i2"
        assert live.take() == "i3"
    else:  # the live session's clock is fast
        _queue, live = dead_and_live(db, subspace)
        with clock_off_by(skew):
            assert live.take() == "i3"
    pass_time(db, 3)
    assert live.take() == "i1"
    live.close()


def test_a_request_without_its_wall_clock_time_is_abandoned_by_versions(db, subspace):
    """Requests written before the wall clock was recorded (an empty value, or the 8-byte
    version of their last refresh) are abandoned by their versions alone."""
    _queue, live = dead_and_live(db, subspace)
    line = subspace.key() + b"\xff" + fdb.tuple.pack(("line",))

    @transactional
    def strip_wall_clock(tr: Any) -> None:
        for request in list(tr.get_range_startswith(line)):
            tr[request.key] = b""

    strip_wall_clock(db)
    db.advance_time(3)  # versions only
    assert live.take() == "i1"
    live.close()


def test_a_waiting_session_keeps_its_place_across_recoveries(db, subspace):
    """A session blocked in line keeps its request across a recovery: a take that comes
    after does not clear it as abandoned, and the next item goes to the waiter."""
    queue: Any = Queue(subspace)
    line = subspace.key() + b"\xff" + fdb.tuple.pack(("line",))

    def requests() -> int:
        return len(run(db, lambda tr: list(tr.get_range_startswith(line))))

    got: list[Any] = []
    waiter = queue.consumer(db, abandon_after=2)
    thread = threading.Thread(target=lambda: got.append(waiter.take(block=True, timeout=5)))
    thread.start()
    try:
        for _ in range(100):  # until its request is in line
            if requests():
                break
            threading.Event().wait(0.02)
        db.advance_time(RECOVERY)
        with queue.consumer(db, abandon_after=2) as other:
            assert other.take() is None
        assert requests() == 1  # the waiter's, not cleared as abandoned
        queue.enqueue(db, "first")
    finally:
        thread.join(10)
    waiter.close()
    assert got == ["first"]
