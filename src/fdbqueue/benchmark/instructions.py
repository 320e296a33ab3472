"""Bytecode instructions per item against the "Queues" recipe: the second table of
``fdbqueue bench --cpu``.

CPU time moves with the machine's load more than the differences between versions; the
Python bytecode instructions the client executes do not: they are counted, not timed, so the
docs compare designs by them. Each row counts the instructions of its calls on ``items``
values (:data:`ITEMS`, ``--cpu-counted-items``), after :data:`WARMUP` values made the same
calls uncounted, on a fresh in-memory database of its own (``memory.open(seed=SEED)``), with
``codec="raw"`` (the recipe's value format), 8-byte values, one call at a time. The rows
bear the names of :data:`fdbqueue.benchmark.cpu.SUBJECTS` (``--cpu-subjects`` picks them as
it picks those), each set against the recipe row its subject is set against:

``recipe``
    :class:`~fdbqueue.benchmark.recipe.RecipeQueue`: ``enqueue`` then ``dequeue``, each
    given the database (a transaction of its own, committed by the recipe's retry loop).
``plain``
    ``Queue(subspace, codec="raw")``, the same calls.
``plain-no-receipts``
    ``Queue(subspace, codec="raw", exactly_once=False)``, the same calls.
``claim-ack``
    ``plain``'s queue: ``enqueue``, then ``claim(database, LEASE)`` and ``ack(database,
    lease)``: per item, enqueue + claim + ack. Against ``recipe`` (it has no leases).
``work``
    ``plain``'s queue: per job, a ``submit`` and its share of ``queue.work(database, handler,
    lease=LEASE, until_empty=True)``, marginal: the instructions of ``WARMUP + items`` jobs
    less those of ``WARMUP`` jobs, over ``items``, each count on a fresh database whose queue
    first ran a ``work()`` loop of :data:`WARMUP` jobs uncounted. The loop's start and end
    (its threads, its last look at an empty queue) are in both counts, so they cancel.
    Against ``recipe``.
``recipe-in-transaction``
    The recipe's bodies given a transaction
    (:meth:`~fdbqueue.benchmark.recipe.RecipeQueue.enqueue_in`,
    :meth:`~fdbqueue.benchmark.recipe.RecipeQueue.dequeue_in`), the transaction created and
    committed by this module (not counted): what the recipe's code does inside a caller's
    transaction.
``in-transaction``
    ``plain``'s queue: ``enqueue(tr, value)`` then ``dequeue(tr)``, each given a transaction
    created and committed the same way. Against ``recipe-in-transaction``.

What counts (:class:`InstructionCounter`): every frame outside ``src/fdbqueue/memory/``
(which stands for the cluster) is the client's, as :func:`fdbqueue.benchmark.cpu.client_layer`
tells them apart: fdbqueue's code, the ``fdb`` binding's (its tuple layer), the recipe; this
benchmark's other files (the loops making the calls, the handler) are the harness, not
counted. A frame of no layer (the standard library) is charged to its nearest caller that
has one: ``threading.Condition.notify`` called by the worker loop is the loop's, the same
called by the in-memory database the database's (built-in functions run no bytecode). Each
opcode the interpreter reports (``sys.settrace`` and
``threading.settrace``, ``frame.f_trace_opcodes``) counts one, in every thread started
meanwhile too (the worker loop's). This is the method of issue 44's figures.

The counts repeat to about 0.2%: the random part of the recipe's item keys (``os.urandom``)
decides how many ``\\x00`` bytes the tuple layer meets when it unpacks one, and the worker
loop's waits and its threads' periodic calls follow the clock (a few instructions per job).
While counting, the interpreter switches threads every :data:`SWITCH_SECONDS` instead of
every 5 ms, so that a thread woken by another runs before the next wake-up: the worker loop's
heartbeat thread, woken at every job's start, wakes once per job. Without it, how many of
those wake-ups ran (each about 170 instructions) followed the thread scheduling, and the
``work`` row moved by 2% from run to run.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any

from fdbqueue import Subspace, memory
from fdbqueue.benchmark.cpu import CLIENT, HARNESS, LEASE, SUBJECTS, client_layer
from fdbqueue.errors import BenchmarkError

__all__ = [
    "ITEMS",
    "ROWS",
    "SEED",
    "SUBSPACE",
    "SWITCH_SECONDS",
    "WARMUP",
    "InstructionCounter",
    "InstructionResult",
    "Row",
    "count_instructions",
    "print_instructions",
]

#: Items counted per row by default (``--cpu-counted-items``).
ITEMS = 200
#: Items (jobs) each row's calls make uncounted first; the base of ``work``'s marginal count.
WARMUP = 30
#: The in-memory database's seed.
SEED = 1
#: The subspace of every row's queue: the recipe's own, ``fdb.Subspace(('Q',))``. (The count
#: grows with the ``\x00`` bytes of the prefix where a key holding another is unpacked.)
SUBSPACE = Subspace(("Q",))
#: The interpreter's thread switch interval while counting (seconds; its default is 0.005).
SWITCH_SECONDS = 1e-4

_UNSEEN = object()
Tracer = Callable[[FrameType, str, Any], Any]


class InstructionCounter:
    """Counts the bytecode instructions the client executes while open (``with counter:``),
    in the calling thread and in every thread started meanwhile: :attr:`instructions`.

    A frame counts when ``layer_of`` gives :data:`~fdbqueue.benchmark.cpu.CLIENT` for the file
    of its code; a file of no layer (None: the standard library, ``<frozen ...>``) takes the
    layer of its nearest caller that has one; a frame with none up its stack is the harness's.
    Frames already running when the counter opens (the caller's) are not counted. On closing,
    the trace functions in place before (a debugger's, coverage's) are put back.

    Args:
        layer_of: the layer of a file name (:func:`~fdbqueue.benchmark.cpu.client_layer`:
            client, database, harness, or None); asked once per file.

    Cost: the counted code runs about 20-50 times slower (a Python call per instruction).
    """

    def __init__(self, layer_of: Callable[[str], str | None] = client_layer) -> None:
        self._layer_of = layer_of
        self._layers: dict[str, str | None] = {}
        self._tallies: list[list[int]] = []  # one per thread that counted
        self._local = threading.local()
        self._lock = threading.Lock()
        self._before: tuple[Any, Any] = (None, None)

    @property
    def instructions(self) -> int:
        """The instructions counted so far, every thread's."""
        with self._lock:
            return sum(tally[0] for tally in self._tallies)

    def __enter__(self) -> InstructionCounter:
        self._before = (sys.gettrace(), threading.gettrace())
        threading.settrace(self._call)
        sys.settrace(self._call)
        return self

    def __exit__(self, *exception: object) -> None:
        sys.settrace(self._before[0])
        threading.settrace(self._before[1])

    def _layer(self, frame: FrameType | None) -> str:
        """The layer a new frame is charged to (the class docstring)."""
        while frame is not None:
            filename = frame.f_code.co_filename
            found = self._layers.get(filename, _UNSEEN)
            if found is _UNSEEN:
                found = self._layers[filename] = self._layer_of(filename)
            if found is not None:
                return str(found)
            frame = frame.f_back
        return HARNESS

    def _tally(self) -> list[int]:
        """The calling thread's count (a thread counts into its own: no lock per instruction)."""
        tally: list[int] | None = getattr(self._local, "tally", None)
        if tally is None:
            tally = self._local.tally = [0]
            with self._lock:
                self._tallies.append(tally)
        return tally

    def _call(self, frame: FrameType, event: str, arg: Any) -> Tracer | None:
        """The global trace function: a client frame gets a local one counting its opcodes."""
        if self._layer(frame) != CLIENT:
            return None
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        tally = self._tally()

        def count(frame: FrameType, event: str, arg: Any) -> Tracer:
            if event == "opcode":
                tally[0] += 1
            return count

        return count


@contextmanager
def _counting(counter: InstructionCounter) -> Iterator[InstructionCounter]:
    """``counter`` open, after a collection (each count starts from the same heap), threads
    switching every :data:`SWITCH_SECONDS` (the module docstring)."""
    gc.collect()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_SECONDS)
    try:
        with counter:
            yield counter
    finally:
        sys.setswitchinterval(interval)


