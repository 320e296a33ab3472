"""The library's own CPU per item against FoundationDB's "Queues" recipe: ``fdbqueue bench --cpu``.

Each *subject* takes one run per ``--cpu-runs`` (3), the subjects of one run back to back:
one thread enqueues ``--cpu-items`` N values (5,000; 8-byte values, bytes) one call at a
time, each call given the database (a transaction of its own, committed), then dequeues N
one call at a time, on a fresh in-memory database without latency (``--grv``, ``--read``
and ``--commit`` do not apply: a latency is sleeping, not CPU). The subjects:

``recipe``
    :class:`~fdbqueue.benchmark.recipe.RecipeQueue`, the recipe's Python code.
``plain``
    ``fdbqueue.Queue(subspace, codec="raw")``: the defaults (receipts for exactly once
    included) with the recipe's value format.
``plain-no-receipts``
    ``fdbqueue.Queue(subspace, codec="raw", exactly_once=False)``: the recipe's writes.

Before each measured pass, the garbage collector collects (it stays on during the pass: what
a subject allocates is its cost), and ``min(N, 100)`` values are enqueued and dequeued
unmeasured (the first write records the queue's type; caches warm up).

What is whose. Every function the profile saw is charged to one *layer*, by the file that
defines it:

* **own**: the library's code: files under ``src/fdbqueue/`` except ``memory/`` and
  ``benchmark/`` for fdbqueue, the file :mod:`fdbqueue.benchmark.recipe` for the recipe;
* **database**: what stands for FoundationDB and its binding, excluded from "own": files
  under ``src/fdbqueue/memory/`` (the in-memory database) and of the ``fdb`` package (the
  binding's Python: ``fdb/tuple.py``, ``fdb/subspace_impl.py``, ``fdb/impl.py``, ...; both
  subjects build their keys with its tuple layer);
* **harness**: this benchmark's other files (the loop that calls enqueue and dequeue);
* anything else (the standard library, built-in functions, ``sortedcontainers``, ...) is
  charged to whoever called it: its time is split among its callers in proportion to the
  time it spent for each (``pstats``' per-caller figures), so ``os.urandom`` called by the
  recipe is the recipe's, a ``threading`` lock taken by the in-memory database is the
  database's.

The figures: each pass is made twice on fresh databases, once without a profiler (this
thread's CPU time, ``time.thread_time``, over the N enqueues and N dequeues: ``total
us/item``) and once under ``cProfile`` (its default clock; the layers' shares of the profiled
time: ``own share``). ``own us/item`` is the own share x the unprofiled CPU / N, ``db
us/item`` the database's share x the same (the harness's, near 0, is neither); so the
profiler's overhead (a constant per call, so slightly more for code of many small calls)
moves the shares a little, not the totals. (Timing the profile by ``time.thread_time``
gave the same shares within 0.01-0.04, 2-4 times slower.) ``vs recipe`` is a subject's
``own us/item`` over the recipe's (the medians over the runs). ``in order``: every pass got
its N values back, in order. Issue 30 asks ``plain`` <= 1.5x the recipe.
"""

from __future__ import annotations

import cProfile
import gc
import json
import pstats
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import fdb

import fdbqueue
from fdbqueue import Queue, Subspace, transactional
from fdbqueue.benchmark import recipe
from fdbqueue.benchmark.recipe import RecipeQueue

__all__ = ["SUBJECTS", "CpuResult", "charge", "layer", "measure_cpu", "print_cpu"]

#: The subjects, by name: the queue over a subspace.
SUBJECTS: dict[str, Callable[[Subspace], Any]] = {
    "recipe": RecipeQueue,
    "plain": lambda space: Queue(space, codec="raw"),
    "plain-no-receipts": lambda space: Queue(space, codec="raw", exactly_once=False),
}
#: The subject the others are set against.
REFERENCE = "recipe"
WARMUP = 100

OWN, DATABASE, HARNESS = "own", "database", "harness"
_PACKAGE = Path(fdbqueue.__file__).resolve().parent
_OWN_FILES = {Path(recipe.__file__).resolve()}
_DATABASE_DIRECTORIES = [_PACKAGE / "memory", Path(fdb.__file__).resolve().parent]
_HARNESS_DIRECTORY = _PACKAGE / "benchmark"


@dataclass
class CpuResult:
    """One subject's figures (medians over the runs; see the module docstring)."""

    subject: str
    items: int
    runs: int
    own_us_per_item: float
    database_us_per_item: float
    total_us_per_item: float
    own_share: float
    in_order: bool
    vs_recipe: float | None = None


def layer(filename: str) -> str | None:
    """The layer a function of ``filename`` is charged to (the module docstring); None for
    one charged to its callers (the standard library, built-ins, other packages)."""
    if filename.startswith(("~", "<")):
        return None
    path = Path(filename).resolve()
    if path in _OWN_FILES:
        return OWN
    if any(path.is_relative_to(directory) for directory in _DATABASE_DIRECTORIES):
        return DATABASE
    if path.is_relative_to(_HARNESS_DIRECTORY):
        return HARNESS
    if path.is_relative_to(_PACKAGE):
        return OWN
    return None


