"""The ``fdbqueue`` command line: look inside a queue, push, pop, clear, run a worker, and
benchmark.

Global options come before the command::

    fdbqueue [--cluster-file PATH] [--api-version N] [--memory] [--timeout S] [--json]
             (--queue PREFIX | --directory PATH) [--priority-queue] [--codec tuple|raw]
             COMMAND ...

A queue is named by a tuple prefix (``--queue app,jobs`` is the subspace ``("app", "jobs")``)
or by a directory path (``--directory app/jobs``, opened with FoundationDB's directory layer,
which needs ``libfdb_c``). Output is lines and tables for people, or one JSON document with
``--json`` (bytes appear as ``{"base64": ...}``, tuples as lists). Errors are one line on
stderr and exit status 1 (2 for a usage error).

Tests hand the command a database: ``CliRunner().invoke(cli, args, obj={"database": db})``.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import importlib
import json
import logging
import os
import sys
from typing import Any

import click
from fdb.subspace_impl import Subspace

from fdbqueue import benchmark, memory, worker
from fdbqueue.binding import (
    BindingMismatchError,
    ClientLibraryMissingError,
    describe_fdb_error,
)
from fdbqueue.binding import open_database as open_cluster
from fdbqueue.priority import PriorityQueue
from fdbqueue.queue import Queue

__all__ = ["cli", "main"]

COUNT_LIMIT = 10_000  # leases and dead letters counted by ``info``
TIMED_OUT = 1031


def jsonable(value: Any) -> Any:
    """``value`` in a form ``json.dumps`` takes: bytes as ``{"base64": ...}``, tuples as lists."""
    if isinstance(value, (bytes, bytearray)):
        return {"base64": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    if isinstance(value, dict):
        return {str(key): jsonable(item) for key, item in value.items()}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


class Context:
    """What the global options chose; opens the database and the queue on first use."""

    def __init__(self, options: dict[str, Any], database: Any) -> None:
        self.options = options
        self._database = database

    @property
    def as_json(self) -> bool:
        return bool(self.options["as_json"])

    def database(self) -> Any:
        if self._database is None:
            self._database = open_database(
                self.options["cluster_file"],
                self.options["api_version"],
                self.options["use_memory"],
                self.options["timeout"],
            )
        return self._database

    def queue(self, **options: Any) -> Queue[Any] | PriorityQueue[Any]:
        prefix, directory = self.options["queue"], self.options["directory"]
        if (prefix is None) == (directory is None):
            raise click.UsageError("name the queue with exactly one of --queue or --directory")
        if prefix is not None:
            subspace: Any = Subspace(tuple(prefix.split(",")))
        else:
            subspace = open_directory(self.database(), directory)
        kind = PriorityQueue if self.options["priority_queue"] else Queue
        return kind(subspace, codec=self.options["codec"], **options)

    def emit(self, document: Any, text: str) -> None:
        click.echo(json.dumps(jsonable(document)) if self.as_json else text)


def open_database(
    cluster_file: str | None, api_version: int | None, use_memory: bool, timeout: float
) -> Any:
    """Open the in-memory database, or a cluster through the ``fdb`` binding.

    ``api_version`` None lets :func:`fdbqueue.binding.choose_api_version` choose.

    Raises:
        click.ClickException: libfdb_c is missing, the binding does not suit it, the API
            version is out of range, or the cluster file cannot be used.
    """
    if use_memory:
        return memory.open()
    try:
        database = open_cluster(cluster_file, api_version)
        database.options.set_transaction_timeout(int(timeout * 1000))
    except (ClientLibraryMissingError, BindingMismatchError, ValueError) as error:
        # the message says what to install or which versions are possible
        raise click.ClickException(
            f"cannot open the FoundationDB cluster: {first_line(error)}"
        ) from None
    except Exception as error:  # the binding raises several types here
        raise click.ClickException(
            f"cannot open the FoundationDB cluster ({first_line(error)}); is the cluster file "
            "right? --memory uses an in-memory database"
        ) from None
    return database


def open_directory(database: Any, path: str) -> Any:
    """Open the directory ``path`` (``a/b``) with FoundationDB's directory layer.

    Raises:
        click.ClickException: the directory layer cannot be loaded (it needs libfdb_c) or
            the directory does not exist.
    """
    if isinstance(database, memory.Database):
        raise click.ClickException(
            "--directory needs FoundationDB's directory layer, which needs libfdb_c and a "
            "cluster; name the queue with --queue on the in-memory database"
        )
    try:
        import fdb

        return fdb.directory.open(database, tuple(part for part in path.split("/") if part))
    except Exception as error:
        raise click.ClickException(f"cannot open directory {path!r}: {first_line(error)}") from None


def first_line(error: BaseException) -> str:
    """The first line of the error's text; FoundationDB errors as ``description (code)``."""
    text = describe_fdb_error(error).strip() or type(error).__name__
    return text.splitlines()[0]


