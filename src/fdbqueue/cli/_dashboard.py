"""The ``dashboard`` command: serve :mod:`fdbqueue.dashboard` (the ``dashboard`` extra) for the
queues named with ``--queue``/``--directory``, or for a demo workload (``--demo``)."""

from __future__ import annotations

import ipaddress
import threading
from typing import Any

import click

from fdbqueue import memory
from fdbqueue._storage.type_records import parse_type
from fdbqueue.cli._context import Context, guarded, open_directory, prefix_subspace
from fdbqueue.cli._group import cli, shared_options
from fdbqueue.priority import PriorityQueue
from fdbqueue.queue import Queue

AnyQueue = Queue[Any] | PriorityQueue[Any]

EXTRA = "pip install 'fdbqueue[dashboard]'"
#: The shortest ``--token`` a dashboard reachable from other machines takes.
MIN_TOKEN = 16
#: The host names a dashboard answers to whatever the options (``--allowed-host`` adds).
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
#: The layer of the directories the dashboard finds by itself: create a queue's directory
#: with ``fdb.directory.create_or_open(db, path, layer=b"fdbqueue")`` to have it listed.
DISCOVERY_LAYER = b"fdbqueue"
#: How deep and how many directories the discovery walks at most.
DISCOVERY_DEPTH = 4
DISCOVERY_LIMIT = 1000


