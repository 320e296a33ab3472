"""The in-memory database: versions, the lock, commits, watches, latency and statistics."""

from __future__ import annotations

import functools
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from fdbqueue.memory.atomic import (
    AtomicOperations,
    apply_atomic,
    versionstamp_bytes,
    with_versionstamp,
)
from fdbqueue.memory.errors import FDBError
from fdbqueue.memory.faults import (
    COMMIT_UNKNOWN_RESULT,
    NOT_COMMITTED,
    TIMED_OUT,
    TRANSACTION_TOO_OLD,
    Faults,
)
from fdbqueue.memory.futures import Future, Value
from fdbqueue.memory.keys import KeySelector, KeyValue
from fdbqueue.memory.options import DEFAULT_MAX_WATCHES, DatabaseOptions
from fdbqueue.memory.storage import Range, Storage, VersionView
from fdbqueue.memory.transaction import Transaction

__all__ = ["Database", "Latency"]

T = TypeVar("T")

VERSIONS_PER_SECOND = 1_000_000
#: How far behind the newest version a read version may fall (upstream
#: MAX_READ_TRANSACTION_LIFE_VERSIONS, five seconds of versions).
READ_WINDOW_VERSIONS = 5 * VERSIONS_PER_SECOND
#: How far a recovery moves the version clock (upstream MAX_VERSIONS_IN_FLIGHT, 100 seconds
#: of versions, added to the last version of the old generation in ClusterRecovery.cpp).
MAX_VERSIONS_IN_FLIGHT = 100 * VERSIONS_PER_SECOND
MAX_WATCHES = DEFAULT_MAX_WATCHES  # the default of db.options.set_max_watches

STAT_NAMES = (
    "transactions",
    "read_versions",
    "reads",
    "commits",
    "conflicts",
    "too_old",
    "retries",
    "watches",
    "injected_not_committed",
    "injected_commit_unknown_result",
    "injected_commit_unknown_result_applied",
    "injected_transaction_too_old",
    "injected_timed_out",
    "injected_timed_out_applied",
    "injected_recovery",
    "injected_recovery_applied",
)


@dataclass(frozen=True)
class _Request:
    """What a commit hands to the resolver: kept as is while a timed-out commit is in flight."""

    read_version: int | None
    read_ranges: list[Range]
    write_ranges: list[Range]
    mutations: list[tuple[Any, ...]]

    @classmethod
    def of(cls, transaction: Transaction) -> _Request:
        """The transaction's request, sharing its lists (see :meth:`copy`)."""
        return cls(
            transaction._read_version,
            transaction._read_ranges,
            transaction._write_ranges,
            transaction._mutations,
        )

    def copy(self) -> _Request:
        """A request the transaction's later use cannot change."""
        return _Request(
            self.read_version,
            list(self.read_ranges),
            list(self.write_ranges),
            list(self.mutations),
        )


@dataclass(frozen=True)
class Latency:
    """Simulated network and cluster latency, in seconds.

    Args:
        grv: each read version request (``get_read_version``, or a transaction's first read).
        read: each read that reaches the database (point read, range read, ``get_key``).
        commit: each commit that writes.

    Raises:
        ValueError: a negative or non-numeric value.
    """

    grv: float = 0.0
    read: float = 0.0
    commit: float = 0.0

    def __post_init__(self) -> None:
        for name in ("grv", "read", "commit"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"Latency.{name} must be a number of seconds >= 0, not {value!r}")


