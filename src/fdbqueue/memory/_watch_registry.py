"""The database's outstanding watches: their limit, the active ones, and firing them.

Upstream rules: ``DatabaseContext::increaseWatchCounter`` (``fdbclient/NativeAPI.actor.cpp``,
called by ``Transaction::watch`` before the commit) counts every watch until it is ready and
raises 1032 ``too_many_watches`` past ``max_watches`` (``CLIENT_KNOBS->
DEFAULT_MAX_OUTSTANDING_WATCHES``); a committed watch fires when its key's value differs from
the one it read (storage servers' ``watchValue``), at once if it already does; a recovery
fires every watch. A transaction's watches before its commit are
:class:`fdbqueue.memory._watches.PendingWatches`.
"""

from __future__ import annotations

import functools
import threading
from collections import Counter
from collections.abc import ValuesView

from fdbqueue.memory._futures import Future
from fdbqueue.memory._storage import Storage
from fdbqueue.memory._watches import Watch

__all__ = ["WatchLimit", "WatchRegistry"]

Waiting = list[tuple[bytes | None, Future]]  # the value each watch read, its future


class WatchLimit:
    """The count of a client's outstanding watches and its limit (``db.options.
    set_max_watches``). Upstream keeps it in the client's ``DatabaseContext``: each client
    process (each :class:`~fdbqueue.memory.Database` object, in-process or connected to a
    server) counts its own. Thread-safe."""

    def __init__(self, max_watches: int) -> None:
        self._lock = threading.Lock()
        self.outstanding = 0
        self.max_watches = max_watches

    def set_max_watches(self, watches: int) -> None:
        """The most watches outstanding at once."""
        self.max_watches = watches

    def open(self, future: Future) -> bool:
        """A transaction made a watch: count it among the outstanding watches until it is
        ready, whatever becomes of it. False, counting nothing, when the limit is reached
        (error 1032)."""
        with self._lock:
            if self.outstanding >= self.max_watches:
                return False
            self.outstanding += 1
        future.on_ready(self._close)
        return True

    def _close(self, _future: Future) -> None:  # an on_ready callback
        with self._lock:
            self.outstanding -= 1


class WatchRegistry:
    """Active watches of one database; ``lock`` is the database's."""

    def __init__(self, lock: threading.RLock, storage: Storage, stats: Counter[str]) -> None:
        self._lock = lock
        self._storage = storage
        self._stats = stats
        self._waiting: dict[bytes, Waiting] = {}

    def values(self) -> ValuesView[Waiting]:
        """The active watches, one list per key."""
        return self._waiting.values()

    def register(self, watches: list[Watch], fired: list[Future]) -> None:
        """Under the lock, at a successful commit: make the transaction's watches active (or
        add them to ``fired`` when the value already differs)."""
        for key, expected, future in watches:
            if future.is_ready():
                continue
            self._stats["watches"] += 1
            if self._storage.current.get(key) != expected:
                fired.append(future)
                continue
            self._waiting.setdefault(key, []).append((expected, future))
            future.on_ready(functools.partial(self._forget, key))

    def changed(self, key: bytes, fired: list[Future]) -> None:
        """Under the lock, after a commit wrote ``key``: add to ``fired`` its watches whose
        value now differs."""
        waiting = self._waiting.get(key)
        if not waiting:
            return
        current = self._storage.current.get(key)
        keep = []
        for expected, future in waiting:
            if expected != current:
                fired.append(future)
            else:
                keep.append((expected, future))
        if keep:
            self._waiting[key] = keep
        else:
            del self._waiting[key]

    def fire_all(self, fired: list[Future]) -> None:
        """Under the lock, at a recovery: add every active watch to ``fired``."""
        for waiting in self._waiting.values():
            fired.extend(future for _expected, future in waiting)
        self._waiting = {}

    def _forget(self, key: bytes, future: Future) -> None:  # an on_ready callback
        """Drop a watch that became ready by cancellation."""
        with self._lock:
            waiting = self._waiting.get(key, [])
            for index, (_expected, candidate) in enumerate(waiting):
                if candidate is future:
                    del waiting[index]
                    if not waiting:
                        del self._waiting[key]
                    return
