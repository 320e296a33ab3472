"""Stateful property tests: Queue and PriorityQueue against a simple in-Python model.

Hypothesis runs random sequences of operations (enqueue/push, dequeue/pop, the batch forms,
peek, size, claim, ack, release, and lease expiry) on an in-memory database, in every mode
(plain and high-contention), with each codec, with and without injected faults (1020, 1021
and 1007 on 10%, 20% and 10% of writing commits). After every step, every value ever enqueued is in
exactly one place: still queued, leased, a dead letter, or consumed; and what the queue
returns matches the model exactly.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from fdbqueue import (
    LeaseExpiredError,
    LeaseNotHeldError,
    PriorityQueue,
    Queue,
    Subspace,
    memory,
)

FAULTS = memory.Faults(not_committed=0.1, commit_unknown_result=0.2, transaction_too_old=0.1)
#: Unknown-result commits that were applied, summed over a test's examples: the hazard that
#: receipts remove must really have happened.
APPLIED_UNKNOWN: list[int] = []
LEASE_SECONDS = 10.0
MAX_DELIVERIES = 2


class QueueModel(RuleBasedStateMachine):
    """The model: ``queued`` in the order the queue must return them; leases by id."""

    kind = "queue"
    codec = "tuple"
    high_contention = False
    faults = False

    def __init__(self) -> None:
        super().__init__()
        self.db = memory.open(seed=0)
        options = {
            "codec": self.codec,
            "high_contention": self.high_contention,
            "max_deliveries": MAX_DELIVERIES,
        }
        subspace = Subspace(("model",))
        self.queue = (
            Queue(subspace, **options)
            if self.kind == "queue"
            else PriorityQueue(subspace, **options)
        )
        if self.faults:
            self.db.faults = FAULTS
        self.counter = itertools.count()
        self.queued: list[tuple[int, int, object]] = []  # (priority, sequence, value), sorted
        self.leases: dict[str, tuple[object, object]] = {}  # id -> (Lease, value)
        self.expired: set[str] = set()  # items waiting for redelivery: expired or released
        self.released: set[str] = set()
        self.consumed: list[object] = []
        self.dead: list[object] = []
        self.everything: list[object] = []  # a requeued value appears once more
        self.priorities: dict[object, int] = {}
        self.moved = 0

    def value(self) -> object:
        number = next(self.counter)
        return b"v%05d" % number if self.codec == "raw" else ("v", number)

    # -- writing --------------------------------------------------------------------------

    @rule(priority=st.integers(-3, 3))
    def push(self, priority: int) -> None:
        value = self.value()
        if self.kind == "queue":
            self.queue.enqueue(self.db, value)
            priority = 0
        else:
            self.queue.push(self.db, value, priority=priority)
        self.queued.append((priority, len(self.everything), value))
        self.queued.sort(key=lambda entry: entry[:2])
        self.everything.append(value)
        self.priorities[value] = priority

    @precondition(lambda self: self.kind == "queue")
    @rule(count=st.integers(0, 4))
    def enqueue_many(self, count: int) -> None:
        values = [self.value() for _ in range(count)]
        self.queue.enqueue_many(self.db, values)
        for value in values:
            self.queued.append((0, len(self.everything), value))
            self.everything.append(value)

    # -- taking ---------------------------------------------------------------------------

    @rule()
    def take(self) -> None:
        taken = self.queue.dequeue(self.db) if self.kind == "queue" else self.queue.pop(self.db)
        expected = self.queued.pop(0)[2] if self.queued else None
        assert taken == expected
        if taken is not None:
            self.consumed.append(taken)

    @precondition(lambda self: self.kind == "priority")
    @rule()
    def take_max(self) -> None:
        taken = self.queue.pop_max(self.db)
        if not self.queued:
            assert taken is None
            return
        top = max(priority for priority, _, _ in self.queued)
        entry = next(e for e in self.queued if e[0] == top)  # oldest of the top priority
        self.queued.remove(entry)
        assert taken == entry[2]
        self.consumed.append(taken)

    @precondition(lambda self: self.kind == "queue")
    @rule(count=st.integers(0, 3))
    def dequeue_many(self, count: int) -> None:
        taken = self.queue.dequeue_many(self.db, count)
        expected = [entry[2] for entry in self.queued[:count]]
        del self.queued[:count]
        assert taken == expected
        self.consumed.extend(taken)

    @rule()
    def peek(self) -> None:
        assert self.queue.peek(self.db) == (self.queued[0][2] if self.queued else None)

    # -- leases ---------------------------------------------------------------------------

    @rule()
    def claim(self) -> None:
        lease = self.queue.claim(self.db, lease=LEASE_SECONDS)
        redeliverable = {lease_id for lease_id in self.expired if lease_id in self.leases}
        if lease is None:
            assert not self.queued
            assert all(self.leases[i][0].deliveries >= MAX_DELIVERIES for i in redeliverable)
            self._sync_dead_letters(redeliverable)
            return
        if lease.deliveries == 1:  # a fresh item: the queue's next one
            assert not [i for i in redeliverable if self.leases[i][0].deliveries < MAX_DELIVERIES]
            expected = self.queued.pop(0)[2]
            assert lease.value == expected
            self._sync_dead_letters(redeliverable)
        else:  # an expired or released one, delivered again
            previous = [i for i in redeliverable if self.leases[i][1] == lease.value]
            assert len(previous) == 1
            assert self.leases[previous[0]][0].deliveries == lease.deliveries - 1
            self._forget(previous[0])
            self._sync_dead_letters(redeliverable - set(previous))
        self.leases[lease.id] = (lease, lease.value)

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

    def _sync_dead_letters(self, candidates: set[str]) -> None:
        """A claim may move redeliverable items past max_deliveries to the dead letters."""
        dead = {letter.value for letter in self.queue.dead_letters(self.db, limit=10_000)}
        for lease_id in list(candidates):
            lease, value = self.leases[lease_id]
            if value in dead:
                assert lease.deliveries >= MAX_DELIVERIES
                self._forget(lease_id)
                self.dead.append(value)

    def held(self) -> list[str]:
        return list(self.leases)  # claim order: deterministic, unlike the random ids

    @precondition(lambda self: self.leases)
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        lease_id = data.draw(st.sampled_from(self.held()))
        lease, value = self.leases[lease_id]
        refused = self._refused(lease_id)
        if refused is not None:
            with pytest.raises(refused):
                self.queue.ack(self.db, lease)
            return
        self.queue.ack(self.db, lease)
        self._forget(lease_id)
        self.consumed.append(value)
        with pytest.raises(LeaseNotHeldError):
            self.queue.ack(self.db, lease)

    @precondition(lambda self: self.leases)
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        lease_id = data.draw(st.sampled_from(self.held()))
        lease, _value = self.leases[lease_id]
        refused = self._refused(lease_id)
        if refused is not None:
            with pytest.raises(refused):
                self.queue.release(self.db, lease)
            return
        self.queue.release(self.db, lease)
        self.expired.add(lease_id)  # waits for the next claim, like an expired one
        self.released.add(lease_id)

    @rule()
    def expire_leases(self) -> None:
        self.db.advance_time(LEASE_SECONDS + 1)
        self.expired.update(self.leases)

    @precondition(lambda self: self.dead)
    @rule()
    def requeue_dead_letters(self) -> None:
        listed = [letter.value for letter in self.queue.dead_letters(self.db, limit=10_000)]
        assert sorted(listed, key=repr) == sorted(self.dead, key=repr)
        assert self.queue.requeue_dead_letters(self.db) == len(self.dead)
        for value in listed:  # enqueued again, oldest dead letter first, at the back
            priority = self.priorities.get(value, 0)
            self.queued.append((priority, len(self.everything), value))
            self.everything.append(value)
            self.moved += 1
        self.queued.sort(key=lambda entry: entry[:2])
        self.dead = []

    def teardown(self) -> None:
        APPLIED_UNKNOWN.append(self.db.stats()["injected_commit_unknown_result_applied"])

    # -- invariants -----------------------------------------------------------------------

    @invariant()
    def size_matches(self) -> None:
        assert self.queue.size(self.db) == len(self.queued)

    @invariant()
    def every_value_is_in_exactly_one_place(self) -> None:
        places = (
            [entry[2] for entry in self.queued]
            + [value for _lease, value in self.leases.values()]
            + self.consumed
            + self.dead
        )
        assert sorted(places, key=repr) == sorted(set(self.everything), key=repr)
        assert len(self.everything) == len(set(self.everything)) + self.moved


def machine(**attributes: object) -> type[RuleBasedStateMachine]:
    name = "Model_" + "_".join(f"{k}_{v}" for k, v in attributes.items())
    return type(name, (QueueModel,), attributes)


CONFIGURATIONS = [
    {"kind": kind, "codec": codec, "high_contention": hc, "faults": faults}
    for kind in ("queue", "priority")
    for codec in ("tuple", "raw")
    for hc in (False, True)
    for faults in (False, True)
]


@pytest.mark.parametrize(
    "configuration", CONFIGURATIONS, ids=lambda c: "-".join(str(v) for v in c.values())
)
def test_queue_matches_the_model(configuration: dict[str, object]) -> None:
    state_machine = machine(**configuration)
    state_machine.TestCase.settings = settings(
        max_examples=25,
        stateful_step_count=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    APPLIED_UNKNOWN.clear()
    state_machine.TestCase().runTest()
    if configuration["faults"]:
        assert sum(APPLIED_UNKNOWN) > 0
