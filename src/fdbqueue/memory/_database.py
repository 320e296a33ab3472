"""The in-memory database: the facade with the binding's ``Database`` methods, statistics and
test hooks, composed of the parts that hold each concept:

* :mod:`fdbqueue.memory._server`: what transactions reach (read versions, reads, commits,
  watches), with the simulated :class:`Latency` and the database's one lock;
* :mod:`fdbqueue.memory._versions`: the version clock;
* :mod:`fdbqueue.memory._storage`: the versioned key space;
* :mod:`fdbqueue.memory._resolver`: conflict checks and applying commits;
* :mod:`fdbqueue.memory._injection`: injected faults and the commits they leave in flight;
* :mod:`fdbqueue.memory._watch_registry`: the outstanding watches;
* :mod:`fdbqueue.memory._options`: ``db.options``.
"""

from __future__ import annotations

import json
import math
import random
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

from fdbqueue.memory._atomic import AtomicOperations
from fdbqueue.memory._errors import FDBError
from fdbqueue.memory._faults import Faults
from fdbqueue.memory._futures import Future, Key, Value
from fdbqueue.memory._injection import FaultInjector
from fdbqueue.memory._keys import KeySelector, KeyValue
from fdbqueue.memory._options import DEFAULT_MAX_WATCHES, DatabaseOptions
from fdbqueue.memory._resolver import Resolver
from fdbqueue.memory._server import STAT_NAMES, Latency, Server
from fdbqueue.memory._storage import Storage
from fdbqueue.memory._transaction import Transaction
from fdbqueue.memory._versions import (
    MAX_VERSIONS_IN_FLIGHT,
    READ_WINDOW_VERSIONS,
    VERSIONS_PER_SECOND,
    VersionClock,
)
from fdbqueue.memory._watch_registry import WatchLimit, WatchRegistry

__all__ = [
    "MAX_VERSIONS_IN_FLIGHT",
    "READ_WINDOW_VERSIONS",
    "STAT_NAMES",
    "VERSIONS_PER_SECOND",
    "Database",
    "Latency",
    "check_settings",
]

T = TypeVar("T")

MAX_WATCHES = DEFAULT_MAX_WATCHES  # the default of db.options.set_max_watches


def check_settings(latency: Latency | None, faults: Faults | None) -> None:
    """Refuse a ``latency`` that is not a :class:`Latency` or ``faults`` not a :class:`Faults`
    (None is allowed: none).

    Raises:
        TypeError: either has the wrong type.
    """
    if faults is not None and not isinstance(faults, Faults):
        raise TypeError(f"faults must be a memory.Faults, not {type(faults).__name__}")
    if latency is not None and not isinstance(latency, Latency):
        raise TypeError(f"latency must be a memory.Latency, not {type(latency).__name__}")


