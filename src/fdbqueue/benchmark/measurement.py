"""One measured run: counting per thread role (:class:`CountingDatabase`), the consumer
and loader threads, the drain and steady phases, and their :class:`Result`."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from fdbqueue import Subspace, memory
from fdbqueue._transactions.transactional import run_in_retry_loop
from fdbqueue.benchmark.workload import BATCH, CONFLICT, STALL_SECONDS, WAIT_SECONDS, Mode

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
