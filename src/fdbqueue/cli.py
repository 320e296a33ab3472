"""The ``fdbqueue`` command line: look inside a queue (info, peek, leases, dead letters),
push, pop, follow (tail), clear, requeue or purge dead letters, run a worker, and benchmark.

Shared options go before or after the command (``fdbqueue --queue app,jobs info --json`` is
``fdbqueue --json info --queue app,jobs``; given in both places, the command's wins)::

    fdbqueue [--cluster-file PATH] [--api-version N] [--memory] [--timeout S] [--json]
             (--queue PREFIX | --directory PATH) [--priority-queue] [--codec tuple|raw|json]
             COMMAND ...

A queue is named by a tuple prefix (``--queue app,jobs`` is the subspace ``("app", "jobs")``)
or by a directory path (``--directory app/jobs``, opened with FoundationDB's directory layer,
which needs ``libfdb_c``). Output is lines and tables for people, or one JSON document with
``--json`` (bytes appear as ``{"base64": ...}``, tuples as lists; ``tail`` prints one per
item). Errors are one line on stderr, ``fdbqueue: error: ...``, and exit status 1 (2 for a
usage error). Commands that
read a queue (info, peek, pop, leases, dead-letters, tail) say so when nothing at all is
stored under its prefix (exit status 1): a mistyped name.

Tests hand the command a database: ``CliRunner().invoke(cli, args, obj={"database": db})``.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import functools
import importlib
import importlib.metadata
import json
import logging
import math
import os
import sys
import time
from collections.abc import Callable
from typing import Any, NoReturn

import click
import fdb.tuple
from click.core import ParameterSource
from fdb.subspace_impl import Subspace

from fdbqueue import __version__, benchmark, memory, worker
from fdbqueue.binding import (
    BindingMismatchError,
    ClientLibraryMissingError,
    describe_fdb_error,
)
from fdbqueue.binding import open_database as open_cluster
from fdbqueue.cli_arguments import PROGRAM, CommandLine, argparse_help, plural
from fdbqueue.deadletters import DeadLetter
from fdbqueue.delays import check_delay
from fdbqueue.leases import VERSIONS_PER_SECOND, Lease
from fdbqueue.priority import PriorityQueue
from fdbqueue.queue import Queue
from fdbqueue.store import prefix_end
from fdbqueue.transactional import run_in_retry_loop

__all__ = ["cli", "main"]

TIMED_OUT = 1031
#: Stands for "no limit" where a library call takes an int (``requeue_dead_letters``).
EVERYTHING = sys.maxsize
#: Longest wait of one blocking take in ``tail``, so Ctrl-C is seen within a second.
TAIL_WAIT = 1.0


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


def package_version() -> str:
    """The installed fdbqueue's version (``importlib.metadata``), else the module's."""
    try:
        return importlib.metadata.version("fdbqueue")
    except importlib.metadata.PackageNotFoundError:
        return __version__


#: The codecs the command line knows, by the names queues record.
CODECS = ("tuple", "raw", "json")


@dataclasses.dataclass(frozen=True)
class Record:
    """What :meth:`Context.record` found under a queue's prefix."""

    found: bool
    type: str | None
    codec: str | None


