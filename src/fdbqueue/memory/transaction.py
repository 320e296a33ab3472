"""Transactions of the in-memory database, with the ``fdb`` binding's ``Transaction`` shape.

A transaction buffers its writes (read-your-writes, :mod:`fdbqueue.memory.writes`), reads the
database at one read version obtained at its first read (range reads in batches,
:mod:`fdbqueue.memory.ranges`), records read and write conflict ranges, keeps its watches
until the commit (:mod:`fdbqueue.memory.watches`), and hands everything to the database at
commit, which checks conflicts and applies the mutations atomically
(:mod:`fdbqueue.memory.database`).

The rules of each call are upstream's ``ReadYourWritesTransaction``
(``fdbclient/ReadYourWrites.cpp``) as the binding reaches it through libfdb_c
(``bindings/c/fdb_c.cpp``) and ``ThreadSafeTransaction`` (``fdbclient/ThreadSafeTransaction.cpp``),
which turns the errors of void calls (writes, conflict ranges, ``set_read_version``) into a
deferred error reported by the next read or commit; each method's docstring names its source.
"""

from __future__ import annotations

import contextlib
import heapq
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from fdbqueue.memory.atomic import (
    AtomicOperations,
    versionstamp_bytes,
    versionstamp_offset_valid,
)
from fdbqueue.memory.errors import FDBError, is_retryable
from fdbqueue.memory.futures import Future, Key, Value
from fdbqueue.memory.keys import KeySelector, KeyValue, key_after, strinc, to_key, to_value
from fdbqueue.memory.options import TransactionOptions
from fdbqueue.memory.ranges import ROW_OVERHEAD_BYTES, RangeResult, StreamingMode
from fdbqueue.memory.size import MUTATION_BYTES, RangeSet
from fdbqueue.memory.storage import Range, VersionView
from fdbqueue.memory.watches import PendingWatches, bury, start_reaper
from fdbqueue.memory.writes import WriteMap, subtract_ranges

if TYPE_CHECKING:
    from fdbqueue.memory.database import Database

__all__ = ["RangeResult", "Snapshot", "Transaction", "TransactionOptions"]

MAX_KEY_BYTES = 10_000  # upstream CLIENT_KNOBS->KEY_SIZE_LIMIT
MAX_SYSTEM_KEY_BYTES = 30_000  # upstream CLIENT_KNOBS->SYSTEM_KEY_SIZE_LIMIT
MAX_VALUE_BYTES = 100_000
SYSTEM_KEYS = b"\xff"
MAX_SYSTEM_KEY = b"\xff\xff"
#: Readable and watchable without the system-key options (upstream ``metadataVersionKey``).
METADATA_VERSION_KEY = b"\xff/metadataVersion"
INITIAL_BACKOFF = 0.01  # seconds (upstream CLIENT_KNOBS->DEFAULT_BACKOFF)
DEFAULT_MAX_RETRY_DELAY = 1.0  # seconds
#: The fixed delay of ``on_error`` after 1007 and 1009 (upstream FUTURE_VERSION_RETRY_DELAY).
FUTURE_VERSION_RETRY_DELAY = 0.01  # seconds


def _max_key_bytes(key: bytes) -> int:
    """Upstream's ``getMaxWriteKeySize``: system keys may be longer."""
    return MAX_SYSTEM_KEY_BYTES if key.startswith(SYSTEM_KEYS) else MAX_KEY_BYTES


