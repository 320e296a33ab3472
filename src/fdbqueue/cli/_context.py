"""What every command of :mod:`fdbqueue.cli` shares: the options chosen (:class:`Context`), the
database and the queue they name, and how errors become one line."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import importlib
import importlib.metadata
import json
import os
import sys
import threading
from typing import Any

import click
import fdb.tuple
from fdb.subspace_impl import Subspace

from fdbqueue import __version__, memory
from fdbqueue._storage import features
from fdbqueue._storage.store import anything_stored
from fdbqueue._storage.type_records import parse_type
from fdbqueue._transactions.receipts import clear_finished_receipts
from fdbqueue._transactions.transactional import run_in_retry_loop
from fdbqueue.binding import describe_fdb_error
from fdbqueue.binding import open_database as open_cluster
from fdbqueue.errors import BindingMismatchError, ClientLibraryMissingError
from fdbqueue.priority import PriorityQueue
from fdbqueue.queue import Queue

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

    def __init__(
        self,
        options: dict[str, Any],
        database: Any,
        *,
        stop: threading.Event | None = None,
        in_shell: bool = False,
    ) -> None:
        self.options = options
        self._database = database
        #: set by ``fdbqueue shell`` for a ``work`` in the background: its ``stop`` command
        self.stop = stop
        #: the command runs inside ``fdbqueue shell`` (one database for the session)
        self.in_shell = in_shell
        self._record: Record | None = None
        self._clears_receipts = False  # the command clears its calls' receipts as it ends
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
        if self.options.get("memory_address") and self.options.get("cluster_file") is not None:
            raise click.UsageError(
                "--memory=ADDRESS (or FDBQUEUE_MEMORY) and --cluster-file exclude each other: "
                "one names an in-memory database's server, the other a cluster"
            )

    @property
    def given_database(self) -> Any:
        """The database the command line was given (``main(database=...)``, a test's), or
        one :meth:`database` opened already; None before either."""
        return self._database

    def database(self) -> Any:
        if self._database is None:
            self._database = open_database(
                self.options["cluster_file"],
                self.options["api_version"],
                self.options["use_memory"],
                self.options["timeout"],
                memory_address=self.options.get("memory_address"),
            )
        if not self._clears_receipts and not self.in_shell:
            self._clears_receipts = True
            command = click.get_current_context(silent=True)
            if command is not None:
                command.call_on_close(self._clear_receipts)
        return self._database

    def _clear_receipts(self) -> None:
        """A one-shot command's process ends with it: clear the receipts of its calls that
        returned, which nothing would clear before they expire (a day). Best effort: one
        that fails leaves them to expire. (A shell's process goes on: its next calls clear
        them.)"""
        with contextlib.suppress(Exception):
            clear_finished_receipts(self._database)

    def queue_name(self) -> str:
        """How messages name the queue: ``queue ('app', 'jobs')`` or ``directory 'app/jobs'``."""
        if self.options.get("queue") is not None:
            return f"queue {prefix_elements(self.options['queue'])!r}"
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
        shards = self.shards(self.record(subspace))
        try:
            return kind(subspace, codec=self.codec, shards=shards, **options)
        except ValueError as error:  # a prefix too long for FoundationDB's keys
            raise click.UsageError(first_line(error)) from None

    def shards(self, record: Record) -> int:
        """The queue's shard count: its record's, else ``--shards``, else 1.

        Raises:
            click.ClickException: ``--shards`` contradicts the record.
        """
        given = self.options.get("shards")
        if record.type is None:
            return int(given or 1)
        _name, recorded = parse_type(record.type.encode())
        if given is not None and given != recorded:
            raise click.ClickException(
                f"{self.queue_name()} has {recorded} shard{'s' if recorded > 1 else ''}: drop "
                f"--shards {given} (an existing queue's shard count is read from its record)"
            )
        return recorded

    def record(self, subspace: Subspace) -> Record:
        """What is stored under the queue's prefix: whether anything is, and the type and
        codec recorded (read once, then remembered). Cost: one snapshot range read
        (``limit=1``) and three snapshot point reads (the feature record, and the type and
        codec records of a queue written before it), in one transaction."""
        if self._record is None:
            prefix = subspace.key()
            metadata = prefix + b"\xff"
            features_key = metadata + fdb.tuple.pack(features.KEY)
            type_key = metadata + fdb.tuple.pack(("type",))  # a queue's before that record
            codec_key = metadata + fdb.tuple.pack(("codec",))

            def look(tr: Any) -> Record:
                record = tr.snapshot.get(features_key)
                older = tr.snapshot.get(type_key), tr.snapshot.get(codec_key)
                stored = anything_stored(tr, subspace)
                if record.present():
                    return Record(stored, *features.recorded_type(bytes(record)))
                type_name, codec = (
                    bytes(found).decode(errors="replace") if found.present() else None
                    for found in older
                )
                return Record(stored, type_name, codec)

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
            hint = ""
            if self.options.get("use_memory") and not self.in_shell:
                hint = (
                    "; --memory gives each command a new, empty database: run the commands "
                    "in `fdbqueue --memory shell` to keep one"
                )
            raise click.ClickException(
                f"{self.queue_name()} does not exist (nothing stored under its prefix){hint}"
            )
        wanted = type(queue).__name__
        recorded = None if record.type is None else parse_type(record.type.encode())[0]
        if recorded is not None and recorded != wanted:
            add = recorded == "PriorityQueue"
            hint = "add --priority-queue" if add else "drop --priority-queue"
            raise click.ClickException(
                f"{self.queue_name()} holds a {recorded}, not a {wanted}: {hint}"
            )
        return queue

    def emit(self, document: Any, text: str) -> None:
        click.echo(json.dumps(jsonable(document)) if self.as_json else text)


def open_database(
    cluster_file: str | None,
    api_version: int | None,
    use_memory: bool,
    timeout: float,
    memory_address: str | None = None,
) -> Any:
    """Open the in-memory database, or a cluster through the ``fdb`` binding.

    ``use_memory`` (a bare ``--memory``): a fresh in-memory database, whatever
    ``memory_address`` says; else ``memory_address`` (``--memory=ADDRESS``, or
    ``FDBQUEUE_MEMORY``): the in-memory database a server holds there
    (:func:`fdbqueue.memory.connect`, with the token ``FDBQUEUE_MEMORY_TOKEN`` and ``timeout``
    seconds for each call). ``api_version`` None lets
    :func:`fdbqueue.binding.choose_api_version` choose.

    Raises:
        click.UsageError: ``memory_address`` is not ``memory://HOST:PORT``.
        click.ClickException: the server cannot be reached or refuses the token; libfdb_c is
            missing, the binding does not suit it, the API version is out of range, or the
            cluster file cannot be used.
    """
    if use_memory:
        return memory.open()
    if memory_address:
        try:
            return memory.connect(
                memory_address, token=os.environ.get("FDBQUEUE_MEMORY_TOKEN"), timeout=timeout
            )
        except ValueError as error:
            raise click.UsageError(f"--memory={memory_address}: {error}") from None
        except memory.ServerUnavailable as error:
            raise click.ClickException(str(error)) from None
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


def prefix_elements(prefix: str) -> tuple[str, ...]:
    """The elements ``--queue`` names: its comma-separated parts, without the whitespace
    around each (``"app, jobs"`` is ``("app", "jobs")``)."""
    return tuple(element.strip() for element in prefix.split(","))


def prefix_subspace(prefix: str) -> Subspace:
    """The Subspace that ``--queue`` names: its comma-separated elements, as strings
    (:func:`prefix_elements`).

    Raises:
        click.UsageError: an empty element (``--queue ""``, ``a,,b``, ``"a, ,b"``), or bytes
            that are not UTF-8 (the tuple layer stores strings as UTF-8).
    """
    elements = prefix_elements(prefix)
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
    return Subspace(elements)


def open_directory(database: Any, path: str) -> Any:
    """Open the directory ``path`` (``a/b``; ``"a / b"`` too: the whitespace around each part
    is dropped) with FoundationDB's directory layer.

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

        parts = (part.strip() for part in path.split("/"))
        return fdb.directory.open(database, tuple(part for part in parts if part))
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
