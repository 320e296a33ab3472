"""Threaded soak: producers, crashing consumers and lease workers under every fault kind.

Sixteen threads share one high-contention queue on the in-memory database: 4 producers
enqueue, 6 consumers take in line (3 with one call each, 3 through consumer sessions with
prefetch 0 or 1), and 6 lease workers claim, then acknowledge, release, or "crash" (let the
lease expire). Consumers crash too, at every step of taking in line: right after their
request's registration committed, in the middle of a take (built, never committed), and,
sessions, holding the places their prefetch reserved (never closed). 5% of writing commits
fail with each
fault kind: 1020, 1021 (applied or not), 1007, 1031 (dropped, or left in flight to land
later) and a recovery (1021 and versions 100 s ahead). A call that raises 1031 took no effect
and is made again.

The check: every item was acknowledged or dequeued exactly once (none lost, none twice), an
item was delivered again only after its previous lease expired or was released, no call raised
UnknownResultError, and after time passes beyond every lease and ``abandon_after``, nothing is
stranded (no item left in a lease, nobody left in line, size 0). CI runs a short soak;
``FDBQUEUE_SOAK_ITEMS=20000 pytest -s tests/test_soak.py`` runs a long one and prints its figures.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import fdb.tuple
import pytest
from helpers import despite_timeouts, pass_time

from fdbqueue import LeaseError, Queue, Subspace, UnknownResultError, memory
from fdbqueue._consuming.sessions import REGISTERED, Consumer

ITEMS = int(os.environ.get("FDBQUEUE_SOAK_ITEMS", "400"))
#: The soak is slow (CI runs it), unless FDBQUEUE_SOAK_ITEMS asks for one.
pytestmark = [] if "FDBQUEUE_SOAK_ITEMS" in os.environ else [pytest.mark.slow("the soak")]
FAULTS = memory.Faults(
    not_committed=0.05,
    commit_unknown_result=0.05,
    transaction_too_old=0.05,
    timed_out=0.05,
    recovery=0.05,
)
LATENCY = memory.Latency(grv=0.0002, read=0.0001, commit=0.0005)
LEASE_SECONDS = 0.2
ABANDON_AFTER = 1.0
CRASH_CHANCE = 0.02  # per step of taking in line
VERSIONS_PER_SECOND = 1_000_000


class Crash(Exception):
    """A consumer dies here: it stops without cleaning anything up."""


@contextlib.contextmanager
def made_to_crash(crashes: Counter[str], lock: threading.Lock) -> Iterator[None]:
    """Every consumer session's attempts (:meth:`Consumer._attempt`) may die: in the middle
    of one (its writes made, never committed), or right after a registration committed (at
    the start of the next attempt). Crash goes through fdbqueue's code to the thread."""
    original = Consumer._attempt
    registered = threading.local()

    def crash(name: str) -> Crash:
        with lock:
            crashes[name] += 1
        return Crash(name)

    def attempt(self: Consumer, tr: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(registered, "dies", False):
            registered.dies = False
            raise crash("after registering")
        outcome = original(self, tr, *args, **kwargs)
        roll = random.random()
        if roll < CRASH_CHANCE:
            raise crash("in the middle of a take")
        registered.dies = outcome[0] == REGISTERED and roll < 3 * CRASH_CHANCE
        return outcome

    Consumer._attempt = attempt  # type: ignore[method-assign]
    try:
        yield
    finally:
        Consumer._attempt = original  # type: ignore[method-assign]


def test_nothing_is_lost_duplicated_or_stranded_under_every_fault_and_crash():
    db = memory.open(latency=LATENCY, faults=FAULTS, seed=1)
    subspace = Subspace(("soak",))
    queue = Queue(subspace, high_contention=True, max_deliveries=None, abandon_after=ABANDON_AFTER)
    crashes: Counter[str] = Counter()
    lock = threading.Lock()
    finished: Counter[int] = Counter()  # value -> times acknowledged or dequeued
    claims: dict[int, list[tuple[int, int, str]]] = {}  # value -> (claimed at, expiry, how)
    errors: list[BaseException] = []
    timeouts: list[int] = []
    done = threading.Event()

    def record_finished(value: int) -> None:
        with lock:
            finished[value] += 1
            if len(finished) >= ITEMS:
                done.set()

    def produce(values: range) -> None:
        for value in values:
            despite_timeouts(lambda value=value: queue.enqueue(db, value), timeouts)

    def consume() -> None:
        while not done.is_set():
            try:
                value = despite_timeouts(
                    lambda: queue.dequeue(db, block=True, timeout=0.05), timeouts
                )
            except Crash:
                continue  # the consumer died; a new one takes its place
            if value is not None:
                record_finished(value)

    def consume_in_a_session(seed: int) -> None:
        chance = random.Random(seed)
        session = None
        while not done.is_set():
            if session is None:  # a new consumer (the one before died, never closed)
                prefetch = chance.choice([0, 1])
                session = queue.consumer(db, prefetch=prefetch, abandon_after=ABANDON_AFTER)
            try:
                take = functools.partial(session.take, block=True, timeout=0.05)
                value = despite_timeouts(take, timeouts)
            except Crash:
                session = None
                continue
            if value is not None:
                record_finished(value)
                if session.prefetch and chance.random() < 5 * CRASH_CHANCE:
                    with lock:
                        crashes["holding its reservation"] += 1
                    session = None

    def work(seed: int) -> None:
        chance = random.Random(seed)
        while not done.is_set():
            try:
                lease = despite_timeouts(lambda: queue.claim(db, lease=LEASE_SECONDS), timeouts)
            except Crash:
                continue  # the worker died claiming in line; a new one takes its place
            if lease is None:
                time.sleep(0.01)
                continue
            claimed_at = lease.expiry_version - int(LEASE_SECONDS * VERSIONS_PER_SECOND)
            roll = chance.random()
            how = "ack" if roll < 0.8 else "release" if roll < 0.9 else "crash"
            with lock:
                claims.setdefault(lease.value, []).append((claimed_at, lease.expiry_version, how))
            if how == "crash":
                continue  # the lease expires; the item is delivered again
            try:
                if how == "ack":
                    despite_timeouts(lambda lease=lease: queue.ack(db, lease), timeouts)
                    record_finished(lease.value)
                else:
                    despite_timeouts(lambda lease=lease: queue.release(db, lease), timeouts)
            except LeaseError:  # too slow (or a recovery moved versions on): delivered again
                with lock:
                    history = claims[lease.value]
                    mine = history.index((claimed_at, lease.expiry_version, how))
                    history[mine] = (claimed_at, lease.expiry_version, "expired")

    def guarded(target: Any, *args: Any) -> threading.Thread:
        def run() -> None:
            try:
                target(*args)
            except BaseException as error:
                errors.append(error)
                done.set()

        return threading.Thread(target=run)

    started = time.monotonic()
    share = ITEMS // 4
    threads = [
        guarded(produce, range(n * share, ITEMS if n == 3 else (n + 1) * share)) for n in range(4)
    ]
    threads += [guarded(consume) for _ in range(3)]
    threads += [guarded(consume_in_a_session, n) for n in range(3)]
    threads += [guarded(work, n) for n in range(6)]
    with made_to_crash(crashes, lock):
        for thread in threads:
            thread.start()
        done.wait(timeout=120 + ITEMS / 20)
        done.set()
        for thread in threads:
            thread.join(30)
    elapsed = time.monotonic() - started

    # Time passes beyond every lease and abandon_after: takes in line get past every dead
    # consumer's request; then one ordinary call of each kind.
    db.faults = memory.Faults()
    db.settle()
    pass_time(db, ABANDON_AFTER + LEASE_SECONDS + 60)
    plain = Queue(subspace, max_deliveries=None)
    late: list[Any] = []
    while (value := queue.dequeue(db)) is not None:
        late.append(value)
    in_line = queue.requests_in_line(db)
    while batch := plain.dequeue_many(db, 1000):
        late.extend(batch)
    while (lease := plain.claim(db, lease=30)) is not None:
        late.append(lease.value)
        plain.ack(db, lease)
    for value in late:
        finished[value] += 1
    stranded = stranded_items(db, subspace)
    stats = db.stats()
    lost = ITEMS - len([value for value in range(ITEMS) if finished[value]])
    duplicated = sum(count - 1 for count in finished.values() if count > 1)
    print(
        f"\nsoak: {ITEMS} items in {elapsed:.1f} s; lost {lost}, duplicated {duplicated}, "
        f"stranded {stranded}, found only after time passed {len(late)}\n"
        f"  faults: "
        + ", ".join(f"{kind} {stats['injected_' + kind]}" for kind in FAULT_KINDS)
        + f" (applied although reported failed: {applied(stats)})\n"
        f"  consumer crashes: {dict(crashes)}; calls that raised 1031 and were made again: "
        f"{len(timeouts)}"
    )
    assert not errors, errors
    assert not any(isinstance(error, UnknownResultError) for error in errors)
    assert lost == 0, "an item was lost"
    assert duplicated == 0, "an item was acknowledged or dequeued twice"
    assert stranded == 0 and plain.size(db) == 0 and plain.empty(db), "an item was stranded"
    assert in_line == 0, "a dead consumer's request still holds the line"
    for kind in FAULT_KINDS:
        assert stats[f"injected_{kind}"] > 0, kind
    assert set(crashes) == {
        "after registering",
        "in the middle of a take",
        "holding its reservation",
    }
    for value, history in claims.items():
        history.sort()  # by claim version: threads record their claims in any order
        for (_, expiry, how), (claimed_at, _, _) in itertools.pairwise(history):
            # Delivered again only once the previous lease was over: released, or expired.
            assert how == "release" or claimed_at > expiry, (value, history)


FAULT_KINDS = (
    "not_committed",
    "commit_unknown_result",
    "transaction_too_old",
    "timed_out",
    "recovery",
)


def applied(stats: dict[str, int]) -> int:
    return (
        stats["injected_commit_unknown_result_applied"]
        + stats["injected_timed_out_applied"]
        + stats["injected_recovery_applied"]
    )


def stranded_items(db: Any, subspace: Subspace) -> int:
    """Items still away from the queue: in a lease."""
    metadata = subspace.key() + b"\xff"
    tr = db.create_transaction()
    away = 0
    for kv in tr.get_range_startswith(metadata):
        name = fdb.tuple.unpack(kv.key[len(metadata) :])[0]
        if name == "leases":
            away += 1
    return away
