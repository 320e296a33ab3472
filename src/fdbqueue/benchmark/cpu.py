"""The library's CPU and keys per item against the "Queues" recipe: ``fdbqueue bench --cpu``.

Each *subject* takes one run per ``--cpu-runs`` (3), the subjects of one run back to back,
each run on ``--cpu-items`` N values (5,000; 8-byte values, bytes) by one thread, one call
at a time, on a fresh in-memory database without latency (``--grv``, ``--read`` and
``--commit`` do not apply: a latency is sleeping, not CPU). ``--cpu-subjects`` picks some
(default: all); each picked one brings the recipe row it is set against. The subjects:

``recipe``
    :class:`~fdbqueue.benchmark.recipe.RecipeQueue`, the recipe's Python code: N enqueues,
    then N dequeues, each call given the database (a transaction of its own, committed).
``plain``
    ``fdbqueue.Queue(subspace, codec="raw")``, the same calls: the defaults (receipts for
    exactly once included) with the recipe's value format. Against ``recipe``.
``plain-no-receipts``
    ``fdbqueue.Queue(subspace, codec="raw", exactly_once=False)``, the same calls: the
    recipe's writes. Against ``recipe``.
``claim-ack``
    ``plain``'s queue: N enqueues, then N times a ``claim`` (a lease of :data:`LEASE`
    seconds) and the ``ack`` of its lease, each call given the database. Against ``recipe``:
    the recipe has no leases, so its enqueue + dequeue is what a claim-ack is set against.
``work``
    ``plain``'s queue: N enqueues, then ``queue.work(database, handler, lease=LEASE,
    until_empty=True)`` (one worker thread) until the handler has seen N + 1 jobs, when it
    sets the loop's ``stop``; a first value enqueued before them is the first job, so
    that the worker thread's start is left out. Measured: the N enqueues (this thread) and,
    in the worker thread, from the first job's handler call to the last one's: N acks and N
    claims, with the loop's bookkeeping around them (per job). Against ``recipe``, as
    ``claim-ack``.
``recipe-in-transaction``
    The recipe's ``enqueue`` and ``dequeue`` each given the transaction of a function
    wrapped by :func:`fdbqueue.transactional`, called with the database (one call, one
    transaction): what a caller composing its own writes with the queue's does.
``in-transaction``
    ``plain``'s queue called as ``recipe-in-transaction`` calls the recipe, in the same
    wrapper. Against ``recipe-in-transaction``.

Before each measured pass, the garbage collector collects (it stays on during the pass: what
a subject allocates is its cost), and the subject runs once unmeasured on ``min(N, 100)``
values (the first write records the queue's type; caches warm up).

What is whose. Every function the profile saw is charged to one *layer*, by the file that
defines it, two ways (:func:`layer` and :func:`client_layer`, one profile, two
:func:`charge` calls):

* **own** (:func:`layer`): the library's code: files under ``src/fdbqueue/`` except
  ``memory/`` and ``benchmark/`` for fdbqueue, the file :mod:`fdbqueue.benchmark.recipe` for
  the recipe; against it, *database*: what stands for FoundationDB and its binding, the files
  under ``src/fdbqueue/memory/`` (the in-memory database) and of the ``fdb`` package (the
  binding's Python: ``fdb/tuple.py``, ``fdb/subspace_impl.py``, ``fdb/impl.py``, ...; every
  subject builds its keys with its tuple layer);
* **client** (:func:`client_layer`): what the calling process would spend with a real
  cluster, everything but the in-memory database: the own code and the ``fdb`` package; the
  database is ``src/fdbqueue/memory/`` alone;
* **harness**: this benchmark's other files (the loops that make the calls, the work
  subject's handler), the same both ways;
* anything else (the standard library, built-in functions, ``sortedcontainers``, ...) is
  charged to whoever called it: its time is split among its callers in proportion to the
  time it spent for each (``pstats``' per-caller figures), so ``os.urandom`` called by the
  recipe is the recipe's, a ``threading`` lock taken by the in-memory database is the
  database's, ``struct.pack`` called by the tuple layer is the client's.

In the in-transaction subjects the wrapper (:func:`fdbqueue.transactional`, its retry loop
and commit) is fdbqueue's code, so it counts in the own and the client figures of both rows
alike: their ratio is what the queue adds inside a caller's transaction.

The figures: each pass is made twice on fresh databases, once without a profiler (the
measuring thread's CPU time, ``time.thread_time``, over the measured calls: ``total
us/item``) and once under ``cProfile`` (its default clock; the layers' shares of the profiled
time: ``own share``). ``own us/item`` is the own share x the unprofiled CPU / N, ``client
us/item`` the client share x the same, ``db us/item`` the database's (memory/ and fdb) share
x the same; the harness's share (near 0) is in none of them. So the profiler's overhead (a
constant per call, so slightly more for code of many small calls) moves the shares a
little, not the totals. (Timing the profile by ``time.thread_time`` gave the same shares
within 0.01-0.04, 2-4 times slower.) ``vs recipe`` is a subject's ``own us/item`` over its
recipe row's, ``client vs recipe`` its ``client us/item`` over the recipe row's (the
medians over the runs).

Keys, from the in-memory database's billing counters (:meth:`fdbqueue.memory.Database.stats`,
counted as FoundationDB's client metrics count them) over the same measured calls of the
unprofiled pass, per item: ``reads/item``, the read requests that reached the database
(point reads, range reads, a range read once per batch, and ``get_key``; not those
answered by the transaction's own writes or cache); ``keys read/item``, the keys those
returned (a point read one, present or absent; a range read each pair it returned);
``keys written/item``, the mutations of the commits that succeeded (a set, a clear, an atomic
operation, a range clear each one; repeated sets of one key in a transaction one). The
recipe writes 2 keys per item (a set, a clear). ``in order``: every pass got its values back
in order and left the queue empty (a dequeue, or a claim, found nothing after them).

Issue 30 asked ``plain`` <= 1.5x the recipe's own CPU; issue 37 asks the client CPU <= 1.5x
the recipe's for ``plain`` and <= 2.5x for ``claim-ack`` and ``work``.
"""

