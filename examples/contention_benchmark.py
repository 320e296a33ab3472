"""Consumer-scaling benchmark: items/s, latency, conflicts and database time per item, per
consumption mode, as consumers are added; a drain phase (preloaded queue, no producers) and a
steady phase (producers faster than the consumers).

The benchmark itself is :mod:`fdbqueue.benchmark` (also ``fdbqueue bench``); this script adds
``--cluster-file`` / ``--api-version`` and ``--json``. Run
``python examples/contention_benchmark.py`` (in-memory database), ``--phases drain
--consumers 1,4,16 --modes plain,high-contention`` for fewer runs, ``--plot contention.png``
for a chart (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from _database import add_database_arguments, describe, open_database

from fdbqueue import benchmark, memory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_arguments(parser)
    benchmark.add_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    arguments = parser.parse_args()  # a bad option: usage error, exit status 2
    first = open_database(arguments)

    def fresh(
        latency: memory.Latency | None,
    ) -> Any:  # a new in-memory database per run; a cluster is shared
        return first if arguments.cluster_file else open_database(arguments, latency=latency)

    try:
        results = benchmark.run_all(arguments, fresh, describe(first), as_json=arguments.json)
    except benchmark.BenchmarkError as error:
        sys.exit(f"error: {error}")
    benchmark.check(results)


if __name__ == "__main__":
    main()
