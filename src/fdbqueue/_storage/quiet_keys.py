"""Keys a take need not read while they stay empty: :class:`QuietKeys`, on a FoundationDB watch.

A plain take reads what the recipe reads (the first items) and, for the features a queue may
use, two hints: the delayed items' next due version (:mod:`fdbqueue._delivery.delays`) and the
active groups' count (:mod:`fdbqueue._storage.groups`). A queue that never used delays or
groups would pay those reads on every take for nothing. So once a take reads a hint and finds
it empty :data:`QUIET_AFTER` times in a row, it sets a watch on the hint's key in its
transaction: from then on, takes of this
queue object skip that read, until the watch fires (a delayed enqueue or a group's first
item changed the key) or fails (the transaction did not commit, too many watches, a
recovery); then the next take reads the hint again, and watches it again if still empty.

What it costs: a watch per hint per shard per queue object (FoundationDB allows 10,000 per
database handle by default; past that, the watch fails with 1032 and takes just read the hint),
and a read conflict range on the hint's key in the transaction that sets the watch (as
upstream's ``ReadYourWritesTransaction::watch`` adds one): that take retries if a delayed
enqueue or a group's activation commits meanwhile. What it changes: for the time between such a
commit and its watch firing (a round trip of the cluster's watch notification), a take that
finds items at the front takes them without looking at the hints, so a due delayed item or a
group's turn waits for the next take: no item is skipped, since a take whose front holds fewer
items than it wants reads the hints whatever the watches say.

Source followed: FoundationDB's developer guide, "Watches" (a watch fires when the key's
value changes from what the transaction read; it is set at commit).
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["QUIET_AFTER", "QuietKeys"]

#: How many takes in a row must find a hint empty before one watches it (a queue object that
#: takes a few items sets no watch).
QUIET_AFTER = 2


class QuietKeys:
    """The keys of one store known empty and watched (see the module docstring).
    Thread-safe. Cost: nothing in the database but the watches."""

    def __init__(self) -> None:
        self._watched: set[bytes] = set()
        self._empty_reads: dict[bytes, int] = {}  # key -> reads in a row that found it empty
        # the watches' futures, kept: the binding cancels a watch whose future is destroyed
        self._futures: dict[bytes, Any] = {}
        self._lock = threading.Lock()

    def quiet(self, key: bytes) -> bool:
        """Whether ``key`` was read empty and is watched: no read of it is needed."""
        return key in self._watched

    def not_empty(self, key: bytes) -> None:
        """``key`` was read and holds something: the count of empty reads starts again."""
        self._empty_reads.pop(key, None)

    def watch(self, tr: Any, key: bytes) -> None:
        """``key`` was read empty in ``tr``: once that happened :data:`QUIET_AFTER` times in
        a row, watch it there (unless it is watched already, or ``tr`` cannot watch, as a
        snapshot view), so that takes skip its read until the watch fires or fails. Cost: a
        watch, and a read conflict range on ``key`` in ``tr`` (a point read it made)."""
        make = getattr(tr, "watch", None)
        if make is None:
            return
        with self._lock:
            reads = self._empty_reads.get(key, 0) + 1
            if key in self._watched or reads < QUIET_AFTER:
                self._empty_reads[key] = reads
                return
            self._empty_reads[key] = 0
            self._watched.add(key)  # before the future can fire: it discards it again
        try:
            future = make(key)
        except Exception:  # a transaction that can no longer watch: read the key next time
            self._forget(key)
            return
        with self._lock:
            if key in self._watched:
                self._futures[key] = future
        future.on_ready(lambda _ready: self._forget(key))

    def _forget(self, key: bytes) -> None:
        with self._lock:
            self._watched.discard(key)
            self._futures.pop(key, None)