def guarded(action: Any) -> Any:
    """Run ``action()``, turning database and data errors into one-line ClickExceptions."""
    try:
        return action()
    except click.ClickException:
        raise
    except ValueError as error:  # e.g. keys that are not a queue's items, a bad value
        raise click.ClickException(
            f"{first_line(error)} (does --queue/--directory name a queue, with the right "
            "--codec and --priority-queue?)"
        ) from None
    except Exception as error:
        code = getattr(error, "code", None)
        if code == TIMED_OUT:
            raise click.ClickException(
                "the cluster did not answer in time (is it running, and the cluster file right?)"
            ) from None
        if code is not None:
            raise click.ClickException(f"FoundationDB error {code}: {first_line(error)}") from None
        raise


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--cluster-file", type=click.Path(dir_okay=False), help="the cluster file to use")
@click.option(
    "--api-version",
    type=int,
    default=None,
    show_default="chosen automatically",
    help="FoundationDB API version; automatically the newest the fdb binding and libfdb_c support",
)
@click.option("--memory", "use_memory", is_flag=True, help="use a fresh in-memory database")
@click.option("--timeout", type=float, default=5.0, show_default=True, help="seconds per call")
@click.option("--json", "as_json", is_flag=True, help="print one JSON document")
@click.option("--queue", help="the queue's tuple prefix, comma-separated (app,jobs)")
@click.option("--directory", help="the queue's directory path (app/jobs)")
@click.option("--priority-queue", is_flag=True, help="the queue is a PriorityQueue")
@click.option(
    "--codec", type=click.Choice(["tuple", "raw", "json"]), default="tuple", show_default=True
)
@click.pass_context
def cli(ctx: click.Context, /, **options: Any) -> None:
    """Look inside and operate fdbqueue queues stored in FoundationDB."""
    given = ctx.obj.get("database") if isinstance(ctx.obj, dict) else None
    ctx.obj = Context(options, given)


@cli.command()
@click.pass_obj
def info(context: Context) -> None:
    """Size, oldest item, requests in line, leases in flight and dead letters."""
    queue = context.queue()

    def read() -> dict[str, Any]:
        db = context.database()
        return {
            "size": queue.size(db),
            "oldest": queue.peek(db),
            "requests_in_line": queue.requests_in_line(db),
            "leases": len(queue.leases(db, COUNT_LIMIT)),
            "dead_letters": len(queue.dead_letters(db, COUNT_LIMIT)),
        }

    facts = guarded(read)
    width = max(len(name) for name in facts)
    lines = [f"{name.replace('_', ' '):<{width}}  {facts[name]!r}" for name in facts]
    context.emit(facts, "\n".join(lines))


@cli.command()
@click.option("-n", "count", type=click.IntRange(min=0), default=10, show_default=True)
@click.pass_obj
def peek(context: Context, count: int) -> None:
    """Show the next N items without removing them."""
    queue = context.queue()
    values = guarded(lambda: queue.peek_many(context.database(), count))
    context.emit(values, "\n".join(repr(value) for value in values) or "(empty)")


@cli.command()
@click.argument("value")
@click.option("--priority", type=int, help="the priority (priority queues only)")
@click.option("--int", "as_int", is_flag=True, help="push VALUE as an integer")
@click.option("--delay", type=float, default=None, help="seconds before consumers may take it")
@click.pass_obj
def push(
    context: Context, value: str, priority: int | None, as_int: bool, delay: float | None
) -> None:
    """Add VALUE to the queue (a string; bytes with --codec raw; --int for an integer;
    with --codec json, VALUE is parsed as JSON)."""
    queue = context.queue()
    item: Any = value
    if as_int:
        try:
            item = int(value)
        except ValueError:
            raise click.BadParameter(f"{value!r} is not an integer", param_hint="VALUE") from None
    if context.options["codec"] == "raw":
        if as_int:
            raise click.UsageError("--int does not apply to --codec raw (values are bytes)")
        item = value.encode()
    elif context.options["codec"] == "json" and not as_int:
        try:
            item = json.loads(value)
        except ValueError:
            raise click.BadParameter(f"{value!r} is not JSON", param_hint="VALUE") from None
    if isinstance(queue, PriorityQueue):
        if priority is None:
            raise click.UsageError("a priority queue needs --priority")
        guarded(lambda: queue.push(context.database(), item, priority=priority, delay=delay))
    else:
        if priority is not None:
            raise click.UsageError("--priority applies to priority queues (--priority-queue)")
        guarded(lambda: queue.enqueue(context.database(), item, delay=delay))
    context.emit(
        {"pushed": item, "priority": priority, "delay": delay},
        f"pushed {item!r}" + (f", due in {delay:g}s" if delay else ""),
    )


