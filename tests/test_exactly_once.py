"""Exactly-once enqueue and dequeue when commits fail with unknown results (receipts)."""

from __future__ import annotations

import contextlib
import weakref

import fdb.tuple
import pytest
from click.testing import CliRunner
from helpers import PoisonCodec, all_keys, despite_timeouts, pass_time, run_threads

from fdbqueue import LeaseError, PriorityQueue, Queue, Subspace, memory
from fdbqueue._transactions import receipts as receipts_module
from fdbqueue._transactions.receipts import RECEIPT_LIFETIME, Receipts
from fdbqueue.cli import cli
from fdbqueue.errors import UnknownResultError

FAULTS = memory.Faults(not_committed=0.1, commit_unknown_result=0.3, transaction_too_old=0.1)


def make(kind, subspace, codec="tuple", high_contention=False):
    if kind == "queue":
        queue = Queue(subspace, codec=codec, high_contention=high_contention)
        return queue, queue.enqueue, queue.dequeue
    queue = PriorityQueue(subspace, codec=codec, high_contention=high_contention)
    return queue, lambda db, value: queue.push(db, value, priority=0), queue.pop_min


def values(codec, n):
    return [b"v%03d" % i for i in range(n)] if codec == "raw" else [("v", i) for i in range(n)]


@pytest.mark.parametrize("kind", ["queue", "priority"])
@pytest.mark.parametrize(
    "codec", ["tuple", pytest.param("raw", marks=pytest.mark.slow("hundreds of faulty commits"))]
)
@pytest.mark.parametrize("high_contention", [False, True])
def test_under_faults_every_item_is_enqueued_once_and_dequeued_once(kind, codec, high_contention):
    db = memory.open(faults=FAULTS, seed=11)
    queue, push, pop = make(kind, Subspace(("eo",)), codec, high_contention)
    expected = values(codec, 60)
    for value in expected:
        push(db, value)
    taken = []
    while (value := pop(db)) is not None:
        taken.append(value)
    stats = db.stats()
    assert stats["injected_commit_unknown_result_applied"] > 0  # the hazard really happened
    assert taken == expected  # none lost, none twice, in order
    db.faults = memory.Faults()
    assert queue.size(db) == 0
    assert queue.empty(db)


def test_dequeue_many_returns_exactly_what_it_removed():
    db = memory.open(seed=5)
    queue = Queue(Subspace(("many",)))
    queue.enqueue_many(db, range(100))
    db.faults = memory.Faults(commit_unknown_result=0.5)
    taken = []
    while batch := queue.dequeue_many(db, 7):
        taken.extend(batch)
    assert taken == list(range(100))
    assert db.stats()["injected_commit_unknown_result_applied"] > 0


def test_without_faults_receipts_cost_no_extra_transaction():
    db = memory.open()
    queue = Queue(Subspace(("cost",)))
    queue.enqueue_many(db, range(10))
    before = db.stats()["transactions"]
    for _ in range(10):
        queue.dequeue(db)
        queue.enqueue(db, "x")
    assert db.stats()["transactions"] - before == 20


def test_receipts_keep_their_layout_byte_for_byte(monkeypatch):
    """Each writing call leaves ``P + b"\\xff" + pack(("receipts", read version, call id))
    -> pack((wall clock in whole microseconds,))`` (the module docstring), the one receipt
    under the queue once the next call cleared the one before; a read-only call writes none."""
    import random
    import types

    import fdbqueue._clock

    randomness = random.Random(37)
    call_ids = [bytes(16), b"\xff" * 16, b"\x00\xff" * 8] + [
        randomness.randbytes(16) for _ in range(41)
    ]
    given = iter([*call_ids, b"read-only call.."])  # the last call writes no receipt
    monkeypatch.setattr(receipts_module, "os", types.SimpleNamespace(urandom=lambda n: next(given)))
    clock = [1_712_345_678.0]
    monkeypatch.setattr(fdbqueue._clock, "now", lambda: clock[0])
    db = memory.open()
    prefix = b"\x01layout\x00"
    queue = Queue(Subspace(rawPrefix=prefix))
    receipts_begin = prefix + b"\xff" + fdb.tuple.pack(("receipts",))

    def version() -> int:
        return db.create_transaction().get_read_version().wait()

    def receipts_written() -> list[tuple[bytes, bytes]]:
        return [(k, v) for k, v in all_keys(db, queue.subspace) if k.startswith(receipts_begin)]

    calls = [
        lambda: queue.enqueue(db, "a"),
        lambda: queue.enqueue_many(db, ["b", "c"]),
        lambda: queue.dequeue(db),
        lambda: queue.dequeue_many(db, 2),
    ]
    for step, call_id in enumerate(call_ids):
        clock[0] += 1.234567 + step / 7
        before = version()
        calls[step % len(calls)]()
        after = version()
        [(key, value)] = receipts_written()
        read_version = fdb.tuple.unpack(key[len(receipts_begin) :])[0]
        assert before <= read_version <= after
        assert key == prefix + b"\xff" + fdb.tuple.pack(("receipts", read_version, call_id))
        microseconds = round(clock[0] * 1_000_000)  # floored to the second: shared values
        assert value == fdb.tuple.pack((microseconds - microseconds % 1_000_000,))
    assert queue.dequeue(db) is None  # read-only: the last receipt stays, no new one
    assert len(receipts_written()) == 1


