"""Injected faults of writing commits, and the commits they leave in flight.

Upstream rules: what :class:`fdbqueue.memory.Faults` describes: the client's commit
path (``fdbclient/NativeAPI.actor.cpp`` ``tryCommit``; ``fdbclient/ReadYourWrites.cpp``
``simulateTimeoutInFlightCommit``: a commit the client stopped waiting for may still land)
and cluster recovery (``ClusterRecovery.cpp``: versions jump ``MAX_VERSIONS_IN_FLIGHT``,
commits in flight die, watches fire). The caller holds the database's lock.
"""

from __future__ import annotations

import random
import time
from collections import Counter

from fdbqueue.memory._errors import FDBError
from fdbqueue.memory._faults import (
    COMMIT_UNKNOWN_RESULT,
    NOT_COMMITTED,
    TIMED_OUT,
    TRANSACTION_TOO_OLD,
    Faults,
)
from fdbqueue.memory._futures import Future
from fdbqueue.memory._resolver import CommitRequest, Resolver
from fdbqueue.memory._versions import VersionClock
from fdbqueue.memory._watch_registry import WatchRegistry

__all__ = ["FaultInjector"]


class FaultInjector:
    """Writing commits as the faults set make them fail; ``faults`` may be replaced."""

    def __init__(
        self,
        resolver: Resolver,
        clock: VersionClock,
        watches: WatchRegistry,
        draws: random.Random,
        stats: Counter[str],
    ) -> None:
        self._resolver = resolver
        self._clock = clock
        self._watches = watches
        self._random = draws
        self._stats = stats
        self.faults = Faults()
        self._in_flight: list[CommitRequest] = []  # timed-out commits that may still land
        #: ``time.monotonic()`` instant at which the last recovery ends (0: none under way)
        self.recovered_at = 0.0

    def in_flight(self) -> int:
        """How many commits are in flight."""
        return len(self._in_flight)

    def commit(self, request: CommitRequest, fired: list[Future]) -> int:
        """Commit a writing transaction, or fail it with the fault it draws (see
        :class:`Faults`). Returns the commit version; raises the error reported."""
        resolver = self._resolver
        faults = self.faults
        if not faults.total:  # no random draw when no fault is set
            return resolver.apply(request, fired)
        kind = faults.choose(self._random.random())
        if kind is None:
            return resolver.apply(request, fired)
        self._stats[f"injected_{kind}"] += 1
        if kind == "not_committed":
            raise FDBError(NOT_COMMITTED)
        if kind == "transaction_too_old":
            raise FDBError(TRANSACTION_TOO_OLD)
        if kind == "commit_unknown_result":
            if self._random.random() < 0.5:
                resolver.apply(request, fired)  # a genuine 1020 or 1007 is reported as such
                self._stats["injected_commit_unknown_result_applied"] += 1
            raise FDBError(COMMIT_UNKNOWN_RESULT)
        if kind == "timed_out":
            if self._random.random() < 0.5:
                self._in_flight.append(request.copy())  # may land later (resolve_in_flight)
            raise FDBError(TIMED_OUT)
        # recovery: the commit lands or not, then the cluster recovers before answering.
        if self._random.random() < 0.5:
            try:
                resolver.apply(request, fired, genuine=False)
                self._stats["injected_recovery_applied"] += 1
            except FDBError:
                pass  # it conflicted or was too old: not applied, still reported as 1021
        self._recover(fired)
        raise FDBError(COMMIT_UNKNOWN_RESULT)

    def resolve_in_flight(self, fired: list[Future]) -> None:
        """Before a writing commit's own work: resolve each commit in flight with
        probability 1/2 (one seeded draw each, oldest first)."""
        if not self._in_flight:
            return
        still: list[CommitRequest] = []
        for request in self._in_flight:
            if self._random.random() < 0.5:
                self._land(request, fired)
            else:
                still.append(request)
        self._in_flight = still

    def settle(self, fired: list[Future]) -> int:
        """Resolve every commit in flight now; returns how many were applied."""
        pending, self._in_flight = self._in_flight, []
        return sum(self._land(request, fired) for request in pending)

    def _land(self, request: CommitRequest, fired: list[Future]) -> bool:
        """Resolve a commit in flight as the resolver would now. True when it was applied."""
        try:
            self._resolver.apply(request, fired, genuine=False)
        except FDBError:
            return False  # conflicted or too old: dropped
        self._stats["injected_timed_out_applied"] += 1
        return True

    def _recover(self, fired: list[Future]) -> None:
        """A cluster recovery. Versions jump MAX_VERSIONS_IN_FLIGHT ahead, commits in flight
        die, every outstanding watch fires, and the database is unavailable for
        ``faults.recovery_seconds`` (read version requests and commits wait)."""
        self._clock.recover()
        self._in_flight = []
        self._watches.fire_all(fired)
        self.recovered_at = time.monotonic() + self.faults.recovery_seconds
