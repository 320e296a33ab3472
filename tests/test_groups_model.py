"""A stateful property test of message groups: Queue and PriorityQueue against a model.

Hypothesis runs random sequences of enqueues into groups (and without one), weights, dequeues,
claims, acks, releases, dead letters, lease expiry, requeues of dead letters and clear(), on a
plain, in-line or sharded queue, with and without injected faults (1020, 1021 applied or not, 1007).
After every step: a take returned the first item of its group, of a group with no item in a
lease (or the first item without a group); a claim delivered an expired lease's item before
any other; nothing was lost or taken twice; and the group records agree with the items and
leases (the invariant of ``test_groups``).
"""

from __future__ import annotations

import itertools
from collections import deque
from typing import Any

import pytest
from helpers import RepeatableMachine, pass_time
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule
from test_groups import invariant as records_agree

from fdbqueue import PriorityQueue, Queue, Subspace, memory

FAULTS = memory.Faults(not_committed=0.1, commit_unknown_result=0.2, transaction_too_old=0.1)
LEASE_SECONDS = 10.0
GROUPS = [None, "a", "b", ("tenant", 3)]
APPLIED_UNKNOWN: list[int] = []


class GroupsModel(RepeatableMachine):
    """The queue against per-group FIFO lists, the set of leased items and the dead letters."""

    kind = "queue"
    layout: dict[str, Any] = {}  # noqa: RUF012 (set per configuration)
    faults = False

    def __init__(self) -> None:
        super().__init__()
        self.db = memory.open(seed=0)
        subspace = Subspace(("groups-model",))
        self.queue: Any = (
            Queue(subspace, max_deliveries=None, **self.layout)
            if self.kind == "queue"
            else PriorityQueue(subspace, max_deliveries=None, **self.layout)
        )
        if self.faults:
            self.db.faults = FAULTS
        self.counter = itertools.count()
        self.queued: dict[Any, deque[int]] = {group: deque() for group in GROUPS}
        self.group_of: dict[int, Any] = {}
        self.priority_of: dict[int, int] = {}
        self.pushed: dict[int, int] = {}  # value -> when it was last pushed (requeues too)
        self.pushes = itertools.count()
        self.sharded = "shards" in self.layout
        self.leases: dict[str, tuple[Any, bool]] = {}  # id -> (Lease, expired)
        self.dead: list[int] = []
        self.taken: set[int] = set()

    def teardown(self) -> None:
        super().teardown()
        APPLIED_UNKNOWN.append(self.db.stats()["injected_commit_unknown_result_applied"])

    # -- the model --------------------------------------------------------------------------

    def busy(self) -> set[Any]:
        return {lease.group for lease, _expired in self.leases.values() if lease.group is not None}

    def takeable(self) -> set[int]:
        """What the next take may return: the first item of every group with no item in a
        lease, and the first item without a group (a PriorityQueue's: of the lowest priority,
        and only the candidates of the lowest priority; sharded: an ungrouped item first in
        any shard, so any of those)."""
        busy = self.busy()
        heads = {
            items[0] for group, items in self.queued.items() if items and group not in busy
        } - set(self.queued[None])
        ungrouped = list(self.queued[None])
        if self.kind == "priority":  # the lowest priority's, oldest first
            ungrouped.sort(key=lambda value: (self.priority_of[value], self.pushed[value]))
        if ungrouped and not self.sharded:
            ungrouped = ungrouped[:1]
        candidates = heads | set(ungrouped)
        if self.kind == "priority" and candidates:
            best = min(self.priority_of[value] for value in candidates)
            candidates = {value for value in candidates if self.priority_of[value] == best}
        return candidates

    def took(self, value: int) -> None:
        assert value not in self.taken, f"{value} taken twice"
        assert value in self.takeable(), (value, self.queued, self.busy())
        self.queued[self.group_of[value]].remove(value)  # the first, but where sharded
        self.taken.add(value)

    # -- rules ------------------------------------------------------------------------------

    @rule(group=st.sampled_from(GROUPS), count=st.integers(1, 3), priority=st.integers(0, 2))
    def enqueue(self, group: Any, count: int, priority: int) -> None:
        values = [next(self.counter) for _ in range(count)]
        if self.kind == "queue":
            self.queue.enqueue_many(self.db, values, group=group)
        else:
            for value in values:
                self.queue.push(self.db, value, priority, group=group)
        for value in values:
            self.queued[group].append(value)
            self.group_of[value] = group
            self.priority_of[value] = priority
            self.pushed[value] = next(self.pushes)

    @rule(group=st.sampled_from(GROUPS[1:]), weight=st.integers(1, 3))
    def weigh(self, group: Any, weight: int) -> None:
        """A weight changes how many items a group's turn serves, never which may come."""
        self.queue.set_group_weight(self.db, group, weight)

    @rule()
    def dequeue(self) -> None:
        # A take delivers an expired (or released) lease's item first, as a claim does: it
        # waits as any item (issue 36), and a group whose holder died is not jammed.
        expired = [k for k, (_l, gone) in self.leases.items() if gone]
        value = self.queue.dequeue(self.db) if self.kind == "queue" else self.queue.pop(self.db)
        if value is None:
            assert not self.takeable(), "a take found nothing though an item was takeable"
            assert not expired, "a take left an expired lease behind"
            return
        redelivered = [k for k in expired if self.leases[k][0].value == value]
        assert redelivered or not expired or self.sharded
        if redelivered:
            del self.leases[redelivered[0]]
        else:
            self.took(value)

    @rule()
    def claim(self) -> None:
        lease = self.queue.claim(self.db, LEASE_SECONDS)
        expired = [lease_id for lease_id, (_l, gone) in self.leases.items() if gone]
        if lease is None:
            assert not expired and not self.takeable()
            return
        assert lease.group == self.group_of[lease.value]
        redelivered = [k for k in expired if self.leases[k][0].value == lease.value]
        # an expired or released lease's item comes first, the same item (a sharded queue's:
        # first in its shard)
        assert redelivered or not expired or self.sharded
        if redelivered:
            del self.leases[redelivered[0]]
        else:
            self.took(lease.value)
        self.leases[lease.id] = (lease, False)

    def held(self) -> list[str]:
        return sorted(lease_id for lease_id, (_l, gone) in self.leases.items() if not gone)

    @precondition(lambda self: self.held())
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        lease_id = data.draw(st.sampled_from(self.held()))
        self.queue.ack(self.db, self.leases.pop(lease_id)[0])

    @precondition(lambda self: self.held())
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        lease_id = data.draw(st.sampled_from(self.held()))
        self.queue.release(self.db, self.leases[lease_id][0])
        self.leases[lease_id] = (self.leases[lease_id][0], True)

    @precondition(lambda self: self.held())
    @rule(data=st.data())
    def dead_letter(self, data: st.DataObject) -> None:
        lease_id = data.draw(st.sampled_from(self.held()))
        lease = self.leases.pop(lease_id)[0]
        self.queue.dead_letter(self.db, lease, "failed")
        self.dead.append(lease.value)

    @rule()
    def expire(self) -> None:
        pass_time(self.db, LEASE_SECONDS + 1)
        self.leases = {k: (lease, True) for k, (lease, _gone) in self.leases.items()}

    @precondition(lambda self: self.dead)
    @rule()
    def requeue(self) -> None:
        assert self.queue.requeue_dead_letters(self.db) == len(self.dead)
        for value in self.dead:  # oldest first, each at the back of its group
            self.queued[self.group_of[value]].append(value)
            self.pushed[value] = next(self.pushes)
            self.taken.discard(value)
        self.dead.clear()

    @rule()
    def clear(self) -> None:
        self.queue.clear(self.db)
        self.queued = {group: deque() for group in GROUPS}
        self.leases.clear()
        self.dead.clear()

    # -- invariants -------------------------------------------------------------------------

    @invariant()
    def records_agree_with_the_items_and_leases(self) -> None:
        faults, self.db.faults = self.db.faults, memory.Faults()
        try:
            waiting = sum(1 for _lease, gone in self.leases.values() if gone)
            queued = sum(len(items) for items in self.queued.values())
            assert self.queue.size(self.db) == queued + waiting  # leases' items wait too
            records_agree(self.db, self.queue)
        finally:
            self.db.faults = faults


CONFIGURATIONS = [
    {"kind": kind, "layout": layout, "faults": faults}
    for kind in ("queue", "priority")
    for layout in ({}, {"high_contention": True}, {"shards": 3})
    for faults in (False, True)
]


@pytest.mark.parametrize(
    "configuration",
    [  # with faults by default; without them (a subset of what faults exercise) slow
        c
        if c["faults"]
        else pytest.param(c, marks=pytest.mark.slow("a state machine without faults"))
        for c in CONFIGURATIONS
    ],
    ids=lambda c: "-".join(str(v) for v in c.values()),
)
def test_groups_match_the_model(configuration: dict[str, Any]) -> None:
    APPLIED_UNKNOWN.clear()
    name = "GroupsModel_" + "_".join(str(v) for v in configuration.values())
    state_machine: Any = type(name, (GroupsModel,), configuration)
    state_machine.TestCase.settings = settings(
        max_examples=8,
        stateful_step_count=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    state_machine.TestCase().runTest()
    if configuration["faults"]:
        assert sum(APPLIED_UNKNOWN) > 0
