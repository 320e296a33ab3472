"""A server process's side of a connected in-memory database: :class:`MemoryServer` holds one
in-memory database and serves the database side of its clients' transactions
(:class:`fdbqueue.memory._server.Server`: read versions, reads at a read version, commits,
watches) and its test hooks (statistics, time, faults, latency) over TCP
(:mod:`fdbqueue.memory._wire`).

Threads: one accepts connections (:meth:`MemoryServer.serve_forever`); one per connection
reads its requests and answers them in order, at once for reads (which never wait); a read
version request during a recovery and a commit that sleeps a simulated commit latency or
waits out a recovery go to a pool of threads, so that they do not hold up the connection's
other requests. A watch that fires is told to its connection by the thread that fires it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import functools
import hmac
import select
import socket
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from fdbqueue.memory._atomic import OPERATIONS
from fdbqueue.memory._database import Database
from fdbqueue.memory._errors import FDBError
from fdbqueue.memory._faults import Faults
from fdbqueue.memory._futures import Future
from fdbqueue.memory._resolver import CommitRequest
from fdbqueue.memory._server import STAT_NAMES, Latency, Server
from fdbqueue.memory._storage import VersionView
from fdbqueue.memory._wire import (
    DEFAULT_PORT,
    HELLO_BYTES,
    MAGIC,
    PROTOCOL,
    FrameReader,
    decode,
    encode,
    format_address,
    is_loopback,
    receive_exactly,
)

__all__ = ["MemoryServer"]

#: Seconds a new connection has to send its hello.
HELLO_SECONDS = 5.0
#: Read views a connection keeps (by read version), so that a transaction's reads need not
#: rebuild the view of its version each time.
VIEWS_KEPT = 64
_STAT_NAMES = frozenset(STAT_NAMES)
_MUTATION_SHAPES = {
    "set": 2,
    "clear": 2,
    "atomic": 3,
    "versionstamped_key": 2,
    "versionstamped_value": 2,
}


class MemoryServer:
    """One in-memory database served over TCP to :func:`fdbqueue.memory.connect` clients.

    Made by :func:`fdbqueue.memory.serve`, bound and listening at once; it serves once
    :meth:`serve_forever` runs (or :meth:`start`, in a thread) and stops at :meth:`close`.
    Nothing is persisted: the data is gone when it stops.

    Args:
        host: the address to listen on; anything but loopback needs ``token``.
        port: the TCP port; 0 picks a free one (see :attr:`address`).
        token: the secret clients must present (compared in constant time); None: none
            asked (allowed on loopback only).
        latency, faults, seed: as :func:`fdbqueue.memory.open`'s.

    Raises:
        ValueError: ``host`` is not loopback and no ``token`` is given, or ``token`` is empty.
        OSError: the address cannot be bound (in use, not local).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        token: str | None = None,
        *,
        latency: Latency | None = None,
        faults: Faults | None = None,
        seed: int | None = None,
    ) -> None:
        if token is not None and (not isinstance(token, str) or not token):
            raise ValueError("token must be a non-empty string")
        if token is None and not is_loopback(host):
            raise ValueError(
                f"refusing to serve the in-memory database on {host!r} without a token: any "
                "machine that reaches it could read and write it; give a token (--token), or "
                "listen on 127.0.0.1"
            )
        self._token = None if token is None else token.encode()
        self._database = Database(latency=latency, seed=seed, faults=faults)
        self.engine: Server = self._database.server_side()
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.create_server((host, port), family=family)
        bound = self._listener.getsockname()
        self.host, self.port = str(bound[0]), int(bound[1])
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._sessions: set[_Session] = set()
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=64, thread_name_prefix="fdbqueue.memory-server"
        )
        self._thread: threading.Thread | None = None
        #: seconds let pass by clients' ``pass_time`` (their wall clocks follow it)
        self.time_passed = 0.0

    @property
    def address(self) -> str:
        """``memory://HOST:PORT``, what :func:`fdbqueue.memory.connect` and ``--memory=``
        take (the port chosen when 0 was asked)."""
        return format_address(self.host, self.port)

    def serve_forever(self) -> None:
        """Accept and serve connections until :meth:`close` (from another thread or a
        signal handler). Cost: a thread per connection."""
        while not self._closed.is_set():
            try:
                ready, _, _ = select.select([self._listener], [], [], 0.2)
                if not ready:
                    continue
                sock, _peer = self._listener.accept()
            except (OSError, ValueError):  # closed meanwhile
                if self._closed.is_set():
                    return
                raise
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            session = _Session(self, sock)
            with self._lock:
                if self._closed.is_set():
                    sock.close()
                    return
                self._sessions.add(session)
            threading.Thread(
                target=session.run, name="fdbqueue.memory-connection", daemon=True
            ).start()

    def start(self) -> MemoryServer:
        """Run :meth:`serve_forever` in a daemon thread (tests); returns the server."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self.serve_forever, name="fdbqueue.memory-accept", daemon=True
            )
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop: no more connections; every connection is closed (a commit in flight ends
        with 1021 at its client, other calls with a clear error). Idempotent."""
        self._closed.set()
        self._listener.close()
        with self._lock:
            sessions, self._sessions = set(self._sessions), set()
        for session in sessions:
            session.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)

    def __enter__(self) -> MemoryServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what sessions call -----------------------------------------------------------------

    def accepts(self, token: Any) -> bool:
        """Whether a hello's ``token`` opens a connection (constant-time comparison)."""
        if self._token is None:
            return True
        if not isinstance(token, str):
            return False
        return hmac.compare_digest(token.encode(), self._token)

    def forget(self, session: _Session) -> None:
        with self._lock:
            self._sessions.discard(session)

    def submit(self, work: Callable[[], None]) -> None:
        """Run ``work`` on the pool (a request that may wait)."""
        with contextlib.suppress(RuntimeError):  # shut down: its connection is closing
            self._pool.submit(work)

    def pass_time(self, seconds: float) -> float:
        """A client's ``pass_time``: versions move here, and the seconds are kept for the
        clients' wall clocks; returns every second let pass so far."""
        self.engine.advance_time(seconds)
        with self._lock:
            self.time_passed += seconds
            return self.time_passed