class Context:
    """What the shared options chose; opens the database and the queue on first use."""

    def __init__(self, options: dict[str, Any], database: Any) -> None:
        self.options = options
        self._database = database
        self._record: Record | None = None
        #: the codec of the queue :meth:`queue` opened (its record's, else --codec's)
        self.codec = "tuple"

    @property
    def as_json(self) -> bool:
        return bool(self.options["as_json"])

    def check(self) -> None:
        """Refuse options that contradict each other (a usage error, exit status 2)."""
        if self.options.get("use_memory") and self.options.get("cluster_file") is not None:
            raise click.UsageError(
                "--memory and --cluster-file exclude each other: --memory uses a fresh "
                "in-memory database, --cluster-file a cluster"
            )

    def database(self) -> Any:
        if self._database is None:
            self._database = open_database(
                self.options["cluster_file"],
                self.options["api_version"],
                self.options["use_memory"],
                self.options["timeout"],
            )
        return self._database

    def queue_name(self) -> str:
        """How messages name the queue: ``queue ('app', 'jobs')`` or ``directory 'app/jobs'``."""
        if self.options.get("queue") is not None:
            return f"queue {tuple(self.options['queue'].split(','))!r}"
        return f"directory {self.options.get('directory')!r}"

    def queue(self, **options: Any) -> Queue[Any] | PriorityQueue[Any]:
        """The queue the options name, with the codec on its record (``--codec`` when it has
        none yet; the default, tuple, when neither says).

        Raises:
            click.UsageError: neither or both of --queue and --directory.
            click.ClickException: ``--codec`` contradicts the codec on record, or the record
                names a codec the command line does not know.
        """
        prefix, directory = self.options["queue"], self.options["directory"]
        if (prefix is None) == (directory is None):
            raise click.UsageError("name the queue with exactly one of --queue or --directory")
        if prefix is not None:
            subspace: Any = prefix_subspace(prefix)
        else:
            subspace = open_directory(self.database(), directory)
        kind = PriorityQueue if self.options["priority_queue"] else Queue
        given, recorded = self.options["codec"], self.record(subspace).codec
        if recorded is not None and recorded not in CODECS:
            raise click.ClickException(
                f"{self.queue_name()} was written with codec {recorded!r}, a codec of its "
                "application's own: read it with that application"
            )
        if given is not None and recorded is not None and given != recorded:
            raise click.ClickException(
                f"{self.queue_name()} was written with codec {recorded!r}: drop --codec "
                f"{given} (an existing queue's codec is read from its record)"
            )
        self.codec = given or recorded or "tuple"
        try:
            return kind(subspace, codec=self.codec, **options)
        except ValueError as error:  # a prefix too long for FoundationDB's keys
            raise click.UsageError(first_line(error)) from None

    def record(self, subspace: Subspace) -> Record:
        """What is stored under the queue's prefix: whether anything is, and the type and
        codec recorded (read once, then remembered). Cost: one snapshot range read
        (``limit=1``) and two snapshot point reads, in one transaction."""
        if self._record is None:
            prefix = subspace.key()
            metadata = prefix + b"\xff"
            type_key = metadata + fdb.tuple.pack(("type",))
            codec_key = metadata + fdb.tuple.pack(("codec",))

            def look(tr: Any) -> Record:
                recorded_type = tr.snapshot.get(type_key)
                recorded_codec = tr.snapshot.get(codec_key)
                found = bool(list(tr.snapshot.get_range(prefix, prefix_end(prefix), limit=1)))
                return Record(
                    found,
                    bytes(recorded_type).decode(errors="replace")
                    if recorded_type.present()
                    else None,
                    bytes(recorded_codec).decode(errors="replace")
                    if recorded_codec.present()
                    else None,
                )

            self._record = guarded(lambda: run_in_retry_loop(self.database(), look))
        return self._record

    def existing_queue(
        self, queue: Queue[Any] | PriorityQueue[Any], *, must_exist: bool = True
    ) -> Queue[Any] | PriorityQueue[Any]:
        """``queue`` (:meth:`queue`), for a command that reads it.

        Raises:
            click.ClickException: nothing at all is stored under the queue's prefix (items
                and metadata; only when ``must_exist``): the name is probably mistyped; or the
                queue's metadata records the other queue type.
        """
        record = self.record(queue.subspace)
        if must_exist and not record.found:
            raise click.ClickException(
                f"{self.queue_name()} does not exist (nothing stored under its prefix)"
            )
        wanted = type(queue).__name__
        if record.type is not None and record.type != wanted:
            add = record.type == "PriorityQueue"
            hint = "add --priority-queue" if add else "drop --priority-queue"
            raise click.ClickException(
                f"{self.queue_name()} holds a {record.type}, not a {wanted}: {hint}"
            )
        return queue

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


