"""The ``fdbqueue`` command line: look inside a queue (info, peek, leases, dead letters),
push, pop, follow (tail), clear, pause and resume its consumers, requeue or purge dead
letters, submit, show, list and cancel jobs, schedule periodic jobs, run a worker, benchmark,
and run them all at a prompt (shell).

Shared options go before or after the command (``fdbqueue --queue app,jobs info --json`` is
``fdbqueue --json info --queue app,jobs``; given in both places, the command's wins)::

    fdbqueue [--cluster-file PATH] [--api-version N] [--memory[=ADDRESS]] [--timeout S] [--json]
             (--queue PREFIX | --directory PATH) [--priority-queue] [--codec tuple|raw|json]
             COMMAND ...

A queue is named by a tuple prefix (``--queue app,jobs`` is the subspace ``("app", "jobs")``)
or by a directory path (``--directory app/jobs``, opened with FoundationDB's directory layer,
which needs ``libfdb_c``). Output is lines and tables for people, or one JSON document with
``--json`` (bytes appear as ``{"base64": ...}``, tuples as lists; ``tail`` prints one per
item). Errors are one line on stderr, ``fdbqueue: error: ...``, and exit status 1 (2 for a
usage error). Commands that
read a queue (info, peek, pop, leases, dead-letters) say so when nothing at all is stored
under its prefix (exit status 1): a mistyped name; tail and work wait for it.

``fdbqueue shell`` runs the commands at a prompt (or from standard input) on one database
for the session (:mod:`fdbqueue.cli._shell`).

The commands live in one module per group: :mod:`fdbqueue.cli._looking` (info, peek,
leases, dead-letters), :mod:`fdbqueue.cli._changing` (push, pop, tail, clear, pause, resume),
:mod:`fdbqueue.cli._running` (work, bench), :mod:`fdbqueue.cli._jobs` (submit, job, jobs,
cancel), :mod:`fdbqueue.cli._scheduling` (schedule add, list and remove),
:mod:`fdbqueue.cli._memory` (memory serve) and
:mod:`fdbqueue.cli._shell` (shell); what they share is in :mod:`fdbqueue.cli._context` and
:mod:`fdbqueue.cli._group`.

Tests hand the command a database: ``CliRunner().invoke(cli, args, obj={"database": db})``.
"""

from __future__ import annotations

import sys

import click

from fdbqueue.cli import (  # noqa: F401 - they add the commands
    _changing,
    _dashboard,
    _jobs,
    _looking,
    _memory,
    _running,
    _scheduling,
    _shell,
)
from fdbqueue.cli._arguments import PROGRAM
from fdbqueue.cli._context import Context, first_line, jsonable, open_database
from fdbqueue.cli._group import cli

__all__ = ["Context", "cli", "jsonable", "main", "open_database"]


def main() -> None:
    """The console script's entry point: every error is one line on stderr, ``fdbqueue:
    error: ...`` (usage errors: exit status 2; the others: 1; :class:`CommandLine`), never a
    traceback."""
    try:
        cli(obj={}, prog_name=PROGRAM)
    except Exception as error:  # a bug or an unforeseen failure: still one line
        click.echo(f"{PROGRAM}: error: {type(error).__name__}: {first_line(error)}", err=True)
        sys.exit(1)
