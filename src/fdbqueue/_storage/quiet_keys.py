"""Hints a take need not read while they stay empty: :class:`QuietKeys`.

A plain take reads what the recipe reads (the first items) and, for the features a queue may
use, two hints: the delayed items' next due version (:mod:`fdbqueue._delivery.delays`) and the
active groups' count (:mod:`fdbqueue._storage.groups`). A queue that never used delays or
groups would pay those reads on every take for nothing. So once takes of one queue object
found a hint empty :data:`QUIET_AFTER` times in a row, the hint is *quiet*: takes whose front
holds every item they want skip its read for :data:`QUIET_SECONDS`, then read it again. A
take whose front holds fewer items than it wants always reads the hints (a due item or a
group may be all there is), and a hint that a queue object of this process writes (a delayed
enqueue, a group's first item) stops being quiet for every queue object of the process at
once (:func:`hint_written`, before and after the commit).

What it changes: a delayed item that another process enqueued, or a group that another
process started, may wait up to :data:`QUIET_SECONDS` longer for a consumer whose front holds
items (it is never skipped: a short front reads the hints). The design tried first: a
FoundationDB watch on each hint, set when it is found empty (exact, no wait), which holds a
watch per hint per shard per queue object for as long as the hint stays empty (and adds a read
conflict range on it to the take that sets it); a queue object would then always hold watches
its user never asked for, so this one, which holds none, was kept.

Source followed: FoundationDB's developer guide, "Watches" (the design measured against);
caching with a time to live for what a client may see late.
"""

from __future__ import annotations

import threading

from fdbqueue import _clock, metrics

__all__ = ["QUIET_AFTER", "QUIET_SECONDS", "QuietKeys", "hint_written"]

#: How many reads in a row must find a hint empty before takes skip it (a queue object that
#: takes a few items keeps reading).
QUIET_AFTER = 2
#: Seconds a quiet hint is not read by takes whose front holds every item they want.
QUIET_SECONDS = 0.5

#: :func:`_now` of this process's last write of each hint key (any queue object's).
_WRITTEN: dict[bytes, float] = {}


def _now() -> float:
    """The process's wall clock (:func:`fdbqueue._clock.now`, which the in-memory
    database's ``pass_time`` moves, so that tests with controlled time see quiet times end);
    a clock moved back ends every quiet time (it is never trusted to prolong one)."""
    return _clock.now()


def hint_written(key: bytes) -> None:
    """A hint at ``key`` is being written in a transaction of this process: no queue object of
    this process skips its read from now on, nor once the transaction commits."""
    _WRITTEN[key] = _now()
    metrics.on_commit(lambda: _WRITTEN.__setitem__(key, _now()))


class QuietKeys:
    """The hints of one store that takes may skip (see the module docstring). Thread-safe.
    Cost: nothing in the database."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._empty_reads: dict[bytes, int] = {}  # key -> reads in a row that found it empty
        self._since: dict[bytes, float] = {}  # key -> _now() it became quiet

    def quiet(self, key: bytes) -> bool:
        """Whether ``key`` need not be read now: found empty :data:`QUIET_AFTER` times in a
        row less than :data:`QUIET_SECONDS` ago, and not written by this process since."""
        since = self._since.get(key)
        if since is None:
            return False
        if 0 <= _now() - since < QUIET_SECONDS and _WRITTEN.get(key, -1.0) < since:
            return True
        with self._lock:
            self._since.pop(key, None)
        return False

    def quiet_all(self, keys: tuple[bytes, ...]) -> bool:
        """Whether every key of ``keys`` is :meth:`quiet` (one call for a hot path)."""
        since = self._since
        now = _now()
        for key in keys:
            began = since.get(key)
            if (
                began is None
                or not 0 <= now - began < QUIET_SECONDS
                or _WRITTEN.get(key, -1.0) >= began
            ):
                return all(self.quiet(key) for key in keys)  # forgets those no longer quiet
        return True

    def empty(self, key: bytes) -> None:
        """``key`` was read and found empty."""
        with self._lock:
            reads = self._empty_reads.get(key, 0) + 1
            self._empty_reads[key] = reads
            if reads >= QUIET_AFTER:
                self._since[key] = _now()

    def not_empty(self, key: bytes) -> None:
        """``key`` was read and holds something: the count of empty reads starts again."""
        with self._lock:
            self._empty_reads.pop(key, None)
            self._since.pop(key, None)
