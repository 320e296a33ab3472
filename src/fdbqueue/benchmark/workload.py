"""What the benchmark runs: its settings, and the consumption modes (:class:`Mode`,
:data:`MODES`): how each mode enqueues and takes."""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from fdbqueue import PriorityQueue, Queue, Subspace

CONFLICT = 1020
PHASES = ("drain", "steady")
DEFAULT_CONSUMERS = "1,2,4,8,16,32"
MAX_CONSUMERS = 1024
LEASE_SECONDS = 60.0  # claims are acknowledged at once; the lease never runs out
WAIT_SECONDS = 0.05  # how long a consumer that found the queue empty waits before looking again
POLL_SECONDS = 0.005  # a claim that cannot block sleeps this long when the queue is empty
STALL_SECONDS = 15.0  # no item taken for this long: the run gives up (reported as not once)
BATCH = 10  # items per producer or loader transaction (PriorityQueue: pushes in a row)

Take = Callable[[float | None], Any]
"""Take one item: ``take(None)`` without waiting, ``take(seconds)`` waiting up to ``seconds``
for one; the item's value, or None when there was none."""


# -- modes ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mode:
    """One way of consuming, as a row of :data:`MODES`.

    Attributes:
        name: the ``--modes`` name.
        make: the queue for a subspace.
        put: enqueue a batch of values (producers and loaders).
        consumer: for one consumer thread, ``consumer(queue, db)`` is a context manager giving
            its :data:`Take` function; it is entered once per thread, so a consumer session
            (``queue.consumer(db, prefetch=1)``) fits as well as a stateless call.
        baseline: the mode whose items/s the ``ratio`` column divides by (None: none).
        groups: ``--modes`` group names that include it besides ``all``.
    """

    name: str
    make: Callable[[Subspace], Any]
    put: Callable[[Any, Any, list[int]], None]
    consumer: Callable[[Any, Any], AbstractContextManager[Take]]
    baseline: str | None
    groups: tuple[str, ...] = ()


def calls(
    take: Callable[[Any, Any, float | None], Any],
) -> Callable[[Any, Any], AbstractContextManager[Take]]:
    """A :attr:`Mode.consumer` for a stateless take: ``take(queue, db, wait)``."""

    def consumer(queue: Any, db: Any) -> AbstractContextManager[Take]:
        return contextlib.nullcontext(lambda wait: take(queue, db, wait))

    return consumer


def session(
    open_session: Callable[[Any, Any], AbstractContextManager[Any]],
    take: Callable[[Any, Any, float | None], Any],
) -> Callable[[Any, Any], AbstractContextManager[Take]]:
    """A :attr:`Mode.consumer` for a consumer session: ``open_session(queue, db)`` is entered
    once per consumer thread, and each take is ``take(session, None, wait)``."""

    @contextlib.contextmanager
    def consumer(queue: Any, db: Any) -> Iterator[Take]:
        with open_session(queue, db) as opened:
            yield lambda wait: take(opened, None, wait)

    return consumer


def session_claims(
    open_session: Callable[[Any, Any], AbstractContextManager[Any]],
) -> Callable[[Any, Any], AbstractContextManager[Take]]:
    """A :attr:`Mode.consumer` claiming through a consumer session, then acknowledging."""

    @contextlib.contextmanager
    def consumer(queue: Any, db: Any) -> Iterator[Take]:
        with open_session(queue, db) as opened:

            def take(wait: float | None) -> Any:
                if wait is None:
                    lease = opened.claim(LEASE_SECONDS)
                else:
                    lease = opened.claim(LEASE_SECONDS, block=True, timeout=wait)
                if lease is None:
                    return None
                queue.ack(db, lease)
                return lease.value

            yield take

    return consumer


def enqueue_batch(queue: Any, db: Any, values: list[int]) -> None:
    queue.enqueue_many(db, values)


def push_batch(queue: Any, db: Any, values: list[int]) -> None:
    for value in values:
        queue.push(db, value, priority=value % 4)


def dequeue(queue: Any, db: Any, wait: float | None) -> Any:
    """``queue.dequeue``; a consumer session's ``dequeue`` when ``db`` is None."""
    if db is None:
        return queue.dequeue() if wait is None else queue.dequeue(block=True, timeout=wait)
    if wait is None:
        return queue.dequeue(db)
    return queue.dequeue(db, block=True, timeout=wait)


