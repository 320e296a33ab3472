"""Sharded queues (``Queue(subspace, shards=N)``): the key layout, the shard count on record,
every item taken exactly once whatever shard it went to, takes that find an item in any
shard, leases routed back to their shard, and figures summed over the shards."""

from __future__ import annotations

import re
import threading
import time

import fdb.tuple
import pytest
from helpers import all_keys, write_into_shard

from fdbqueue import PriorityQueue, Queue, QueueTypeError, Subspace, memory, transactional
from fdbqueue._queues.router import MAX_SHARDS


def is_item(suffix: bytes) -> bool:
    """Whether a key after the queue's prefix is a shard's item: ``pack((shard, index,
    random))`` (a shard's metadata key has 0xff after the shard and does not unpack)."""
    try:
        return len(fdb.tuple.unpack(suffix)) == 3
    except ValueError:
        return False


def test_items_and_metadata_live_under_their_shard(db, subspace):
    queue = Queue(subspace, shards=4)
    for value in range(8):
        queue.enqueue(db, value)
    prefix = subspace.key()
    keys = dict(all_keys(db, subspace))
    features = keys[prefix + b"\xff" + fdb.tuple.pack(("features",))]  # the queue's, one
    assert features[3:] == b"Queue/4\x00tuple"  # after the format byte and the bits
    items = [key for key in keys if key < prefix + b"\xff" and is_item(key[len(prefix) :])]
    shards = {fdb.tuple.unpack(key[len(prefix) :])[0] for key in items}
    assert len(items) == 8
    assert shards == {0, 1, 2, 3}  # enqueues go to the shards in turn
    for key in items:
        shard, index, random = fdb.tuple.unpack(key[len(prefix) :])
        assert index >= 1 and len(random) == 20
        size_key = prefix + fdb.tuple.pack((shard,)) + b"\xff" + fdb.tuple.pack(("size",))
        assert size_key in keys  # each shard counts its own items
        shard_metadata = prefix + fdb.tuple.pack((shard,)) + b"\xff"
        assert shard_metadata + fdb.tuple.pack(("features",)) not in keys


def test_every_item_is_taken_once_and_the_figures_add_up(db, subspace):
    queue = Queue(subspace, shards=4)
    queue.enqueue_many(db, ["a", "b", "c"])  # one batch: three shards, as three enqueues
    for value in range(20):
        queue.enqueue(db, value)
    assert queue.size(db) == 23
    assert not queue.empty(db)
    info = queue.info(db)
    assert info.size == 23 and len(info.shards) == 4
    assert sorted(shard.size for shard in info.shards) == [5, 6, 6, 6]  # in turn
    assert sorted(map(str, queue.peek_many(db, None))) == sorted(
        map(str, ["a", "b", "c", *range(20)])
    )
    taken = [queue.dequeue(db) for _ in range(23)]
    assert sorted(map(str, taken)) == sorted(map(str, ["a", "b", "c", *range(20)]))
    assert queue.dequeue(db) is None
    assert queue.empty(db) and queue.size(db) == 0 and queue.peek(db) is None


@pytest.mark.parametrize("attempt", range(12))
def test_a_take_finds_the_one_item_whatever_shard_it_starts_at(db, subspace, attempt):
    queue = Queue(subspace, shards=8)
    queue.enqueue(db, f"only-{attempt}")
    assert queue.dequeue(db) == f"only-{attempt}"
    queue.enqueue(db, "claimed")
    lease = queue.claim(db, 30)
    assert lease is not None and lease.value == "claimed"
    queue.ack(db, lease)
    queue.enqueue_many(db, ["x", "y"])
    assert sorted(queue.dequeue_many(db, 5)) == ["x", "y"]
    assert queue.dequeue(db) is None


def test_a_take_inside_a_transaction_looks_at_every_shard(db, subspace):
    queue = Queue(subspace, shards=8)
    queue.enqueue(db, "inside")

    @transactional
    def take(tr):
        return queue.dequeue(tr)

    assert take(db) == "inside"
    assert take(db) is None