def prefix_subspace(prefix: str) -> Subspace:
    """The Subspace that ``--queue`` names: its comma-separated elements, as strings.

    Raises:
        click.UsageError: an empty element (``--queue ""``, ``a,,b``), or bytes that are not
            UTF-8 (the tuple layer stores strings as UTF-8).
    """
    elements = prefix.split(",")
    if not all(elements):
        raise click.UsageError(
            f"--queue {prefix!r} has an empty element: name the queue's prefix with "
            "comma-separated non-empty strings, e.g. --queue app,jobs"
        )
    try:
        for element in elements:
            element.encode("utf-8")
    except UnicodeEncodeError:
        raise click.UsageError(
            "--queue is not valid UTF-8: the tuple layer stores its elements as UTF-8 strings"
        ) from None
    return Subspace(tuple(elements))


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
    except (ValueError, TypeError) as error:  # keys that are not a queue's items, say: the
        raise click.ClickException(first_line(error)) from None  # message names the fix
    except Exception as error:
        code = getattr(error, "code", None)
        if code == TIMED_OUT:
            raise click.ClickException(
                "the cluster did not answer in time (is it running, and the cluster file right?)"
            ) from None
        if code is not None:
            raise click.ClickException(f"FoundationDB error {code}: {first_line(error)}") from None
        raise


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
        "with an empty one, gone when it ends (so nothing can be inspected later); not with "
        "--cluster-file.",
    ),
    click.option(
        "--timeout",
        type=float,
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
]
CONNECTION_NAMES = ("cluster_file", "api_version", "use_memory", "timeout", "as_json")
QUEUE_NAMES = ("queue", "directory", "priority_queue", "codec")


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
            for name in names:
                value = kwargs.pop(name)
                if ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT):
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
    given = ctx.obj.get("database") if isinstance(ctx.obj, dict) else None
    ctx.obj = Context(options, given)


# -- looking ---------------------------------------------------------------------------------


def given(name: str) -> bool:
    """Whether the current command's option ``name`` was given on its command line."""
    return click.get_current_context().get_parameter_source(name) not in (
        None,
        ParameterSource.DEFAULT,
    )


def chosen_limit(limit: int | None, everything: bool, default: int) -> int | None:
    """The limit a listing uses: None with ``--all``, else ``-n`` (``default`` when absent).

    Raises:
        click.UsageError: both ``-n`` and ``--all``.
    """
    if everything:
        if limit is not None:
            raise click.UsageError("give -n/--limit or --all, not both")
        return None
    return default if limit is None else limit


def listed(read: Callable[[int | None], list[Any]], limit: int | None) -> tuple[list[Any], bool]:
    """Up to ``limit`` results of ``read`` (None: all), and whether more exist (it reads
    one more than ``limit`` to tell)."""
    if limit is None:
        return guarded(lambda: read(None)), False
    found = guarded(lambda: read(limit + 1))
    return found[:limit], len(found) > limit


def note_more(shown: int, what: str) -> None:
    """Say on stderr that a listing stopped at its limit (stdout keeps one JSON document)."""
    click.echo(
        f"(the first {plural(shown, what)}; more exist: -n N for more, --all for all)", err=True
    )


def limit_option(default: str) -> Callable[[Any], Any]:
    return click.option(
        "-n",
        "--limit",
        type=click.IntRange(min=0),
        default=None,
        help=f"At most N. Default: {default}.",
    )


ALL_OPTION = click.option(
    "--all",
    "everything",
    is_flag=True,
    help="All of them, without a limit (read a page of 1,000 per transaction).",
)


def shown(fact: Any) -> str:
    """A fact of ``info`` as text: numbers and names as they are, ``-`` for none, other
    values (an oldest item) as Python shows them."""
    if fact is None:
        return "-"
    if isinstance(fact, (int, str)) and not isinstance(fact, bool):
        return str(fact)
    return repr(fact)


@cli.command(short_help="Size, oldest item, leases, dead letters, delayed items.")
@shared_options()
@click.pass_obj
def info(context: Context) -> None:
    """Size, oldest item, requests in line, leases (in flight, expired), dead letters and
    delayed items, read at one read version.

    The counts are exact: info reads every lease, dead letter, delayed and request record
    (not their values), so it takes longer on a queue with millions of them.
    """
    queue = context.existing_queue(context.queue())
    facts = dataclasses.asdict(guarded(lambda: queue.info(context.database())))
    facts["codec"] = context.record(queue.subspace).codec  # None: none recorded
    width = max(len(name) for name in facts)
    lines = [f"{name.replace('_', ' '):<{width}}  {shown(facts[name])}" for name in facts]
    context.emit(facts, "\n".join(lines))