# -- the rows' calls: what runs uncounted (warm-up) and counted, on one queue ------------------

#: A row's calls on a queue: ``(queue, database, values)``; they return whether the values
#: came back in order.
Calls = Callable[[Any, memory.Database, list[bytes]], bool]


def _values(count: int, first: int = 0) -> list[bytes]:
    return [b"%08d" % n for n in range(first, first + count)]


def _enqueue_dequeue(queue: Any, database: memory.Database, values: list[bytes]) -> bool:
    """Per value an ``enqueue``, then per value a ``dequeue``, each given the database."""
    for value in values:
        queue.enqueue(database, value)
    return [queue.dequeue(database) for _ in values] == values


def _in_transaction(
    put: Callable[[Any, Any, bytes], None], take: Callable[[Any, Any], Any]
) -> Calls:
    """Per value ``put(queue, tr, value)``, then per value ``take(queue, tr)``, each in a
    transaction of its own created and committed here."""

    def calls(queue: Any, database: memory.Database, values: list[bytes]) -> bool:
        for value in values:
            tr = database.create_transaction()
            put(queue, tr, value)
            tr.commit().wait()
        taken = []
        for _ in values:
            tr = database.create_transaction()
            taken.append(take(queue, tr))
            tr.commit().wait()
        return taken == values

    return calls