def is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine (``localhost``, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def allowed_hosts(host: str, more: tuple[str, ...]) -> list[str]:
    """The host names the dashboard answers to: the loopback names, the address it listens
    on (unless every address: ``0.0.0.0``, ``::``), and those ``--allowed-host`` adds."""
    names = [*LOOPBACK_NAMES]
    try:
        unspecified = ipaddress.ip_address(host).is_unspecified
    except ValueError:
        unspecified = False
    if not unspecified:
        names.append(host)
    return [*dict.fromkeys([*names, *more])]


def discovered_directories(database: Any) -> list[str]:
    """The paths (``app/jobs``) of the directories whose layer is :data:`DISCOVERY_LAYER`,
    found by walking FoundationDB's directory layer breadth first (at most
    :data:`DISCOVERY_DEPTH` deep and :data:`DISCOVERY_LIMIT` directories; not below a queue's
    directory). Empty on the in-memory database, which has no directory layer. FoundationDB
    keeps no other list of queues, and fdbqueue does not create directories itself, so a
    queue under a tuple prefix is not found: name it with ``--queue``.

    Raises:
        click.ClickException: the directory layer cannot be read (a database error).
    """
    if isinstance(database, memory.Database):
        return []
    import fdb

    found: list[str] = []
    frontier: list[tuple[str, ...]] = [()]
    walked = 0
    while frontier and walked < DISCOVERY_LIMIT:
        path = frontier.pop(0)
        for name in guarded(lambda path=path: fdb.directory.list(database, path)):
            walked += 1
            child = (*path, name)
            directory = guarded(lambda child=child: fdb.directory.open(database, child))
            if bytes(directory.get_layer()) == DISCOVERY_LAYER:
                found.append("/".join(child))
            elif len(child) < DISCOVERY_DEPTH:
                frontier.append(child)
            if walked >= DISCOVERY_LIMIT:
                break
    return found


def named_queues(
    context: Context, prefixes: tuple[str, ...], directories: tuple[str, ...]
) -> dict[str, AnyQueue]:
    """The queues ``--queue`` and ``--directory`` name (the group's ``--queue`` or
    ``--directory`` too) and those :func:`discovered_directories` finds, each opened as the
    type, codec and shard count on its record (``--priority-queue``/``--codec``/``--shards``
    for one that has none yet).

    Raises:
        click.ClickException: a queue's record names a codec the command line does not know,
            or a directory cannot be opened.
    """
    names = [("queue", prefix) for prefix in prefixes]
    names += [("directory", path) for path in directories]
    names += [
        ("directory", path)
        for path in discovered_directories(context.database())
        if ("directory", path) not in names
    ]
    for kind in ("queue", "directory"):
        given = context.options.get(kind)
        if given is not None and (kind, given) not in names:
            names.insert(0, (kind, given))
    queues: dict[str, AnyQueue] = {}
    for kind, name in names:
        options = {**context.options, "queue": None, "directory": None, kind: name}
        one = Context(options, context.database())
        subspace = (
            prefix_subspace(name) if kind == "queue" else open_directory(one.database(), name)
        )
        record = one.record(subspace)
        if record.type is not None:
            options["priority_queue"] = parse_type(record.type.encode())[0] == "PriorityQueue"
        queues[name] = guarded(one.queue)
    return queues


@cli.command(short_help="Serve a web dashboard of queues (the dashboard extra).")
@click.option(
    "--queue",
    "prefixes",
    multiple=True,
    help="A queue's tuple prefix, comma-separated (app,jobs); repeat for more queues.",
)
@click.option(
    "--directory",
    "directories",
    multiple=True,
    help="A queue's directory path (app/jobs; needs libfdb_c); repeat for more queues.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8400,
    show_default=True,
    help="Port to listen on.",
)
@click.option("--read-only", is_flag=True, help="Refuse requeues and purges; show no buttons.")
@click.option(
    "--token",
    default=None,
    help="A secret every request must carry (?token= once, then a cookie; or a Bearer "
    f"header). Required, at least {MIN_TOKEN} characters, for a host other than loopback.",
)
@click.option(
    "--allowed-host",
    "more_hosts",
    multiple=True,
    metavar="NAME",
    help="A host name requests may name besides localhost, 127.0.0.1, ::1 and --host "
    "(the name browsers open it by; *.example.com for a domain); repeat for more.",
)
@click.option(
    "--demo",
    is_flag=True,
    help="Run a small live workload in this process (producers, workers, dead letters, "
    "groups) and show its queues too; on the in-memory database (--memory is implied).",
)
@shared_options(queue=False)
@click.pass_obj
def dashboard(
    context: Context,
    prefixes: tuple[str, ...],
    directories: tuple[str, ...],
    host: str,
    port: int,
    read_only: bool,
    token: str | None,
    more_hosts: tuple[str, ...],
    demo: bool,
) -> None:
    """Serve a web dashboard of the queues named with --queue or --directory (each may be
    repeated), at http://HOST:PORT/ until Ctrl-C.

    The overview updates every 2 s; a queue's page shows its shards, a depth plot, the next
    items, leases and dead letters, and requeues or deletes dead letters (one or all, each
    confirmed). On a cluster, it also lists the queues in directories created with the
    layer b"fdbqueue"; FoundationDB keeps no other list of queues, so name the others
    (fdbqueue --memory dashboard --demo shows a demo workload without a cluster).
    """
    try:
        import uvicorn

        from fdbqueue.dashboard import create_app, start_demo
    except ImportError as error:
        raise click.ClickException(
            f"the dashboard needs the dashboard extra ({error.name} is missing): {EXTRA}"
        ) from None
    if not is_loopback(host) and not token:
        raise click.UsageError(
            f"--host {host} is reachable from other machines: give --token SECRET too "
            "(every request must then carry it)"
        )
    if token is not None and not token:
        raise click.UsageError("--token must not be empty")
    if (
        demo
        and context.given_database is None
        and not context.options["use_memory"]
        and not context.options.get("memory_address")
    ):
        if context.options["cluster_file"] is not None:
            raise click.UsageError(
                "--demo runs its workload on the in-memory database: drop --cluster-file "
                "(fdbqueue dashboard --demo)"
            )
        context.options["use_memory"] = True  # the demo needs no cluster: --memory implied
    if not is_loopback(host) and token is not None and len(token) < MIN_TOKEN:
        raise click.UsageError(
            f"--token must be at least {MIN_TOKEN} characters when --host {host} is reachable "
            'from other machines (try --token "$(openssl rand -hex 16)")'
        )
    hosts = allowed_hosts(host, more_hosts)
    database = context.database()
    if demo and not isinstance(database, memory.Database):
        raise click.UsageError(
            "--demo writes a workload under the prefix ('demo',): run it on the in-memory "
            "database, fdbqueue --memory dashboard --demo"
        )
    queues = named_queues(context, prefixes, directories)
    running = None
    if demo:
        running = start_demo(database)
        queues = {**running.queues, **queues}
    if not queues:
        raise click.UsageError(
            "name the queues to show with --queue PREFIX (or --directory PATH), repeated for "
            "more; or try --memory dashboard --demo"
        )
    try:
        app = create_app(database, queues, read_only=read_only, token=token, allowed_hosts=hosts)
    except ValueError as error:  # an --allowed-host it does not take
        raise click.UsageError(str(error)) from None
    every_address = host not in hosts  # 0.0.0.0 or :: (allowed_hosts leaves it out)
    shown = "localhost" if host in ("127.0.0.1", "::1") or every_address else host
    address = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
    stops = " (Ctrl-C stops)" if context.stop is None else ""
    click.echo(f"fdbqueue dashboard: {len(queues)} queue(s) at {address}{stops}")
    if every_address and not more_hosts:
        click.echo(
            f"(other machines: add --allowed-host NAME for the name they open it by; any "
            f"other name than {', '.join(hosts)} is answered 400)"
        )
    try:
        if context.stop is None:
            uvicorn.run(app, host=host, port=port, log_level="warning")
        else:  # in fdbqueue shell's background: the shell's stop command ends it
            config = uvicorn.Config(app, host=host, port=port, log_level="warning")
            serve_until(uvicorn.Server(config), context.stop)
    finally:
        if running is not None:
            running.stop()


def serve_until(server: Any, stop: threading.Event) -> None:
    """Run the uvicorn ``server`` (in a thread of ``fdbqueue shell``) until ``stop`` is set
    (the shell's ``stop`` command, or leaving the shell), or until it ends by itself (a port
    in use)."""

    def watch() -> None:
        stop.wait()
        server.should_exit = True

    threading.Thread(target=watch, name="fdbqueue-dashboard-stop", daemon=True).start()
    try:
        server.run()
    finally:
        stop.set()  # ended by itself: the watcher ends too