@cli.command(short_help="Show the next items without removing them.")
@limit_option("10")
@ALL_OPTION
@shared_options()
@click.pass_obj
def peek(context: Context, limit: int | None, everything: bool) -> None:
    """Show the next items without removing them (for a priority queue, in pop_min order)."""
    wanted = chosen_limit(limit, everything, 10)
    queue = context.existing_queue(context.queue())
    values, more = listed(lambda n: queue.peek_many(context.database(), n), wanted)
    context.emit(values, "\n".join(repr(value) for value in values) or "(empty)")
    if more:
        note_more(len(values), "item")


def lease_document(lease: Lease[Any], read_version: int) -> dict[str, Any]:
    seconds_left = (lease.expiry_version - read_version) / VERSIONS_PER_SECOND
    return {
        "id": lease.id,
        "deliveries": lease.deliveries,
        "expiry_version": lease.expiry_version,
        "released": lease.expiry_version == 0,
        "expired": lease.expiry_version < read_version,
        "seconds_left": round(seconds_left, 3),
        "value": lease.value,
    }


def lease_line(document: dict[str, Any]) -> str:
    if document["released"]:
        state = "released"
    elif document["expired"]:
        state = f"expired {-document['seconds_left']:.1f}s ago"
    else:
        state = f"{document['seconds_left']:.1f}s left"
    return f"{document['id']}  {document['deliveries']:>3}  {state:<20}  {document['value']!r}"


@cli.command(short_help="List leases in flight, with seconds left.")
@limit_option("100")
@ALL_OPTION
@shared_options()
@click.pass_obj
def leases(context: Context, limit: int | None, everything: bool) -> None:
    """List leases in flight, soonest expiry first: id, deliveries, seconds left (from a
    read version taken just before), value. Expired and released leases are listed too:
    the next claims take their items first."""
    wanted = chosen_limit(limit, everything, 100)
    queue = context.existing_queue(context.queue())
    database = context.database()
    version = guarded(lambda: run_in_retry_loop(database, lambda tr: tr.get_read_version().wait()))
    found, more = listed(lambda n: queue.leases(database, n), wanted)
    documents = [lease_document(lease, version) for lease in found]
    header = f"{'id':<32}  {'del':>3}  {'expiry':<20}  value"
    context.emit(
        {"read_version": version, "leases": documents},
        "\n".join([header, *map(lease_line, documents)]) if documents else "(no leases)",
    )
    if more:
        note_more(len(found), "lease")


def dead_letter_document(letter: DeadLetter[Any]) -> dict[str, Any]:
    return {
        "id": letter.id,
        "deliveries": letter.deliveries,
        "reason": letter.reason,
        "value": letter.value,
    }


@cli.command("dead-letters", short_help="List, requeue or purge dead letters.")
@limit_option("list 100; --requeue and --purge: all")
@ALL_OPTION
@click.option(
    "--requeue", is_flag=True, help="Enqueue them again at the back of the queue, oldest first."
)
@click.option(
    "--purge", is_flag=True, help="Remove them for good, with their values (needs --yes)."
)
@click.option("--yes", is_flag=True, help="Confirm --purge.")
@shared_options()
@click.pass_obj
def dead_letters(
    context: Context,
    limit: int | None,
    everything: bool,
    requeue: bool,
    purge: bool,
    yes: bool,
) -> None:
    """List dead letters, oldest first (id, deliveries, reason, value); or requeue them, or
    purge them. Each requeue or purge transaction takes effect exactly once."""
    if requeue and purge:
        raise click.UsageError("give --requeue or --purge, not both")
    if yes and not purge:
        raise click.UsageError("--yes confirms --purge")
    acting = requeue or purge
    wanted = chosen_limit(limit, everything, EVERYTHING if acting else 100)
    queue = context.existing_queue(context.queue())
    database = context.database()
    if purge:
        if not yes:
            raise click.ClickException("--purge removes dead letters for good: add --yes to do it")
        purged = guarded(lambda: queue.purge_dead_letters(database, wanted))
        context.emit({"purged": purged}, f"purged {plural(purged, 'dead letter')}")
        return
    if requeue:
        count = EVERYTHING if wanted is None else wanted
        requeued = guarded(lambda: queue.requeue_dead_letters(database, count))
        context.emit({"requeued": requeued}, f"requeued {plural(requeued, 'dead letter')}")
        return
    found, more = listed(lambda n: queue.dead_letters(database, n), wanted)
    documents = [dead_letter_document(letter) for letter in found]
    lines = [f"{d['id']}  {d['deliveries']:>3}  {d['reason']}  {d['value']!r}" for d in documents]
    header = f"{'id':<32}  {'del':>3}  reason  value"
    context.emit(documents, "\n".join([header, *lines]) if lines else "(no dead letters)")
    if more:
        note_more(len(found), "dead letter")


