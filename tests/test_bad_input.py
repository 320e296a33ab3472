"""Every public method rejects bad input before it writes: the queue's keys stay unchanged."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from helpers import all_keys, pass_time

import fdbqueue.asyncio as fa
from fdbqueue import PriorityQueue, Queue, Subspace, memory

TOO_BIG = "x" * 100_001

#: Groups as documented: str, bytes, int, and tuples of those (nested too).
GOOD_GROUPS = ["a", b"b", 7, -(2**64), ("tenant", 3, b"x"), ("a", ("b", 2)), ()]

#: What the docs do not allow as a group (str, bytes, int, or tuples of those).
BAD_GROUPS = {
    "float": 1.5,
    "nan": float("nan"),
    "bool": True,
    "uuid": uuid.UUID(int=7),
    "list": ["a"],
    "tuple of a float": ("a", 1.5),
    "tuple of None": (None,),
    "tuple of a bool": ("a", False),
    "tuple of a uuid": (uuid.UUID(int=7),),
    "tuple of a list": (["a"],),
    "tuple of nan": (float("nan"),),
    "nested tuple of a float": ("a", ("b", 2.5)),
    "int beyond the tuple layer": 2**3000,
    "tuple of an int beyond the tuple layer": ("a", 10**700),
}

QUEUE_CALLS = {
    "enqueue None": (lambda q, db: q.enqueue(db, None), ValueError),
    "enqueue too big": (lambda q, db: q.enqueue(db, TOO_BIG), ValueError),
    "enqueue unencodable": (lambda q, db: q.enqueue(db, object()), TypeError),
    "enqueue_many str": (lambda q, db: q.enqueue_many(db, "abc"), TypeError),
    "enqueue_many one bad": (lambda q, db: q.enqueue_many(db, ["ok", None]), ValueError),
    "dequeue_many negative": (lambda q, db: q.dequeue_many(db, -1), ValueError),
    "dequeue_many str": (lambda q, db: q.dequeue_many(db, "2"), TypeError),
    "dequeue negative timeout": (
        lambda q, db: q.dequeue(db, block=True, timeout=-1),
        ValueError,
    ),
    "dequeue block in a transaction": (
        lambda q, db: q.dequeue(db.create_transaction(), block=True),
        TypeError,
    ),
    "dequeue not a database": (lambda q, db: q.dequeue("db"), TypeError),
    "peek_many negative": (lambda q, db: q.peek_many(db, -3), ValueError),
    "claim no lease": (lambda q, db: q.claim(db, lease=None), TypeError),
    "claim zero lease": (lambda q, db: q.claim(db, lease=0), ValueError),
    "ack not a lease": (lambda q, db: q.ack(db, {"id": "x"}), TypeError),
    "requeue negative": (lambda q, db: q.requeue_dead_letters(db, limit=-1), ValueError),
    "enqueue int beyond the tuple layer": (lambda q, db: q.enqueue(db, 10**1000), TypeError),
    "dequeue nan timeout": (
        lambda q, db: q.dequeue(db, block=True, timeout=float("nan")),
        ValueError,
    ),
    "dequeue block not a bool": (lambda q, db: q.dequeue(db, block="yes"), TypeError),
    "claim nan lease": (lambda q, db: q.claim(db, lease=float("nan")), ValueError),
    "claim infinite lease": (lambda q, db: q.claim(db, lease=float("inf")), ValueError),
    "enqueue_many too large for one transaction": (
        lambda q, db: q.enqueue_many(db, range(100_000)),
        ValueError,
    ),
    "enqueue_many dedup_ids a str": (
        lambda q, db: q.enqueue_many(db, ["x", "y", "z"], dedup_ids="abc"),
        TypeError,
    ),
    "enqueue_many dedup_ids bytes": (
        lambda q, db: q.enqueue_many(db, ["x", "y"], dedup_ids=b"ab"),
        TypeError,
    ),
    "enqueue dedup_id beyond the tuple layer": (
        lambda q, db: q.enqueue(db, "x", dedup_id=2**3000),
        ValueError,
    ),
    "enqueue_many dedup_id beyond the tuple layer": (
        lambda q, db: q.enqueue_many(db, ["x"], dedup_ids=[-(2**3000)]),
        ValueError,
    ),
    **{
        f"enqueue group {label}": (
            lambda q, db, group=group: q.enqueue(db, "x", group=group),
            (TypeError, ValueError),
        )
        for label, group in BAD_GROUPS.items()
    },
    **{
        f"enqueue_many group {label}": (
            lambda q, db, group=group: q.enqueue_many(db, ["x"], group=group),
            (TypeError, ValueError),
        )
        for label, group in BAD_GROUPS.items()
    },
}

PRIORITY_CALLS = {
    "push None": (lambda q, db: q.push(db, None, priority=1), ValueError),
    "push str priority": (lambda q, db: q.push(db, "v", priority="high"), TypeError),
    "push bool priority": (lambda q, db: q.push(db, "v", priority=True), TypeError),
    "push too big": (lambda q, db: q.push(db, TOO_BIG, priority=1), ValueError),
    "pop negative timeout": (lambda q, db: q.pop(db, block=True, timeout=-1), ValueError),
    "pop_max block in a transaction": (
        lambda q, db: q.pop_max(db.create_transaction(), block=True),
        TypeError,
    ),
    "claim bad lease": (lambda q, db: q.claim(db, lease="1s", max=True), TypeError),
    "release not a lease": (lambda q, db: q.release(db, 42), TypeError),
    "peek_many str": (lambda q, db: q.peek_many(db, "all"), TypeError),
    "pop max not a bool": (lambda q, db: q.pop(db, max="yes"), TypeError),
    "pop max None": (lambda q, db: q.pop(db, max=None), TypeError),
    "claim max not a bool": (lambda q, db: q.claim(db, 5, max=None), TypeError),
    "peek max not a bool": (lambda q, db: q.peek(db, max=1), TypeError),
    "pop block not a bool": (lambda q, db: q.pop_min(db, block=1), TypeError),
    "push priority beyond the tuple layer": (
        lambda q, db: q.push(db, "v", priority=10**700),
        ValueError,
    ),
    "push negative priority beyond the tuple layer": (
        lambda q, db: q.push(db, "v", priority=-(2**3000)),
        ValueError,
    ),
    "push delayed priority beyond the tuple layer": (
        lambda q, db: q.push(db, "v", priority=10**700, delay=5),
        ValueError,
    ),
    **{
        f"push group {label}": (
            lambda q, db, group=group: q.push(db, "x", 1, group=group),
            (TypeError, ValueError),
        )
        for label, group in BAD_GROUPS.items()
    },
    **{
        f"set_group_weight group {label}": (
            lambda q, db, group=group: q.set_group_weight(db, group, 2),
            (TypeError, ValueError),
        )
        for label, group in BAD_GROUPS.items()
    },
}


def loaded(db, subspace, kind, high_contention):
    if kind == "queue":
        queue = Queue(subspace, high_contention=high_contention)
        queue.enqueue_many(db, ["a", "b"])
    else:
        queue = PriorityQueue(subspace, high_contention=high_contention)
        queue.push(db, "a", priority=1)
        queue.push(db, "b", priority=2)
    queue.claim(db, lease=30)  # a lease in flight too
    return queue


@pytest.mark.parametrize("high_contention", [False, True])
@pytest.mark.parametrize(
    ("kind", "name"),
    [("queue", name) for name in QUEUE_CALLS] + [("priority", name) for name in PRIORITY_CALLS],
)
def test_a_rejected_call_changes_nothing(db, subspace, kind, name, high_contention):
    call, error = (QUEUE_CALLS if kind == "queue" else PRIORITY_CALLS)[name]
    queue = loaded(db, subspace, kind, high_contention)
    before = all_keys(db, queue.subspace)
    with pytest.raises(error) as raised:
        call(queue, db)
    assert all_keys(db, queue.subspace) == before
    assert len(str(raised.value)) <= 300, "a short message, not the argument's digits"


@pytest.mark.parametrize("group", [*GOOD_GROUPS], ids=repr)
def test_every_documented_group_round_trips(db, subspace, group):
    queue = Queue(subspace, shards=2)
    queue.enqueue(db, "x", group=group)
    lease = queue.claim(db, lease=30)
    assert lease.group == group and type(lease.group) is type(group)


def _public_methods(queue):
    return [
        name for name in dir(queue) if not name.startswith("_") and callable(getattr(queue, name))
    ]


def test_the_asyncio_worker_loop_names_the_public_class():
    for kind in (fa.Queue, fa.PriorityQueue):
        with pytest.raises(TypeError) as raised:
            kind(("named",)).work()
        assert str(raised.value).startswith((f"{kind.__name__}.work()", "work()"))


@pytest.mark.parametrize("kind", [Queue, PriorityQueue])
def test_type_errors_name_the_public_class(kind):
    """A call with missing or extra arguments names ``Queue.ack``, never an internal class."""
    queue = kind(("named",))
    named = 0
    for name in _public_methods(queue):
        for args in [(), tuple(range(12))]:
            try:
                getattr(queue, name)(*args)
            except TypeError as error:
                message = str(error)
                if "argument" in message and "()" in message:
                    # Python 3.10 names the bare function: ``ack()``
                    assert message.startswith((f"{kind.__name__}.{name}()", f"{name}()")), message
                    named += 1
            except Exception:
                pass
    assert named > 20


CONSTRUCTIONS = {
    "high_contention not a bool": (lambda: Queue(("q",), high_contention="no"), TypeError),
    "exactly_once not a bool": (lambda: PriorityQueue(("q",), exactly_once=1), TypeError),
    "abandon_after nan": (lambda: Queue(("q",), abandon_after=float("nan")), ValueError),
    "abandon_after inf": (lambda: Queue(("q",), abandon_after=float("inf")), ValueError),
    "abandon_after over a day": (lambda: Queue(("q",), abandon_after=86_401), ValueError),
    "abandon_after a string": (lambda: PriorityQueue(("q",), abandon_after="5"), TypeError),
    "prefix too long": (lambda: Queue(Subspace(rawPrefix=b"p" * 9_900)), ValueError),
    "prefix in the system keys": (lambda: Queue(Subspace(rawPrefix=b"\xffq")), ValueError),
}


@pytest.mark.parametrize("name", list(CONSTRUCTIONS))
def test_a_queue_with_bad_arguments_is_refused(name):
    make, error = CONSTRUCTIONS[name]
    with pytest.raises(error):
        make()


def test_the_longest_accepted_prefix_works_on_every_path():
    """Dead letters, leases and requests in line derived from the longest prefix still fit."""
    db = memory.open()
    queue = Queue(Subspace(rawPrefix=b"p" * 9_872), high_contention=True, max_deliveries=1)
    queue.enqueue_many(db, ["a", "b", "c"])
    with queue.consumer(db, prefetch=2) as session:
        assert session.take() == "a"  # registered, took, and registered two more requests
        assert queue.requests_in_line(db) == 2
    assert queue.claim(db, lease=1) is not None
    pass_time(db, 2)
    assert queue.claim(db, lease=1).value == "c"  # "b" ran out of deliveries: a dead letter
    assert [letter.value for letter in queue.dead_letters(db)] == ["b"]
    assert queue.requeue_dead_letters(db) == 1
    assert queue.dequeue(db) == "b"


def test_an_infinite_timeout_waits_without_limit_and_a_huge_one_does_not_overflow(db, subspace):
    queue = Queue(subspace)
    queue.enqueue(db, "ready")
    assert queue.dequeue(db, block=True, timeout=float("inf")) == "ready"
    queue.enqueue(db, "again")
    assert queue.dequeue(db, block=True, timeout=1e10) == "again"
    results = []
    waiter = threading.Thread(
        target=lambda: results.append(queue.dequeue(db, block=True, timeout=1e10)), daemon=True
    )
    waiter.start()
    time.sleep(0.1)
    queue.enqueue(db, "later")
    waiter.join(10)
    assert results == ["later"]


def test_a_tiny_lease_is_not_born_expired(db, subspace):
    queue = Queue(subspace)
    queue.enqueue(db, "x")
    tr = db.create_transaction()
    lease = queue.claim(tr, lease=1e-9)
    tr.commit().wait()
    assert lease.expiry_version > tr.get_read_version().wait()


#: Every seconds argument of the public API, with the values each must refuse.
SECONDS_ARGUMENTS = {
    "enqueue delay": lambda q, db, lease, s: q.enqueue(db, "x", delay=s),
    "enqueue_many delay": lambda q, db, lease, s: q.enqueue_many(db, ["x"], delay=s),
    "dequeue timeout": lambda q, db, lease, s: q.dequeue(db, block=True, timeout=s),
    "claim lease": lambda q, db, lease, s: q.claim(db, s),
    "claim timeout": lambda q, db, lease, s: q.claim(db, 30, block=True, timeout=s),
    "claim_many lease": lambda q, db, lease, s: q.claim_many(db, 2, s),
    "extend seconds": lambda q, db, lease, s: q.extend(db, lease, s),
    "release delay": lambda q, db, lease, s: q.release(db, lease, delay=s),
    "consumer abandon_after": lambda q, db, lease, s: q.consumer(db, abandon_after=s),
    "queue abandon_after": lambda q, db, lease, s: Queue(q.subspace, abandon_after=s),
    "work lease": lambda q, db, lease, s: q.work(db, print, lease=s, until_empty=True),
    "work backoff": lambda q, db, lease, s: q.work(
        db, print, lease=30, backoff=s, max_backoff=s, until_empty=True
    ),
    "work max_backoff": lambda q, db, lease, s: q.work(
        db, print, lease=30, max_backoff=s, until_empty=True
    ),
}


@pytest.mark.parametrize("name", list(SECONDS_ARGUMENTS))
@pytest.mark.parametrize(
    "seconds", [float("nan"), float("inf"), -float("inf"), 10**400, -(10**400), -1]
)
def test_every_seconds_argument_refuses_nan_infinity_and_huge_ints_with_value_error(
    db, subspace, name, seconds
):
    """Finding 11: ``10**400`` raised OverflowError; infinity is refused where a time must
    end (a blocking take's timeout takes it as "no limit", so it is skipped there)."""
    if name.endswith("timeout") and seconds == float("inf"):
        return
    queue = Queue(subspace)
    queue.enqueue(db, "held")
    lease = queue.claim(db, 30)
    before = all_keys(db, subspace)
    with pytest.raises(ValueError):
        SECONDS_ARGUMENTS[name](queue, db, lease, seconds)
    assert all_keys(db, subspace) == before


@pytest.mark.parametrize("prefetch", [256, 257, 10_000])
def test_a_prefetch_the_line_cannot_number_is_refused_when_the_session_opens(
    db, subspace, prefetch
):
    """Finding 10: 257 was accepted, and the first take raised 'bytes must be in
    range(0, 256)'."""
    queue = Queue(subspace)
    with pytest.raises(ValueError, match="prefetch must be <= 255"):
        queue.consumer(db, prefetch=prefetch)
    with pytest.raises(ValueError, match="prefetch must be <= 255"):
        PriorityQueue(subspace).consumer(db, prefetch=prefetch)


def test_the_largest_prefetch_works(db, subspace):
    queue = Queue(subspace)
    queue.enqueue_many(db, ["a", "b"])
    with queue.consumer(db, prefetch=255) as consumer:
        assert [consumer.take(), consumer.take(), consumer.take()] == ["a", "b", None]
    assert queue.requests_in_line(db) == 0