def test_leases_go_back_to_their_shard(db, subspace):
    queue = Queue(subspace, shards=4)
    for value in range(8):
        queue.enqueue(db, value)
    leases = queue.claim_many(db, 3, 30)
    assert len(leases) >= 1
    others = [queue.claim(db, 30) for _ in range(8 - len(leases))]
    leases += [lease for lease in others if lease is not None]
    assert sorted(lease.value for lease in leases) == list(range(8))
    assert len(queue.leases(db, None)) == 8
    queue.ack_many(db, leases[:5])  # leases of several shards, one transaction
    queue.release(db, leases[5])
    extended = queue.extend(db, leases[6], 60)
    queue.dead_letter(db, extended, "broken")
    again = queue.claim(db, 30)
    assert again is not None and again.value == leases[5].value and again.deliveries == 2
    queue.ack(db, again)
    queue.ack(db, leases[7])
    assert [letter.reason for letter in queue.dead_letters(db)] == ["broken"]
    assert queue.requeue_dead_letters(db) == 1
    assert queue.dequeue(db) == leases[6].value
    assert queue.leases(db) == [] and queue.size(db) == 0


def test_a_lease_of_another_queue_is_refused(db, subspace):
    queue = Queue(subspace, shards=4)
    other = Queue(subspace["other"], shards=4)
    other.enqueue(db, "theirs")
    lease = other.claim(db, 30)
    with pytest.raises(ValueError, match="another queue"):
        queue.ack(db, lease)
    with pytest.raises(ValueError, match="another queue"):
        queue.ack_many(db, [lease])
    with pytest.raises(TypeError, match="Lease"):
        queue.release(db, "not a lease")
    other.ack(db, lease)


def test_another_shard_count_is_refused_before_anything_is_written(db, subspace):
    Queue(subspace, shards=4).enqueue(db, "x")
    before = all_keys(db, subspace)
    with pytest.raises(QueueTypeError, match=r"a Queue of 4 shards, not a Queue of 2 shards"):
        Queue(subspace, shards=2).enqueue(db, "y")
    with pytest.raises(QueueTypeError, match=r"shards=4"):
        Queue(subspace).enqueue(db, "y")
    assert all_keys(db, subspace) == before


@pytest.mark.parametrize("take", [False, True])
def test_the_shard_count_refusal_names_the_queue_as_people_wrote_it(db, subspace, take):
    """The queue as its tuple prefix, as logs and the CLI show it: not ``Subspace(rawPrefix=
    ...)``. The same for a take (which checks the records before its first write) and for the
    codec refusal."""
    name = repr(fdb.tuple.unpack(subspace.key()))  # ('fdbqueue-test', '...')
    Queue(subspace, shards=4).enqueue(db, "x")
    opened_again = Queue(subspace, shards=2)
    with pytest.raises(QueueTypeError) as refused:
        opened_again.dequeue(db) if take else opened_again.enqueue(db, "y")
    assert str(refused.value).startswith(
        f"queue {name} holds a Queue of 4 shards, not a Queue of 2 shards: open it as "
        "fdbqueue.Queue(..., shards=4)"
    )
    with pytest.raises(QueueTypeError, match=rf"^queue {re.escape(name)} was written with"):
        Queue(subspace, shards=4, codec="json").enqueue(db, "y")


def test_an_unsharded_queue_is_not_opened_as_a_sharded_one(db, subspace):
    Queue(subspace).enqueue(db, "x")
    before = all_keys(db, subspace)
    with pytest.raises(QueueTypeError, match=r"holds a Queue, not a Queue of 3 shards"):
        Queue(subspace, shards=3).enqueue(db, "y")
    assert all_keys(db, subspace) == before


def test_clear_removes_every_shard_but_the_receipts(db, subspace):
    queue = Queue(subspace, shards=4)
    for value in range(8):
        queue.enqueue(db, value)
    lease = queue.claim(db, 30)
    queue.clear(db)
    left = dict(all_keys(db, subspace))
    features = subspace.key() + b"\xff" + fdb.tuple.pack(("features",))
    assert len(left.pop(features)) == 3  # the features used stay, the type goes
    assert all(b"receipts" in key for key in left)
    assert queue.size(db) == 0 and queue.dequeue(db) is None
    with pytest.raises(Exception, match=r"no longer|not held|does not exist"):
        queue.ack(db, lease)
    Queue(subspace, shards=2).enqueue(db, "a new queue")  # the shard count went with it


def test_delayed_items_fall_due_in_any_shard(db, subspace):
    queue = Queue(subspace, shards=8)
    queue.enqueue(db, "later", delay=0.2)
    assert queue.dequeue(db) is None
    deadline = time.monotonic() + 10
    value = None
    while value is None and time.monotonic() < deadline:
        time.sleep(0.05)
        value = queue.dequeue(db)
    assert value == "later"