# -- changing --------------------------------------------------------------------------------


@cli.command(short_help="Add a value to the queue.")
@click.argument("value")
@click.option("--priority", type=int, help="The priority (priority queues only; required there).")
@click.option("--int", "as_int", is_flag=True, help="Push VALUE as an integer.")
@click.option(
    "--delay",
    type=float,
    default=None,
    show_default="none",
    help="Seconds before consumers may take it.",
)
@shared_options()
@click.pass_obj
def push(
    context: Context, value: str, priority: int | None, as_int: bool, delay: float | None
) -> None:
    """Add VALUE to the queue (a string; bytes with --codec raw; --int for an integer;
    with --codec json, VALUE is parsed as JSON). Creates the queue."""
    queue = context.queue()
    item = parsed_value(value, as_int, context.codec)
    for check, what in (
        (lambda: queue.codec.encode(item), "VALUE"),
        (lambda: check_delay(delay), "--delay"),
    ):
        try:  # checked before anything is read or written
            check()
        except (TypeError, ValueError) as error:
            raise click.BadParameter(first_line(error), param_hint=what) from None
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


def parsed_value(value: str, as_int: bool, codec: str) -> Any:
    """VALUE as the codec stores it: an int with ``--int``; bytes with the raw codec (the
    argument's bytes as given, UTF-8 or not); a JSON document with the json codec (strict:
    no NaN or Infinity); else the string.

    Raises:
        click.BadParameter, click.UsageError: VALUE is none of those (exit status 2).
    """
    if as_int:
        if codec == "raw":
            raise click.UsageError("--int does not apply to --codec raw (values are bytes)")
        try:
            return int(value)
        except ValueError:
            raise click.BadParameter(f"{value!r} is not an integer", param_hint="VALUE") from None
    if codec == "raw":
        return os.fsencode(value)  # the bytes given, even when they are not UTF-8
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise click.BadParameter(
            f"is not valid UTF-8, which the {codec} codec stores strings as: use --codec raw "
            "for bytes (when creating the queue)",
            param_hint="VALUE",
        ) from None
    if codec != "json":
        return value
    try:
        return json.loads(value, parse_constant=_refuse_constant)
    except ValueError as error:
        raise click.BadParameter(f"{value!r} is not JSON ({error})", param_hint="VALUE") from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON: JSON has no NaN or infinity")


MAX_OPTION = click.option(
    "--max", "max_end", is_flag=True, help="From the highest priority (priority queues only)."
)


def check_max(queue: Queue[Any] | PriorityQueue[Any], max_end: bool) -> None:
    if max_end and not isinstance(queue, PriorityQueue):
        raise click.UsageError("--max applies to priority queues (--priority-queue)")


@cli.command(short_help="Remove and show up to N items.")
@click.option(
    "-n", "--limit", "count", type=click.IntRange(min=1), default=1, help="At most N items."
)
@MAX_OPTION
@shared_options()
@click.pass_obj
def pop(context: Context, count: int, max_end: bool) -> None:
    """Remove and show up to N items ("(empty)" when there is none: exit status 0)."""
    queue = context.queue()
    check_max(queue, max_end)
    context.existing_queue(queue)

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


