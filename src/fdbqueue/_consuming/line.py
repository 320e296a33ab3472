"""The line of requests at one end of a queue, and one consumer session's place in it.

A request is a key written with ``set_versionstamped_key``, so requests sort in the order their
registering transactions committed and the line only grows at its end::

    line prefix + versionstamp (10 bytes) + owner (16 random bytes) + sequence (1 byte)
        -> the read version of its last refresh (0 until refreshed) and the wall-clock time
           of its registration or last refresh, in microseconds (8 bytes each, big-endian)

The owner is the session's random id; the sequence tells apart the requests one transaction
registers. A request is *abandoned* when ``abandon_after`` seconds have passed since its
registration or last refresh by both clocks, as a lease expires
(:mod:`fdbqueue._delivery.leases`, "Clock"): in read versions (the versionstamp's first 8
bytes are the registration's commit version) and by the wall clock (the recorded time, by the
clock of the client that looks). A recovery, which moves versions on by about 100 s in a
moment, does not make a live session's request look abandoned; a client whose clock runs
fast cannot clear a request before its versions say so. A request written without its time
(an empty value, or the 8-byte version of its last refresh: an older fdbqueue's) is abandoned
by its versions alone. How a session takes with its place in line is
:mod:`fdbqueue._consuming.sessions`.

Source followed: the developer guide's "Versionstamps" (``set_versionstamped_key``, the 10-byte
versionstamp and the 4-byte little-endian offset appended to the key).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from fdbqueue._delivery.leases import wall_microseconds
from fdbqueue._transactions.transactional import run_in_retry_loop

__all__ = ["MAX_PREFETCH", "OWNER_BYTES", "STAMP_BYTES", "Line"]

VERSIONS_PER_SECOND = 1_000_000
OWNER_BYTES = 16
#: The most requests a session keeps registered between calls: it registers ``prefetch + 1``
#: at most at once, each numbered by one byte after its owner.
MAX_PREFETCH = 255
STAMP_BYTES = 10
_UNSET_STAMP = b"\x00" * STAMP_BYTES
_VERSION = struct.Struct(">q")
#: A request's value: the version of its last refresh (0: none) and its wall-clock time.
_REQUEST = struct.Struct(">qq")
#: Transactions a withdrawal tries when they time out (1031) before it gives up.
WITHDRAW_ATTEMPTS = 5
TIMED_OUT = 1031


class Line:
    """One session's view of a line: its requests' keys, and reading, registering,
    refreshing and withdrawing them.

    Args:
        prefix: the line's key prefix (one line per end of a queue).
        owner: the session's id (:data:`OWNER_BYTES` random bytes).
        abandon_after: seconds (of versions and of the wall clock) after which a request
            nobody registered or refreshed counts as abandoned.
    """

    def __init__(self, prefix: bytes, owner: bytes, abandon_after: float) -> None:
        self.prefix = prefix
        self.end = prefix + b"\xff"
        self.owner = owner
        # versions, and microseconds of wall clock: both count a million a second
        self.abandon_versions = int(abandon_after * VERSIONS_PER_SECOND)
        self._owner_start = len(prefix) + STAMP_BYTES
        self._owner_end = self._owner_start + OWNER_BYTES
        self._offset = struct.pack("<I", len(prefix))

    def read(self, tr: Any) -> Any:
        """The requests, in line order: a snapshot range read (no conflict), issued now and
        waited on when iterated."""
        return tr.snapshot.get_range(self.prefix, self.end)

    def is_own(self, key: bytes) -> bool:
        """Whether the request ``key`` is this session's."""
        return bool(key[self._owner_start : self._owner_end] == self.owner)

    def register(self, tr: Any, count: int) -> None:
        """Add ``count`` requests at the end of the line, with this client's wall-clock time.
        Cost: a versionstamped set each; no read, so registering never conflicts."""
        value = _REQUEST.pack(0, wall_microseconds())
        for sequence in range(count):
            key = self.prefix + _UNSET_STAMP + self.owner + bytes([sequence])
            tr.set_versionstamped_key(key + self._offset, value)

    def abandoned(
        self,
        request: Any,
        read_version: int,
        versions: int | None = None,
        now: int | None = None,
    ) -> bool:
        """Whether nobody registered or refreshed ``request`` in the last ``versions``
        (default: ``abandon_after``'s) versions before ``read_version`` nor, by the wall clock,
        in as many microseconds before ``now`` (default: this client's wall clock)."""
        limit = self.abandon_versions if versions is None else versions
        start = len(self.prefix)
        if read_version - int.from_bytes(request.key[start : start + 8], "big") <= limit:
            return False  # registered recently (the usual case: no need to look further)
        value = bytes(request.value)
        if len(value) == _REQUEST.size:
            refreshed, wall_time = _REQUEST.unpack(value)
        else:  # written without its time: by its versions alone
            refreshed = _VERSION.unpack(value)[0] if len(value) == _VERSION.size else 0
            wall_time = None
        if read_version - refreshed <= limit:
            return False
        if wall_time is None:
            return True
        return bool((wall_microseconds() if now is None else now) - wall_time > limit)

    def refresh(self, tr: Any, own: list[Any], read_version: int) -> None:
        """Mark this session's waiting requests alive once a third of ``abandon_after`` has
        passed since they were registered or last refreshed, by both clocks. Cost: a set
        each time."""
        now = wall_microseconds()
        for request in own:
            if self.abandoned(request, read_version, self.abandon_versions // 3, now):
                tr[request.key] = _REQUEST.pack(read_version, now)

    def withdraw(self, database: Any, then: Callable[[Any], Any] | None = None) -> Any:
        """Clear this session's requests, in a transaction of its own. One that times out
        (1031) is tried again, :data:`WITHDRAW_ATTEMPTS` times in all: a request left behind
        would hold its place until ``abandon_after``. (Clears only: one that lands late
        changes nothing.) With ``then``, ``then(tr)`` runs in the same transaction after the
        clears (a sharded session reads where to go next while it leaves), and what it
        returns is returned; else None. Cost: a snapshot read of the line and a clear per
        request, and what ``then`` costs."""

        def body(tr: Any) -> Any:
            for request in self.read(tr):
                if self.is_own(request.key):
                    del tr[request.key]
            return then(tr) if then is not None else None

        for attempt in range(WITHDRAW_ATTEMPTS):
            try:
                return run_in_retry_loop(database, body)
            except Exception as error:
                if getattr(error, "code", None) != TIMED_OUT or attempt + 1 == WITHDRAW_ATTEMPTS:
                    raise
