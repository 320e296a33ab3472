"""What the dashboard shows of jobs (:meth:`fdbqueue.Queue.submit`): a job as its page shows
it (:func:`job_view`, with its value found where its item is, :func:`job_value`), the lists
of a queue's page (:func:`job_lists`), and a job id looked up in the dashboard's queues
(:func:`look_up`).

A job's record keeps no value: its value is in its item, wherever the item is while the job
is not finished (ready, delayed, held by a lease, dead-lettered). :func:`job_value` looks for
it there, with bounded snapshot range reads, by the job header the stored value starts with
(:mod:`fdbqueue._storage.job_records`)."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from typing import Any

from fdbqueue import _clock
from fdbqueue._storage.job_records import JOB_HEADER, job_element, strip_job_header
from fdbqueue._storage.jobs import JobInfo
from fdbqueue._storage.store import metadata_subspace
from fdbqueue._transactions.transactional import run_in_retry_loop
from fdbqueue.codecs import Undecodable, decode_or_undecodable
from fdbqueue.dashboard._figures import AnyQueue, shortened

__all__ = [
    "FINISHED_SHOWN",
    "FULL",
    "JOBS_SHOWN",
    "SCANNED",
    "JobLookup",
    "ago",
    "full_text",
    "job_lists",
    "job_value",
    "look_up",
    "moment",
]

#: Jobs each list of a queue's page shows at most (running; retrying and delayed).
JOBS_SHOWN = 20
#: Finished jobs a queue's page reads per finished state (the most recent shown first).
FINISHED_SHOWN = 20
#: Keys :func:`job_value` reads at most per place an item may be, per shard.
SCANNED = 1000
#: The longest text a job's page shows of a value or result; longer ones end with an ellipsis.
FULL = 20_000


@dataclasses.dataclass(frozen=True)
class JobLookup:
    """A job id looked up in a queue (:func:`look_up`): the job, or why there is none
    (``problem``, with the HTTP status to answer) and, for a job of another of the
    dashboard's queues, that queue's display name (``owner``)."""

    job: JobInfo | None
    problem: str | None = None
    status: int = 200
    owner: str | None = None


def look_up(database: Any, name: str, queues: Mapping[str, AnyQueue], job_id: str) -> JobLookup:
    """The job ``job_id`` of queue ``name`` (one of ``queues``), or why not: not a job id
    (400), a job of another queue (404; ``owner`` names it when the dashboard shows it), no
    such job (404: never submitted, or its record cleared after ``result_ttl``)."""
    job_id = job_id.strip()
    if not job_id:
        return JobLookup(None, "Give a job id: 32 hexadecimal digits.", 400)
    queue = queues[name]
    try:
        found = queue.job(database, job_id)
    except ValueError as error:
        if "another queue" not in str(error):
            return JobLookup(None, f"Not a job id: {error}.", 400)
        for other_name, other in sorted(queues.items()):
            if other_name == name:
                continue
            try:
                other.job(database, job_id)
            except ValueError:
                continue
            return JobLookup(None, f"Job {job_id} is a job of queue {other_name}.", 404, other_name)
        return JobLookup(None, f"Job {job_id} is a job of another queue, not of {name}.", 404)
    if found is None:
        return JobLookup(
            None,
            f"No job {job_id} in {name}: never submitted, or its record was cleared "
            "result_ttl seconds (a day by default) after it finished.",
            404,
        )
    return JobLookup(found)


def _last_element(where: Any, key: bytes) -> Any:
    """The last element of ``key``, under the subspace ``where`` (None: none it can read)."""
    try:
        elements = where.unpack(key)
    except Exception:  # another program's key: the tuple layer may raise anything on it
        return None
    return elements[-1] if elements else None


def job_value(database: Any, queue: AnyQueue, job_id: str) -> tuple[bool, Any]:
    """``(True, value)`` of the job ``job_id`` (a valid id of ``queue``), decoded (an
    :class:`~fdbqueue.Undecodable` when the codec cannot), or ``(False, None)`` when its item
    was not found: it is gone (a finished job), or lies beyond the first :data:`SCANNED` keys
    of where it may be.

    Cost: one read-only transaction; per shard, snapshot range reads of at most
    :data:`SCANNED` keys each of the held values (leases, dead letters), the delayed items,
    the items of message groups and the other ready items, in that order, until the value is
    found; no conflicts."""
    wanted = JOB_HEADER + bytes.fromhex(job_id)  # a held value's, a delayed record's
    element = job_element(bytes.fromhex(job_id))  # an item's key's last element
    if queue.shards == 1:
        places = [queue.subspace]
    else:
        places = [queue.subspace.subspace((k,)) for k in range(queue.shards)]

    def body(tr: Any) -> bytes | None:
        reader = getattr(tr, "snapshot", tr)
        for subspace in places:
            metadata = metadata_subspace(subspace)
            for where in (metadata["held"], metadata["delayed"], metadata["grouped"], subspace):
                span = where.range()
                for kv in reader.get_range(span.start, span.stop, limit=SCANNED):
                    stored = bytes(kv.value)
                    if stored.startswith(wanted):
                        return stored
                    if _last_element(where, kv.key) == element:  # an item: its value alone
                        return wanted + stored
        return None

    stored: bytes | None = run_in_retry_loop(database, body)
    if stored is None:
        return False, None
    return True, decode_or_undecodable(queue.codec, strip_job_header(stored))


def job_lists(database: Any, queue: AnyQueue) -> dict[str, Any]:
    """What a queue's page lists of its jobs: ``running``, ``waiting`` (retrying, then
    delayed, then deferred: waiting for other jobs; :data:`JOBS_SHOWN` of each at most),
    ``finished`` (up to :data:`FINISHED_SHOWN` of each finished state read, the most recent
    first, :data:`FINISHED_SHOWN` shown), ``workers`` (:meth:`~fdbqueue.Queue.workers`) and
    ``schedules`` (:meth:`~fdbqueue.Queue.schedules`: each with its next due time, last run
    and runs);
    ``error`` when reading failed.

    Cost: one :meth:`~fdbqueue.Queue.jobs` call per state (each its own transaction: each
    reads the job records until it found its jobs, all of them for a state few jobs are in)
    and one each of :meth:`~fdbqueue.Queue.workers` and :meth:`~fdbqueue.Queue.schedules`."""
    try:

        def listed(state: str, limit: int) -> list[JobInfo]:
            found: list[JobInfo] = queue.jobs(database, state=state, limit=limit)
            return found

        running = listed("running", JOBS_SHOWN)
        waiting = [
            job
            for state in ("retrying", "delayed", "deferred")
            for job in listed(state, JOBS_SHOWN)
        ]
        finished = [
            job
            for state in ("succeeded", "dead", "cancelled")
            for job in listed(state, FINISHED_SHOWN)
        ]
        finished.sort(key=lambda job: job.finished_at or 0.0, reverse=True)
        workers = queue.workers(database)
        schedules = queue.schedules(database)
    except Exception as error:  # a database error, a queue of another type: said on the page
        return {
            "running": [],
            "waiting": [],
            "finished": [],
            "workers": [],
            "schedules": [],
            "jobs_error": f"{type(error).__name__}: {error}",
        }
    return {
        "running": running,
        "waiting": waiting,
        "finished": finished[:FINISHED_SHOWN],
        "workers": workers,
        "schedules": schedules,
        "jobs_error": None,
    }


def full_text(value: Any, codec: str | None = None) -> str:
    """``value`` as a job's page shows it: a JSON queue's as indented JSON, others as
    :func:`~fdbqueue.dashboard._figures.shortened` shows them, cut at :data:`FULL`
    characters. A value JSON cannot write (a result of another result codec) is shown as
    Python shows it. Not escaped: the templates escape it."""
    if codec == "json" and not isinstance(value, Undecodable):
        try:
            text = json.dumps(value, ensure_ascii=False, indent=2)
        except (TypeError, ValueError):
            return shortened(value, None, FULL)
        return text if len(text) <= FULL else f"{text[:FULL]}… ({len(text):,} characters)"
    return shortened(value, codec, FULL)


def moment(seconds: float | None, now: float | None = None) -> str:
    """A wall-clock time (seconds since the epoch) as a job's page shows it, in UTC with how
    long ago (or how soon) it is; ``-`` for none."""
    if seconds is None:
        return "-"
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds))
    return f"{stamp} UTC ({ago(seconds, now)})"


def ago(seconds: float | None, now: float | None = None) -> str:
    """How long ago a wall-clock time was (``12.3 s ago``), or how soon it comes (``in
    4.0 s``), by fdbqueue's wall clock (:func:`fdbqueue._clock.now`, which the job records'
    times come from; ``now`` replaces it); ``-`` for none."""
    if seconds is None:
        return "-"
    passed = (_clock.now() if now is None else now) - seconds
    span = abs(passed)
    if span < 120:
        text = f"{span:.1f} s"
    elif span < 7200:
        text = f"{span / 60:.1f} min"
    elif span < 172_800:
        text = f"{span / 3600:.1f} h"
    else:
        text = f"{span / 86400:.1f} days"
    return f"{text} ago" if passed >= 0 else f"in {text}"
