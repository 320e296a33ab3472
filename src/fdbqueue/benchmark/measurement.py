"""One measured run: the consumer and loader threads, the drain and steady phases, on one
shared queue or on private queues (one per consumer), and their :class:`Result`."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sortedcontainers import SortedList

from fdbqueue import Subspace, memory
from fdbqueue._transactions.transactional import run_in_retry_loop
from fdbqueue.benchmark.counting import CountingDatabase
from fdbqueue.benchmark.hot_ranges import MutationRecorder
from fdbqueue.benchmark.loading import DEFAULT_LOAD, load
from fdbqueue.benchmark.workload import BATCH, STALL_SECONDS, WAIT_SECONDS, Mode

# -- one run --------------------------------------------------------------------------------


@dataclass
class Result:
    """The figures of one run (the columns of :mod:`fdbqueue.benchmark`'s docstring).

    ``ideal_per_second``, ``of_ideal`` and ``cpu_vs_ideal`` compare the run with the private
    run of the same phase and C (:mod:`~fdbqueue.benchmark.ideal`), and ``ratio`` with the
    mode's baseline; they are None until set. ``keys_read_per_item`` is None on a real
    cluster, ``hot_range_share`` without ``--hot-ranges`` or outside the steady phase.
    ``load`` is the drain's load shape (:mod:`~fdbqueue.benchmark.loading`) when ``--loads``
    was given, else None (and the steady phase's is always None).
    """

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
    producer_conflicts: int
    empty_takes: int
    exactly_once: bool
    keys_read_per_item: float | None = None
    p99_over_p50: float | None = None
    overtaken: int | None = None
    hot_range_share: float | None = None
    ideal_per_second: float | None = None
    of_ideal: float | None = None
    cpu_vs_ideal: float | None = None
    ratio: float | None = None
    load: str | None = None
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
    private: bool = False,
    hot_ranges: bool = False,
    load_shape: str | None = None,
) -> Result:
    """One run of ``mode`` in ``phase`` with ``consumers`` threads, in a fresh subspace that
    is cleared afterwards.

    Args:
        mode: how the consumers take and the producers put.
        phase: ``drain`` or ``steady``.
        consumers: consumer threads (C).
        items: items measured (N).
        producers: producer threads (steady) and loader threads (the preload).
        warmup: steady: items taken before the measured window.
        latency: the in-memory database's latency model (for ``tx-times/item``).
        open_db: returns the database of the run.
        private: each consumer takes from a queue of its own (``mode.make`` of a subspace
            of its own); the preload and the producers spread the items evenly over them.
        hot_ranges: record every committed mutation and set ``hot_range_share`` (steady).
        load_shape: drain: how the items are preloaded (a name of
            :data:`~fdbqueue.benchmark.loading.LOADS`), recorded as the result's ``load``;
            None: as :data:`~fdbqueue.benchmark.loading.DEFAULT_LOAD`, ``load`` left None.

    Returns:
        The run's figures; ``exactly_once`` False when an item was lost or taken twice, a
        thread raised, or the run stalled (its ``notes`` say which).
    """
    database = open_db()
    space = Subspace(("fdbqueue-benchmark", uuid.uuid4().hex))
    try:
        recorder = MutationRecorder() if hot_ranges else None
        counting = CountingDatabase(database, recorder)
        if private:
            queues = [mode.make(space.subspace((n,))) for n in range(consumers)]
        else:
            queues = [mode.make(space)]
        with counting.database_counters() as counted:
            if phase == "drain":
                tally, produced, left = _drain(
                    mode, consumers, items, producers, counting, queues, load_shape
                )
            else:
                tally, produced, left = _steady(
                    mode, consumers, items, producers, warmup, counting, queues
                )
        result = _result(mode, phase, consumers, items, latency, counted, tally, produced, left)
        result.load = load_shape if phase == "drain" else None
        if recorder is not None and phase == "steady":
            result.hot_range_share = recorder.share(space.key(), tally.started_at, tally.ended_at)
        return result
    finally:  # leave nothing behind on a real cluster
        run_in_retry_loop(database, lambda tr: tr.clear_range_startswith(space.key()))


def _start_consumers(
    mode: Mode, consumers: int, queues: list[Any], counting: CountingDatabase, tally: Tally
) -> list[threading.Thread]:
    """The consumer threads, the n-th taking from ``queues[n % len(queues)]``, not started."""
    return [
        threading.Thread(
            target=consume, args=(mode, queues[n % len(queues)], counting, tally), daemon=True
        )
        for n in range(consumers)
    ]


def _left(queues: list[Any], counting: CountingDatabase, limit: int) -> list[Any]:
    """The values still in ``queues`` (at most ``limit`` from each)."""
    return [value for queue in queues for value in queue.peek_many(counting.database, limit)]


def _drain(
    mode: Mode,
    consumers: int,
    items: int,
    producers: int,
    counting: CountingDatabase,
    queues: list[Any],
    load_shape: str | None = None,
) -> tuple[Tally, int, list[Any]]:
    load(mode, queues, counting, range(items), producers, load_shape or DEFAULT_LOAD)
    tally = Tally(counting, 0, items)
    threads = _start_consumers(mode, consumers, queues, counting, tally)
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return tally, items, _left(queues, counting, items + 1)


def _steady(
    mode: Mode,
    consumers: int,
    items: int,
    producers: int,
    warmup: int,
    counting: CountingDatabase,
    queues: list[Any],
) -> tuple[Tally, int, list[Any]]:
    # the backlog the producers keep: 4 items a consumer, 2 batches a queue (a shard counts
    # as a queue: the private queues and a sharded queue get the same), at least 50
    shards = sum(getattr(queue, "shards", 1) for queue in queues)
    high_water = max(50, 4 * consumers, 2 * BATCH * shards)
    load(mode, queues, counting, range(high_water), producers)
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
            queue = queues[(start // BATCH) % len(queues)]  # the queues in turn, a batch each
            mode.put(queue, counting, list(range(start, start + BATCH)))
            with lock:
                produced[1] += BATCH

    threads = [threading.Thread(target=produce, daemon=True) for _ in range(producers)]
    threads += _start_consumers(mode, consumers, queues, counting, tally)
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    total = produced[0]
    return tally, total, _left(queues, counting, total - len(tally.taken) + 1)


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
    p50 = 1000 * latencies[(len(latencies) - 1) // 2] if latencies else None
    p99 = (
        1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] if latencies else None
    )
    delivered = Counter(tally.taken) + Counter(left)
    return Result(
        phase=phase,
        mode=mode.name,
        consumers=consumers,
        items=measured,
        seconds=seconds,
        items_per_second=measured / seconds,
        p50_ms=p50,
        p99_ms=p99,
        conflicts_per_item=(counts["consumer_conflicts"] + counts["consumer_db_conflicts"])
        / measured,
        transactions_per_item=counts["consumer_transactions"] / measured,
        transaction_times_per_item=transaction_times,
        cpu_ms_per_item=1000 * (tally.cpu_at_end - tally.cpu_at_start) / measured,
        producer_conflicts=sum(
            all_counts[f"{role}_{name}"]
            for role in ("producer", "loader")
            for name in ("conflicts", "db_conflicts")
        ),
        empty_takes=tally.empty_takes,
        exactly_once=not notes and delivered == Counter(range(produced)),
        keys_read_per_item=counts["consumer_db_keys_read"] / measured if counted else None,
        p99_over_p50=p99 / p50 if p50 and p99 is not None else None,
        overtaken=overtaken(tally.taken),
        notes=notes,
    )


def overtaken(taken: list[int]) -> int:
    """The most items taken before an item that were enqueued after it, over ``taken`` (the
    values in the order they were taken; values are enqueued in increasing order, by each
    loader or producer): 0 is FIFO. Cost: O(n log n) (a sorted list of the values taken so
    far)."""
    seen = SortedList()
    most = 0
    for value in taken:
        most = max(most, len(seen) - seen.bisect_right(value))
        seen.add(value)
    return most


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
