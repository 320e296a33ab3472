"""The benchmark's chart of items/s against consumers (matplotlib, imported only here and
only when a plot is asked for)."""

from __future__ import annotations

import sys
import textwrap
from typing import Any

from fdbqueue.benchmark.ideal import PRIVATE
from fdbqueue.benchmark.measurement import Result
from fdbqueue.benchmark.workload import PHASES
from fdbqueue.errors import BenchmarkError


def load_pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise BenchmarkError(
            "--plot needs matplotlib: pip install matplotlib (or the '.[bench]' extra)"
        ) from None
    return plt


def plot(results: list[Result], path: str, title: str) -> None:
    """Items/s against consumers, one panel per phase, one line per mode (and load shape, with
    ``--loads``), and the ideal (the private runs, :data:`~fdbqueue.benchmark.ideal.PRIVATE`)
    dashed beside them."""
    plt = load_pyplot()
    from matplotlib.ticker import ScalarFormatter

    phases = [phase for phase in PHASES if any(r.phase == phase for r in results)]
    figure, panels = plt.subplots(1, len(phases), figsize=(7 * len(phases), 4.5), squeeze=False)
    for axes, phase in zip(panels[0], phases, strict=True):
        rows = [r for r in results if r.phase == phase]
        counts = sorted({r.consumers for r in rows})
        for name, load in dict.fromkeys((r.mode, r.load) for r in rows):
            mine = [r for r in rows if (r.mode, r.load) == (name, load)]
            ideal = name == PRIVATE.name
            label = "private queues (the ideal)" if ideal else name
            axes.plot(
                [r.consumers for r in mine],
                [r.items_per_second for r in mine],
                "k--" if ideal else "-",
                marker="s" if ideal else "o",
                label=label if load is None else f"{label}, {load}",
            )
        axes.set_xscale("log", base=2)
        axes.set_yscale("log")
        axes.set_xticks(counts)
        axes.get_xaxis().set_major_formatter(ScalarFormatter())
        axes.set_xlabel("consumer threads")
        axes.set_ylabel("items taken per second")
        axes.set_title(f"{phase} phase", fontsize=10)
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize=7)
    figure.suptitle(textwrap.fill(title, 120), fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    print(f"plot written to {path}", file=sys.stderr)
