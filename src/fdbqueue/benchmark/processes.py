"""Several processes, one in-memory server: ``fdbqueue bench --processes``.

For each process count P (``--processes``: 1, 2 and 4 by default), two runs back to back
of the same work: ``--process-items`` N items (600), each one enqueue and one take (a
``dequeue``, or a ``claim`` and its ``ack``: ``--process-mode``, a stateless mode of
:data:`~fdbqueue.benchmark.workload.MODES`, ``sharded`` by default) on one shared queue, by
P x C threads in all (C: ``--process-consumers``, 4). Each thread enqueues an item, takes
one (any thread's), and again, N / (P x C) times; with ``--process-work MS`` it then spends
MS milliseconds of CPU in Python per item, as a handler would.

``one process``
    one child process running all P x C threads against an in-process database of its own
    (:func:`fdbqueue.memory.open`): what one interpreter does with the whole work;
``server (process)``, ``server (thread)``
    P child processes of C threads each, every one connected
    (:func:`fdbqueue.memory.connect`) to ONE server the benchmark started before its first
    run (:func:`fdbqueue.memory.serve`; each run in a fresh subspace, cleared afterwards):
    in a child process of its own (``--process-server process``, the default: what
    ``fdbqueue memory serve`` users run), in a thread of the benchmark's own process
    (``thread``), or each (``both``: two servers, a run against each).

Every child is started with ``multiprocessing``'s ``spawn`` method (a fresh interpreter: no
inherited threads or locks) and makes one enqueue and one take before the run, not measured
(imports, the connection, the queue's records); the threads of every child start once all
children are ready. Every run uses the latency model of ``--grv``, ``--read`` and
``--commit`` (a server's, for its clients). Every child is stopped when the benchmark ends,
fails or is interrupted (asked to end, killed after :data:`STOP_SECONDS`, and reaped):
children ignore SIGINT, and a terminal's Ctrl-C, or SIGTERM, stops the benchmark, which
stops them. A benchmark killed outright (SIGKILL) cannot: then a child waiting for its start
or the server ends when the benchmark's end of its pipe closes, and a running child once it
made its items.

Columns, per run:

* ``items/s``: N / the seconds from the first process's start to the last one's end.
* ``vs one``: items/s over the ``one process`` run's at the same P.
* ``client cpu ms/item``, ``client cpu s/s``: the CPU time of the run's processes (not the
  server's) per item, and in seconds per second of the run; ``one process``: its
  interpreter's, its database's work included.
* ``server cpu s/s``: the server process's CPU seconds per second of the run (``thread``:
  the benchmark's own process, the server's threads and its waiting main thread). One
  Python process uses about one core at most: near 1.0, the server is the bound.
* ``server ms/commit``: the server's CPU milliseconds per committed transaction (the
  ``commits`` statistic: transactions that wrote), its cost per transaction; 1,000 over it
  is the most commits a second one core of it serves, the ceiling of the design.
* ``machine busy``: the share of the machine's cores busy during the run, every program's
  work counted (Linux's ``/proc/stat``; ``n/a`` elsewhere): near 1.0, the machine is the
  bound.
* ``commits/item``, ``confl/item``: committed and conflicted (1020) transactions per item.
* ``once``: every item enqueued was taken exactly once.

:func:`bound` says, below the table, what bounds the runs. Cost: a child's start-up (an
interpreter and fdbqueue's imports, about 0.3 s) per process per run; each server's once.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from fdbqueue import Subspace, memory
from fdbqueue._transactions.transactional import run_in_retry_loop
from fdbqueue._wording import plural
from fdbqueue.benchmark.workload import MODES, STALL_SECONDS, WAIT_SECONDS, Mode
from fdbqueue.errors import BenchmarkError

__all__ = [
    "DEFAULT_CONSUMERS",
    "DEFAULT_ITEMS",
    "DEFAULT_MODE",
    "DEFAULT_PROCESSES",
    "MAX_PROCESSES",
    "PLACES",
    "PROCESS_MODES",
    "SERVERS",
    "ProcessRun",
    "bound",
    "cores_here",
    "measure_processes",
    "print_processes",
]

#: The process counts ``--processes`` runs when given no list.
DEFAULT_PROCESSES = (1, 2, 4)
#: Consumer threads per process, items per run and the mode, unless said otherwise.
DEFAULT_CONSUMERS = 4
DEFAULT_ITEMS = 600
DEFAULT_MODE = "sharded"
#: The most processes one run may start.
MAX_PROCESSES = 64
#: The modes of :data:`~fdbqueue.benchmark.workload.MODES` a process may run: those whose
#: takes keep nothing between calls (a session's prefetched item would outlive its thread).
PROCESS_MODES = (
    "plain",
    "high-contention",
    "claims",
    "claims-high-contention",
    "sharded",
    "sharded-high-contention",
    "sharded-claims",
    "plain-no-receipts",
)
#: Where the server runs: a child process of its own, or a thread of the benchmark's process.
SERVERS = ("process", "thread")
PLACES = {"process": "in a child process of its own", "thread": "in a thread of this process"}
#: Seconds a child has to start and make its warm-up items.
START_SECONDS = 120.0
#: Seconds a child is given to end after it was asked to, before it is killed.
STOP_SECONDS = 5.0
#: A process using at least this many CPU seconds a second, or a machine this busy, is
#: called the bound.
BOUND_CPU = 0.85
ONE_PROCESS = "one process"


@dataclass(frozen=True)
class _Plan:
    """What one child runs (pickled to it): ``address`` None for an in-process database."""

    address: str | None
    latency: tuple[float, float, float]
    prefix: bytes
    mode: str
    values: tuple[tuple[int, ...], ...]  # one tuple per thread
    warmup_value: int
    work: float  # CPU seconds of pure-Python work per item, after its take


@dataclass
class ProcessRun:
    """One run's figures (the columns of the module docstring). Times in seconds, CPU in
    seconds per second of the run, ``server_ms_per_commit`` in milliseconds."""

    setup: str
    processes: int
    consumers: int
    threads: int
    items: int
    seconds: float
    items_per_second: float
    client_cpu_per_second: float
    client_cpu_ms_per_item: float
    server_cpu_per_second: float | None
    server_ms_per_commit: float | None
    commits_per_item: float
    conflicts_per_item: float
    exactly_once: bool
    machine_busy: float | None = None
    vs_one_process: float | None = None
    notes: list[str] = field(default_factory=list)


# -- the children ---------------------------------------------------------------------------


def _quiet_child() -> None:
    """A child ignores SIGINT (a terminal's Ctrl-C reaches the whole process group): the
    benchmark stops it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _serve(pipe: multiprocessing.connection.Connection, latency: tuple[float, ...]) -> None:
    """The server child: serve an in-memory database on a free loopback port, send its
    address, then answer ``"cpu"`` with this process's CPU seconds until ``"stop"`` or the
    benchmark's end of the pipe closes."""
    _quiet_child()
    with memory.serve(port=0, latency=memory.Latency(*latency)) as server:
        server.start()
        pipe.send(server.address)
        with contextlib.suppress(EOFError, OSError):
            while (request := pipe.recv()) != "stop":
                if request == "cpu":
                    pipe.send(time.process_time())


def _client(pipe: multiprocessing.connection.Connection, plan: _Plan) -> None:
    """A worker child: one enqueue and one take, then ``"ready"``; at ``"go"``, its threads
    make their items; then its figures (``"done"``) or its failure (``"failed"``)."""
    _quiet_child()
    try:
        latency = memory.Latency(*plan.latency)
        db = memory.open(latency=latency) if plan.address is None else memory.connect(plan.address)
        mode = {m.name: m for m in MODES}[plan.mode]
        queue = mode.make(Subspace(rawPrefix=plan.prefix))
        warm = _pairs(mode, queue, db, (plan.warmup_value,), threading.Event(), 0.0)
        pipe.send(("ready",))
        if pipe.recv() != "go":
            return
        before = db.stats() if plan.address is None else {}
        stalled = threading.Event()
        outcomes: list[list[int] | BaseException] = [[] for _ in plan.values]

        def consume(index: int) -> None:
            try:
                outcomes[index] = _pairs(mode, queue, db, plan.values[index], stalled, plan.work)
            except BaseException as error:
                stalled.set()
                outcomes[index] = error

        threads = [
            threading.Thread(target=consume, args=(n,), daemon=True)
            for n in range(len(plan.values))
        ]
        started, cpu = time.monotonic(), time.process_time()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        ended, cpu = time.monotonic(), time.process_time() - cpu
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        if errors:
            error = errors[0]
            pipe.send(("failed", f"a consumer failed: {type(error).__name__}: {error}"))
            return
        counts = {}
        if plan.address is None:
            after = db.stats()
            counts = {name: after[name] - before[name] for name in ("commits", "conflicts")}
        taken = [value for outcome in outcomes if isinstance(outcome, list) for value in outcome]
        pipe.send(("done", started, ended, cpu, warm + taken, counts))
    except Exception as error:
        with contextlib.suppress(OSError):
            pipe.send(("failed", f"{type(error).__name__}: {error}"))


def _pairs(
    mode: Mode, queue: Any, db: Any, values: tuple[int, ...], stop: threading.Event, work: float
) -> list[int]:
    """Enqueue each of ``values`` and take one item after each, then spend ``work`` seconds
    of this thread's CPU in a Python loop (a handler's share; it holds the interpreter lock
    as a handler's Python code would): the values taken.

    Raises:
        TimeoutError: no item came for :data:`~fdbqueue.benchmark.workload.STALL_SECONDS`,
            or ``stop`` was set (another thread failed).
    """
    taken = []
    with mode.consumer(queue, db) as take:
        for value in values:
            if stop.is_set():
                raise TimeoutError("another thread failed")
            mode.put(queue, db, [value])
            got = take(None)
            waited_since = time.monotonic()
            while got is None:  # others took the items meanwhile: more are on their way
                if stop.is_set() or time.monotonic() - waited_since > STALL_SECONDS:
                    raise TimeoutError(f"no item for {STALL_SECONDS:.0f} s")
                got = take(WAIT_SECONDS)
            taken.append(got)
            if work:
                _busy(work)
    return taken


def _busy(seconds: float) -> None:
    """Run Python code for ``seconds`` of this thread's CPU time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


# -- the benchmark's side -------------------------------------------------------------------


def _stop(process: Any) -> None:
    """End ``process`` (asked, then killed) and reap it; nothing is left running."""
    if process.is_alive():
        process.terminate()
        process.join(STOP_SECONDS)
    if process.is_alive():
        process.kill()
    process.join(STOP_SECONDS)


class _Server:
    """The one server of a benchmark: in a child process or a thread; its CPU seconds."""

    def __init__(self, where: str, latency: memory.Latency, context: Any) -> None:
        self.where, self._latency, self._context = where, latency, context
        self._process: Any = None
        self._pipe: Any = None
        self._thread_server: Any = None
        self.address = ""

    def start(self) -> None:
        """Start serving; :attr:`address` is the server's.

        Raises:
            BenchmarkError: the server process ended, or did not start within
                :data:`START_SECONDS`.
        """
        latency = self._latency
        if self.where == "thread":
            self._thread_server = memory.serve(port=0, latency=latency).start()
            self.address = self._thread_server.address
            return
        fields = (latency.grv, latency.read, latency.commit)
        self._pipe, child_end = self._context.Pipe()
        self._process = self._context.Process(
            target=_serve, args=(child_end, fields), name="fdbqueue-bench-server", daemon=True
        )
        self._process.start()
        child_end.close()
        self.address = self._answer(
            f"the server process did not start within {START_SECONDS:.0f} s"
        )

    def cpu(self) -> float:
        """The server's process's CPU seconds so far (``thread``: this process's)."""
        if self._pipe is None:
            return time.process_time()
        self._pipe.send("cpu")
        cpu: float = self._answer("the server process stopped answering")
        return cpu

    def _answer(self, silent: str) -> Any:
        """The server child's next message.

        Raises:
            BenchmarkError: it ended, or said nothing for :data:`START_SECONDS` (``silent``).
        """
        try:
            if self._pipe.poll(START_SECONDS):
                return self._pipe.recv()
        except (EOFError, OSError):
            self._process.join(STOP_SECONDS)
            code = self._process.exitcode
            raise BenchmarkError(f"the server process ended (exit code {code})") from None
        raise BenchmarkError(silent)

    def close(self) -> None:
        """Stop the server (its process: asked, then ended); idempotent."""
        if self._thread_server is not None:
            self._thread_server.close()
        if self._process is not None:
            with contextlib.suppress(OSError):
                self._pipe.send("stop")
            self._process.join(STOP_SECONDS)
            _stop(self._process)
            self._pipe.close()


@contextlib.contextmanager
def _server(where: str, latency: memory.Latency, context: Any) -> Iterator[_Server]:
    server = _Server(where, latency, context)
    try:
        server.start()
        yield server
    finally:
        server.close()


def _shares(items: int, threads: int, first: int) -> list[tuple[int, ...]]:
    """``items`` values from ``first``, dealt to ``threads`` threads as evenly as can be."""
    return [tuple(range(first + n, first + items, threads)) for n in range(threads)]


def _run(
    context: Any,
    setup: str,
    mode: str,
    processes: int,
    consumers: int,
    items: int,
    latency: memory.Latency,
    server: _Server | None,
    work: float,
) -> ProcessRun:
    """One run: ``processes`` children of ``consumers`` threads, against ``server`` (None:
    one child of every thread against an in-process database)."""
    threads = processes * consumers
    children = 1 if server is None else processes
    per_child = threads // children
    shares = _shares(items, threads, 0)
    prefix = Subspace(("fdbqueue-benchmark", uuid.uuid4().hex)).key()
    fields = (latency.grv, latency.read, latency.commit)
    plans = [
        _Plan(
            None if server is None else server.address,
            fields,
            prefix,
            mode,
            tuple(shares[n * per_child : (n + 1) * per_child]),
            items + n,
            work,
        )
        for n in range(children)
    ]
    watcher = None if server is None else memory.connect(server.address)
    started: list[tuple[Any, Any]] = []
    try:
        for number, plan in enumerate(plans):
            pipe, child_end = context.Pipe()
            process = context.Process(
                target=_client,
                args=(child_end, plan),
                name=f"fdbqueue-bench-client-{number}",
                daemon=True,
            )
            started.append((process, pipe))
            process.start()
            child_end.close()
        answers = _gather(started, "ready", START_SECONDS)
        _raise_failure(answers, setup, processes)
        stats_before = watcher.stats() if watcher is not None else {}
        cpu_before = server.cpu() if server is not None else 0.0
        machine_before = machine_times()
        for _process, pipe in started:
            pipe.send("go")
        answers = _gather(started, "done", START_SECONDS + STALL_SECONDS)
        machine_after = machine_times()
        for process, _pipe in started:  # each ends once it said "done"
            process.join(STOP_SECONDS)
        cpu_after = server.cpu() if server is not None else 0.0
        stats_after = watcher.stats() if watcher is not None else {}
    finally:
        for process, pipe in started:
            _stop(process)
            pipe.close()
        if watcher is not None:
            with contextlib.suppress(Exception):
                run_in_retry_loop(watcher, lambda tr: tr.clear_range_startswith(prefix))
    _raise_failure(answers, setup, processes)
    seconds = max(a[2] for a in answers) - min(a[1] for a in answers)
    taken = Counter(value for answer in answers for value in answer[4])
    expected = Counter(range(items + children))
    if server is None:
        counts = answers[0][5]
    else:
        counts = {name: stats_after[name] - stats_before[name] for name in ("commits", "conflicts")}
    server_cpu = None if server is None else cpu_after - cpu_before
    client_cpu = sum(a[3] for a in answers)
    notes = [] if taken == expected else [_difference(taken, expected)]
    return ProcessRun(
        setup=setup,
        processes=processes,
        consumers=consumers,
        threads=threads,
        items=items,
        seconds=seconds,
        items_per_second=items / seconds if seconds > 0 else float("inf"),
        client_cpu_per_second=client_cpu / seconds if seconds > 0 else 0.0,
        client_cpu_ms_per_item=1000 * client_cpu / items,
        server_cpu_per_second=None if server_cpu is None else server_cpu / seconds,
        server_ms_per_commit=(
            None
            if server_cpu is None or not counts["commits"]
            else 1000 * server_cpu / counts["commits"]
        ),
        commits_per_item=counts["commits"] / items,
        conflicts_per_item=counts["conflicts"] / items,
        exactly_once=taken == expected,
        machine_busy=_busy_share(machine_before, machine_after),
        notes=notes,
    )


def _raise_failure(answers: list[tuple[Any, ...]], setup: str, processes: int) -> None:
    """Raise the first failure a child told.

    Raises:
        BenchmarkError: a child said ``"failed"`` (with its reason).
    """
    failures = [answer[1] for answer in answers if answer[0] == "failed"]
    if failures:
        raise BenchmarkError(f"{setup}, {_processes(processes)}: {failures[0]}")


def _difference(taken: Counter[int], expected: Counter[int]) -> str:
    missing = len(expected - taken)
    twice = sum(1 for count in taken.values() if count > 1)
    return f"{plural(missing, 'item')} not taken, {plural(twice, 'item')} taken twice"


def _gather(started: list[tuple[Any, Any]], what: str, seconds: float) -> list[tuple[Any, ...]]:
    """The next message of every child: ``what`` or ``"failed"``.

    Raises:
        BenchmarkError: a child ended without a word, or none spoke for ``seconds``.
    """
    answers: dict[int, tuple[Any, ...]] = {}
    pipes = {id(pipe): (n, pipe) for n, (_process, pipe) in enumerate(started)}
    sentinels = {process.sentinel: n for n, (process, _pipe) in enumerate(started)}
    while len(answers) < len(started):
        waiting = [pipe for n, pipe in pipes.values() if n not in answers]
        ended = [s for s, n in sentinels.items() if n not in answers]
        ready = multiprocessing.connection.wait([*waiting, *ended], seconds)
        if not ready:
            raise BenchmarkError(f"a child process did not say {what!r} within {seconds:.0f} s")
        for item in ready:
            if isinstance(item, int):  # a sentinel: the child ended; read what it said
                n = sentinels[item]
                pipe = started[n][1]
                if n not in answers and not pipe.poll():
                    code = started[n][0].exitcode
                    raise BenchmarkError(f"a child process ended (exit code {code})")
                continue
            n, pipe = pipes[id(item)]
            try:
                message = pipe.recv()
            except EOFError:
                raise BenchmarkError("a child process ended without a word") from None
            if message[0] not in (what, "failed"):
                raise BenchmarkError(f"a child process said {message[0]!r}, not {what!r}")
            answers[n] = message
    return [answers[n] for n in range(len(started))]


@contextlib.contextmanager
def _terminated_as_interrupted() -> Iterator[None]:
    """Meanwhile, SIGTERM raises KeyboardInterrupt in the main thread (as Ctrl-C does), so
    that the benchmark stops its children before it ends; elsewhere than in the main thread,
    nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupted(_signal: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def measure_processes(
    process_counts: list[int],
    consumers: int,
    items: int,
    mode: str,
    latency: memory.Latency,
    servers: list[str],
    work: float = 0.0,
    progress: Callable[[str], None] = lambda line: None,
) -> list[ProcessRun]:
    """For each of ``process_counts``: the ``one process`` run, then a run against each of
    ``servers`` (the module docstring says what each does); each server is started once,
    before its first run, and stopped at the end.

    Args:
        process_counts: the process counts P (each 1 to :data:`MAX_PROCESSES`).
        consumers: consumer threads per process C.
        items: items per run N, each an enqueue and a take.
        mode: a name of :data:`PROCESS_MODES`.
        latency: the latency model of every database (the server's).
        servers: names of :data:`SERVERS`.
        work: seconds of CPU a thread spends in Python after each take (>= 0).
        progress: called with a line after each run.

    Returns:
        The runs, in order: per P, ``one process`` then each server's (``vs_one_process``
        set).

    Raises:
        BenchmarkError: a child process failed, ended or stalled, or the server did not start.
        ValueError: ``mode`` is not in :data:`PROCESS_MODES`, or ``servers`` names another.
    """
    if mode not in PROCESS_MODES or not servers or not set(servers) <= set(SERVERS):
        raise ValueError(f"mode must be one of {PROCESS_MODES}, servers among {SERVERS}")
    context = multiprocessing.get_context("spawn")
    runs: list[ProcessRun] = []
    with _terminated_as_interrupted(), contextlib.ExitStack() as stack:
        started = {
            where: stack.enter_context(_server(where, latency, context)) for where in servers
        }
        for count in process_counts:
            alone = _run(context, ONE_PROCESS, mode, count, consumers, items, latency, None, work)
            alone.vs_one_process = 1.0
            runs.append(alone)
            progress(f"  done: {ONE_PROCESS}, {plural(count * consumers, 'thread')}")
            for where, server in started.items():
                setup = f"server ({where})"
                run = _run(context, setup, mode, count, consumers, items, latency, server, work)
                if alone.items_per_second > 0:
                    run.vs_one_process = run.items_per_second / alone.items_per_second
                runs.append(run)
                progress(f"  done: {setup}, {_processes(count)} x {consumers}")
    return runs


def bound(runs: list[ProcessRun]) -> list[str]:
    """What bounds the runs, one line each: the server's measured ceiling (the commits, and
    items, a second one core of it serves at its lowest CPU per commit measured) against the
    fastest ``one process`` run; each server run where the server used :data:`BOUND_CPU` CPU
    seconds a second or more (the server is the bound); each ``one process`` run that did
    (one interpreter is); each run while the machine's cores were :data:`BOUND_CPU` busy or
    more (the machine is: on a shared machine, other programs' work counts)."""
    lines = []
    served = [r for r in runs if r.server_ms_per_commit]
    alone = [r for r in runs if r.setup == ONE_PROCESS]
    if served:
        cheapest = min(served, key=lambda r: r.server_ms_per_commit or 0.0)
        ms = cheapest.server_ms_per_commit or 0.0
        commits = 1000 / ms
        line = (
            f"the server's ceiling: {ms:.3f} ms of its CPU per commit ({cheapest.setup}, "
            f"P = {cheapest.processes}) = {commits:,.0f} commits/s on one core = "
            f"{commits / cheapest.commits_per_item:,.0f} items/s at "
            f"{cheapest.commits_per_item:.2f} commits/item"
        )
        if alone:
            best = max(alone, key=lambda r: r.items_per_second)
            line += (
                f"; one process reached {best.items_per_second:,.0f} items/s "
                f"({plural(best.threads, 'thread')})"
            )
        lines.append(line)
    for r in runs:
        where = f"{r.setup}, P = {r.processes}"
        if r.server_cpu_per_second is not None and r.server_cpu_per_second >= BOUND_CPU:
            lines.append(
                f"the server is the bound: {where}: {r.server_cpu_per_second:.2f} CPU s/s at "
                f"{r.items_per_second:,.0f} items/s"
            )
        if r.setup == ONE_PROCESS and r.client_cpu_per_second >= BOUND_CPU:
            lines.append(
                f"one interpreter is the bound: {where} ({plural(r.threads, 'thread')}): "
                f"{r.client_cpu_per_second:.2f} CPU s/s at {r.items_per_second:,.0f} items/s"
            )
        if r.machine_busy is not None and r.machine_busy >= BOUND_CPU:
            own = r.client_cpu_per_second + (r.server_cpu_per_second or 0.0)
            lines.append(
                f"the machine is the bound: {where}: its {plural(cores_here(), 'core')} "
                f"{r.machine_busy:.0%} busy, {own:.2f} CPU s/s of it this run's"
            )
    return lines


_COLUMNS: list[tuple[str, Callable[[ProcessRun], Any]]] = [
    ("P", lambda r: r.processes),
    ("threads", lambda r: r.threads),
    ("items/s", lambda r: f"{r.items_per_second:,.0f}"),
    ("vs one", lambda r: _fixed(r.vs_one_process, 2)),
    ("client cpu ms/item", lambda r: f"{r.client_cpu_ms_per_item:.2f}"),
    ("client cpu s/s", lambda r: f"{r.client_cpu_per_second:.2f}"),
    ("server cpu s/s", lambda r: _fixed(r.server_cpu_per_second, 2)),
    ("server ms/commit", lambda r: _fixed(r.server_ms_per_commit, 3)),
    ("machine busy", lambda r: _fixed(r.machine_busy, 2)),
    ("commits/item", lambda r: f"{r.commits_per_item:.2f}"),
    ("confl/item", lambda r: f"{r.conflicts_per_item:.2f}"),
]


def _fixed(value: float | None, digits: int) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def print_processes(runs: list[ProcessRun], settings: dict[str, Any], as_json: bool) -> None:
    """Print the runs as one table and what they say of the server (:func:`bound`), or one
    JSON document (``settings``, ``runs``, ``server``: those lines)."""
    if as_json:
        document = {
            "settings": settings,
            "runs": [asdict(run) for run in runs],
            "server": bound(runs),
        }
        print(json.dumps(document, indent=1))
        return
    width = max([len("setup")] + [len(r.setup) for r in runs]) + 1
    header = f"{'setup':<{width}}" + "".join(f"{t:>{len(t) + 2}}" for t, _ in _COLUMNS)
    header += "  once"
    print(header)
    print("-" * len(header))
    for r in runs:
        print(
            f"{r.setup:<{width}}"
            + "".join(f"{figure(r)!s:>{len(t) + 2}}" for t, figure in _COLUMNS)
            + f"  {'yes' if r.exactly_once else 'NO'}"
            + "".join(f"  ({note})" for note in r.notes)
        )
    lines = bound(runs)
    if lines:
        print()
        print("\n".join(lines))


def machine_times() -> tuple[int, int] | None:
    """The machine's CPU time so far, busy and in all, in clock ticks of every core (the
    first line of Linux's ``/proc/stat``); None where there is none."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(field) for field in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal (guests included)
    return total - fields[3] - fields[4], total


def _busy_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """The share of the machine's cores busy between two :func:`machine_times`, every
    process's work counted (other programs' too): 1.0, every core busy all the time."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def cores_here() -> int:
    """The cores this process may run on (its CPU affinity where the system tells it)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def _processes(count: int) -> str:
    return f"{count} process" if count == 1 else f"{count} processes"
