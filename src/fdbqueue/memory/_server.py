"""What a transaction reaches over the network: read versions, reads at a read version,
commits and watches, under the database's one lock. Commits sleep their simulated latency;
read versions and reads are served at once, their latency paid by whoever waits on their
futures (:mod:`fdbqueue.memory._reads`), so that reads issued together overlap.

Upstream rules: the GRV proxy hands out read versions; storage servers refuse reads more
than five seconds behind with 1007 ``transaction_too_old``; a read-only commit never reaches
the resolver (version -1, no versionstamp); a writing commit goes through the commit proxy
and resolver (:mod:`fdbqueue.memory._resolver`, with the faults of
:mod:`fdbqueue.memory._injection`), and its watches become active
(:mod:`fdbqueue.memory._watch_registry`).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from fdbqueue.memory._atomic import versionstamp_bytes
from fdbqueue.memory._errors import FDBError
from fdbqueue.memory._faults import Faults
from fdbqueue.memory._futures import Future, sleep_until
from fdbqueue.memory._injection import FaultInjector
from fdbqueue.memory._resolver import CommitRequest
from fdbqueue.memory._storage import Storage, VersionView
from fdbqueue.memory._versions import VersionClock
from fdbqueue.memory._wall_clock import let_pass
from fdbqueue.memory._watch_registry import WatchLimit, WatchRegistry
from fdbqueue.memory._watches import PendingWatches, Watch

__all__ = ["STAT_NAMES", "Latency", "Server"]

T = TypeVar("T")

#: The statistics of :meth:`fdbqueue.memory.Database.stats`, each 0 from the start.
STAT_NAMES = (
    "transactions",
    "read_versions",
    "reads",
    "commits",
    "conflicts",
    "too_old",
    "retries",
    "watches",
    "keys_read",
    "bytes_read",
    "keys_written",
    "bytes_written",
    "injected_not_committed",
    "injected_commit_unknown_result",
    "injected_commit_unknown_result_applied",
    "injected_transaction_too_old",
    "injected_timed_out",
    "injected_timed_out_applied",
    "injected_recovery",
    "injected_recovery_applied",
    "commits_lost_to_recovery",
)


@dataclass(frozen=True)
class Latency:
    """Simulated network and cluster latency, in seconds.

    Args:
        grv: each read version request (``get_read_version``, or a transaction's first read).
        read: each read that reaches the database (point read, range read batch, ``get_key``).
        commit: each commit that writes.

    A read's latency runs from the moment it is issued (a transaction's first read: GRV then
    read); waiting on its result sleeps only what
    is left of it, so reads issued together overlap, as with the binding's futures. A commit
    waits for the reads still running, then sleeps its own latency.

    Raises:
        ValueError: a negative or non-numeric value.
    """

    grv: float = 0.0
    read: float = 0.0
    commit: float = 0.0

    def __post_init__(self) -> None:
        for name in ("grv", "read", "commit"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"Latency.{name} must be a number of seconds >= 0, not {value!r}")


class Server:
    """The database side of every transaction of one in-process database, and its test hooks
    (statistics, time, faults). Thread-safe.

    :class:`fdbqueue.memory._remote.RemoteServer` has the same methods and serves them from a
    server process (:func:`fdbqueue.memory.connect`); the transactions' client code
    (:mod:`fdbqueue.memory._reads`, :mod:`fdbqueue.memory._transaction`) runs unchanged on
    either.
    """

    def __init__(
        self,
        lock: threading.RLock,
        latency: Latency,
        storage: Storage,
        clock: VersionClock,
        watches: WatchRegistry,
        injector: FaultInjector,
        draws: random.Random,
        stats: Counter[str],
        limit: WatchLimit,
    ) -> None:
        self.latency = latency
        self._lock = lock
        self._storage = storage
        self._clock = clock
        self._watches = watches
        self._injector = injector
        self._random = draws
        self._stats = stats
        self.watch_limit = limit

    # -- statistics and test hooks ----------------------------------------------------------

    def count(self, name: str, amount: int = 1) -> None:
        """Add ``amount`` to the statistic ``name``."""
        with self._lock:
            self._stats[name] += amount

    def count_read(self, pairs: int, size: int) -> None:
        """Count ``pairs`` key-value pairs of ``size`` bytes returned by a read: called by
        the read that :meth:`read` runs, under the database's lock (cost: O(1))."""
        stats = self._stats
        stats["keys_read"] += pairs
        stats["bytes_read"] += size

    def stats(self) -> dict[str, int]:
        """The counters (see :meth:`fdbqueue.memory.Database.stats`)."""
        with self._lock:
            return dict(self._stats)

    def reset_stats(self) -> None:
        """Set every counter back to zero."""
        with self._lock:
            self._stats.clear()
            for name in STAT_NAMES:
                self._stats[name] = 0

    @property
    def faults(self) -> Faults:
        """The faults injected into writing commits (settable)."""
        return self._injector.faults

    @faults.setter
    def faults(self, faults: Faults) -> None:
        with self._lock:
            self._injector.faults = faults

    def advance_time(self, seconds: float) -> None:
        """Move the version clock ``seconds`` forward (checked by the caller)."""
        with self._lock:
            self._clock.advance(seconds)

    def pass_time(self, seconds: float) -> None:
        """Let ``seconds`` pass: the version clock and this process's wall clock
        (:func:`fdbqueue.memory.wall_clock`) move forward."""
        self.advance_time(seconds)
        let_pass(seconds)

    def in_flight(self) -> int:
        """How many commits an injected ``timed_out`` fault left in flight."""
        with self._lock:
            return self._injector.in_flight()

    def settle(self) -> int:
        """Resolve every commit in flight now (see :meth:`fdbqueue.memory.Database.settle`);
        returns how many were applied."""
        fired: list[Future] = []
        with self._lock:
            applied = self._injector.settle(fired)
        for future in fired:
            future.set_result(None)
        return applied

    def random_fraction(self) -> float:
        """A seeded draw in ``[0, 1)`` (``on_error``'s backoff jitter)."""
        with self._lock:
            return self._random.random()

    # -- what transactions reach ------------------------------------------------------------

    def recovering(self) -> bool:
        """Whether a recovery is under way (read versions and commits wait for its end)."""
        return time.monotonic() < self._injector.recovered_at

    def wait_for_recovery(self) -> None:
        """Wait until a recovery under way has ended (at once when none is): read version
        requests and commits are not served during one (:attr:`Faults.recovery_seconds`).
        Slept through a future (:func:`~fdbqueue.memory._futures.sleep_until`), so an event
        loop can take the wait over."""
        sleep_until(self._injector.recovered_at)

    def read_version(self) -> int:
        """Obtain a read version now: the newest committed version. Its GRV latency is not
        slept here: the caller's futures become ready once it has run (see
        :class:`fdbqueue.memory._reads.Reads`)."""
        with self._lock:
            version = self._clock.read_version()
            self._stats["read_versions"] += 1
            return version

    def view(self, read_version: int) -> VersionView:
        """A view of the key space as of ``read_version``, for :meth:`read`."""
        return VersionView(self._storage, read_version)

    def read(self, view: VersionView, read: Callable[[VersionView], T], counted: bool = True) -> T:
        """Run ``read`` on ``view`` brought up to date, now; 1007 when its version is more than
        five seconds old, 1009 when it is ahead of every version handed out. The read latency
        is not slept here: the read's future becomes ready once it has run from the read's
        issue (see :class:`fdbqueue.memory._reads.Reads`). ``counted``: count it in the
        ``reads`` statistic (a server process serving a connected client does not: the client
        counts its reads, each of which may take several requests)."""
        with self._lock:
            if self._clock.too_old(view.version):
                self._stats["too_old"] += 1
                raise FDBError(1007)
            if view.version > max(self._clock.last_version, self._clock.now()):
                raise FDBError(1009)  # future_version: no storage server has it
            view.refresh()
            if counted:
                self._stats["reads"] += 1
            return read(view)

    def commit(
        self, request: CommitRequest, watches: PendingWatches | list[Watch]
    ) -> tuple[int, bytes | None]:
        """Commit ``request``: its version and versionstamp (-1 and None when read-only),
        its ``watches`` made active; or the error raised. Either way the watches the commit
        fired (its own and others', by what did land) are ready before it returns."""
        fired: list[Future] = []
        try:
            if not request.read_only:
                self.wait_for_recovery()
                if self.latency.commit:
                    sleep_until(time.monotonic() + self.latency.commit)
            with self._lock:
                if request.read_only:
                    versionstamp = None
                    version = -1
                else:
                    if time.monotonic() < self._injector.recovered_at:
                        # A recovery began while the commit was on its way: the proxy it
                        # went to is gone, and the client cannot tell what became of it.
                        self._stats["commits_lost_to_recovery"] += 1
                        raise FDBError(1021)
                    self._injector.resolve_in_flight(fired)
                    version = self._injector.commit(request, fired)
                    versionstamp = versionstamp_bytes(version)
                    # Upstream counts a commit's mutations once its client hears it succeeded.
                    self._stats["keys_written"] += request.keys_written
                    self._stats["bytes_written"] += request.bytes_written
                taken = watches if isinstance(watches, list) else watches.take_all()
                self._watches.register(taken, fired)
        except FDBError:
            for future in fired:  # other transactions' watches, fired by what did land
                future.set_result(None)
            raise
        for future in fired:
            future.set_result(None)
        return version, versionstamp

    def open_watch(self, future: Future) -> bool:
        """Count a new watch among the client's outstanding ones; False at the limit (1032)."""
        return self.watch_limit.open(future)
