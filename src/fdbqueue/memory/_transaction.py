"""Transactions of the in-memory database, with the ``fdb`` binding's ``Transaction`` shape.

:class:`Transaction` is the facade with the binding's methods; each call goes to the
component that holds its concept, all of one attempt of the transaction (a retry starts them
afresh) but the lifecycle, the system-key access and the options:

* :mod:`fdbqueue.memory._reads`: the read version and the reads, through the transaction's own
  writes (:mod:`fdbqueue.memory._writes`), in batches for ranges (:mod:`fdbqueue.memory._ranges`);
* :mod:`fdbqueue.memory._mutations`: the writes, with the errors they defer;
* :mod:`fdbqueue.memory._versionstamps`: versionstamped writes and the versionstamp;
* :mod:`fdbqueue.memory._conflicts`: the read and write conflict ranges;
* :mod:`fdbqueue.memory._watches`: the watches until the commit;
* :mod:`fdbqueue.memory._lifecycle`: spent, cancelled, timed out, retried;
* :mod:`fdbqueue.memory._access` and :mod:`fdbqueue.memory._options`.

The commit hands the request to the database's :class:`fdbqueue.memory._server.Server`, which
checks conflicts and applies the mutations atomically.

The rules of each call are upstream's ``ReadYourWritesTransaction``
(``fdbclient/ReadYourWrites.cpp``) as the binding reaches it through libfdb_c
(``bindings/c/fdb_c.cpp``) and ``ThreadSafeTransaction`` (``fdbclient/ThreadSafeTransaction.cpp``),
which turns the errors of void calls (writes, conflict ranges, ``set_read_version``) into a
deferred error reported by the next read or commit; each component's docstring names its
sources.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, cast

from fdbqueue.memory._access import KeyAccess, max_key_bytes
from fdbqueue.memory._atomic import AtomicOperations
from fdbqueue.memory._conflicts import ConflictRanges
from fdbqueue.memory._errors import FDBError
from fdbqueue.memory._futures import Future, Key, Value, sleep_until
from fdbqueue.memory._keys import KeySelector, key_after, strinc, to_key
from fdbqueue.memory._lifecycle import Lifecycle
from fdbqueue.memory._mutations import Mutations
from fdbqueue.memory._options import DatabaseOptions, TransactionOptions
from fdbqueue.memory._ranges import RangeResult, StreamingMode
from fdbqueue.memory._reads import Reads
from fdbqueue.memory._resolver import CommitRequest
from fdbqueue.memory._server import Server
from fdbqueue.memory._versionstamps import Versionstamps
from fdbqueue.memory._watches import PendingWatches, bury, start_reaper
from fdbqueue.memory._writes import WriteMap

__all__ = ["RangeResult", "Snapshot", "Transaction", "TransactionOptions"]


class _Reader:
    """Read methods shared by a transaction and its snapshot view."""

    _transaction: Transaction
    _snapshot: bool

    def get(self, key: Any) -> Value:
        """Read ``key``; the Value is ``== None`` when the key is absent. The read is issued
        now; the Value is ready once the read latency has run (see :mod:`fdbqueue.memory`)."""
        try:
            return Value(*self._transaction._reads.point(to_key(key), self._snapshot))
        except FDBError as error:  # the read's future reports it, as the binding's
            return cast(Value, Value.failed(error, error.ready_at))

    def get_key(self, key_selector: KeySelector) -> Key:
        """Resolve a KeySelector to a key (``b""`` before the first key, ``b"\\xff"`` after
        the last): a :class:`Key` future, as the binding's."""
        try:
            return Key(*self._transaction._reads.resolve(key_selector, self._snapshot))
        except FDBError as error:  # the read's future reports it, as the binding's
            return cast(Key, Key.failed(error, error.ready_at))

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
        fetched in batches as the result is iterated (:mod:`fdbqueue.memory._ranges`)."""
        return self._transaction._reads.range(
            begin, end, int(limit), bool(reverse), streaming_mode, self._snapshot
        )

    def get_range_batch(
        self,
        begin: KeySelector,
        end: KeySelector,
        limit: int,
        target_bytes: int,
        mode: int,
        iteration: int,
        reverse: bool,
    ) -> Future:
        """One batch of a range read, with the arguments of libfdb_c's
        ``fdb_transaction_get_range`` (not a binding method: what
        :mod:`fdbqueue.memory._client_library` serves the binding's ``FDBRange`` with). Returns
        a Future of the rows and whether the batch stopped at a limit (more may follow), ready
        once the read latency has run. Its read conflict range covers only what it read."""
        try:
            rows, more, ready = self._transaction._reads.batch(
                begin, end, limit, target_bytes, mode, iteration, reverse, self._snapshot
            )
        except FDBError as error:  # the batch's future reports it, once its latency has run
            return Future.failed(error, error.ready_at)
        return Future.completed((rows, more), ready)

    def get_range_startswith(self, prefix: Any, *args: Any, **kwargs: Any) -> RangeResult:
        """Key-value pairs whose keys start with ``prefix``."""
        prefix = to_key(prefix)
        return self.get_range(prefix, strinc(prefix), *args, **kwargs)

    def get_read_version(self) -> Future:
        """A Future of the transaction's read version (an int)."""
        return self._transaction._reads.read_version_future()

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
    """An in-memory FoundationDB transaction (see the module docstring). ``database`` is the
    :class:`fdbqueue.memory.Database` (``tr.db``), ``server`` its side of the network."""

    def __init__(
        self, database: Any, server: Server, database_options: DatabaseOptions | None = None
    ) -> None:
        self.db = database
        self._transaction = self
        self._snapshot = False
        self._server = server
        self._access = KeyAccess()
        self._lifecycle = Lifecycle(self._fail_pending)
        self.options = TransactionOptions(self._lifecycle, self._access, database_options)
        self.snapshot = Snapshot(self)
        self._reset_options()
        self._reset_state()

    # -- state ------------------------------------------------------------------------------

    def _reset_options(self) -> None:
        self._lifecycle.reset_options()
        self.options.reset_options()  # the database's defaults of persistent options

    def _reset_state(self) -> None:
        """A fresh attempt: every component but the lifecycle's persistent options."""
        lifecycle, access = self._lifecycle, self._access
        lifecycle.reset_state()
        access.reset()  # not persistent (upstream resetRyow resets it): on_error drops it too
        writes, watches = WriteMap(), PendingWatches()
        conflicts = ConflictRanges(writes, lifecycle)
        reads = Reads(self._server, access, lifecycle, writes, conflicts)
        mutations = Mutations(access, lifecycle, self.options, writes, conflicts, watches)
        stamps = Versionstamps(access, lifecycle, mutations, writes, watches, reads.version)
        self._watches, self._conflicts, self._reads = watches, conflicts, reads
        self._mutations, self._versionstamps = mutations, stamps
        self.options.reset_state()  # size_limit and the other non-persistent options

    def _fail_pending(self, error: FDBError, versionstamp_error: FDBError | None = None) -> None:
        self._watches.fail(error)
        self._versionstamps.fail(versionstamp_error or error)

    def _commit_failed(self, error: FDBError) -> None:
        """A commit failed: its watches fail with its error, the versionstamp with 2020
        (upstream ``commitAndWatch``: ``transaction_invalid_version``)."""
        self._fail_pending(error, FDBError(2020))

    def defer_error(self, error: FDBError) -> None:
        """Not the binding's: report ``error`` at the next read or commit, as
        ``ThreadSafeTransaction`` does for a void call's error (the in-memory C API's hook)."""
        self._lifecycle.defer(error)

    # -- reads ------------------------------------------------------------------------------

    def set_read_version(self, version: int) -> None:
        """Read at ``version`` instead of asking the database for one. Once the transaction
        has a read version (set, or taken by a read), 2010 ``read_version_already_set`` is
        deferred to the next read or commit (upstream ``Transaction::setVersion``)."""
        self._reads.set_read_version(version)

    # -- writes -----------------------------------------------------------------------------

    def set(self, key: Any, value: Any) -> None:
        """Set ``key`` to ``value``. Size and system-key errors surface at the next read or at
        commit, as with the binding: no write raises FDBError (not even on a cancelled
        transaction, whose commit then fails)."""
        self._mutations.set(key, value)

    def clear(self, key: Any) -> None:
        """Remove ``key`` (nothing happens if it is absent, nor for a key too long to exist:
        upstream RYW ``clear`` ignores keys over ``getMaxClearKeySize``)."""
        if isinstance(key, KeySelector):
            key = self.get_key(key).value
        self._mutations.clear(key)

    def clear_range(self, begin: Any, end: Any) -> None:
        """Remove every key in ``[begin, end)``."""
        if isinstance(begin, KeySelector):
            begin = self.get_key(begin).value
        if isinstance(end, KeySelector):
            end = self.get_key(end).value
        self._mutations.clear_range(begin, end)

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
        self._mutations.atomic(operation, key, param)

    def set_versionstamped_key(self, key: Any, param: Any) -> None:
        """Set a key whose 10 bytes at the offset in its last 4 bytes become the versionstamp.

        As upstream RYW ``atomicOp``: the key's length limit counts its 4-byte offset; the
        transaction sends no write conflict range for it, the commit adds the final key's
        (the commit proxy's ``ResolutionRequestBuilder::addTransaction``); and reading keys
        whose stamp would be at or above ``(read version + 1, 0)`` raises 1036
        (``getVersionstampKeyRange``; every stamp when there is no read version yet).
        """
        self._versionstamps.set_key(key, param)

    def set_versionstamped_value(self, key: Any, param: Any) -> None:
        """Set ``key`` to ``param`` with the 10 bytes at the offset in its last 4 bytes
        replaced by the versionstamp."""
        self._versionstamps.set_value(key, param)

    # -- conflict ranges --------------------------------------------------------------------

    def add_read_conflict_range(self, begin: Any, end: Any) -> None:
        """Add ``[begin, end)`` to the read conflict ranges, except the parts this
        transaction wrote with sets, clears and clear ranges (upstream RYW
        ``addReadConflictRange`` through ``updateConflictMap``)."""
        span = self._conflicts.requested_span(begin, end, self._access.read_top())
        if span is not None:
            self._conflicts.add_read(*span)

    def add_read_conflict_key(self, key: Any) -> None:
        """Add ``key`` to the read conflict ranges."""
        key = to_key(key)
        self.add_read_conflict_range(key, key_after(key))

    def add_write_conflict_range(self, begin: Any, end: Any) -> None:
        """Add ``[begin, end)`` to the write conflict ranges (errors as for
        :meth:`add_read_conflict_range`, ``b"\\xff"`` on needing ``access_system_keys``)."""
        self._mutations.add_write_conflict_range(begin, end)

    def add_write_conflict_key(self, key: Any) -> None:
        """Add ``key`` to the write conflict ranges."""
        key = to_key(key)
        self.add_write_conflict_range(key, key_after(key))

    # -- watches, commit, errors ------------------------------------------------------------

    def watch(self, key: Any) -> Future:
        """A Future that becomes ready when ``key``'s value changes from what this
        transaction reads now (upstream ``RYWImpl::watch``): it reads the key, fails with the
        read's error, 2004, 2102 (key too long) or 1032 (too many watches, counted from now),
        fires at once on this transaction's own change of the key, and fails with 1025 on a
        reset, retry, cancel or destroy before the commit (see :mod:`fdbqueue.memory._watches`).
        """
        key = to_key(key)
        future = Future()
        try:
            self._lifecycle.check_readable()
            if self._access.unreadable(key):
                raise FDBError(2004)
            if len(key) > max_key_bytes(key):
                raise FDBError(2102)
            expected, _ready = self._reads.point(key, snapshot=False)
        except FDBError as error:
            future.set_error(error)
            return future
        if not self._server.open_watch(future):
            future.set_error(FDBError(1032))
            return future
        start_reaper()
        self._watches.add(key, expected, future)
        return future

    def get_approximate_size(self) -> Future:
        """A Future of the transaction's size as upstream's client counts it at commit (the
        figure a commit compares with the 10,000,000-byte limit, error 2101).

        It is upstream's ``Transaction::getSize()`` of what the read-your-writes layer sends,
        merged as it merges them: the mutations (:meth:`Mutations.size`) and the read and
        write conflict ranges (:class:`ConflictRanges`); see :mod:`fdbqueue.memory._size`.
        Upstream's own ``get_approximate_size`` is a cheaper running sum that merges nothing;
        this one is the exact figure of the commit check.
        """
        return Future.completed(self._approximate_size())

    def _approximate_size(self) -> int:
        return self._mutations.size() + self._conflicts.size()

    def commit(self) -> Future:
        """Commit: a Future that is ready once the mutations are applied, or fails with
        1020 (conflict), 1007 (read version too old), 2101 (too large) or an earlier error.

        Once called, the transaction is spent, whether the commit succeeded or failed (API
        410 on): every later read, write, commit or ``get_versionstamp`` fails with 2017
        ``used_during_commit`` (writes: at the next read or commit) until ``reset()`` or
        ``on_error()`` (upstream RYW ``commit`` sets ``commitStarted``; ``resetRyow`` clears
        it). A second commit applies nothing.
        """
        lifecycle = self._lifecycle
        try:
            lifecycle.check_readable()
        except FDBError as error:
            if error.code != 2017:
                self._commit_failed(error)
            return Future.failed(error)
        lifecycle.start_commit()
        # Upstream RYW commit waits for the reads still running (``reading``) and fails with
        # the error of one that failed; a timeout that runs out meanwhile ends the wait.
        sleep_until(min(self._reads.outstanding, lifecycle.deadline or float("inf")))
        failure = lifecycle.reset_error_now() or self._reads.failed
        if failure is not None:
            self._commit_failed(failure)
            return Future.failed(failure)
        request = CommitRequest(
            self._reads.read_version,
            self._conflicts.read_ranges,
            self._conflicts.write_ranges,
            self._mutations.mutations,
            *self._mutations.written(),
        )
        try:
            if not request.read_only and self._approximate_size() > self.options.size_limit:
                raise FDBError(2101)
            version, versionstamp = self._server.commit(request, self._watches)
        except FDBError as error:
            self._commit_failed(error)
            return Future.failed(error)
        self._versionstamps.committed(version, versionstamp)
        return Future.completed()

    def get_committed_version(self) -> int:
        """The commit version of a successful commit that wrote something, else -1."""
        return self._versionstamps.committed_version

    def get_versionstamp(self) -> Key:
        """A :class:`Key` future of the 10-byte versionstamp, as the binding's: its ``value``
        (or ``wait()``) is ready after a successful commit (error 2021 for a read-only
        transaction, 2020 when the commit failed). Call it before ``commit``: afterwards it
        fails with 2017 (upstream RYW ``getVersionstamp``)."""
        try:
            self._lifecycle.check_readable()
        except FDBError as error:
            failed = Key()
            failed.set_error(error)
            return failed
        return self._versionstamps.future

    def on_error(self, error: Any) -> Future:
        """Decide about an error: for a retryable one, reset and return a Future that is ready
        once a backoff has run (retry); otherwise a Future that raises the error (upstream RYW
        ``onError`` and ``Transaction::onError``; the delays: :meth:`Lifecycle.retry_delay`).

        A cancelled (1025), timed-out (1031) or spent (2017) transaction raises that, whatever
        ``error`` is; retryable codes are :data:`fdbqueue.memory._errors.RETRYABLE`, until the
        retry limit. The retry keeps the persistent options (timeout, retry limit, max retry
        delay) and drops ``access_system_keys``/``read_system_keys`` and ``size_limit``.
        Raising also cancels the transaction (API 610 on): later operations fail with 1025
        until ``reset()``.
        """
        if isinstance(error, FDBError):
            code = error.code
        elif isinstance(error, int):
            code = error
        else:
            raise error
        reset_error = self._lifecycle.reset_error_now()
        if reset_error is not None:
            return Future.failed(reset_error)
        delay = self._lifecycle.retry_delay(code, self._server.random_fraction)
        if delay is None:
            self.cancel()
            return Future.failed(FDBError(code))
        self._fail_pending(FDBError(1025))
        self._reset_state()
        self._server.count("retries")
        # The backoff is the returned future's latency, as libfdb_c's onError future becomes
        # ready only once the delay has run: waiting on it is a wait on a future.
        return Future.completed(None, time.monotonic() + delay if delay > 0 else 0.0)

    def reset(self) -> None:
        """Discard everything: writes, read version, conflict ranges and options."""
        self._fail_pending(FDBError(1025))
        self._reset_options()
        self._reset_state()

    def cancel(self) -> None:
        """Cancel: later reads and commit raise 1025 until ``reset()`` (writes are taken,
        and the commit reports 1025)."""
        self._fail_pending(FDBError(1025))
        self._lifecycle.cancel()

    def destroy(self) -> None:
        """What the binding's ``fdb_transaction_destroy`` does (``TransactionRead.__del__``
        calls it; the in-memory C API calls this): the watches of a transaction that did not
        commit fail with 1025, shortly after, from a background thread (upstream
        ``~ReadYourWritesTransaction`` and ``Transaction::cancelWatches``); watches of a
        committed transaction stay. Safe to call from a finalizer; ``__del__`` calls it too.
        """
        bury(self._watches.take())
        self._lifecycle.cancel()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # a finalizer must never raise
            bury(self._watches.take())