def _claim_ack(queue: Any, database: memory.Database, values: list[bytes]) -> bool:
    """Per value an ``enqueue``, then per value a ``claim`` and the ``ack`` of its lease."""
    for value in values:
        queue.enqueue(database, value)
    taken = []
    for _ in values:
        lease = queue.claim(database, LEASE)
        if lease is None:
            return False
        queue.ack(database, lease)
        taken.append(lease.value)
    return taken == values


def _ignore(value: bytes) -> None:
    """The ``work`` row's handler."""


def _submit_work(queue: Any, database: memory.Database, values: list[bytes]) -> bool:
    """Per value a ``submit``, then one ``work()`` loop until the queue is empty."""
    for value in values:
        queue.submit(database, value)
    summary = queue.work(database, _ignore, lease=LEASE, until_empty=True, handle_signals=False)
    return bool(summary.succeeded == len(values))


# -- the rows ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One row's calls on its subject's queue (``make`` of
    :data:`~fdbqueue.benchmark.cpu.SUBJECTS`), whether it counts them marginally (per job of a
    ``work()`` loop), and what it counts per item (for the table)."""

    calls: Calls
    counted: str
    marginal: bool = False


_RECIPE_IN_TRANSACTION = _in_transaction(
    lambda queue, tr, value: queue.enqueue_in(tr, value), lambda queue, tr: queue.dequeue_in(tr)
)
_QUEUE_IN_TRANSACTION = _in_transaction(
    lambda queue, tr, value: queue.enqueue(tr, value), lambda queue, tr: queue.dequeue(tr)
)
_GIVEN_A_TRANSACTION = "enqueue + dequeue, each given a Transaction"

#: The rows, by the name of the :data:`~fdbqueue.benchmark.cpu.SUBJECTS` subject they go with
#: (and whose queue they make).
ROWS: dict[str, Row] = {
    "recipe": Row(_enqueue_dequeue, "enqueue + dequeue"),
    "plain": Row(_enqueue_dequeue, "enqueue + dequeue"),
    "plain-no-receipts": Row(_enqueue_dequeue, "enqueue + dequeue"),
    "claim-ack": Row(_claim_ack, "enqueue + claim + ack"),
    "work": Row(_submit_work, "submit + work(), per job, marginal", marginal=True),
    "recipe-in-transaction": Row(_RECIPE_IN_TRANSACTION, _GIVEN_A_TRANSACTION),
    "in-transaction": Row(_QUEUE_IN_TRANSACTION, _GIVEN_A_TRANSACTION),
}


@dataclass
class InstructionResult:
    """One row's figure: instructions per item (per job for ``work``), and its ratio to its
    recipe row's (1.0 for a recipe row; None when that row was not counted)."""

    subject: str
    reference: str
    counted: str
    items: int
    warmup: int
    instructions_per_item: float
    vs_recipe: float | None = None


