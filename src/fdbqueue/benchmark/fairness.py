"""Fair share across message groups, measured: ``fdbqueue bench --fairness``.

One *noisy* group's backlog is enqueued first (``--noisy-items``, 100,000 by default), then
``--quiet-groups`` groups (100) of ``--quiet-items`` items each (10), all into one queue
(preloaded, not timed). Then C consumer threads (each ``--consumers`` count) take, in each
mode (``dequeue``: a ``dequeue`` per item; ``claim``: a ``claim`` and its ``ack``), until
every quiet group's item is taken. Each take runs in a transaction of its own (given to the
call, retried by :func:`fdbqueue.transactional`), so the takes are put in the order the
database applied them: their commit versions. (The order in which the calls returned is not
that order: a thread paused between its commit and its return lets the others return many
takes first.) Printed per C and mode:

* ``last quiet``: the take (counted from 1, in commit order) that took the last quiet item;
  groups served in turn take it at (quiet groups + 1) x quiet items, the ``round robin``
  column: 1,010 by default, where a FIFO queue would take it last, at 101,000;
* the dwell times (ms from the start of the takes to the item's take) of the quiet groups'
  items, p50, p99 and max, and of the noisy group's items taken meanwhile, p50;
* ``once``: no item was taken twice.

With ``--json``, every group's dwell percentiles too (``groups``: name, items taken, p50, p99
and max in ms).

Source followed: the issue's measurement (SQS fair queues: a noisy tenant's backlog must not
delay a quiet tenant).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from fdbqueue._transactions.transactional import transactional
from fdbqueue._wording import plural
from fdbqueue.queue import Queue

__all__ = ["FAIRNESS_MODES", "Fairness", "measure_fairness", "print_fairness"]

#: How a consumer takes one item in each mode: ``(queue, db) -> (value or None, the take's
#: commit version)``.
FAIRNESS_MODES: dict[str, Callable[[Queue[Any], Any], tuple[Any, int]]] = {}
NOISY = "noisy"
#: Items per enqueue transaction while preloading.
PRELOAD_BATCH = 1_000


@transactional
def _dequeue_in(tr: Any, queue: Queue[Any]) -> tuple[Any, Any]:
    return queue.dequeue(tr), tr


@transactional
def _claim_in(tr: Any, queue: Queue[Any]) -> tuple[Any, Any]:
    return queue.claim(tr, lease=60), tr


def _dequeue(queue: Queue[Any], db: Any) -> tuple[Any, int]:
    value, tr = _dequeue_in(db, queue)
    return value, tr.get_committed_version()


def _claim(queue: Queue[Any], db: Any) -> tuple[Any, int]:
    lease, tr = _claim_in(db, queue)
    if lease is None:
        return None, -1
    queue.ack(db, lease)
    return lease.value, tr.get_committed_version()


FAIRNESS_MODES.update(dequeue=_dequeue, claim=_claim)


@dataclass(frozen=True)
class Fairness:
    """One fairness run's figures (see the module docstring); times in milliseconds."""

    mode: str
    consumers: int
    noisy_items: int
    quiet_groups: int
    quiet_items: int
    takes: int
    last_quiet: int | None
    round_robin: int
    quiet_p50_ms: float | None
    quiet_p99_ms: float | None
    quiet_max_ms: float | None
    noisy_p50_ms: float | None
    exactly_once: bool
    groups: list[dict[str, Any]] = field(default_factory=list)


def _percentile(sorted_values: list[float], fraction: float) -> float | None:
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, int(fraction * len(sorted_values)))]


def _preload(db: Any, queue: Queue[Any], noisy: int, quiet_groups: int, quiet: int) -> None:
    for start in range(0, noisy, PRELOAD_BATCH):
        count = min(PRELOAD_BATCH, noisy - start)
        queue.enqueue_many(db, [(NOISY, i) for i in range(start, start + count)], group=NOISY)
    for number in range(quiet_groups):
        name = f"quiet-{number}"
        queue.enqueue_many(db, [(name, i) for i in range(quiet)], group=name)


