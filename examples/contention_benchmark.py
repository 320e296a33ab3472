"""Contention benchmark: plain versus high-contention consumption as consumers are added.

The benchmark itself is :mod:`fdbqueue.benchmark` (also ``fdbqueue bench``); this script adds
``--cluster-file`` / ``--api-version``. Run ``python examples/contention_benchmark.py``
(in-memory database), ``--plot contention.png`` for a chart (``pip install -e '.[bench]'``),
``--consumers 1,4,16 --modes queue`` for fewer runs.
"""

from __future__ import annotations

import argparse

from _database import add_database_arguments, describe, open_database

from fdbqueue import benchmark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_arguments(parser)
    benchmark.add_arguments(parser)
    arguments = parser.parse_args()
    first = open_database(arguments)

    def fresh(latency):  # a new in-memory database per run; a cluster is shared
        return first if arguments.cluster_file else open_database(arguments, latency=latency)

    benchmark.check(benchmark.run_all(arguments, fresh, describe(first)))


if __name__ == "__main__":
    main()
