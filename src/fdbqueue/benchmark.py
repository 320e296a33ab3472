"""Contention benchmark: plain versus high-contention consumption as consumers are added.

For each mode (Queue and PriorityQueue, plain and ``high_contention=True``) and each number of
consumer threads C, it preloads ``--items`` items with P producer threads, then lets the P
producers enqueue ``--items`` more while the C consumers drain all of them. It prints, per
run: items/s while draining, dequeue latency p50 and p99 (ms, dequeue calls that returned an
item), conflicts and transactions per dequeued item (consumers only), the producers' conflicts
(always 0: enqueue and push never conflict), and whether every item was delivered exactly once.

A "queue plain, no receipts" mode (``exactly_once=False``) shows what exactly-once costs
beside the plain mode.

Run: ``fdbqueue bench`` or ``python examples/contention_benchmark.py`` (in-memory database
with ``Latency(grv=0.001, read=0.0005, commit=0.003)``), ``--plot throughput.png`` for a chart
(needs matplotlib: ``pip install -e '.[bench]'``), ``--cluster-file PATH`` for a real cluster.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import textwrap
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fdbqueue import PriorityQueue, Queue, Subspace, memory
from fdbqueue.transactional import run_in_retry_loop

__all__ = ["MODES", "Mode", "Result", "add_arguments", "print_table", "run", "run_all"]

CONFLICT = 1020


class CountingDatabase:
    """Wraps a database to count transactions and conflicts per role (producer/consumer)."""

    def __init__(self, database: Any) -> None:
        self.database = database
        self.local = threading.local()
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def role(self) -> str:
        return getattr(self.local, "role", "other")

    def count(self, name: str) -> None:
        with self.lock:
            self.counts[f"{self.role()}_{name}"] += 1

    def create_transaction(self) -> CountingTransaction:
        self.count("transactions")
        return CountingTransaction(self, self.database.create_transaction())


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
        self._role = owner.role()
        self._future = future

    def wait(self) -> Any:
        try:
            return self._future.wait()
        except Exception as error:
            if getattr(error, "code", None) == CONFLICT:
                with self._owner.lock:
                    self._owner.counts[f"{self._role}_conflicts"] += 1
            raise


@dataclass
class Result:
    mode: str
    consumers: int
    items_per_second: float
    p50_ms: float
    p99_ms: float
    conflicts_per_item: float
    transactions_per_item: float
    producer_conflicts: int
    exactly_once: bool


@dataclass(frozen=True)
class Mode:
    name: str
    make: Callable[[Subspace], Any]
    push: Callable[[Any, Any, Any], None]
    pop: Callable[[Any, Any, dict[str, Any]], Any]


MODES = [
    Mode(
        "queue plain",
        lambda s: Queue(s),
        lambda q, db, v: q.enqueue(db, v),
        lambda q, db, kw: q.dequeue(db, **kw),
    ),
    Mode(
        "queue plain, no receipts",
        lambda s: Queue(s, exactly_once=False),
        lambda q, db, v: q.enqueue(db, v),
        lambda q, db, kw: q.dequeue(db, **kw),
    ),
    Mode(
        "queue high-contention",
        lambda s: Queue(s, high_contention=True),
        lambda q, db, v: q.enqueue(db, v),
        lambda q, db, kw: q.dequeue(db, **kw),
    ),
    Mode(
        "priority plain",
        lambda s: PriorityQueue(s),
        lambda q, db, v: q.push(db, v, priority=v % 4),
        lambda q, db, kw: q.pop_min(db, **kw),
    ),
    Mode(
        "priority high-contention",
        lambda s: PriorityQueue(s, high_contention=True),
        lambda q, db, v: q.push(db, v, priority=v % 4),
        lambda q, db, kw: q.pop_min(db, **kw),
    ),
]


def run(
    mode: Mode, consumers: int, producers: int, items: int, open_db: Callable[[], Any]
) -> Result:
    database = open_db()
    space = Subspace(("fdbqueue-benchmark", uuid.uuid4().hex))
    try:
        return _run(mode, consumers, producers, items, database, space)
    finally:  # leave nothing behind on a real cluster
        run_in_retry_loop(database, lambda tr: tr.clear_range_startswith(space.key()))


def _run(
    mode: Mode, consumers: int, producers: int, items: int, database: Any, space: Subspace
) -> Result:
    counting = CountingDatabase(database)
    queue = mode.make(space)
    total = 2 * items

    def produce(start: int, stop: int) -> None:
        counting.local.role = "producer"
        for value in range(start, stop):
            mode.push(queue, counting, value)

    def run_producers(offset: int) -> list[threading.Thread]:
        share = items // producers
        threads = [
            threading.Thread(
                target=produce,
                args=(
                    offset + n * share,
                    offset + (items if n == producers - 1 else (n + 1) * share),
                ),
            )
            for n in range(producers)
        ]
        for thread in threads:
            thread.start()
        return threads

    for thread in run_producers(0):  # preload
        thread.join()

    taken: list[Any] = []
    latencies: list[float] = []
    lock = threading.Lock()
    done = threading.Event()

    def consume() -> None:
        counting.local.role = "consumer"
        while not done.is_set():
            started = time.perf_counter()
            value = mode.pop(queue, counting, {})
            elapsed = time.perf_counter() - started
            if value is None:
                value = mode.pop(queue, counting, {"block": True, "timeout": 0.05})
                if value is None:
                    continue
            else:
                with lock:
                    latencies.append(elapsed)
            with lock:
                taken.append(value)
                if len(taken) >= total:
                    done.set()

    started = time.perf_counter()
    producer_threads = run_producers(items)
    consumer_threads = [threading.Thread(target=consume) for _ in range(consumers)]
    for thread in consumer_threads:
        thread.start()
    for thread in producer_threads + consumer_threads:
        thread.join()
    elapsed = time.perf_counter() - started

    counts = counting.counts
    latencies.sort()
    return Result(
        mode=mode.name,
        consumers=consumers,
        items_per_second=len(taken) / elapsed,
        p50_ms=1000 * statistics.median(latencies) if latencies else float("nan"),
        p99_ms=1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
        if latencies
        else float("nan"),
        conflicts_per_item=counts["consumer_conflicts"] / len(taken),
        transactions_per_item=counts["consumer_transactions"] / len(taken),
        producer_conflicts=counts["producer_conflicts"],
        exactly_once=sorted(taken) == list(range(total)),
    )


def print_table(results: list[Result]) -> None:
    header = (
        f"{'mode':<26}{'C':>3}{'items/s':>10}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'confl/item':>12}{'tx/item':>9}{'enq confl':>11}  once"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        print(
            f"{r.mode:<26}{r.consumers:>3}{r.items_per_second:>10.0f}{r.p50_ms:>9.1f}"
            f"{r.p99_ms:>9.1f}{r.conflicts_per_item:>12.2f}{r.transactions_per_item:>9.2f}"
            f"{r.producer_conflicts:>11}  {'yes' if r.exactly_once else 'NO'}"
        )


def plot(results: list[Result], path: str, title: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("--plot needs matplotlib: pip install matplotlib (or the '.[bench]' extra)")
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for name in dict.fromkeys(r.mode for r in results):
        rows = [r for r in results if r.mode == name]
        axes.plot(
            [r.consumers for r in rows], [r.items_per_second for r in rows], marker="o", label=name
        )
    axes.set_xscale("log", base=2)
    axes.set_xticks(sorted({r.consumers for r in results}))
    axes.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
    axes.set_xlabel("consumer threads")
    axes.set_ylabel("items dequeued per second")
    axes.set_title(textwrap.fill(title, 80), fontsize=8)
    axes.grid(True, alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    print(f"plot written to {path}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the benchmark's options (not the database's) to ``parser``."""
    parser.add_argument("--consumers", default="1,2,4,8,16", help="comma-separated counts")
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--items", type=int, default=200, help="preloaded, and again produced")
    parser.add_argument(
        "--modes", default="all", help="comma-separated: queue,priority,receipts or all"
    )
    parser.add_argument("--grv", type=float, default=0.001, help="read version latency, s")
    parser.add_argument("--read", type=float, default=0.0005, help="read latency, s")
    parser.add_argument("--commit", type=float, default=0.003, help="commit latency, s")
    parser.add_argument("--plot", metavar="FILE.png", help="draw throughput against consumers")


