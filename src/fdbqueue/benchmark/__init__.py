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

Right before the modes of each phase and C runs the side-by-side ideal, the row ``private``
(:mod:`~fdbqueue.benchmark.ideal`): C consumers each taking with plain dequeues from a queue
of its own (drain: the N items spread evenly over the C queues; steady: the producers'
batches to the C queues in turn), what a perfectly partitioned queue reaches on this machine
under the same latency model and threads.

Columns, per phase, mode and C (consumer threads only; producers and loaders are counted
apart):

* ``items/s``: items taken / seconds from the first to the N-th measured item.
* ``ratio``: items/s against the mode's baseline (``plain`` for the queue's modes, ``claims``
  for claims, ``priority-plain`` and ``priority-claims`` for priority queues) at the same C in
  the same run.
* ``ideal/s``: the ``private`` run's items/s at the same phase and C.
* ``of ideal``: items/s / ``ideal/s`` (1.0: as fast as C private queues).
* ``p50 ms`` / ``p99 ms``: latency of one take (a ``dequeue``/``pop_min`` call, or a ``claim``
  and its ``ack``) that returned an item; ``p99/p50`` their quotient.
* ``confl/item``: consumer commits that failed with 1020 (not committed), per item.
* ``tx/item``: transactions created by consumers, per item (a retry through ``on_error``
  reuses its transaction, so retries show in ``confl/item`` and ``tx-times/item``, not here).
* ``tx-times/item``: the database time the consumers spent per item, in units of one plain
  transaction: (read versions x grv + reads x read + commit attempts x commit) / (grv + read +
  commit), from the in-memory database's counters (``db.stats()``) split by thread role;
  commit attempts are the commits that wrote plus those that conflicted (both pay the commit
  latency). It does not depend on this machine's CPU. ``n/a`` on a real cluster.
* ``keys/item``: key-value pairs the consumers' reads returned per item (the in-memory
  database's ``keys_read`` counter, split by role as the others). ``n/a`` on a real cluster.
* ``overtaken``: the most items taken before one item that were enqueued after it (values
  are enqueued in increasing order by each loader or producer, several at once, so even
  one unsharded queue shows a little): how far from FIFO the run's order was.
* ``cpu ms/item``: this process's CPU time (all threads, the in-memory database's included)
  per item over the measured window. Every thread of the process shares one interpreter lock,
  so when ``items/s`` x ``cpu ms/item`` nears 1,000 the run is bound by this machine's CPU,
  not by the design.
* ``cpu vs ideal``: ``cpu ms/item`` / the ``private`` run's ``cpu ms/item`` at the same C.
* ``cpu s/s``: that product over 1,000, the CPU seconds this process used per second of the
  measured window (one interpreter lock: about 1.0 at most for Python code; below it, the
  threads spent the rest of the time waiting on latencies or conflicts).
* ``enq confl``: producers' and loaders' conflicts (always 0: enqueues never conflict).
* ``hot range`` (steady, with ``--hot-ranges``): the key of every mutation under the run's
  subspace committed during the measured window (every role's) is recorded, the distinct
  keys are cut into 16 ranges of equal key count, as a cluster cuts shards, and the largest
  range's share of all the mutations is shown (an even spread: 1/16 = 0.06;
  :mod:`~fdbqueue.benchmark.hot_ranges` says what is recorded). Recording wraps every
  transaction, so it slows the run a little: compare figures with it on to each other.
* ``empty`` (steady only): consumer takes that found the queue empty during the measured
  window; 0 shows the producers kept ahead.
* ``once``: every item enqueued was delivered exactly once (taken, or in steady, still queued
  at the end), nothing lost, nothing twice.
* ``load`` (only with ``--loads``): how the drain's items were preloaded, one of the load
  shapes of :mod:`~fdbqueue.benchmark.loading` (``batches-10``, what the drain does without
  the option, ``batches-1000``, ``single``, ``one-shard``); the drain runs once per shape, and
  ``ratio`` and the ideal compare rows of the same shape. Steady rows show ``n/a``.