def pop_min(queue: Any, db: Any, wait: float | None) -> Any:
    if wait is None:
        return queue.pop_min(db)
    return queue.pop_min(db, block=True, timeout=wait)


def claim_and_ack(queue: Any, db: Any, wait: float | None) -> Any:
    """Claim an item and acknowledge it; blocks with ``block=True`` when ``claim`` can, else
    polls every :data:`POLL_SECONDS`."""
    if wait is not None and "block" in inspect.signature(queue.claim).parameters:
        lease = queue.claim(db, lease=LEASE_SECONDS, block=True, timeout=wait)
    else:
        lease = queue.claim(db, lease=LEASE_SECONDS)
        if lease is None and wait is not None:
            time.sleep(min(wait, POLL_SECONDS))
    if lease is None:
        return None
    queue.ack(db, lease)
    return lease.value


#: The shards of the sharded modes' queues (issue 23 measures N = 16).
BENCH_SHARDS = 16

MODES = [
    Mode("plain", lambda s: Queue(s), enqueue_batch, calls(dequeue), "plain", ("queue",)),
    Mode(
        "high-contention",
        lambda s: Queue(s, high_contention=True),
        enqueue_batch,
        calls(dequeue),
        "plain",
        ("queue",),
    ),
    Mode(
        "high-contention-prefetch",
        lambda s: Queue(s),
        enqueue_batch,
        session(lambda q, db: q.consumer(db, prefetch=1), dequeue),
        "plain",
        ("queue",),
    ),
    Mode("claims", lambda s: Queue(s), enqueue_batch, calls(claim_and_ack), "claims", ("queue",)),
    Mode(
        "claims-high-contention",
        lambda s: Queue(s, high_contention=True),
        enqueue_batch,
        calls(claim_and_ack),
        "claims",
        ("queue",),
    ),
    Mode(
        "claims-high-contention-prefetch",
        lambda s: Queue(s),
        enqueue_batch,
        session_claims(lambda q, db: q.consumer(db, prefetch=1)),
        "claims",
        ("queue",),
    ),
    Mode(
        "sharded",
        lambda s: Queue(s, shards=BENCH_SHARDS),
        enqueue_batch,
        calls(dequeue),
        "plain",
        ("sharding",),
    ),
    Mode(
        "sharded-high-contention",
        lambda s: Queue(s, shards=BENCH_SHARDS, high_contention=True),
        enqueue_batch,
        calls(dequeue),
        "plain",
        ("sharding",),
    ),
    Mode(
        "sharded-prefetch",
        lambda s: Queue(s, shards=BENCH_SHARDS),
        enqueue_batch,
        session(lambda q, db: q.consumer(db, prefetch=1), dequeue),
        "plain",
        ("sharding",),
    ),
    Mode(
        "sharded-claims",
        lambda s: Queue(s, shards=BENCH_SHARDS),
        enqueue_batch,
        calls(claim_and_ack),
        "claims",
        ("sharding",),
    ),
    Mode(
        "plain-no-receipts",
        lambda s: Queue(s, exactly_once=False),
        enqueue_batch,
        calls(dequeue),
        "plain",
        ("receipts",),
    ),
    Mode(
        "priority-plain",
        lambda s: PriorityQueue(s),
        push_batch,
        calls(pop_min),
        "priority-plain",
        ("priority",),
    ),
    Mode(
        "priority-high-contention",
        lambda s: PriorityQueue(s, high_contention=True),
        push_batch,
        calls(pop_min),
        "priority-plain",
        ("priority",),
    ),
    Mode(
        "priority-claims",
        lambda s: PriorityQueue(s),
        push_batch,
        calls(claim_and_ack),
        "priority-claims",
        ("priority",),
    ),
    Mode(
        "priority-claims-high-contention",
        lambda s: PriorityQueue(s, high_contention=True),
        push_batch,
        calls(claim_and_ack),
        "priority-claims",
        ("priority",),
    ),
]
GROUPS = {"all": [mode.name for mode in MODES]}
for _mode in MODES:
    for _group in _mode.groups:
        GROUPS.setdefault(_group, []).append(_mode.name)
GROUPS["receipts"].insert(0, "plain")
GROUPS["sharding"][:0] = ["plain", "claims"]
DEFAULT_MODES = "queue"
