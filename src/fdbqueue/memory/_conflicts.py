"""A transaction's read and write conflict ranges, as its commit sends them to the resolver,
with what they add to its size.

Upstream rules: ``ReadYourWritesTransaction`` (``fdbclient/ReadYourWrites.cpp``): reads add
read conflict ranges except over keys the transaction wrote with sets, clears and clear
ranges (``updateConflictMap``), as ``addReadConflictRange`` does; ``fdb_c.cpp``'s
``fdb_transaction_add_conflict_range`` raises 2005 for ``begin > end`` at once, while the
binding's ``ThreadSafeTransaction`` defers 2017 and 2004; ``Transaction::getSize``
(``fdbclient/NativeAPI.actor.cpp``) counts the merged ranges (:mod:`fdbqueue.memory._size`).
"""

from __future__ import annotations

from typing import Any

from fdbqueue.memory._access import METADATA_VERSION_KEY
from fdbqueue.memory._errors import FDBError
from fdbqueue.memory._keys import key_after, to_key
from fdbqueue.memory._lifecycle import Lifecycle
from fdbqueue.memory._size import RangeSet
from fdbqueue.memory._storage import Range
from fdbqueue.memory._writes import WriteMap, subtract_ranges

__all__ = ["ConflictRanges"]


class ConflictRanges:
    """The conflict ranges of one attempt of a transaction (a retry starts afresh)."""

    def __init__(self, writes: WriteMap, lifecycle: Lifecycle) -> None:
        self._writes = writes
        self._lifecycle = lifecycle
        self.read_ranges: list[Range] = []  # as added, for the resolver
        self.write_ranges: list[Range] = []
        self._read_set = RangeSet()  # the read ranges, merged, for the size
        self._write_set = RangeSet()  # the write conflict ranges the client sends

    def size(self) -> int:
        """What the merged read and write conflict ranges add to the transaction's size."""
        return self._read_set.bytes + self._write_set.bytes

    def add_read_range(self, begin: bytes, end: bytes) -> None:
        """Add ``[begin, end)`` to the read conflict ranges as it is."""
        self.read_ranges.append((begin, end))
        self._read_set.add(begin, end)

    def add_read(self, begin: bytes, end: bytes) -> None:
        """Add ``[begin, end)`` to the read conflict ranges, except the parts whose values
        the transaction wrote independently (upstream ``updateConflictMap``)."""
        holes = self._writes.independent_ranges(begin, end)
        for piece in subtract_ranges((begin, end), holes):
            self.add_read_range(*piece)

    def add_write(self, begin: bytes, end: bytes) -> None:
        """Add ``[begin, end)`` to the write conflict ranges."""
        self.write_ranges.append((begin, end))
        self._write_set.add(begin, end)

    def requested_span(self, begin: Any, end: Any, top: bytes) -> Range | None:
        """The checks of ``add_*_conflict_range``: 2005 raised at once for ``begin > end``
        (libfdb_c's ``fdb_transaction_add_conflict_range`` builds a ``KeyRangeRef``); 2017
        after commit and 2004 for a range past ``top`` deferred (the binding's
        ``ThreadSafeTransaction`` defers them). None when there is nothing to add."""
        begin, end = to_key(begin), to_key(end)
        if begin > end:
            raise FDBError(2005)
        if self._lifecycle.dropped_write():
            return None
        if (begin > top or end > top) and (begin, end) != (
            METADATA_VERSION_KEY,
            key_after(METADATA_VERSION_KEY),
        ):
            self._lifecycle.defer(FDBError(2004))
            return None
        return (begin, end) if begin < end else None
