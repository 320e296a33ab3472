"""How the examples get a database: the in-memory one, or a real cluster with --cluster-file."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from fdbqueue import binding, memory


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
        default=None,
        help=(
            "FoundationDB API version for a real cluster (default: the newest both the "
            "installed fdb binding and libfdb_c support)"
        ),
    )


def open_database(arguments: argparse.Namespace, latency: memory.Latency | None = None) -> Any:
    """Return ``fdb.open(cluster_file)`` for a real cluster, else ``memory.open(latency=...)``.

    The application, not fdbqueue's queues, selects the API version:
    :func:`fdbqueue.binding.open_database` calls ``fdb.api_version()`` once (``--api-version``,
    else the newest version both the binding and libfdb_c support) before ``fdb.open()``. It
    raises ``binding.ClientLibraryMissingError`` or ``binding.BindingMismatchError`` with what
    to install when the binding cannot be used: the example then exits with that one line.
    """
    if arguments.cluster_file is None:
        return memory.open(latency=latency)
    try:
        return binding.open_database(arguments.cluster_file, arguments.api_version)
    except (binding.ClientLibraryMissingError, binding.BindingMismatchError) as error:
        sys.exit(f"error: {error}")  # one line, exit status 1: the message says what to do


def positive(text: str) -> int:
    """An argparse type: an int >= 1 (a count of consumers, producers or workers)."""
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {number}")
    return number


def describe(database: Any) -> str:
    """A short description of where the example runs."""
    if isinstance(database, memory.Database):
        return "the in-memory FoundationDB (fdbqueue.memory)"
    return "a FoundationDB cluster"
