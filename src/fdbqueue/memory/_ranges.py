"""Lazy range reads: :class:`RangeResult`, the in-memory ``FDBRange``.

The binding's ``FDBRange`` (``fdb/impl.py``) fetches a range in batches as it is iterated:
the first batch when it is made, each later one when the previous one is used up. libfdb_c
sizes each batch from the streaming mode (``bindings/c/fdb_c.cpp``,
``validate_and_update_parameters``): ``iterator`` starts at 4,096 bytes and grows by half
again each batch up to 120,000; ``want_all`` reads as ``serial`` (120,000 bytes); ``small``,
``medium`` and ``large`` 256, 1,000 and 4,096 bytes; ``exact`` the whole row limit at once,
and needs one (2210 ``exact_mode_without_limits``). A batch returns at least one row.

Each batch adds its own read conflict range (upstream ``ReadYourWritesTransaction``'s
``getRangeValue`` then ``updateConflictMap``): a batch that stopped at a limit covers
``[begin, key_after(last))`` (reversed: ``[last, end)``), one that reached the end of the
range covers what was left of it. So an abandoned iteration conflicts only on the batches it
fetched. Iterating again re-reads every batch after the first, as ``FDBRange.__iter__`` does.

Latency, as the binding's futures have it: the first batch is issued when the range is made,
so its latency runs from then, and iterating sleeps only what is left of it; each later batch
is issued when the iteration hands out the previous batch's last row (``FDBRange.__iter__``
requests it before yielding that row), and the iteration sleeps what is left of its latency
when it needs its first row.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from fdbqueue.memory._errors import FDBError
from fdbqueue.memory._futures import sleep_until
from fdbqueue.memory._keys import KeyValue, key_after

__all__ = ["BatchReader", "RangeResult", "StreamingMode", "batch_limits"]


class StreamingMode:
    """The binding's ``fdb.StreamingMode`` numbers (``fdb/fdboptions.py``)."""

    want_all = -2
    iterator = -1
    exact = 0
    small = 1
    medium = 2
    large = 3
    serial = 4


#: Byte targets per mode, ``exact`` (0) meaning none (``validate_and_update_parameters``).
MODE_BYTES = {
    StreamingMode.exact: 0,
    StreamingMode.small: 256,
    StreamingMode.medium: 1000,
    StreamingMode.large: 4096,
    StreamingMode.serial: 120_000,
}
#: The ``iterator`` mode's byte target for its 1st, 2nd, ... batch.
ITERATION_BYTES = (4096, 6144, 9216, 13824, 20736, 31104, 46656, 69984, 80000, 120000)
#: What a row costs toward a batch's byte target besides its key and value.
ROW_OVERHEAD_BYTES = 8


def batch_limits(limit: int, mode: int, iteration: int, target_bytes: int = 0) -> tuple[int, int]:
    """The row limit and byte target (0: none) of batch ``iteration`` (from 1) of a range
    read limited to ``limit`` rows (0: no limit) in streaming ``mode``; a caller's own
    ``target_bytes`` (0: none; the C API's argument) lowers the mode's target.

    Raises:
        FDBError: 2210 for ``exact`` without a row or byte limit; 2000 for an unknown mode
            or an iteration below 1 in ``iterator`` mode.
    """
    if mode == StreamingMode.exact and not limit and not target_bytes:
        raise FDBError(2210)
    if mode == StreamingMode.want_all:
        mode = StreamingMode.serial
    if mode == StreamingMode.iterator:
        if iteration < 1:
            raise FDBError(2000)
        mode_bytes = ITERATION_BYTES[min(iteration, len(ITERATION_BYTES)) - 1]
    elif mode in MODE_BYTES:
        mode_bytes = MODE_BYTES[mode]
    else:
        raise FDBError(2000)
    if target_bytes and mode_bytes:
        return limit, min(target_bytes, mode_bytes)
    return limit, target_bytes or mode_bytes