def measure_fairness(
    db: Any,
    mode: str,
    consumers: int,
    *,
    noisy_items: int = 100_000,
    quiet_groups: int = 100,
    quiet_items: int = 10,
) -> Fairness:
    """Preload the groups into a fresh queue of ``db``, then take with ``consumers`` threads
    in ``mode`` (a key of :data:`FAIRNESS_MODES`) until every quiet item is taken (or the
    queue is empty); return the figures."""
    queue: Queue[Any] = Queue(("fdbqueue-bench", "fairness", mode, consumers, time.time_ns()))
    _preload(db, queue, noisy_items, quiet_groups, quiet_items)
    take = FAIRNESS_MODES[mode]
    quiet_total = quiet_groups * quiet_items
    lock = threading.Lock()
    taken: list[tuple[int, Any, float]] = []  # (commit version, value, seconds since the start)
    quiet_left = [quiet_total]
    started = time.perf_counter()

    def consume() -> None:
        while True:
            with lock:
                if quiet_left[0] <= 0:
                    return
            value, version = take(queue, db)
            if value is None:
                return
            with lock:
                taken.append((version, tuple(value), time.perf_counter() - started))
                if value[0] != NOISY:
                    quiet_left[0] -= 1

    threads = [threading.Thread(target=consume) for _ in range(consumers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    dwell: dict[str, list[float]] = defaultdict(list)
    last_quiet = None
    taken.sort(key=lambda take: take[0])  # the order the database applied them
    for number, (_version, value, seconds) in enumerate(taken, start=1):
        dwell[value[0]].append(1000 * seconds)
        if value[0] != NOISY:
            last_quiet = number
    quiet = sorted(ms for name, times in dwell.items() if name != NOISY for ms in times)
    noisy = sorted(dwell.get(NOISY, []))
    groups = [
        {
            "group": name,
            "items": len(times),
            "p50_ms": _percentile(sorted(times), 0.5),
            "p99_ms": _percentile(sorted(times), 0.99),
            "max_ms": max(times),
        }
        for name, times in dwell.items()
    ]
    return Fairness(
        mode=mode,
        consumers=consumers,
        noisy_items=noisy_items,
        quiet_groups=quiet_groups,
        quiet_items=quiet_items,
        takes=len(taken),
        last_quiet=last_quiet if quiet_left[0] <= 0 else None,
        round_robin=(quiet_groups + 1) * quiet_items,
        quiet_p50_ms=_percentile(quiet, 0.5),
        quiet_p99_ms=_percentile(quiet, 0.99),
        quiet_max_ms=quiet[-1] if quiet else None,
        noisy_p50_ms=_percentile(noisy, 0.5),
        exactly_once=max(Counter(value for _, value, _ in taken).values(), default=1) == 1,
        groups=groups,
    )


def print_fairness(results: list[Fairness], as_json: bool) -> None:
    """Print the runs as one table, or one JSON document."""
    if as_json:
        print(json.dumps({"fairness": [asdict(result) for result in results]}, indent=1))
        return
    if not results:
        return
    first = results[0]
    print(
        f"fairness: one group of {plural(first.noisy_items, 'item')}, then "
        f"{plural(first.quiet_groups, 'quiet group')} of {first.quiet_items} each; consumers "
        "take until every quiet item is taken"
    )
    columns = [
        ("consumers", 9),
        ("mode", 8),
        ("takes", 7),
        ("last quiet", 10),
        ("round robin", 11),
        ("quiet p50 ms", 12),
        ("quiet p99 ms", 12),
        ("quiet max ms", 12),
        ("noisy p50 ms", 12),
        ("once", 5),
    ]
    print("  ".join(f"{name:>{width}}" for name, width in columns))
    for r in results:
        cells = [
            r.consumers,
            r.mode,
            r.takes,
            "-" if r.last_quiet is None else r.last_quiet,
            r.round_robin,
            *(
                "-" if ms is None else f"{ms:.1f}"
                for ms in (r.quiet_p50_ms, r.quiet_p99_ms, r.quiet_max_ms, r.noisy_p50_ms)
            ),
            "yes" if r.exactly_once else "NO",
        ]
        widths = [width for _name, width in columns]
        print("  ".join(f"{cell!s:>{width}}" for cell, width in zip(cells, widths, strict=True)))