def receipt_counter(db, queue):
    """``count()``: how many receipts are stored under ``queue``'s subspace."""
    subspace = queue.subspace
    receipts = queue._store.receipts.subspace  # type: ignore[attr-defined]
    return lambda: sum(1 for key, _ in all_keys(db, subspace) if receipts.contains(key))


def test_finished_receipts_are_cleared_by_the_next_operation(db, subspace):
    first, second = Queue(subspace), Queue(subspace)
    receipt_count = receipt_counter(db, first)
    first.enqueue(db, "a")
    first.enqueue(db, "b")
    assert receipt_count() == 1  # "a" returned: the next write cleared it
    second.enqueue(db, "c")
    assert receipt_count() == 1  # another object of the same process and queue: the same
    assert first.dequeue_many(db, 5) == ["a", "b", "c"]
    assert receipt_count() == 1  # the dequeue's receipt replaced the enqueue's


@contextlib.contextmanager
def another_process():
    """Calls meanwhile are a process's of their own: its finished receipts are its own
    bookkeeping's (kept per process, database and queue), which the calls after the block,
    this process's, never clear; as a process that stopped."""
    saved = receipts_module._BOOKS
    receipts_module._BOOKS = weakref.WeakKeyDictionary()
    try:
        yield
    finally:
        receipts_module._BOOKS = saved


@pytest.mark.memory_only("moves time past RECEIPT_LIFETIME with db.pass_time()")
def test_receipts_of_a_process_that_stopped_expire(db, subspace):
    first, second = Queue(subspace), Queue(subspace)
    receipt_count = receipt_counter(db, first)
    with another_process():
        first.enqueue(db, "a")
    second.enqueue(db, "b")
    assert receipt_count() == 2  # one per process
    pass_time(db, RECEIPT_LIFETIME + receipts_module.CLOCK_SKEW + 1)
    second.dequeue(db)
    assert receipt_count() == 1  # the stopped process's expired; only the dequeue's remains


def test_receipts_are_bounded_by_live_writers_not_by_queue_objects(db, subspace):
    """Issue 36: 2,000 enqueue+dequeue pairs through a Queue built per call (a web handler)
    left 4,000 receipts for a day; the bookkeeping of finished receipts is now the process's."""
    for i in range(1000):
        Queue(subspace).enqueue(db, i)
        assert Queue(subspace).dequeue(db) == i
    assert receipt_counter(db, Queue(subspace))() <= 64


def test_receipts_are_bounded_by_threads_with_queue_objects_per_call(db, subspace):
    taken = []

    def pairs():
        for j in range(50):
            Queue(subspace).enqueue(db, j)
            taken.append(Queue(subspace).dequeue(db))

    run_threads(pairs, 8)
    assert len(taken) == 400 and None not in taken
    assert Queue(subspace).size(db) == 0
    assert receipt_counter(db, Queue(subspace))() <= 64


def test_a_one_shot_command_per_process_leaves_no_receipt(db, subspace):
    """``fdbqueue push`` (and ``pop``) run once per process: each clears its own finished
    receipt before it exits (a process of its own per command, as far as receipts know)."""
    jobs = ",".join([*fdb.tuple.unpack(subspace.key()), "jobs"])
    for i in range(20):
        for command in (["push", str(i)], ["pop"]):
            with another_process():
                result = CliRunner().invoke(cli, ["--queue", jobs, *command], obj={"database": db})
            assert result.exit_code == 0, result.output
    assert receipt_counter(db, Queue(subspace["jobs"]))() == 0