class Database(AtomicOperations):
    """An in-memory FoundationDB database; see :mod:`fdbqueue.memory`. Thread-safe."""

    def __init__(
        self,
        latency: Latency | None = None,
        seed: int | None = None,
        faults: Faults | None = None,
        *,
        server: Any = None,
    ) -> None:
        """A new in-memory database (:func:`fdbqueue.memory.open`); with ``server``, the
        client of a server process (:func:`fdbqueue.memory.connect` passes its
        :class:`~fdbqueue.memory._remote.RemoteServer`): every transaction's database side
        is then served there, and ``latency``, ``seed`` and ``faults`` are not used."""
        if server is None:
            check_settings(latency, faults)
            self._watch_limit = WatchLimit(MAX_WATCHES)  # the client's, as upstream's
            self._lock = threading.RLock()
            self._stats: Counter[str] = Counter({name: 0 for name in STAT_NAMES})
            self._random = random.Random(seed)
            self._storage = Storage()
            self._clock = VersionClock()
            self._watches = WatchRegistry(self._lock, self._storage, self._stats)
            resolver = Resolver(self._storage, self._clock, self._watches, self._stats)
            self._injector = FaultInjector(
                resolver, self._clock, self._watches, self._random, self._stats
            )
            server = Server(
                self._lock,
                latency or Latency(),
                self._storage,
                self._clock,
                self._watches,
                self._injector,
                self._random,
                self._stats,
                self._watch_limit,
            )
            server.faults = faults or Faults()
        else:
            self._watch_limit = server.watch_limit
        self._server = server
        self.options = DatabaseOptions(self._watch_limit.set_max_watches)

    def server_side(self) -> Any:
        """The database side of this database's transactions: its
        :class:`~fdbqueue.memory._server.Server` (what a server process serves connected
        clients from, :class:`fdbqueue.memory.MemoryServer`), or, for a connected database,
        the client's stand-in for the server's."""
        return self._server

    @property
    def latency(self) -> Latency:
        """The simulated latency (settable; on a connected database, the server's, for
        every client of it).

        Raises:
            TypeError: on setting anything but a :class:`Latency`.
        """
        latency: Latency = self._server.latency
        return latency

    @latency.setter
    def latency(self, latency: Latency) -> None:
        if not isinstance(latency, Latency):
            raise TypeError(f"latency must be a memory.Latency, not {type(latency).__name__}")
        self._server.latency = latency

    # -- transactions -----------------------------------------------------------------------

    def create_transaction(self) -> Transaction:
        """A new transaction on this database, with the defaults set by ``db.options``'
        ``set_transaction_*`` (timeout, retry limit, maximum retry delay, size limit).

        Raises:
            FDBError: 2006 when one of those defaults is out of range, as upstream.
        """
        self._server.count("transactions")
        return Transaction(self, self._server, self.options)

    @property
    def faults(self) -> Faults:
        """The faults injected into writing commits (see :class:`Faults`); settable at any
        time, for example to load data fault-free and then turn faults on.

        Raises:
            TypeError: on setting anything but a :class:`Faults`.
        """
        faults: Faults = self._server.faults
        return faults

    @faults.setter
    def faults(self, faults: Faults) -> None:
        if not isinstance(faults, Faults):
            raise TypeError(f"faults must be a memory.Faults, not {type(faults).__name__}")
        self._server.faults = faults

    def stats(self) -> dict[str, int]:
        """Counters since the database opened (or :meth:`reset_stats`).

        ``transactions`` created; ``read_versions`` obtained; ``reads`` that reached the
        database (point, range and ``get_key`` reads not served entirely from the
        transaction's own writes); ``commits`` that wrote (read-only commits are not counted);
        ``conflicts`` (1020 at commit); ``too_old`` (1007); ``retries`` (``on_error`` calls
        that retried); ``watches`` registered; what a cluster would bill, as FoundationDB's
        client transaction metrics count it (``KeysRead``, ``BytesRead``,
        ``CommittedMutations``, ``CommittedMutationBytes``):

        * ``keys_read`` and ``bytes_read``: key-value pairs returned by reads that reached the
          database, snapshot or not, and their bytes. A point read counts one key, present or
          absent, and its value's bytes (not its key's); a range read counts each pair it
          returned, key and value; ``get_key`` counts nothing (upstream counts none), nor do
          reads answered by the transaction's own writes or from the values it read before
          (a range read over keys the transaction wrote: see the known differences in
          :mod:`fdbqueue.memory`).
        * ``keys_written`` and ``bytes_written``: the mutations of successful writing commits
          as the client sends them (merged as its write map merges them: a clear range is one
          mutation, repeated sets of a key one set) and their bytes, 40 a mutation
          (``sizeof(MutationRef)``) plus its two parameters (a single-key clear is
          ``[key, key + b"\\x00")``), as the transaction size counts them. A commit that
          fails (1020, 1007, 2101) counts none, nor does one whose result the client does not
          learn (1021, 1031), applied or not.

        And the injected faults (:class:`Faults`):

        * ``injected_not_committed`` (1020) and ``injected_transaction_too_old`` (1007);
        * ``injected_commit_unknown_result`` (1021), of which
          ``injected_commit_unknown_result_applied`` were applied;
        * ``injected_timed_out`` (1031), of which ``injected_timed_out_applied`` stayed in
          flight and were eventually applied (those still in flight, and those dropped when
          they were resolved or by a recovery, are not);
        * ``injected_recovery`` (1021 and a recovery), of which ``injected_recovery_applied``
          were applied before the recovery; and ``commits_lost_to_recovery``, commits that
          reached the database while a recovery was under way (1021, not applied).

        ``commits`` includes the injected commits that were applied. ``conflicts`` and
        ``too_old`` count only genuine ones reported to a caller (not the faults, nor commits in
        flight dropped when resolved).
        """
        stats: dict[str, int] = self._server.stats()
        return stats

    def reset_stats(self) -> None:
        """Set every counter back to zero."""
        self._server.reset_stats()

    def advance_time(self, seconds: float) -> None:
        """Move this database's version clock forward (tests of the five-second window), as a
        recovery does: versions only, not the wall clock (:meth:`pass_time` moves both).

        Versions advance about 1,000,000 per second of monotonic time plus the time added here.
        """
        self._server.advance_time(seconds)

    def pass_time(self, seconds: float) -> None:
        """Let ``seconds`` pass without sleeping, as time passes for a real cluster: the
        version clock moves forward (as :meth:`advance_time`) and so does the process's wall
        clock as fdbqueue reads it (:func:`fdbqueue.memory.wall_clock`; lease expiry times,
        deduplication windows and the age of the oldest item are measured by it besides
        versions). The wall clock is the process's: it moves for every database. The hook:
        :func:`fdbqueue.memory.time_passed` grows by ``seconds``, and fdbqueue's clock
        (``fdbqueue._clock.now``) adds it to ``time.time()`` (registered by the package
        ``fdbqueue``; docs/memory.rst, "Time").

        Raises:
            TypeError: ``seconds`` is not a number (bools are refused too).
            ValueError: ``seconds`` is negative, NaN or infinite (clocks only move forward).
        """
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise TypeError(f"seconds must be a number, not {type(seconds).__name__}")
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"seconds must be a finite number >= 0, not {seconds}")
        self._server.pass_time(seconds)

    def outstanding_watches(self) -> int:
        """How many watches this client holds that are not yet ready (fired, failed or
        cancelled): what ``set_max_watches`` limits (1032 past it)."""
        return self._watch_limit.outstanding

    @property
    def in_flight(self) -> int:
        """How many commits an injected ``timed_out`` fault left in flight, not yet resolved
        (see :class:`Faults` and :meth:`settle`)."""
        in_flight: int = self._server.in_flight()
        return in_flight

    def get_client_status(self, connection_record: str | None = None) -> Key:
        """The client's status report, as the binding's ``Database.get_client_status()``: a
        ready :class:`Key` future of a JSON document with ``Healthy`` true,
        ``InitializationState`` ``"initialized"``, ``ConnectionRecord`` (the cluster file's
        name, when given) and empty ``Coordinators`` and ``Connections`` (an in-memory
        database has neither). Costs no read."""
        report: dict[str, Any] = {"Healthy": True, "InitializationState": "initialized"}
        if connection_record is not None:
            report["ConnectionRecord"] = connection_record
        report.update(Coordinators=[], Connections=[])
        return Key(json.dumps(report).encode())

    def settle(self) -> int:
        """Resolve now every commit left in flight by an injected ``timed_out`` fault (a test
        hook; see :class:`Faults`): each is dropped if a commit since its read version wrote
        into its read conflict ranges, or if it has read conflict ranges and its read version
        is more than five seconds old; otherwise it is applied at a new version, and watches
        fire as for any commit.

        Returns:
            How many of them were applied.
        """
        applied: int = self._server.settle()
        return applied

    # -- the binding's Database conveniences (each in its own transaction) ------------------

    def _run(self, body: Callable[[Transaction], T]) -> T:
        """Run ``body`` in a transaction of its own, commit, and retry as ``on_error``
        decides (the standard retry loop)."""
        tr = self.create_transaction()
        while True:
            try:
                result = body(tr)
                tr.commit().wait()
                return result
            except FDBError as error:
                tr.on_error(error).wait()

    def get(self, key: Any) -> bytes | None:
        """Read ``key`` in its own transaction: plain bytes, or None when it is absent (the
        binding's ``Database.get`` returns ``tr[key].value``)."""
        value: bytes | None = self._run(lambda tr: tr.get(key).value)
        return value

    def get_key(self, key_selector: KeySelector) -> bytes:
        """Resolve a KeySelector in its own transaction: plain bytes (the binding returns
        ``tr.get_key(key_selector).value``)."""
        key: bytes = self._run(lambda tr: tr.get_key(key_selector).value)
        return key

    def get_range(
        self,
        begin: Any,
        end: Any,
        limit: int = 0,
        reverse: bool = False,
        streaming_mode: Any = None,
    ) -> list[KeyValue]:
        """A range read in its own transaction: a list of KeyValue (the binding returns
        ``tr.get_range(...).to_list()``)."""
        return self._run(
            lambda tr: tr.get_range(begin, end, limit, reverse, streaming_mode).to_list()
        )

    def get_range_startswith(self, prefix: Any, *args: Any, **kwargs: Any) -> list[KeyValue]:
        """A prefix range read in its own transaction: a list of KeyValue."""
        return self._run(lambda tr: tr.get_range_startswith(prefix, *args, **kwargs).to_list())

    def __getitem__(self, key: Any) -> Any:
        """``db[key]``: as :meth:`get`; ``db[begin:end]``: as :meth:`get_range`, in reverse
        when the step is -1 (as the binding)."""
        if isinstance(key, slice):
            return self.get_range(key.start, key.stop, reverse=(key.step == -1))
        return self.get(key)

    def set(self, key: Any, value: Any) -> None:
        """Set ``key`` in its own transaction."""
        self._run(lambda tr: tr.set(key, value))

    def __setitem__(self, key: Any, value: Any) -> None:
        self.set(key, value)

    def clear(self, key: Any) -> None:
        """Clear ``key`` in its own transaction."""
        self._run(lambda tr: tr.clear(key))

    def clear_range(self, begin: Any, end: Any) -> None:
        """Clear ``[begin, end)`` in its own transaction."""
        self._run(lambda tr: tr.clear_range(begin, end))

    def clear_range_startswith(self, prefix: Any) -> None:
        """Clear every key starting with ``prefix`` in its own transaction."""
        self._run(lambda tr: tr.clear_range_startswith(prefix))

    def __delitem__(self, key: Any) -> None:
        if isinstance(key, slice):
            self.clear_range(key.start, key.stop)
        else:
            self.clear(key)

    def _atomic(self, operation: str, key: Any, param: Any) -> None:
        self._run(lambda tr: getattr(tr, operation)(key, param))

    def get_and_watch(self, key: Any) -> tuple[Value, Future]:
        """Read ``key`` and watch it, in one committed transaction: ``(value, watch)``."""
        return self._run(lambda tr: (tr.get(key), tr.watch(key)))

    def set_and_watch(self, key: Any, value: Any) -> Future:
        """Set ``key`` and watch it, in one committed transaction."""

        def body(tr: Transaction) -> Future:
            tr.set(key, value)
            return tr.watch(key)

        return self._run(body)

    def clear_and_watch(self, key: Any) -> Future:
        """Clear ``key`` and watch it, in one committed transaction."""

        def body(tr: Transaction) -> Future:
            tr.clear(key)
            return tr.watch(key)

        return self._run(body)