@cli.command(short_help="Remove and print items as they arrive.")
@click.option(
    "-n",
    "--limit",
    "count",
    type=click.IntRange(min=1),
    default=None,
    show_default="no limit",
    help="Stop after N items.",
)
@click.option(
    "--idle-timeout",
    type=float,
    default=None,
    callback=positive_seconds,
    show_default="wait forever",
    help="Stop after S seconds without an item.",
)
@MAX_OPTION
@shared_options()
@click.pass_obj
def tail(context: Context, count: int | None, idle_timeout: float | None, max_end: bool) -> None:
    """Remove items as they arrive and print each (a blocking dequeue: a watch, no
    polling), until Ctrl-C (exit status 0), -n items or --idle-timeout. With --json, one
    JSON document per line. An item taken as Ctrl-C arrives may be lost; use "work" for
    at-least-once processing."""
    queue = context.queue()
    check_max(queue, max_end)
    context.existing_queue(queue)
    database = context.database()

    def take(wait: float) -> Any:
        if isinstance(queue, Queue):
            return queue.dequeue(database, block=True, timeout=wait)
        return queue.pop(database, max=max_end, block=True, timeout=wait)

    taken = 0
    try:
        idle_until = None if idle_timeout is None else time.monotonic() + idle_timeout
        while count is None or taken < count:
            wait = (
                TAIL_WAIT if idle_until is None else min(TAIL_WAIT, idle_until - time.monotonic())
            )
            if wait <= 0:
                break
            value = guarded(functools.partial(take, wait))
            if value is None:
                continue
            taken += 1
            click.echo(json.dumps(jsonable(value)) if context.as_json else repr(value))
            if idle_timeout is not None:
                idle_until = time.monotonic() + idle_timeout
    except KeyboardInterrupt:
        pass  # Ctrl-C: the way to stop; exit status 0


@cli.command(short_help="Remove everything in the queue (needs --yes).")
@click.option("--yes", is_flag=True, help="Confirm: really remove every item and all metadata.")
@shared_options()
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


@cli.command(short_help="Run the worker loop with a handler.")
@click.argument("handler")
@click.option("--lease", type=float, default=30.0, show_default=True, help="Seconds per lease.")
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Jobs run at once (threads).",
)
@click.option(
    "--backoff", type=float, default=1.0, show_default=True, help="Seconds before the first retry."
)
@click.option(
    "--max-backoff",
    type=float,
    default=300.0,
    show_default=True,
    help="The longest delay before a retry, in seconds.",
)
@click.option(
    "--max-deliveries",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="Deliveries before a failing item becomes a dead letter.",
)
@click.option(
    "--until-empty",
    is_flag=True,
    help="Stop once nothing is claimable and each failed item was retried to an end.",
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
    queue = context.existing_queue(context.queue(max_deliveries=max_deliveries), must_exist=False)
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


class BenchArgumentParser(argparse.ArgumentParser):
    """The benchmark's options: a bad one is a one-line click usage error (exit status 2),
    not argparse's usage block; its help is laid out as click's (``argparse_help``)."""

    def error(self, message: str) -> NoReturn:
        raise click.UsageError(message)

    def format_help(self) -> str:
        return argparse_help(self)


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
    try:  # run_all checks --plot's matplotlib before it runs anything
        results = benchmark.run_all(parsed, fresh, where, as_json=context.as_json)
    except benchmark.BenchmarkError as error:
        raise click.ClickException(str(error)) from None
    benchmark.check(results)


def main() -> None:
    """The console script's entry point: every error is one line on stderr, ``fdbqueue:
    error: ...`` (usage errors: exit status 2; the others: 1; :class:`CommandLine`), never a
    traceback."""
    try:
        cli(obj={}, prog_name=PROGRAM)
    except Exception as error:  # a bug or an unforeseen failure: still one line
        click.echo(f"{PROGRAM}: error: {type(error).__name__}: {first_line(error)}", err=True)
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())  # type: ignore[func-returns-value]
