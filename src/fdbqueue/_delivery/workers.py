"""The registry of live worker loops: which loops work on a queue, where, and on what.

Every worker loop (:func:`fdbqueue.worker.work` and its asyncio twin) keeps one record in its
queue's metadata while it runs: a :class:`Registration`. It registers when the loop starts
(before its first claim), beats every :data:`HEARTBEAT_SECONDS` seconds (the record
rewritten with ``last_seen``, the jobs done, the jobs running and the handlers abandoned past
their time limit), and deregisters (clears its record) when the loop stops.
:meth:`fdbqueue.Queue.workers` lists the records (:class:`WorkerInfo`) whose last beat is
younger than :data:`LAPSE_SECONDS`: a loop that died (its process killed, its host gone)
drops out of the listing once its heartbeat lapsed. Its record stays until the next loop that
registers on the queue, from any process, clears every lapsed record (so the records are
the live loops' and those of the loops that died since the last registration: bounded).

Key layout, under the queue's metadata prefix ``P + b"\\xff"`` (the queue's own metadata: a
sharded queue's, not a shard's; :mod:`fdbqueue._storage.store`)::

    pack(("workers", worker id)) -> fdb.tuple.pack((1, host, pid, started_at, last_seen,
                                                    jobs_done, (running job id, ...),
                                                    (abandoned job id, ...)))

The value is a tuple of FoundationDB's tuple layer, its first element the record's format
(1); a record this version cannot read (another format, or not a tuple) is skipped by the
listing and left alone. Within format 1, later elements are appended, never changed: a record
without the abandoned handlers (written before they were kept) reads with none, and elements
after those this version knows are ignored. (Versions before the abandoned handlers read
exactly seven elements: they skip the records of this version's loops.) Times are
wall-clock seconds since the epoch (:func:`fdbqueue._clock.now`): a record is judged lapsed
by the reader's clock, so clocks that differ by more than a few seconds misjudge it (as they
do leases' wall-clock bound).

The registry never makes a job fail nor a loop die: every registry transaction gives up
after :data:`REGISTRY_TIMEOUT_SECONDS`, and a failure is logged (WARNING, on the
``fdbqueue.worker`` logger) and left to the next beat, which writes the whole record again
(so a record cleared meanwhile, by :meth:`fdbqueue.Queue.clear` or as lapsed, comes back).

Source followed: Celery's worker heartbeats (``worker-heartbeat`` events every few seconds;
a worker whose heartbeats stop is taken for offline) and rq's worker registry (one key per
worker, expiring without heartbeats).
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import fdb.tuple
from fdb.subspace_impl import Subspace

from fdbqueue import _clock
from fdbqueue._delivery.leases import Lease
from fdbqueue._transactions.transactional import AnyContext, require_writable, run_in_retry_loop

__all__ = [
    "HEARTBEAT_SECONDS",
    "LAPSE_SECONDS",
    "MAX_RUNNING_LISTED",
    "REGISTRY_TIMEOUT_SECONDS",
    "Registration",
    "RegistrationThread",
    "WorkerInfo",
    "WorkerRegistry",
    "job_id",
]

#: The logger, by its documented name (docs/observability.rst), whatever the module.
logger = logging.getLogger("fdbqueue.worker")

#: Seconds between two beats of a worker loop's record (read at each wait).
HEARTBEAT_SECONDS = 5.0
#: Seconds after its last beat a record is taken for a dead loop's: three beats missed.
LAPSE_SECONDS = 3 * HEARTBEAT_SECONDS
#: Seconds each registry transaction (register, beat, deregister) may take before it gives up
#: (FoundationDB's transaction timeout, error 1031), so that a stop never waits on a cluster
#: that cannot be reached.
REGISTRY_TIMEOUT_SECONDS = 5.0
#: The most running job ids a record lists (a loop of higher concurrency lists these first),
#: and the most abandoned ones: the record stays far below FoundationDB's 100,000-byte value
#: limit.
MAX_RUNNING_LISTED = 1_000
#: The format of the records this version writes (their value's first element).
RECORD_FORMAT = 1


@dataclass(frozen=True)
class WorkerInfo:
    """A worker loop working on a queue, as its record says (:meth:`fdbqueue.Queue.workers`).

    Attributes:
        id: the loop's id (32 hexadecimal digits), new for each call of ``work``.
        host: the name of the host it runs on (``socket.gethostname()``).
        pid: its process id on that host.
        started_at: when it started, in wall-clock seconds since the epoch.
        jobs_done: the jobs it ended since it started (succeeded, released for a retry,
            dead-lettered, or lost), as of its last beat.
        running: the ids of the jobs it was running at its last beat (for now each job's lease
            id: :func:`job_id`), at most :data:`MAX_RUNNING_LISTED`.
        last_seen: its last beat, in wall-clock seconds since the epoch; at most
            :data:`LAPSE_SECONDS` ago for a loop listed.
        abandoned: the ids of the jobs whose handler it abandoned past their time limit and
            that still run, as of its last beat (oldest first; as :attr:`running`: full
            job ids, a lease id for a plain item; at most :data:`MAX_RUNNING_LISTED`). Their
            jobs were settled without them. While they hold every one of its slots
            (``concurrency`` of them at least) the loop runs nothing: see docs/worker.rst,
            "Time limits". Empty in a record written before this field was kept.
    """

    id: str
    host: str
    pid: int
    started_at: float
    jobs_done: int
    running: list[str]
    last_seen: float
    abandoned: list[str] = field(default_factory=list)


def job_id(lease: Lease[Any]) -> str:
    """The id a worker record gives a running job: a submitted job's id
    (:attr:`Lease.job_id`, what :meth:`~fdbqueue.Queue.job` takes), else, for an item enqueued
    as a plain item, its lease's id (kept by extensions)."""
    return lease.job_id if lease.job_id is not None else lease.id