def selected_modes(names: str) -> list[Mode]:
    """The modes named by ``--modes``: ``queue``, ``priority``, ``receipts`` (the queue's
    plain modes with and without receipts), or ``all``.

    Raises:
        ValueError: an unknown name.
    """
    kinds = {"queue", "priority", "receipts"}
    chosen = kinds if names == "all" else set(names.split(","))
    if not chosen <= kinds:
        raise ValueError(f"unknown modes {sorted(chosen - kinds)}; choose from {sorted(kinds)}")
    picked = []
    for mode in MODES:
        kind = mode.name.split()[0]
        if "no receipts" in mode.name:
            keep = "receipts" in chosen or "queue" in chosen
        else:
            keep = kind in chosen or ("receipts" in chosen and mode.name == "queue plain")
        if keep:
            picked.append(mode)
    return picked


def run_all(
    arguments: argparse.Namespace, open_db: Callable[[memory.Latency], Any], where: str
) -> list[Result]:
    """Run every selected mode at every consumer count; print the table and the ratios.

    Args:
        arguments: the options :func:`add_arguments` defines.
        open_db: returns a database for one run, given the latency model (a real cluster
            ignores it).
        where: a description of the database, for the header and the plot's title.

    Returns:
        The results, one per mode and consumer count.
    """
    latency = memory.Latency(grv=arguments.grv, read=arguments.read, commit=arguments.commit)
    counts = [int(c) for c in arguments.consumers.split(",")]
    modes = selected_modes(arguments.modes)
    settings = (
        f"{where}; latency grv={arguments.grv}s read={arguments.read}s "
        f"commit={arguments.commit}s; {arguments.producers} producers; "
        f"{2 * arguments.items} items per run"
    )
    print(settings)
    results = []
    for mode in modes:
        for consumers in counts:
            results.append(
                run(mode, consumers, arguments.producers, arguments.items, lambda: open_db(latency))
            )
            print(f"  done: {mode.name}, {consumers} consumers", file=sys.stderr)
    print_table(results)
    print_ratios(results)
    if arguments.plot:
        plot(results, arguments.plot, settings)
    return results


def print_ratios(results: list[Result]) -> None:
    """Print high-contention/plain throughput per consumer count, and receipts' cost."""
    by_mode: dict[str, dict[int, Result]] = {}
    for result in results:
        by_mode.setdefault(result.mode, {})[result.consumers] = result
    pairs = [
        (f"{kind}: high-contention/plain throughput", f"{kind} high-contention", f"{kind} plain")
        for kind in ("queue", "priority")
    ]
    pairs.append(
        ("queue: exactly-once/no-receipts throughput", "queue plain", "queue plain, no receipts")
    )
    for label, numerator, denominator in pairs:
        top, bottom = by_mode.get(numerator, {}), by_mode.get(denominator, {})
        for consumers in sorted(set(top) & set(bottom)):
            ratio = top[consumers].items_per_second / bottom[consumers].items_per_second
            print(f"{label}, {consumers:>2} consumers = {ratio:.2f}x")


def check(results: list[Result]) -> None:
    """Exit with an error when an item was lost or duplicated, or an enqueue conflicted."""
    if not all(r.exactly_once for r in results) or any(r.producer_conflicts for r in results):
        sys.exit("FAILED: an item was lost or duplicated, or an enqueue conflicted")
