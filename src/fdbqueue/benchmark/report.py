"""What the benchmark prints: the tables, the ratios, the JSON document, and the check that
every run delivered every item once."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from fdbqueue.benchmark import workload
from fdbqueue.benchmark.loading import LOADS
from fdbqueue.benchmark.measurement import Result
from fdbqueue.benchmark.workload import PHASES


def json_ready(document: dict[str, Any]) -> dict[str, Any]:
    return {
        key: None if isinstance(value, float) and not math.isfinite(value) else value
        for key, value in document.items()
    }


def median_run(runs: list[Result]) -> Result:
    """The run with the median items/s (the lower one of the middle two for an even count);
    not exactly once, with every run's notes, when any run was not."""
    chosen = sorted(runs, key=lambda r: r.items_per_second)[(len(runs) - 1) // 2]
    if all(r.exactly_once for r in runs):
        return chosen
    notes = [note for r in runs for note in r.notes] or ["a repetition was not exactly once"]
    return replace(chosen, exactly_once=False, notes=notes)


def add_ratios(results: list[Result]) -> None:
    """Set each result's ratio: its items/s over its baseline's at the same phase, load shape
    and C."""
    baselines = {mode.name: mode.baseline for mode in workload.MODES}
    found: dict[tuple[str, str | None, str | None, int], Result] = {
        (r.phase, r.load, r.mode, r.consumers): r for r in results
    }
    for result in results:
        base = found.get((result.phase, result.load, baselines.get(result.mode), result.consumers))
        if base is not None and base.items_per_second > 0:
            result.ratio = result.items_per_second / base.items_per_second


def _number(value: float | None, width: int, digits: int) -> str:
    return f"{'n/a':>{width}}" if value is None else f"{value:>{width}.{digits}f}"


#: The columns of a table after ``mode``: title, width, digits, the figure of a result.
COLUMNS: list[tuple[str, int, int, Callable[[Result], float | None]]] = [
    ("C", 3, 0, lambda r: r.consumers),
    ("items/s", 9, 0, lambda r: r.items_per_second),
    ("ratio", 7, 2, lambda r: r.ratio),
    ("ideal/s", 9, 0, lambda r: r.ideal_per_second),
    ("of ideal", 10, 2, lambda r: r.of_ideal),
    ("p50 ms", 9, 1, lambda r: r.p50_ms),
    ("p99 ms", 9, 1, lambda r: r.p99_ms),
    ("p99/p50", 9, 1, lambda r: r.p99_over_p50),
    ("confl/item", 12, 2, lambda r: r.conflicts_per_item),
    ("tx/item", 9, 2, lambda r: r.transactions_per_item),
    ("tx-times/item", 15, 2, lambda r: r.transaction_times_per_item),
    ("keys/item", 11, 1, lambda r: r.keys_read_per_item),
    ("overtaken", 11, 0, lambda r: r.overtaken),
    ("cpu ms/item", 13, 2, lambda r: r.cpu_ms_per_item),
    ("cpu vs ideal", 14, 2, lambda r: r.cpu_vs_ideal),
    ("cpu s/s", 9, 2, lambda r: r.cpu_seconds_per_second),
    ("enq confl", 11, 0, lambda r: r.producer_conflicts),
]
#: The ``load`` column (after ``mode``), shown when a result has a load shape (``--loads``).
LOAD_TITLE, LOAD_WIDTH = "load", 14
HOT_RANGE = ("hot range", 11, 2, lambda r: r.hot_range_share)
EMPTY = ("empty", 7, 0, lambda r: r.empty_takes)


def print_tables(results: list[Result]) -> None:
    """One table per phase (columns: see :mod:`fdbqueue.benchmark`'s docstring); the steady
    phase adds ``hot range`` when it was recorded (``--hot-ranges``) and ``empty``."""
    width = max([len("mode")] + [len(r.mode) for r in results]) + 1
    loads = any(r.load is not None for r in results)
    for phase in PHASES:
        rows = [r for r in results if r.phase == phase]
        if not rows:
            continue
        columns = list(COLUMNS)
        if phase == "steady":
            if any(r.hot_range_share is not None for r in rows):
                columns.append(HOT_RANGE)
            columns.append(EMPTY)
        header = f"{'mode':<{width}}" + (f"{LOAD_TITLE:<{LOAD_WIDTH}}" if loads else "")
        header += "".join(f"{title:>{size}}" for title, size, _, _ in columns) + "  once"
        print()
        print(f"{phase} phase")
        print(header)
        print("-" * len(header))
        for r in rows:
            print(
                f"{r.mode:<{width}}"
                + (f"{r.load or 'n/a':<{LOAD_WIDTH}}" if loads else "")
                + "".join(_number(figure(r), size, digits) for _, size, digits, figure in columns)
                + f"  {'yes' if r.exactly_once else 'NO'}"
                + "".join(f"  ({note})" for note in r.notes)
            )


def print_ratios(results: list[Result]) -> None:
    """One line per result with a baseline other than itself: ``phase: mode / baseline``
    (``phase (load): ...`` for a result with a load shape)."""
    baselines = {mode.name: mode.baseline for mode in workload.MODES}
    order = {name: n for n, name in enumerate([*PHASES, *baselines, *LOADS])}
    compared = [
        r for r in results if r.ratio is not None and baselines.get(r.mode, r.mode) != r.mode
    ]
    lines = [
        f"{r.phase}{f' ({r.load})' if r.load is not None else ''}: {r.mode} / "
        f"{baselines[r.mode]}, {r.consumers:>2} consumer{'s' * (r.consumers != 1)} = "
        f"{r.ratio:.2f}x"
        for r in sorted(
            compared,
            key=lambda r: (order[r.phase], order.get(r.load or "", -1), order[r.mode], r.consumers),
        )
    ]
    if lines:
        print()
        print("\n".join(lines))


def check(results: list[Result]) -> None:
    """Exit with an error when an item was lost or duplicated, or an enqueue conflicted."""
    if not all(r.exactly_once for r in results) or any(r.producer_conflicts for r in results):
        sys.exit("FAILED: an item was lost or duplicated, or an enqueue conflicted")
