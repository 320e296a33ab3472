"""What sharded queues promise, through the public API only (issue 30).

Each test states one promise of ``Queue(subspace, shards=N)`` / ``PriorityQueue(subspace,
shards=N)`` that the documentation makes (docs/sharding.rst, docs/concepts.rst,
docs/delayed-delivery.rst, :class:`fdbqueue.QueueInfo`) or that issue 30 asks for:

1. concurrent sharded pops take the best priorities present at their read versions;
2. a queue opened with another shard count or type is refused by every operation, reads and
   takes included, with QueueTypeError and before anything changes;
3. blocking takes wake for delayed items that fall due in any shard;
4. a sharded PriorityQueue accepts ``push(..., delay=...)`` (API, asyncio, command line);
5. a sharded ``enqueue_many`` spreads its batch over the shards;
6. an expired lease in any shard is claimed again within a few claims;
7. ``peek``, ``peek_many`` and ``info().oldest`` show what the next take returns;
8. a plain take of a queue that never used groups or delays reads none of their records.

Nothing here imports ``fdbqueue._*`` or touches private attributes. Where a test needs the key
layout it computes keys from the documented layout (docs/concepts.rst: shard ``k`` of a queue
with prefix ``P`` lives at ``P + pack((k,))``, its metadata at ``... + b"\\xff" +
pack((name, ...))``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import fdb.tuple
import pytest
from click.testing import CliRunner
from helpers import all_keys

import fdbqueue.asyncio as fa
from fdbqueue import PriorityQueue, Queue, Subspace, memory, transactional
from fdbqueue.cli import cli
from fdbqueue.errors import QueueTypeError

#: A latency model under which two threads' transactions overlap (docs/memory.rst).
OVERLAPPING = memory.Latency(grv=0.001, read=0.001, commit=0.002)


def in_thread(call: Callable[[], Any], timeout: float) -> tuple[str, Any]:
    """Run ``call`` in a daemon thread: ``("returned", value)``, ``("raised", error)``, or
    ``("hung", None)`` when it has not finished after ``timeout`` seconds."""
    outcome: list[tuple[str, Any]] = []

    def target() -> None:
        try:
            outcome.append(("returned", call()))
        except BaseException as error:  # reported to the test, not lost in the thread
            outcome.append(("raised", error))

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    return outcome[0] if outcome else ("hung", None)


def item_keys(db: Any, subspace: Subspace) -> list[tuple[int, Any]]:
    """``(shard, value)`` of every item of a sharded tuple-codec queue, in key order: the
    documented layout puts shard ``k``'s items at ``P + pack((k, index, random))`` and stores
    a value as ``pack((value,))``; a shard's metadata key has 0xff after the shard and does
    not unpack to three elements."""
    prefix = subspace.key()
    found = []
    for key, value in all_keys(db, subspace):
        try:
            element = fdb.tuple.unpack(key[len(prefix) :])
        except ValueError:
            continue
        if len(element) == 3:
            found.append((element[0], fdb.tuple.unpack(value)[0]))
    return found


@transactional
def fill_in_turn(tr: Any, queue: Queue[int], count: int) -> None:
    """Enqueue ``0 .. count - 1`` in one transaction: one enqueue each, so into the shards in
    turn (docs/concepts.rst), each shard's share in order."""
    for value in range(count):
        queue.enqueue(tr, value)


# -- 1. concurrent pops of a sharded priority queue ---------------------------------------------


def pop_in(queue: PriorityQueue[Any], db: Any, how: str, ready: threading.Barrier) -> Any:
    """One pop of ``queue`` as ``how`` says, after every thread of the trial is ready."""
    if how.startswith("session"):
        with queue.consumer(db, max=how.endswith("max")) as session:
            ready.wait()
            return session.pop()
    ready.wait()
    return queue.pop_max(db) if how.endswith("max") else queue.pop_min(db)