class _Reader:
    """Read methods shared by a transaction and its snapshot view."""

    _transaction: Transaction
    _snapshot: bool

    def get(self, key: Any) -> Value:
        """Read ``key``; the Value is ``== None`` when the key is absent."""
        return Value(self._transaction._read_point(to_key(key), self._snapshot))

    def get_key(self, key_selector: KeySelector) -> Key:
        """Resolve a KeySelector to a key (``b""`` before the first key, ``b"\\xff"`` after
        the last): a :class:`Key` future, as the binding's."""
        return Key(self._transaction._resolve(key_selector, self._snapshot))

    def get_range(
        self,
        begin: Any,
        end: Any,
        limit: int = 0,
        reverse: bool = False,
        streaming_mode: Any = StreamingMode.iterator,
    ) -> RangeResult:
        """Key-value pairs in ``[begin, end)`` (keys or KeySelectors; None means ``b""`` /
        ``b"\\xff"``), at most ``limit`` (0 or -1: no limit), in key order or reversed,
        fetched in batches as the result is iterated (:mod:`fdbqueue.memory.ranges`)."""
        return self._transaction._range(
            begin, end, int(limit), bool(reverse), streaming_mode, self._snapshot
        )

    def get_range_startswith(self, prefix: Any, *args: Any, **kwargs: Any) -> RangeResult:
        """Key-value pairs whose keys start with ``prefix``."""
        prefix = to_key(prefix)
        return self.get_range(prefix, strinc(prefix), *args, **kwargs)

    def get_read_version(self) -> Future:
        """A Future of the transaction's read version (an int)."""
        return self._transaction._read_version_future()

    def __getitem__(self, key: Any) -> Any:
        """``tr[key]``: :meth:`get`; ``tr[begin:end]``: :meth:`get_range`, reversed when the
        step is -1 (as the binding's ``__getitem__``)."""
        if isinstance(key, slice):
            return self.get_range(key.start, key.stop, reverse=(key.step == -1))
        return self.get(key)


class Snapshot(_Reader):
    """``tr.snapshot``: the transaction's reads without read conflict ranges.

    Snapshot reads see the transaction's own writes, as upstream's do by default.
    """

    def __init__(self, transaction: Transaction) -> None:
        self._transaction = transaction
        self._snapshot = True
        self.db = transaction.db


