"""What the benchmark prints: the tables, the ratios, the JSON document, and the check that
every run delivered every item once."""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from typing import Any

from fdbqueue.benchmark import workload
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
    """Set each result's ratio: its items/s over its baseline's at the same phase and C."""
    baselines = {mode.name: mode.baseline for mode in workload.MODES}
    found: dict[tuple[str, str | None, int], Result] = {
        (r.phase, r.mode, r.consumers): r for r in results
    }
    for result in results:
        base = found.get((result.phase, baselines.get(result.mode), result.consumers))
        if base is not None and base.items_per_second > 0:
            result.ratio = result.items_per_second / base.items_per_second


def _number(value: float | None, width: int, digits: int) -> str:
    return f"{'n/a':>{width}}" if value is None else f"{value:>{width}.{digits}f}"


COLUMNS = (
    "  C  items/s  ratio  ideal/s   p50 ms   p99 ms  confl/item  tx/item  tx-times/item"
    "  cpu ms/item  cpu s/s  enq confl"
)


def print_tables(results: list[Result]) -> None:
    """One table per phase (columns: see the module's docstring)."""
    width = max([len("mode")] + [len(r.mode) for r in results]) + 1
    for phase in PHASES:
        rows = [r for r in results if r.phase == phase]
        if not rows:
            continue
        steady = phase == "steady"
        header = f"{'mode':<{width}}" + COLUMNS + ("  empty" if steady else "") + "  once"
        print()
        print(f"{phase} phase")
        print(header)
        print("-" * len(header))
        for r in rows:
            print(
                f"{r.mode:<{width}}{r.consumers:>3}{r.items_per_second:>9.0f}"
                f"{_number(r.ratio, 7, 2)}{_number(r.ideal_per_second, 9, 0)}"
                f"{_number(r.p50_ms, 9, 1)}{_number(r.p99_ms, 9, 1)}"
                f"{r.conflicts_per_item:>12.2f}{r.transactions_per_item:>9.2f}"
                f"{_number(r.transaction_times_per_item, 15, 2)}{r.cpu_ms_per_item:>13.2f}"
                f"{r.cpu_seconds_per_second:>9.2f}{r.producer_conflicts:>11}"
                + (f"{r.empty_takes:>7}" if steady else "")
                + f"  {'yes' if r.exactly_once else 'NO'}"
                + "".join(f"  ({note})" for note in r.notes)
            )


def print_ratios(results: list[Result]) -> None:
    """One line per result with a baseline other than itself: ``phase: mode / baseline``."""
    baselines = {mode.name: mode.baseline for mode in workload.MODES}
    order = {name: n for n, name in enumerate([*PHASES, *baselines])}
    lines = [
        f"{r.phase}: {r.mode} / {baselines[r.mode]}, {r.consumers:>2} "
        f"consumer{'s' * (r.consumers != 1)} = {r.ratio:.2f}x"
        for r in sorted(results, key=lambda r: (order[r.phase], order[r.mode], r.consumers))
        if r.ratio is not None and baselines[r.mode] != r.mode
    ]
    if lines:
        print()
        print("\n".join(lines))


def check(results: list[Result]) -> None:
    """Exit with an error when an item was lost or duplicated, or an enqueue conflicted."""
    if not all(r.exactly_once for r in results) or any(r.producer_conflicts for r in results):
        sys.exit("FAILED: an item was lost or duplicated, or an enqueue conflicted")
