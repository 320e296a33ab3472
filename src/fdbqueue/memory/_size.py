"""A transaction's size, counted as FoundationDB's client counts it before a commit.

Upstream (``fdbclient/NativeAPI.actor.cpp``, ``Transaction::getSize``) adds up the expected
sizes of three vectors sent to the commit proxy: the mutations, the read conflict ranges and
the write conflict ranges. Each element counts the size of its structure plus the bytes it
points to: a mutation ``sizeof(MutationRef)`` (40 bytes) plus its two parameters, a conflict
range ``sizeof(KeyRangeRef)`` (32 bytes) plus its begin and end keys. A commit whose size
exceeds 10,000,000 bytes fails with 2101 ``transaction_too_large``.

The read-your-writes layer builds those vectors from its maps at commit, so what is counted
is already coalesced: conflict ranges that overlap or touch are one range
(:class:`RangeSet`), and operations on one key are merged as ``WriteMap::coalesceOver`` merges
them (:func:`coalesce_over`).

What ``get_approximate_size`` counts, upstream's ``Transaction::getSize()`` of what the
read-your-writes layer sends:

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
"""

from __future__ import annotations

import bisect

from sortedcontainers import SortedDict

from fdbqueue.memory._atomic import apply_atomic

__all__ = [
    "MAX_TRANSACTION_BYTES",
    "MUTATION_BYTES",
    "RANGE_BYTES",
    "RangeSet",
    "clear_bytes",
    "coalesce_over",
    "range_bytes",
]

#: Upstream's default transaction size limit (``TRANSACTION_SIZE_LIMIT``), in bytes.
MAX_TRANSACTION_BYTES = 10_000_000
#: ``sizeof(MutationRef)``: what a mutation costs besides its two parameters.
MUTATION_BYTES = 40
#: ``sizeof(KeyRangeRef)``: what a conflict range costs besides its two keys.
RANGE_BYTES = 32

#: Atomic operations that upstream merges only when both parameters have the same length
#: (``NON_ASSOCIATIVE_MASK``; ``min`` is MinV2 and ``bit_and`` AndV2 from API 510 on).
_NON_ASSOCIATIVE = frozenset({"add", "bit_or", "bit_xor", "max", "min", "compare_and_clear"})


def range_bytes(begin: bytes, end: bytes) -> int:
    """What one conflict range ``[begin, end)`` adds to a transaction's size."""
    return RANGE_BYTES + len(begin) + len(end)


def clear_bytes(begin: bytes, end: bytes) -> int:
    """What one clear-range mutation of ``[begin, end)`` adds to a transaction's size."""
    return MUTATION_BYTES + len(begin) + len(end)


def coalesce_over(stack: list[tuple[str, bytes]], operation: str, param: bytes) -> None:
    """Push atomic ``operation`` onto a key's stack of atomic operations, merging it into the
    top one as upstream does: the same operation (but never ``compare_and_clear``), with
    parameters of equal length unless the operation is associative, becomes one operation
    whose parameter is the two combined."""
    if stack:
        top_operation, top_param = stack[-1]
        if (
            top_operation == operation
            and operation != "compare_and_clear"
            and (operation not in _NON_ASSOCIATIVE or len(top_param) == len(param))
        ):
            merged = apply_atomic(operation, top_param, param)
            stack[-1] = (operation, b"" if merged is None else merged)
            return
    stack.append((operation, param))


#: Ranges a :class:`RangeSet` keeps in plain lists before it moves them into a SortedDict.
LIST_RANGES = 512


class RangeSet:
    """Key ranges merged as they are added (overlapping or touching ranges become one), with
    ``bytes``: what they add to a transaction's size, :data:`RANGE_BYTES` plus both keys each.

    Up to :data:`LIST_RANGES` merged ranges are kept in two plain sorted lists (begins and
    ends): adding a range is a bisection and a list splice, O(1) when it comes after every
    range (the usual, ascending, case); beyond that they move into a ``SortedDict``, where
    adding a range costs O(log n) plus the ranges it absorbs.
    """

    __slots__ = ("_begins", "_ends", "_hit", "_ranges", "_top", "bytes")

    def __init__(self) -> None:
        self._begins: list[bytes] = []  # disjoint, not touching, ascending (list mode)
        self._ends: list[bytes] = []
        self._ranges: SortedDict | None = None  # begin -> end, beyond LIST_RANGES
        self.bytes = 0
        # Shortcuts: a range known to be covered (covered ranges only grow), and the last range.
        self._hit: tuple[bytes, bytes] = (b"", b"")
        self._top: tuple[bytes, bytes] | None = None

    def __len__(self) -> int:
        return len(self._begins) if self._ranges is None else len(self._ranges)

    def ranges(self) -> list[tuple[bytes, bytes]]:
        """The merged ranges, in key order."""
        if self._ranges is None:
            return list(zip(self._begins, self._ends, strict=True))
        return list(self._ranges.items())

    def add(self, begin: bytes, end: bytes) -> None:
        """Add ``[begin, end)``; an empty range is ignored."""
        if begin >= end:
            return
        hit = self._hit
        if hit[0] <= begin and end <= hit[1]:
            return  # already covered
        if self._ranges is None:
            self._add_to_lists(begin, end)
            if len(self._begins) > LIST_RANGES:
                self._ranges = SortedDict(zip(self._begins, self._ends, strict=True))
                self._top = self._ranges.peekitem(-1)
                self._begins, self._ends = [], []
            return
        ranges = self._ranges
        top = self._top
        if top is None or begin > top[1]:  # after every range: the usual, ascending, case
            ranges[begin] = end
            self.bytes += range_bytes(begin, end)
            self._hit = self._top = (begin, end)
            return
        index = ranges.bisect_right(begin)
        if index:
            previous_begin, previous_end = ranges.peekitem(index - 1)
            if previous_end >= begin:
                if previous_end >= end:
                    self._hit = (previous_begin, previous_end)
                    return  # already covered
                begin = previous_begin
                index -= 1
        while index < len(ranges):
            next_begin, next_end = ranges.peekitem(index)
            if next_begin > end:
                break
            del ranges[next_begin]
            self.bytes -= range_bytes(next_begin, next_end)
            if next_end > end:
                end = next_end
        ranges[begin] = end
        self.bytes += range_bytes(begin, end)
        self._hit = (begin, end)
        self._top = ranges.peekitem(-1)

    def _add_to_lists(self, begin: bytes, end: bytes) -> None:
        """:meth:`add` in list mode: merge ``[begin, end)`` with the ranges it overlaps or
        touches, by two bisections and one splice of each list."""
        begins, ends = self._begins, self._ends
        if not begins or begin > ends[-1]:  # after every range
            begins.append(begin)
            ends.append(end)
            self.bytes += range_bytes(begin, end)
            self._hit = (begin, end)
            return
        first = bisect.bisect_right(begins, begin)  # ranges before ``first`` start at or before
        if first and ends[first - 1] >= begin:  # overlaps or touches the range before
            if ends[first - 1] >= end:
                self._hit = (begins[first - 1], ends[first - 1])
                return  # already covered
            first -= 1
            begin = begins[first]
        last = bisect.bisect_right(begins, end, first)  # ranges from ``last`` on start after end
        for index in range(first, last):
            self.bytes -= range_bytes(begins[index], ends[index])
        if last > first and ends[last - 1] > end:
            end = ends[last - 1]
        begins[first:last] = [begin]
        ends[first:last] = [end]
        self.bytes += range_bytes(begin, end)
        self._hit = (begin, end)
