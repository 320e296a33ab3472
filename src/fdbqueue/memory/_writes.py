"""A transaction's own writes, as its later reads see them (read-your-writes).

Keys the transaction set or cleared are *independent*: their value is known without reading
the database, and reading them adds no read conflict range (upstream
``fdbclient/ReadYourWrites.cpp``, ``updateConflictMap``). Keys with only atomic operations are
*dependent*: reading them reads the database value and applies the operations on top.

The write map also counts the mutations its writes send, and what they add to the
transaction's size, as upstream's client sends them at commit
(``ReadYourWritesTransaction::writeRangeToNativeTransaction``): one mutation per key for its
last set (or its set with later atomic operations folded in), its atomic operations merged as
``WriteMap::coalesceOver`` merges them, and one clear-range mutation per maximal cleared
range, split around the keys written after the clear.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from sortedcontainers import SortedDict

from fdbqueue.memory._atomic import apply_atomic
from fdbqueue.memory._size import MUTATION_BYTES, clear_bytes, coalesce_over
from fdbqueue.memory._storage import Range, merge_ranges

__all__ = ["Entry", "WriteMap", "subtract_ranges"]


@dataclass
class Entry:
    """What the transaction did to one key: a known value (``independent``) or atomic
    operations still to apply to the database value."""

    independent: bool
    value: bytes | None = None
    operations: list[tuple[str, bytes]] = field(default_factory=list)
    #: The atomic operations as upstream sends them (merged, :func:`coalesce_over`).
    stack: list[tuple[str, bytes]] = field(default_factory=list)

    def size(self, key: bytes) -> int:
        """What this key's mutations add to the transaction's size."""
        if self.independent:
            if self.value is None:  # sent as a clear of [key, key + b"\x00")
                return MUTATION_BYTES + 2 * len(key) + 1
            return MUTATION_BYTES + len(key) + len(self.value)
        return sum(MUTATION_BYTES + len(key) + len(param) for _, param in self.stack)

    def count(self) -> int:
        """How many mutations this key sends at commit: one for a known value (a set, or a
        clear of the key), else one per merged atomic operation."""
        return 1 if self.independent else len(self.stack)

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
        self.entry_bytes = 0  # the sum of the entries' sizes
        self.entry_mutations = 0  # the sum of the entries' mutation counts
        self._clears: tuple[int, int] | None = (0, 0)  # clear mutations, bytes; None: recount

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

    def _put(self, key: bytes, entry: Entry) -> None:
        entries = self._writable()
        previous: Entry | None = entries.get(key)
        if previous is not None:
            self.entry_bytes -= previous.size(key)
            self.entry_mutations -= previous.count()
        elif self._clears is not None and self._in_cleared(key):
            self._clears = None  # the key splits a cleared range
        entries[key] = entry
        self.entry_bytes += entry.size(key)
        self.entry_mutations += entry.count()

    def set(self, key: bytes, value: bytes) -> None:
        self._put(key, Entry(independent=True, value=value))

    def clear_range(self, begin: bytes, end: bytes) -> None:
        for key in list(self.entries.irange(begin, end, inclusive=(True, False))):
            entry = self.entries.pop(key)
            self.entry_bytes -= entry.size(key)
            self.entry_mutations -= entry.count()
        self._merge_cleared(begin, end)
        self._clears = None

    def _merge_cleared(self, begin: bytes, end: bytes) -> None:
        """Merge ``[begin, end)`` into the sorted, merged cleared ranges: a bisection, not a
        sort, so that many clears in one transaction stay cheap."""
        if begin >= end:
            return
        cleared, begins = self.cleared, self.cleared_begins
        first = bisect.bisect_left(begins, begin)
        if first > 0 and cleared[first - 1][1] >= begin:  # touches the range before
            first -= 1
        last = bisect.bisect_right(begins, end)  # ranges from here on start after ``end``
        if first < last:
            begin = min(begin, cleared[first][0])
            end = max(end, cleared[last - 1][1])
        cleared[first:last] = [(begin, end)]
        begins[first:last] = [begin]

    def atomic(self, operation: str, key: bytes, param: bytes) -> None:
        entry = self.lookup(key)
        if entry is not None and entry.independent:
            self._put(key, Entry(True, apply_atomic(operation, entry.value, param)))
        elif entry is not None:
            self.entry_bytes -= entry.size(key)
            self.entry_mutations -= entry.count()
            entry.operations.append((operation, param))
            coalesce_over(entry.stack, operation, param)
            self.entry_bytes += entry.size(key)
            self.entry_mutations += entry.count()
        else:
            operations = [(operation, param)]
            self._put(key, Entry(False, operations=operations, stack=list(operations)))

    def mutation_bytes(self) -> int:
        """What the sets, clears and atomic operations add to the transaction's size: each
        key's mutations (:meth:`Entry.size`) plus one clear-range mutation per piece of the
        cleared ranges left between the keys written after the clear."""
        return self.entry_bytes + self._clear_totals()[1]

    def mutation_count(self) -> int:
        """How many mutations the sets, clears and atomic operations send at commit: each
        key's (:meth:`Entry.count`) plus one per piece of the cleared ranges."""
        return self.entry_mutations + self._clear_totals()[0]

    def _clear_totals(self) -> tuple[int, int]:
        """The clear-range mutations sent at commit and their bytes, counted again only after
        a clear or a write into a cleared range."""
        if self._clears is None:
            count = total = 0
            for begin, end in self.cleared:
                cursor = begin
                for key in self.entries.irange(begin, end, inclusive=(True, False)):
                    if cursor < key:
                        count += 1
                        total += clear_bytes(cursor, key)
                    cursor = key + b"\x00"
                if cursor < end:
                    count += 1
                    total += clear_bytes(cursor, end)
            self._clears = count, total
        return self._clears

    def mark_unreadable(self, begin: bytes, end: bytes) -> None:
        self.unreadable = merge_ranges([*self.unreadable, (begin, end)])

    def touches_unreadable(self, begin: bytes, end: bytes) -> bool:
        return any(b < end and begin < e for b, e in self.unreadable)

    def unreadable_barrier(self, begin: bytes, end: bytes, reverse: bool) -> bytes | None:
        """Where a scan of ``[begin, end)`` reaches the first unreadable range on its way
        (forward: the lowest such key; reversed: the end of the highest such range, every
        key below it being past the barrier), or None when it reaches none."""
        overlapping = [(b, e) for b, e in self.unreadable if b < end and begin < e]
        if not overlapping:
            return None
        if reverse:
            return min(overlapping[-1][1], end)
        return max(overlapping[0][0], begin)

    def entries_in(self, begin: bytes, end: bytes, reverse: bool) -> list[tuple[bytes, Entry]]:
        """Entries of keys in ``[begin, end)``, in key order (or reversed)."""
        if not self.entries:
            return []
        return [
            (key, self.entries[key])
            for key in self.entries.irange(begin, end, inclusive=(True, False), reverse=reverse)
        ]

    def clears(self, begin: bytes, end: bytes) -> bool:
        """True when a cleared range overlaps ``[begin, end)``. Cost: one bisection."""
        cleared = self.cleared
        if not cleared:
            return False
        index = bisect.bisect_left(self.cleared_begins, end) - 1  # the last one starting before end
        return index >= 0 and cleared[index][1] > begin

    def hides(self, key: bytes) -> bool:
        """True when the database value of ``key`` is not what the transaction sees."""
        return key in self.entries or self._in_cleared(key)

    def independent_ranges(self, begin: bytes, end: bytes) -> list[Range]:
        """Parts of ``[begin, end)`` whose values the transaction wrote independently."""
        if not self.entries and not self.cleared:
            return []
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