class WorkerRegistry:
    """The worker records of one queue, under its metadata subspace ``metadata`` (see the
    module docstring)."""

    def __init__(self, metadata: Subspace) -> None:
        self.subspace = metadata.subspace(("workers",))
        self.begin: bytes = self.subspace.range().start
        self.end: bytes = self.subspace.range().stop

    def key(self, worker: str) -> bytes:
        """The key of the record of the loop whose id is ``worker``."""
        key: bytes = self.subspace.pack((worker,))
        return key

    def records(self, tr: AnyContext) -> list[tuple[bytes, WorkerInfo | None]]:
        """Every record, by key, as a :class:`WorkerInfo` (None: one this version cannot
        read). Cost: one snapshot range read of the records; no conflicts."""
        reader: Any = getattr(tr, "snapshot", tr)
        return [
            (bytes(kv.key), self._parse(bytes(kv.key), bytes(kv.value)))
            for kv in reader.get_range(self.begin, self.end)
        ]

    def listed(self, tr: AnyContext, now: float | None = None) -> list[WorkerInfo]:
        """The records of the live loops (last beat at most :data:`LAPSE_SECONDS` before
        ``now``, by default :func:`fdbqueue._clock.now`), oldest start first. Cost: as
        :meth:`records`."""
        moment = _clock.now() if now is None else now
        found = [info for _key, info in self.records(tr) if info is not None]
        live = [info for info in found if not lapsed(info, moment)]
        return sorted(live, key=lambda info: (info.started_at, info.id))

    def write(self, tr: AnyContext, info: WorkerInfo) -> None:
        """Set ``info``'s record (the whole record: a blind write, no read, no conflict)."""
        running = tuple(info.running[:MAX_RUNNING_LISTED])
        abandoned = tuple(info.abandoned[:MAX_RUNNING_LISTED])
        value = (
            RECORD_FORMAT,
            info.host,
            info.pid,
            info.started_at,
            info.last_seen,
            info.jobs_done,
            running,
            abandoned,
        )
        tr.set(self.key(info.id), fdb.tuple.pack(value))

    def clear(self, tr: AnyContext, worker: str) -> None:
        """Clear the record of the loop whose id is ``worker`` (one clear, no read)."""
        tr.clear(self.key(worker))

    def clear_lapsed(self, tr: AnyContext, now: float) -> int:
        """Clear every record lapsed at ``now`` (records this version cannot read are left
        alone); return how many. Cost: one snapshot range read of the records, and per lapsed
        record a read conflict on its key (a beat that rewrote it meanwhile makes this
        transaction retry, and keeps it) and a clear."""
        require_writable(tr, "clear_lapsed")
        cleared = 0
        for key, info in self.records(tr):
            if info is not None and lapsed(info, now):
                tr.add_read_conflict_range(key, key + b"\x00")
                tr.clear(key)
                cleared += 1
        return cleared

    def _parse(self, key: bytes, value: bytes) -> WorkerInfo | None:
        try:
            (worker,) = self.subspace.unpack(key)
            fields = fdb.tuple.unpack(value)
            form, host, pid, started_at, last_seen, jobs_done, running, *later = fields
        except Exception:  # another format: a newer version's, or not fdbqueue's
            return None
        if form != RECORD_FORMAT:
            return None
        abandoned = later[0] if later else ()  # appended since: older records lack it
        return WorkerInfo(
            id=str(worker),
            host=str(host),
            pid=int(pid),
            started_at=float(started_at),
            jobs_done=int(jobs_done),
            running=[str(job) for job in running],
            last_seen=float(last_seen),
            abandoned=[str(job) for job in abandoned],
        )