class Database(AtomicOperations):
    """An in-memory FoundationDB database; see :mod:`fdbqueue.memory`. Thread-safe."""

    def __init__(
        self, latency: Latency | None = None, seed: int | None = None, faults: Faults | None = None
    ) -> None:
        self.latency = latency or Latency()
        self._lock = threading.RLock()
        self._faults = Faults()
        self.faults = faults or Faults()
        self._random = random.Random(seed)
        self._storage = Storage()
        self._started = time.monotonic()
        self._time_offset = 0.0
        self._last_version = 0
        self._watches: dict[bytes, list[tuple[bytes | None, Future]]] = {}
        self._watch_count = 0
        self._max_watches = MAX_WATCHES  # db.options.set_max_watches
        self.options = DatabaseOptions(self)
        self._in_flight: list[_Request] = []  # timed-out commits that may still land
        self._stats: Counter[str] = Counter({name: 0 for name in STAT_NAMES})

    # -- transactions -----------------------------------------------------------------------

    def create_transaction(self) -> Transaction:
        """A new transaction on this database, with the defaults set by ``db.options``'
        ``set_transaction_*`` (timeout, retry limit, maximum retry delay, size limit).

        Raises:
            FDBError: 2006 when one of those defaults is out of range, as upstream.
        """
        self._count("transactions")
        return Transaction(self)

    @property
    def faults(self) -> Faults:
        """The faults injected into writing commits (see :class:`Faults`); settable at any
        time, for example to load data fault-free and then turn faults on.

        Raises:
            TypeError: on setting anything but a :class:`Faults`.
        """
        return self._faults

    @faults.setter
    def faults(self, faults: Faults) -> None:
        if not isinstance(faults, Faults):
            raise TypeError(f"faults must be a memory.Faults, not {type(faults).__name__}")
        with self._lock:
            self._faults = faults

    def stats(self) -> dict[str, int]:
        """Counters since the database opened (or :meth:`reset_stats`).

        ``transactions`` created; ``read_versions`` obtained; ``reads`` that reached the
        database (point, range and ``get_key`` reads not served entirely from the
        transaction's own writes); ``commits`` that wrote (read-only commits are not counted);
        ``conflicts`` (1020 at commit); ``too_old`` (1007); ``retries`` (``on_error`` calls
        that retried); ``watches`` registered; and the injected faults (:class:`Faults`):

        * ``injected_not_committed`` (1020) and ``injected_transaction_too_old`` (1007);
        * ``injected_commit_unknown_result`` (1021), of which
          ``injected_commit_unknown_result_applied`` were applied;
        * ``injected_timed_out`` (1031), of which ``injected_timed_out_applied`` stayed in
          flight and were eventually applied (those still in flight, and those dropped when
          they were resolved or by a recovery, are not);
        * ``injected_recovery`` (1021 and a recovery), of which ``injected_recovery_applied``
          were applied before the recovery.

        ``commits`` includes the injected commits that were applied. ``conflicts`` and
        ``too_old`` count only genuine ones reported to a caller (not the faults, nor commits in
        flight dropped when resolved).
        """
        with self._lock:
            return dict(self._stats)

    def reset_stats(self) -> None:
        """Set every counter back to zero."""
        with self._lock:
            self._stats = Counter({name: 0 for name in STAT_NAMES})

    def advance_time(self, seconds: float) -> None:
        """Move this database's clock forward (tests of the five-second window).

        Versions advance about 1,000,000 per second of monotonic time plus the time added here.
        """
        with self._lock:
            self._time_offset += seconds

    @property
    def in_flight(self) -> int:
        """How many commits an injected ``timed_out`` fault left in flight, not yet resolved
        (see :class:`Faults` and :meth:`settle`)."""
        with self._lock:
            return len(self._in_flight)

    def settle(self) -> int:
        """Resolve now every commit left in flight by an injected ``timed_out`` fault (a test
        hook; see :class:`Faults`): each is dropped if a commit since its read version wrote
        into its read conflict ranges, or if it has read conflict ranges and its read version
        is more than five seconds old; otherwise it is applied at a new version, and watches
        fire as for any commit.

        Returns:
            How many of them were applied.
        """
        fired: list[Future] = []
        with self._lock:
            pending, self._in_flight = self._in_flight, []
            applied = sum(self._land(request, fired) for request in pending)
        for future in fired:
            future.set_result(None)
        return applied

    def _count(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self._stats[name] += amount

    def _random_fraction(self) -> float:
        with self._lock:
            return self._random.random()

    # -- versions ---------------------------------------------------------------------------

    def _time_version(self) -> int:
        elapsed = time.monotonic() - self._started + self._time_offset
        return int(elapsed * VERSIONS_PER_SECOND) + 1

    def _new_read_version(self, then_read: bool = False) -> int:
        """Obtain a read version after the GRV latency (plus a read's, when ``then_read``)."""
        delay = self.latency.grv + (self.latency.read if then_read else 0.0)
        if delay:
            time.sleep(delay)
        with self._lock:
            self._last_version = max(self._last_version, self._time_version())
            self._stats["read_versions"] += 1
            return self._last_version

    def _too_old(self, read_version: int) -> bool:
        return self._time_version() - read_version > READ_WINDOW_VERSIONS

    def _read(
        self,
        transaction: Transaction,
        read_version: int,
        read: Callable[[VersionView], T],
        latency_paid: bool = False,
    ) -> T:
        if self.latency.read and not latency_paid:
            time.sleep(self.latency.read)
        with self._lock:
            if self._too_old(read_version):
                self._stats["too_old"] += 1
                raise FDBError(1007)
            view = transaction._view
            if view is None or view.version != read_version:
                view = transaction._view = VersionView(self._storage, read_version)
            view.refresh()
            self._stats["reads"] += 1
            return read(view)

    # -- commits ----------------------------------------------------------------------------

    def _commit(self, transaction: Transaction) -> Future:
        read_only = not transaction._mutations and not transaction._write_ranges
        fired: list[Future] = []
        try:
            if not read_only:
                if transaction._approximate_size() > transaction.options._size_limit:
                    raise FDBError(2101)
                if self.latency.commit:
                    time.sleep(self.latency.commit)
            with self._lock:
                if read_only:
                    versionstamp = None
                    version = -1
                else:
                    self._resolve_in_flight(fired)
                    version = self._commit_writes(transaction, fired)
                    versionstamp = versionstamp_bytes(version)
                self._register_watches(transaction._watches.take_all(), fired)
        except FDBError as error:
            for future in fired:  # other transactions' watches, fired by what did land
                future.set_result(None)
            transaction._commit_failed(error)
            return Future.failed(error)
        for future in fired:
            future.set_result(None)
        transaction._after_commit(version, versionstamp)
        return Future.completed()

    def _commit_writes(self, transaction: Transaction, fired: list[Future]) -> int:
        """Under the lock: commit a writing transaction, or fail it with the fault it draws
        (see :class:`Faults`). Returns the commit version; raises the error reported."""
        request = _Request.of(transaction)
        faults = self._faults
        if not faults.total:  # no random draw when no fault is set
            return self._apply(request, fired)
        kind = faults.choose(self._random.random())
        if kind is None:
            return self._apply(request, fired)
        self._stats[f"injected_{kind}"] += 1
        if kind == "not_committed":
            raise FDBError(NOT_COMMITTED)
        if kind == "transaction_too_old":
            raise FDBError(TRANSACTION_TOO_OLD)
        if kind == "commit_unknown_result":
            if self._random.random() < 0.5:
                self._apply(request, fired)  # a genuine 1020 or 1007 is reported as such
                self._stats["injected_commit_unknown_result_applied"] += 1
            raise FDBError(COMMIT_UNKNOWN_RESULT)
        if kind == "timed_out":
            if self._random.random() < 0.5:
                self._in_flight.append(request.copy())  # may land later (see _resolve_in_flight)
            raise FDBError(TIMED_OUT)
        # recovery: the commit lands or not, then the cluster recovers before answering.
        if self._random.random() < 0.5:
            try:
                self._apply(request, fired, genuine=False)
                self._stats["injected_recovery_applied"] += 1
            except FDBError:
                pass  # it conflicted or was too old: not applied, still reported as 1021
        self._recover(fired)
        raise FDBError(COMMIT_UNKNOWN_RESULT)

    def _resolve_in_flight(self, fired: list[Future]) -> None:
        """Under the lock, before a writing commit's own work: resolve each commit in flight
        with probability 1/2 (one seeded draw each, oldest first)."""
        if not self._in_flight:
            return
        still: list[_Request] = []
        for request in self._in_flight:
            if self._random.random() < 0.5:
                self._land(request, fired)
            else:
                still.append(request)
        self._in_flight = still

    def _land(self, request: _Request, fired: list[Future]) -> bool:
        """Under the lock: resolve a commit in flight as the resolver would now. True when it
        was applied."""
        try:
            self._apply(request, fired, genuine=False)
        except FDBError:
            return False  # conflicted or too old: dropped
        self._stats["injected_timed_out_applied"] += 1
        return True

    def _recover(self, fired: list[Future]) -> None:
        """Under the lock: a cluster recovery. Versions jump MAX_VERSIONS_IN_FLIGHT ahead,
        commits in flight die, and every outstanding watch fires."""
        before = max(self._last_version, self._time_version())
        self._time_offset += MAX_VERSIONS_IN_FLIGHT / VERSIONS_PER_SECOND
        self._last_version = max(before + MAX_VERSIONS_IN_FLIGHT, self._time_version())
        self._in_flight = []
        for waiting in self._watches.values():
            fired.extend(future for _expected, future in waiting)
        self._watches = {}

    def _apply(self, request: _Request, fired: list[Future], genuine: bool = True) -> int:
        """Under the lock: check ``request`` as the resolver does and apply it at a new
        version (returned), or raise 1007 or 1020. ``genuine``: count those in the stats."""
        read_version = request.read_version
        if read_version is not None and request.read_ranges:
            # Upstream's resolver refuses only transactions with read conflict ranges as too
            # old (ConflictBatch::addTransaction); blind writes commit whatever their age.
            if self._too_old(read_version):
                self._stats["too_old"] += int(genuine)
                raise FDBError(1007)
            if self._storage.conflicts(read_version, request.read_ranges):
                self._stats["conflicts"] += int(genuine)
                raise FDBError(1020)
        version = max(self._last_version + 1, self._time_version())
        self._last_version = version
        versionstamp = versionstamp_bytes(version)
        storage = self._storage
        # A versionstamped key's write conflict range is its final key, known only now (the
        # commit proxy's ResolutionRequestBuilder::addTransaction adds it).
        stamped = [
            with_versionstamp(mutation[1], versionstamp)
            for mutation in request.mutations
            if mutation[0] == "versionstamped_key"
        ]
        write_ranges = request.write_ranges
        if stamped:
            write_ranges = [*write_ranges, *((key, key + b"\x00") for key in stamped)]
        commit = storage.begin_commit(version, write_ranges)
        for mutation in request.mutations:
            kind = mutation[0]
            if kind == "set":
                storage.write(commit, mutation[1], mutation[2])
            elif kind == "clear":
                for key in storage.keys_in(mutation[1], mutation[2]):
                    storage.write(commit, key, None)
            elif kind == "atomic":
                _, operation, key, param = mutation
                storage.write(commit, key, apply_atomic(operation, storage.current.get(key), param))
            elif kind == "versionstamped_key":
                storage.write(commit, with_versionstamp(mutation[1], versionstamp), mutation[2])
            else:  # versionstamped_value
                storage.write(commit, mutation[1], with_versionstamp(mutation[2], versionstamp))
        storage.prune(self._time_version() - READ_WINDOW_VERSIONS - VERSIONS_PER_SECOND)
        self._stats["commits"] += 1
        for key in commit.undo:
            self._collect_fired(key, fired)
        return version

    def _collect_fired(self, key: bytes, fired: list[Future]) -> None:
        waiting = self._watches.get(key)
        if not waiting:
            return
        current = self._storage.current.get(key)
        keep = []
        for expected, future in waiting:
            if expected != current:
                fired.append(future)
            else:
                keep.append((expected, future))
        if keep:
            self._watches[key] = keep
        else:
            del self._watches[key]

    def _open_watch(self, future: Future) -> bool:
        """A transaction made a watch: count it among the outstanding watches until it is
        ready, whatever becomes of it (upstream ``DatabaseContext::increaseWatchCounter`` in
        ``Transaction::watch``, before the commit). False, counting nothing, when the limit
        (``db.options.set_max_watches``, 10,000 by default) is reached: error 1032."""
        with self._lock:
            if self._watch_count >= self._max_watches:
                return False
            self._watch_count += 1
        future.on_ready(self._close_watch)
        return True

    def _close_watch(self, _future: Future) -> None:  # an on_ready callback
        with self._lock:
            self._watch_count -= 1

    def _register_watches(
        self, watches: list[tuple[bytes, bytes | None, Future]], fired: list[Future]
    ) -> None:
        """Under the lock, at a successful commit: make the transaction's watches active."""
        for key, expected, future in watches:
            if future.is_ready():
                continue
            self._stats["watches"] += 1
            if self._storage.current.get(key) != expected:
                fired.append(future)
                continue
            self._watches.setdefault(key, []).append((expected, future))
            future.on_ready(functools.partial(self._forget_watch, key))

    def _forget_watch(self, key: bytes, future: Future) -> None:  # an on_ready callback
        """Drop a watch that became ready by cancellation."""
        with self._lock:
            waiting = self._watches.get(key, [])
            for index, (_expected, candidate) in enumerate(waiting):
                if candidate is future:
                    del waiting[index]
                    if not waiting:
                        del self._watches[key]
                    return

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
