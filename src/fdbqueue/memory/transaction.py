"""Transactions of the in-memory database, with the ``fdb`` binding's ``Transaction`` shape.

A transaction buffers its writes (read-your-writes, :mod:`fdbqueue.memory.writes`), reads the
database at one read version obtained at its first read, records read and write conflict
ranges, and hands everything to the database at commit, which checks conflicts and applies
the mutations atomically (:mod:`fdbqueue.memory.database`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from fdbqueue.memory.atomic import AtomicOperations, versionstamp_offset_valid
from fdbqueue.memory.errors import FDBError, is_retryable
from fdbqueue.memory.futures import Future, Value
from fdbqueue.memory.keys import KeySelector, KeyValue, key_after, strinc, to_key, to_value
from fdbqueue.memory.size import MUTATION_BYTES, RangeSet
from fdbqueue.memory.storage import Range, VersionView
from fdbqueue.memory.writes import WriteMap, subtract_ranges

if TYPE_CHECKING:
    from fdbqueue.memory.database import Database

__all__ = ["RangeResult", "Snapshot", "Transaction", "TransactionOptions"]

MAX_KEY_BYTES = 10_000
MAX_VALUE_BYTES = 100_000
SYSTEM_KEYS = b"\xff"
MAX_SYSTEM_KEY = b"\xff\xff"
INITIAL_BACKOFF = 0.01  # seconds (upstream CLIENT_KNOBS->DEFAULT_BACKOFF)
DEFAULT_MAX_RETRY_DELAY = 1.0  # seconds


class RangeResult:
    """The result of a range read: iterable over KeyValue, with ``to_list()``.

    Unlike the binding's lazily fetched ``FDBRange``, the in-memory database reads the whole
    (limited) range when ``get_range`` is called.
    """

    def __init__(self, items: list[KeyValue]) -> None:
        self._items = items

    def __iter__(self) -> Iterator[KeyValue]:
        return iter(self._items)

    def to_list(self) -> list[KeyValue]:
        """The key-value pairs as a list."""
        return list(self._items)


class TransactionOptions:
    """The transaction options the in-memory database honours (``tr.options.set_...``)."""

    def __init__(self, transaction: Transaction) -> None:
        self._transaction = transaction

    def set_timeout(self, milliseconds: int) -> None:
        """Cancel the transaction with 1031 this long after it started; 0 disables it."""
        self._transaction._set_timeout(milliseconds)

    def set_retry_limit(self, retries: int) -> None:
        """After this many retries, ``on_error`` raises the error; -1 means no limit."""
        self._transaction._retry_limit = int(retries)

    def set_max_retry_delay(self, milliseconds: int) -> None:
        """Cap the backoff ``on_error`` waits (default 1000 ms)."""
        self._transaction._max_retry_delay = max(0.0, milliseconds / 1000.0)

    def set_access_system_keys(self) -> None:
        """Allow reading and writing keys from ``b"\\xff"`` on."""
        self._transaction._system_access = "write"

    def set_read_system_keys(self) -> None:
        """Allow reading keys from ``b"\\xff"`` on."""
        if self._transaction._system_access is None:
            self._transaction._system_access = "read"

    def _ignored(self, *args: Any) -> None:
        """Accepted for compatibility; no effect in memory."""

    set_priority_batch = _ignored
    set_priority_system_immediate = _ignored
    set_causal_read_risky = _ignored
    set_causal_write_risky = _ignored
    set_transaction_logging_enable = _ignored
    set_debug_transaction_identifier = _ignored
    set_log_transaction = _ignored
    set_tag = _ignored
    set_auto_throttle_tag = _ignored


class _Reader:
    """Read methods shared by a transaction and its snapshot view."""

    _transaction: Transaction
    _snapshot: bool

    def get(self, key: Any) -> Value:
        """Read ``key``; the Value is ``== None`` when the key is absent."""
        return Value(self._transaction._read_point(to_key(key), self._snapshot))

    def get_key(self, key_selector: KeySelector) -> Value:
        """Resolve a KeySelector to a key (``b""`` before the first key, ``b"\\xff"`` after
        the last)."""
        return Value(self._transaction._resolve(key_selector, self._snapshot))

    def get_range(
        self,
        begin: Any,
        end: Any,
        limit: int = 0,
        reverse: bool = False,
        streaming_mode: Any = None,
    ) -> RangeResult:
        """Key-value pairs in ``[begin, end)`` (keys or KeySelectors; None means ``b""`` /
        ``b"\\xff"``), at most ``limit`` (0: no limit), in key order or reversed."""
        return RangeResult(
            self._transaction._read_range(begin, end, int(limit), bool(reverse), self._snapshot)
        )

    def get_range_startswith(self, prefix: Any, *args: Any, **kwargs: Any) -> RangeResult:
        """Key-value pairs whose keys start with ``prefix``."""
        prefix = to_key(prefix)
        return self.get_range(prefix, strinc(prefix), *args, **kwargs)

    def get_read_version(self) -> Future:
        """A Future of the transaction's read version (an int)."""
        return self._transaction._read_version_future()

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            return self.get_range(key.start, key.stop)
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
        self._system_access: str | None = None
        self._retries = 0
        self._backoff = INITIAL_BACKOFF

    def _reset_state(self) -> None:
        self._writes = WriteMap()
        self._mutations: list[tuple[Any, ...]] = []
        self._read_ranges: list[Range] = []
        self._write_ranges: list[Range] = []
        self._read_version: int | None = None
        self._view: VersionView | None = None
        self._watches: list[tuple[bytes, bytes | None, Future]] = []
        self._deferred_error: FDBError | None = None
        self._cancelled = False
        self._read_conflicts = RangeSet()  # the ranges of _read_ranges, merged, for the size
        self._write_conflicts = RangeSet()  # the write conflict ranges the client sends
        self._versionstamp_bytes = 0  # the versionstamped operations' mutations
        self._committed_version = -1
        self._versionstamp = Future()

    def _fail_pending(self, error: FDBError) -> None:
        watches, self._watches = self._watches, []
        for _key, _expected, future in watches:
            future.set_error(error)
        self._versionstamp.set_error(error)

    def _set_timeout(self, milliseconds: int) -> None:
        if milliseconds < 0:
            raise FDBError(2006)
        self._deadline = None if milliseconds == 0 else self._started + milliseconds / 1000.0

    def _check_usable(self) -> None:
        if self._cancelled:
            raise FDBError(1025)
        if self._deadline is not None and time.monotonic() > self._deadline:
            self._fail_pending(FDBError(1031))
            raise FDBError(1031)

    def _check_readable(self) -> None:
        self._check_usable()
        if self._deferred_error is not None:
            raise self._deferred_error

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
        try:
            self._check_usable()
            return Future.completed(self._ensure_read_version())
        except FDBError as error:
            return Future.failed(error)

    def set_read_version(self, version: int) -> None:
        """Read at ``version`` instead of asking the database for one."""
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
        self._check_readable()
        if key >= self._max_read_key():
            raise FDBError(2004)
        if self._writes.touches_unreadable(key, key_after(key)):
            raise FDBError(1036)
        entry = self._writes.lookup(key)
        if entry is not None and entry.independent:
            return entry.value
        database_value: bytes | None = self._with_view(lambda view: view.get(key))
        if not snapshot:
            self._add_read_range(key, key_after(key))
        return entry.resolve(database_value) if entry is not None else database_value

    def _scan(
        self, view: VersionView, begin: bytes, end: bytes, reverse: bool
    ) -> Iterator[tuple[bytes, bytes]]:
        """What this transaction sees in ``[begin, end)``: the database plus its writes."""
        import heapq

        writes = self._writes
        database = ((k, v) for k, v in view.scan(begin, end, reverse) if not writes.hides(k))
        own: list[tuple[bytes, bytes]] = []
        for key, entry in writes.entries_in(begin, end, reverse):
            value = entry.resolve(None if entry.independent else view.get(key))
            if value is not None:
                own.append((key, value))
        yield from heapq.merge(database, own, key=lambda pair: pair[0], reverse=reverse)

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

    def _read_range(
        self, begin: Any, end: Any, limit: int, reverse: bool, snapshot: bool
    ) -> list[KeyValue]:
        self._check_readable()
        begin_key = self._range_endpoint(begin, b"", snapshot)
        end_key = self._range_endpoint(end, SYSTEM_KEYS, snapshot)
        top = self._max_read_key()
        if begin_key > top or end_key > top:
            raise FDBError(2004)
        if limit < 0:
            raise FDBError(2006)
        if begin_key >= end_key:
            return []
        if self._writes.touches_unreadable(begin_key, end_key):
            raise FDBError(1036)

        def read(view: VersionView) -> list[tuple[bytes, bytes]]:
            found: list[tuple[bytes, bytes]] = []
            for pair in self._scan(view, begin_key, end_key, reverse):
                found.append(pair)
                if len(found) == limit:
                    break
            return found

        pairs: list[tuple[bytes, bytes]] = self._with_view(read)
        if not snapshot:
            if limit and len(pairs) == limit:
                if reverse:
                    self._add_read_conflict(pairs[-1][0], end_key)
                else:
                    self._add_read_conflict(begin_key, key_after(pairs[-1][0]))
            else:
                self._add_read_conflict(begin_key, end_key)
        return [KeyValue(key, value) for key, value in pairs]

    # -- writes -----------------------------------------------------------------------------

    def _check_write_key(self, key: bytes) -> FDBError | None:
        if key >= SYSTEM_KEYS and self._system_access != "write":
            return FDBError(2004)
        if len(key) > MAX_KEY_BYTES + (MAX_KEY_BYTES if key >= SYSTEM_KEYS else 0):
            return FDBError(2102)
        return None

    def _record(self, mutation: tuple[Any, ...], write_range: Range, conflict: bool = True) -> None:
        self._mutations.append(mutation)
        self._write_ranges.append(write_range)
        if conflict:
            self._write_conflicts.add(*write_range)

    def set(self, key: Any, value: Any) -> None:
        """Set ``key`` to ``value``. Size and system-key errors surface at the next read or at
        commit, as with the binding."""
        key, value = to_key(key), to_value(value)
        self._check_usable()
        error = self._check_write_key(key) or (
            FDBError(2103) if len(value) > MAX_VALUE_BYTES else None
        )
        if error is not None:
            self._defer(error)
            return
        self._writes.set(key, value)
        self._record(("set", key, value), (key, key_after(key)))

    def clear(self, key: Any) -> None:
        """Remove ``key`` (nothing happens if it is absent)."""
        if isinstance(key, KeySelector):
            key = self.get_key(key).value
        key = to_key(key)
        self._check_usable()
        error = self._check_write_key(key)
        if error is not None:
            self._defer(error)
            return
        self._clear_keys(key, key_after(key))

    def clear_range(self, begin: Any, end: Any) -> None:
        """Remove every key in ``[begin, end)``."""
        if isinstance(begin, KeySelector):
            begin = self.get_key(begin).value
        if isinstance(end, KeySelector):
            end = self.get_key(end).value
        begin_key = b"" if begin is None else to_key(begin)
        end_key = SYSTEM_KEYS if end is None else to_key(end)
        self._check_usable()
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
        self._check_usable()
        error = self._check_write_key(key) or (
            FDBError(2103) if len(param) > MAX_VALUE_BYTES else None
        )
        if error is not None:
            self._defer(error)
            return
        self._writes.atomic(operation, key, param)
        self._record(("atomic", operation, key, param), (key, key_after(key)))

    def set_versionstamped_key(self, key: Any, param: Any) -> None:
        """Set a key whose 10 bytes at the offset in its last 4 bytes become the versionstamp."""
        key, param = to_key(key), to_value(param)
        self._check_usable()
        if not versionstamp_offset_valid(key):
            self._defer(FDBError(2000))
            return
        offset = int.from_bytes(key[-4:], "little")
        body = key[:-4]
        lowest = body[:offset] + b"\x00" * 10 + body[offset + 10 :]
        highest = body[:offset] + b"\xff" * 10 + body[offset + 10 :]
        error = self._check_write_key(lowest) or self._check_write_key(highest)
        if error is None and len(param) > MAX_VALUE_BYTES:
            error = FDBError(2103)
        if error is not None:
            self._defer(error)
            return
        self._writes.mark_unreadable(lowest, key_after(highest))
        # Upstream's client sends no write conflict range for it (the commit proxy adds the
        # final key's), but the mutation counts toward the size.
        self._versionstamp_bytes += MUTATION_BYTES + len(key) + len(param)
        self._record(
            ("versionstamped_key", key, param), (lowest, key_after(highest)), conflict=False
        )

    def set_versionstamped_value(self, key: Any, param: Any) -> None:
        """Set ``key`` to ``param`` with the 10 bytes at the offset in its last 4 bytes
        replaced by the versionstamp."""
        key, param = to_key(key), to_value(param)
        self._check_usable()
        error = self._check_write_key(key)
        if error is None and not versionstamp_offset_valid(param):
            error = FDBError(2000)
        if error is None and len(param) - 4 > MAX_VALUE_BYTES:
            error = FDBError(2103)
        if error is not None:
            self._defer(error)
            return
        self._writes.mark_unreadable(key, key_after(key))
        self._versionstamp_bytes += MUTATION_BYTES + len(key) + len(param)
        self._record(("versionstamped_value", key, param), (key, key_after(key)))

    # -- conflict ranges --------------------------------------------------------------------

    def add_read_conflict_range(self, begin: Any, end: Any) -> None:
        """Add ``[begin, end)`` to the read conflict ranges."""
        begin, end = to_key(begin), to_key(end)
        if begin < end:
            self._add_read_range(begin, end)

    def add_read_conflict_key(self, key: Any) -> None:
        """Add ``key`` to the read conflict ranges."""
        key = to_key(key)
        self.add_read_conflict_range(key, key_after(key))

    def add_write_conflict_range(self, begin: Any, end: Any) -> None:
        """Add ``[begin, end)`` to the write conflict ranges."""
        begin, end = to_key(begin), to_key(end)
        if begin < end:
            self._write_ranges.append((begin, end))
            self._write_conflicts.add(begin, end)

    def add_write_conflict_key(self, key: Any) -> None:
        """Add ``key`` to the write conflict ranges."""
        key = to_key(key)
        self.add_write_conflict_range(key, key_after(key))

    # -- watches, commit, errors ------------------------------------------------------------

    def watch(self, key: Any) -> Future:
        """A Future that becomes ready when ``key``'s value changes from what this
        transaction reads now; active once the transaction commits."""
        key = to_key(key)
        future = Future()
        try:
            expected = self._read_point(key, snapshot=False)
        except FDBError as error:
            future.set_error(error)
            return future
        if not any(r == (key, key_after(key)) for r in self._read_ranges[-1:]):
            self._add_read_range(key, key_after(key))
        self._watches.append((key, expected, future))
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
        1020 (conflict), 1007 (read version too old), 2101 (too large) or an earlier error."""
        try:
            self._check_readable()
        except FDBError as error:
            self._fail_pending(error)
            return Future.failed(error)
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

    def get_versionstamp(self) -> Future:
        """A Future of the 10-byte versionstamp, ready after a successful commit (error 2021
        for a read-only transaction)."""
        return self._versionstamp

    def on_error(self, error: Any) -> Future:
        """Decide about an error: for a retryable one, reset, wait a backoff and return a
        ready Future (retry); otherwise a Future that raises the error."""
        if isinstance(error, FDBError):
            code = error.code
        elif isinstance(error, int):
            code = error
        else:
            raise error
        if self._cancelled:
            return Future.failed(FDBError(1025))
        timed_out = self._deadline is not None and time.monotonic() > self._deadline
        limit_reached = 0 <= self._retry_limit <= self._retries
        if not is_retryable(code) or timed_out or limit_reached:
            return Future.failed(FDBError(1031 if timed_out and is_retryable(code) else code))
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
        """Cancel: later operations raise 1025 until ``reset()``."""
        self._fail_pending(FDBError(1025))
        self._cancelled = True
