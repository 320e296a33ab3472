"""A rate limit that every worker shares: at most ``jobs`` jobs start in any window of
``seconds``, counted over all workers and processes together (BullMQ calls it the limiter).

Before each claim, a worker loop takes a *start slot*: a key written with
``set_versionstamped_key`` (no read: it never conflicts), which sorts the slots in the order
their transactions committed and carries the commit version::

    P + b"\\xff" + pack(("rate_starts",)) + versionstamp (10 bytes) + 8 random bytes
        ->  the limit it was taken under: jobs (4 bytes) and window in versions (8 bytes),
            unsigned, little-endian

It then reads, by snapshot (no conflict), the ``jobs`` slots just before its own. The slot
*may start a job* when fewer than ``jobs`` slots precede it, or when the ``jobs``-th before it
committed more than ``seconds`` of versions (a million a second) before it. A slot that may
not is cleared at once, and the worker waits until the oldest of those leaves the window; a
slot whose claim finds no job is cleared too. A slot is cleared only when no job started
from it, and every slot still there counts, so **the limit holds exactly**: in any window of
``seconds`` by commit versions, at most ``jobs`` slots are kept from which a job started
(refused and unused slots can only make others wait, never start more). A job starts in the
claim that follows its slot, a few milliseconds later. Versions jump ahead at a cluster
recovery (about 100 s): across one the window counts as longer, so the limit only waits
less there, once.

Slots older than the window (by 5 s more) are cleared by the reads that pass them (blind range
clears: no conflict); a slot checked more than 5 s after it was written is refused, so that
none of the slots it needs was cleared.

Cost per job started: a transaction writing its slot (one versionstamped set), a snapshot
range read of at most ``jobs`` slots, and a blind clear or two; a refused or unused slot, one
more clear. A worker waiting on the limit sleeps until the window frees a
start; one that finds the queue empty looks again every :data:`IDLE_POLL_SECONDS`.

Source followed: FoundationDB's developer guide, "Versionstamps" (``set_versionstamped_key``,
the 10-byte versionstamp and the 4-byte little-endian offset appended to the key); BullMQ's
rate limiter (``limiter: {max, duration}``) for the contract.
"""

from __future__ import annotations

import math
import os
import struct
from typing import Any

from fdb.subspace_impl import Subspace

from fdbqueue._checks import check_seconds
from fdbqueue._storage.features import RATE
from fdbqueue._transactions.transactional import run_in_retry_loop

__all__ = ["IDLE_POLL_SECONDS", "RateLimit", "check_rate_limit", "holding"]

#: Versions per second (FoundationDB's, about).
VERSIONS_PER_SECOND = 1_000_000
#: Seconds a rate-limited worker that found the queue empty waits before it looks again.
IDLE_POLL_SECONDS = 0.25
#: The longest window: 12 hours.
MAX_WINDOW_SECONDS = 43_200.0
#: Versions after which a slot is too old to be checked (it is refused, and a new one taken):
#: so a read clears the slots older than its own window by this much more, which no slot
#: being checked can still need (5 s: a transaction's longest life).
STALE_VERSIONS = 5 * VERSIONS_PER_SECOND
_STAMP_BYTES = 10
#: A slot's value: the limit it was taken under (jobs, window in versions).
_LIMIT = struct.Struct("<IQ")
_OWNER_BYTES = 8


def check_rate_limit(rate_limit: Any) -> tuple[int, float] | None:
    """``rate_limit`` as ``(jobs, seconds)`` (None: no limit).

    Raises:
        TypeError: not a pair of an int and a number.
        ValueError: ``jobs`` < 1, or ``seconds`` not > 0 or over 12 hours.
    """
    if rate_limit is None:
        return None
    if not isinstance(rate_limit, tuple) or len(rate_limit) != 2:
        raise TypeError(f"rate_limit must be a pair (jobs, seconds) or None, not {rate_limit!r}")
    jobs, seconds = rate_limit
    if type(jobs) is not int:
        raise TypeError(f"rate_limit's jobs must be an int, not {type(jobs).__name__}")
    if jobs < 1:
        raise ValueError(f"rate_limit's jobs must be >= 1, not {jobs}")
    window = check_seconds(seconds, "rate_limit's seconds")
    if window > MAX_WINDOW_SECONDS:
        raise ValueError(f"rate_limit's seconds must be at most {MAX_WINDOW_SECONDS:g}")
    return jobs, window


