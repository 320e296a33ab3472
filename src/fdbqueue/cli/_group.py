"""The ``fdbqueue`` group and the shared options (connection and queue) that go before or after
every command."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import click
from click.core import ParameterSource

from fdbqueue._queues.router import MAX_SHARDS
from fdbqueue.cli._arguments import MEMORY_ADDRESS_OPTION, CommandLine, Count, Seconds
from fdbqueue.cli._context import (
    CODECS,
    Context,
    package_version,
)

# -- shared options: on the group and on every command -------------------------------------


def positive_seconds(_ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
    """A click callback: ``value`` must be a finite number of seconds > 0."""
    if value is not None and (not math.isfinite(value) or value <= 0):
        raise click.BadParameter(f"must be a number of seconds > 0, not {value:g}")
    return value


CONNECTION_OPTIONS: list[Callable[[Any], Any]] = [
    click.option(
        "--cluster-file",
        type=click.Path(exists=True, dir_okay=False),
        help="The cluster file. Default: FDB_CLUSTER_FILE, then the usual location.",
    ),
    click.option(
        "--api-version",
        type=int,
        default=None,
        show_default="chosen automatically",
        help="FoundationDB API version; automatically the newest the fdb binding and "
        "libfdb_c support.",
    ),
    click.option(
        "--memory",
        "use_memory",
        is_flag=True,
        help="Use a fresh in-memory database for trying commands out: each command starts "
        "with an empty one, gone when it ends; `fdbqueue --memory shell` keeps one for a "
        "whole session of commands. --memory=memory://HOST:PORT (with the =) uses the "
        "in-memory database that `fdbqueue memory serve` holds there, shared by every "
        "command and process; default: FDBQUEUE_MEMORY (its token: FDBQUEUE_MEMORY_TOKEN). "
        "Not with --cluster-file.",
    ),
    click.option(
        MEMORY_ADDRESS_OPTION,
        "memory_address",
        envvar="FDBQUEUE_MEMORY",
        hidden=True,
        help="What --memory=ADDRESS gives.",
    ),
    click.option(
        "--timeout",
        type=Seconds("above 0"),
        default=5.0,
        show_default=True,
        callback=positive_seconds,
        help="Seconds each database call may take on a cluster (> 0).",
    ),
    click.option(
        "--json", "as_json", is_flag=True, help="Print one JSON document (tail: one per item)."
    ),
]
QUEUE_OPTIONS: list[Callable[[Any], Any]] = [
    click.option("--queue", help="The queue's tuple prefix, comma-separated: app,jobs."),
    click.option("--directory", help="The queue's directory path: app/jobs (needs libfdb_c)."),
    click.option("--priority-queue", is_flag=True, help="The queue is a PriorityQueue."),
    click.option(
        "--codec",
        type=click.Choice(CODECS),
        help="How values are stored, for a new queue (default: tuple); an existing queue's "
        "codec is read from its record.",
    ),
    click.option(
        "--shards",
        type=Count(1, MAX_SHARDS),
        help="Key ranges a new queue spreads over (default: 1); an existing queue's count is "
        "read from its record.",
    ),
]
CONNECTION_NAMES = (
    "cluster_file",
    "api_version",
    "use_memory",
    "memory_address",
    "timeout",
    "as_json",
)
QUEUE_NAMES = ("queue", "directory", "priority_queue", "codec", "shards")
#: The options that choose the database: ``fdbqueue shell`` opens it once, so its lines
#: refuse them (:func:`refuse_in_shell`); the others (--json, the queue's) apply per line.
DATABASE_NAMES = ("cluster_file", "api_version", "use_memory", "memory_address", "timeout")


#: Where an option's value comes from when the command's own command line did not give it:
#: the group's value stands (an environment variable gave the group the same).
GIVEN_ELSEWHERE = (None, ParameterSource.DEFAULT, ParameterSource.ENVIRONMENT)


def refuse_in_shell(ctx: click.Context, in_shell: bool) -> None:
    """Inside ``fdbqueue shell``, refuse the options of :data:`DATABASE_NAMES` given on the
    line (a usage error, exit status 2): the session's database is opened once, so they
    would silently do nothing."""
    if not in_shell:
        return
    for param in ctx.command.params:
        if param.name in DATABASE_NAMES and ctx.get_parameter_source(param.name) not in (
            None,
            ParameterSource.DEFAULT,
            ParameterSource.ENVIRONMENT,  # FDBQUEUE_MEMORY: the session's default too
        ):
            raise click.UsageError(
                f"{param.opts[0]} chooses the database, which the shell opened once for the "
                f"session: give it to `fdbqueue {param.opts[0]} ... shell` instead"
            )


def with_options(
    decorators: list[Callable[[Any], Any]],
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Apply click option ``decorators`` in order (the first is listed first in help)."""

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(decorators):
            function = option(function)
        return function

    return decorate


def shared_options(*, queue: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command the shared options (the connection's, and with ``queue`` the queue's),
    so they may follow the command name too. Those given to the command (on its command line)
    replace the group's in :attr:`Context.options`; the command's function does not see them.
    """
    decorators = CONNECTION_OPTIONS + (QUEUE_OPTIONS if queue else [])
    names = CONNECTION_NAMES + (QUEUE_NAMES if queue else ())

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def command(*args: Any, **kwargs: Any) -> Any:
            ctx = click.get_current_context()
            context = ctx.find_object(Context)
            assert context is not None  # the group's callback made it
            refuse_in_shell(ctx, context.in_shell)
            for name in names:
                value = kwargs.pop(name)
                if ctx.get_parameter_source(name) not in GIVEN_ELSEWHERE:
                    context.options[name] = value
            context.check()
            return function(*args, **kwargs)

        return with_options(decorators)(command)

    return decorate


def show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"fdbqueue {package_version()}")
        ctx.exit()


@click.group(
    cls=CommandLine, context_settings={"help_option_names": ["-h", "--help"], "show_default": True}
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=show_version,
    help="Print fdbqueue's version and exit.",
)
@with_options(CONNECTION_OPTIONS + QUEUE_OPTIONS)
@click.pass_context
def cli(ctx: click.Context, /, **options: Any) -> None:
    """Look inside and operate fdbqueue queues stored in FoundationDB.

    The shared options (connection and queue) go before or after the command:
    "fdbqueue --queue app,jobs info" and "fdbqueue info --queue app,jobs" are the same.
    """
    given: dict[str, Any] = ctx.obj if isinstance(ctx.obj, dict) else {}
    refuse_in_shell(ctx, bool(given.get("in_shell")))
    ctx.obj = Context(
        options,
        given.get("database"),
        stop=given.get("stop"),
        in_shell=bool(given.get("in_shell")),
    )
