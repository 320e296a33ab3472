"""The versioned key space: current state, recent history, and conflict detection.

The current state is a ``SortedDict`` of live keys. Each commit of the last five seconds is
kept in a log with its commit version, its write conflict ranges (to detect conflicts with
later commits of older transactions) and an undo map: for every key it changed, the value
before it (``None`` when the key was absent). A reader at read version ``v`` sees the current
state overlaid with the undo maps of the commits newer than ``v`` (:class:`VersionView`).
The caller (the database) holds its lock around every method here.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterator
from dataclasses import dataclass, field

from sortedcontainers import SortedDict

__all__ = ["Commit", "Storage", "VersionView", "ranges_intersect"]

Range = tuple[bytes, bytes]


def merge_ranges(ranges: list[Range]) -> list[Range]:
    """Sort ``ranges`` and merge overlapping or touching ones; empty ranges are dropped."""
    merged: list[Range] = []
    for begin, end in sorted(r for r in ranges if r[0] < r[1]):
        if merged and begin <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((begin, end))
    return merged


def ranges_intersect(sorted_ranges: list[Range], begins: list[bytes], candidate: Range) -> bool:
    """True when ``candidate`` overlaps one of ``sorted_ranges`` (merged, with their begins)."""
    begin, end = candidate
    index = bisect.bisect_right(begins, begin) - 1
    if index >= 0 and sorted_ranges[index][1] > begin:
        return True
    return index + 1 < len(sorted_ranges) and sorted_ranges[index + 1][0] < end


@dataclass
class Commit:
    """One applied commit, kept while transactions may still read below its version."""

    sequence: int
    version: int
    write_ranges: list[Range]  # merged, in key order
    undo: dict[bytes, bytes | None] = field(default_factory=dict)
    #: The begins of ``write_ranges``, for bisection.
    write_begins: list[bytes] = field(default_factory=list)


class Storage:
    """Current key-value state plus the recent commit log."""

    def __init__(self) -> None:
        self.current: SortedDict = SortedDict()
        self.log: list[Commit] = []  # oldest first; versions and sequences increase
        self.versions: list[int] = []
        self.next_sequence = 0

    # -- writing ----------------------------------------------------------------------------

    def begin_commit(self, version: int, write_ranges: list[Range]) -> Commit:
        """Start recording a commit at ``version``; apply mutations with :meth:`write`."""
        merged = merge_ranges(write_ranges)
        commit = Commit(self.next_sequence, version, merged, {}, [begin for begin, _ in merged])
        self.next_sequence += 1
        self.log.append(commit)
        self.versions.append(version)
        return commit

    def write(self, commit: Commit, key: bytes, value: bytes | None) -> None:
        """Set ``key`` to ``value`` (``None`` clears it) as part of ``commit``."""
        if key not in commit.undo:
            commit.undo[key] = self.current.get(key)
        if value is None:
            self.current.pop(key, None)
        else:
            self.current[key] = value

    def keys_in(self, begin: bytes, end: bytes) -> list[bytes]:
        """The live keys in ``[begin, end)``, in order."""
        return list(self.current.irange(begin, end, inclusive=(True, False)))

    def prune(self, oldest_readable_version: int) -> None:
        """Forget commits that no readable version can be below."""
        drop = bisect.bisect_right(self.versions, oldest_readable_version)
        if drop:
            del self.log[:drop]
            del self.versions[:drop]

    # -- reading ----------------------------------------------------------------------------

    def commits_after(self, version: int, after_sequence: int = -1) -> Iterator[Commit]:
        """Commits with a version above ``version`` and a sequence above ``after_sequence``,
        oldest first."""
        start = bisect.bisect_right(self.versions, version)
        if self.log and after_sequence >= 0:
            start = max(start, after_sequence + 1 - self.log[0].sequence)
        for index in range(start, len(self.log)):
            yield self.log[index]

    def conflicts(self, read_version: int, read_ranges: list[Range]) -> bool:
        """True when a commit newer than ``read_version`` wrote inside ``read_ranges``.

        Cost: for each such commit, one bisection into its merged write ranges per merged
        read range (a transaction has few read ranges; a commit may have many writes).
        """
        if not read_ranges:
            return False
        start = bisect.bisect_right(self.versions, read_version)
        log = self.log
        if start == len(log):
            return False
        merged = merge_ranges(read_ranges)
        bisect_right = bisect.bisect_right
        for index in range(len(log) - 1, start - 1, -1):
            commit = log[index]
            writes, begins = commit.write_ranges, commit.write_begins
            if not writes:
                continue
            for begin, end in merged:
                # The last write range starting at or before ``begin``, then the next one.
                position = bisect_right(begins, begin) - 1
                if position >= 0 and writes[position][1] > begin:
                    return True
                if position + 1 < len(writes) and writes[position + 1][0] < end:
                    return True
        return False


class VersionView:
    """The key space as of one read version, kept up to date as commits arrive.

    The overlay holds, for each key changed by a commit newer than the read version, its
    value as of the read version. It is small (the keys changed while the transaction ran), so
    range scans sort the overlay's keys in the range on demand.
    """

    def __init__(self, storage: Storage, version: int) -> None:
        self.storage = storage
        self.version = version
        self.overlay: dict[bytes, bytes | None] = {}
        self.seen_sequence = -1

    def refresh(self) -> None:
        """Take in the undo maps of commits applied since the last refresh."""
        overlay = self.overlay
        for commit in self.storage.commits_after(self.version, self.seen_sequence):
            for key, old in commit.undo.items():
                if key not in overlay:
                    overlay[key] = old
            self.seen_sequence = commit.sequence

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key`` at this version (call :meth:`refresh` first)."""
        if key in self.overlay:
            return self.overlay[key]
        value: bytes | None = self.storage.current.get(key)
        return value

    def scan(
        self, begin: bytes, end: bytes, reverse: bool = False, rows: int = 0, byte_target: int = 0
    ) -> Iterator[tuple[bytes, bytes]]:
        """Key-value pairs in ``[begin, end)`` at this version, lazily, in key order.

        ``rows`` and ``byte_target`` hint how much the caller means to take (0: no idea):
        unused here, where pairs cost nothing to fetch; a connected client's view
        (:class:`fdbqueue.memory._remote.RemoteView`) sizes its first request by them."""
        if begin >= end:
            return
        overlay = self.overlay
        current = self.storage.current
        live = (
            (key, current[key])
            for key in current.irange(begin, end, inclusive=(True, False), reverse=reverse)
            if key not in overlay
        )
        if not overlay:
            yield from live
            return
        historical = sorted(
            (
                (key, value)
                for key, value in overlay.items()
                if begin <= key < end and value is not None
            ),
            reverse=reverse,
        )
        if not historical:  # nothing older to put back in this range
            yield from live
            return
        yield from heapq.merge(live, historical, key=lambda pair: pair[0], reverse=reverse)
