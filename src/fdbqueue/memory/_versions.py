"""The version clock of the in-memory database: versions advance about 1,000,000 per second
of monotonic time (plus the time a test adds), never go backwards, and jump at a recovery.

Upstream rules: ``VERSIONS_PER_SECOND`` and ``MAX_READ_TRANSACTION_LIFE_VERSIONS`` (a read
version more than five seconds old is refused with 1007 ``transaction_too_old``), and
``MAX_VERSIONS_IN_FLIGHT``, added to the last version of the old generation by a recovery
(``ClusterRecovery.cpp``). The caller (the database) holds its lock around every method.
"""

from __future__ import annotations

import time

__all__ = ["MAX_VERSIONS_IN_FLIGHT", "READ_WINDOW_VERSIONS", "VERSIONS_PER_SECOND", "VersionClock"]

VERSIONS_PER_SECOND = 1_000_000
#: How far behind the newest version a read version may fall (upstream
#: MAX_READ_TRANSACTION_LIFE_VERSIONS, five seconds of versions).
READ_WINDOW_VERSIONS = 5 * VERSIONS_PER_SECOND
#: How far a recovery moves the version clock (upstream MAX_VERSIONS_IN_FLIGHT, 100 seconds
#: of versions, added to the last version of the old generation in ClusterRecovery.cpp).
MAX_VERSIONS_IN_FLIGHT = 100 * VERSIONS_PER_SECOND


class VersionClock:
    """The versions handed out: read versions and commit versions."""

    def __init__(self) -> None:
        self._started = time.monotonic()
        self._time_offset = 0.0
        self.last_version = 0

    def now(self) -> int:
        """The version of the current time."""
        elapsed = time.monotonic() - self._started + self._time_offset
        return int(elapsed * VERSIONS_PER_SECOND) + 1

    def read_version(self) -> int:
        """A read version: the newest version handed out, or now's if later."""
        self.last_version = max(self.last_version, self.now())
        return self.last_version

    def commit_version(self) -> int:
        """A new commit version, above every version handed out."""
        version = max(self.last_version + 1, self.now())
        self.last_version = version
        return version

    def too_old(self, read_version: int) -> bool:
        """True when ``read_version`` is more than five seconds of versions behind now."""
        return self.now() - read_version > READ_WINDOW_VERSIONS

    def oldest_kept(self) -> int:
        """The version below which no readable version can be (with a second to spare): the
        commit log before it may be pruned."""
        return self.now() - READ_WINDOW_VERSIONS - VERSIONS_PER_SECOND

    def advance(self, seconds: float) -> None:
        """Move the clock forward (a test hook)."""
        self._time_offset += seconds

    def recover(self) -> None:
        """A recovery: versions jump MAX_VERSIONS_IN_FLIGHT ahead of the last one."""
        before = max(self.last_version, self.now())
        self._time_offset += MAX_VERSIONS_IN_FLIGHT / VERSIONS_PER_SECOND
        self.last_version = max(before + MAX_VERSIONS_IN_FLIGHT, self.now())