def holding(slots: RateLimit | None, metadata: Subspace, known: int | None, tr: Any) -> bool:
    """Whether a rate limit holds starts back now (``info().rate_limited``), judged by
    ``slots`` (the queue object's limit) or, for a queue object opened without one, by the
    limit its last slot was taken under, when its feature record (``known``, its bits as
    ``tr`` read them) shows that a limit was used. Cost: nothing for a queue that never had
    one; else a snapshot range read of at most its ``jobs`` slots (and one before it, of the
    last slot, without the queue object's limit)."""
    if slots is None and known is not None and known & RATE:
        slots = RateLimit.recorded(metadata, tr)
    return slots is not None and slots.holding(tr)


class RateLimit:
    """The start slots of one queue (see the module docstring).

    Args:
        metadata: the queue's metadata subspace (a sharded queue's own).
        jobs, seconds: at most ``jobs`` starts in any window of ``seconds``.
    """

    def __init__(self, metadata: Subspace, jobs: int, seconds: float, features: Any = None) -> None:
        self.prefix: bytes = metadata.subspace(("rate_starts",)).key()
        #: the queue's feature record (:mod:`fdbqueue._storage.features`): a slot's write
        #: records the rate limit's bit there (None: not recorded)
        self.features = features
        self.end = self.prefix + b"\xff"
        self.jobs = jobs
        self.seconds = seconds
        self.window = math.ceil(seconds * VERSIONS_PER_SECOND)
        self._offset = struct.pack("<I", len(self.prefix))

    def _version(self, slot: bytes) -> int:
        start = len(self.prefix)
        return int.from_bytes(slot[start : start + 8], "big")

    def take(self, database: Any) -> tuple[bytes | None, float]:
        """Take a start slot: ``(slot, 0.0)`` when it may start a job (start one, or give it
        back: :meth:`give_back`), else ``(None, seconds)`` to wait before taking another.
        Cost: two transactions (the slot's write; the read of the slots before it, with its
        clears); no conflict."""
        owner = os.urandom(_OWNER_BYTES)

        def write(tr: Any) -> Any:
            key = self.prefix + b"\x00" * _STAMP_BYTES + owner
            tr.set_versionstamped_key(key + self._offset, _LIMIT.pack(self.jobs, self.window))
            if self.features is not None:  # (a bit_or: no read, no conflict)
                self.features.use(tr, RATE, self.features.known)
            return tr.get_versionstamp()

        stamp = bytes(run_in_retry_loop(database, write).wait())
        slot = self.prefix + stamp + owner
        mine = self._version(slot)

        def check(tr: Any) -> float:
            read = tr.snapshot.get_range(self.prefix, slot, limit=self.jobs, reverse=True)
            if tr.get_read_version().wait() - mine > STALE_VERSIONS:
                del tr[slot]  # checked too late: the slots it needs may be cleared already
                return 0.001
            before = list(read)
            horizon = mine - self.window
            stale = max(0, horizon - STALE_VERSIONS)  # no slot being checked needs these
            tr.clear_range(self.prefix, self.prefix + stale.to_bytes(8, "big"))
            if len(before) < self.jobs:
                return 0.0
            oldest = self._version(bytes(before[-1].key))
            if oldest < horizon:
                return 0.0
            del tr[slot]  # refused: it starts nothing
            return (oldest - horizon) / VERSIONS_PER_SECOND

        wait = run_in_retry_loop(database, check)
        return (slot, 0.0) if wait == 0.0 else (None, max(wait, 0.001))

    def give_back(self, database: Any, slot: bytes) -> None:
        """Clear ``slot``, from which no job started (the claim found none). Cost: one
        transaction with one blind clear."""

        def clear(tr: Any) -> None:
            del tr[slot]

        run_in_retry_loop(database, clear)

    def holding(self, tr: Any) -> bool:
        """Whether the limit holds starts back now: ``jobs`` slots were kept within the
        window before ``tr``'s read version. Cost: a snapshot range read of at most ``jobs``
        slots."""
        latest = list(tr.snapshot.get_range(self.prefix, self.end, limit=self.jobs, reverse=True))
        if len(latest) < self.jobs:
            return False
        read_version: int = tr.get_read_version().wait()
        return self._version(bytes(latest[-1].key)) >= read_version - self.window

    @classmethod
    def recorded(cls, metadata: Subspace, tr: Any) -> RateLimit | None:
        """The limit the last slot taken on the queue was taken under (what a queue object
        opened without ``rate_limit``, the dashboard's, judges :meth:`holding` by), or
        None when no slot is kept. Cost: a snapshot range read of one slot."""
        limit = cls(metadata, 1, 1.0)
        last = list(tr.snapshot.get_range(limit.prefix, limit.end, limit=1, reverse=True))
        if not last or len(bytes(last[0].value)) != _LIMIT.size:
            return None
        jobs, window = _LIMIT.unpack(bytes(last[0].value))
        return cls(metadata, max(jobs, 1), window / VERSIONS_PER_SECOND)
