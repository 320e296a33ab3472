"""The worker loop's heartbeat: one thread that keeps the leases of running jobs.

:class:`Job` is a claimed item being processed; :class:`Heartbeat` extends the lease of
every running job every ``lease / 3`` seconds, skipping a job whose lock another thread holds
(it is being settled, or acknowledged in the handler's transaction) until the next beat.
Used by :func:`fdbqueue.worker.work`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fdbqueue._delivery.leases import Lease
from fdbqueue.errors import LeaseError

__all__ = ["Heartbeat", "Job"]

#: The logger, by its documented name (docs/observability.rst), whatever the module.
logger = logging.getLogger("fdbqueue.worker")


class Job:
    """A claimed item being processed: its current lease, which the heartbeat replaces when
    it extends it, under ``lock`` (held across every holder call on it)."""

    def __init__(self, lease: Lease[Any]) -> None:
        self.lease = lease
        self.lock = threading.Lock()
        self.lost = False


class Heartbeat:
    """One thread that extends the lease of every running job every ``lease / 3`` seconds.

    Cost: per running job and beat, one transaction (a point read, a clear and a set).
    """

    def __init__(self, queue: Any, database: Any, seconds: float) -> None:
        self.queue = queue
        self.database = database
        self.seconds = seconds
        self.jobs: set[Job] = set()
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fdbqueue-heartbeat", daemon=True)
        self._thread.start()

    @contextmanager
    def running(self, job: Job) -> Iterator[Job]:
        with self._lock:
            self.jobs.add(job)
        try:
            yield job
        finally:
            with self._lock:
                self.jobs.discard(job)

    def leases(self) -> list[Lease[Any]]:
        """The current lease of every job running (for the loop's worker record)."""
        with self._lock:
            return [job.lease for job in self.jobs]

    def _run(self) -> None:
        while not self._done.wait(self.seconds / 3):
            with self._lock:
                jobs = list(self.jobs)
            for job in jobs:
                if not job.lock.acquire(blocking=False):
                    continue  # being settled, or acknowledged in its handler's transaction
                try:
                    self._extend(job)
                finally:
                    job.lock.release()

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
        self._done.set()
        self._thread.join()