from __future__ import annotations

import cProfile
import gc
import pstats
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fdb

import fdbqueue
from fdbqueue import Queue, Subspace, memory, transactional
from fdbqueue.benchmark import recipe
from fdbqueue.benchmark.recipe import RecipeQueue

__all__ = [
    "REFERENCES",
    "SUBJECTS",
    "CpuResult",
    "Meter",
    "Subject",
    "charge",
    "client_layer",
    "layer",
    "measure_cpu",
    "print_cpu",
    "with_references",
]

WARMUP = 100
#: Seconds of every lease ``claim-ack`` and ``work`` take: none expires during a pass, and
#: the work loop's heartbeat (every lease / 3) does not beat.
LEASE = 300.0
#: The billing counters of :meth:`fdbqueue.memory.Database.stats` a pass keeps.
COUNTED = ("reads", "keys_read", "keys_written")

OWN, CLIENT, DATABASE, HARNESS = "own", "client", "database", "harness"
_PACKAGE = Path(fdbqueue.__file__).resolve().parent
_OWN_FILES = {Path(recipe.__file__).resolve()}
_MEMORY_DIRECTORY = _PACKAGE / "memory"
_FDB_DIRECTORY = Path(fdb.__file__).resolve().parent
_HARNESS_DIRECTORY = _PACKAGE / "benchmark"


class Meter:
    """What a pass measures, over one or more regions, each started and stopped in one thread
    (the thread that runs it): that thread's CPU seconds (``time.thread_time``), the
    ``profile`` when given (enabled in that thread), and the database's billing counters
    (:data:`COUNTED`, every thread's calls during the region).

    Args:
        database: the pass's in-memory database.
        profile: the profiler to run over the regions, or None.
    """

    def __init__(self, database: memory.Database, profile: cProfile.Profile | None) -> None:
        self.seconds = 0.0
        self.counted: Counter[str] = Counter()
        self._database = database
        self._profile = profile
        self._started = 0.0
        self._before: dict[str, int] = {}

    def start(self) -> None:
        """Begin a region in the calling thread."""
        self._before = self._database.stats()
        self._started = time.thread_time()
        if self._profile is not None:
            self._profile.enable()

    def stop(self) -> None:
        """End the region the calling thread began."""
        if self._profile is not None:
            self._profile.disable()
        self.seconds += time.thread_time() - self._started
        after = self._database.stats()
        for name in COUNTED:
            self.counted[name] += after[name] - self._before[name]


