"""How the examples get a database: the in-memory one, or a real cluster with --cluster-file."""

from __future__ import annotations

import argparse
from typing import Any

from fdbqueue import memory

DEFAULT_API_VERSION = 710


def add_database_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--cluster-file`` and ``--api-version`` to an example's command line."""
    parser.add_argument(
        "--cluster-file",
        metavar="PATH",
        help="use the FoundationDB cluster this file names (default: the in-memory database)",
    )
    parser.add_argument(
        "--api-version",
        type=int,
        default=DEFAULT_API_VERSION,
        help=f"FoundationDB API version for a real cluster (default: {DEFAULT_API_VERSION})",
    )


def open_database(arguments: argparse.Namespace, latency: memory.Latency | None = None) -> Any:
    """Return ``fdb.open(cluster_file)`` for a real cluster, else ``memory.open(latency=...)``.

    The application, not fdbqueue, selects the API version: ``fdb.api_version()`` is called
    here, once, before ``fdb.open()``.
    """
    if arguments.cluster_file is None:
        return memory.open(latency=latency)
    import fdb

    fdb.api_version(arguments.api_version)
    return fdb.open(arguments.cluster_file)


def describe(database: Any) -> str:
    """A short description of where the example runs."""
    if isinstance(database, memory.Database):
        return "the in-memory FoundationDB (fdbqueue.memory)"
    return "a FoundationDB cluster"