@pytest.mark.slow("the resolution's retries back off for seconds under a 100% fault rate")
def test_an_unknown_result_too_old_to_check_raises():
    db = memory.open(seed=2)
    receipts = Receipts(Subspace(("meta",)), lifetime=10.0)
    db.faults = memory.Faults(commit_unknown_result=1.0)
    calls = []

    def body(tr):
        calls.append(1)
        tr.get(b"effect").wait()  # the attempt's read version is taken here
        tr[b"effect"] = b"1"
        pass_time(db, 11)  # the resolution comes more than a lifetime later
        return "done"

    with pytest.raises(UnknownResultError):
        receipts.run(db, body)
    assert len(calls) == 1


def _applies(seed):
    probe = memory.open(seed=seed, faults=memory.Faults(commit_unknown_result=1.0))
    tr = probe.create_transaction()
    tr[b"k"] = b"v"
    with contextlib.suppress(memory.FDBError):
        tr.commit().wait()
    return probe.create_transaction().get(b"k").present()


def applied_seed():
    """A seed whose first writing commit, under a 100% 1021 fault, is applied."""
    return next(s for s in range(100) if _applies(s))


@pytest.mark.parametrize("kind", ["queue", "priority"])
def test_clear_between_an_applied_unknown_result_and_its_retry_changes_nothing(kind):
    """The adversary's C2: clear() used to delete the receipts, so the retry applied again."""
    subspace = Subspace(("clear-race",))
    db = memory.open(seed=applied_seed(), faults=memory.Faults(commit_unknown_result=1.0))
    queue, push, pop = make(kind, subspace)
    receipts = queue._store.receipts  # type: ignore[attr-defined]
    resolve = receipts._resolve

    def clear_then_resolve(database, attempt):
        db.faults = memory.Faults()
        queue.clear(db)  # another client clears the queue while the call finds out
        return resolve(database, attempt)

    receipts._resolve = clear_then_resolve
    push(db, "X")  # applied, reported as 1021; the queue is cleared; the call resolves
    assert pop(db) is None  # X was enqueued once, before the clear: not again after it

    push(db, "Y")
    db.faults = memory.Faults(commit_unknown_result=1.0)
    db._random.seed(applied_seed())  # the next writing commit is applied, then 1021
    assert pop(db) == "Y"  # the value removed is the value returned, clear or no clear
    assert queue.size(db) == 0


def test_a_recovery_between_an_attempt_and_its_retry_is_resolved_not_unknown():
    """A recovery advances versions by about 100 s; the 1021 it causes is resolved."""
    db = memory.open(seed=applied_seed(), faults=memory.Faults(commit_unknown_result=1.0))
    queue = Queue(Subspace(("recovered",)))
    original_on_error = memory.Transaction.on_error

    def on_error_after_recovery(tr, error):
        db.faults = memory.Faults()
        pass_time(db, 100)
        return original_on_error(tr, error)

    memory.Transaction.on_error = on_error_after_recovery  # type: ignore[method-assign]
    try:
        queue.enqueue(db, "once")
    finally:
        memory.Transaction.on_error = original_on_error  # type: ignore[method-assign]
    assert queue.dequeue_many(db, 10) == ["once"]


def test_a_read_only_attempt_writes_no_receipt(db, subspace):
    queue = Queue(subspace)
    assert queue.dequeue(db) is None
    assert queue.dequeue_many(db, 3) == []
    assert all_keys(db, subspace) == []


@pytest.mark.memory_only("counts commits with db.stats()")
def test_a_read_only_attempt_commits_nothing(db, subspace):
    queue = Queue(subspace)
    assert queue.dequeue(db) is None
    assert all_keys(db, subspace) == []
    assert db.stats()["commits"] == 0


def test_with_exactly_once_off_a_retried_enqueue_can_write_twice():
    """The recipes' behaviour, which receipts prevent (see the test above)."""
    db = memory.open(seed=11)
    subspace = Subspace(("off",))
    queue = Queue(subspace, exactly_once=False)
    db.faults = memory.Faults(commit_unknown_result=0.5)
    for value in range(40):
        queue.enqueue(db, value)
    db.faults = memory.Faults()
    assert len(queue.dequeue_many(db, 1000)) > 40  # some enqueues were applied twice
    with pytest.raises(TypeError):
        Queue(subspace, exactly_once="yes")