#: The calls of one subject's pass: ``(queue, database, values, meter)``; they start and stop
#: ``meter`` around what is measured and return whether the values came back in order and the
#: queue was left empty.
Calls = Callable[[Any, memory.Database, list[bytes], Meter], bool]


@dataclass(frozen=True)
class Subject:
    """One row: its queue over a subspace, its calls, and the recipe row it is set against."""

    make: Callable[[Subspace], Any]
    calls: Calls
    reference: str


def _enqueue_dequeue(
    queue: Any, database: memory.Database, values: list[bytes], meter: Meter
) -> bool:
    """N enqueues then N dequeues, each call given the database."""
    meter.start()
    for value in values:
        queue.enqueue(database, value)
    taken = [queue.dequeue(database) for _ in values]
    meter.stop()
    return taken == values and queue.dequeue(database) is None


@transactional
def _enqueue_in(tr: Any, queue: Any, value: bytes) -> None:
    queue.enqueue(tr, value)


@transactional
def _dequeue_in(tr: Any, queue: Any) -> Any:
    return queue.dequeue(tr)


def _in_transaction(
    queue: Any, database: memory.Database, values: list[bytes], meter: Meter
) -> bool:
    """N enqueues then N dequeues, each inside a transaction of :func:`fdbqueue.transactional`
    (called with the database)."""
    meter.start()
    for value in values:
        _enqueue_in(database, queue, value)
    taken = [_dequeue_in(database, queue) for _ in values]
    meter.stop()
    return taken == values and _dequeue_in(database, queue) is None


def _claim_ack(queue: Any, database: memory.Database, values: list[bytes], meter: Meter) -> bool:
    """N enqueues, then N claims each followed by the ack of its lease, given the database."""
    meter.start()
    for value in values:
        queue.enqueue(database, value)
    taken = []
    for _ in values:
        lease = queue.claim(database, LEASE)
        if lease is None:
            break
        taken.append(lease.value)
        queue.ack(database, lease)
    meter.stop()
    return taken == values and queue.claim(database, LEASE) is None


def _work(queue: Any, database: memory.Database, values: list[bytes], meter: Meter) -> bool:
    """A first job, N enqueues, then ``queue.work`` until its handler has seen N + 1 jobs;
    measured: the enqueues, and in the worker thread the first job's handler call to the last
    one's (the module docstring)."""
    first = b"first job"
    queue.enqueue(database, first)
    meter.start()
    for value in values:
        queue.enqueue(database, value)
    meter.stop()
    handled: list[bytes] = []
    stop = threading.Event()

    def handler(value: bytes) -> None:
        handled.append(value)
        if len(handled) == 1:
            meter.start()
        if len(handled) == len(values) + 1:
            meter.stop()
            stop.set()

    queue.work(database, handler, lease=LEASE, stop=stop, until_empty=True, handle_signals=False)
    return handled == [first, *values] and queue.claim(database, LEASE) is None


def _plain(space: Subspace) -> Any:
    return Queue(space, codec="raw")


#: The subjects, by name, in the order each run takes them.
SUBJECTS: dict[str, Subject] = {
    "recipe": Subject(RecipeQueue, _enqueue_dequeue, "recipe"),
    "plain": Subject(_plain, _enqueue_dequeue, "recipe"),
    "plain-no-receipts": Subject(
        lambda space: Queue(space, codec="raw", exactly_once=False), _enqueue_dequeue, "recipe"
    ),
    "claim-ack": Subject(_plain, _claim_ack, "recipe"),
    "work": Subject(_plain, _work, "recipe"),
    "recipe-in-transaction": Subject(RecipeQueue, _in_transaction, "recipe-in-transaction"),
    "in-transaction": Subject(_plain, _in_transaction, "recipe-in-transaction"),
}
#: The recipe rows, those the others are set against.
REFERENCES = ("recipe", "recipe-in-transaction")


def with_references(names: list[str]) -> list[str]:
    """``names`` and the recipe rows they are set against, in :data:`SUBJECTS` order."""
    chosen = set(names) | {SUBJECTS[name].reference for name in names}
    return [name for name in SUBJECTS if name in chosen]


