"""The worker loop's heartbeat: one thread that keeps the leases of running jobs, and ends
those that run past their time limit.

:class:`Job` is a claimed item being processed; :class:`Heartbeat` extends the lease of
every running job every ``lease / 3`` seconds, skipping a job whose lock another thread holds
(it is being settled) until the next beat, and a job of a ``transactional`` worker (its
handler runs inside the acknowledging transaction, at most five seconds). It also wakes at
each running job's deadline (:class:`~fdbqueue._delivery.time_limits.Timing`): a job past it
is no longer extended, and is handed to ``on_time_out`` (the worker settles it). Used by
:func:`fdbqueue.worker.work`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from fdbqueue._delivery.leases import Lease
from fdbqueue._delivery.time_limits import Timing
from fdbqueue.errors import LeaseError

__all__ = ["Heartbeat", "Job"]

#: The logger, by its documented name (docs/observability.rst), whatever the module.
logger = logging.getLogger("fdbqueue.worker")


class Job:
    """A claimed item being processed: its current lease, which the heartbeat replaces when
    it extends it, under ``lock`` (held across every holder call on it); its time limit
    (``time_limit`` seconds from now; None: none); whether the heartbeat extends it
    (``extend``); and the thread that runs it (the one that made it)."""

    def __init__(
        self, lease: Lease[Any], time_limit: float | None = None, *, extend: bool = True
    ) -> None:
        self.lease = lease
        self.lock = threading.Lock()
        self.lost = False
        self.timing = Timing(time_limit)
        self.extend = extend
        self.thread = threading.current_thread()


class _Running:
    """:meth:`Heartbeat.running`'s context manager (a class, not a generator's: one per job)."""

    __slots__ = ("heartbeat", "job")

    def __init__(self, heartbeat: Heartbeat, job: Job) -> None:
        self.heartbeat = heartbeat
        self.job = job

    def __enter__(self) -> Job:
        self.heartbeat.add(self.job)
        return self.job

    def __exit__(self, *exc_info: object) -> None:
        self.heartbeat.discard(self.job)


class Heartbeat:
    """One thread that extends the lease of every running job every ``lease / 3`` seconds,
    and calls ``on_time_out(job)`` (in that thread) for a running job whose deadline passed,
    once, without extending it any more.

    Cost: per running job and beat, one transaction (a point read, a clear and a set); what
    ``on_time_out`` costs, per job timed out.
    """

    def __init__(
        self,
        queue: Any,
        database: Any,
        seconds: float,
        on_time_out: Callable[[Job], None] | None = None,
    ) -> None:
        self.queue = queue
        self.database = database
        self.seconds = seconds
        self.on_time_out = on_time_out
        self.jobs: set[Job] = set()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._closed = False
        #: When the thread wakes next (time.monotonic()), as it last decided, under the lock.
        self._wake = 0.0
        self._thread = threading.Thread(target=self._run, name="fdbqueue-heartbeat", daemon=True)
        self._thread.start()

    def running(self, job: Job) -> _Running:
        """A context manager: ``job`` runs (its lease is kept, its time limit watched) from
        the block's start to its end, however it ends."""
        return _Running(self, job)

    def add(self, job: Job) -> None:
        """``job`` runs from now on (:meth:`running`'s start). The thread is woken only when
        the job's deadline comes before its next wake: the next beat extends the job's lease
        with every other's (a job started just after a beat is extended at most ``lease / 3``
        seconds on, its lease then still two thirds long), so a job without a time limit
        wakes nobody."""
        deadline = job.timing.deadline
        with self._lock:  # the condition's own lock (a C lock: no Python-level enter/exit)
            self.jobs.add(job)
            if deadline is not None and deadline < self._wake:
                self._changed.notify()  # its deadline is the next thing to wake for

    def discard(self, job: Job) -> None:
        """``job`` runs no longer (:meth:`running`'s end)."""
        with self._lock:
            self.jobs.discard(job)

    def leases(self) -> list[Lease[Any]]:
        """The current lease of every job running (for the loop's worker record)."""
        with self._lock:
            return [job.lease for job in self.jobs]

    def _run(self) -> None:
        beat = self.seconds / 3
        next_beat = time.monotonic() + beat
        while True:
            with self._changed:
                deadlines = [job.timing.deadline for job in self.jobs if job.timing.running]
                wake = min([next_beat, *(d for d in deadlines if d is not None)])
                self._wake = wake
                if not self._closed:
                    self._changed.wait(max(0.0, wake - time.monotonic()))
                if self._closed:
                    return
                jobs = list(self.jobs)
            now = time.monotonic()
            for job in jobs:
                if job.timing.past(now):
                    self._time_out(job)
            if now < next_beat:
                continue
            next_beat = now + beat
            for job in jobs:
                if not job.extend or not job.timing.running:
                    continue  # transactional, finished, or past its time limit
                if not job.lock.acquire(blocking=False):
                    continue  # being settled
                try:
                    if job.timing.running:  # not settled since (its handler returns first)
                        self._extend(job)
                finally:
                    job.lock.release()

    def _time_out(self, job: Job) -> None:
        with self._lock:
            self.jobs.discard(job)  # never extended again
        if self.on_time_out is None:
            return
        try:
            self.on_time_out(job)
        except Exception:  # the cluster (its holder call is tried again): log, beat on
            logger.warning("could not end a job past its time limit", exc_info=True)

    def _extend(self, job: Job) -> None:
        if job.lost:
            return
        try:
            job.lease = self.queue.extend(self.database, job.lease, self.seconds)
        except LeaseError as error:
            job.lost = True
            logger.warning("lost the lease of a running job: %s", error)
        except Exception as error:  # the cluster; try again at the next beat
            logger.warning("could not extend a job's lease: %s", error)

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify()
        self._thread.join()
