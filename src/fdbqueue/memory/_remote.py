"""A connected client's side of the database: :class:`RemoteServer` stands in for
:class:`fdbqueue.memory._server.Server` (same methods) and serves them from a server process
(:class:`fdbqueue.memory.MemoryServer`) over one TCP connection (:mod:`fdbqueue.memory._wire`).

Everything a transaction's client decides stays here, in the same code as in-process
(:mod:`fdbqueue.memory._transaction`, :mod:`fdbqueue.memory._reads`): read-your-writes,
conflict ranges, sizes, options, retries and their backoff (drawn from this client's own
seeded generator), the simulated GRV and read latencies (the server's, learnt with each read
version), the watch limit. What reaches the server is data: a read version request, a point
read, a range page or a version check at a read version, a commit request with the watches
to make active; and the test hooks (statistics, time, faults, latency).

Threads: callers send requests on the shared socket (one lock for writing) and wait on a
future (so :mod:`fdbqueue.asyncio` takes the wait over); one reader thread per connection
completes them as answers arrive, and completes watches when the server tells they fired. It
also watches the deadlines: a request unanswered for ``timeout`` seconds ends the connection.
When the connection ends, calls waiting fail: a commit with 1021 (its result is unknown, as
when a real cluster's proxy goes away), any other call with :class:`ServerUnavailable`, which
names the address and is not retried; watches fail with it too. The next call connects again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import random
import select
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from fdbqueue.memory._database import Database
from fdbqueue.memory._errors import FDBError
from fdbqueue.memory._faults import Faults
from fdbqueue.memory._futures import Future
from fdbqueue.memory._keys import key_after
from fdbqueue.memory._options import DEFAULT_MAX_WATCHES as MAX_WATCHES
from fdbqueue.memory._resolver import CommitRequest
from fdbqueue.memory._server import Latency
from fdbqueue.memory._wall_clock import let_pass
from fdbqueue.memory._watch_registry import WatchLimit
from fdbqueue.memory._watches import PendingWatches, Watch
from fdbqueue.memory._wire import (
    HELLO_BYTES,
    MAGIC,
    PROTOCOL,
    FrameReader,
    decode,
    encode,
    format_address,
    parse_address,
    receive_exactly,
)

__all__ = ["RemoteServer", "RemoteView", "ServerRefused", "ServerUnavailable", "connect"]

T = TypeVar("T")

#: Rows of a range page when the read gives no hint (later pages double, up to PAGE_ROWS_MAX).
PAGE_ROWS = 128
PAGE_ROWS_MAX = 10_000
#: How often, in seconds, the reader thread looks at the requests' deadlines.
DEADLINE_TICK = 0.2
COMMIT_UNKNOWN_RESULT = 1021


class ServerUnavailable(ConnectionError):
    """The fdbqueue.memory server cannot be reached, went away, or did not answer in time.
    Not an FDBError: retry loops do not retry it (a commit in flight fails with
    FDBError 1021 instead, as on a real cluster)."""


class ServerRefused(ServerUnavailable):
    """The fdbqueue.memory server refused the connection (a wrong or missing token, or
    another protocol version)."""


_PASSED_LOCK = threading.Lock()
_PASSED: dict[str, float] = {}  # address -> the server's time passed this process applied


def _follow_time_passed(address: str, passed: float) -> None:
    """Move this process's wall clock by what the server at ``address`` let pass since the
    process last heard (once per process, whatever its connections to that server)."""
    with _PASSED_LOCK:
        applied = _PASSED.get(address, 0.0)
        if passed > applied:
            _PASSED[address] = passed
            let_pass(passed - applied)


class _Pending:
    __slots__ = ("commit", "deadline", "future")

    def __init__(self, future: Future, deadline: float, commit: bool) -> None:
        self.future, self.deadline, self.commit = future, deadline, commit


class Link:
    """One open socket to the server: the requests waiting on it and the watches it made
    active, failed together when it ends (see the module docstring). Thread-safe."""

    def __init__(self, connection: Connection, sock: socket.socket) -> None:
        self._connection = connection
        self._sock = sock
        self._where = connection.where
        self._timeout = connection.timeout
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._watches: dict[int, Future] = {}
        self._ids = itertools.count(1)
        self.closed = False
        threading.Thread(target=self._read, name="fdbqueue.memory-client", daemon=True).start()

    # -- requests ---------------------------------------------------------------------------

    def call(self, operation: str, *arguments: Any, commit: bool = False) -> Any:
        """Send a request and wait for its answer (see :meth:`Connection.call`)."""
        return self.send(operation, arguments, commit=commit).wait()

    def send(self, operation: str, arguments: tuple[Any, ...], commit: bool = False) -> Future:
        """Send a request; a future of its answer."""
        future = Future()
        request_id = next(self._ids)
        frame = encode((request_id, operation, self._connection.take_counts(), arguments))
        with self._lock:
            if self.closed:
                future.set_error(
                    FDBError(COMMIT_UNKNOWN_RESULT) if commit else self._unavailable("closed")
                )
                return future
            self._pending[request_id] = _Pending(future, time.monotonic() + self._timeout, commit)
        try:
            with self._send_lock:
                self._sock.sendall(frame)
        except OSError as error:
            self.lose(f"sending failed: {error}")
        return future

    def tell(self, operation: str, *arguments: Any) -> None:
        """Send a request whose answer no one waits for (best effort)."""
        try:
            frame = encode((next(self._ids), operation, (), arguments))
            with self._send_lock:
                self._sock.sendall(frame)
        except OSError:
            pass

    # -- watches ----------------------------------------------------------------------------

    def add_watches(self, futures: list[Future]) -> list[int]:
        """Ids for watches about to be sent with a commit (the server tells them by id)."""
        ids = [next(self._ids) for _ in futures]
        with self._lock:
            for watch_id, future in zip(ids, futures, strict=True):
                self._watches[watch_id] = future
        for watch_id, future in zip(ids, futures, strict=True):
            future.on_ready(functools.partial(self._watch_done, watch_id))
        return ids

    def drop_watches(self, ids: list[int]) -> None:
        """Forget watches whose commit failed (the transaction fails them)."""
        with self._lock:
            for watch_id in ids:
                self._watches.pop(watch_id, None)

    def _watch_done(self, watch_id: int, _future: Future) -> None:
        """A watch became ready here (cancelled, say) before the server told it fired: have
        the server drop it."""
        with self._lock:
            known = self._watches.pop(watch_id, None) is not None
        if known and not self.closed:
            self.tell("cancel_watch", watch_id)

    # -- the reader thread ------------------------------------------------------------------

    def _read(self) -> None:
        sock = self._sock
        reader = FrameReader()
        reason = "the server closed the connection"
        try:
            while not self.closed:
                ready, _, _ = select.select([sock], [], [], DEADLINE_TICK)
                if not ready:
                    if self._overdue():
                        reason = f"no answer within {self._timeout:g} s"
                        return
                    continue
                data = sock.recv(1 << 16)
                if not data:
                    return
                for message in reader.feed(data):
                    self._deliver(message)
        except (OSError, ValueError) as error:
            reason = f"the connection failed: {error}"
        finally:
            self.lose(reason)

    def _overdue(self) -> bool:
        now = time.monotonic()
        with self._lock:
            return any(pending.deadline < now for pending in self._pending.values())

    def _deliver(self, message: tuple[Any, ...]) -> None:
        if message[0] == 0:  # a watch: (0, "watch", id, code)
            with self._lock:
                future = self._watches.pop(message[2], None)
            if future is not None:
                if message[3]:
                    future.set_error(FDBError(message[3]))
                else:
                    future.set_result(None)
            return
        request_id, status, result = message
        with self._lock:
            pending = self._pending.pop(request_id, None)
        if pending is None:
            return  # a told request's answer
        if status == 0:
            pending.future.set_result(result)
        elif status == 1:
            pending.future.set_error(FDBError(result))
        else:
            kind = {"ValueError": ValueError, "TypeError": TypeError}.get(result[0], RuntimeError)
            pending.future.set_error(kind(f"{result[1]} (from {self._where})"))

    def _unavailable(self, reason: str) -> ServerUnavailable:
        return ServerUnavailable(f"lost {self._where}: {reason}")

    def lose(self, reason: str) -> None:
        """End the link: fail what waits on it (see the module docstring). Idempotent."""
        with self._lock:
            first = not self.closed
            self.closed = True
            pending, self._pending = self._pending, {}
            watches, self._watches = self._watches, {}
        if first:
            self._connection.forget(self)
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()
        for request in pending.values():
            if request.commit:
                request.future.set_error(FDBError(COMMIT_UNKNOWN_RESULT))
            else:
                request.future.set_error(self._unavailable(reason))
        for future in watches.values():
            future.set_error(self._unavailable(reason))


class Connection:
    """A client's connection to a server: one :class:`Link` at a time, made again after one
    ends. Thread-safe.

    Args:
        host, port: the server's.
        token: the secret the server asks for, or None.
        timeout: seconds to connect, and the most a call waits for its answer.
    """

    def __init__(self, host: str, port: int, token: str | None, timeout: float) -> None:
        self.host, self.port, self.token, self.timeout = host, port, token, timeout
        self.address = format_address(host, port)
        self.where = f"the fdbqueue.memory server at {self.address}"
        self._lock = threading.Lock()
        self._link: Link | None = None
        self._counts: Counter[str] = Counter()

    def link(self) -> Link:
        """The open link, connecting (and saying hello) first if need be.

        Raises:
            ServerUnavailable: nothing answers there within the timeout.
            ServerRefused: the server refused the token or the protocol.
        """
        link = self._link
        if link is not None and not link.closed:
            return link
        with self._lock:
            link = self._link
            if link is None or link.closed:
                link = self._link = Link(self, self._open())
            return link

    def _open(self) -> socket.socket:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        except OSError as error:
            raise ServerUnavailable(
                f"cannot reach {self.where}: {error.strerror or error} (is `fdbqueue memory "
                "serve` running there?)"
            ) from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(MAGIC + encode(("hello", PROTOCOL, self.token)))
            size = int.from_bytes(receive_exactly(sock, 4), "big")
            if size > HELLO_BYTES:
                raise ConnectionError("not an fdbqueue.memory server")
            answer = decode(receive_exactly(sock, size))
        except (OSError, ValueError) as error:
            sock.close()
            raise ServerUnavailable(f"{self.where} did not answer the hello: {error}") from None
        if answer[:1] != ("ok",):
            sock.close()
            reason = answer[1] if len(answer) > 1 else "refused"
            raise ServerRefused(f"{self.where} refused the connection: {reason}")
        sock.settimeout(None)
        return sock

    def forget(self, link: Link) -> None:
        with self._lock:
            if self._link is link:
                self._link = None

    def close(self) -> None:
        """Close the link (calls waiting fail as if the server went away)."""
        link = self._link
        if link is not None:
            link.lose("the connection was closed")

    def count(self, name: str, amount: int) -> None:
        """Add to a statistic; sent with the next request."""
        with self._lock:
            self._counts[name] += amount

    def take_counts(self) -> tuple[tuple[str, int], ...]:
        """The statistics counted since the last request, now sent."""
        if not self._counts:
            return ()
        with self._lock:
            counts = tuple(self._counts.items())
            self._counts.clear()
        return counts

    def call(self, operation: str, *arguments: Any, commit: bool = False) -> Any:
        """Send a request and wait for its answer.

        Raises:
            FDBError: the server's (1021 for a commit whose connection ended first).
            ServerUnavailable: the connection could not be made, or ended first.
            ValueError, TypeError: the server refused an argument.
        """
        return self.link().call(operation, *arguments, commit=commit)


class RemoteView:
    """The key space as of one read version, read from the server: the interface of
    :class:`fdbqueue.memory._storage.VersionView` that reads use. Each ``get`` and each page
    of a ``scan`` is one request, checked at the server (1007, 1009) as any read."""

    def __init__(self, connection: Connection, version: int) -> None:
        self._connection = connection
        self.version = version
        self.requests = 0

    def refresh(self) -> None:
        """Nothing to do: the server brings its view up to date for each request."""

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key`` at this version (one request)."""
        self.requests += 1
        value: bytes | None = self._connection.call("get", self.version, key)
        return value

    def scan(
        self, begin: bytes, end: bytes, reverse: bool = False, rows: int = 0, byte_target: int = 0
    ) -> Iterator[tuple[bytes, bytes]]:
        """Key-value pairs in ``[begin, end)`` at this version, lazily, a page per request:
        the first of ``rows`` rows and about ``byte_target`` bytes (the caller's hint; else
        :data:`PAGE_ROWS` rows), each next twice as large."""
        page_rows = rows or PAGE_ROWS
        page_bytes = byte_target
        while begin < end:
            self.requests += 1
            pairs, more = self._connection.call(
                "scan", self.version, begin, end, reverse, page_rows, page_bytes
            )
            yield from pairs
            if not more or not pairs:
                return
            if reverse:
                end = pairs[-1][0]
            else:
                begin = key_after(pairs[-1][0])
            page_rows = min(page_rows * 2, PAGE_ROWS_MAX)
            page_bytes *= 2