@dataclass
class CpuResult:
    """One subject's figures (medians over the runs; see the module docstring): microseconds
    of CPU per item (per job for ``work``), shares of the profiled time, and the database's
    billing counters per item."""

    subject: str
    reference: str
    items: int
    runs: int
    own_us_per_item: float
    client_us_per_item: float
    database_us_per_item: float
    total_us_per_item: float
    own_share: float
    client_share: float
    reads_per_item: float
    keys_read_per_item: float
    keys_written_per_item: float
    in_order: bool
    vs_recipe: float | None = None
    client_vs_recipe: float | None = None


def layer(filename: str) -> str | None:
    """The layer a function of ``filename`` is charged to for the own figures (the module
    docstring): own, database (memory/ and the fdb package) or harness; None for one charged
    to its callers (the standard library, built-ins, other packages)."""
    if filename.startswith(("~", "<")):
        return None
    path = Path(filename).resolve()
    if path in _OWN_FILES:
        return OWN
    if path.is_relative_to(_MEMORY_DIRECTORY) or path.is_relative_to(_FDB_DIRECTORY):
        return DATABASE
    if path.is_relative_to(_HARNESS_DIRECTORY):
        return HARNESS
    if path.is_relative_to(_PACKAGE):
        return OWN
    return None


def client_layer(filename: str) -> str | None:
    """The layer a function of ``filename`` is charged to for the client figures (the module
    docstring): database (memory/ alone), harness, or client (what :func:`layer` calls own,
    and the fdb package); None as :func:`layer`."""
    found = layer(filename)
    if found == DATABASE and Path(filename).resolve().is_relative_to(_FDB_DIRECTORY):
        return CLIENT
    return CLIENT if found == OWN else found


def charge(
    stats: dict[Any, Any], layer_of: Callable[[str], str | None] = layer
) -> dict[str, float]:
    """The profiled time (seconds) of each layer, from ``pstats.Stats(...).stats``: a
    function's own time goes to its file's layer (``layer_of``); a function of no layer
    splits its own time among its callers in proportion to the time it spent for each, and
    what it charges a caller of no layer goes on up the same way; one that no caller charges
    (the profile's roots, recursion among functions of no layer) goes to the harness. Every
    layer :func:`layer` and :func:`client_layer` name is in the result, 0.0 when nothing was
    charged to it.

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

    charged = dict.fromkeys((OWN, CLIENT, DATABASE, HARNESS), 0.0)
    for function, figures in stats.items():
        for name, part in share_of(function).items():
            charged[name] = charged.get(name, 0.0) + figures[2] * part
    return charged


def _pass(
    subject: Subject,
    open_db: Callable[[], memory.Database],
    values: list[bytes],
    profile: cProfile.Profile | None,
) -> tuple[Meter, bool]:
    """The subject's calls on ``values`` on a fresh database, after a warm-up; what they
    measured (under ``profile`` when given), and whether both got their values back in
    order."""
    gc.collect()  # every pass starts from the same heap (the collector stays on)
    database = open_db()
    space = Subspace(("fdbqueue-benchmark", uuid.uuid4().hex))
    queue = subject.make(space)
    meter = Meter(database, profile)
    try:
        warm = subject.calls(queue, database, values[:WARMUP], Meter(database, None))
        in_order = subject.calls(queue, database, values, meter)
        return meter, warm and in_order
    finally:
        _clear(database, space.key())


@transactional
def _clear(tr: Any, prefix: bytes) -> None:
    tr.clear_range_startswith(prefix)


@dataclass
class _Run:
    """One run of one subject: the unprofiled pass's CPU seconds and counters, the profiled
    pass's layer shares (own view and client view), both passes in order."""

    seconds: float
    counted: Counter[str]
    own: dict[str, float]
    client: dict[str, float]
    in_order: bool


