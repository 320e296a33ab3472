"""The commands that run something on a queue: ``work`` (the worker loop) and ``bench`` (the
consumer-scaling benchmark)."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.metadata
import logging
import os
import re
import sys
from typing import Any, NoReturn

import click

from fdbqueue import benchmark, memory, worker
from fdbqueue._delivery.leases import MAX_LEASE_SECONDS
from fdbqueue._delivery.time_limits import MAX_TIME_LIMIT, check_time_limit
from fdbqueue._queues.tasks import registered_tasks
from fdbqueue.cli._arguments import Count, Seconds, argparse_help
from fdbqueue.cli._context import (
    Context,
    first_line,
    guarded,
)
from fdbqueue.cli._group import cli, shared_options


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


#: The most threads ``work --concurrency`` starts: one per job run at once, all started
#: up front, so a number past what a process can start is refused before any starts.
MAX_CONCURRENCY = 1024
#: The worker's argument names (the messages of :func:`fdbqueue.worker.check_work_arguments`
#: and :func:`~fdbqueue._delivery.time_limits.check_time_limit`) and the options that give
#: them.
WORK_OPTIONS = {
    "max_backoff": "--max-backoff",
    "backoff": "--backoff",
    "lease": "--lease",
    "concurrency": "--concurrency",
    "time_limit": "--time-limit",
    "processes": "--processes",
}


def option_names(message: str) -> str:
    """``message`` (of :func:`fdbqueue.worker.check_work_arguments` or
    :func:`~fdbqueue._delivery.time_limits.check_time_limit`) with the worker's argument
    names as the options that give them (``max_backoff`` as ``--max-backoff``)."""
    pattern = r"(?<![\w-])(" + "|".join(WORK_OPTIONS) + r")\b"
    return re.sub(pattern, lambda found: WORK_OPTIONS[found.group(1)], message)


def _run_task(*_values: Any) -> None:
    """What the worker's argument check is given for ``--tasks``: the worker's task runner
    takes the value (and the transaction, with --transactional) as any handler does."""


def import_task_modules(modules: tuple[str, ...]) -> None:
    """Import each of ``modules`` (dotted names), with the current directory on
    ``sys.path`` as ``python -m`` would have it: their ``@queue.task`` decorators register
    their tasks in this process.

    Raises:
        click.BadParameter: a module cannot be imported.
    """
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as error:
            raise click.BadParameter(
                f"cannot import {name!r}: {first_line(error)}", param_hint="--tasks"
            ) from None


@cli.command(short_help="Run the worker loop with a handler, or the queue's tasks.")
@click.argument("handler", required=False)
@click.option(
    "--tasks",
    "task_modules",
    multiple=True,
    metavar="MODULE",
    help="Import MODULE (again for more), whose @queue.task functions register the queue's "
    "tasks, and run each job's task by its name (instead of a HANDLER).",
)
@click.option(
    "--lease",
    type=Seconds(f"above 0, up to {MAX_LEASE_SECONDS:,}"),
    default=30.0,
    show_default=True,
    help="Seconds per lease.",
)
@click.option(
    "--concurrency",
    type=Count(1, MAX_CONCURRENCY),
    default=1,
    show_default=True,
    help=f"Jobs run at once (threads, at most {MAX_CONCURRENCY:,}).",
)
@click.option(
    "--processes",
    type=Count(1, 256),
    default=None,
    help="Run handlers in N child processes (one per thread; --concurrency is then N): a "
    "job past --time-limit has its process killed. HANDLER and tasks must be importable.",
)
@click.option(
    "--backoff",
    type=Seconds(),
    default=1.0,
    show_default=True,
    help="Seconds before the first retry.",
)
@click.option(
    "--max-backoff",
    type=Seconds(),
    default=300.0,
    show_default=True,
    help="The longest delay before a retry, in seconds.",
)
@click.option(
    "--max-deliveries",
    type=Count(1),
    default=5,
    show_default=True,
    help="Deliveries before a failing item becomes a dead letter.",
)
@click.option(
    "--time-limit",
    type=Seconds(f"above 0, up to {MAX_TIME_LIMIT:,}"),
    default=None,
    help="Seconds a handler may run on one job (default: no limit); past it the job fails "
    "(retried, or a dead letter on its last delivery) and its thread is abandoned.",
)
@click.option(
    "--until-empty",
    is_flag=True,
    help="Stop once nothing is claimable and each failed item was retried to an end.",
)
@click.option(
    "--transactional",
    is_flag=True,
    help="Call HANDLER(tr, value) inside the transaction that acknowledges the item: its "
    "writes and the acknowledgement commit together, exactly once.",
)
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default="INFO",
    show_default=True,
    help="What the worker logs to stderr.",
)
@shared_options()
@click.pass_obj
def work(
    context: Context,
    handler: str | None,
    task_modules: tuple[str, ...],
    lease: float,
    concurrency: int,
    processes: int | None,
    backoff: float,
    max_backoff: float,
    max_deliveries: int,
    time_limit: float | None,
    until_empty: bool,
    transactional: bool,
    log_level: str,
) -> None:
    """Run the worker loop: claim items and call HANDLER (module:function) with each value
    (with --transactional, HANDLER(tr, value) in the acknowledging transaction), or with
    --tasks MODULE each job's task by its name (a job whose task is not registered ends dead
    at once); acknowledge on success, retry with backoff on an exception, dead-letter on the
    last delivery (fdbqueue.worker); with --time-limit, a job whose handler runs longer fails.
    Stops on SIGINT or SIGTERM after running jobs finish (in fdbqueue shell it runs in the
    background: its stop command ends it)."""
    if processes is not None and concurrency != 1:
        raise click.UsageError(
            "--processes N runs N threads, one per child: leave --concurrency out"
        )
    if (handler is None) == (not task_modules):
        raise click.UsageError("give a HANDLER (module:function) or --tasks MODULE, not both")
    function = None if handler is None else import_handler(handler)
    import_task_modules(task_modules)
    try:
        worker.check_work_arguments(
            _run_task if function is None else function,
            lease,
            concurrency,
            backoff,
            max_backoff,
            transactional=transactional,
        )
        check_time_limit(time_limit)
    except (TypeError, ValueError) as error:
        raise click.UsageError(option_names(first_line(error))) from None
    queue = context.existing_queue(context.queue(max_deliveries=max_deliveries), must_exist=False)
    if function is None and not registered_tasks(queue):
        raise click.UsageError(
            f"{', '.join(task_modules)} registered no task on {context.queue_name()}: its "
            "@queue.task must decorate functions on a queue of that subspace"
        )
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(message)s")
    summary = guarded(
        lambda: queue.work(
            context.database(),
            function,
            lease=lease,
            **({"concurrency": concurrency} if processes is None else {}),
            backoff=backoff,
            max_backoff=max_backoff,
            until_empty=until_empty,
            stop=context.stop,
            handle_signals=context.stop is None,
            transactional=transactional,
            time_limit=time_limit,
            processes=processes,
        )
    )
    facts = dataclasses.asdict(summary)
    counts = ", ".join(
        f"{name.replace('_', ' ')} {count}" for name, count in facts.items() if name != "paused"
    )
    context.emit(facts, counts + ("; queue is paused (fdbqueue resume)" if summary.paused else ""))


class BenchArgumentParser(argparse.ArgumentParser):
    """The benchmark's options: a bad one is a one-line click usage error (exit status 2),
    not argparse's usage block; its help is laid out as click's (``argparse_help``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        #: the options added, in order (argparse keeps its own list private)
        self.options: list[argparse.Action] = []
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.options.append(action)
        return action

    def error(self, message: str) -> NoReturn:
        raise click.UsageError(message)

    def format_help(self) -> str:
        return argparse_help(self, self.options)


def bench_parser() -> BenchArgumentParser:
    parser = BenchArgumentParser(
        prog="fdbqueue bench",
        description=(
            "The consumer-scaling benchmark (fdbqueue.benchmark): items per second of each "
            "mode against the number of consumers, on the in-memory database unless "
            "--cluster-file is given. Prints a table per phase and the ratios, or one JSON "
            "document with --json. The shared options --cluster-file, --api-version, "
            "--memory, --timeout and --json go before or after bench."
        ),
    )
    benchmark.add_arguments(parser)
    return parser


@cli.command(
    context_settings={"ignore_unknown_options": True, "help_option_names": []},
    short_help="Run the consumer-scaling benchmark.",
)
@click.argument("arguments", nargs=-1, type=click.UNPROCESSED)
@shared_options(queue=False)
@click.pass_obj
def bench(context: Context, arguments: tuple[str, ...]) -> None:
    """Run the consumer-scaling benchmark; "fdbqueue bench --help" lists its options."""
    parser = bench_parser()
    parsed = parser.parse_args(list(arguments))  # a bad option: usage error, exit status 2
    try:
        benchmark.check_arguments(parsed)
    except benchmark.BenchmarkError as error:
        raise click.UsageError(str(error)) from None
    options = context.options
    # a test's database; in the shell, the session's holds the user's queues: not for a run
    given = None if context.in_shell else context.given_database
    if options["cluster_file"] is None or given is not None:

        def fresh(latency: memory.Latency) -> Any:
            return given if given is not None else memory.open(latency=latency)

        where = "the in-memory FoundationDB (fdbqueue.memory)"
    else:
        cluster = context.database()

        def fresh(latency: memory.Latency) -> Any:
            return cluster

        where = "a FoundationDB cluster"
    try:  # run_all checks --plot's matplotlib before it runs anything
        results = benchmark.run_all(parsed, fresh, where, as_json=context.as_json)
    except benchmark.BenchmarkError as error:
        raise click.ClickException(str(error)) from None
    benchmark.check(results)