EVERY_FAULT = memory.Faults(
    not_committed=0.05,
    commit_unknown_result=0.1,
    transaction_too_old=0.05,
    timed_out=0.1,
    recovery=0.03,
)


@pytest.mark.parametrize("kind", ["queue", "priority"])
@pytest.mark.parametrize("high_contention", [False, True])
def test_under_every_fault_kind_every_item_is_enqueued_once_and_dequeued_once(
    kind, high_contention
):
    db = memory.open(faults=EVERY_FAULT, seed=23)
    queue, push, pop = make(kind, Subspace(("every-fault",)), "tuple", high_contention)
    expected = values("tuple", 80)
    for value in expected[:40]:
        despite_timeouts(lambda value=value: push(db, value))
    if kind == "queue":
        despite_timeouts(lambda: queue.enqueue_many(db, expected[40:]))
    else:
        for value in expected[40:]:
            despite_timeouts(lambda value=value: push(db, value))
    taken = []
    while True:
        if kind == "queue" and len(taken) % 3 == 0:
            batch = despite_timeouts(lambda: queue.dequeue_many(db, 3))
            if not batch:
                break
            taken.extend(batch)
            continue
        value = despite_timeouts(lambda: pop(db))
        if value is None:
            break
        taken.append(value)
    db.faults = memory.Faults()
    db.settle()  # commits still in flight land now, or are dropped
    stats = db.stats()
    for hazard in ("commit_unknown_result", "timed_out", "recovery"):
        assert stats[f"injected_{hazard}"] > 0, hazard
    assert taken == expected  # none lost, none twice, in order, and no UnknownResultError
    assert queue.size(db) == 0 and queue.empty(db)
    assert pop(db) is None


def test_under_every_fault_kind_leases_are_acknowledged_once():
    db = memory.open(faults=EVERY_FAULT, seed=31)
    queue = Queue(Subspace(("every-fault-leases",)), max_deliveries=None)
    despite_timeouts(lambda: queue.enqueue_many(db, list(range(60))))
    acknowledged = []
    while len(acknowledged) < 60:
        lease = despite_timeouts(lambda: queue.claim(db, lease=30))
        if lease is None:  # the rest is leased (a recovery may expire them early)
            pass_time(db, 31)
            continue
        try:
            if lease.value % 4 == 0:
                lease = despite_timeouts(lambda lease=lease: queue.extend(db, lease, 30))
            if lease.value % 5 == 0 and lease.deliveries == 1:
                despite_timeouts(lambda lease=lease: queue.release(db, lease))
                continue
            despite_timeouts(lambda lease=lease: queue.ack(db, lease))
            acknowledged.append(lease.value)
        except LeaseError:
            continue  # expired (a recovery moved versions on): delivered again later
    db.faults = memory.Faults()
    assert sorted(acknowledged) == list(range(60))
    assert queue.claim(db, lease=1) is None and queue.leases(db) == []
    assert db.stats()["injected_recovery"] > 0 and db.stats()["injected_timed_out"] > 0


@pytest.mark.parametrize("operation", ["dequeue", "dequeue_many", "claim"])
def test_a_take_that_only_moved_poison_aside_is_exactly_once_too(operation):
    """A take that found only poison wrote (the move to the dead letters) though it returns
    nothing: a 1031 on it must still mean "no effect", so it needs a receipt like any write.
    Found by test_model: the in-flight commit of such a claim landed during a later call."""
    outcomes = set()
    for seed in range(300):
        db = memory.open(seed=seed)
        queue = Queue(Subspace(("poison",)), codec=PoisonCodec())
        queue.enqueue(db, b"!bad")
        db.faults = memory.Faults(timed_out=0.5)
        try:
            if operation == "dequeue":
                queue.dequeue(db)
            elif operation == "dequeue_many":
                queue.dequeue_many(db, 3)
            else:
                queue.claim(db, lease=10)
            timed_out = False
        except memory.FDBError as error:  # only 1031 is expected
            assert error.code == 1031, error
            timed_out = True
        db.faults = memory.Faults()
        db.settle()  # land or drop every commit left in flight
        moved = len(queue.dead_letters(db))
        assert moved == (0 if timed_out else 1), (seed, timed_out, moved)
        assert queue.size(db) == 1 - moved
        outcomes.add(timed_out)
    assert outcomes == {True, False}
