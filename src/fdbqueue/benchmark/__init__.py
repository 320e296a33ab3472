"""Consumer-scaling benchmark: how fast C consumer threads take items, per consumption mode.

Two phases, each run per mode and consumer count C (1, 2, 4, 8, 16, 32 by default), modes of
the same C back to back so that ratios compare runs made close in time:

``drain``
    ``--items`` N items are preloaded (not timed, by ``--producers`` threads), then C
    consumers take until all N are taken; no producer runs. This measures the consumers alone.
``steady``
    A backlog is preloaded, then ``--producers`` threads enqueue in batches, faster than the
    consumers take (they pause only while the backlog is above a high-water mark, so the queue
    never runs dry), while C consumers take. After ``--warmup`` items, N items are measured.

Columns, per phase, mode and C (consumer threads only; producers and loaders are counted
apart):

* ``items/s``: items taken / seconds from the first to the N-th measured item.
* ``ratio``: items/s against the mode's baseline (``plain`` for the queue's modes, ``claims``
  for claims, ``priority-plain`` and ``priority-claims`` for priority queues) at the same C in
  the same run.
* ``ideal/s``: the no-conflict ideal, C / (one transaction time), one transaction time being
  ``grv + read + commit`` of the latency model: C consumers each taking an item per
  transaction, without conflicts.
* ``p50 ms`` / ``p99 ms``: latency of one take (a ``dequeue``/``pop_min`` call, or a ``claim``
  and its ``ack``) that returned an item.
* ``confl/item``: consumer commits that failed with 1020 (not committed), per item.
* ``tx/item``: transactions created by consumers, per item (a retry through ``on_error``
  reuses its transaction, so retries show in ``confl/item`` and ``tx-times/item``, not here).
* ``tx-times/item``: the database time the consumers spent per item, in units of one plain
  transaction: (read versions x grv + reads x read + commit attempts x commit) / (grv + read +
  commit), from the in-memory database's counters (``db.stats()``) split by thread role;
  commit attempts are the commits that wrote plus those that conflicted (both pay the commit
  latency). It does not depend on this machine's CPU. ``n/a`` on a real cluster.
* ``cpu ms/item``: this process's CPU time (all threads, the in-memory database's included)
  per item over the measured window. Every thread of the process shares one interpreter lock,
  so when ``items/s`` x ``cpu ms/item`` nears 1,000 the run is bound by this machine's CPU,
  not by the design.
* ``cpu s/s``: that product over 1,000, the CPU seconds this process used per second of the
  measured window (one interpreter lock: about 1.0 at most for Python code; below it, the
  threads spent the rest of the time waiting on latencies or conflicts).
* ``enq confl``: producers' and loaders' conflicts (always 0: enqueues never conflict).
* ``empty`` (steady only): consumer takes that found the queue empty during the measured
  window; 0 shows the producers kept ahead.
* ``once``: every item enqueued was delivered exactly once (taken, or in steady, still queued
  at the end), nothing lost, nothing twice.

A mode is one :class:`Mode` entry in :data:`MODES`; a mode the queue does not support (the
probe take raises AttributeError, NotImplementedError, TypeError or ValueError) is skipped with
a note.

Run: ``fdbqueue bench`` or ``python examples/contention_benchmark.py`` (in-memory database with
``Latency(grv=0.001, read=0.0005, commit=0.003)``), ``--plot throughput.png`` for a chart
(needs matplotlib: ``pip install -e '.[bench]'``), ``--cluster-file PATH`` for a real cluster.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import math
import sys
import textwrap
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from fdbqueue import PriorityQueue, Queue, Subspace, memory
from fdbqueue._transactions.transactional import run_in_retry_loop
from fdbqueue._wording import plural
from fdbqueue.errors import BenchmarkError

__all__ = [
    "MODES",
    "PHASES",
    "BenchmarkError",
    "Mode",
    "Result",
    "add_arguments",
    "check",
    "check_arguments",
    "print_ratios",
    "print_tables",
    "run",
    "run_all",
]

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


# -- counting per role ----------------------------------------------------------------------


class CountingDatabase:
    """Wraps a database to count transactions and conflicts per role (the thread's
    ``local.role``: consumer, producer, loader), and, on the in-memory database, its counters
    (read versions, reads, commits, conflicts) per role as ``<role>_db_<counter>``.

    Counting must cost the measured threads little: each thread counts into a Counter of its
    own (no lock), and on the in-memory database, whose own counters include conflicts,
    transactions are not wrapped at all.
    """

    def __init__(self, database: Any) -> None:
        self.database = database
        self.local = threading.local()
        self.lock = threading.Lock()
        self._counters: list[Counter[str]] = []  # one per thread that counted
        self.direct = False  # the in-memory database counts conflicts: no wrapping

    def role(self) -> str:
        return getattr(self.local, "role", "other")

    def count(self, name: str, amount: int = 1) -> None:
        counts: Counter[str] | None = getattr(self.local, "counts", None)
        if counts is None:
            counts = self.local.counts = Counter()
            with self.lock:
                self._counters.append(counts)
        counts[f"{self.role()}_{name}"] += amount

    def snapshot(self) -> Counter[str]:
        with self.lock:
            counters = list(self._counters)
        total: Counter[str] = Counter()
        for counts in counters:
            total.update(dict(counts))  # a dict copy is one step under the GIL
        return total

    def create_transaction(self) -> Any:
        self.count("transactions")
        if self.direct:
            return self.database.create_transaction()
        return CountingTransaction(self, self.database.create_transaction())

    @contextlib.contextmanager
    def database_counters(self) -> Iterator[bool]:
        """While open, the in-memory database's counters also count per role here (and
        conflicts are taken from them). Yields whether they do (False for any other
        database)."""
        stats = getattr(self.database, "_stats", None)
        if not isinstance(self.database, memory.Database) or type(stats) is not Counter:
            yield False
            return
        stats.__class__ = _RoleStats  # same layout: a Counter whose increments we see
        stats.__dict__["_benchmark_sink"] = self
        self.direct = True
        try:
            yield True
        finally:
            self.direct = False
            stats.__dict__.pop("_benchmark_sink", None)
            stats.__class__ = Counter


class _RoleStats(Counter[str]):
    """The in-memory database's counters, also reporting each increment to the benchmark."""

    def __setitem__(self, key: str, value: int) -> None:
        old = self.get(key, 0)
        super().__setitem__(key, value)
        sink = self.__dict__.get("_benchmark_sink")
        if sink is not None and value > old:
            sink.count(f"db_{key}", value - old)


