"""The read path of a transaction: its read version, point reads, ``get_key`` and range reads
through its own writes (read-your-writes), the cache of the database values it read, and the
read conflict ranges its reads add.

Upstream rules: ``ReadYourWritesTransaction`` (``fdbclient/ReadYourWrites.cpp``): reads see
the transaction's writes (``RYWIterator``; a scan that reaches a versionstamped write's
unreadable range raises 1036), a key read before is answered from the ``SnapshotCache``, each
non-snapshot read adds what it covered (``updateConflictMap`` after ``getValue``, ``getKey``
and ``getRangeValue``/``getRangeValueBack``); ``Transaction::setVersion`` (2010 once a read
version is set); ``GetRangeLimits::isValid`` (2012); range batches as
:mod:`fdbqueue.memory._ranges` describes.

Latency: as with the binding's futures, a read's latency runs from the moment it is issued.
Each read is computed when it is issued (at the read version, through the writes made so far:
upstream's ``RYWImpl::read`` takes its write-map iterator then), and returns the
``time.monotonic()`` instant from which its result is ready: issue plus the read latency,
after the GRV latency when the read version is still being fetched (a transaction's first
read fetches it: the newest committed version half a GRV latency after its issue, when a
proxy would answer). Reads answered by the transaction's own writes are ready at once; one
answered from the cache of values read is ready when the read that filled it is. The
caller's future sleeps what is left when waited on; a point read's or ``get_key``'s error is
that future's, reported once the read's latency has run (a range read raises where it is
iterated). A read at a version the database has not reached fails with 1009
(``future_version``) after :data:`FUTURE_VERSION_DELAY`, as a storage server answers.
:attr:`Reads.outstanding` is when the last read issued is ready: a commit waits for it and
fails with the error of a read that failed (upstream RYW ``commit`` waits for ``reading``).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from fdbqueue.memory._access import SYSTEM_KEYS, KeyAccess
from fdbqueue.memory._conflicts import ConflictRanges
from fdbqueue.memory._errors import FDBError
from fdbqueue.memory._futures import Future, sleep_until
from fdbqueue.memory._keys import KeySelector, KeyValue, key_after, to_key
from fdbqueue.memory._lifecycle import Lifecycle
from fdbqueue.memory._ranges import ROW_OVERHEAD_BYTES, RangeResult, StreamingMode, batch_limits
from fdbqueue.memory._storage import VersionView
from fdbqueue.memory._writes import WriteMap

if TYPE_CHECKING:
    from fdbqueue.memory._server import Server

__all__ = ["FUTURE_VERSION_DELAY", "Reads"]

T = TypeVar("T")
FUTURE_VERSION = 1009
#: Seconds a storage server waits for a read version it has not reached before it answers
#: 1009 ``future_version`` (upstream ``SERVER_KNOBS->FUTURE_VERSION_DELAY``).
FUTURE_VERSION_DELAY = 1.0


class Reads:
    """The reads of one attempt of a transaction (a retry starts afresh)."""

    def __init__(
        self,
        server: Server,
        access: KeyAccess,
        lifecycle: Lifecycle,
        writes: WriteMap,
        conflicts: ConflictRanges,
    ) -> None:
        self._server = server
        self._access = access
        self._lifecycle = lifecycle
        self._writes = writes
        self._conflicts = conflicts
        self.read_version: int | None = None
        self._version_ready = 0.0  # when the read version is known (its GRV latency has run)
        self.outstanding = 0.0  # when the last read issued is ready (0: none pending)
        self._view: VersionView | None = None
        # database values read, and when each read is ready (upstream's SnapshotCache)
        self._cache: dict[bytes, tuple[bytes | None, float]] = {}
        #: the error of the first read that failed at the database (the commit reports it)
        self.failed: FDBError | None = None

    # -- the read version -------------------------------------------------------------------

    def version(self) -> int | None:
        """The read version, None until it is set or taken by a read."""
        return self.read_version

    def read_version_future(self) -> Future:
        """``get_read_version``: a Future of the read version, fetched now if need be."""
        # ThreadSafeTransaction::getReadVersion reports a deferred error first.
        try:
            self._lifecycle.check_read_version()
            if self.read_version is None:
                self._fetch_version(time.monotonic())
            return Future.completed(self.read_version, self._version_ready)
        except FDBError as error:
            return Future.failed(error)

    def _fetch_version(self, now: float) -> int:
        """Fetch the read version: the newest committed one half a GRV latency from ``now``,
        when a proxy would answer the request (slept here), known to the caller once the whole
        GRV latency has run from ``now`` (reads issued meanwhile wait for it too)."""
        grv = self._server.latency.grv
        self._server.wait_for_recovery()
        now = max(now, time.monotonic())
        if grv:
            sleep_until(now + grv / 2)
        version = self.read_version = self._server.read_version()
        self._version_ready = now + grv if grv else 0.0
        self.outstanding = max(self.outstanding, self._version_ready)
        return version

    def set_read_version(self, version: int) -> None:
        """Read at ``version``; 2010 deferred once there is a read version."""
        if self.read_version is not None:
            self._lifecycle.defer(FDBError(2010))
            return
        self.read_version = int(version)
        self._version_ready = 0.0
        self._view = None

    def _with_view(self, read: Callable[[VersionView], T]) -> tuple[T, float]:
        """Issue ``read`` on the database as of the read version (one read round trip): its
        result, computed now, and the instant it is ready (0: now). A transaction's first read
        also fetches its read version, so it is ready after the GRV and read latencies.

        Raises:
            FDBError: the read's error (1007, 1036, ...), once its latency has run.
        """
        now = time.monotonic()
        version = self.read_version
        if version is None:
            version = self._fetch_version(now)
        ready = max(now, self._version_ready) + self._server.latency.read
        if ready <= now:
            ready = 0.0
        view = self._view
        if view is None or view.version != version:
            view = self._view = self._server.view(version)
        try:
            result = self._server.read(view, read)
        except FDBError as error:
            if error.code == FUTURE_VERSION:  # a storage server waits for the version first
                ready = max(ready, now + FUTURE_VERSION_DELAY)
            error.ready_at = ready
            self.outstanding = max(self.outstanding, ready)
            if self.failed is None:
                self.failed = error  # the commit, which waits for every read, reports it
            raise
        if ready > self.outstanding:
            self.outstanding = ready
        return result, ready

    # -- point reads and get_key ------------------------------------------------------------

    def point(self, key: bytes, snapshot: bool) -> tuple[bytes | None, float]:
        """A point read: the value (None: absent) and when it is ready (0: now). A key read
        before is answered from the transaction's cache of the database values it read
        (upstream's ``SnapshotCache``): no round trip, so no 1007."""
        self._lifecycle.check_readable()
        if self._access.unreadable(key):
            raise FDBError(2004)
        if self._writes.touches_unreadable(key, key_after(key)):
            raise FDBError(1036)
        entry = self._writes.lookup(key)
        if entry is not None and entry.independent:
            return entry.value, 0.0
        database_value: bytes | None
        cached = self._cache.get(key)
        if cached is not None:
            database_value, ready = cached
        else:
            database_value, ready = self._with_view(lambda view: self._counted_get(view, key))
            self._cache[key] = database_value, ready
        if not snapshot:
            self._conflicts.add_read_range(key, key_after(key))
        value = entry.resolve(database_value) if entry is not None else database_value
        return value, ready

    def _counted_get(self, view: VersionView, key: bytes) -> bytes | None:
        """The database value of ``key``, counted as upstream's ``getValue`` counts it: one
        key read, the value's bytes (none when absent; the key's not counted)."""
        value = view.get(key)
        self._server.count_read(1, 0 if value is None else len(value))
        return value

    def _scan(
        self,
        view: VersionView,
        begin: bytes,
        end: bytes,
        reverse: bool,
        rows: int = 0,
        byte_target: int = 0,
    ) -> Iterator[tuple[bytes, bytes]]:
        """What this transaction sees in ``[begin, end)``: the database plus its writes.
        ``rows`` and ``byte_target``: how much the caller means to take (0: no idea), the
        view's hint (:meth:`VersionView.scan`).

        Raises 1036 when the scan reaches a range its versionstamped writes made unreadable
        (upstream ``RYWIterator``: only a read that gets there fails, so a scan the caller
        stops before it succeeds).
        """
        writes = self._writes
        entries = writes.entries_in(begin, end, reverse)
        if not entries and not writes.clears(begin, end):
            # Nothing this transaction wrote is in the range: the database's pairs as they are.
            merged: Iterator[tuple[bytes, bytes]] = view.scan(
                begin, end, reverse, rows, byte_target
            )
        else:
            database = (
                (k, v)
                for k, v in view.scan(begin, end, reverse, rows, byte_target)
                if not writes.hides(k)
            )
            own: list[tuple[bytes, bytes]] = []
            for key, entry in entries:
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

    def _resolve_in_view(self, view: VersionView, selector: KeySelector) -> bytes:
        key = to_key(selector.key)
        top = self._access.read_top()
        if selector.offset >= 1:
            start = key_after(key) if selector.or_equal else key
            remaining = selector.offset
            for found, _ in self._scan(view, min(start, top), top, False, remaining):
                remaining -= 1
                if remaining == 0:
                    return found
            return top
        stop = key_after(key) if selector.or_equal else key
        remaining = 1 - selector.offset
        for found, _ in self._scan(view, b"", min(stop, top), True, remaining):
            remaining -= 1
            if remaining == 0:
                return found
        return b""

    def resolve(self, selector: KeySelector, snapshot: bool) -> tuple[bytes, float]:
        """``get_key``: the key ``selector`` selects, with the read conflict range of the
        keys scanned to find it; and when it is ready (0: now)."""
        self._lifecycle.check_readable()
        if not isinstance(selector, KeySelector):
            raise TypeError("get_key takes a KeySelector")
        if to_key(selector.key) > self._access.read_top():  # RYW getKey: key_outside_legal_range
            raise FDBError(2004)
        found, ready = self._with_view(lambda view: self._resolve_in_view(view, selector))
        if not snapshot:
            reference = to_key(selector.key)
            if selector.offset >= 1:  # scanned forward from the reference to the key found
                begin = key_after(reference) if selector.or_equal else reference
                end = key_after(found)
            else:  # scanned backward from the reference to the key found
                begin = found
                end = key_after(reference) if selector.or_equal else reference
            if begin < end:
                self._conflicts.add_read(begin, end)
        return found, ready

    # -- range reads ------------------------------------------------------------------------

    def _range_endpoint(self, endpoint: Any, default: bytes, snapshot: bool) -> tuple[bytes, float]:
        if endpoint is None:
            return default, 0.0
        if isinstance(endpoint, KeySelector):
            if endpoint.or_equal is False and endpoint.offset == 1:
                return to_key(endpoint.key), 0.0
            return self.resolve(endpoint, snapshot)
        return to_key(endpoint), 0.0

    def range(
        self, begin: Any, end: Any, limit: int, reverse: bool, mode: Any, snapshot: bool
    ) -> RangeResult:
        """``get_range``: check the arguments, resolve KeySelector endpoints and issue the
        first batch (see :class:`RangeResult`; the endpoints are resolved in the same round
        trip, as the storage server resolves a range request's selectors)."""
        mode = StreamingMode.iterator if mode is None else int(mode)
        try:
            begin_key, end_key, limit, ready = self._span(begin, end, limit, snapshot)
        except FDBError as error:  # reported where the range is iterated, as the binding's
            return RangeResult(self, snapshot, (b"", b""), limit, reverse, mode, failed=error)
        return RangeResult(self, snapshot, (begin_key, end_key), limit, reverse, mode, ready)

    def batch(
        self,
        begin: Any,
        end: Any,
        limit: int,
        target_bytes: int,
        mode: int,
        iteration: int,
        reverse: bool,
        snapshot: bool,
    ) -> tuple[list[KeyValue], bool, float]:
        """One batch of a range read as libfdb_c's ``fdb_transaction_get_range`` serves it
        (its arguments; :func:`~fdbqueue.memory._ranges.batch_limits`): the rows, whether the
        batch stopped at a limit, and when it is ready (0: now)."""
        begin_key, end_key, limit, span_ready = self._span(begin, end, limit, snapshot)
        rows, byte_target = batch_limits(limit, mode, iteration, max(0, target_bytes))
        if begin_key >= end_key:
            return [], False, span_ready
        found, full, ready = self.read_batch(
            begin_key, end_key, rows, byte_target, reverse, snapshot
        )
        return found, full, max(ready, span_ready)

    def _span(
        self, begin: Any, end: Any, limit: int, snapshot: bool
    ) -> tuple[bytes, bytes, int, float]:
        """Check a range read's arguments; its resolved ``[begin, end)``, row limit, and when
        the endpoints' resolution is ready (0: now, as for keys)."""
        self._lifecycle.check_readable()
        if limit == -1:  # upstream GetRangeLimits::ROW_LIMIT_UNLIMITED
            limit = 0
        elif limit < 0:
            raise FDBError(2012)  # range_limits_invalid (GetRangeLimits::isValid)
        begin_key, begin_ready = self._range_endpoint(begin, b"", snapshot)
        end_key, end_ready = self._range_endpoint(end, SYSTEM_KEYS, snapshot)
        top = self._access.read_top()
        if begin_key > top or end_key > top:
            raise FDBError(2004)
        return begin_key, end_key, limit, max(begin_ready, end_ready)

    def read_batch(
        self, begin: bytes, end: bytes, limit: int, byte_target: int, reverse: bool, snapshot: bool
    ) -> tuple[list[KeyValue], bool, float]:
        """One batch of a range read (one round trip): up to ``limit`` rows and about
        ``byte_target`` bytes (0: no limit; at least one row), whether it stopped at a
        limit, and when it is ready (0: now). Its read conflict range is what it covered: up
        to its last row when it stopped at a limit, else the whole of ``[begin, end)``
        (upstream ``updateConflictMap`` for ``getRangeValue``/``getRangeValueBack``)."""
        self._lifecycle.check_readable()

        def read(view: VersionView) -> tuple[list[tuple[bytes, bytes]], bool]:
            found: list[tuple[bytes, bytes]] = []
            spent = 0
            full = False
            for key, value in self._scan(view, begin, end, reverse, limit, byte_target):
                found.append((key, value))
                spent += ROW_OVERHEAD_BYTES + len(key) + len(value)
                if len(found) == limit or (byte_target and spent >= byte_target):
                    full = True
                    break
            # upstream getRangeFinished: the pairs returned and their keys' and values' bytes
            self._server.count_read(len(found), spent - ROW_OVERHEAD_BYTES * len(found))
            return found, full

        (pairs, full), ready = self._with_view(read)  # an error carries its ready_at
        if not snapshot:
            if not full:
                self._conflicts.add_read(begin, end)
            elif reverse:
                self._conflicts.add_read(pairs[-1][0], end)
            else:
                self._conflicts.add_read(begin, key_after(pairs[-1][0]))
        return [KeyValue(key, value) for key, value in pairs], full, ready