def lapsed(info: WorkerInfo, now: float) -> bool:
    """Whether ``info``'s loop missed its beats for longer than :data:`LAPSE_SECONDS` at
    ``now`` (a record from a clock ahead of ``now`` is live)."""
    return not math.isfinite(info.last_seen) or now - info.last_seen > LAPSE_SECONDS


#: What a worker loop reports at each beat: (jobs done, ids of the jobs running).
Status = Callable[[], "tuple[int, list[str]]"]


class Registration:
    """One worker loop's record (see the module docstring): :meth:`register`, :meth:`beat`
    and :meth:`deregister`, each one transaction of ``database`` that gives up after
    :data:`REGISTRY_TIMEOUT_SECONDS`, logs a failure and never raises an Exception.

    Args:
        registry: the queue's worker records.
        database: the Database or Tenant the loop works on.
        status: called at each write for the loop's jobs done and running job ids.
        abandoned: called at each write for the ids of the jobs whose handler the loop
            abandoned, still running (None: none).
    """

    def __init__(
        self,
        registry: WorkerRegistry,
        database: Any,
        status: Status,
        abandoned: Callable[[], list[str]] | None = None,
    ) -> None:
        self.registry = registry
        self.database = database
        self.status = status
        self.abandoned = abandoned
        self.id = uuid.uuid4().hex
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.started_at = _clock.now()

    def record(self, now: float) -> WorkerInfo:
        """The loop's record as of ``now``."""
        done, running = self.status()
        abandoned = [] if self.abandoned is None else list(self.abandoned())
        return WorkerInfo(
            self.id, self.host, self.pid, self.started_at, done, list(running), now, abandoned
        )

    def register(self) -> bool:
        """Write the loop's record, and clear the lapsed records of other loops. Cost: one
        transaction: :meth:`WorkerRegistry.clear_lapsed`'s read and clears, and one set."""

        def body(tr: Any) -> None:
            now = _clock.now()
            self.registry.clear_lapsed(tr, now)
            self.registry.write(tr, self.record(now))

        return self._run(body, "register")

    def beat(self) -> bool:
        """Write the loop's record again, with ``last_seen`` now. Cost: one transaction of
        one set (no read: no conflicts)."""
        return self._run(lambda tr: self.registry.write(tr, self.record(_clock.now())), "beat")

    def deregister(self) -> bool:
        """Clear the loop's record. Cost: one transaction of one clear."""
        return self._run(lambda tr: self.registry.clear(tr, self.id), "deregister")

    def _run(self, write: Callable[[Any], None], what: str) -> bool:
        first = [True]

        def body(tr: Any) -> None:
            if first[0]:  # once: the timeout survives the retries (on_error)
                tr.options.set_timeout(int(REGISTRY_TIMEOUT_SECONDS * 1000))
                first[0] = False
            write(tr)

        try:
            run_in_retry_loop(self.database, body)
        except Exception as error:
            logger.warning(
                "worker %s could not %s its record (the next beat writes it): %s",
                self.id[:8],
                what,
                error,
            )
            return False
        return True


class RegistrationThread:
    """Keeps a :class:`Registration` for the thread loop (:func:`fdbqueue.worker.work`): it
    registers (before the loop claims anything), then a thread beats every
    :data:`HEARTBEAT_SECONDS`; :meth:`close` ends it and deregisters. Cost when made:
    :meth:`Registration.register`, given up after :data:`REGISTRY_TIMEOUT_SECONDS`."""

    def __init__(self, registration: Registration) -> None:
        self.registration = registration
        self._done = threading.Event()
        registration.register()
        self._thread = threading.Thread(target=self._run, name="fdbqueue-registry", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(HEARTBEAT_SECONDS):
            self.registration.beat()

    def close(self) -> None:
        """Stop beating (waiting for a write in flight), then deregister. Cost: one
        transaction (:meth:`Registration.deregister`), given up after
        :data:`REGISTRY_TIMEOUT_SECONDS`."""
        self._done.set()
        self._thread.join()
        self.registration.deregister()