def _run(subject: Subject, open_db: Callable[[], memory.Database], values: list[bytes]) -> _Run:
    """One run: CPU seconds and counters unprofiled, the layers' shares profiled."""
    meter, in_order = _pass(subject, open_db, values, None)
    profile = cProfile.Profile()
    _, profiled_in_order = _pass(subject, open_db, values, profile)
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    own, client = charge(stats, layer), charge(stats, client_layer)
    profiled = sum(own.values()) or 1.0
    return _Run(
        meter.seconds,
        meter.counted,
        {name: part / profiled for name, part in own.items()},
        {name: part / profiled for name, part in client.items()},
        in_order and profiled_in_order,
    )


def _result(name: str, items: int, runs: list[_Run]) -> CpuResult:
    """The medians of one subject's runs."""
    micros = [1e6 * run.seconds / items for run in runs]

    def median_us(share: Callable[[_Run], float]) -> float:
        return statistics.median(us * share(run) for us, run in zip(micros, runs, strict=True))

    def per_item(counter: str) -> float:
        return statistics.median(run.counted[counter] / items for run in runs)

    return CpuResult(
        subject=name,
        reference=SUBJECTS[name].reference,
        items=items,
        runs=len(runs),
        own_us_per_item=median_us(lambda run: run.own[OWN]),
        client_us_per_item=median_us(lambda run: run.client[CLIENT]),
        database_us_per_item=median_us(lambda run: run.own[DATABASE]),
        total_us_per_item=statistics.median(micros),
        own_share=statistics.median(run.own[OWN] for run in runs),
        client_share=statistics.median(run.client[CLIENT] for run in runs),
        reads_per_item=per_item("reads"),
        keys_read_per_item=per_item("keys_read"),
        keys_written_per_item=per_item("keys_written"),
        in_order=all(run.in_order for run in runs),
    )


def measure_cpu(
    open_db: Callable[[], memory.Database],
    items: int,
    runs: int,
    subjects: list[str] | None = None,
) -> list[CpuResult]:
    """``subjects`` of :data:`SUBJECTS` (default all) and the recipe rows they are set
    against (:func:`with_references`), ``runs`` times (the subjects of one run back to back),
    ``items`` values each; their medians, each set against its recipe row.

    Args:
        open_db: returns a fresh in-memory database, without latency, for one pass.
        items: values per pass (N).
        runs: runs per subject.
        subjects: names in :data:`SUBJECTS`; None for all.

    Raises:
        KeyError: a name not in :data:`SUBJECTS`.

    Cost: per subject and run, two passes of N values (one profiled, several times slower)
    and a warm-up of ``min(N, 100)``.
    """
    names = with_references(list(SUBJECTS) if subjects is None else subjects)
    values = [b"%08d" % n for n in range(items)]
    seen: dict[str, list[_Run]] = {name: [] for name in names}
    for run in range(runs):
        for name in names:
            seen[name].append(_run(SUBJECTS[name], open_db, values))
            print(f"  done: cpu, {name} (run {run + 1} of {runs})", file=sys.stderr)
    results = {name: _result(name, items, measured) for name, measured in seen.items()}
    for result in results.values():
        reference = results[result.reference]
        if reference.own_us_per_item > 0:
            result.vs_recipe = result.own_us_per_item / reference.own_us_per_item
        if reference.client_us_per_item > 0:
            result.client_vs_recipe = result.client_us_per_item / reference.client_us_per_item
    return list(results.values())


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def print_cpu(results: list[CpuResult], describe: str) -> None:
    """A table of ``results`` under ``describe``."""
    print(describe)
    header = (
        f"{'subject':<23}{'own us/item':>12}{'client us/item':>16}{'db us/item':>12}"
        f"{'total us/item':>15}{'own share':>11}{'vs recipe':>11}{'client vs recipe':>18}"
        f"{'reads/item':>12}{'keys read/item':>16}{'keys written/item':>19}  in order"
        f"  against"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        print(
            f"{r.subject:<23}{r.own_us_per_item:>12.1f}{r.client_us_per_item:>16.1f}"
            f"{r.database_us_per_item:>12.1f}{r.total_us_per_item:>15.1f}{r.own_share:>11.2f}"
            f"{_ratio(r.vs_recipe):>11}{_ratio(r.client_vs_recipe):>18}"
            f"{r.reads_per_item:>12.2f}{r.keys_read_per_item:>16.2f}"
            f"{r.keys_written_per_item:>19.2f}  {'yes' if r.in_order else 'NO':<8}"
            f"  {r.reference}"
        )