def _count(name: str, items: int, warmup: int) -> int:
    """The instructions of the row ``name``'s calls on ``items`` values, on a fresh
    database, after its calls on ``warmup`` values uncounted.

    Raises:
        BenchmarkError: the calls did not get their values back in order.
    """
    row = ROWS[name]
    database = memory.open(seed=SEED)
    queue = SUBJECTS[name].make(SUBSPACE)
    warm = row.calls(queue, database, _values(warmup))
    with _counting(InstructionCounter()) as counter:
        in_order = row.calls(queue, database, _values(items, warmup))
    if not (warm and in_order):
        raise BenchmarkError(f"counting instructions: {name} did not get its values back")
    return counter.instructions


def count_row(name: str, items: int = ITEMS, warmup: int = WARMUP) -> float:
    """The instructions per item of the row ``name`` of :data:`ROWS` (the module docstring).

    Raises:
        KeyError: a name not in :data:`ROWS`.
        BenchmarkError: the calls did not get their values back in order.

    Cost: the row's calls on ``warmup + items`` values (``work``: twice, a loop of
    ``warmup`` jobs then one of ``warmup + items``, and once ``warmup`` jobs), the counted
    ones about 20-50 times slower than untraced.
    """
    if not ROWS[name].marginal:
        return _count(name, items, warmup) / items
    return (_count(name, warmup + items, warmup) - _count(name, warmup, warmup)) / items


def count_instructions(
    subjects: list[str], items: int = ITEMS, warmup: int = WARMUP
) -> list[InstructionResult]:
    """The rows of ``subjects`` (names of :data:`ROWS`, in that order, the recipe rows they
    are set against among them: :func:`~fdbqueue.benchmark.cpu.with_references`), each set
    against its recipe row.

    Raises:
        KeyError: a name not in :data:`ROWS`.
        BenchmarkError: a row's calls did not get their values back in order.

    Cost: :func:`count_row` per row.
    """
    results = {}
    for name in subjects:
        results[name] = InstructionResult(
            subject=name,
            reference=SUBJECTS[name].reference,
            counted=ROWS[name].counted,
            items=items,
            warmup=warmup,
            instructions_per_item=count_row(name, items, warmup),
        )
        print(f"  done: instructions, {name}", file=sys.stderr)
    for result in results.values():
        reference = results.get(result.reference)
        if reference is not None and reference.instructions_per_item > 0:
            result.vs_recipe = result.instructions_per_item / reference.instructions_per_item
    return list(results.values())


def print_instructions(results: list[InstructionResult], describe: str) -> None:
    """A table of ``results`` under ``describe``."""
    print(describe)
    header = (
        f"{'subject':<23}{'instructions/item':>19}{'vs recipe':>11}  {'against':<23}calls counted"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        ratio = "n/a" if r.vs_recipe is None else f"{r.vs_recipe:.2f}"
        print(
            f"{r.subject:<23}{r.instructions_per_item:>19.1f}{ratio:>11}  {r.reference:<23}"
            f"{r.counted}"
        )