def charge(
    stats: dict[Any, Any], layer_of: Callable[[str], str | None] = layer
) -> dict[str, float]:
    """The profiled time (seconds) of each layer, from ``pstats.Stats(...).stats``: a
    function's own time goes to its file's layer (``layer_of``); a function of no layer
    splits its own time among its callers in proportion to the time it spent for each, and
    what it charges a caller of no layer goes on up the same way; one that no caller charges
    (the profile's roots, recursion among functions of no layer) goes to the harness.

    Cost: O(functions + caller edges), each function's share computed once.
    """
    shares: dict[Any, dict[str, float]] = {}
    visiting: set[Any] = set()

    def share_of(function: Any) -> dict[str, float]:
        known = shares.get(function)
        if known is not None:
            return known
        own_layer = layer_of(function[0])
        if own_layer is not None:
            shares[function] = {own_layer: 1.0}
            return shares[function]
        visiting.add(function)
        total: dict[str, float] = {}
        weight = 0.0
        for caller, edge in stats[function][4].items():
            if caller in visiting or caller not in stats:
                continue
            spent = edge[2] or 0.0
            for name, part in share_of(caller).items():
                total[name] = total.get(name, 0.0) + spent * part
            weight += spent
        visiting.discard(function)
        share = {name: part / weight for name, part in total.items()} if weight else {HARNESS: 1.0}
        shares[function] = share
        return share

    charged = {OWN: 0.0, DATABASE: 0.0, HARNESS: 0.0}
    for function, figures in stats.items():
        for name, part in share_of(function).items():
            charged[name] += figures[2] * part
    return charged


def _pass(
    subject: Callable[[Subspace], Any],
    open_db: Callable[[], Any],
    values: list[bytes],
    profile: cProfile.Profile | None,
) -> tuple[float, bool]:
    """Enqueue then dequeue ``values`` one call at a time on a fresh database; this thread's
    CPU seconds for them (under ``profile`` when given), and whether they came back in
    order."""
    gc.collect()  # every pass starts from the same heap (the collector stays on)
    database = open_db()
    space = Subspace(("fdbqueue-benchmark", uuid.uuid4().hex))
    queue = subject(space)
    try:
        warmup = values[:WARMUP]
        for value in warmup:
            queue.enqueue(database, value)
        warm = [queue.dequeue(database) for _ in warmup]
        taken = []
        started = time.thread_time()
        if profile is not None:
            profile.enable()
        for value in values:
            queue.enqueue(database, value)
        for _ in values:
            taken.append(queue.dequeue(database))
        if profile is not None:
            profile.disable()
        seconds = time.thread_time() - started
        return seconds, warm == warmup and taken == values and queue.dequeue(database) is None
    finally:
        _clear(database, space.key())


@transactional
def _clear(tr: Any, prefix: bytes) -> None:
    tr.clear_range_startswith(prefix)


def _run(
    subject: Callable[[Subspace], Any], open_db: Callable[[], Any], values: list[bytes]
) -> tuple[float, dict[str, float], bool]:
    """One run: CPU seconds unprofiled, the layers' shares profiled, both passes in order."""
    seconds, in_order = _pass(subject, open_db, values, None)
    profile = cProfile.Profile()
    _, profiled_in_order = _pass(subject, open_db, values, profile)
    charged = charge(pstats.Stats(profile).stats)  # type: ignore[attr-defined]
    profiled = sum(charged.values()) or 1.0
    return (
        seconds,
        {name: part / profiled for name, part in charged.items()},
        (in_order and profiled_in_order),
    )


def measure_cpu(open_db: Callable[[], Any], items: int, runs: int) -> list[CpuResult]:
    """Every subject of :data:`SUBJECTS`, ``runs`` times (the subjects of one run back to
    back), ``items`` values each; their medians, each set against :data:`REFERENCE`.

    Args:
        open_db: returns a fresh database for one pass (the in-memory one, without latency).
        items: values enqueued then dequeued per pass (N).
        runs: runs per subject.
    """
    values = [b"%08d" % n for n in range(items)]
    seen: dict[str, list[tuple[float, dict[str, float], bool]]] = {name: [] for name in SUBJECTS}
    for run in range(runs):
        for name, subject in SUBJECTS.items():
            seen[name].append(_run(subject, open_db, values))
            print(f"  done: cpu, {name} (run {run + 1} of {runs})", file=sys.stderr)
    results = []
    for name, measured in seen.items():
        micros = [1e6 * seconds / items for seconds, _, _ in measured]
        own = [us * shares[OWN] for us, (_, shares, _) in zip(micros, measured, strict=True)]
        database = [
            us * shares[DATABASE] for us, (_, shares, _) in zip(micros, measured, strict=True)
        ]
        results.append(
            CpuResult(
                subject=name,
                items=items,
                runs=runs,
                own_us_per_item=statistics.median(own),
                database_us_per_item=statistics.median(database),
                total_us_per_item=statistics.median(micros),
                own_share=statistics.median(shares[OWN] for _, shares, _ in measured),
                in_order=all(in_order for _, _, in_order in measured),
            )
        )
    reference = next(r for r in results if r.subject == REFERENCE)
    for result in results:
        if reference.own_us_per_item > 0:
            result.vs_recipe = result.own_us_per_item / reference.own_us_per_item
    return results


def print_cpu(
    results: list[CpuResult], describe: str, settings: dict[str, Any], as_json: bool
) -> None:
    """A table of ``results`` under ``describe``, or one JSON document (``settings`` and
    ``cpu``, the results)."""
    if as_json:
        document = {"settings": settings, "cpu": [asdict(r) for r in results]}
        print(json.dumps(document, indent=1))
        return
    print(describe)
    header = (
        f"{'subject':<18}{'own us/item':>13}{'db us/item':>12}{'total us/item':>15}"
        f"{'own share':>11}{'vs recipe':>11}  in order"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        ratio = "n/a" if r.vs_recipe is None else f"{r.vs_recipe:.2f}"
        print(
            f"{r.subject:<18}{r.own_us_per_item:>13.1f}{r.database_us_per_item:>12.1f}"
            f"{r.total_us_per_item:>15.1f}{r.own_share:>11.2f}{ratio:>11}"
            f"  {'yes' if r.in_order else 'NO'}"
        )
