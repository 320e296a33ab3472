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

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from fdbqueue._checks import check_seconds
from fdbqueue._delivery.leases import MAX_LEASE_SECONDS, Lease
from fdbqueue._delivery.workers import job_id
from fdbqueue.errors import TimeLimitExceeded
from fdbqueue.metrics import queue_name

__all__ = ["MAX_TIME_LIMIT", "Abandoned", "Timing", "check_time_limit", "in_time"]

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
            self._start()  # no other thread sees it yet: no lock

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


class Abandoned:
    """The handlers a worker loop abandoned past their time limit that still run, and the
    slots they keep vacant; both loops keep one (thread-safe) and follow its rule:

    * a handler taken back at its time limit that cannot be stopped (a thread: Python cannot
      kill one; with asyncio, a coroutine that did not end when cancelled) is **abandoned**:
      :meth:`abandon` logs it (WARNING, with its job's full id) and lists it (:meth:`ids`,
      the worker record's :attr:`~fdbqueue.WorkerInfo.abandoned`) until :meth:`returned`;
    * its slot goes on with a new job while at most ``concurrency`` handlers are abandoned;
      past that (and always for a coroutine, whose task waits for it) the slot stays
      **vacant** until an abandoned handler returns;
    * once every slot is vacant the loop is **wedged**: it runs nothing. That is logged at
      once (WARNING) and again at each beat of its worker record while it lasts
      (:meth:`remind`).

    Args:
        queue: the queue the loop works on (for the log).
        concurrency: the loop's slots (checked).
        logger: where it logs: the worker loops' logger (``fdbqueue.worker``).
    """

    def __init__(self, queue: Any, concurrency: int, logger: logging.Logger) -> None:
        self.queue = queue
        self.concurrency = concurrency
        self.logger = logger
        self._lock = threading.Lock()
        #: Each abandoned handler's job (the loop's own job object) -> its job id, in order.
        self._jobs: dict[object, str] = {}
        self._vacant = 0

    @property
    def vacant(self) -> int:
        """The slots waiting for an abandoned handler to return."""
        return self._vacant

    @property
    def wedged(self) -> bool:
        """Whether every slot waits for an abandoned handler (the loop runs nothing)."""
        return self._vacant >= self.concurrency

    def ids(self) -> list[str]:
        """The job ids of the abandoned handlers still running, oldest first (for a plain
        item, its lease id: :func:`~fdbqueue._delivery.workers.job_id`)."""
        with self._lock:
            return list(self._jobs.values())

    def abandon(
        self, job: object, lease: Lease[Any], limit: float | None, hold: bool = False
    ) -> bool:
        """Note the handler of ``job`` (holding ``lease``) abandoned past its time limit of
        ``limit`` seconds, and log it (WARNING; and the wedge, if the loop is wedged now).
        Returns whether its slot goes on with a new job now (False: the slot is vacant
        until :meth:`returned` gives it back). ``hold``: the slot waits for this very handler
        (an asyncio coroutine). The caller orders it before the handler's :meth:`returned`.
        No database access."""
        identity = job_id(lease)
        with self._lock:
            self._jobs[job] = identity
            count = len(self._jobs)
            goes_on = not hold and count <= self.concurrency
            if not goes_on:
                self._vacant += 1
            vacant, wedged = self._vacant, self.wedged
        self.logger.warning(
            "job %s of %s ran past its time limit of %gs and its handler is abandoned, still "
            "running (%s); %d abandoned handler%s still running, %d of %d slots waiting for "
            "one to return",
            identity,
            queue_name(self.queue.subspace.key()),
            limit,
            "it did not end when cancelled" if hold else "its thread cannot be stopped",
            count,
            "" if count == 1 else "s",
            vacant,
            self.concurrency,
        )
        if wedged:
            self.remind()
        return goes_on

    def returned(self, job: object) -> bool:
        """The abandoned handler of ``job`` returned (or raised): it is no longer listed.
        Returns whether a vacant slot goes on now (one less vacant). No database access."""
        with self._lock:
            if self._jobs.pop(job, None) is None:
                return False
            if not self._vacant:
                return False
            self._vacant -= 1
            return True

    def remind(self) -> None:
        """Log (WARNING) that the loop is wedged, if it is: every slot waits for an abandoned
        handler, with their job ids. Called when it becomes wedged and at each beat of the
        loop's worker record. No database access."""
        with self._lock:
            if self._vacant < self.concurrency:
                return
            ids = list(self._jobs.values())
        self.logger.warning(
            "worker on %s is wedged: every slot (concurrency %d) waits for an abandoned "
            "handler past its time limit to return, so it runs no job; abandoned handlers "
            "still running: %s",
            queue_name(self.queue.subspace.key()),
            self.concurrency,
            " ".join(ids),
        )

    def at_stop(self) -> None:
        """Log (WARNING) the abandoned handlers still running as the loop stops, if any (it
        does not wait for them). No database access."""
        ids = self.ids()
        if ids:
            self.logger.warning(
                "%d handler%s past the time limit still running, abandoned: %s",
                len(ids),
                "" if len(ids) == 1 else "s",
                " ".join(ids),
            )