#: The rows, whether the batch stopped at a limit, and the ``time.monotonic()`` instant from
#: which it is ready (0: now).
Batch = tuple[list[KeyValue], bool, float]


class BatchReader(Protocol):
    """What reads a range's batches: a transaction's read path
    (:class:`fdbqueue.memory._reads.Reads`)."""

    def read_batch(
        self, begin: bytes, end: bytes, limit: int, byte_target: int, reverse: bool, snapshot: bool
    ) -> Batch:
        """Issue one batch: up to ``limit`` rows and about ``byte_target`` bytes."""
        ...


class RangeResult:
    """The result of ``get_range``: iterable over KeyValue, fetched in batches as it is
    iterated (see the module docstring), with ``to_list()``.

    The first batch is read when ``get_range`` is called; its FoundationDB errors (and those of
    the arguments, such as 2004 or 2012) are raised where the result is first iterated, as the
    binding's ``FDBRange`` reports the future of its first batch; later batches are read as
    the iteration reaches them. Its latency runs from the call: iterating waits for what is
    left of it, an error included (see the module docstring). Like the binding's
    ``FDBRange``, it has no ``len()``: use ``list(...)`` or ``to_list()``.
    """

    def __init__(
        self,
        reader: BatchReader,
        snapshot: bool,
        span: tuple[bytes, bytes],
        limit: int,
        reverse: bool,
        mode: int,
        ready: float = 0.0,
        failed: FDBError | None = None,
    ) -> None:
        """``ready``: when the range's endpoints are resolved (0: now); the first batch is
        ready no sooner. ``failed``: the read's error (its arguments'), raised on iteration."""
        self._reader = reader
        self._snapshot = snapshot
        self._begin, self._end = span
        self._limit = limit
        self._reverse = reverse
        self._mode = mode
        self._failed = failed
        self._first: Batch = [], False, 0.0
        if failed is None:
            try:
                rows, full, first_ready = self._fetch(self._begin, self._end, limit, mode, 1)
                self._first = rows, full, max(first_ready, ready)
            except FDBError as error:  # the first batch's future reports it, when waited on
                self._failed = error

    def _fetch(self, begin: bytes, end: bytes, limit: int, mode: int, iteration: int) -> Batch:
        rows, byte_target = batch_limits(limit, mode, iteration)
        if begin >= end:
            return [], False, 0.0
        return self._reader.read_batch(begin, end, rows, byte_target, self._reverse, self._snapshot)

    def __iter__(self) -> Iterator[KeyValue]:
        return self._iterate(self._mode)

    def _iterate(self, mode: int) -> Iterator[KeyValue]:
        if self._failed is not None:
            sleep_until(self._failed.ready_at)
            raise self._failed
        begin, end, limit = self._begin, self._end, self._limit
        rows, full, ready = self._first
        iteration = 1
        while True:
            sleep_until(ready)
            if not rows or not full or limit == len(rows):
                yield from rows
                return
            if limit:
                limit -= len(rows)
            if self._reverse:
                end = rows[-1].key
            else:
                begin = key_after(rows[-1].key)
            iteration += 1
            yield from rows[:-1]
            # As FDBRange.__iter__: the next batch is requested before the last row is handed
            # out; its error is the next step's.
            try:
                following = self._fetch(begin, end, limit, mode, iteration)
            except FDBError as error:
                yield rows[-1]
                sleep_until(error.ready_at)
                raise error
            yield rows[-1]
            rows, full, ready = following

    def to_list(self) -> list[KeyValue]:
        """Every key-value pair as a list; after the first batch, in batches as large as
        ``exact`` (with a limit) or ``want_all`` allow, as the binding's ``to_list``."""
        mode = self._mode
        if mode == StreamingMode.iterator:
            mode = StreamingMode.exact if self._limit > 0 else StreamingMode.want_all
        return list(self._iterate(mode))
