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
    TRANSACTION_TOO_OLD,
    Faults,
)
from fdbqueue.memory.futures import Future, Value
from fdbqueue.memory.keys import KeySelector
from fdbqueue.memory.storage import Storage, VersionView
from fdbqueue.memory.transaction import RangeResult, Transaction

__all__ = ["Database", "Latency"]

T = TypeVar("T")

VERSIONS_PER_SECOND = 1_000_000
#: How far behind the newest version a read version may fall (upstream
#: MAX_READ_TRANSACTION_LIFE_VERSIONS, five seconds of versions).
READ_WINDOW_VERSIONS = 5 * VERSIONS_PER_SECOND
MAX_TRANSACTION_BYTES = 10_000_000
MAX_WATCHES = 10_000

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
)
_FAULT_STATS = {
    NOT_COMMITTED: "injected_not_committed",
    COMMIT_UNKNOWN_RESULT: "injected_commit_unknown_result",
    TRANSACTION_TOO_OLD: "injected_transaction_too_old",
}
_APPLIED_UNKNOWN = -COMMIT_UNKNOWN_RESULT  # apply the commit, then report 1021


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
        self._stats: Counter[str] = Counter({name: 0 for name in STAT_NAMES})

    # -- transactions -----------------------------------------------------------------------

    def create_transaction(self) -> Transaction:
        """A new transaction on this database."""
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
        ``injected_not_committed``, ``injected_commit_unknown_result`` (of which
        ``injected_commit_unknown_result_applied`` were applied), and
        ``injected_transaction_too_old``. ``conflicts`` and ``too_old`` count only genuine
        ones.
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
                if transaction._approximate_size() > MAX_TRANSACTION_BYTES:
                    raise FDBError(2101)
                if self.latency.commit:
                    time.sleep(self.latency.commit)
            with self._lock:
                unknown_result = False
                if read_only:
                    versionstamp = None
                    version = -1
                else:
                    fault = self._injected_fault()
                    if fault is not None and fault != _APPLIED_UNKNOWN:
                        raise FDBError(fault)
                    unknown_result = fault == _APPLIED_UNKNOWN
                    version = self._apply(transaction, fired)
                    versionstamp = versionstamp_bytes(version)
                watch_errors = [] if unknown_result else self._register_watches(transaction, fired)
        except FDBError as error:
            transaction._fail_pending(error)
            return Future.failed(error)
        for future in fired:
            future.set_result(None)
        if unknown_result:  # applied, yet reported as unknown: the caller cannot tell
            unknown = FDBError(COMMIT_UNKNOWN_RESULT)
            transaction._fail_pending(unknown)
            return Future.failed(unknown)
        for future in watch_errors:
            future.set_error(FDBError(1032))
        transaction._watches = []
        transaction._after_commit(version, versionstamp)
        return Future.completed()

    def _injected_fault(self) -> int | None:
        """Under the lock, for a writing commit: the fault it suffers (see :class:`Faults`).

        Returns None (commit normally), an error code to raise without applying, or
        ``_APPLIED_UNKNOWN`` (apply, then report 1021). No random draw when no fault is set.
        """
        faults = self._faults
        if not faults.total:
            return None
        code = faults.pick(self._random.random())
        if code is None:
            return None
        self._stats[_FAULT_STATS[code]] += 1
        if code == COMMIT_UNKNOWN_RESULT and self._random.random() < 0.5:
            self._stats["injected_commit_unknown_result_applied"] += 1
            return _APPLIED_UNKNOWN
        return code

    def _apply(self, transaction: Transaction, fired: list[Future]) -> int:
        read_version = transaction._read_version
        if read_version is not None and transaction._read_ranges:
            # Upstream's resolver refuses only transactions with read conflict ranges as too
            # old (ConflictBatch::addTransaction); blind writes commit whatever their age.
            if self._too_old(read_version):
                self._stats["too_old"] += 1
                raise FDBError(1007)
            if self._storage.conflicts(read_version, transaction._read_ranges):
                self._stats["conflicts"] += 1
                raise FDBError(1020)
        version = max(self._last_version + 1, self._time_version())
        self._last_version = version
        versionstamp = versionstamp_bytes(version)
        storage = self._storage
        commit = storage.begin_commit(version, transaction._write_ranges)
        for mutation in transaction._mutations:
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
                self._watch_count -= 1
            else:
                keep.append((expected, future))
        if keep:
            self._watches[key] = keep
        else:
            del self._watches[key]

    def _register_watches(self, transaction: Transaction, fired: list[Future]) -> list[Future]:
        refused: list[Future] = []
        for key, expected, future in transaction._watches:
            if future.is_ready():
                continue
            if self._watch_count >= MAX_WATCHES:
                refused.append(future)
                continue
            self._stats["watches"] += 1
            if self._storage.current.get(key) != expected:
                fired.append(future)
                continue
            self._watches.setdefault(key, []).append((expected, future))
            self._watch_count += 1
            future.on_ready(functools.partial(self._forget_watch, key))
        return refused

    def _forget_watch(self, key: bytes, future: Future) -> None:  # an on_ready callback
        """Drop a watch that became ready by cancellation."""
        with self._lock:
            waiting = self._watches.get(key, [])
            for index, (_expected, candidate) in enumerate(waiting):
                if candidate is future:
                    del waiting[index]
                    self._watch_count -= 1
                    if not waiting:
                        del self._watches[key]
                    return

    # -- the binding's Database conveniences (each in its own transaction) ------------------

    def _run(self, body: Callable[[Transaction], T]) -> T:
        from fdbqueue.transactional import run_in_retry_loop

        return run_in_retry_loop(self, body)

    def get(self, key: Any) -> Value:
        """Read ``key`` in its own transaction."""
        return self._run(lambda tr: tr.get(key))

    def get_key(self, key_selector: KeySelector) -> Value:
        """Resolve a KeySelector in its own transaction."""
        return self._run(lambda tr: tr.get_key(key_selector))

    def get_range(
        self,
        begin: Any,
        end: Any,
        limit: int = 0,
        reverse: bool = False,
        streaming_mode: Any = None,
    ) -> RangeResult:
        """A range read in its own transaction."""
        return self._run(lambda tr: tr.get_range(begin, end, limit, reverse))

    def get_range_startswith(self, prefix: Any, *args: Any, **kwargs: Any) -> RangeResult:
        """A prefix range read in its own transaction."""
        return self._run(lambda tr: tr.get_range_startswith(prefix, *args, **kwargs))

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            return self.get_range(key.start, key.stop)
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
