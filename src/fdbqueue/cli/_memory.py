"""``fdbqueue memory serve``: one in-memory database held by this process and served to other
processes (``--memory=ADDRESS``, ``FDBQUEUE_MEMORY``, :func:`fdbqueue.memory.connect`);
``fdbqueue memory set`` and ``fdbqueue memory pass-time``: its latency, faults and time,
changed from another process (as ``db.latency``, ``db.faults`` and ``db.pass_time`` change
them from a connected database)."""

from __future__ import annotations

import dataclasses
import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

import click

from fdbqueue import memory
from fdbqueue.cli._arguments import Seconds
from fdbqueue.cli._context import Context, guarded
from fdbqueue.cli._group import cli

F = TypeVar("F", bound=Callable[..., Any])

#: The options of the latency model (seconds each: :class:`fdbqueue.memory.Latency`).
LATENCY_OPTIONS = ("grv", "read", "commit")
#: The options of the injected faults (probabilities, and the recoveries' length:
#: :class:`fdbqueue.memory.Faults`).
FAULT_OPTIONS = (
    "not_committed",
    "commit_unknown_result",
    "transaction_too_old",
    "timed_out",
    "recovery",
    "recovery_seconds",
)


def settings_options(function: F) -> F:
    """Add the options that set a server's latency and faults (``serve``'s and ``set``'s)."""
    for name in reversed(FAULT_OPTIONS):
        if name == "recovery_seconds":
            kind: Any = Seconds("from 0 to 3,600")
            meaning = "seconds a recovery makes the database unavailable"
        else:
            kind = click.FloatRange(0.0, 1.0)
            meaning = f"the probability that a writing commit fails with {name.replace('_', ' ')}"
        option = click.option(
            f"--{name.replace('_', '-')}", type=kind, default=None, help=f"Faults: {meaning}."
        )
        function = option(function)
    for name in reversed(LATENCY_OPTIONS):
        option = click.option(
            f"--{name}",
            type=Seconds("from 0"),
            default=None,
            help=f"Latency: seconds each {'read version' if name == 'grv' else name} takes.",
        )
        function = option(function)
    return function


def settings(
    latency: memory.Latency, faults: memory.Faults, given: dict[str, Any]
) -> tuple[memory.Latency | None, memory.Faults | None]:
    """The latency and faults ``given`` (the options' values, None: not given) make of
    ``latency`` and ``faults``; None for either when none of its options was given.

    Raises:
        click.UsageError: a value :class:`~fdbqueue.memory.Latency` or
            :class:`~fdbqueue.memory.Faults` refuses (a negative number, probabilities that
            sum past 1), in one line; nothing is changed then.
    """
    timing = {name: given[name] for name in LATENCY_OPTIONS if given.get(name) is not None}
    failing = {name: given[name] for name in FAULT_OPTIONS if given.get(name) is not None}
    try:
        new_latency = dataclasses.replace(latency, **timing) if timing else None
        new_faults = dataclasses.replace(faults, **failing) if failing else None
    except (TypeError, ValueError) as error:
        raise click.UsageError(str(error)) from None
    return new_latency, new_faults


def described(latency: memory.Latency, faults: memory.Faults) -> tuple[dict[str, Any], str]:
    """The settings as a JSON document and as text."""
    document = {"latency": dataclasses.asdict(latency), "faults": dataclasses.asdict(faults)}
    lines = [f"latency: grv {latency.grv:g}s, read {latency.read:g}s, commit {latency.commit:g}s"]
    lines.append(
        "faults: "
        + ", ".join(
            f"{name.replace('_', ' ')} {value:g}" for name, value in document["faults"].items()
        )
    )
    return document, "\n".join(lines)


def served_database(context: Context, command: str) -> Any:
    """The connected database of ``--memory=ADDRESS`` (or ``FDBQUEUE_MEMORY``).

    Raises:
        click.UsageError: no server address was given (a bare ``--memory`` or a cluster
            has no server to change).
    """
    options = context.options
    if options.get("use_memory") or not options.get("memory_address"):
        raise click.UsageError(
            f"memory {command} changes a running server: give its address, "
            "fdbqueue --memory=memory://HOST:PORT memory " + command + " (or FDBQUEUE_MEMORY)"
        )
    return context.database()


@cli.group("memory", short_help="Serve an in-memory database to other processes.")
def memory_group() -> None:
    """The in-memory database as a server, for trying workers, producers, the command line
    and the dashboard as separate programs with no cluster."""


@memory_group.command("serve")
@settings_options
@click.option("--seed", type=int, default=None, help="Seeds the injected faults' draws.")
@click.option("--host", default="127.0.0.1", help="The address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=memory.DEFAULT_PORT,
    help="The TCP port; 0 picks a free one.",
)
@click.option(
    "--token",
    envvar="FDBQUEUE_MEMORY_TOKEN",
    default=None,
    help="A secret every client must give (FDBQUEUE_MEMORY_TOKEN on their side); needed "
    "with a --host other than loopback. Default: FDBQUEUE_MEMORY_TOKEN.",
)
def serve(host: str, port: int, token: str | None, seed: int | None, **given: Any) -> None:
    """Hold one in-memory database and serve it until SIGINT or SIGTERM.

    The first line on standard output is its address, memory://HOST:PORT: give it to other
    commands as --memory=ADDRESS or FDBQUEUE_MEMORY=ADDRESS. Nothing is kept when it stops.
    The latency and fault options start it with them (fdbqueue memory set changes them
    later).
    """
    latency, faults = settings(memory.Latency(), memory.Faults(), given)
    try:
        server = memory.serve(host, port, token, latency=latency, faults=faults, seed=seed)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    except OSError as error:
        raise click.ClickException(
            f"cannot listen on {host}:{port}: {error.strerror or error}"
        ) from None

    def stop(_signal: int, _frame: FrameType | None) -> None:
        server.close()

    previous = {name: signal.signal(name, stop) for name in (signal.SIGINT, signal.SIGTERM)}
    try:
        click.echo(server.address)
        sys.stdout.flush()
        server.serve_forever()
    finally:
        server.close()
        for name, handler in previous.items():
            signal.signal(name, handler)
    click.echo("stopped", err=True)


@memory_group.command("set")
@settings_options
@click.pass_obj
def set_settings(context: Context, /, **given: Any) -> None:
    """Change a running server's latency and faults, for every client; print them.

    Only the options given change; with none, it prints the settings in effect. Needs the
    server's address (--memory=ADDRESS or FDBQUEUE_MEMORY).
    """
    database = served_database(context, "set")
    latency, faults = settings(
        guarded(lambda: database.latency), guarded(lambda: database.faults), given
    )
    if latency is not None:
        guarded(lambda: setattr(database, "latency", latency))
    if faults is not None:
        guarded(lambda: setattr(database, "faults", faults))
    document, text = described(guarded(lambda: database.latency), guarded(lambda: database.faults))
    context.emit(document, text)


@memory_group.command("pass-time")
@click.argument("seconds", type=Seconds("from 0"))
@click.pass_obj
def pass_time(context: Context, seconds: float) -> None:
    """Let SECONDS pass on a running server at once, as its clients see time: versions move
    on, and every client's wall clock follows (leases expire, delayed items fall due). Needs
    the server's address (--memory=ADDRESS or FDBQUEUE_MEMORY)."""
    database = served_database(context, "pass-time")
    if seconds < 0:
        raise click.UsageError(f"pass-time takes seconds from 0, not {seconds:g}")
    guarded(lambda: database.pass_time(seconds))
    context.emit({"passed": seconds}, f"let {seconds:g} seconds pass")