``--fairness`` (:mod:`~fdbqueue.benchmark.fairness`) and ``--cpu``
(:mod:`~fdbqueue.benchmark.cpu`: the library's CPU and keys per item, for enqueue + dequeue,
in a caller's transaction, claim + ack and the worker loop, against FoundationDB's "Queues"
recipe, :mod:`~fdbqueue.benchmark.recipe`; then :mod:`~fdbqueue.benchmark.instructions`: the
bytecode instructions per item of the same kinds of calls, counted) and ``--processes``
(:mod:`~fdbqueue.benchmark.processes`: P worker processes against one in-memory server the
benchmark starts, beside the same work in one process, and the server's CPU per commit)
measure something else instead of the phases.

A mode is one :class:`Mode` entry in :data:`MODES`; a mode the queue does not support (the
probe take raises AttributeError, NotImplementedError, TypeError or ValueError) is skipped with
a note.

The parts: :mod:`~fdbqueue.benchmark.workload` (the modes), :mod:`~fdbqueue.benchmark.hot_ranges`
(the hot-range figure), :mod:`~fdbqueue.benchmark.counting` (counting per thread role),
:mod:`~fdbqueue.benchmark.loading` (the preload and its load shapes),
:mod:`~fdbqueue.benchmark.measurement` (one measured run), :mod:`~fdbqueue.benchmark.ideal`
(the private runs and the columns set against them), :mod:`~fdbqueue.benchmark.report` and
:mod:`~fdbqueue.benchmark.plot` (what is printed and drawn), :mod:`~fdbqueue.benchmark.cpu`
and :mod:`~fdbqueue.benchmark.instructions` (``--cpu``), :mod:`~fdbqueue.benchmark.processes`
(``--processes``), :mod:`~fdbqueue.benchmark.arguments` (the options); this module runs them all
(:func:`run_all`). The library never imports the benchmark.

Run: ``fdbqueue bench`` or ``python examples/contention_benchmark.py`` (in-memory database with
``Latency(grv=0.001, read=0.0005, commit=0.003)``), ``--plot throughput.png`` for a chart
(needs matplotlib: ``pip install -e '.[bench]'``), ``--cluster-file PATH`` for a real cluster.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from fdbqueue import memory
from fdbqueue._wording import plural
from fdbqueue.benchmark import instructions, workload
from fdbqueue.benchmark.arguments import add_arguments, check_arguments
from fdbqueue.benchmark.cpu import SUBJECTS, measure_cpu, print_cpu, with_references
from fdbqueue.benchmark.fairness import FAIRNESS_MODES, measure_fairness, print_fairness
from fdbqueue.benchmark.ideal import PRIVATE, compare_with_ideal
from fdbqueue.benchmark.instructions import count_instructions, print_instructions
from fdbqueue.benchmark.measurement import Result, run, unsupported
from fdbqueue.benchmark.plot import load_pyplot, plot
from fdbqueue.benchmark.processes import (
    PLACES,
    cores_here,
    measure_processes,
    print_processes,
)
from fdbqueue.benchmark.report import (
    add_ratios,
    check,
    json_ready,
    median_run,
    print_ratios,
    print_tables,
)
from fdbqueue.benchmark.workload import MODES, PHASES, Mode, calls, session
from fdbqueue.errors import BenchmarkError

__all__ = [
    "MODES",
    "PHASES",
    "BenchmarkError",
    "Mode",
    "Result",
    "add_arguments",
    "calls",
    "check",
    "check_arguments",
    "print_ratios",
    "print_tables",
    "run",
    "run_all",
    "run_cpu",
    "run_fairness",
    "run_processes",
    "session",
]

# -- running everything and printing ----------------------------------------------------------


def run_fairness(arguments: argparse.Namespace, open_db: Callable[[], Any], as_json: bool) -> None:
    """The ``--fairness`` runs (:mod:`~fdbqueue.benchmark.fairness`): every consumer count, each
    mode, a fresh database each; print them.

    Raises:
        BenchmarkError: an item was taken twice.
    """
    results = []
    for consumers in arguments.consumers:
        for mode in FAIRNESS_MODES:
            results.append(
                measure_fairness(
                    open_db(),
                    mode,
                    consumers,
                    noisy_items=arguments.noisy_items,
                    quiet_groups=arguments.quiet_groups,
                    quiet_items=arguments.quiet_items,
                )
            )
            print(f"  done: fairness, {mode}, {plural(consumers, 'consumer')}", file=sys.stderr)
    print_fairness(results, as_json)
    if not all(result.exactly_once for result in results):
        raise BenchmarkError("an item was taken twice")


def run_cpu(arguments: argparse.Namespace, open_db: Callable[[], Any], as_json: bool) -> None:
    """The ``--cpu`` measurement (:mod:`~fdbqueue.benchmark.cpu`), then the instruction
    counts of the same subjects (:mod:`~fdbqueue.benchmark.instructions`, each on an
    in-memory database of its own); print them: two tables, or one JSON document
    (``settings``, ``cpu`` and ``instructions``, the results).

    Raises:
        BenchmarkError: ``open_db`` gives another database than the in-memory one (what is
            the database's and what the library's is told apart by file), or a subject did
            not get its values back in order.
    """
    if not isinstance(open_db(), memory.Database):
        raise BenchmarkError("--cpu measures on the in-memory database: run it with --memory")
    items, runs = arguments.cpu_items, arguments.cpu_runs
    counted = getattr(arguments, "cpu_counted_items", instructions.ITEMS)
    warmup = instructions.WARMUP
    subjects = with_references(getattr(arguments, "cpu_subjects", None) or list(SUBJECTS))
    describe = (
        f"CPU and keys per item: {plural(items, 'item')} per pass, one call at a time by one "
        f"thread (codec raw), a fresh in-memory database without latency per pass; median of "
        f"{plural(runs, 'run')}\n"
        "own: the library's code (fdbqueue: src/fdbqueue/ but memory/ and benchmark/; the "
        "recipe: benchmark/recipe.py); client: own + the fdb binding (all but the in-memory "
        "database); db: the in-memory database and the fdb binding; against: the recipe row "
        "of the ratios (claim-ack and work: the recipe's enqueue + dequeue, it has no leases)"
    )
    settings = {
        "database": "a fresh in-memory database per pass, without latency",
        "items": items,
        "runs": runs,
        "subjects": subjects,
        "counted_items": counted,
        "counted_warmup": warmup,
    }
    results = measure_cpu(open_db, items, runs, subjects)
    counts = count_instructions(subjects, counted, warmup)
    if as_json:
        document = {
            "settings": settings,
            "cpu": [asdict(result) for result in results],
            "instructions": [asdict(result) for result in counts],
        }
        print(json.dumps(document, indent=1))
    else:
        print_cpu(results, describe)
        print()
        print_instructions(
            counts,
            f"Bytecode instructions per item, counted (sys.settrace): "
            f"{plural(counted, 'item')} after {warmup} uncounted, one call at a "
            f"time (codec raw), a fresh in-memory database per subject (seed "
            f"{instructions.SEED})\n"
            "every frame outside src/fdbqueue/memory/ but the benchmark's loops: fdbqueue, the "
            "fdb binding (its tuple layer), the recipe; the standard library charged to its "
            "caller; work: per job, marginal (the loop's start and end excluded)",
        )
    if not all(result.in_order for result in results):
        raise BenchmarkError("a subject did not get its values back in order")


def run_processes(
    arguments: argparse.Namespace,
    open_db: Callable[[], Any],
    latency: memory.Latency,
    as_json: bool,
) -> None:
    """The ``--processes`` runs (:mod:`~fdbqueue.benchmark.processes`): for each process
    count, the work in one process, then P processes against the benchmark's own server;
    print them (one table and what they say of the server, or one JSON document).

    Args:
        arguments: the options :func:`add_arguments` defines.
        open_db: the database the command was given: it must be an in-memory one (the runs
            use databases of their own, a server the benchmark starts).
        latency: the latency model of every run's database (the server's).
        as_json: print one JSON document instead of the table.

    Raises:
        BenchmarkError: ``open_db`` gives a real cluster's database, a child process failed,
            ended or stalled, or an item was not taken exactly once.
    """
    if not isinstance(open_db(), memory.Database):
        raise BenchmarkError(
            "--processes measures an in-memory server it starts itself: run it with --memory"
        )
    counts: list[int] = arguments.processes
    consumers, items = arguments.process_consumers, arguments.process_items
    mode, servers = arguments.process_mode, arguments.process_server
    settings = {
        "database": "one fdbqueue.memory server the benchmark starts (memory.serve), against "
        "memory.open() in one process",
        "latency": {"grv": latency.grv, "read": latency.read, "commit": latency.commit},
        "processes": counts,
        "consumers_per_process": consumers,
        "items": items,
        "mode": mode,
        "servers": servers,
        "work_ms": arguments.process_work,
        "cores": cores_here(),
    }
    if not as_json:
        print(
            f"{plural(items, 'item')} per run, each an enqueue and a take ({mode}) on one "
            f"shared queue, by P processes x {plural(consumers, 'consumer thread')} against "
            f"one in-memory server ({'; then '.join(PLACES[where] for where in servers)}), beside "
            f"the P x {consumers} threads in one process against memory.open(); latency "
            f"grv={latency.grv}s read={latency.read}s commit={latency.commit}s; "
            + (
                f"{arguments.process_work:g} ms of CPU per item after its take; "
                if arguments.process_work
                else ""
            )
            + f"{plural(cores_here(), 'core')} here"
        )
    runs = measure_processes(
        counts,
        consumers,
        items,
        mode,
        latency,
        servers,
        work=arguments.process_work / 1000,
        progress=lambda line: print(line, file=sys.stderr),
    )
    print_processes(runs, settings, as_json)
    if not all(run.exactly_once for run in runs):
        raise BenchmarkError("an item was lost or taken twice")


def run_all(
    arguments: argparse.Namespace,
    open_db: Callable[[memory.Latency], Any],
    where: str,
    as_json: bool = False,
) -> list[Result]:
    """Run every selected phase, consumer count and mode (for each consumer count the private
    run, :data:`~fdbqueue.benchmark.ideal.PRIVATE`, then the modes, back to back); print the
    tables and the ratios, or one JSON document with ``as_json``.

    Args:
        arguments: the options :func:`add_arguments` defines.
        open_db: returns a database for one run, given the latency model (a real cluster
            ignores it).
        where: a description of the database, for the header and the plot's title.
        as_json: print one JSON document instead of tables.

    Returns:
        The results, one per phase, mode and consumer count, the private runs (mode
        ``private``) among them, each before the modes of its phase and C.

    Raises:
        BenchmarkError: a bad option, or ``--plot`` without matplotlib.
    """
    check_arguments(arguments)
    latency = memory.Latency(grv=arguments.grv, read=arguments.read, commit=arguments.commit)
    if getattr(arguments, "cpu", False):
        run_cpu(arguments, lambda: open_db(memory.Latency()), as_json)
        return []
    if getattr(arguments, "fairness", False):
        run_fairness(arguments, lambda: open_db(latency), as_json)
        return []
    if getattr(arguments, "processes", None) is not None:
        run_processes(arguments, lambda: open_db(latency), latency, as_json)
        return []
    if arguments.plot:
        load_pyplot()  # fail before running, not after
    warmup = arguments.items // 4 if arguments.warmup is None else arguments.warmup
    repeat_count = getattr(arguments, "repeat", 1)
    hot_ranges = bool(getattr(arguments, "hot_ranges", False))
    loads: list[str] | None = getattr(arguments, "loads", None)
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
        "hot_ranges": hot_ranges,
    }
    if loads is not None:
        settings["loads"] = loads
    describe = (
        f"{where}; latency grv={latency.grv}s read={latency.read}s commit={latency.commit}s; "
        f"{plural(arguments.items, 'item')} measured per run; "
        f"{plural(arguments.producers, 'producer')}/loaders; "
        f"steady warm-up {plural(warmup, 'item')}"
        + (f"; median of {repeat_count} runs" if repeat_count > 1 else "")
        + (f"; drain preloaded as {', '.join(loads)}" if loads is not None else "")
    )
    if not as_json:
        print(describe)
    modes = {mode.name: mode for mode in workload.MODES if mode.name in arguments.modes}
    skipped = {}
    for name, mode in list(modes.items()):
        reason = unsupported(mode, lambda: open_db(latency))
        if reason is not None:
            skipped[name] = reason
            del modes[name]
            print(f"  skipped: {name} ({reason})", file=sys.stderr)
    results: list[Result] = []
    for phase in arguments.phases:
        shapes: list[str | None] = [None] if loads is None or phase != "drain" else [*loads]
        for consumers in arguments.consumers:
            for shape in shapes:
                results.extend(
                    _run_modes(
                        arguments,
                        phase,
                        consumers,
                        shape,
                        [PRIVATE, *modes.values()],
                        lambda: open_db(latency),
                        latency,
                        warmup,
                        hot_ranges,
                    )
                )
    compare_with_ideal(results)
    add_ratios(results)
    if as_json:
        rows = [
            {**asdict(result), "cpu_seconds_per_second": result.cpu_seconds_per_second}
            for result in results
        ]
        if loads is None:  # the document of a run without --loads is as it was
            for row in rows:
                del row["load"]
        document = {
            "settings": settings,
            "skipped": skipped,
            "results": [json_ready(row) for row in rows],
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


def _run_modes(
    arguments: argparse.Namespace,
    phase: str,
    consumers: int,
    shape: str | None,
    modes: list[Mode],
    open_db: Callable[[], Any],
    latency: memory.Latency,
    warmup: int,
    hot_ranges: bool,
) -> list[Result]:
    """``modes`` (the private run first) at one phase, consumer count and load shape: every
    one once, then again for each ``--repeat`` (alike conditions); the median run of each."""
    repeat_count = getattr(arguments, "repeat", 1)
    runs: dict[str, list[Result]] = {mode.name: [] for mode in modes}
    for repetition in range(repeat_count):
        for mode in modes:
            runs[mode.name].append(
                run(
                    mode,
                    phase,
                    consumers,
                    items=arguments.items,
                    producers=arguments.producers,
                    warmup=warmup,
                    latency=latency,
                    open_db=open_db,
                    private=mode is PRIVATE,
                    hot_ranges=hot_ranges,
                    load_shape=shape,
                )
            )
            of = f" (run {repetition + 1} of {repeat_count})" if repeat_count > 1 else ""
            loaded = f", {shape}" if shape is not None else ""
            print(
                f"  done: {phase}, {mode.name}, {plural(consumers, 'consumer')}{loaded}{of}",
                file=sys.stderr,
            )
    return [median_run(chosen) for chosen in runs.values()]