class CountingTransaction:
    """Forwards everything to the real transaction; counts conflicts seen by ``on_error``."""

    def __init__(self, owner: CountingDatabase, transaction: Any) -> None:
        self._owner = owner
        self._transaction = transaction

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transaction, name)

    def __getitem__(self, key: Any) -> Any:
        return self._transaction[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._transaction[key] = value

    def __delitem__(self, key: Any) -> None:
        del self._transaction[key]

    def commit(self) -> Any:
        return CountedCommit(self._owner, self._transaction.commit())


class CountedCommit:
    """A commit future whose ``wait`` counts a conflict against the committing role."""

    def __init__(self, owner: CountingDatabase, future: Any) -> None:
        self._owner = owner
        self._future = future

    def wait(self) -> Any:
        try:
            return self._future.wait()
        except Exception as error:
            if getattr(error, "code", None) == CONFLICT:
                self._owner.count("conflicts")
            raise


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
DEFAULT_MODES = "queue"


# -- one run --------------------------------------------------------------------------------


@dataclass
class Result:
    phase: str
    mode: str
    consumers: int
    items: int
    seconds: float
    items_per_second: float
    p50_ms: float | None
    p99_ms: float | None
    conflicts_per_item: float
    transactions_per_item: float
    transaction_times_per_item: float | None
    cpu_ms_per_item: float
    ideal_per_second: float | None
    producer_conflicts: int
    empty_takes: int
    exactly_once: bool
    ratio: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def cpu_seconds_per_second(self) -> float:
        """CPU seconds this process used per second of the measured window."""
        return self.items_per_second * self.cpu_ms_per_item / 1000


class Tally:
    """What the consumers took, and the measured window: items ``start`` (exclusive) to
    ``end`` (inclusive) in the order they were taken, with the counters at both ends."""

    def __init__(self, counting: CountingDatabase, start: int, end: int) -> None:
        self.counting = counting
        self.start, self.end = start, end
        self.lock = threading.Lock()
        self.taken: list[Any] = []
        self.latencies: list[float] = []
        self.empty_takes = 0
        self.done = threading.Event()
        self.stalled = False
        self.errors: list[str] = []
        self.last_progress = time.monotonic()
        self.started_at = time.perf_counter()
        self.ended_at = self.started_at
        self.cpu_at_start = self.cpu_at_end = time.process_time()
        self.counts_at_start: Counter[str] = counting.snapshot()
        self.counts_at_end: Counter[str] = self.counts_at_start

    def record(self, value: Any, seconds: float) -> None:
        with self.lock:
            self.taken.append(value)
            self.last_progress = time.monotonic()
            n = len(self.taken)
            if self.start < n <= self.end:
                self.latencies.append(seconds)
            if n == self.start and self.start:
                self.started_at = time.perf_counter()
                self.cpu_at_start = time.process_time()
                self.counts_at_start = self.counting.snapshot()
            if n == self.end:
                self.ended_at = time.perf_counter()
                self.cpu_at_end = time.process_time()
                self.counts_at_end = self.counting.snapshot()
                self.done.set()

    def fail(self, who: str, error: Exception) -> None:
        """A consumer or producer raised: the run ends, reported as not exactly once."""
        with self.lock:
            self.errors.append(f"{who} failed: {type(error).__name__}: {error}")
            self.done.set()

    def found_empty(self) -> None:
        with self.lock:
            if self.start <= len(self.taken) < self.end:
                self.empty_takes += 1
            if time.monotonic() - self.last_progress > STALL_SECONDS:
                self.stalled = True
                self.done.set()


def consume(mode: Mode, queue: Any, counting: CountingDatabase, tally: Tally) -> None:
    counting.local.role = "consumer"
    try:
        with mode.consumer(queue, counting) as take:
            while not tally.done.is_set():
                started = time.perf_counter()
                value = take(None)
                if value is None:
                    tally.found_empty()
                    started = time.perf_counter()
                    value = take(WAIT_SECONDS)
                    if value is None:
                        continue
                tally.record(value, time.perf_counter() - started)
    except Exception as error:
        tally.fail("a consumer", error)


def load(mode: Mode, queue: Any, counting: CountingDatabase, values: range, threads: int) -> None:
    """Enqueue ``values`` with ``threads`` threads, in batches (not timed); re-raises the
    first error a thread met."""
    errors: list[Exception] = []

    def work(share: range) -> None:
        counting.local.role = "loader"
        try:
            for start in range(0, len(share), BATCH):
                mode.put(queue, counting, list(share[start : start + BATCH]))
        except Exception as error:
            errors.append(error)

    workers = [
        threading.Thread(target=work, args=(values[n::threads],), daemon=True)
        for n in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if errors:
        raise errors[0]


def run(
    mode: Mode,
    phase: str,
    consumers: int,
    *,
    items: int,
    producers: int,
    warmup: int,
    latency: memory.Latency,
    open_db: Callable[[], Any],
) -> Result:
    """One run of ``mode`` in ``phase`` with ``consumers`` threads, in a fresh subspace that
    is cleared afterwards."""
    database = open_db()
    space = Subspace(("fdbqueue-benchmark", uuid.uuid4().hex))
    try:
        counting = CountingDatabase(database)
        with counting.database_counters() as counted:
            if phase == "drain":
                tally, produced, left = _drain(mode, consumers, items, producers, counting, space)
            else:
                tally, produced, left = _steady(
                    mode, consumers, items, producers, warmup, counting, space
                )
        return _result(mode, phase, consumers, items, latency, counted, tally, produced, left)
    finally:  # leave nothing behind on a real cluster
        run_in_retry_loop(database, lambda tr: tr.clear_range_startswith(space.key()))


def _drain(
    mode: Mode,
    consumers: int,
    items: int,
    producers: int,
    counting: CountingDatabase,
    space: Subspace,
) -> tuple[Tally, int, list[Any]]:
    queue = mode.make(space)
    load(mode, queue, counting, range(items), producers)
    tally = Tally(counting, 0, items)
    threads = [
        threading.Thread(target=consume, args=(mode, queue, counting, tally), daemon=True)
        for _ in range(consumers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return tally, items, queue.peek_many(counting.database, items + 1)


def _steady(
    mode: Mode,
    consumers: int,
    items: int,
    producers: int,
    warmup: int,
    counting: CountingDatabase,
    space: Subspace,
) -> tuple[Tally, int, list[Any]]:
    queue = mode.make(space)
    high_water = max(50, 4 * consumers)
    load(mode, queue, counting, range(high_water), producers)
    tally = Tally(counting, warmup, warmup + items)
    lock = threading.Lock()
    produced = [high_water, high_water]  # allocated, committed

    def produce() -> None:
        try:
            produce_until_done()
        except Exception as error:
            tally.fail("a producer", error)

    def produce_until_done() -> None:
        counting.local.role = "producer"
        while not tally.done.is_set():
            with lock:
                backlog = produced[1] - len(tally.taken)
                if backlog < high_water:
                    start = produced[0]
                    produced[0] += BATCH
            if backlog >= high_water:
                time.sleep(0.001)
                continue
            mode.put(queue, counting, list(range(start, start + BATCH)))
            with lock:
                produced[1] += BATCH

    threads = [threading.Thread(target=produce, daemon=True) for _ in range(producers)]
    threads += [
        threading.Thread(target=consume, args=(mode, queue, counting, tally), daemon=True)
        for _ in range(consumers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    total = produced[0]
    return tally, total, queue.peek_many(counting.database, total - len(tally.taken) + 1)


def _result(
    mode: Mode,
    phase: str,
    consumers: int,
    items: int,
    latency: memory.Latency,
    counted: bool,
    tally: Tally,
    produced: int,
    left: list[Any],
) -> Result:
    notes = list(tally.errors)
    if tally.stalled:
        notes.append(f"stalled: no item taken for {STALL_SECONDS:.0f} s")
    if notes and len(tally.taken) < tally.end:  # the window did not complete
        tally.ended_at = time.perf_counter()
        tally.cpu_at_end = time.process_time()
        tally.counts_at_end = tally.counting.snapshot()
    measured = max(1, min(items, len(tally.taken) - tally.start))
    seconds = max(tally.ended_at - tally.started_at, 1e-9)
    counts = tally.counts_at_end - tally.counts_at_start
    all_counts = tally.counting.snapshot()
    one_transaction = latency.grv + latency.read + latency.commit
    transaction_times = None
    if counted and one_transaction > 0:
        spent = (
            counts["consumer_db_read_versions"] * latency.grv
            + counts["consumer_db_reads"] * latency.read
            + (counts["consumer_db_commits"] + counts["consumer_db_conflicts"]) * latency.commit
        )
        transaction_times = spent / one_transaction / measured
    latencies = sorted(tally.latencies)
    delivered = Counter(tally.taken) + Counter(left)
    return Result(
        phase=phase,
        mode=mode.name,
        consumers=consumers,
        items=measured,
        seconds=seconds,
        items_per_second=measured / seconds,
        p50_ms=1000 * latencies[(len(latencies) - 1) // 2] if latencies else None,
        p99_ms=1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
        if latencies
        else None,
        conflicts_per_item=(counts["consumer_conflicts"] + counts["consumer_db_conflicts"])
        / measured,
        transactions_per_item=counts["consumer_transactions"] / measured,
        transaction_times_per_item=transaction_times,
        cpu_ms_per_item=1000 * (tally.cpu_at_end - tally.cpu_at_start) / measured,
        ideal_per_second=consumers / one_transaction if one_transaction > 0 else None,
        producer_conflicts=sum(
            all_counts[f"{role}_{name}"]
            for role in ("producer", "loader")
            for name in ("conflicts", "db_conflicts")
        ),
        empty_takes=tally.empty_takes,
        exactly_once=not notes and delivered == Counter(range(produced)),
        notes=notes,
    )


def unsupported(mode: Mode, open_db: Callable[[], Any]) -> str | None:
    """Why ``mode`` cannot run (its queue or first take on an empty queue raises
    AttributeError, NotImplementedError, TypeError or ValueError), or None when it can."""
    database = open_db()
    space = Subspace(("fdbqueue-benchmark", uuid.uuid4().hex))
    try:
        with mode.consumer(mode.make(space), database) as take:
            take(None)
    except (AttributeError, NotImplementedError, TypeError, ValueError) as error:
        return f"{type(error).__name__}: {error}"
    finally:
        run_in_retry_loop(database, lambda tr: tr.clear_range_startswith(space.key()))
    return None


# -- arguments ------------------------------------------------------------------------------


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, not {text!r}")
    return value


def latency_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, not {text!r}")
    return value


def consumer_counts(text: str) -> list[int]:
    """``1,2,4``: a comma-separated list of consumer counts, each in 1..MAX_CONSUMERS."""
    counts = []
    for part in text.split(","):
        try:
            count = int(part)
        except ValueError:
            count = 0
        if not 1 <= count <= MAX_CONSUMERS:
            raise argparse.ArgumentTypeError(
                f"must be comma-separated integers from 1 to {MAX_CONSUMERS}, not {text!r}"
            )
        counts.append(count)
    return list(dict.fromkeys(counts))


def mode_names(text: str) -> list[str]:
    """Mode names and groups (``queue``, ``priority``, ``receipts``, ``all``), comma-separated,
    as the list of mode names in :data:`MODES` order."""
    known = [mode.name for mode in MODES]
    chosen: set[str] = set()
    for part in text.split(","):
        if part in GROUPS:
            chosen.update(GROUPS[part])
        elif part in known:
            chosen.add(part)
        else:
            raise argparse.ArgumentTypeError(
                f"unknown mode {part!r}; choose from {', '.join(known)} "
                f"or the groups {', '.join(sorted(GROUPS))}"
            )
    return [name for name in known if name in chosen]


def phase_names(text: str) -> list[str]:
    chosen: set[str] = set()
    for part in text.split(","):
        if part == "all":
            chosen.update(PHASES)
        elif part in PHASES:
            chosen.add(part)
        else:
            raise argparse.ArgumentTypeError(
                f"unknown phase {part!r}; choose from {', '.join(PHASES)} or all"
            )
    return [phase for phase in PHASES if phase in chosen]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the benchmark's options (not the database's) to ``parser``; each is checked as it
    is parsed, so a bad one is a usage error (exit status 2)."""
    parser.add_argument(
        "--phases",
        type=phase_names,
        default=list(PHASES),
        help="comma-separated: drain, steady or all (default: both)",
    )
    parser.add_argument(
        "--modes",
        type=mode_names,
        default=mode_names(DEFAULT_MODES),
        help=(
            f"comma-separated modes ({', '.join(mode.name for mode in MODES)}) or groups "
            f"({', '.join(sorted(GROUPS))}); default: {DEFAULT_MODES}"
        ),
    )
    parser.add_argument(
        "--consumers",
        type=consumer_counts,
        default=consumer_counts(DEFAULT_CONSUMERS),
        help=f"comma-separated consumer counts (default {DEFAULT_CONSUMERS})",
    )
    parser.add_argument(
        "--items", type=positive_int, default=200, help="items measured per run (default 200)"
    )
    parser.add_argument(
        "--repeat",
        type=positive_int,
        default=1,
        help="runs per phase, mode and consumer count; the median by items/s is shown (default 1)",
    )
    parser.add_argument(
        "--producers",
        type=positive_int,
        default=4,
        help="producer threads in steady, loader threads for the preload (default 4)",
    )
    parser.add_argument(
        "--warmup",
        type=non_negative_int,
        default=None,
        help="steady: items taken before measuring (default: items / 4)",
    )
    parser.add_argument(
        "--grv", type=latency_seconds, default=0.001, help="read version latency, s (default 0.001)"
    )
    parser.add_argument(
        "--read", type=latency_seconds, default=0.0005, help="read latency, s (default 0.0005)"
    )
    parser.add_argument(
        "--commit", type=latency_seconds, default=0.003, help="commit latency, s (default 0.003)"
    )
    parser.add_argument(
        "--plot", metavar="FILE.png", help="draw items/s against consumers (needs matplotlib)"
    )


def check_arguments(arguments: argparse.Namespace) -> None:
    """Check options given other than through :func:`add_arguments`' parser.

    Raises:
        BenchmarkError: an option is out of range or unknown.
    """
    problems = []
    counts = arguments.consumers
    if not counts or not all(
        isinstance(c, int) and not isinstance(c, bool) and 1 <= c <= MAX_CONSUMERS for c in counts
    ):
        problems.append(f"consumers must be integers from 1 to {MAX_CONSUMERS}")
    for name in ("items", "producers", "repeat"):
        value = getattr(arguments, name, 1)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            problems.append(f"{name} must be a positive integer, not {value!r}")
    if arguments.warmup is not None and (
        not isinstance(arguments.warmup, int) or arguments.warmup < 0
    ):
        problems.append(f"warmup must be an integer >= 0, not {arguments.warmup!r}")
    known = {mode.name for mode in MODES}
    if not arguments.modes or not set(arguments.modes) <= known:
        problems.append(f"modes must be among {sorted(known)}, not {arguments.modes!r}")
    if not arguments.phases or not set(arguments.phases) <= set(PHASES):
        problems.append(f"phases must be among {list(PHASES)}, not {arguments.phases!r}")
    try:
        memory.Latency(grv=arguments.grv, read=arguments.read, commit=arguments.commit)
    except ValueError as error:
        problems.append(str(error))
    if problems:
        raise BenchmarkError("; ".join(problems))


# -- running everything and printing ----------------------------------------------------------


def run_all(
    arguments: argparse.Namespace,
    open_db: Callable[[memory.Latency], Any],
    where: str,
    as_json: bool = False,
) -> list[Result]:
    """Run every selected phase, consumer count and mode (modes of one consumer count back to
    back); print the tables and the ratios, or one JSON document with ``as_json``.

    Args:
        arguments: the options :func:`add_arguments` defines.
        open_db: returns a database for one run, given the latency model (a real cluster
            ignores it).
        where: a description of the database, for the header and the plot's title.
        as_json: print one JSON document instead of tables.

    Returns:
        The results, one per phase, mode and consumer count.

    Raises:
        BenchmarkError: a bad option, or ``--plot`` without matplotlib.
    """
    check_arguments(arguments)
    if arguments.plot:
        _pyplot()  # fail before running, not after
    latency = memory.Latency(grv=arguments.grv, read=arguments.read, commit=arguments.commit)
    warmup = arguments.items // 4 if arguments.warmup is None else arguments.warmup
    repeat_count = getattr(arguments, "repeat", 1)
    settings = {
        "database": where,
        "latency": {"grv": latency.grv, "read": latency.read, "commit": latency.commit},
        "items": arguments.items,
        "warmup": warmup,
        "producers": arguments.producers,
        "phases": arguments.phases,
        "modes": arguments.modes,
        "consumers": arguments.consumers,
        "repeat": repeat_count,
    }
    describe = (
        f"{where}; latency grv={latency.grv}s read={latency.read}s commit={latency.commit}s; "
        f"{plural(arguments.items, 'item')} measured per run; "
        f"{plural(arguments.producers, 'producer')}/loaders; "
        f"steady warm-up {plural(warmup, 'item')}"
        + (f"; median of {repeat_count} runs" if repeat_count > 1 else "")
    )
    if not as_json:
        print(describe)
    modes = {mode.name: mode for mode in MODES if mode.name in arguments.modes}
    skipped = {}
    for name, mode in list(modes.items()):
        reason = unsupported(mode, lambda: open_db(latency))
        if reason is not None:
            skipped[name] = reason
            del modes[name]
            print(f"  skipped: {name} ({reason})", file=sys.stderr)
    results: list[Result] = []
    repeat = repeat_count
    for phase in arguments.phases:
        for consumers in arguments.consumers:
            runs: dict[str, list[Result]] = {name: [] for name in modes}
            for repetition in range(repeat):  # every mode once, then again: alike conditions
                for mode in modes.values():
                    runs[mode.name].append(
                        run(
                            mode,
                            phase,
                            consumers,
                            items=arguments.items,
                            producers=arguments.producers,
                            warmup=warmup,
                            latency=latency,
                            open_db=lambda: open_db(latency),
                        )
                    )
                    of = f" (run {repetition + 1} of {repeat})" if repeat > 1 else ""
                    print(
                        f"  done: {phase}, {mode.name}, {plural(consumers, 'consumer')}{of}",
                        file=sys.stderr,
                    )
            results.extend(median_run(runs[name]) for name in modes)
    add_ratios(results)
    if as_json:
        document = {
            "settings": settings,
            "skipped": skipped,
            "results": [
                _jsonable(
                    {**asdict(result), "cpu_seconds_per_second": result.cpu_seconds_per_second}
                )
                for result in results
            ],
        }
        print(json.dumps(document, indent=1))
    else:
        print_tables(results)
        print_ratios(results)
        for name, reason in skipped.items():
            print(f"skipped {name}: {reason}")
    if arguments.plot:
        plot(results, arguments.plot, describe)
    return results


def _jsonable(document: dict[str, Any]) -> dict[str, Any]:
    return {
        key: None if isinstance(value, float) and not math.isfinite(value) else value
        for key, value in document.items()
    }


def median_run(runs: list[Result]) -> Result:
    """The run with the median items/s (the lower one of the middle two for an even count);
    not exactly once, with every run's notes, when any run was not."""
    chosen = sorted(runs, key=lambda r: r.items_per_second)[(len(runs) - 1) // 2]
    if all(r.exactly_once for r in runs):
        return chosen
    notes = [note for r in runs for note in r.notes] or ["a repetition was not exactly once"]
    return replace(chosen, exactly_once=False, notes=notes)


def add_ratios(results: list[Result]) -> None:
    """Set each result's ratio: its items/s over its baseline's at the same phase and C."""
    baselines = {mode.name: mode.baseline for mode in MODES}
    found: dict[tuple[str, str | None, int], Result] = {
        (r.phase, r.mode, r.consumers): r for r in results
    }
    for result in results:
        base = found.get((result.phase, baselines.get(result.mode), result.consumers))
        if base is not None and base.items_per_second > 0:
            result.ratio = result.items_per_second / base.items_per_second


def _number(value: float | None, width: int, digits: int) -> str:
    return f"{'n/a':>{width}}" if value is None else f"{value:>{width}.{digits}f}"


COLUMNS = (
    "  C  items/s  ratio  ideal/s   p50 ms   p99 ms  confl/item  tx/item  tx-times/item"
    "  cpu ms/item  cpu s/s  enq confl"
)


def print_tables(results: list[Result]) -> None:
    """One table per phase (columns: see the module's docstring)."""
    width = max([len("mode")] + [len(r.mode) for r in results]) + 1
    for phase in PHASES:
        rows = [r for r in results if r.phase == phase]
        if not rows:
            continue
        steady = phase == "steady"
        header = f"{'mode':<{width}}" + COLUMNS + ("  empty" if steady else "") + "  once"
        print()
        print(f"{phase} phase")
        print(header)
        print("-" * len(header))
        for r in rows:
            print(
                f"{r.mode:<{width}}{r.consumers:>3}{r.items_per_second:>9.0f}"
                f"{_number(r.ratio, 7, 2)}{_number(r.ideal_per_second, 9, 0)}"
                f"{_number(r.p50_ms, 9, 1)}{_number(r.p99_ms, 9, 1)}"
                f"{r.conflicts_per_item:>12.2f}{r.transactions_per_item:>9.2f}"
                f"{_number(r.transaction_times_per_item, 15, 2)}{r.cpu_ms_per_item:>13.2f}"
                f"{r.cpu_seconds_per_second:>9.2f}{r.producer_conflicts:>11}"
                + (f"{r.empty_takes:>7}" if steady else "")
                + f"  {'yes' if r.exactly_once else 'NO'}"
                + "".join(f"  ({note})" for note in r.notes)
            )


def print_ratios(results: list[Result]) -> None:
    """One line per result with a baseline other than itself: ``phase: mode / baseline``."""
    baselines = {mode.name: mode.baseline for mode in MODES}
    order = {name: n for n, name in enumerate([*PHASES, *baselines])}
    lines = [
        f"{r.phase}: {r.mode} / {baselines[r.mode]}, {r.consumers:>2} "
        f"consumer{'s' * (r.consumers != 1)} = {r.ratio:.2f}x"
        for r in sorted(results, key=lambda r: (order[r.phase], order[r.mode], r.consumers))
        if r.ratio is not None and baselines[r.mode] != r.mode
    ]
    if lines:
        print()
        print("\n".join(lines))


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise BenchmarkError(
            "--plot needs matplotlib: pip install matplotlib (or the '.[bench]' extra)"
        ) from None
    return plt


def plot(results: list[Result], path: str, title: str) -> None:
    """Items/s against consumers, one panel per phase, one line per mode, and the ideal."""
    plt = _pyplot()
    from matplotlib.ticker import ScalarFormatter

    phases = [phase for phase in PHASES if any(r.phase == phase for r in results)]
    figure, panels = plt.subplots(1, len(phases), figsize=(7 * len(phases), 4.5), squeeze=False)
    for axes, phase in zip(panels[0], phases, strict=True):
        rows = [r for r in results if r.phase == phase]
        counts = sorted({r.consumers for r in rows})
        for name in dict.fromkeys(r.mode for r in rows):
            mine = [r for r in rows if r.mode == name]
            axes.plot(
                [r.consumers for r in mine],
                [r.items_per_second for r in mine],
                marker="o",
                label=name,
            )
        ideal = {r.consumers: r.ideal_per_second for r in rows if r.ideal_per_second}
        if ideal:
            axes.plot(
                sorted(ideal), [ideal[c] for c in sorted(ideal)], "k:", label="no-conflict ideal"
            )
        axes.set_xscale("log", base=2)
        axes.set_yscale("log")
        axes.set_xticks(counts)
        axes.get_xaxis().set_major_formatter(ScalarFormatter())
        axes.set_xlabel("consumer threads")
        axes.set_ylabel("items taken per second")
        axes.set_title(f"{phase} phase", fontsize=10)
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize=7)
    figure.suptitle(textwrap.fill(title, 120), fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    print(f"plot written to {path}", file=sys.stderr)


def check(results: list[Result]) -> None:
    """Exit with an error when an item was lost or duplicated, or an enqueue conflicted."""
    if not all(r.exactly_once for r in results) or any(r.producer_conflicts for r in results):
        sys.exit("FAILED: an item was lost or duplicated, or an enqueue conflicted")
