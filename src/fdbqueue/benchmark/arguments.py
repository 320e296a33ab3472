"""The benchmark's command-line arguments: parsing and checking them before anything runs."""

from __future__ import annotations

import argparse
import math

from fdbqueue import memory
from fdbqueue.benchmark import cpu, instructions, processes, workload
from fdbqueue.benchmark.loading import LOADS
from fdbqueue.benchmark.workload import (
    DEFAULT_CONSUMERS,
    DEFAULT_MODES,
    GROUPS,
    MAX_CONSUMERS,
    PHASES,
)
from fdbqueue.errors import BenchmarkError

# -- arguments ------------------------------------------------------------------------------


#: The most items (or runs) one option may ask for: more would run for days or exhaust memory.
MOST_ITEMS = 10_000_000
#: The most CPU milliseconds of ``--process-work`` per item (a minute).
MOST_WORK_MS = 60_000
#: The most producer threads.
MOST_THREADS = 1_024


def _shown(text: str) -> str:
    """What was typed, shortened when long (a number of thousands of digits)."""
    return repr(text) if len(text) <= 24 else f"{text[:20]!r}... ({len(text):,} characters)"


def _int_from(text: str, low: int, high: int) -> int:
    """``text`` as an int from ``low`` to ``high``; else argparse's usage error saying what
    was typed and what is allowed."""
    try:
        value = int(text)
    except ValueError:  # not a number, or past Python's 4,300 digits
        value = low - 1
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(
            f"must be a whole number from {low:,} to {high:,}, not {_shown(text)}"
        )
    return value


def positive_int(text: str) -> int:
    """An item or run count: 1 to :data:`MOST_ITEMS`."""
    return _int_from(text, 1, MOST_ITEMS)


def thread_count(text: str) -> int:
    """A number of threads: 1 to :data:`MOST_THREADS`."""
    return _int_from(text, 1, MOST_THREADS)


def non_negative_int(text: str) -> int:
    """A count that may be 0: 0 to :data:`MOST_ITEMS`."""
    return _int_from(text, 0, MOST_ITEMS)


def latency_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, not {text!r}")
    return value


