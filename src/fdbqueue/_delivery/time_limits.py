"""The worker loop's time limit on a job: ``time_limit`` seconds from its handler's start.

One rule, for both worker loops (:mod:`fdbqueue.worker` and :mod:`fdbqueue.asyncio._worker`):
a job is settled (acknowledged, released or dead-lettered) by exactly one side, whichever
comes first, and :class:`Timing` decides which under a lock:

* its handler, returning or raising: :meth:`Timing.finish`. A handler that returns after the
  limit (its worker had not noticed yet) does not count as done: its job is settled as
  failed with :class:`~fdbqueue.errors.TimeLimitExceeded` (:attr:`Timing.late`);
* the worker, once the limit passed while the handler still runs (or once the worker is
  cancelled): :meth:`Timing.take_back`. From then on the handler's return is refused
  (:meth:`Timing.finish` is False): whatever it returns is discarded, and inside the
  acknowledging transaction (``transactional``) it raises before the commit, so that nothing
  of it commits (:func:`in_time`).

The deadline is measured on this machine's monotonic clock (``time.monotonic``), from the
handler's start (:meth:`Timing.start`: the thread loop starts it right before it calls the
handler; the asyncio loop when the handler's coroutine takes its first step, or its thread
begins, so that time the handler spent scheduled, e.g. behind a coroutine that blocks the
event loop, never counts against it): it is the worker's own budget for its handler, not a
lease (leases are bound by versions and the wall clock).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from fdbqueue._checks import check_seconds
from fdbqueue._delivery.leases import MAX_LEASE_SECONDS
from fdbqueue.errors import TimeLimitExceeded

__all__ = ["MAX_TIME_LIMIT", "Timing", "check_time_limit", "in_time"]

#: The longest time limit, in seconds: 12 hours, as the longest lease.
MAX_TIME_LIMIT = MAX_LEASE_SECONDS

_RUNNING, _FINISHED, _TAKEN_BACK = "running", "finished", "taken back"


def check_time_limit(seconds: Any) -> float | None:
    """Return ``seconds`` as a float, or None (no time limit); raise before anything is read
    or written. No database access.

    Raises:
        TypeError: not a number or None (bool included).
        ValueError: NaN, infinite, not > 0, or over :data:`MAX_TIME_LIMIT` (12 hours).
    """
    if seconds is None:
        return None
    number = check_seconds(seconds, "time_limit")
    if number > MAX_TIME_LIMIT:
        raise ValueError(
            f"time_limit must be > 0 and <= {MAX_TIME_LIMIT} seconds (12 hours), not {number}"
        )
    return number


class Timing:
    """A job's time limit, from its handler's start (:meth:`start`), and who settles the job:
    its handler's side or its worker's (see the module docstring). Thread-safe.

    Args:
        limit: seconds (checked: :func:`check_time_limit`), or None for no limit (then only a
            cancellation takes the job back).
        start: whether the clock starts now (the handler is about to be called); False: at
            :meth:`start` (or the first :meth:`restart`). Until then no time counts.
    """

    def __init__(self, limit: float | None, *, start: bool = True) -> None:
        self.limit = limit
        #: The ``time.monotonic()`` instant the handler started (None: not yet).
        self.started: float | None = None
        #: The ``time.monotonic()`` instant the limit passes (None: never, or not started).
        self.deadline: float | None = None
        #: Whether the handler finished after the deadline (set by :meth:`finish`).
        self.late = False
        self._state = _RUNNING
        self._lock = threading.Lock()
        if start:
            self.start()

    def start(self) -> None:
        """The handler starts now: the clock starts, unless it started already."""
        with self._lock:
            self._start()

    def _start(self) -> None:  # the lock held
        if self.started is None:
            self.started = time.monotonic()
            self.deadline = None if self.limit is None else self.started + self.limit

    def elapsed(self, now: float) -> float:
        """Seconds from the handler's start to ``now`` (``time.monotonic()`` seconds); 0.0
        before it started."""
        return 0.0 if self.started is None else now - self.started

    def remaining(self, now: float) -> float | None:
        """Seconds from ``now`` (``time.monotonic()`` seconds) that a worker may wait before
        it looks at the limit again: the whole limit before the handler started, the time to
        the deadline before it (a handler that finished may run again: a retried
        transaction, :meth:`restart`), 0.0 past it while the handler runs; None when there is
        no limit, or the deadline passed and the handler finished or was taken back (nothing
        to wait for)."""
        if self.limit is None:
            return None
        if self.deadline is None:
            return self.limit
        if now < self.deadline:
            return self.deadline - now
        return 0.0 if self.running else None

    @property
    def running(self) -> bool:
        """Whether the handler has neither finished nor been taken back (no lock: a hint)."""
        return self._state == _RUNNING

    def past(self, now: float) -> bool:
        """Whether the job is running and its deadline is at or before ``now``
        (``time.monotonic()`` seconds)."""
        return self.running and self.deadline is not None and now >= self.deadline

    def finish(self) -> bool:
        """The handler returned or raised: True when settling the job falls to its side (the
        worker did not take it back), and then :attr:`late` says whether the deadline had
        passed; False when the worker took it back (its result is to be discarded). Once
        True, True again (a retried transaction finishes again)."""
        with self._lock:
            if self._state == _TAKEN_BACK:
                return False
            if self._state == _RUNNING:
                self._state = _FINISHED
                self.late = self.deadline is not None and time.monotonic() > self.deadline
            return True

    def take_back(self) -> bool:
        """The limit passed (or the worker was cancelled) while the handler runs: True when
        settling the job falls to the worker (the handler had not finished); from then on
        :meth:`finish` is False."""
        with self._lock:
            if self._state != _RUNNING:
                return False
            self._state = _TAKEN_BACK
            return True

    def restart(self) -> None:
        """The handler runs (again, when the acknowledging transaction is retried): running
        again, unless taken back or late (then raise :meth:`exceeded`); the clock starts at
        the first call, unless it started already."""
        with self._lock:
            if self._state == _TAKEN_BACK or self.late:
                raise self.exceeded()
            self._start()
            self._state = _RUNNING

    def exceeded(self) -> TimeLimitExceeded:
        """The failure a job that ran past its limit is settled with."""
        return TimeLimitExceeded(f"time limit exceeded: the handler ran past {self.limit:g}s")


def in_time(timing: Timing, handler: Callable[[Any, Any], Any], value: Any) -> Callable[[Any], Any]:
    """``handler(tr, value)`` as the body of the acknowledging transaction (``ack_with``) of
    a ``transactional`` worker, bounded by ``timing``: a handler that the worker took back, or
    that returned past its limit, raises :class:`~fdbqueue.errors.TimeLimitExceeded` before
    the commit, so nothing of it commits. No database access of its own."""

    def body(tr: Any) -> Any:
        timing.restart()
        result = handler(tr, value)
        if not timing.finish() or timing.late:
            raise timing.exceeded()
        return result

    return body
