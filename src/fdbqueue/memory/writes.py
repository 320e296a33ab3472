"""A transaction's own writes, as its later reads see them (read-your-writes).

Keys the transaction set or cleared are *independent*: their value is known without reading
the database, and reading them adds no read conflict range (upstream
``fdbclient/ReadYourWrites.cpp``, ``updateConflictMap``). Keys with only atomic operations are
*dependent*: reading them reads the database value and applies the operations on top.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from sortedcontainers import SortedDict

from fdbqueue.memory.atomic import apply_atomic
from fdbqueue.memory.storage import Range, merge_ranges

__all__ = ["Entry", "WriteMap", "subtract_ranges"]


@dataclass
class Entry:
    """What the transaction did to one key: a known value (``independent``) or atomic
    operations still to apply to the database value."""

    independent: bool
    value: bytes | None = None
    operations: list[tuple[str, bytes]] = field(default_factory=list)

    def resolve(self, database_value: bytes | None) -> bytes | None:
        """The value the transaction sees, given the database value (for dependent keys)."""
        if self.independent:
            return self.value
        value = database_value
        for operation, param in self.operations:
            value = apply_atomic(operation, value, param)
        return value


_NO_ENTRIES = SortedDict()  # shared, never written: the entries of a transaction that wrote none


class WriteMap:
    """Sets, clears, clear ranges and atomic operations, for read-your-writes."""

    def __init__(self) -> None:
        self.entries: SortedDict = _NO_ENTRIES  # replaced by its own SortedDict at a write
        self.cleared: list[Range] = []  # merged, sorted
        self.cleared_begins: list[bytes] = []
        self.unreadable: list[Range] = []

    def _in_cleared(self, key: bytes) -> bool:
        index = bisect.bisect_right(self.cleared_begins, key) - 1
        return index >= 0 and self.cleared[index][0] <= key < self.cleared[index][1]

    def _writable(self) -> SortedDict:
        if self.entries is _NO_ENTRIES:  # read-only transactions never build a SortedDict
            self.entries = SortedDict()
        return self.entries

    def lookup(self, key: bytes) -> Entry | None:
        """The entry for ``key``: an Entry, or None when the database value stands."""
        entry: Entry | None = self.entries.get(key)
        if entry is not None:
            return entry
        if self._in_cleared(key):
            return Entry(independent=True, value=None)
        return None

    def set(self, key: bytes, value: bytes) -> None:
        self._writable()[key] = Entry(independent=True, value=value)

    def clear_range(self, begin: bytes, end: bytes) -> None:
        for key in list(self.entries.irange(begin, end, inclusive=(True, False))):
            del self._writable()[key]
        self.cleared = merge_ranges([*self.cleared, (begin, end)])
        self.cleared_begins = [b for b, _ in self.cleared]

    def atomic(self, operation: str, key: bytes, param: bytes) -> None:
        entry = self.lookup(key)
        if entry is not None and entry.independent:
            self._writable()[key] = Entry(True, apply_atomic(operation, entry.value, param))
        elif entry is not None:
            entry.operations.append((operation, param))
        else:
            self._writable()[key] = Entry(False, operations=[(operation, param)])

    def mark_unreadable(self, begin: bytes, end: bytes) -> None:
        self.unreadable = merge_ranges([*self.unreadable, (begin, end)])

    def touches_unreadable(self, begin: bytes, end: bytes) -> bool:
        return any(b < end and begin < e for b, e in self.unreadable)

    def entries_in(self, begin: bytes, end: bytes, reverse: bool) -> list[tuple[bytes, Entry]]:
        """Entries of keys in ``[begin, end)``, in key order (or reversed)."""
        return [
            (key, self.entries[key])
            for key in self.entries.irange(begin, end, inclusive=(True, False), reverse=reverse)
        ]

    def hides(self, key: bytes) -> bool:
        """True when the database value of ``key`` is not what the transaction sees."""
        return key in self.entries or self._in_cleared(key)

    def independent_ranges(self, begin: bytes, end: bytes) -> list[Range]:
        """Parts of ``[begin, end)`` whose values the transaction wrote independently."""
        points = [
            (key, key + b"\x00")
            for key in self.entries.irange(begin, end, inclusive=(True, False))
            if self.entries[key].independent
        ]
        return merge_ranges([*points, *((b, e) for b, e in self.cleared if b < end and begin < e)])


def subtract_ranges(span: Range, holes: list[Range]) -> list[Range]:
    """``span`` minus the merged, sorted ``holes``."""
    begin, end = span
    pieces: list[Range] = []
    cursor = begin
    for hole_begin, hole_end in holes:
        if hole_end <= cursor or hole_begin >= end:
            continue
        if hole_begin > cursor:
            pieces.append((cursor, hole_begin))
        cursor = max(cursor, hole_end)
        if cursor >= end:
            break
    if cursor < end:
        pieces.append((cursor, end))
    return pieces