def test_a_blocked_take_wakes_on_an_enqueue_into_any_shard(db, subspace):
    queue = Queue(subspace, shards=8)
    got = []
    taker = threading.Thread(target=lambda: got.append(queue.dequeue(db, block=True, timeout=20)))
    taker.start()
    time.sleep(0.2)
    for value in range(3):  # three shards in turn: one of them is where the taker looks last
        Queue(subspace, shards=8).enqueue(db, f"wake-{value}")
    taker.join(25)
    assert not taker.is_alive() and got and got[0].startswith("wake-")
    assert queue.dequeue(db, block=True, timeout=0.2) is not None


def test_concurrent_producers_and_consumers_take_each_item_once(db, subspace):
    queue = Queue(subspace, shards=4)
    count, producers, consumers = 120, 3, 4
    taken: list[int] = []
    lock = threading.Lock()

    def produce(offset: int) -> None:
        for value in range(offset, count, producers):
            queue.enqueue(db, value)

    def consume() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with lock:
                if len(taken) == count:
                    return
            value = queue.dequeue(db, block=True, timeout=0.5)
            if value is not None:
                with lock:
                    taken.append(value)

    threads = [threading.Thread(target=produce, args=(n,)) for n in range(producers)]
    threads += [threading.Thread(target=consume) for _ in range(consumers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    assert sorted(taken) == list(range(count))
    assert queue.size(db) == 0


def test_faults_between_transactions_lose_and_repeat_nothing():
    db = memory.open(faults=memory.Faults(not_committed=0.1, commit_unknown_result=0.1), seed=7)
    queue = Queue(("faulty",), shards=4)
    for value in range(40):
        queue.enqueue(db, value)
    taken = [queue.dequeue(db) for _ in range(40)]
    assert sorted(taken) == list(range(40))
    assert queue.dequeue(db) is None


@pytest.mark.parametrize(
    ("shards", "error"),
    [(0, ValueError), (MAX_SHARDS + 1, ValueError), (True, TypeError), ("4", TypeError)],
)
def test_a_bad_shard_count_is_refused_before_anything_is_written(db, subspace, shards, error):
    with pytest.raises(error, match="shards"):
        Queue(subspace, shards=shards)
    assert all_keys(db, subspace) == []


def test_sessions_take_every_item_once_moving_to_shards_that_hold_items(db, subspace):
    queue = Queue(subspace, shards=4)
    for value in range(40):
        queue.enqueue(db, value)
    taken: list[int] = []
    lock = threading.Lock()

    def consume() -> None:
        with queue.consumer(db, prefetch=2) as session:
            while (value := session.take()) is not None:
                with lock:
                    taken.append(value)

    threads = [threading.Thread(target=consume) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(taken) == list(range(40))
    assert queue.requests_in_line(db) == 0  # every session withdrew its places


def test_a_session_blocks_on_every_shard_and_claims(db, subspace):
    queue = Queue(subspace, shards=4)
    with queue.consumer(db) as session:
        timer = threading.Timer(0.2, lambda: Queue(subspace, shards=4).enqueue(db, "late"))
        timer.start()
        assert session.take(block=True, timeout=20) == "late"
        queue.enqueue(db, "leased")
        lease = session.claim(30)
        assert lease is not None and lease.value == "leased"
        queue.ack(db, lease)
        assert session.take(block=True, timeout=0.1) is None
    with pytest.raises(RuntimeError, match="closed"):
        session.take()
    with pytest.raises(ValueError, match="prefetch"):
        queue.consumer(db, prefetch=256)


def test_a_priority_session_takes_the_best_priority_first(db, subspace):
    queue = PriorityQueue(subspace, shards=3)
    for number in range(9):
        queue.push(db, number, number % 3)
    with queue.consumer(db) as session:
        taken = [session.pop() for _ in range(10)]
    assert [number % 3 for number in taken[:9]] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert taken[9] is None


def test_a_sharded_priority_queue_pops_the_best_priority_of_every_shard(db, subspace):
    queue = PriorityQueue(subspace, shards=4)
    pushed = [(priority * 7) % 10 for priority in range(30)]  # priorities 0-9, mixed order
    for number, priority in enumerate(pushed):
        queue.push(db, (priority, number), priority)
    assert queue.size(db) == 30
    assert queue.peek_min(db)[0] == 0 and queue.peek_max(db)[0] == 9
    lows = [queue.pop_min(db)[0] for _ in range(15)]
    highs = [queue.pop_max(db)[0] for _ in range(15)]
    assert lows == sorted(pushed)[:15]  # exactly the order an unsharded queue gives
    assert highs == sorted(pushed, reverse=True)[:15]
    assert queue.pop_min(db) is None and queue.peek_max(db) is None
    queue.push(db, "claimed", 5)
    lease = queue.claim(db, 30, max=True)
    assert lease is not None and lease.value == "claimed"
    queue.ack(db, lease)
    assert queue.info(db).leases_in_flight == 0


def test_a_sharded_priority_queue_records_its_shards(db, subspace):
    PriorityQueue(subspace, shards=3).push(db, "x", 1)
    with pytest.raises(QueueTypeError, match=r"a PriorityQueue of 3 shards, not a PriorityQueue"):
        PriorityQueue(subspace).push(db, "y", 1)
    with pytest.raises(QueueTypeError, match=r"PriorityQueue of 3 shards, not a Queue of 3"):
        Queue(subspace, shards=3).enqueue(db, "y")


def test_the_worker_loop_and_asyncio_run_on_a_sharded_queue(db, subspace):
    import asyncio

    import fdbqueue.asyncio as fa

    queue = Queue(subspace, shards=4)
    for value in range(12):
        queue.enqueue(db, value)
    seen: list[int] = []
    stop = threading.Event()

    def handler(value: int) -> None:
        seen.append(value)
        if len(seen) == 12:
            stop.set()

    summary = queue.work(db, handler, lease=30, concurrency=3, stop=stop)
    assert sorted(seen) == list(range(12)) and summary.succeeded == 12

    async def twin() -> list[object]:
        queue = fa.Queue(subspace, shards=4)
        await queue.enqueue_many(db, ["p", "q"])
        waiting = asyncio.create_task(queue.dequeue(db, block=True, timeout=10))
        first = await waiting
        return [first, await queue.dequeue(db), await queue.dequeue(db)]

    taken = asyncio.run(twin())  # a batch spreads over the shards: FIFO up to a bound
    assert sorted(taken[:2]) == ["p", "q"] and taken[2] is None


def test_claims_and_acks_across_shards_under_faults_lose_and_repeat_nothing():
    db = memory.open(
        faults=memory.Faults(not_committed=0.1, commit_unknown_result=0.1, recovery=0.05), seed=3
    )
    queue = Queue(("faulty-leases",), shards=4)
    queue.enqueue_many(db, list(range(12)))  # one shard
    for value in range(12, 24):
        queue.enqueue(db, value)  # the others in turn
    claimed = []
    while len(claimed) < 24:
        batch = queue.claim_many(db, 5, 60)
        assert batch, "items are left, yet nothing was claimed"
        claimed.extend(batch)
        queue.ack_many(db, batch)  # leases of several shards in one transaction
    assert sorted(lease.value for lease in claimed) == list(range(24))
    assert queue.claim(db, 60) is None
    assert queue.leases(db, None) == [] and queue.size(db) == 0


def test_consumers_of_one_process_spread_items_loaded_into_one_shard():
    """Every item in one shard: a consumer whose home is empty moves a run of that shard's
    front into its home (another consumer of the process lives there), so the consumers
    spread again; every item is taken once, and the moved run keeps its order."""
    db = memory.open()
    queue = Queue(Subspace(("one-shard-load",)), shards=4)
    for n in range(600):
        write_into_shard(db, queue, 0, n)
    first: list[int] = []
    second: list[int] = []
    settled, done = threading.Event(), threading.Event()

    def first_consumer() -> None:  # takes one item: at home in shard 0, alive meanwhile
        first.append(queue.dequeue(db))
        settled.set()
        done.wait(30)

    def second_consumer() -> None:
        settled.wait(30)
        second.extend(queue.dequeue(db) for _ in range(5))

    threads = [threading.Thread(target=first_consumer), threading.Thread(target=second_consumer)]
    for thread in threads:
        thread.start()
    threads[1].join(30)
    holding = [shard.size > 0 for shard in queue.info(db).shards]
    done.set()
    threads[0].join(30)
    assert first == [0]
    assert holding.count(True) == 2  # a run of shard 0 moved into the second one's home
    assert second == list(range(1, 6))  # the run is shard 0's front, in order
    rest = queue.dequeue_many(db, 1000)
    assert sorted(first + second + rest) == list(range(600))  # each once
