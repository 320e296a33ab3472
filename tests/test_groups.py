"""Message groups (fdbqueue._storage.groups): items of one group come out in enqueue order on
every path, at most one of a group is in flight under leases (the next once the lease ends for
good; the same one again first when it expires or is released), groups are served in turn so
that a backlog delays another group by at most one turn, and nothing is lost or repeated under
threads, faults, dead letters, delays and clear()."""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from typing import Any

import fdb.tuple
import pytest
from helpers import PoisonCodec, all_keys, despite_timeouts, pass_time, run, run_threads

import fdbqueue.asyncio as fa
from fdbqueue import LeaseNotHeldError, PriorityQueue, Queue, Subspace, memory
from fdbqueue._storage.groups import MAX_GROUP_BYTES

EVERY_FAULT = memory.Faults(
    not_committed=0.05, commit_unknown_result=0.15, transaction_too_old=0.05, timed_out=0.05
)
LAYOUTS = [
    pytest.param({}, id="plain"),
    pytest.param({"high_contention": True}, id="in-line"),
    pytest.param({"shards": 4}, id="sharded"),
]


def drain(db: Any, queue: Queue[Any]) -> list[Any]:
    values = []
    while (value := queue.dequeue(db)) is not None:
        values.append(value)
    return values


def per_group(values: list[str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = collections.defaultdict(list)
    for value in values:
        groups[value.split("-")[0]].append(value)
    return dict(groups)


def group_items(name: str, n: int) -> list[str]:
    return [f"{name}-{i:04d}" for i in range(n)]


def invariant(db: Any, queue: Queue[Any]) -> None:
    """Every shard's records agree: a group is active exactly while it has items or one in a
    lease; it has a turn exactly when it has items and none in a lease, whose value is its
    first item; the count of active groups is right."""
    for part in queue._router.shards:
        store = part.store
        groups = store.groups
        keys = dict(all_keys(db, Subspace(rawPrefix=store.metadata.key())))
        items: dict[Any, list[bytes]] = collections.defaultdict(list)
        for key in sorted(k for k in keys if groups.items.contains(k)):
            items[groups.items.unpack(key)[0]].append(key)
        leased = {
            g
            for lease in part.leases.in_flight(db.create_transaction(), 10_000)
            if (g := lease.group) is not None
        }
        active = {groups.active.unpack(k)[0] for k in keys if groups.active.contains(k)}
        turns = {groups.turns.unpack(k)[-1]: v for k, v in keys.items() if groups.turns.contains(k)}
        assert active == set(items) | leased
        assert set(turns) == set(items) - leased
        assert all(fdb.tuple.unpack(turns[g])[0] == items[g][0] for g in turns)
        assert groups.active_count(db.create_transaction()) == len(active)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_each_groups_items_come_out_in_enqueue_order_and_groups_take_turns(layout):
    db = memory.open()
    queue = Queue(Subspace(("groups", str(layout))), **layout)
    for name in "abc":
        queue.enqueue_many(db, group_items(name, 3), group=name)
    taken = drain(db, queue)
    assert per_group(taken) == {name: group_items(name, 3) for name in "abc"}
    if not layout:  # one key range: round robin over the groups, in the order they came
        rounds = [[f"{name}-{i:04d}" for name in "abc"] for i in range(3)]
        assert taken == [value for one_round in rounds for value in one_round]
    invariant(db, queue)


def test_a_backlog_delays_other_groups_by_at_most_one_turn():
    db = memory.open()
    queue = Queue(Subspace(("fair",)))
    for start in range(0, 1000, 250):
        queue.enqueue_many(db, [f"big-{i}" for i in range(start, start + 250)], group="big")
    for g in range(100):
        queue.enqueue_many(db, group_items(f"small{g}", 10), group=f"small{g}")
    taken = [queue.dequeue(db) for _ in range(2000)]
    last_small = max(i for i, value in enumerate(taken) if value.startswith("small"))
    assert last_small < 10 * 101  # ten rounds of 101 turns
    assert taken[0] == "big-0" and taken[1] == "small0-0000"


def test_dequeue_many_takes_groups_in_turn_in_one_transaction():
    db = memory.open()
    queue = Queue(Subspace(("many",)))
    queue.enqueue_many(db, group_items("a", 3), group="a")
    queue.enqueue_many(db, group_items("b", 1), group="b")
    assert queue.dequeue_many(db, 3) == ["a-0000", "b-0000", "a-0001"]
    assert queue.dequeue_many(db, 3) == ["a-0002"]
    invariant(db, queue)


def test_items_with_and_without_a_group_all_come_out():
    db = memory.open()
    queue = Queue(Subspace(("mixed",)))
    queue.enqueue_many(db, group_items("u", 20))
    queue.enqueue_many(db, group_items("g", 20), group="g")
    taken = drain(db, queue)
    assert per_group(taken) == {"u": group_items("u", 20), "g": group_items("g", 20)}
    assert queue.size(db) == 0
    invariant(db, queue)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_at_most_one_item_of_a_group_is_in_flight(layout):
    db = memory.open()
    queue = Queue(Subspace(("flight", str(layout))), **layout)
    queue.enqueue_many(db, group_items("a", 3), group="a")
    queue.enqueue_many(db, group_items("b", 1), group="b")
    first, second = queue.claim(db, 10), queue.claim(db, 10)
    assert first is not None and second is not None
    assert {first.value, second.value} == {"a-0000", "b-0000"}
    assert {first.group, second.group} == {"a", "b"}
    assert queue.claim(db, 10) is None  # a is busy, b has no more: claims pass over a
    a_lease = first if first.group == "a" else second
    queue.ack(db, a_lease)
    follow = queue.claim(db, 10)
    assert follow is not None and follow.value == "a-0001" and follow.group == "a"
    queue.dead_letter(db, follow, "broken")  # a dead letter ends the lease: the next follows
    last = queue.claim(db, 10)
    assert last is not None and last.value == "a-0002"
    invariant(db, queue)


def test_an_expired_or_released_lease_delivers_the_same_item_again_first():
    db = memory.open()
    queue = Queue(Subspace(("expiry",)))
    queue.enqueue_many(db, group_items("a", 2), group="a")
    lease = queue.claim(db, 5)  # the consumer dies holding it
    assert lease is not None
    pass_time(db, 6)
    again = queue.claim(db, 5)
    assert again is not None and (again.value, again.deliveries) == ("a-0000", 2)
    assert queue.claim(db, 5) is None
    queue.release(db, again)
    third = queue.claim(db, 5)
    assert third is not None and (third.value, third.deliveries) == ("a-0000", 3)
    queue.ack(db, third)
    assert queue.claim(db, 5).value == "a-0001"  # type: ignore[union-attr]


def test_a_group_whose_item_runs_out_of_deliveries_goes_on_with_its_next_item():
    db = memory.open()
    queue = Queue(Subspace(("deliveries",)), max_deliveries=1)
    queue.enqueue_many(db, group_items("a", 2), group="a")
    assert queue.claim(db, 5) is not None
    pass_time(db, 6)
    nxt = queue.claim(db, 5)  # the expired item becomes a dead letter on the way
    assert nxt is not None and nxt.value == "a-0001"
    assert [letter.value for letter in queue.dead_letters(db)] == ["a-0000"]
    invariant(db, queue)


def test_a_requeued_dead_letter_goes_back_to_the_back_of_its_group():
    db = memory.open()
    queue = Queue(Subspace(("requeue",)))
    queue.enqueue_many(db, group_items("a", 2), group="a")
    lease = queue.claim(db, 5)
    assert lease is not None
    queue.dead_letter(db, lease, "later")
    assert queue.requeue_dead_letters(db) == 1
    assert drain(db, queue) == ["a-0001", "a-0000"]
    invariant(db, queue)


def test_a_poison_item_of_a_group_moves_aside_and_the_group_goes_on():
    db = memory.open()
    queue = Queue(Subspace(("poison",)), codec=PoisonCodec())
    queue.enqueue_many(db, [b"a", b"!bad", b"c"], group="g")
    assert drain(db, queue) == [b"a", b"c"]
    assert len(queue.dead_letters(db)) == 1
    invariant(db, queue)


def test_a_delayed_item_joins_the_back_of_its_group():
    db = memory.open()
    queue = Queue(Subspace(("delayed",)))
    queue.enqueue(db, "a-late", group="a", delay=5)
    queue.enqueue(db, "a-now", group="a")
    assert drain(db, queue) == ["a-now"]
    pass_time(db, 6)
    queue.enqueue(db, "a-after", group="a")
    assert drain(db, queue) == ["a-after", "a-late"]
    invariant(db, queue)


def test_clear_in_the_middle_leaves_a_queue_whose_groups_start_afresh():
    db = memory.open()
    queue = Queue(Subspace(("clear",)))
    queue.enqueue_many(db, group_items("a", 3), group="a")
    lease = queue.claim(db, 10)
    assert lease is not None
    queue.clear(db)
    with pytest.raises(LeaseNotHeldError):
        queue.ack(db, lease)
    queue.enqueue(db, "a-new", group="a")
    assert drain(db, queue) == ["a-new"]
    invariant(db, queue)


@pytest.mark.parametrize(
    ("group", "error"),
    [(1.5, TypeError), (True, TypeError), ([1], TypeError), ("x" * MAX_GROUP_BYTES, ValueError)],
)
def test_a_bad_group_is_refused_and_nothing_is_written(group, error):
    db = memory.open()
    queue = Queue(Subspace(("bad",)))
    with pytest.raises(error):
        queue.enqueue(db, "v", group=group)
    with pytest.raises(error):
        queue.enqueue_many(db, ["v"], group=group, delay=3)
    assert all_keys(db, Subspace(("bad",))) == []


def test_groups_of_every_type_are_distinct():
    db = memory.open()
    queue = Queue(Subspace(("types",)))
    for group in ["1", b"1", 1, ("1",)]:
        queue.enqueue(db, "v", group=group)
    assert sorted(map(repr, (queue.claim(db, 5).group for _ in range(4)))) == sorted(  # type: ignore[union-attr]
        map(repr, ["1", b"1", 1, ("1",)])
    )


def test_a_group_lives_in_one_shard():
    db = memory.open()
    queue = Queue(Subspace(("one-shard",)), shards=8)
    queue.enqueue_many(db, group_items("a", 40), group="a")
    holding = [shard for shard in queue.info(db).shards if shard.size]
    assert len(holding) == 1 and holding[0].size == 40
    assert queue.size(db) == 40
    assert drain(db, queue) == group_items("a", 40)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_threads_process_each_group_in_order_one_at_a_time(layout):
    """Producers and lease-holding consumers on real threads: every item processed once, each
    group's in enqueue order, never two of a group at once; afterwards the records agree."""
    db = memory.open()
    queue = Queue(Subspace(("threads", str(layout))), **layout)
    names = [f"g{i}" for i in range(6)]
    producing = threading.Barrier(len(names))

    def produce(name: str) -> None:
        producing.wait()
        for start in range(0, 30, 5):
            queue.enqueue_many(db, group_items(name, 30)[start : start + 5], group=name)

    producers = [threading.Thread(target=produce, args=(name,)) for name in names]
    for thread in producers:
        thread.start()
    lock = threading.Lock()
    busy: set[str] = set()
    processed: list[str] = []
    overlaps: list[str] = []

    def consume() -> None:
        idle_since = time.monotonic()
        while time.monotonic() - idle_since < 1.0:
            lease = queue.claim(db, 30)
            if lease is None:
                time.sleep(0.005)
                continue
            idle_since = time.monotonic()
            with lock:
                if lease.group in busy:
                    overlaps.append(lease.value)
                busy.add(lease.group)
            time.sleep(0.001)
            with lock:
                busy.discard(lease.group)
                processed.append(lease.value)
            queue.ack(db, lease)

    run_threads(consume, 6)
    for thread in producers:
        thread.join()
    assert overlaps == []
    assert per_group(processed) == {name: group_items(name, 30) for name in names}
    assert queue.size(db) == 0
    invariant(db, queue)


@pytest.mark.parametrize("seed", [5, 17])
def test_under_every_fault_kind_groups_lose_and_repeat_nothing(seed):
    db = memory.open(faults=EVERY_FAULT, seed=seed)
    queue = Queue(Subspace(("faults", seed)), max_deliveries=None)
    for name in "abc":
        for start in range(0, 12, 4):
            batch = group_items(name, 12)[start : start + 4]
            despite_timeouts(
                lambda batch=batch, name=name: queue.enqueue_many(db, batch, group=name)
            )
    processed: list[str] = []
    lock = threading.Lock()

    def handler(value: str) -> None:
        with lock:
            processed.append(value)

    queue.work(db, handler, lease=30, concurrency=3, until_empty=True, backoff=0.01)
    db.faults = memory.Faults()
    db.settle()
    assert db.stats()["injected_commit_unknown_result_applied"] > 0
    for name in "abc":
        mine = [value for value in processed if value.startswith(name)]
        # a handler may run again after an unknown acknowledgement; in order, and all there
        assert sorted(set(mine)) == group_items(name, 12)
        assert [v for i, v in enumerate(mine) if i == 0 or v != mine[i - 1]] == group_items(
            name, 12
        )
    assert queue.size(db) == 0 and queue.leases(db) == []
    invariant(db, queue)


def test_the_worker_loop_spreads_its_concurrency_across_groups():
    db = memory.open()
    queue = Queue(Subspace(("worker",)))
    for name in "abcd":
        queue.enqueue_many(db, group_items(name, 5), group=name)
    lock = threading.Lock()
    running: collections.Counter[str] = collections.Counter()
    most_at_once = [0, 0]  # per group, overall

    def handler(value: str) -> None:
        name = value.split("-")[0]
        with lock:
            running[name] += 1
            most_at_once[0] = max(most_at_once[0], running[name])
            most_at_once[1] = max(most_at_once[1], sum(running.values()))
        time.sleep(0.01)
        with lock:
            running[name] -= 1

    summary = queue.work(db, handler, lease=10, concurrency=4, until_empty=True)
    assert summary.succeeded == 20
    assert most_at_once[0] == 1 and most_at_once[1] > 1


def test_asyncio_enqueues_and_claims_by_group():
    db = memory.open()

    async def main() -> list[Any]:
        queue = fa.Queue(Subspace(("asyncio",)))
        await queue.enqueue_many(db, ["a-0", "a-1"], group=("tenant", 1))
        first = await queue.claim(db, 10)
        assert first is not None and first.group == ("tenant", 1)
        assert await queue.claim(db, 10) is None
        await queue.ack(db, first)
        second = await queue.claim(db, 10)
        assert second is not None
        return [first.value, second.value]

    assert asyncio.run(main()) == ["a-0", "a-1"]


def test_enqueues_to_different_groups_never_conflict():
    db = memory.open()
    queue = Queue(Subspace(("no-conflicts",)))
    queue.enqueue(db, "a-0", group="a")
    queue.enqueue(db, "b-0", group="b")
    tr1, tr2 = db.create_transaction(), db.create_transaction()
    queue.enqueue(tr1, "a-1", group="a")
    queue.enqueue(tr2, "b-1", group="b")
    tr1.commit().wait()
    tr2.commit().wait()  # raises not_committed if the two conflicted
    assert per_group(drain(db, queue)) == {"a": ["a-0", "a-1"], "b": ["b-0", "b-1"]}


def test_peek_shows_a_groups_first_item_without_taking_it():
    db = memory.open()
    queue = Queue(Subspace(("peek",)))
    queue.enqueue_many(db, ["a-0", "a-1"], group="a")
    assert queue.peek(db) == "a-0"
    assert run(db, lambda tr: queue.dequeue(tr)) == "a-0"
    assert queue.peek(db) == "a-1"


# -- priority queues ---------------------------------------------------------------------------

PRIORITY_LAYOUTS = [
    pytest.param({}, id="plain"),
    pytest.param({"high_contention": True}, id="in-line"),
    pytest.param({"shards": 4}, id="sharded"),
]


def pop_all(db: Any, queue: PriorityQueue[Any], highest: bool) -> list[Any]:
    values = []
    while (value := queue.pop(db, max=highest)) is not None:
        values.append(value)
    return values


def push_mixed(db: Any, queue: PriorityQueue[Any]) -> None:
    queue.push(db, "a-p5", 5, group="a")
    queue.push(db, "a-p1", 1, group="a")  # after a-p5 in its group, whatever its priority
    queue.push(db, "b-p3", 3, group="b")
    queue.push(db, "u-p2", 2)
    queue.push(db, "u-p4", 4)


@pytest.mark.parametrize("layout", PRIORITY_LAYOUTS)
def test_a_priority_queue_ranks_a_groups_turn_by_its_first_items_priority(layout):
    db = memory.open()
    queue = PriorityQueue(Subspace(("priority-groups", str(layout))), **layout)
    push_mixed(db, queue)
    assert queue.peek(db) == "u-p2" and queue.peek(db, max=True) == "a-p5"
    assert pop_all(db, queue, highest=False) == ["u-p2", "b-p3", "u-p4", "a-p5", "a-p1"]
    push_mixed(db, queue)
    assert pop_all(db, queue, highest=True) == ["a-p5", "u-p4", "b-p3", "u-p2", "a-p1"]
    invariant(db, queue)


@pytest.mark.parametrize("layout", PRIORITY_LAYOUTS)
def test_a_priority_queue_keeps_one_item_of_a_group_in_flight(layout):
    db = memory.open()
    queue = PriorityQueue(Subspace(("priority-flight", str(layout))), **layout)
    queue.push(db, "a-1", 1, group="a")
    queue.push(db, "a-2", 9, group="a")
    first = queue.claim(db, 10, max=True)  # a-1: a group's turn is its first item's
    assert first is not None and (first.value, first.group) == ("a-1", "a")
    assert queue.claim(db, 10) is None and queue.claim(db, 10, max=True) is None
    queue.push(db, "b-1", 5, group="b")
    invariant(db, queue)  # a in flight without a turn, b with one
    queue.ack(db, first)
    second = queue.claim(db, 10)
    assert second is not None and second.value == "b-1"
    invariant(db, queue)
    assert queue.claim(db, 10).value == "a-2"  # type: ignore[union-attr]


def test_a_priority_queues_groups_take_turns_within_a_priority_at_both_ends():
    db = memory.open()
    queue = PriorityQueue(Subspace(("priority-turns",)))
    for name in "ab":
        for i in range(2):
            queue.push(db, f"{name}-{i}", 7, group=name)
    assert [queue.pop(db) for _ in range(2)] == ["a-0", "b-0"]
    assert [queue.pop(db, max=True) for _ in range(2)] == ["a-1", "b-1"]


def test_a_priority_queues_delayed_and_requeued_group_items_go_back_to_their_group():
    db = memory.open()
    queue = PriorityQueue(Subspace(("priority-delayed",)))
    queue.push(db, "a-late", 1, group="a", delay=5)
    queue.push(db, "a-now", 8, group="a")
    lease = queue.claim(db, 10)
    assert lease is not None and lease.value == "a-now"
    queue.dead_letter(db, lease, "later")
    pass_time(db, 6)
    assert queue.requeue_dead_letters(db) == 1  # back into its group, at once
    # the delayed item joins its group when the next take looks: after the requeued one
    assert pop_all(db, queue, highest=False) == ["a-now", "a-late"]
    invariant(db, queue)


def test_a_priority_queue_refuses_a_bad_group_before_writing():
    db = memory.open()
    queue = PriorityQueue(Subspace(("priority-bad",)))
    with pytest.raises(TypeError):
        queue.push(db, "v", 1, group=2.5)
    with pytest.raises(ValueError):
        queue.push(db, "v", 1, group="x" * MAX_GROUP_BYTES, delay=1)
    assert all_keys(db, Subspace(("priority-bad",))) == []


def test_peek_many_lists_the_ungrouped_items_then_the_groups_in_turn():
    db = memory.open()
    queue = Queue(Subspace(("peek-many",)))
    queue.enqueue_many(db, ["b-0", "b-1"], group="b")
    queue.enqueue_many(db, ["u-0", "u-1"])
    queue.enqueue_many(db, ["a-0"], group="a")
    assert queue.peek_many(db, None) == ["u-0", "u-1", "b-0", "a-0", "b-1"]
    assert queue.peek_many(db, 3) == ["u-0", "u-1", "b-0"]
    assert run(db, lambda tr: queue.peek_many(tr, 1)) == ["u-0"]
    assert queue.info(db).oldest == "u-0"


def test_a_sharded_take_finds_nothing_at_once_when_every_group_is_in_flight():
    """The size counter still counts a busy group's items: a sharded take must not loop on
    a shard whose items are all behind a lease."""
    db = memory.open()
    queue = Queue(Subspace(("all-busy",)), shards=3)
    queue.enqueue_many(db, ["a-0", "a-1"], group="a")
    lease = queue.claim(db, 10)
    assert lease is not None
    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(queue.dequeue(db)), daemon=True)
    worker.start()
    worker.join(10)
    assert result == [None]
    queue.ack(db, lease)
    assert queue.dequeue(db) == "a-1"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_blocked_take_wakes_when_a_groups_lease_ends(layout):
    db = memory.open()
    queue = Queue(Subspace(("wake", str(layout))), **layout)
    queue.enqueue_many(db, ["a-0", "a-1"], group="a")
    lease = queue.claim(db, 30)
    assert lease is not None
    result: list[Any] = []
    waiting = threading.Thread(
        target=lambda: result.append(queue.dequeue(db, block=True, timeout=20)), daemon=True
    )
    waiting.start()
    time.sleep(0.3)
    assert result == []  # a-1 waits behind a-0's lease
    started = time.monotonic()
    queue.ack(db, lease)
    waiting.join(10)
    assert result == ["a-1"] and time.monotonic() - started < 5


# -- weights -----------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_groups_weight_serves_it_that_many_items_in_a_row_each_turn(layout):
    db = memory.open()
    queue = Queue(Subspace(("weights", str(layout))), **layout)
    queue.set_group_weight(db, "heavy", 3)
    assert queue.group_weight(db, "heavy") == 3 and queue.group_weight(db, "light") == 1
    queue.enqueue_many(db, group_items("heavy", 6), group="heavy")
    queue.enqueue_many(db, group_items("light", 3), group="light")
    taken = drain(db, queue)
    assert per_group(taken) == {"heavy": group_items("heavy", 6), "light": group_items("light", 3)}
    if "shards" not in layout:  # one shard: the turns are the queue's
        names = [value.split("-")[0] for value in taken]
        assert names == ["heavy"] * 3 + ["light"] + ["heavy"] * 3 + ["light"] * 2
    invariant(db, queue)


def test_a_weighted_group_keeps_its_place_while_its_item_is_leased():
    db = memory.open()
    queue = Queue(Subspace(("weights-leased",)))
    queue.set_group_weight(db, "heavy", 2)
    queue.enqueue_many(db, group_items("heavy", 4), group="heavy")
    queue.enqueue_many(db, group_items("light", 2), group="light")
    order = []
    while (lease := queue.claim(db, 10)) is not None:
        order.append(lease.value)
        invariant(db, queue)
        queue.ack(db, lease)
    names = [value.split("-")[0] for value in order]
    assert names == ["heavy", "heavy", "light", "heavy", "heavy", "light"]
    assert per_group(order) == {"heavy": group_items("heavy", 4), "light": group_items("light", 2)}
    invariant(db, queue)


def test_a_weight_back_to_one_clears_it_and_bad_weights_are_refused():
    db = memory.open()
    queue = PriorityQueue(Subspace(("weights-bad",)))
    queue.set_group_weight(db, "g", 5)
    queue.set_group_weight(db, "g", 1)
    assert queue.group_weight(db, "g") == 1
    assert all_keys(db, Subspace(("weights-bad",))) == []
    for weight, error in [(0, ValueError), (1001, ValueError), (2.0, TypeError), (True, TypeError)]:
        with pytest.raises(error):
            queue.set_group_weight(db, "g", weight)
    with pytest.raises(TypeError):
        queue.set_group_weight(db, 1.5, 2)
    assert all_keys(db, Subspace(("weights-bad",))) == []


def test_the_largest_values_go_through_a_group_with_the_longest_name():
    db = memory.open()
    queue = Queue(Subspace(("largest",)), codec="raw")
    group = "g" * (MAX_GROUP_BYTES - 3)  # packed: a type byte, the bytes, a terminator
    big = [bytes([n]) * 100_000 for n in range(3)]
    queue.enqueue_many(db, big, group=group)
    lease = queue.claim(db, 10)
    assert lease is not None and lease.value == big[0] and lease.group == group
    queue.ack(db, lease)
    assert drain(db, queue) == big[1:]
    invariant(db, queue)


def test_a_batch_is_checked_with_the_groups_longer_keys_before_anything_is_written():
    db = memory.open()
    queue = Queue(Subspace(("batch",)), codec="raw")
    group = "g" * (MAX_GROUP_BYTES - 3)
    # small values: the keys decide; a batch that fits without the group does not with it
    values = [b"v"] * 9_000
    Queue(Subspace(("batch-ungrouped",)), codec="raw").enqueue_many(db, values)  # it fits
    with pytest.raises(ValueError, match="smaller batches"):
        queue.enqueue_many(db, values, group=group)
    assert queue.size(db) == 0 and all_keys(db, Subspace(("batch",))) == []


def test_a_group_another_process_starts_gets_its_turn_at_once_at_any_call_rate():
    """Every take reads the groups' count, whatever the queue object saw before and however
    recently it was called: a group that another queue object starts while items without a
    group fill the front is served from the next takes (its turn: even odds per take)."""
    db = memory.open()
    queue = Queue(Subspace(("groups", "any-rate")))
    queue.enqueue_many(db, [f"plain-{n}" for n in range(50)])
    assert queue.dequeue(db) == "plain-0" and queue.dequeue(db) == "plain-1"  # no group yet
    Queue(Subspace(("groups", "any-rate"))).enqueue(db, "grouped", group="g")
    taken = [queue.dequeue(db) for _ in range(20)]  # no time passes
    assert "grouped" in taken
    assert sorted(queue.dequeue_many(db, 100) + taken) == sorted(
        [f"plain-{n}" for n in range(2, 50)] + ["grouped"]
    )


def _put(queue: Any, tr: Any, value: str) -> None:
    if isinstance(queue, PriorityQueue):
        queue.push(tr, value, 1, group="g")
    else:
        queue.enqueue(tr, value, group="g")


@pytest.mark.parametrize("kind", [Queue, PriorityQueue])
@pytest.mark.parametrize("shards", [1, 4])
def test_overlapping_enqueues_into_a_group_come_out_in_commit_order(kind, shards):
    """Two enqueues into one group that overlap (both read the group before either commits)
    come out in the order they committed: the later one conflicts and retries behind the
    first, whatever their random parts."""
    db = memory.open()
    out_of_order = 0
    for trial in range(30):
        queue = kind(Subspace(("commit-order", trial)), shards=shards)
        _put(queue, db, "before")
        first, second = db.create_transaction(), db.create_transaction()
        _put(queue, first, "first")
        _put(queue, second, "second")
        second.commit().wait()  # "second" commits first
        while True:
            try:
                first.commit().wait()
                break
            except memory.FDBError as error:
                first.on_error(error).wait()  # a conflict: retry, as a retry loop does
                _put(queue, first, "first")
        taken = [queue.dequeue(db) if kind is Queue else queue.pop(db) for _ in range(3)]
        assert sorted(taken) == ["before", "first", "second"]
        out_of_order += taken != ["before", "second", "first"]
    assert out_of_order == 0


@pytest.mark.parametrize("batch", [1, 3, 7, 16])
def test_batch_takes_keep_the_fairness_bound_exactly(batch):
    """One group's backlog delays every other group's item by at most one turn per item,
    whether the takes come one at a time or in batches: turns given by one transaction are
    ordered by when their groups were served, not by the groups' names (the backlog's group
    sorts first here)."""
    db = memory.open()
    queue = Queue(Subspace(("fair-batches", batch)))
    queue.enqueue_many(db, [("big", n) for n in range(600)], group="a-big")
    small, per_group = 40, 5
    for g in range(small):
        queue.enqueue_many(db, [(f"s-{g:03d}", n) for n in range(per_group)], group=f"s-{g:03d}")
    taken: list[Any] = []
    while len(taken) < 600 + small * per_group:
        got = queue.dequeue_many(db, batch)
        assert got
        taken += got
    last_small = max(i for i, (group, _n) in enumerate(taken) if group != "big")
    assert last_small + 1 <= per_group * (small + 1), last_small + 1


def _shares(concurrency: int, pause: float) -> tuple[float, int]:
    """The weight-3 group's share of the first jobs the worker loop ran while four groups
    (weights 3, 1, 1, 1) all had items, and the most items of one group ever in flight."""
    db = memory.open()
    queue = Queue(Subspace(("weights-workers", concurrency)))
    queue.set_group_weight(db, "heavy", 3)
    for group in ("heavy", "l1", "l2", "l3"):
        queue.enqueue_many(db, [(group, n) for n in range(40)], group=group)
    handled: list[str] = []
    running: collections.Counter[str] = collections.Counter()
    most = 0
    lock = threading.Lock()

    def handler(value: Any) -> None:
        nonlocal most
        with lock:
            running[value[0]] += 1
            most = max(most, running[value[0]])
            handled.append(value[0])
        time.sleep(pause)
        with lock:
            running[value[0]] -= 1

    queue.work(db, handler, lease=30, concurrency=concurrency, until_empty=True)
    assert len(handled) == 160
    window = handled[:80]  # every group still has items then (40 each)
    return window.count("heavy") / len(window), most


def test_weights_give_their_share_to_one_worker_and_one_item_in_flight_caps_them():
    """What docs/groups.rst states: weights are shares of takes, and of one worker's claims
    (3 of 6: 0.5 here); under leases a group has one item in flight, so with concurrent
    workers a weighted group cannot take more than one worker: its share falls towards
    1/concurrency (never below an unweighted group's)."""
    share, most = _shares(1, 0.0)
    assert 0.45 <= share <= 0.55 and most == 1
    share, most = _shares(4, 0.003)
    assert most == 1  # never two items of a group at once
    assert 0.15 <= share < 0.45  # capped near 1/4, not the 0.5 weights give one worker