@cli.command()
@click.option("-n", "count", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--max", "max_end", is_flag=True, help="from the highest priority")
@click.pass_obj
def pop(context: Context, count: int, max_end: bool) -> None:
    """Remove and show up to N items."""
    queue = context.queue()
    if max_end and not isinstance(queue, PriorityQueue):
        raise click.UsageError("--max applies to priority queues (--priority-queue)")

    def take() -> list[Any]:
        db = context.database()
        if isinstance(queue, Queue):
            return queue.dequeue_many(db, count)
        taken = []
        for _ in range(count):
            value = queue.pop(db, max=max_end)
            if value is None:
                break
            taken.append(value)
        return taken

    values = guarded(take)
    context.emit(values, "\n".join(repr(value) for value in values) or "(empty)")


@cli.command()
@click.option("--yes", is_flag=True, help="really remove every item and all metadata")
@click.pass_obj
def clear(context: Context, yes: bool) -> None:
    """Remove every item, lease, dead letter and counter of the queue."""
    queue = context.queue()
    if not yes:
        raise click.ClickException("clear removes everything in the queue: add --yes to do it")
    guarded(lambda: queue.clear(context.database()))
    context.emit({"cleared": True}, "cleared")


def import_handler(reference: str) -> Any:
    """The callable named ``module:function`` (``package.module:object.method`` too),
    imported with the current directory on ``sys.path`` as ``python -m`` would have it.

    Raises:
        click.BadParameter: not of that form, the module cannot be imported, or the name is
            not found or not callable.
    """
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise click.BadParameter(
            f"{reference!r} is not module:function (e.g. jobs:handle)", param_hint="HANDLER"
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as error:
        raise click.BadParameter(
            f"cannot load {reference!r}: {first_line(error)}", param_hint="HANDLER"
        ) from None
    if not callable(found):
        raise click.BadParameter(f"{reference!r} is not callable", param_hint="HANDLER")
    return found


@cli.command()
@click.argument("handler")
@click.option("--lease", type=float, default=30.0, show_default=True, help="seconds per lease")
@click.option("--concurrency", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--backoff", type=float, default=1.0, show_default=True, help="first retry delay")
@click.option("--max-backoff", type=float, default=300.0, show_default=True)
@click.option(
    "--max-deliveries",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="deliveries before a failing item becomes a dead letter",
)
@click.option("--until-empty", is_flag=True, help="stop once nothing is claimable")
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default="INFO",
    show_default=True,
)
@click.pass_obj
def work(
    context: Context,
    handler: str,
    lease: float,
    concurrency: int,
    backoff: float,
    max_backoff: float,
    max_deliveries: int,
    until_empty: bool,
    log_level: str,
) -> None:
    """Run the worker loop: claim items and call HANDLER (module:function) with each value;
    acknowledge on success, retry with backoff on an exception, dead-letter on the last
    delivery (fdbqueue.worker). Stops on SIGINT or SIGTERM after running jobs finish."""
    function = import_handler(handler)
    try:
        worker.check_work_arguments(function, lease, concurrency, backoff, max_backoff)
    except (TypeError, ValueError) as error:
        raise click.UsageError(first_line(error)) from None
    queue = context.queue(max_deliveries=max_deliveries)
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(message)s")
    summary = guarded(
        lambda: queue.work(
            context.database(),
            function,
            lease=lease,
            concurrency=concurrency,
            backoff=backoff,
            max_backoff=max_backoff,
            until_empty=until_empty,
        )
    )
    facts = dataclasses.asdict(summary)
    context.emit(
        facts, ", ".join(f"{name.replace('_', ' ')} {count}" for name, count in facts.items())
    )


@cli.command(context_settings={"ignore_unknown_options": True})
@click.argument("arguments", nargs=-1, type=click.UNPROCESSED)
@click.pass_obj
def bench(context: Context, arguments: tuple[str, ...]) -> None:
    """The consumer-scaling benchmark (fdbqueue.benchmark): pass its options after ``bench``,
    e.g. ``fdbqueue bench --phases drain --consumers 1,16 --modes plain,high-contention``;
    ``bench -- --help`` lists them. Runs on the in-memory database unless --cluster-file is
    given; with --json, prints one JSON document."""
    parser = argparse.ArgumentParser(prog="fdbqueue bench")
    benchmark.add_arguments(parser)
    parsed = parser.parse_args(list(arguments))  # a bad option: usage error, exit status 2
    options = context.options
    if options["cluster_file"] is None or context._database is not None:
        given = context._database

        def fresh(latency: memory.Latency) -> Any:
            return given if given is not None else memory.open(latency=latency)

        where = "the in-memory FoundationDB (fdbqueue.memory)"
    else:
        cluster = context.database()

        def fresh(latency: memory.Latency) -> Any:
            return cluster

        where = "a FoundationDB cluster"
    try:
        results = benchmark.run_all(parsed, fresh, where, as_json=context.as_json)
    except benchmark.BenchmarkError as error:
        raise click.ClickException(str(error)) from None
    benchmark.check(results)


def main() -> None:
    """The console script's entry point."""
    cli(obj={}, prog_name="fdbqueue")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())  # type: ignore[func-returns-value]
