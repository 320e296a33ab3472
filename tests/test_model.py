"""Stateful property tests: Queue and PriorityQueue against a simple in-Python model.

Hypothesis runs random sequences of operations (enqueue/push, dequeue/pop, the batch forms,
peek, size, claim, ack, release, extend, lease expiry, requeue, clear) on an in-memory
database, in every mode (plain and high-contention), with each codec, with and without
injected faults of every kind (1020, 1021, 1007, 1031 with commits left in flight, and
recoveries that move versions on by 100 s), with values up to the 100,000-byte limit and, with
a codec that refuses some of its own values, poison items. After every step, every value ever
enqueued is in exactly one place: still queued, leased, a dead letter, consumed or cleared;
and what the queue returns matches the model exactly.

``DyingConsumersModel`` adds consumer sessions that die at every step of taking in line, and
lease workers that die holding leases; there, order is checked as a multiset, and at the end,
once dead sessions' requests are abandoned and leases expired, calls in line and claims must
drain every item exactly once: nothing stranded, nobody left in line.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Any

import fdb.tuple
import pytest
from helpers import TIMED_OUT, RepeatableMachine, or_timed_out, pass_time
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from fdbqueue import (
    LeaseError,
    LeaseExpiredError,
    LeaseNotHeldError,
    PriorityQueue,
    Queue,
    Subspace,
    Undecodable,
    memory,
)
from fdbqueue._transactions.transactional import run_in_retry_loop

FAULTS = memory.Faults(
    not_committed=0.1,
    commit_unknown_result=0.15,
    transaction_too_old=0.1,
    timed_out=0.1,
    recovery=0.03,
)
#: Unknown-outcome commits that were applied, summed over a test's examples: the hazard that
#: receipts remove must really have happened.
APPLIED_UNKNOWN: list[int] = []
LEASE_SECONDS = 10.0
MAX_DELIVERIES = 2


class PoisonAwareCodec:
    """The tuple codec, except that values ``("poison", n)`` cannot be decoded."""

    name = "poison"

    def encode(self, value: Any) -> bytes:
        return bytes(fdb.tuple.pack((value,)))

    def decode(self, data: bytes) -> Any:
        value = fdb.tuple.unpack(data)[0]
        if isinstance(value, tuple) and value and value[0] == "poison":
            raise ValueError("a poison value")
        return value


def is_poison(value: object) -> bool:
    return isinstance(value, tuple) and bool(value) and value[0] == "poison"


def plain(value: object) -> object:
    """A listed value as the model knows it (an Undecodable's stored value, decoded)."""
    if isinstance(value, Undecodable):
        return fdb.tuple.unpack(value.raw)[0]
    return value


class QueueModel(RepeatableMachine):
    """The model: ``queued`` in the order the queue must return them; leases by id."""

    kind = "queue"
    codec = "tuple"
    high_contention = False
    faults = False

    def __init__(self) -> None:
        super().__init__()
        self.db = memory.open(seed=0)
        codec: Any = PoisonAwareCodec() if self.codec == "poison" else self.codec
        options = {
            "codec": codec,
            "high_contention": self.high_contention,
            "max_deliveries": MAX_DELIVERIES,
        }
        subspace = Subspace(("model",))
        self.queue: Any = (
            Queue(subspace, **options)
            if self.kind == "queue"
            else PriorityQueue(subspace, **options)
        )
        if self.faults:
            self.db.faults = FAULTS
        self.counter = itertools.count()
        self.queued: list[tuple[int, int, object]] = []  # (priority, sequence, value), sorted
        self.leases: dict[str, tuple[Any, object]] = {}  # id -> (Lease, value)
        self.expired: set[str] = set()  # items waiting for redelivery: expired or released
        self.released: set[str] = set()
        self.consumed: list[object] = []
        self.dead: list[object] = []
        self.cleared: list[object] = []
        self.everything: list[object] = []  # a requeued value appears once more
        self.priorities: dict[object, int] = {}
        self.moved = 0

    # -- calls ----------------------------------------------------------------------------

    def call(self, function: Any) -> Any:
        """``function()``; TIMED_OUT if it raised 1031 (it then took no effect). After a
        recovery during the call (versions moved on by 100 s), leases past their expiry are
        marked expired."""
        recoveries = self.db.stats()["injected_recovery"]
        try:
            return or_timed_out(function)
        finally:
            if self.db.stats()["injected_recovery"] != recoveries:
                self.recovered = True
                self.refresh_expiry()

    def refresh_expiry(self) -> None:
        """Mark the leases that have expired (after a recovery): both clocks passed their
        expiry, so a recovery alone (versions only) expires none."""
        now = self.db.create_transaction().get_read_version().wait()
        for lease_id, (lease, _value) in self.leases.items():
            if lease.expired(now):
                self.expired.add(lease_id)

    recovered = False

    def value(self, flavor: str) -> object:
        number = next(self.counter)
        if self.codec == "raw":
            base = b"v%05d" % number
            return base + b"\x00" * (100_000 - len(base)) if flavor == "big" else base
        if flavor == "big":  # zero bytes double in the tuple layer: stay under the limit
            return ("v", number, b"\x00" * 49_000)
        if flavor == "poison" and self.codec == "poison":
            return ("poison", number)
        return ("v", number)

    def add(self, value: object, priority: int) -> None:
        self.queued.append((priority, len(self.everything), value))
        self.queued.sort(key=lambda entry: entry[:2])
        self.everything.append(value)
        self.priorities[value] = priority

    def front(self, max_end: bool = False) -> object:
        """The value a take from that end returns, moving poison items before it to the
        dead letters (as the queue does); None when nothing decodable is queued."""
        while self.queued:
            entry = self.end_entry(max_end)
            if not is_poison(entry[2]):
                return entry[2]
            self.queued.remove(entry)
            self.dead.append(entry[2])
        return None

    def peeked(self, max_end: bool = False) -> object:
        candidates = sorted(self.queued, key=lambda e: (-e[0], e[1]) if max_end else e[:2])
        return next((e[2] for e in candidates if not is_poison(e[2])), None)

    def remove(self, value: object) -> None:
        entry = next(e for e in self.queued if e[2] == value)
        self.queued.remove(entry)

    # -- writing --------------------------------------------------------------------------

    @rule(priority=st.integers(-3, 3), flavor=st.sampled_from(["small"] * 6 + ["big", "poison"]))
    def push(self, priority: int, flavor: str) -> None:
        value = self.value(flavor)
        if self.kind == "queue":
            priority = 0
            done = self.call(lambda: self.queue.enqueue(self.db, value))
        else:
            done = self.call(lambda: self.queue.push(self.db, value, priority=priority))
        if done is not TIMED_OUT:
            self.add(value, priority)

    @precondition(lambda self: self.kind == "queue")
    @rule(count=st.integers(0, 4))
    def enqueue_many(self, count: int) -> None:
        values = [self.value("small") for _ in range(count)]
        if self.call(lambda: self.queue.enqueue_many(self.db, values)) is TIMED_OUT:
            return
        for value in values:
            self.add(value, 0)

    @rule()
    def clear(self) -> None:
        if self.call(lambda: self.queue.clear(self.db)) is TIMED_OUT:
            return
        self.cleared.extend(entry[2] for entry in self.queued)
        self.cleared.extend(value for _lease, value in self.leases.values())
        self.cleared.extend(self.dead)
        self.queued, self.leases, self.dead = [], {}, []
        self.expired, self.released = set(), set()

    # -- taking ---------------------------------------------------------------------------

    @rule()
    def take(self) -> None:
        self.refresh_expiry()
        taken = self.call(
            lambda: self.queue.dequeue(self.db) if self.kind == "queue" else self.queue.pop(self.db)
        )
        if taken is TIMED_OUT:
            self.after_timed_out_take()
            return
        waiting = self.take_waiting(1)  # a lease's item waits: taken first (issue 36)
        expected = waiting[0] if waiting else self.front()
        assert taken == expected
        if taken is not None and not waiting:
            self.remove(taken)
        if taken is not None:
            self.consumed.append(taken)

    def waiting(self) -> list[str]:
        """The leases whose items wait (expired, or released), in the order takes take them:
        by their lease key (a release re-keys at version 0)."""

        def key(lease_id: str) -> tuple[int, bytes]:
            lease = self.leases[lease_id][0]
            version = 0 if lease_id in self.released else lease.expiry_version
            return version, bytes.fromhex(lease.id)

        self.refresh_expiry()  # a slow run may outlast a lease in real time too
        return sorted((i for i in self.expired if i in self.leases), key=key)

    def take_waiting(self, n: int) -> list[object]:
        """What a take of ``n`` items takes of the waiting leases: the first ``n`` that may
        be delivered, those out of deliveries before them moved to the dead letters."""
        values: list[object] = []
        if n == 0:  # dequeue_many(db, 0) takes nothing
            return values
        for lease_id in self.waiting():
            lease, value = self.leases[lease_id]
            if lease.deliveries < MAX_DELIVERIES and len(values) == n:
                break
            self._forget(lease_id)
            if lease.deliveries >= MAX_DELIVERIES:
                self.dead.append(value)
            else:
                values.append(value)
        return values

    @precondition(lambda self: self.kind == "priority")
    @rule()
    def take_max(self) -> None:
        self.refresh_expiry()
        taken = self.call(lambda: self.queue.pop_max(self.db))
        if taken is TIMED_OUT:
            self.after_timed_out_take(max_end=True)
            return
        waiting = self.take_waiting(1)
        assert taken == (waiting[0] if waiting else self.front(max_end=True))
        if taken is not None and not waiting:
            self.remove(taken)
        if taken is not None:
            self.consumed.append(taken)

    @precondition(lambda self: self.kind == "queue")
    @rule(count=st.integers(0, 3))
    def dequeue_many(self, count: int) -> None:
        self.refresh_expiry()
        taken = self.call(lambda: self.queue.dequeue_many(self.db, count))
        if taken is TIMED_OUT:
            self.after_timed_out_take()
            return
        expected = self.take_waiting(count)
        while len(expected) < count and (value := self.front()) is not None:
            expected.append(value)
            self.remove(value)
        assert taken == expected
        self.consumed.extend(taken)

    @rule()
    def peek(self) -> None:
        waiting = [
            self.leases[i][1]
            for i in self.waiting()
            if self.leases[i][0].deliveries < MAX_DELIVERIES
        ]
        assert self.queue.peek(self.db) == (waiting[0] if waiting else self.peeked())
        if self.kind == "priority":
            first = waiting[0] if waiting else self.peeked(max_end=True)
            assert self.queue.peek_max(self.db) == first

    # -- leases ---------------------------------------------------------------------------

    @rule()
    def claim(self) -> None:
        self.refresh_expiry()
        self.recovered = False
        lease = self.call(lambda: self.queue.claim(self.db, lease=LEASE_SECONDS))
        if self.recovered:
            # A claim whose commit's outcome was unknown across a recovery learns it at a new
            # version; a lease that expired by then is not returned, it claims again: items
            # may be in leases (expired) the model did not see, redelivered or dead-lettered.
            if lease is not None and lease is not TIMED_OUT:  # not expired when returned
                assert not lease.expired(self.db.create_transaction().get_read_version().wait())
            self.reconcile()
            return
        if lease is TIMED_OUT:
            self._sync_dead_letters({i for i in self.expired if i in self.leases})
            self.after_timed_out_take()
            return
        redeliverable = {lease_id for lease_id in self.expired if lease_id in self.leases}
        if lease is None:
            assert self.front() is None
            if not self.recovered:  # (a recovery after the claim's read expired leases since)
                assert all(self.leases[i][0].deliveries >= MAX_DELIVERIES for i in redeliverable)
            self._sync_dead_letters(redeliverable)
            return
        if lease.deliveries == 1:  # a fresh item: the queue's next one
            if not self.recovered:  # (a recovery during the claim expired leases meanwhile)
                fresh = [i for i in redeliverable if self.leases[i][0].deliveries < MAX_DELIVERIES]
                assert not fresh
            assert lease.value == self.front()
            self.remove(lease.value)
            self._sync_dead_letters(redeliverable)
        else:  # an expired or released one, delivered again
            previous = [i for i in redeliverable if self.leases[i][1] == lease.value]
            assert len(previous) == 1
            assert self.leases[previous[0]][0].deliveries == lease.deliveries - 1
            self._forget(previous[0])
            self._sync_dead_letters(redeliverable - set(previous))
        self.leases[lease.id] = (lease, lease.value)
        if self.recovered:  # granted, then versions moved on: it may be expired already
            self.refresh_expiry()

    def reconcile(self) -> None:
        """Take the leases and dead letters as the database has them after a claim during
        which a recovery happened (it may have claimed again, see :meth:`claim`)."""
        faults, self.db.faults = self.db.faults, memory.Faults()
        try:
            in_db = {lease.value: lease for lease in self.queue.leases(self.db, limit=None)}
            dead = [plain(letter.value) for letter in self.queue.dead_letters(self.db, limit=None)]
        finally:
            self.db.faults = faults
        for lease_id, (_lease, value) in list(self.leases.items()):
            current = in_db.get(value)
            if current is None:
                assert value in dead
                self._forget(lease_id)
                self.dead.append(value)
            elif current.id != lease_id:
                self._forget(lease_id)
                self.leases[current.id] = (current, value)
        known = {value for _lease, value in self.leases.values()}
        for value, current in in_db.items():
            if value not in known:
                self.remove(value)  # queued, then claimed by a claim that claimed again
                self.leases[current.id] = (current, value)
        for entry in list(self.queued):  # poison moved aside by such a claim
            if dead.count(entry[2]) > self.dead.count(entry[2]):
                self.queued.remove(entry)
                self.dead.append(entry[2])
        self.refresh_expiry()

    def _forget(self, lease_id: str) -> None:
        del self.leases[lease_id]
        self.expired.discard(lease_id)
        self.released.discard(lease_id)

    def _refused(self, lease_id: str) -> type[Exception] | None:
        """The error ack/release must raise for this lease, or None."""
        if lease_id in self.released:
            return LeaseNotHeldError
        if lease_id in self.expired:
            return LeaseExpiredError
        return None

    def end_entry(self, max_end: bool) -> tuple[int, int, object]:
        """The queued entry a take from that end meets first."""
        if max_end:
            top = max(priority for priority, _, _ in self.queued)
            return next(e for e in self.queued if e[0] == top)
        return self.queued[0]

    def after_timed_out_take(self, max_end: bool = False) -> None:
        """A take that raised 1031 took no item, but the transactions it committed before
        that one may have moved poison items at its end to the dead letters (housekeeping
        that each commits on its own, then the take goes on)."""
        self._sync_dead_letters({i for i in self.expired if i in self.leases})
        real = self.queue.size(self.db) - len(self.waiting())
        while len(self.queued) > real:
            entry = self.end_entry(max_end)
            if not is_poison(entry[2]):
                break
            self.queued.remove(entry)
            self.dead.append(entry[2])

    def _sync_dead_letters(self, candidates: set[str]) -> None:
        """A claim may move redeliverable items past max_deliveries to the dead letters."""
        dead = {plain(letter.value) for letter in self.queue.dead_letters(self.db, limit=10_000)}
        for lease_id in list(candidates):
            lease, value = self.leases[lease_id]
            if value in dead:
                assert lease.deliveries >= MAX_DELIVERIES
                self._forget(lease_id)
                self.dead.append(value)

    def held(self) -> list[str]:
        """The held leases' ids in their values' order: the same at every replay, whatever
        order the leases were learned in (a reconciliation learns them in key order)."""
        return sorted(self.leases, key=lambda lease_id: repr(self.leases[lease_id][1]))

    def _settle(self, lease_id: str, action: Any) -> bool:
        """Run ack/release/extend on a lease; True when it took effect. A recovery during
        the call may expire the lease first: LeaseExpiredError is then right too."""
        refused = self._refused(lease_id)
        if refused is not None:
            with pytest.raises(refused):
                self.call(action)
            return False
        self.recovered = False
        try:
            return self.call(action) is not TIMED_OUT
        except LeaseExpiredError:
            assert self.recovered
            return False

    @precondition(lambda self: self.leases)
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        lease_id = data.draw(st.sampled_from(self.held()))
        lease, value = self.leases[lease_id]
        if not self._settle(lease_id, lambda: self.queue.ack(self.db, lease)):
            return
        self._forget(lease_id)
        self.consumed.append(value)
        with pytest.raises(LeaseNotHeldError):
            self.queue.ack(self.db, lease)

    @precondition(lambda self: self.leases)
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        lease_id = data.draw(st.sampled_from(self.held()))
        lease, _value = self.leases[lease_id]
        if not self._settle(lease_id, lambda: self.queue.release(self.db, lease)):
            return
        self.expired.add(lease_id)  # waits for the next claim, like an expired one
        self.released.add(lease_id)

    @precondition(lambda self: self.leases)
    @rule(data=st.data())
    def extend(self, data: st.DataObject) -> None:
        lease_id = data.draw(st.sampled_from(self.held()))
        lease, value = self.leases[lease_id]
        extended: list[Any] = []
        if not self._settle(
            lease_id, lambda: extended.append(self.queue.extend(self.db, lease, LEASE_SECONDS))
        ):
            return
        (new,) = extended
        assert (new.id, new.deliveries, new.value) == (lease.id, lease.deliveries, value)
        self.leases[lease_id] = (new, value)

    @rule()
    def expire_leases(self) -> None:
        pass_time(self.db, LEASE_SECONDS + 1)
        self.expired.update(self.leases)

    @precondition(lambda self: self.dead)
    @rule()
    def requeue_dead_letters(self) -> None:
        listed = [plain(letter.value) for letter in self.queue.dead_letters(self.db, limit=10_000)]
        assert sorted(listed, key=repr) == sorted(self.dead, key=repr)
        moved = self.call(lambda: self.queue.requeue_dead_letters(self.db))
        if moved is TIMED_OUT:
            return
        assert moved == len(self.dead)
        for value in listed:  # enqueued again, oldest dead letter first, at the back
            self.add(value, self.priorities.get(value, 0))
            self.moved += 1
        self.dead = []

    def teardown(self) -> None:
        super().teardown()
        stats = self.db.stats()
        APPLIED_UNKNOWN.append(
            stats["injected_commit_unknown_result_applied"]
            + stats["injected_recovery_applied"]
            + stats["injected_timed_out_applied"]
        )

    # -- invariants -----------------------------------------------------------------------

    @invariant()
    def size_matches(self) -> None:
        # the queued items, and the leases' items that wait (expired or released)
        assert self.queue.size(self.db) == len(self.queued) + len(self.waiting())

    @invariant()
    def every_value_is_in_exactly_one_place(self) -> None:
        places = (
            [entry[2] for entry in self.queued]
            + [value for _lease, value in self.leases.values()]
            + self.consumed
            + self.dead
            + self.cleared
        )
        assert sorted(places, key=repr) == sorted(set(self.everything), key=repr)
        assert len(self.everything) == len(set(self.everything)) + self.moved


class DyingConsumersModel(RepeatableMachine):
    """Consumer sessions in line and lease workers that die at every step.

    A session dies right after registering its request, in the middle of a take (built,
    never committed), or holding the places its prefetch reserved (never closed). Order is
    checked as a multiset here. At the end, time passes beyond ``abandon_after`` and every
    lease, and calls in line (whose way dead sessions' requests must not block), then
    claims, must drain every item exactly once: nothing stranded, nobody left in line.
    """

    kind = "queue"
    faults = False
    ABANDON_AFTER = 5.0

    def __init__(self) -> None:
        super().__init__()
        self.db = memory.open(seed=1)
        if self.faults:
            self.db.faults = FAULTS
        subspace = Subspace(("dying-model",))
        make: Any = Queue if self.kind == "queue" else PriorityQueue
        options = {"abandon_after": self.ABANDON_AFTER, "max_deliveries": None}
        self.in_line = make(subspace, high_contention=True, **options)
        self.plain = make(subspace, **options)
        self.counter = itertools.count()
        self.everything: set[object] = set()
        self.delivered: list[object] = []
        self.sessions: list[Any] = []

    def take_in_line(self) -> Any:
        queue = self.in_line
        return queue.dequeue(self.db) if self.kind == "queue" else queue.pop_min(self.db)

    def session(self, prefetch: int) -> Any:
        return self.in_line.consumer(self.db, prefetch=prefetch, abandon_after=self.ABANDON_AFTER)

    def deliver(self, value: object) -> None:
        if value is not None and value is not TIMED_OUT:
            assert value in self.everything
            self.delivered.append(value)

    @rule(count=st.integers(1, 4))
    def produce(self, count: int) -> None:
        for _ in range(count):
            value = ("v", next(self.counter))
            push = (
                (lambda v=value: self.plain.enqueue(self.db, v))
                if self.kind == "queue"
                else (lambda v=value: self.plain.push(self.db, v, priority=v[1] % 3))
            )
            if or_timed_out(push) is not TIMED_OUT:
                self.everything.add(value)

    @rule(in_line=st.booleans())
    def consume(self, in_line: bool) -> None:
        take = (
            self.take_in_line
            if in_line
            else lambda: (
                self.plain.dequeue(self.db) if self.kind == "queue" else self.plain.pop_min(self.db)
            )
        )
        self.deliver(or_timed_out(take))

    @rule(prefetch=st.integers(0, 2))
    def open_session(self, prefetch: int) -> None:
        self.sessions.append(self.session(prefetch))

    @precondition(lambda self: self.sessions)
    @rule(data=st.data())
    def session_takes(self, data: st.DataObject) -> None:
        session = data.draw(st.sampled_from(self.sessions))
        self.deliver(or_timed_out(session.take))

    @precondition(lambda self: self.sessions)
    @rule(data=st.data(), dies=st.booleans())
    def session_ends(self, data: st.DataObject, dies: bool) -> None:
        """It closes, or dies holding what its prefetch reserved (never closed)."""
        session = data.draw(st.sampled_from(self.sessions))
        self.sessions.remove(session)
        if not dies:
            or_timed_out(session.close)

    @rule()
    def die_after_registering(self) -> None:
        session = self.session(1)
        or_timed_out(lambda: run_in_retry_loop(self.db, lambda tr: session.line.register(tr, 1)))

    @rule(prefetch=st.integers(0, 2))
    def die_in_the_middle_of_a_take(self, prefetch: int) -> None:
        session = self.session(prefetch)
        or_timed_out(lambda: run_in_retry_loop(self.db, lambda tr: session.line.register(tr, 1)))
        tr = self.db.create_transaction()
        with contextlib.suppress(memory.FDBError):
            paused = session.store.pause.look(tr)
            session._attempt(tr, session._dequeue_at, False, False, paused)  # never committed
        tr.cancel()

    @rule(ack=st.booleans())
    def lease_worker(self, ack: bool) -> None:
        lease = or_timed_out(lambda: self.plain.claim(self.db, lease=2))
        if lease is None or lease is TIMED_OUT or not ack:
            return  # no item, or the worker dies holding the lease
        try:
            if or_timed_out(lambda: self.plain.ack(self.db, lease)) is not TIMED_OUT:
                self.deliver(lease.value)
        except LeaseError:
            pass  # expired (a recovery moved versions on): delivered again later

    @rule(seconds=st.sampled_from([0.5, 3.0, 6.0]))
    def time_passes(self, seconds: float) -> None:
        pass_time(self.db, seconds)

    @invariant()
    def nothing_is_delivered_twice(self) -> None:
        assert len(self.delivered) == len(set(self.delivered))

    def teardown(self) -> None:
        try:
            self.drain()
        finally:
            super().teardown()

    def drain(self) -> None:
        """Let the dead sessions' requests and the leases lapse, then drain everything."""
        self.db.faults = memory.Faults()
        self.db.settle()
        for session in self.sessions:  # the sessions still alive close
            session.close()
        pass_time(self.db, self.ABANDON_AFTER + 3)  # dead sessions' requests abandoned
        while (value := self.take_in_line()) is not None:
            self.deliver(value)
        assert self.in_line.requests_in_line(self.db) == 0, "a dead session still holds a place"
        while (lease := self.plain.claim(self.db, lease=30)) is not None:
            self.plain.ack(self.db, lease)
            self.deliver(lease.value)
        assert sorted(self.delivered, key=repr) == sorted(self.everything, key=repr)
        assert len(self.delivered) == len(self.everything), "an item was delivered twice"
        assert self.plain.size(self.db) == 0 and self.plain.empty(self.db)


def machine(base: type[RuleBasedStateMachine], **attributes: object) -> Any:
    name = base.__name__ + "_" + "_".join(f"{k}_{v}" for k, v in attributes.items())
    return type(name, (base,), attributes)


CONFIGURATIONS = [
    {"kind": kind, "codec": codec, "high_contention": hc, "faults": faults}
    for kind in ("queue", "priority")
    for codec in ("tuple", "raw", "poison")
    for hc in (False, True)
    for faults in (False, True)
    if codec != "poison" or faults
]


def run(state_machine: Any, examples: int) -> None:
    state_machine.TestCase.settings = settings(
        max_examples=examples,
        stateful_step_count=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    state_machine.TestCase().runTest()


#: The configurations run by default, one per queue type, faults on: each takes seconds, so
#: the other sixteen are slow (CI runs them).
QUICK = [
    {"kind": "queue", "codec": "poison", "high_contention": True, "faults": True},
    {"kind": "priority", "codec": "tuple", "high_contention": False, "faults": True},
]


@pytest.mark.parametrize(
    "configuration",
    [
        c if c in QUICK else pytest.param(c, marks=pytest.mark.slow("a state machine"))
        for c in CONFIGURATIONS
    ],
    ids=lambda c: "-".join(str(v) for v in c.values()),
)
def test_queue_matches_the_model(configuration: dict[str, object]) -> None:
    APPLIED_UNKNOWN.clear()
    run(machine(QueueModel, **configuration), examples=25)
    if configuration["faults"]:
        assert sum(APPLIED_UNKNOWN) > 0


@pytest.mark.parametrize(
    "kind", ["queue", pytest.param("priority", marks=pytest.mark.slow("a state machine"))]
)
@pytest.mark.parametrize(
    "faults", [pytest.param(False, marks=pytest.mark.slow("a state machine")), True]
)
def test_consumers_dying_at_every_step_lose_nothing(kind: str, faults: bool) -> None:
    run(machine(DyingConsumersModel, kind=kind, faults=faults), examples=20)