class RemoteServer:
    """The database side of a connected database's transactions, served by a server
    process: :class:`fdbqueue.memory._server.Server`'s methods (see the module docstring).
    Thread-safe."""

    def __init__(self, connection: Connection, seed: int | None = None) -> None:
        self._connection = connection
        self.watch_limit = WatchLimit(MAX_WATCHES)
        self._random = random.Random(seed)
        self._random_lock = threading.Lock()
        self._latency = Latency(*connection.call("latency"))

    @property
    def address(self) -> str:
        """The server's ``memory://HOST:PORT``."""
        return self._connection.address

    def close(self) -> None:
        """Close the connection (the next call makes a new one)."""
        self._connection.close()

    # -- statistics and test hooks ----------------------------------------------------------

    def count(self, name: str, amount: int = 1) -> None:
        """Add ``amount`` to the statistic ``name`` (sent with the next request)."""
        self._connection.count(name, amount)

    def count_read(self, pairs: int, size: int) -> None:
        """Count a read's pairs and bytes (sent with the next request)."""
        self._connection.count("keys_read", pairs)
        self._connection.count("bytes_read", size)

    def stats(self) -> dict[str, int]:
        return dict(self._connection.call("stats"))

    def reset_stats(self) -> None:
        self._connection.call("reset_stats")

    @property
    def latency(self) -> Latency:
        """The server's latency as last learnt (with each read version); setting it sets the
        server's."""
        return self._latency

    @latency.setter
    def latency(self, latency: Latency) -> None:
        self._connection.call("set_latency", *dataclasses.astuple(latency))
        self._latency = latency

    @property
    def faults(self) -> Faults:
        return Faults(*self._connection.call("faults"))

    @faults.setter
    def faults(self, faults: Faults) -> None:
        self._connection.call("set_faults", *dataclasses.astuple(faults))

    def advance_time(self, seconds: float) -> None:
        self._connection.call("advance_time", seconds)

    def pass_time(self, seconds: float) -> None:
        """Let ``seconds`` pass at the server, and on this process's wall clock (every
        client's follows at its next read version)."""
        passed = self._connection.call("pass_time", seconds)
        _follow_time_passed(self._connection.address, passed)

    def in_flight(self) -> int:
        in_flight: int = self._connection.call("in_flight")
        return in_flight

    def settle(self) -> int:
        applied: int = self._connection.call("settle")
        return applied

    def random_fraction(self) -> float:
        """A draw in ``[0, 1)`` from this client's seeded generator (backoff jitter)."""
        with self._random_lock:
            return self._random.random()

    # -- what transactions reach ------------------------------------------------------------

    def recovering(self) -> bool:
        return False  # the server's read version requests and commits wait for it

    def wait_for_recovery(self) -> None:
        """Nothing here: the server's read version request waits out a recovery."""

    def read_version(self) -> int:
        """A read version from the server (one request); learns the server's latency and
        the time its clients let pass."""
        version, latency, passed = self._connection.call("grv")
        if latency != (self._latency.grv, self._latency.read, self._latency.commit):
            self._latency = Latency(*latency)
        if passed:
            _follow_time_passed(self._connection.address, passed)
        return int(version)

    def view(self, read_version: int) -> RemoteView:
        return RemoteView(self._connection, read_version)

    def read(self, view: RemoteView, read: Callable[[RemoteView], T], counted: bool = True) -> T:
        """Run ``read`` on ``view``: its requests are checked at the server (1007, 1009); one
        that needed none is checked with one request, as every read is."""
        if counted:
            self._connection.count("reads", 1)
        before = view.requests
        result = read(view)
        if view.requests == before:
            self._connection.call("check", view.version)
        return result

    def commit(
        self, request: CommitRequest, watches: PendingWatches | list[Watch]
    ) -> tuple[int, bytes | None]:
        """Send the commit and the watches to make active (a read-only commit without
        watches sends nothing). 1021 when the connection ends before the answer."""
        waiting = [watch for watch in watches if not watch[2].is_ready()]
        if request.read_only and not waiting:
            if isinstance(watches, PendingWatches):
                watches.take_all()
            return -1, None
        link = self._connection.link()
        ids = link.add_watches([future for _key, _value, future in waiting])
        try:
            version, versionstamp = link.call(
                "commit",
                request.read_version,
                tuple(request.read_ranges),
                tuple(request.write_ranges),
                tuple(request.mutations),
                request.keys_written,
                request.bytes_written,
                tuple(
                    (watch_id, key, value)
                    for watch_id, (key, value, _f) in zip(ids, waiting, strict=True)
                ),
                commit=True,
            )
        except BaseException:
            link.drop_watches(ids)
            raise
        if isinstance(watches, PendingWatches):
            watches.take_all()
        return int(version), versionstamp

    def open_watch(self, future: Future) -> bool:
        """Count a new watch among this client's outstanding ones; False at the limit."""
        return self.watch_limit.open(future)