class Transaction(_Reader, AtomicOperations):
    """An in-memory FoundationDB transaction (see the module docstring)."""

    def __init__(self, database: Database) -> None:
        self.db = database
        self._transaction = self
        self._snapshot = False
        self.options = TransactionOptions(self)
        self.snapshot = Snapshot(self)
        self._reset_options()
        self._reset_state()

    # -- state ------------------------------------------------------------------------------

    def _reset_options(self) -> None:
        self._started = time.monotonic()
        self._deadline: float | None = None
        self._retry_limit = -1
        self._max_retry_delay = DEFAULT_MAX_RETRY_DELAY
        self._retries = 0
        self._backoff = INITIAL_BACKOFF
        self.options._reset_options()  # the database's defaults of persistent options

    def _reset_state(self) -> None:
        self._writes = WriteMap()
        self._mutations: list[tuple[Any, ...]] = []
        self._read_ranges: list[Range] = []
        self._write_ranges: list[Range] = []
        self._read_version: int | None = None
        self._view: VersionView | None = None
        self._watches = PendingWatches()
        self._deferred_error: FDBError | None = None
        # Upstream's resetPromise: once set (1025 cancelled, 1031 timed out, 2017 used after
        # commit, 1025 after on_error raised), reads, commit and on_error report it.
        self._reset_error: FDBError | None = None
        self._commit_started = False  # upstream commitStarted: cleared by reset and on_error
        self._cache: dict[bytes, bytes | None] = {}  # database values read (SnapshotCache)
        # Not persistent options (upstream resetRyow resets them): on_error drops them too.
        self._system_access: str | None = None
        self._read_conflicts = RangeSet()  # the ranges of _read_ranges, merged, for the size
        self._write_conflicts = RangeSet()  # the write conflict ranges the client sends
        self._versionstamp_bytes = 0  # the versionstamped operations' mutations
        self._committed_version = -1
        self._versionstamp = Key()
        self.options._reset_state()  # size_limit and the other non-persistent options

    def _fail_pending(self, error: FDBError, versionstamp_error: FDBError | None = None) -> None:
        self._watches.fail(error)
        self._versionstamp.set_error(versionstamp_error or error)

    def _commit_failed(self, error: FDBError) -> None:
        """A commit failed: its watches fail with its error, the versionstamp with 2020
        (upstream ``commitAndWatch``: ``transaction_invalid_version``)."""
        self._fail_pending(error, FDBError(2020))

    def _set_timeout(self, milliseconds: int) -> None:
        if milliseconds < 0:
            raise FDBError(2006)
        self._deadline = None if milliseconds == 0 else self._started + milliseconds / 1000.0

    def _reset_error_now(self) -> FDBError | None:
        """The reset error, after setting it to 1031 if the timeout has passed (upstream's
        ``timebomb``)."""
        if (
            self._reset_error is None
            and self._deadline is not None
            and time.monotonic() > self._deadline
        ):
            self._reset_error = FDBError(1031)
            self._fail_pending(FDBError(1031))
        return self._reset_error

    def _used_after_commit(self) -> bool:
        """Upstream's ``checkUsedDuringCommit``: once ``commit`` was called, every later
        operation fails with 2017 until ``reset`` or ``on_error``."""
        if self._commit_started and self._reset_error is None:
            self._reset_error = FDBError(2017)
        return self._commit_started

    def _check_usable(self) -> None:
        """The checks of reads, watches, commit and ``get_versionstamp``."""
        if self._used_after_commit():
            raise FDBError(2017)
        error = self._reset_error_now()
        if error is not None:
            raise error

    def _check_readable(self) -> None:
        """A write's deferred error first, as the binding's ``ThreadSafeTransaction``
        (``checkDeferredError``), then :meth:`_check_usable`."""
        if self._deferred_error is not None:
            raise self._deferred_error
        self._check_usable()

    def _dropped_write(self) -> bool:
        """For the calls that never raise FDBError (writes, conflict ranges: void C calls
        whose errors the binding defers): True, with 2017 deferred, after ``commit``. A
        cancelled or timed-out transaction still takes the write; its commit fails."""
        if self._used_after_commit():
            self._defer(FDBError(2017))
            return True
        return False

    def _max_read_key(self) -> bytes:
        return MAX_SYSTEM_KEY if self._system_access else SYSTEM_KEYS

    def _defer(self, error: FDBError) -> None:
        if self._deferred_error is None:
            self._deferred_error = error

    # -- reads ------------------------------------------------------------------------------

    def _ensure_read_version(self) -> int:
        if self._read_version is None:
            self._read_version = self.db._new_read_version()
        return self._read_version

    def _read_version_future(self) -> Future:
        # ThreadSafeTransaction::getReadVersion reports a deferred error first.
        try:
            if self._deferred_error is not None:
                raise self._deferred_error
            error = self._reset_error_now()
            if error is not None:
                raise error
            return Future.completed(self._ensure_read_version())
        except FDBError as error:
            return Future.failed(error)

    def set_read_version(self, version: int) -> None:
        """Read at ``version`` instead of asking the database for one. Once the transaction
        has a read version (set, or taken by a read), 2010 ``read_version_already_set`` is
        deferred to the next read or commit (upstream ``Transaction::setVersion``)."""
        if self._read_version is not None:
            self._defer(FDBError(2010))
            return
        self._read_version = int(version)
        self._view = None

    def _with_view(self, read: Callable[[VersionView], Any]) -> Any:
        """Run ``read`` on the database as of the read version (one read round trip).

        A transaction's first read also fetches its read version; the two latencies are
        slept at once (the same simulated time, one thread wake-up fewer).
        """
        if self._read_version is None:
            self._read_version = self.db._new_read_version(then_read=True)
            return self.db._read(self, self._read_version, read, latency_paid=True)
        return self.db._read(self, self._read_version, read)

    def _read_point(self, key: bytes, snapshot: bool) -> bytes | None:
        """A point read. A key read before is answered from the transaction's cache of the
        database values it read (upstream's ``SnapshotCache``): no round trip, so no 1007."""
        self._check_readable()
        if key >= self._max_read_key() and key != METADATA_VERSION_KEY:
            raise FDBError(2004)
        if self._writes.touches_unreadable(key, key_after(key)):
            raise FDBError(1036)
        entry = self._writes.lookup(key)
        if entry is not None and entry.independent:
            return entry.value
        database_value: bytes | None
        if key in self._cache:
            database_value = self._cache[key]
        else:
            database_value = self._with_view(lambda view: view.get(key))
            self._cache[key] = database_value
        if not snapshot:
            self._add_read_range(key, key_after(key))
        return entry.resolve(database_value) if entry is not None else database_value

    def _scan(
        self, view: VersionView, begin: bytes, end: bytes, reverse: bool
    ) -> Iterator[tuple[bytes, bytes]]:
        """What this transaction sees in ``[begin, end)``: the database plus its writes.

        Raises 1036 when the scan reaches a range its versionstamped writes made unreadable
        (upstream ``RYWIterator``: only a read that gets there fails, so a scan the caller
        stops before it succeeds).
        """
        writes = self._writes
        database = ((k, v) for k, v in view.scan(begin, end, reverse) if not writes.hides(k))
        own: list[tuple[bytes, bytes]] = []
        for key, entry in writes.entries_in(begin, end, reverse):
            value = entry.resolve(None if entry.independent else view.get(key))
            if value is not None:
                own.append((key, value))
        merged = heapq.merge(database, own, key=lambda pair: pair[0], reverse=reverse)
        barrier = writes.unreadable_barrier(begin, end, reverse)
        if barrier is None:
            yield from merged
            return
        for pair in merged:
            if pair[0] < barrier if reverse else pair[0] >= barrier:
                raise FDBError(1036)
            yield pair
        raise FDBError(1036)

    def _add_read_range(self, begin: bytes, end: bytes) -> None:
        self._read_ranges.append((begin, end))
        self._read_conflicts.add(begin, end)

    def _add_read_conflict(self, begin: bytes, end: bytes) -> None:
        holes = self._writes.independent_ranges(begin, end)
        for piece in subtract_ranges((begin, end), holes):
            self._add_read_range(*piece)

    def _resolve_in_view(self, view: VersionView, selector: KeySelector) -> bytes:
        key = to_key(selector.key)
        top = self._max_read_key()
        if selector.offset >= 1:
            start = key_after(key) if selector.or_equal else key
            remaining = selector.offset
            for found, _ in self._scan(view, min(start, top), top, reverse=False):
                remaining -= 1
                if remaining == 0:
                    return found
            return top
        stop = key_after(key) if selector.or_equal else key
        remaining = 1 - selector.offset
        for found, _ in self._scan(view, b"", min(stop, top), reverse=True):
            remaining -= 1
            if remaining == 0:
                return found
        return b""

    def _resolve(self, selector: KeySelector, snapshot: bool) -> bytes:
        self._check_readable()
        if not isinstance(selector, KeySelector):
            raise TypeError("get_key takes a KeySelector")
        if to_key(selector.key) > self._max_read_key():  # RYW getKey: key_outside_legal_range
            raise FDBError(2004)
        found: bytes = self._with_view(lambda view: self._resolve_in_view(view, selector))
        if not snapshot:
            reference = to_key(selector.key)
            if selector.offset >= 1:  # scanned forward from the reference to the key found
                begin = key_after(reference) if selector.or_equal else reference
                end = key_after(found)
            else:  # scanned backward from the reference to the key found
                begin = found
                end = key_after(reference) if selector.or_equal else reference
            if begin < end:
                self._add_read_conflict(begin, end)
        return found

    def _range_endpoint(self, endpoint: Any, default: bytes, snapshot: bool) -> bytes:
        if endpoint is None:
            return default
        if isinstance(endpoint, KeySelector):
            if endpoint.or_equal is False and endpoint.offset == 1:
                return to_key(endpoint.key)
            return self._resolve(endpoint, snapshot)
        return to_key(endpoint)

    def _range(
        self, begin: Any, end: Any, limit: int, reverse: bool, mode: Any, snapshot: bool
    ) -> RangeResult:
        """``get_range``: check the arguments, resolve KeySelector endpoints and read the
        first batch (see :class:`RangeResult`)."""
        self._check_readable()
        if limit == -1:  # upstream GetRangeLimits::ROW_LIMIT_UNLIMITED
            limit = 0
        elif limit < 0:
            raise FDBError(2012)  # range_limits_invalid (GetRangeLimits::isValid)
        mode = StreamingMode.iterator if mode is None else int(mode)
        begin_key = self._range_endpoint(begin, b"", snapshot)
        end_key = self._range_endpoint(end, SYSTEM_KEYS, snapshot)
        top = self._max_read_key()
        if begin_key > top or end_key > top:
            raise FDBError(2004)
        return RangeResult(self, snapshot, (begin_key, end_key), limit, reverse, mode)

    def _read_batch(
        self, begin: bytes, end: bytes, limit: int, byte_target: int, reverse: bool, snapshot: bool
    ) -> tuple[list[KeyValue], bool]:
        """One batch of a range read (one round trip): up to ``limit`` rows and about
        ``byte_target`` bytes (0: no limit; at least one row), and whether it stopped at a
        limit. Its read conflict range is what it covered: up to its last row when it stopped
        at a limit, else the whole of ``[begin, end)`` (upstream ``updateConflictMap`` for
        ``getRangeValue``/``getRangeValueBack``)."""
        self._check_readable()

        def read(view: VersionView) -> tuple[list[tuple[bytes, bytes]], bool]:
            found: list[tuple[bytes, bytes]] = []
            spent = 0
            for key, value in self._scan(view, begin, end, reverse):
                found.append((key, value))
                spent += ROW_OVERHEAD_BYTES + len(key) + len(value)
                if len(found) == limit or (byte_target and spent >= byte_target):
                    return found, True
            return found, False

        pairs, full = self._with_view(read)
        if not snapshot:
            if not full:
                self._add_read_conflict(begin, end)
            elif reverse:
                self._add_read_conflict(pairs[-1][0], end)
            else:
                self._add_read_conflict(begin, key_after(pairs[-1][0]))
        return [KeyValue(key, value) for key, value in pairs], full

    # -- writes -----------------------------------------------------------------------------

    def _check_write_key(self, key: bytes) -> FDBError | None:
        if key >= SYSTEM_KEYS and self._system_access != "write":
            return FDBError(2004)
        if len(key) > _max_key_bytes(key):
            return FDBError(2102)
        return None

    def _record(self, mutation: tuple[Any, ...], write_range: Range, conflict: bool = True) -> None:
        self._mutations.append(mutation)
        if self.options._take_no_write_conflict() and conflict:
            return  # next_write_no_write_conflict_range
        self._write_ranges.append(write_range)
        if conflict:
            self._write_conflicts.add(*write_range)

    def set(self, key: Any, value: Any) -> None:
        """Set ``key`` to ``value``. Size and system-key errors surface at the next read or at
        commit, as with the binding: no write raises FDBError (not even on a cancelled
        transaction, whose commit then fails)."""
        key, value = to_key(key), to_value(value)
        if self._dropped_write():
            return
        error = self._check_write_key(key) or (
            FDBError(2103) if len(value) > MAX_VALUE_BYTES else None
        )
        if error is not None:
            self._defer(error)
            return
        self._writes.set(key, value)
        self._record(("set", key, value), (key, key_after(key)))
        self._watches.changed(key, key_after(key), value)

    def clear(self, key: Any) -> None:
        """Remove ``key`` (nothing happens if it is absent, nor for a key too long to exist:
        upstream RYW ``clear`` ignores keys over ``getMaxClearKeySize``)."""
        if isinstance(key, KeySelector):
            key = self.get_key(key).value
        key = to_key(key)
        if self._dropped_write():
            return
        if key >= SYSTEM_KEYS and self._system_access != "write":
            self._defer(FDBError(2004))
            return
        if len(key) <= _max_key_bytes(key):
            self._clear_keys(key, key_after(key))

    def clear_range(self, begin: Any, end: Any) -> None:
        """Remove every key in ``[begin, end)``."""
        if isinstance(begin, KeySelector):
            begin = self.get_key(begin).value
        if isinstance(end, KeySelector):
            end = self.get_key(end).value
        begin_key = b"" if begin is None else to_key(begin)
        end_key = SYSTEM_KEYS if end is None else to_key(end)
        if self._dropped_write():
            return
        top = MAX_SYSTEM_KEY if self._system_access == "write" else SYSTEM_KEYS
        if begin_key > end_key:
            self._defer(FDBError(2005))
        elif end_key > top or begin_key > top:
            self._defer(FDBError(2004))
        elif begin_key < end_key:
            self._clear_keys(begin_key, end_key)

    def _clear_keys(self, begin: bytes, end: bytes) -> None:
        self._writes.clear_range(begin, end)
        self._record(("clear", begin, end), (begin, end))
        self._watches.changed(begin, end, None)

    def clear_range_startswith(self, prefix: Any) -> None:
        """Remove every key that starts with ``prefix``."""
        prefix = to_key(prefix)
        self.clear_range(prefix, strinc(prefix))

    def __setitem__(self, key: Any, value: Any) -> None:
        self.set(key, value)

    def __delitem__(self, key: Any) -> None:
        if isinstance(key, slice):
            self.clear_range(key.start, key.stop)
        else:
            self.clear(key)

    def _atomic(self, operation: str, key: Any, param: Any) -> None:
        key, param = to_key(key), to_value(param)
        if self._dropped_write():
            return
        error = self._check_write_key(key) or (
            FDBError(2103) if len(param) > MAX_VALUE_BYTES else None
        )
        if error is not None:
            self._defer(error)
            return
        self._writes.atomic(operation, key, param)
        self._record(("atomic", operation, key, param), (key, key_after(key)))
        self._watches.changed(key, key_after(key), known=False)

    def set_versionstamped_key(self, key: Any, param: Any) -> None:
        """Set a key whose 10 bytes at the offset in its last 4 bytes become the versionstamp.

        As upstream RYW ``atomicOp``: the key's length limit counts its 4-byte offset; the
        transaction sends no write conflict range for it, the commit adds the final key's
        (the commit proxy's ``ResolutionRequestBuilder::addTransaction``); and reading keys
        whose stamp would be at or above ``(read version + 1, 0)`` raises 1036
        (``getVersionstampKeyRange``; every stamp when there is no read version yet).
        """
        key, param = to_key(key), to_value(param)
        if self._dropped_write():
            return
        error = self._check_write_key(key)
        if error is None and len(param) > MAX_VALUE_BYTES:
            error = FDBError(2103)
        if error is None and not versionstamp_offset_valid(key):
            error = FDBError(2000)
        if error is not None:
            self._defer(error)
            return
        offset = int.from_bytes(key[-4:], "little")
        body = key[:-4]
        read_version = self._read_version
        lowest = versionstamp_bytes(read_version + 1) if read_version is not None else bytes(10)
        begin = body[:offset] + lowest + body[offset + 10 :]
        end = key_after(body[:offset] + b"\xff" * 10 + body[offset + 10 :])
        self._writes.mark_unreadable(begin, min(end, self._max_read_key()))
        self._versionstamp_bytes += MUTATION_BYTES + len(key) + len(param)
        self._mutations.append(("versionstamped_key", key, param))

    def set_versionstamped_value(self, key: Any, param: Any) -> None:
        """Set ``key`` to ``param`` with the 10 bytes at the offset in its last 4 bytes
        replaced by the versionstamp."""
        key, param = to_key(key), to_value(param)
        if self._dropped_write():
            return
        error = self._check_write_key(key)
        if error is None and len(param) > MAX_VALUE_BYTES:  # the offset counts (RYW atomicOp)
            error = FDBError(2103)
        if error is None and not versionstamp_offset_valid(param):
            error = FDBError(2000)
        if error is not None:
            self._defer(error)
            return
        self._writes.mark_unreadable(key, key_after(key))
        self._versionstamp_bytes += MUTATION_BYTES + len(key) + len(param)
        self._record(("versionstamped_value", key, param), (key, key_after(key)))
        self._watches.changed(key, key_after(key), known=False)

    # -- conflict ranges --------------------------------------------------------------------

    def _conflict_range(self, begin: Any, end: Any, top: bytes) -> Range | None:
        """The checks of ``add_*_conflict_range``: 2005 raised at once for ``begin > end``
        (libfdb_c's ``fdb_transaction_add_conflict_range`` builds a ``KeyRangeRef``); 2017
        after commit and 2004 for a range past ``top`` deferred (the binding's
        ``ThreadSafeTransaction`` defers them). None when there is nothing to add."""
        begin, end = to_key(begin), to_key(end)
        if begin > end:
            raise FDBError(2005)
        if self._dropped_write():
            return None
        if (begin > top or end > top) and (begin, end) != (
            METADATA_VERSION_KEY,
            key_after(METADATA_VERSION_KEY),
        ):
            self._defer(FDBError(2004))
            return None
        return (begin, end) if begin < end else None

    def add_read_conflict_range(self, begin: Any, end: Any) -> None:
        """Add ``[begin, end)`` to the read conflict ranges, except the parts this
        transaction wrote with sets, clears and clear ranges (upstream RYW
        ``addReadConflictRange`` through ``updateConflictMap``)."""
        span = self._conflict_range(begin, end, self._max_read_key())
        if span is not None:
            self._add_read_conflict(*span)

    def add_read_conflict_key(self, key: Any) -> None:
        """Add ``key`` to the read conflict ranges."""
        key = to_key(key)
        self.add_read_conflict_range(key, key_after(key))

    def add_write_conflict_range(self, begin: Any, end: Any) -> None:
        """Add ``[begin, end)`` to the write conflict ranges (errors as for
        :meth:`add_read_conflict_range`, ``b"\\xff"`` on needing ``access_system_keys``)."""
        top = MAX_SYSTEM_KEY if self._system_access == "write" else SYSTEM_KEYS
        span = self._conflict_range(begin, end, top)
        if span is not None:
            self._write_ranges.append(span)
            self._write_conflicts.add(*span)

    def add_write_conflict_key(self, key: Any) -> None:
        """Add ``key`` to the write conflict ranges."""
        key = to_key(key)
        self.add_write_conflict_range(key, key_after(key))

    # -- watches, commit, errors ------------------------------------------------------------

    def watch(self, key: Any) -> Future:
        """A Future that becomes ready when ``key``'s value changes from what this
        transaction reads now (upstream ``RYWImpl::watch``; see :mod:`fdbqueue.memory.watches`):

        * it reads the key (a read conflict range, unless this transaction set or cleared
          it) and fails with the read's error, 2004 or 2102 (key over 10,000 bytes);
        * it counts against the database's limit of outstanding watches from now on, so it
          fails with 1032 at once when that is reached (uncommitted watches count);
        * a later ``set``/``clear``/atomic operation of this transaction that changes the key
          makes it ready at once; otherwise it is active once the transaction commits, and a
          reset, retry, cancel or destroy before that fails it with 1025.
        """
        key = to_key(key)
        future = Future()
        try:
            self._check_readable()
            if key >= self._max_read_key() and key != METADATA_VERSION_KEY:
                raise FDBError(2004)
            if len(key) > _max_key_bytes(key):
                raise FDBError(2102)
            expected = self._read_point(key, snapshot=False)
        except FDBError as error:
            future.set_error(error)
            return future
        if not self.db._open_watch(future):
            future.set_error(FDBError(1032))
            return future
        start_reaper()
        self._watches.add(key, expected, future)
        return future

    def get_approximate_size(self) -> Future:
        """A Future of the transaction's size as upstream's client counts it at commit (the
        figure a commit compares with the 10,000,000-byte limit, error 2101).

        It is upstream's ``Transaction::getSize()`` of what the read-your-writes layer sends:

        * each mutation, 40 bytes plus its two parameters: a set, key and value; an atomic
          operation, key and parameter; a clear, begin and end (a single-key clear is the
          range ``[key, key + b"\\x00")``); a versionstamped key or value, key and parameter
          with its 4-byte offset. Mutations are merged first as upstream's write map merges
          them: a later set of a key replaces its earlier set or atomic operations, an atomic
          operation after a set or clear of the key folds into that set, repeated atomic
          operations of one kind on one key are one operation (for ``add``, ``bit_or``,
          ``bit_xor``, ``max``, ``min`` only when the parameters have the same length),
          cleared ranges that overlap or touch are one clear, cut around keys written after
          it; each versionstamped operation counts once;
        * each read conflict range and each write conflict range, 32 bytes plus its begin and
          end keys, once the ranges that overlap or touch are merged. A set, clear or atomic
          operation writes ``[key, key + b"\\x00")`` or ``[begin, end)``; a versionstamped
          key writes no range here (upstream's proxy adds one).

        Upstream's own ``get_approximate_size`` is a cheaper running sum that merges nothing;
        this one is the exact figure of the commit check.
        """
        return Future.completed(self._approximate_size())

    def _approximate_size(self) -> int:
        return (
            self._writes.mutation_bytes()
            + self._versionstamp_bytes
            + self._read_conflicts.bytes
            + self._write_conflicts.bytes
        )

    def commit(self) -> Future:
        """Commit: a Future that is ready once the mutations are applied, or fails with
        1020 (conflict), 1007 (read version too old), 2101 (too large) or an earlier error.

        Once called, the transaction is spent, whether the commit succeeded or failed (API
        410 on): every later read, write, commit or ``get_versionstamp`` fails with 2017
        ``used_during_commit`` (writes: at the next read or commit) until ``reset()`` or
        ``on_error()`` (upstream RYW ``commit`` sets ``commitStarted``; ``resetRyow`` clears
        it). A second commit applies nothing.
        """
        try:
            self._check_readable()
        except FDBError as error:
            if error.code != 2017:
                self._commit_failed(error)
            return Future.failed(error)
        self._commit_started = True
        return self.db._commit(self)

    def _after_commit(self, version: int, versionstamp: bytes | None) -> None:
        self._committed_version = version
        if versionstamp is None:
            self._versionstamp.set_error(FDBError(2021))
        else:
            self._versionstamp.set_result(versionstamp)

    def get_committed_version(self) -> int:
        """The commit version of a successful commit that wrote something, else -1."""
        return self._committed_version

    def get_versionstamp(self) -> Key:
        """A :class:`Key` future of the 10-byte versionstamp, as the binding's: its ``value``
        (or ``wait()``) is ready after a successful commit (error 2021 for a read-only
        transaction, 2020 when the commit failed). Call it before ``commit``: afterwards it
        fails with 2017 (upstream RYW ``getVersionstamp``)."""
        try:
            self._check_readable()
        except FDBError as error:
            failed = Key()
            failed.set_error(error)
            return failed
        return self._versionstamp

    def on_error(self, error: Any) -> Future:
        """Decide about an error: for a retryable one, reset, wait a backoff and return a
        ready Future (retry); otherwise a Future that raises the error.

        As upstream RYW ``onError`` and ``Transaction::onError``:

        * a cancelled (1025), timed-out (1031) or spent (2017) transaction raises that,
          whatever ``error`` is;
        * retryable codes (:data:`fdbqueue.memory.errors.RETRYABLE`) retry unless the retry
          limit is reached: 1007 and 1009 after a fixed ``min(10 ms, max_retry_delay)``, the
          others after the growing backoff (10 ms doubling, with jitter, capped by
          ``max_retry_delay``);
        * the retry resets the transaction but keeps the persistent options (timeout, retry
          limit, max retry delay); ``access_system_keys``/``read_system_keys`` and
          ``size_limit`` are dropped;
        * when it raises, it also cancels the transaction (API 610 on): later operations fail
          with 1025 until ``reset()``.
        """
        if isinstance(error, FDBError):
            code = error.code
        elif isinstance(error, int):
            code = error
        else:
            raise error
        reset_error = self._reset_error_now()
        if reset_error is not None:
            return Future.failed(reset_error)
        limit_reached = 0 <= self._retry_limit <= self._retries
        if not is_retryable(code) or limit_reached:
            self.cancel()
            return Future.failed(FDBError(code))
        if code in (1007, 1009):
            delay = min(FUTURE_VERSION_RETRY_DELAY, self._max_retry_delay)
        else:
            delay = min(self._backoff, self._max_retry_delay) * self.db._random_fraction()
            self._backoff = min(self._backoff * 2, self._max_retry_delay)
        self._retries += 1
        self._fail_pending(FDBError(1025))
        self._reset_state()
        self.db._count("retries")
        if delay > 0:
            time.sleep(delay)
        return Future.completed()

    def reset(self) -> None:
        """Discard everything: writes, read version, conflict ranges and options."""
        self._fail_pending(FDBError(1025))
        self._reset_options()
        self._reset_state()

    def cancel(self) -> None:
        """Cancel: later reads and commit raise 1025 until ``reset()`` (writes are taken,
        and the commit reports 1025)."""
        self._fail_pending(FDBError(1025))
        if self._reset_error is None:
            self._reset_error = FDBError(1025)

    def destroy(self) -> None:
        """What the binding's ``fdb_transaction_destroy`` does (``TransactionRead.__del__``
        calls it; the in-memory C API calls this): the watches of a transaction that did not
        commit fail with 1025, shortly after, from a background thread (upstream
        ``~ReadYourWritesTransaction`` and ``Transaction::cancelWatches``); watches of a
        committed transaction stay. Safe to call from a finalizer; ``__del__`` calls it too.
        """
        bury(self._watches.take())
        if self._reset_error is None:
            self._reset_error = FDBError(1025)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # a finalizer must never raise
            bury(self._watches.take())
