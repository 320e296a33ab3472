"""``fdbqueue memory serve``: one in-memory database held by this process and served to other
processes (``--memory=ADDRESS``, ``FDBQUEUE_MEMORY``, :func:`fdbqueue.memory.connect`)."""

from __future__ import annotations

import signal
import sys
from types import FrameType

import click

from fdbqueue import memory
from fdbqueue.cli._group import cli


@cli.group("memory", short_help="Serve an in-memory database to other processes.")
def memory_group() -> None:
    """The in-memory database as a server, for trying workers, producers, the command line
    and the dashboard as separate programs with no cluster."""


@memory_group.command("serve")
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
def serve(host: str, port: int, token: str | None) -> None:
    """Hold one in-memory database and serve it until SIGINT or SIGTERM.

    The first line on standard output is its address, memory://HOST:PORT: give it to other
    commands as --memory=ADDRESS or FDBQUEUE_MEMORY=ADDRESS. Nothing is kept when it stops.
    """
    try:
        server = memory.serve(host, port, token)
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