def connect(address: str, *, token: str | None = None, timeout: float = 10.0) -> Database:
    """Connect to an in-memory database served by another process (``fdbqueue memory serve``
    or :func:`serve`): a :class:`Database` with :func:`open`'s API whose transactions' database
    side (read versions, reads, commits with their conflict checks, atomic operations,
    versionstamps, watches, the five-second window, faults) runs at the server, so that
    several processes share one database. The client side (read-your-writes, conflict
    ranges, sizes, options, retries) runs here, the same code as :func:`open`'s.

    ``db.faults``, ``db.latency``, ``db.stats()``, ``db.reset_stats()``, ``db.advance_time()``,
    ``db.pass_time()``, ``db.settle()`` and ``db.in_flight`` act on the server, for every
    client of it (``pass_time`` moves every client process's wall clock at its next read
    version); the watch limit (``db.options.set_max_watches``) and the retry backoff's seed
    are this client's.

    Args:
        address: ``memory://HOST:PORT``, as the server prints it.
        token: the server's token, when it asks for one.
        timeout: seconds to connect, and the most any call waits for the server's answer
            (> 0). A longer wait ends the connection: the call fails as below.

    Returns:
        A thread-safe :class:`Database` (connected once before it is returned; after the
        connection ends, the next call connects again).

    Raises:
        ValueError: ``address`` is not ``memory://HOST:PORT``, or ``timeout`` is not > 0.
        TypeError: ``token`` is not a str.
        ServerUnavailable: nothing answers at ``address`` within ``timeout`` (a
            ``ConnectionError`` naming it; not retried by retry loops).
        ServerRefused: the server refused ``token`` (a :class:`ServerUnavailable`).

    Later calls raise :class:`ServerUnavailable` when the server stopped or cannot be reached,
    within ``timeout``; a commit whose answer is lost with the connection fails with
    ``FDBError(1021)`` (``commit_unknown_result``), as on a real cluster; watches of a lost
    connection fail with :class:`ServerUnavailable`.

    Cost: one TCP connection and a reader thread per Database; per transaction a round trip
    for the read version, one per read that reaches the database (a range read: one per
    page) and one for a commit that writes.
    """
    host, port = parse_address(address)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"timeout must be a number of seconds > 0, not {timeout!r}")
    if token is not None and not isinstance(token, str):
        raise TypeError(f"token must be a str, not {type(token).__name__}")
    connection = Connection(host, port, token, float(timeout))
    connection.link()
    return Database(server=RemoteServer(connection))