def work_milliseconds(text: str) -> float:
    """``--process-work``: milliseconds from 0 to :data:`MOST_WORK_MS`."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value <= MOST_WORK_MS:  # NaN fails too
        raise argparse.ArgumentTypeError(
            f"must be a number of milliseconds from 0 to {MOST_WORK_MS:,}, not {text!r}"
        )
    return value


def counts_up_to(text: str, maximum: int) -> list[int]:
    """``1,2,4``: a comma-separated list of counts, each in 1..``maximum``, repeats dropped.

    Raises:
        argparse.ArgumentTypeError: a part that is no such integer (the message says what is
            allowed and repeats ``text``).
    """
    counts = []
    for part in text.split(","):
        try:
            count = int(part)
        except ValueError:
            count = 0
        if not 1 <= count <= maximum:
            raise argparse.ArgumentTypeError(
                f"must be comma-separated integers from 1 to {maximum}, not {text!r}"
            )
        counts.append(count)
    return list(dict.fromkeys(counts))


def consumer_counts(text: str) -> list[int]:
    """``1,2,4``: a comma-separated list of consumer counts, each in 1..MAX_CONSUMERS."""
    return counts_up_to(text, MAX_CONSUMERS)


def process_counts(text: str) -> list[int]:
    """``1,2,4``: a comma-separated list of process counts, each in 1..MAX_PROCESSES."""
    return counts_up_to(text, processes.MAX_PROCESSES)


def server_places(text: str) -> list[str]:
    """Where the ``--processes`` server runs: ``process``, ``thread`` or ``both``."""
    if text == "both":
        return list(processes.SERVERS)
    if text not in processes.SERVERS:
        raise argparse.ArgumentTypeError(
            f"must be {', '.join(processes.SERVERS)} or both, not {text!r}"
        )
    return [text]


def mode_names(text: str) -> list[str]:
    """Mode names and groups (``queue``, ``priority``, ``receipts``, ``all``), comma-separated,
    as the list of mode names in :data:`MODES` order."""
    known = [mode.name for mode in workload.MODES]
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


def load_names(text: str) -> list[str]:
    """Load shapes (:data:`~fdbqueue.benchmark.loading.LOADS`) or ``all``, comma-separated, as
    the list of names in :data:`~fdbqueue.benchmark.loading.LOADS` order."""
    chosen: set[str] = set()
    for part in text.split(","):
        if part == "all":
            chosen.update(LOADS)
        elif part in LOADS:
            chosen.add(part)
        else:
            raise argparse.ArgumentTypeError(
                f"unknown load shape {part!r}; choose from {', '.join(LOADS)} or all"
            )
    return [name for name in LOADS if name in chosen]


def cpu_subject_names(text: str) -> list[str]:
    """``--cpu`` subjects (:data:`~fdbqueue.benchmark.cpu.SUBJECTS`) or ``all``,
    comma-separated, as the list of names in :data:`~fdbqueue.benchmark.cpu.SUBJECTS` order
    (the recipe rows they are set against are added when measuring)."""
    chosen: set[str] = set()
    for part in text.split(","):
        if part == "all":
            chosen.update(cpu.SUBJECTS)
        elif part in cpu.SUBJECTS:
            chosen.add(part)
        else:
            raise argparse.ArgumentTypeError(
                f"unknown subject {part!r}; choose from {', '.join(cpu.SUBJECTS)} or all"
            )
    return [name for name in cpu.SUBJECTS if name in chosen]


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
            f"comma-separated modes ({', '.join(mode.name for mode in workload.MODES)}) or groups "
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
        type=thread_count,
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
        "--loads",
        type=load_names,
        default=None,
        help=(
            f"drain: comma-separated load shapes ({', '.join(LOADS)}) or all; the drain runs "
            "once per shape and the tables add a load column (default: batches-10, no column)"
        ),
    )
    parser.add_argument(
        "--hot-ranges",
        action="store_true",
        help=(
            "steady: record every mutation's key under the queue's subspace and print the "
            "largest share of them one of 16 ranges of equal key count takes (an even spread "
            "is 0.06); slows the run a little"
        ),
    )
    parser.add_argument(
        "--plot", metavar="FILE.png", help="draw items/s against consumers (needs matplotlib)"
    )
    parser.add_argument(
        "--fairness",
        action="store_true",
        help=(
            "instead of the phases: fair share across message groups, one noisy group's backlog "
            "then quiet groups, taken by each --consumers count (fdbqueue.benchmark.fairness)"
        ),
    )
    parser.add_argument(
        "--cpu",
        action="store_true",
        help=(
            "instead of the phases: the library's CPU and keys per item (enqueue + dequeue, "
            "in a caller's transaction, claim + ack, the worker loop) against FoundationDB's "
            "Queues recipe, one thread, raw codec, on the in-memory database "
            "(fdbqueue.benchmark.cpu); then each subject's bytecode instructions per item "
            "against the recipe's, counted, not timed (fdbqueue.benchmark.instructions)"
        ),
    )
    parser.add_argument(
        "--cpu-items",
        type=positive_int,
        default=5_000,
        help="--cpu: items per pass of each subject (default 5000)",
    )
    parser.add_argument(
        "--cpu-runs",
        type=positive_int,
        default=3,
        help="--cpu: runs of each subject; the median is shown (default 3)",
    )
    parser.add_argument(
        "--cpu-counted-items",
        type=positive_int,
        default=instructions.ITEMS,
        help=(
            f"--cpu: items whose instructions are counted per subject, after "
            f"{instructions.WARMUP} uncounted ones (default {instructions.ITEMS})"
        ),
    )
    parser.add_argument(
        "--cpu-subjects",
        type=cpu_subject_names,
        default=list(cpu.SUBJECTS),
        help=(
            f"--cpu: comma-separated subjects ({', '.join(cpu.SUBJECTS)}) or all; each brings "
            "the recipe row it is set against (default all)"
        ),
    )
    parser.add_argument(
        "--processes",
        type=process_counts,
        nargs="?",
        const=list(processes.DEFAULT_PROCESSES),
        default=None,
        metavar="P,P,...",
        help=(
            "instead of the phases: for each process count P, P worker processes of "
            "--process-consumers threads each against one in-memory server the benchmark "
            "starts, beside the same work in one process against memory.open(); the server's "
            "CPU per commit (fdbqueue.benchmark.processes); default 1,2,4"
        ),
    )
    parser.add_argument(
        "--process-consumers",
        type=thread_count,
        metavar="INTEGER",
        default=processes.DEFAULT_CONSUMERS,
        help=(
            f"--processes: consumer threads per process, each enqueuing then taking one "
            f"item at a time (default {processes.DEFAULT_CONSUMERS})"
        ),
    )
    parser.add_argument(
        "--process-items",
        type=positive_int,
        default=processes.DEFAULT_ITEMS,
        help=(
            f"--processes: items per run, each one enqueue and one take (default "
            f"{processes.DEFAULT_ITEMS})"
        ),
    )
    parser.add_argument(
        "--process-mode",
        choices=processes.PROCESS_MODES,
        metavar="MODE",
        default=processes.DEFAULT_MODE,
        help=(
            f"--processes: how the threads take ({', '.join(processes.PROCESS_MODES)}; "
            f"default {processes.DEFAULT_MODE})"
        ),
    )
    parser.add_argument(
        "--process-work",
        type=work_milliseconds,
        default=0.0,
        metavar="MS",
        help=(
            "--processes: CPU milliseconds each thread spends in Python after each take, as "
            "a handler would (default 0)"
        ),
    )
    parser.add_argument(
        "--process-server",
        type=server_places,
        metavar="WHERE",
        default=[processes.SERVERS[0]],
        help=(
            "--processes: run the server in a child process of its own (process, the "
            "default), in a thread of the benchmark's process (thread), or both"
        ),
    )
    parser.add_argument(
        "--noisy-items",
        type=positive_int,
        default=100_000,
        help="--fairness: the noisy group's items (default 100000)",
    )
    parser.add_argument(
        "--quiet-groups",
        type=positive_int,
        default=100,
        help="--fairness: quiet groups enqueued after it (default 100)",
    )
    parser.add_argument(
        "--quiet-items",
        type=positive_int,
        default=10,
        help="--fairness: items per quiet group (default 10)",
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
    for name in ("items", "producers", "repeat", "cpu_items", "cpu_runs", "cpu_counted_items"):
        value = getattr(arguments, name, 1)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            problems.append(f"{name} must be a positive integer, not {value!r}")
    if arguments.warmup is not None and (
        not isinstance(arguments.warmup, int) or arguments.warmup < 0
    ):
        problems.append(f"warmup must be an integer >= 0, not {arguments.warmup!r}")
    known = {mode.name for mode in workload.MODES}
    if not arguments.modes or not set(arguments.modes) <= known:
        problems.append(f"modes must be among {sorted(known)}, not {arguments.modes!r}")
    loads = getattr(arguments, "loads", None)
    if loads is not None and (not loads or not set(loads) <= set(LOADS)):
        problems.append(f"loads must be among {list(LOADS)}, not {loads!r}")
    subjects = getattr(arguments, "cpu_subjects", None)
    if subjects is not None and (not subjects or not set(subjects) <= set(cpu.SUBJECTS)):
        problems.append(f"cpu_subjects must be among {list(cpu.SUBJECTS)}, not {subjects!r}")
    chosen = [
        name
        for name in ("cpu", "fairness", "processes")
        if getattr(arguments, name, None) not in (None, False)
    ]
    if len(chosen) > 1:
        problems.append(
            f"{' and '.join('--' + name for name in chosen)} are different measurements: give one"
        )
    problems.extend(_process_problems(arguments))
    if not arguments.phases or not set(arguments.phases) <= set(PHASES):
        problems.append(f"phases must be among {list(PHASES)}, not {arguments.phases!r}")
    try:
        memory.Latency(grv=arguments.grv, read=arguments.read, commit=arguments.commit)
    except ValueError as error:
        problems.append(str(error))
    if problems:
        raise BenchmarkError("; ".join(problems))


def _process_problems(arguments: argparse.Namespace) -> list[str]:
    """What is wrong with the ``--processes`` options (none unless ``--processes`` is given)."""
    counts = getattr(arguments, "processes", None)
    if counts is None:
        return []
    problems = []
    if not counts or not all(
        isinstance(p, int) and not isinstance(p, bool) and 1 <= p <= processes.MAX_PROCESSES
        for p in counts
    ):
        problems.append(f"processes must be integers from 1 to {processes.MAX_PROCESSES}")
    consumers = getattr(arguments, "process_consumers", processes.DEFAULT_CONSUMERS)
    if not isinstance(consumers, int) or isinstance(consumers, bool) or consumers < 1:
        problems.append(f"process_consumers must be a positive integer, not {consumers!r}")
    elif not problems and max(counts) * consumers > MAX_CONSUMERS:
        problems.append(
            f"--processes {max(counts)} x --process-consumers {consumers} is "
            f"{max(counts) * consumers:,} threads in the one-process run: at most {MAX_CONSUMERS}"
        )
    items = getattr(arguments, "process_items", processes.DEFAULT_ITEMS)
    if not isinstance(items, int) or isinstance(items, bool) or items < 1:
        problems.append(f"process_items must be a positive integer, not {items!r}")
    if getattr(arguments, "process_mode", processes.DEFAULT_MODE) not in processes.PROCESS_MODES:
        problems.append(f"process_mode must be one of {list(processes.PROCESS_MODES)}")
    work = getattr(arguments, "process_work", 0.0)
    if (
        isinstance(work, bool)
        or not isinstance(work, (int, float))
        or not 0 <= work <= MOST_WORK_MS
    ):
        problems.append(f"process_work must be milliseconds from 0 to {MOST_WORK_MS:,}")
    servers = getattr(arguments, "process_server", [processes.SERVERS[0]])
    if not servers or not set(servers) <= set(processes.SERVERS):
        problems.append(f"process_server must be among {list(processes.SERVERS)}")
    return problems