class _Session:
    """One client connection: its hello, its requests, its watches."""

    def __init__(self, server: MemoryServer, sock: socket.socket) -> None:
        self._server = server
        self._engine = server.engine
        self._sock = sock
        self._send_lock = threading.Lock()
        self._closed = False
        self._watches: dict[int, Future] = {}
        self._watch_lock = threading.Lock()
        self._views: OrderedDict[int, VersionView] = OrderedDict()

    # -- the connection ---------------------------------------------------------------------

    def run(self) -> None:
        try:
            if self._hello():
                self._serve()
        except (OSError, ValueError, TypeError):
            pass  # a peer that went away or sent garbage (of any shape): just close
        finally:
            self.close()

    def _hello(self) -> bool:
        sock = self._sock
        sock.settimeout(HELLO_SECONDS)
        if receive_exactly(sock, len(MAGIC)) != MAGIC:
            return False  # not a client of ours (an HTTP request...): close, read no more
        size = int.from_bytes(receive_exactly(sock, 4), "big")
        if size > HELLO_BYTES:
            return False
        hello = decode(receive_exactly(sock, size))
        if len(hello) != 3 or hello[0] != "hello":
            return False
        if hello[1] != PROTOCOL:
            self._send(("refused", f"protocol {hello[1]!r}; this server speaks {PROTOCOL}"))
            return False
        if not self._server.accepts(hello[2]):
            self._send(("refused", "wrong or missing token"))
            return False
        self._send(("ok", PROTOCOL))
        sock.settimeout(None)
        return True

    def _serve(self) -> None:
        reader = FrameReader()
        while not self._closed:
            data = self._sock.recv(1 << 16)
            if not data:
                return
            for message in reader.feed(data):
                self._dispatch(message)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        self._server.forget(self)
        with self._watch_lock:
            watches, self._watches = self._watches, {}
        for future in watches.values():  # no one to tell: drop them from the registry
            future.set_error(FDBError(1101))

    def _send(self, message: tuple[Any, ...]) -> None:
        frame = encode(message)
        with self._send_lock:
            self._sock.sendall(frame)

    def _reply(self, request_id: int, status: int, result: Any) -> None:
        try:
            self._send((request_id, status, result))
        except OSError:
            self.close()

    # -- requests ---------------------------------------------------------------------------

    def _dispatch(self, message: tuple[Any, ...]) -> None:
        if len(message) != 4 or not isinstance(message[0], int) or not isinstance(message[1], str):
            raise ValueError("a malformed request")
        request_id, operation, counts, arguments = message
        for name, amount in counts:
            if name in _STAT_NAMES and isinstance(amount, int):
                self._engine.count(name, amount)
        handler = getattr(self, "op_" + operation, None)
        if handler is None or not isinstance(arguments, tuple):
            self._reply(request_id, 2, ("ValueError", f"unknown request {operation!r}"))
            return
        work = functools.partial(self._answer, request_id, handler, arguments)
        waits = self._engine.recovering() or (
            operation == "commit" and bool(self._engine.latency.commit)
        )
        if waits and operation in ("grv", "commit"):
            self._server.submit(work)
        else:
            work()

    def _answer(
        self, request_id: int, handler: Callable[..., Any], arguments: tuple[Any, ...]
    ) -> None:
        try:
            result = handler(*arguments)
        except FDBError as error:
            self._reply(request_id, 1, error.code)
        except Exception as error:  # a bad argument: the client raises it
            self._reply(request_id, 2, (type(error).__name__, str(error)))
        else:
            self._reply(request_id, 0, result)

    def _view(self, version: int) -> VersionView:
        if not isinstance(version, int):
            raise TypeError("a read version is an int")
        view = self._views.get(version)
        if view is None:
            view = self._views[version] = self._engine.view(version)
            if len(self._views) > VIEWS_KEPT:
                self._views.popitem(last=False)
        return view

    def op_ping(self) -> None:
        return None

    def op_grv(self) -> tuple[int, tuple[float, float, float], float]:
        engine = self._engine
        engine.wait_for_recovery()
        version = engine.read_version()
        latency = engine.latency
        return version, (latency.grv, latency.read, latency.commit), self._server.time_passed

    def op_get(self, version: int, key: bytes) -> bytes | None:
        value: bytes | None = self._engine.read(
            self._view(version), lambda view: view.get(_bytes(key)), counted=False
        )
        return value

    def op_check(self, version: int) -> None:
        self._engine.read(self._view(version), lambda view: None, counted=False)

    def op_scan(
        self, version: int, begin: bytes, end: bytes, reverse: bool, rows: int, byte_target: int
    ) -> tuple[tuple[tuple[bytes, bytes], ...], bool]:
        begin, end = _bytes(begin), _bytes(end)

        def take(view: VersionView) -> tuple[tuple[tuple[bytes, bytes], ...], bool]:
            found: list[tuple[bytes, bytes]] = []
            spent = 0
            for pair in view.scan(begin, end, bool(reverse)):
                found.append(pair)
                spent += len(pair[0]) + len(pair[1])
                if len(found) == rows or (byte_target and spent >= byte_target):
                    return tuple(found), True
            return tuple(found), False

        return self._engine.read(self._view(version), take, counted=False)

    def op_commit(
        self,
        read_version: int | None,
        read_ranges: tuple[tuple[bytes, bytes], ...],
        write_ranges: tuple[tuple[bytes, bytes], ...],
        mutations: tuple[tuple[Any, ...], ...],
        keys_written: int,
        bytes_written: int,
        watches: tuple[tuple[int, bytes, bytes | None], ...],
    ) -> tuple[int, bytes | None]:
        for mutation in mutations:
            _check_mutation(mutation)
        request = CommitRequest(
            read_version,
            [(_bytes(b), _bytes(e)) for b, e in read_ranges],
            [(_bytes(b), _bytes(e)) for b, e in write_ranges],
            list(mutations),
            int(keys_written),
            int(bytes_written),
        )
        made = []
        for watch_id, key, expected in watches:
            future = Future()
            made.append((_bytes(key), expected, future))
            with self._watch_lock:
                self._watches[watch_id] = future
            future.on_ready(functools.partial(self._watch_ready, watch_id))
        try:
            return self._engine.commit(request, made)
        except BaseException:
            with self._watch_lock:
                for watch_id, _key, _expected in watches:
                    self._watches.pop(watch_id, None)
            raise

    def _watch_ready(self, watch_id: int, future: Future) -> None:
        with self._watch_lock:
            if self._watches.pop(watch_id, None) is None:
                return  # cancelled by the client, or the connection closed
        error = future.exception()
        code = error.code if isinstance(error, FDBError) else (0 if error is None else 4000)
        try:
            self._send((0, "watch", watch_id, code))
        except OSError:
            self.close()

    def op_cancel_watch(self, watch_id: int) -> None:
        with self._watch_lock:
            future = self._watches.pop(watch_id, None)
        if future is not None:
            future.set_error(FDBError(1101))

    def op_stats(self) -> tuple[tuple[str, int], ...]:
        return tuple(self._engine.stats().items())

    def op_reset_stats(self) -> None:
        self._engine.reset_stats()

    def op_advance_time(self, seconds: float) -> None:
        self._engine.advance_time(_seconds(seconds))

    def op_pass_time(self, seconds: float) -> float:
        return self._server.pass_time(_seconds(seconds))

    def op_in_flight(self) -> int:
        return self._engine.in_flight()

    def op_settle(self) -> int:
        return self._engine.settle()

    def op_faults(self) -> tuple[float, ...]:
        return dataclasses.astuple(self._engine.faults)

    def op_set_faults(self, *fields: float) -> None:
        self._engine.faults = Faults(*fields)

    def op_latency(self) -> tuple[float, ...]:
        return dataclasses.astuple(self._engine.latency)

    def op_set_latency(self, *fields: float) -> None:
        self._engine.latency = Latency(*fields)


def _bytes(value: Any) -> bytes:
    if not isinstance(value, bytes):
        raise TypeError(f"expected bytes, not {type(value).__name__}")
    return value


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1e9:
        raise ValueError(f"seconds must be a finite number >= 0, not {value!r}")
    return float(value)


def _check_mutation(mutation: Any) -> None:
    """Refuse a malformed mutation before the commit applies anything."""
    arity = _MUTATION_SHAPES.get(mutation[0]) if isinstance(mutation, tuple) and mutation else None
    if arity is None or len(mutation) != arity + 1:
        raise ValueError(f"a malformed mutation: {mutation!r:.80}")
    operands = mutation[1:]
    if mutation[0] == "atomic":
        if mutation[1] not in OPERATIONS:
            raise ValueError(f"unknown atomic operation {mutation[1]!r:.40}")
        operands = mutation[2:]
    for operand in operands:
        _bytes(operand)