def pop_together(queue: PriorityQueue[Any], db: Any, how: str) -> list[Any]:
    """Two pops of ``queue`` in two threads released at once; what they returned."""
    ready = threading.Barrier(2)
    taken: list[Any] = []
    threads = [
        threading.Thread(target=lambda: taken.append(pop_in(queue, db, how, ready)))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    return taken


@pytest.mark.parametrize(
    ("how", "high_contention"),
    [
        ("pop_min", False),
        ("pop_max", False),
        ("pop_min", True),
        ("session min", False),
        ("session max", False),
    ],
)
def test_concurrent_sharded_pops_take_the_best_priorities(how, high_contention):
    # Two shards hold {1, 10} and {3}. Whatever the interleaving, each of two concurrent pops
    # takes the best priority present at its read version (docs/sharding.rst: "exact at that
    # read version"), so together they take {1, 3} from the min end and {10, 3} from the max
    # end: 10 (or 1) is never the best while 3 is there. A pop that ranks the shards in one
    # transaction and takes in another takes 10 (or 1) when it loses the race for the best
    # shard's head. 12 trials with overlapping latencies (docs/memory.rst) and real threads.
    TRIALS = 12
    db = memory.open(latency=OVERLAPPING)
    wanted = [3, 10] if how.endswith("max") else [1, 3]
    wrong = []
    for trial in range(TRIALS):
        space = Subspace(("shard-promises", "pops", how, high_contention, trial))
        queue: PriorityQueue[int] = PriorityQueue(space, shards=2, high_contention=high_contention)
        for priority in (1, 3, 10):  # pushes go to the shards in turn: {1, 10} and {3}
            queue.push(db, priority, priority)
        shards = queue.info(db).shards
        assert sorted(shard.size for shard in shards) == [1, 2]
        assert sorted(shard.oldest for shard in shards) == [1, 3]
        taken = pop_together(queue, db, how)
        assert len(taken) == 2, f"trial {trial}: a pop did not return within 10 s"
        if sorted(taken) != wanted:
            wrong.append(sorted(taken))
    assert wrong == [], f"{len(wrong)} of {TRIALS} trials took {wrong[0]}, not {wanted}"


# -- 2. another shard count or type is refused by every operation -------------------------------


def in_session(queue: Any, db: Any, call: Callable[[Any], Any], **options: Any) -> Any:
    with queue.consumer(db, **options) as session:
        return call(session)


def in_asyncio(make: Callable[[], Any]) -> Any:
    async def main() -> Any:
        return await make()

    return asyncio.run(main())


#: ``[event]``: the current test's event that stops a worker loop that never ends (it
#: retries an error instead of raising it); each test gets a new one (``fresh_stop``).
STOP_WORKERS = [threading.Event()]

QUEUE_CALLS: dict[str, Callable[[Any, Any], Any]] = {
    "dequeue": lambda q, db: q.dequeue(db),
    "dequeue blocking": lambda q, db: q.dequeue(db, block=True, timeout=0.3),
    "dequeue_many": lambda q, db: q.dequeue_many(db, 20),
    "peek": lambda q, db: q.peek(db),
    "peek_many": lambda q, db: q.peek_many(db, 20),
    "claim": lambda q, db: q.claim(db, 30),
    "claim blocking": lambda q, db: q.claim(db, 30, block=True, timeout=0.3),
    "claim_many": lambda q, db: q.claim_many(db, 20, 30),
    "size": lambda q, db: q.size(db),
    "empty": lambda q, db: q.empty(db),
    "info": lambda q, db: q.info(db),
    "leases": lambda q, db: q.leases(db),
    "dead_letters": lambda q, db: q.dead_letters(db),
    "requests_in_line": lambda q, db: q.requests_in_line(db),
    "purge_dead_letters": lambda q, db: q.purge_dead_letters(db),
    "session take": lambda q, db: in_session(q, db, lambda s: s.take(), prefetch=1),
    "session claim": lambda q, db: in_session(q, db, lambda s: s.claim(30)),
    "work": lambda q, db: q.work(
        db, lambda value: None, lease=30, until_empty=True, stop=STOP_WORKERS[0]
    ),
    "asyncio dequeue": lambda q, db: in_asyncio(
        lambda: fa.Queue(q.subspace, shards=q.shards).dequeue(db)
    ),
}
PRIORITY_CALLS: dict[str, Callable[[Any, Any], Any]] = {
    "pop_min": lambda q, db: q.pop_min(db),
    "pop_max": lambda q, db: q.pop_max(db),
    "pop blocking": lambda q, db: q.pop(db, block=True, timeout=0.3),
    "peek_min": lambda q, db: q.peek_min(db),
    "peek_max": lambda q, db: q.peek_max(db),
    "peek_many": lambda q, db: q.peek_many(db, 20),
    "claim": lambda q, db: q.claim(db, 30),
    "claim max": lambda q, db: q.claim(db, 30, max=True),
    "claim_many": lambda q, db: q.claim_many(db, 20, 30),
    "size": lambda q, db: q.size(db),
    "empty": lambda q, db: q.empty(db),
    "info": lambda q, db: q.info(db),
    "leases": lambda q, db: q.leases(db),
    "dead_letters": lambda q, db: q.dead_letters(db),
    "requests_in_line": lambda q, db: q.requests_in_line(db),
    "purge_dead_letters": lambda q, db: q.purge_dead_letters(db),
    "session pop": lambda q, db: in_session(q, db, lambda s: s.pop(), prefetch=1),
    "session claim": lambda q, db: in_session(q, db, lambda s: s.claim(30), max=True),
    "work": lambda q, db: q.work(
        db, lambda value: None, lease=30, until_empty=True, stop=STOP_WORKERS[0]
    ),
    "asyncio pop_min": lambda q, db: in_asyncio(
        lambda: fa.PriorityQueue(q.subspace, shards=q.shards).pop_min(db)
    ),
}

#: (the queue on record, the queue object opened over it): another shard count, or the other
#: type with the same shard count.
MISMATCHES = [
    ((Queue, 4), (Queue, 2)),
    ((Queue, 4), (Queue, 1)),
    ((Queue, 1), (Queue, 4)),
    ((PriorityQueue, 4), (Queue, 4)),
    ((PriorityQueue, 4), (PriorityQueue, 2)),
    ((PriorityQueue, 4), (PriorityQueue, 1)),
    ((PriorityQueue, 1), (PriorityQueue, 4)),
    ((Queue, 4), (PriorityQueue, 4)),
]


def mismatch_cases() -> list[Any]:
    cases = []
    for (right, right_shards), (wrong, wrong_shards) in MISMATCHES:
        calls = QUEUE_CALLS if wrong is Queue else PRIORITY_CALLS
        for name, call in calls.items():
            case_id = f"{right.__name__}/{right_shards} as {wrong.__name__}/{wrong_shards}: {name}"
            cases.append(pytest.param(right, right_shards, wrong, wrong_shards, call, id=case_id))
    return cases


@pytest.fixture(autouse=True)
def fresh_stop() -> None:
    STOP_WORKERS[0] = threading.Event()


def without_receipts(db: Any, subspace: Subspace) -> list[tuple[bytes, bytes]]:
    """Every key of the queue but its receipts (a call refused after it registered in line
    and withdrew leaves receipts only, which change nothing)."""
    return [(key, value) for key, value in all_keys(db, subspace) if b"receipts" not in key]


@pytest.mark.parametrize(
    ("right", "right_shards", "wrong", "wrong_shards", "call"), mismatch_cases()
)
def test_another_shard_count_or_type_is_refused_by_every_operation(
    right, right_shards, wrong, wrong_shards, call
):
    # The queue on record: 10 values, one claimed and dead-lettered, one leased (30 s), so
    # every listing has something to list; 8 items wait in its shards.
    db = memory.open()
    subspace = Subspace(("shard-promises", "mismatch"))
    queue = right(subspace, shards=right_shards)
    for value in range(10):
        queue.enqueue(db, value) if right is Queue else queue.push(db, value, value % 3)
    queue.dead_letter(db, queue.claim(db, 30), "test")
    held = queue.claim(db, 30)
    waiting = sorted(queue.peek_many(db, None))
    assert len(waiting) == 8
    before = without_receipts(db, subspace)

    opened = wrong(subspace, shards=wrong_shards)
    outcome, result = in_thread(lambda: call(opened, db), timeout=1.5)
    if outcome == "hung":
        STOP_WORKERS[0].set()  # a worker loop retrying the error: let its thread end
    refused = outcome == "raised" and isinstance(result, QueueTypeError)
    changed = without_receipts(db, subspace) != before
    assert refused and not changed, (
        f"{outcome} {result!r}; the stored queue {'changed' if changed else 'did not change'}"
    )
    # The queue's own object still sees every item, lease and dead letter.
    assert sorted(queue.peek_many(db, None)) == waiting
    assert queue.size(db) == 8
    assert [lease.value for lease in queue.leases(db)] == [held.value]
    assert len(queue.dead_letters(db)) == 1


# -- 3. blocking takes wake for delayed items in any shard ------------------------------------


def wait_for_delayed(db: Any, subspace: Subspace, how: str) -> Any:
    """Add one delayed item (0.3 s) with a producer object, then take it with a blocking take
    of another object (a consumer process would have one of its own) with a 2 s timeout."""
    if how in ("pop_min", "pop_max"):
        PriorityQueue(subspace, shards=16).push(db, "due", 1, delay=0.3)
        consumer: Any = PriorityQueue(subspace, shards=16)
        return consumer.pop(db, max=how == "pop_max", block=True, timeout=2)
    Queue(subspace, shards=16).enqueue(db, "due", delay=0.3)
    if how == "dequeue":
        return Queue(subspace, shards=16).dequeue(db, block=True, timeout=2)
    if how == "session take":
        return in_session(Queue(subspace, shards=16), db, lambda s: s.take(block=True, timeout=2))
    return in_asyncio(lambda: fa.Queue(subspace, shards=16).dequeue(db, block=True, timeout=2))


@pytest.mark.slow("waits in real time", backend="fdb")
@pytest.mark.parametrize(
    "how", ["dequeue", "session take", "asyncio dequeue", "pop_min", "pop_max"]
)
def test_blocking_takes_wake_for_delayed_items_in_any_shard(db, subspace, how):
    # A delayed item waits in its shard's metadata; a blocked consumer must wake when it falls
    # due (docs/delayed-delivery.rst), whichever of the 16 shards the producer's enqueue went
    # to. Three trials, each with fresh queue objects: an item due after 0.3 s comes back well
    # before the 2 s timeout. (Blocking claims already wake: they read every shard's hint.)
    for trial in range(3):
        started = time.monotonic()
        value = wait_for_delayed(db, subspace[trial], how)
        waited = time.monotonic() - started
        assert value == "due" and waited < 1.5, f"trial {trial}: {value!r} after {waited:.2f} s"


# -- 4. a sharded priority queue takes delayed pushes -------------------------------------------


def comes_out_after_the_delay(db: Any, queue: PriorityQueue[Any], pushed_at: float) -> None:
    """``queue``'s item delayed by 0.3 s from ``pushed_at`` (or later: its commit) is never
    popped before that, and a pop (polled every 50 ms, no blocking take, whose waking is test
    3's business) takes it after the delay: within 3 s. Whether the first pop comes before the
    delay depends on how long the push took (a loaded machine may take longer): every pop
    that returns the item must return it after the delay, which holds either way."""
    value = queue.pop_min(db)
    while value is None and time.monotonic() - pushed_at < 3:
        time.sleep(0.05)
        value = queue.pop_min(db)
    waited = time.monotonic() - pushed_at
    assert value == "later", f"no item after {waited:.2f} s (delayed: {queue.info(db).delayed})"
    assert waited >= 0.2  # never before the delay (a margin for the clocks)


def test_a_sharded_priority_queue_pushes_with_a_delay(db, subspace):
    queue: PriorityQueue[str] = PriorityQueue(subspace, shards=4)
    pushed_at = time.monotonic()
    queue.push(db, "later", 1, delay=0.3)
    comes_out_after_the_delay(db, queue, pushed_at)


def test_a_sharded_asyncio_priority_queue_pushes_with_a_delay(db, subspace):
    pushed_at = time.monotonic()
    in_asyncio(lambda: fa.PriorityQueue(subspace, shards=4).push(db, "later", 1, delay=0.3))
    comes_out_after_the_delay(db, PriorityQueue(subspace, shards=4), pushed_at)


def test_the_command_line_pushes_into_a_sharded_priority_queue_with_a_delay(db, subspace):
    # docs/cli.rst: push --priority P --delay S, and --shards N to create a sharded queue;
    # errors are one line on stderr, never a traceback.
    path = ",".join([*fdb.tuple.unpack(subspace.key()), "tasks"])
    pushed_at = time.monotonic()
    result = CliRunner().invoke(
        cli,
        [
            *("--priority-queue", "--queue", path, "push", "later"),
            *("--priority", "1", "--delay", "0.3", "--shards", "4"),
        ],
        obj={"database": db},
    )
    assert result.exit_code == 0 and result.exception is None, (result.output, result.exception)
    assert "Traceback" not in result.output
    comes_out_after_the_delay(db, PriorityQueue(subspace["tasks"], shards=4), pushed_at)


# -- 5. a sharded enqueue_many spreads its batch ------------------------------------------------


def test_a_sharded_enqueue_many_spreads_its_batch_over_the_shards(db, subspace, backend):
    # A batch's values go to the shards in turn, as single enqueues would: 1,000 values
    # over 4 shards are 250 in each.
    queue: Queue[int] = Queue(subspace, shards=4)
    if backend == "memory":
        db.reset_stats()
    queue.enqueue_many(db, list(range(1000)))
    if backend == "memory":
        assert db.stats()["commits"] == 1  # one transaction

    # Every shard holds a quarter of the batch.
    sizes = [shard.size for shard in queue.info(db).shards]
    assert sizes == [250] * 4, f"items per shard: {sizes}"

    # Within each shard the batch keeps its order (FIFO within a shard).
    by_shard: dict[int, list[int]] = {}
    for shard, value in item_keys(db, subspace):
        by_shard.setdefault(shard, []).append(value)
    assert sorted(by_shard) == [0, 1, 2, 3]
    for shard, values in by_shard.items():
        assert values == sorted(values), f"shard {shard} holds the batch out of order"

    # Every item comes out exactly once, and each shard's items in the batch's order.
    taken: list[int] = []
    while batch := queue.dequeue_many(db, 250):
        taken.extend(batch)
    assert sorted(taken) == list(range(1000))
    for values in by_shard.values():
        held = set(values)
        assert [value for value in taken if value in held] == values
    assert queue.dequeue(db) is None


# -- 6. expired leases in any shard come back soon ---------------------------------------------


def test_an_expired_lease_in_another_shard_is_claimed_again_within_a_few_claims(db, subspace):
    # A consumer that dies holding a lease loses it when the lease expires: "the next claims
    # take it first" (QueueInfo.expired_leases, docs/concepts.rst). On 16 shards a consumer
    # claims at its home shard; a holder that died (another queue object: another process)
    # held an item of any shard. 0.35 s after its 0.1 s lease was taken (two lease periods
    # past expiry) the item must be among the consumer's next 16 claims. The bound: 16 is one
    # claim per shard, so a design that looks at one more shard's expired leases per claim
    # meets it too; the consumer's home holds 24 items, so a consumer that only looks at its
    # home shard (a stay is up to 128 items) misses it whenever the holder's shard is not its
    # home (15 times in 16). Three trials.
    for trial in range(3):
        space = subspace[trial]
        fill_in_turn(db, Queue(space, shards=16), 16 * 24)  # 24 items in each shard
        consumer: Queue[int] = Queue(space, shards=16)
        first = consumer.claim(db, 30)  # the consumer settles at its home
        assert first is not None
        consumer.ack(db, first)
        dead = Queue(space, shards=16).claim(db, 0.1)
        assert dead is not None
        time.sleep(0.35)
        claimed = []
        for _ in range(16):
            lease = consumer.claim(db, 30)
            assert lease is not None
            claimed.append(lease)
            if lease.value == dead.value:
                break
        assert claimed[-1].value == dead.value, (
            f"trial {trial}: item {dead.value} not among the next 16 claims "
            f"{[lease.value for lease in claimed]}"
        )
        assert claimed[-1].deliveries == 2


# -- 7. peeks and info show what the next take returns ------------------------------------------


def test_a_sharded_priority_queue_peeks_what_its_pops_take(db, subspace):
    # A priority queue's peek returns "the value pop would take" and peek_many "the next n
    # of pop_min" (the API docs); QueueInfo.oldest is "the value at the front (what the next
    # take returns)". Distinct priorities 0-19, pushed 19 first, land in the 4 shards in turn,
    # so the best item moves from shard to shard as items are popped.
    queue: PriorityQueue[int] = PriorityQueue(subspace, shards=4)
    for priority in reversed(range(20)):
        queue.push(db, priority, priority)
    wrong = []
    if queue.peek_many(db, 6) != [0, 1, 2, 3, 4, 5]:
        wrong.append(f"peek_many(6) = {queue.peek_many(db, 6)}")
    for expected in range(10):
        shown = (queue.peek(db), queue.peek_min(db), queue.info(db).oldest)
        popped = queue.pop_min(db)
        assert popped == expected
        if shown != (expected,) * 3:
            wrong.append(f"(peek, peek_min, info.oldest) = {shown}, pop_min took {popped}")
    for expected in reversed(range(10, 20)):
        shown_max = queue.peek_max(db)
        popped = queue.pop_max(db)
        assert popped == expected
        if shown_max != expected:
            wrong.append(f"peek_max = {shown_max}, pop_max took {popped}")
    assert not wrong, "\n".join(wrong)


def consumers_until_one_away_from_shard_0(
    db: Any, subspace: Subspace, check: Callable[[Queue[int], list[str]], int | None]
) -> list[str]:
    """Fresh consumer objects (each settles at a home shard of its own choosing, as a
    consumer process does) run ``check`` until one took its first item from a shard other
    than shard 0 (the case a view of "the first shard's front" gets wrong); ``check`` returns
    the shard of that first item and appends what it found wrong. Returns the findings."""
    fill_in_turn(db, Queue(subspace, shards=4), 4 * 30)  # 30 items in each shard
    wrong: list[str] = []
    for _attempt in range(20):
        if check(Queue(subspace, shards=4), wrong) != 0:
            return wrong
    pytest.fail("20 consumers in a row settled at shard 0")


def test_a_sharded_queue_peeks_what_the_same_threads_next_dequeue_takes(db, subspace):
    # No other consumer runs: what peek(db) shows is what this thread's next dequeue(db)
    # takes, four items in a row, whichever shard the consumer settles at.
    def check(consumer: Queue[int], wrong: list[str]) -> int | None:
        fronts = [shard.oldest for shard in consumer.info(db).shards]
        first_shard = None
        for step in range(4):
            shown = consumer.peek(db)
            taken = consumer.dequeue(db)
            if step == 0:
                first_shard = fronts.index(taken) if taken in fronts else None
            if shown != taken:
                wrong.append(f"peek {shown!r}, then dequeue took {taken!r}")
        return first_shard

    wrong = consumers_until_one_away_from_shard_0(db, subspace, check)
    assert not wrong, "\n".join(wrong)


def test_a_sharded_queues_info_oldest_is_the_front_the_next_dequeue_takes(db, subspace):
    # What is asserted: QueueInfo.oldest is documented as "the value at the front (what the
    # next take returns)". On a sharded queue every shard has a front, and which one the next
    # take returns depends on the consumer's home; so info(db).oldest must be one of the
    # shards' fronts (QueueInfo.shards[k].oldest), and, called by a consumer with no other
    # consumer running, the one its own next dequeue(db) takes, four items in a row.
    def check(consumer: Queue[int], wrong: list[str]) -> int | None:
        first_shard = None
        for step in range(4):
            info = consumer.info(db)
            fronts = [shard.oldest for shard in info.shards]
            taken = consumer.dequeue(db)
            if step == 0:
                first_shard = fronts.index(taken) if taken in fronts else None
            if info.oldest not in fronts:
                wrong.append(f"info.oldest {info.oldest!r} is no shard's front: {fronts}")
            if info.oldest != taken:
                wrong.append(f"info.oldest {info.oldest!r}, then dequeue took {taken!r}")
        return first_shard

    wrong = consumers_until_one_away_from_shard_0(db, subspace, check)
    assert not wrong, "\n".join(wrong)


# -- 8. a plain take reads no group or delay records --------------------------------------------

#: Metadata names of the features a plain queue never used (docs/concepts.rst, docs/groups.rst,
#: docs/idempotency.rst): message groups ("groups" counter, "group" records, "turns",
#: "grouped" items, "weight", "resume"), delayed delivery ("next_due" hint, "delayed" items)
#: and idempotent enqueues ("deduplication").
FEATURE_NAMES = (
    "groups",
    "group",
    "turns",
    "grouped",
    "weight",
    "resume",
    "next_due",
    "delayed",
    "deduplication",
)


def feature_ranges(queue: Any) -> list[tuple[str, bytes, bytes]]:
    """``(name, begin, end)``: the key range of each feature's records, in the queue's
    metadata and, when sharded, in each shard's (docs/concepts.rst's layout)."""
    prefix = queue.subspace.key()
    bases = (
        [prefix]
        if queue.shards == 1
        else [prefix + fdb.tuple.pack((k,)) for k in range(queue.shards)]
    )
    ranges = []
    for base in bases:
        for name in FEATURE_NAMES:
            begin = base + b"\xff" + fdb.tuple.pack((name,))
            ranges.append((name, begin, begin + b"\xff"))
    return ranges


class RecordingReads:
    """A transaction (or its snapshot view) that records the keys its reads ask for:
    ``("get", key)`` and ``("range", begin, end)``; everything else goes to ``inner``."""

    def __init__(self, inner: Any, log: list[tuple[Any, ...]]) -> None:
        self._inner = inner
        self._log = log

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def get(self, key: Any, *args: Any, **kwargs: Any) -> Any:
        self._log.append(("get", bytes(key)))
        return self._inner.get(key, *args, **kwargs)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            self._log.append(("range", key.start, key.stop))
        else:
            self._log.append(("get", bytes(key)))
        return self._inner[key]

    def get_range(self, begin: Any, end: Any, *args: Any, **kwargs: Any) -> Any:
        self._log.append(("range", begin, end))
        return self._inner.get_range(begin, end, *args, **kwargs)

    def get_range_startswith(self, prefix: Any, *args: Any, **kwargs: Any) -> Any:
        self._log.append(("range", bytes(prefix), bytes(prefix) + b"\xff"))
        return self._inner.get_range_startswith(prefix, *args, **kwargs)

    def get_key(self, selector: Any) -> Any:
        self._log.append(("get", bytes(getattr(selector, "key", selector))))
        return self._inner.get_key(selector)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._inner[key] = value

    def __delitem__(self, key: Any) -> None:
        del self._inner[key]

    @property
    def snapshot(self) -> RecordingReads:
        return RecordingReads(self._inner.snapshot, self._log)


class RecordingDatabase:
    """``fdbqueue.memory``'s Database whose transactions record their reads."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.reads: list[tuple[Any, ...]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def create_transaction(self) -> RecordingReads:
        return RecordingReads(self._inner.create_transaction(), self.reads)


def as_key(end: Any) -> bytes:
    """A range end as bytes (a KeySelector's reference key)."""
    return bytes(getattr(end, "key", end))


def feature_reads(reads: list[tuple[Any, ...]], queue: Any) -> list[str]:
    """The reads among ``reads`` that touch a feature's records (:func:`feature_ranges`)."""
    prefix = queue.subspace.key()
    found = []
    for read in reads:
        begin = read[1] if read[0] == "get" else as_key(read[1])
        end = read[1] + b"\x00" if read[0] == "get" else as_key(read[2])
        for name, low, high in feature_ranges(queue):
            if begin < high and low < end:
                found.append(f"{read[0]} of {name!r}: {begin[len(prefix) :]!r} after the prefix")
    return found


@pytest.mark.parametrize(
    ("kind", "shards", "take"),
    [
        (Queue, 1, lambda q, db: q.dequeue(db)),
        (PriorityQueue, 1, lambda q, db: q.pop_min(db)),
        (PriorityQueue, 1, lambda q, db: q.pop_max(db)),
        (Queue, 4, lambda q, db: q.dequeue(db)),
        (PriorityQueue, 4, lambda q, db: q.pop_min(db)),
    ],
    ids=["dequeue", "pop_min", "pop_max", "dequeue, 4 shards", "pop_min, 4 shards"],
)
def test_a_plain_take_reads_no_feature_a_queue_never_used(kind, shards, take):
    # A queue that never had a group, a delayed item or an idempotent enqueue: its feature
    # record (fdbqueue._storage.features) says so, and every plain take of one shard reads
    # neither hint that says whether those features hold anything (the groups' counter
    # "groups" and the delayed items' hint "next_due"), nor any other record of
    # FEATURE_NAMES (no turn, no delayed record, no group's item). A take choosing among
    # several shards may still read the two hints (snapshot point reads, issued with its
    # other reads), and nothing else of them, in any shard. What such a take reads besides:
    # its front (a range read of the items), the feature record, for a sharded queue the
    # lease records expired by its read version and a sharded priority queue each shard's
    # first item. The reads are recorded by wrapping the in-memory database's transactions.
    db = memory.open()
    subspace = Subspace(("shard-promises", "plain"))
    queue = kind(subspace, shards=shards)
    for value in range(40):
        queue.enqueue(db, value) if kind is Queue else queue.push(db, value, value % 7)
    take(queue, db)  # the first take checks the type record and settles a home shard
    take(queue, db)
    recording = RecordingDatabase(db)
    for _ in range(3):
        assert take(queue, recording) is not None
    assert recording.reads, "the wrapper saw no read"
    found = feature_reads(recording.reads, queue)
    hints = [f for f in found if f.startswith(("get of 'groups'", "get of 'next_due'"))]
    if shards == 1:
        assert not hints, "\n".join(hints)
    others = [f for f in found if f not in hints]
    assert not others, "\n".join(others)
