"""Jobs: an id, a state, a result and an error for every item submitted as a job.

:meth:`fdbqueue.Queue.submit` (and :meth:`fdbqueue.PriorityQueue.submit`) enqueue an item
and write its *job record* in the same transaction. The item is an item like any other,
where the recipes put it; its stored value starts with a *job header* that carries the job's
id, and every decode strips it. The header and the record's byte layout (versions 1 to 3,
and how a record's version tells how its result is stored) are
:mod:`fdbqueue._storage.job_records`'s; this module keeps the records' keys and every state
change.

The records, in the queue's metadata (a sharded queue's own, not a shard's)::

    P + b"\\xff" + pack(("jobs", id))           -> the job record (job_records.JobRecord)
    P + b"\\xff" + pack(("job_results", id))    -> b"\\x00" + the result codec's bytes
                                               or b"\\x01" + UTF-8 "result not kept: why"
    P + b"\\xff" + pack(("jobs_finished", finished_at, id)) -> b""   (for the TTL's sweep)
    P + b"\\xff" + pack(("job_items", id))      -> the key its item was last written at

Times are wall-clock microseconds (:func:`fdbqueue._clock.now`); 0 for none. The state
changes in the transaction that moves the item (:mod:`fdbqueue._delivery.claims`,
:mod:`fdbqueue._storage.taking`, :mod:`fdbqueue._delivery.leases`), never in another one:

* ``waiting``: submitted (or given back), its item waits; reported as ``delayed`` while its
  ``due_at`` is ahead (a delayed submit, a release with a delay);
* ``running``: claimed (a lease holds it; ``deliveries`` counts the claims);
* ``retrying``: given back after a failure (the worker's release with a backoff), waiting
  for its next delivery;
* ``succeeded``: acknowledged (or taken by a plain ``dequeue``/``pop``, which hands it to its
  caller), with its result when the worker loop kept one;
* ``dead``: moved to the dead letters, with the last error;
* ``cancelled``: :meth:`Jobs.cancel` before it ran, or while it ran and it then failed.

Every write of a job's item notes where it went (``job_items``: the submit, a delayed item
falling due, a move between shards, a requeued dead letter, a release, whose lease holds the
item while the job retries), with a blind set. A cancel reads that key with the record and
removes the item there in its own transaction: a waiting item of the queue, a delayed
record, an item of a message group (its group's turn passes to its next item, keeping its
place), a released lease (its held value cleared, its group's next turn given). So
:meth:`fdbqueue.Queue.size`, ``empty``, ``peek`` and ``oldest_age`` stop counting it at once,
and takes never meet it. The few a cancel cannot remove (the next item of a group whose item
is in flight; items of an fdbqueue before this note existed) are cleared by the take or claim
that meets them instead of being delivered, their group's turn passed on, at most
:data:`~fdbqueue._storage.taking.CANCELLED_PER_TAKE` per transaction, so they never reach a
handler and never hold up a take; ``size`` counts those until then.

Finished records (succeeded, dead, cancelled) are cleared ``result_ttl`` seconds after they
last finished (a requeued dead job is ``waiting`` again, and each finish clears the entry of
the one before: :meth:`Jobs.requeued`, :meth:`Jobs.finish`): each finishing transaction
sweeps at most :data:`SWEEP_LIMIT` expired ones at most once a second per process and queue
object (snapshot reads, blind clears, a conflict key per job cleared), and
:meth:`Jobs.clear_expired` clears all of them (the worker loop calls it).

Source followed: FoundationDB's developer guide (state changes in the transaction that does
the work; watches for :meth:`fdbqueue.Queue.result`); rq's job statuses, Celery's
``AsyncResult`` and BullMQ's job states, for the names.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fdb.subspace_impl import Subspace

from fdbqueue import _clock, _keycodec
from fdbqueue._storage.job_records import (
    FINISHED,
    JOB_ID_BYTES,
    RESULT_KEPT,
    RESULT_NOT_KEPT,
    JobOptions,
    JobRecord,
)
from fdbqueue._transactions.transactional import run_in_retry_loop
from fdbqueue._transactions.waiting import take_blocking
from fdbqueue._wording import FAILURE_MESSAGE_CHARACTERS, describe_failure
from fdbqueue.codecs import MAX_VALUE_BYTES, Codec, Undecodable, decode_or_undecodable
from fdbqueue.errors import JobFailedError, ResultNotKeptError

__all__ = [
    "RESULT_TTL",
    "SWEEP_LIMIT",
    "Job",
    "JobInfo",
    "Jobs",
    "ResultFormat",
    "Submission",
    "check_job_id",
]

#: The first bytes of a job id: its queue's :attr:`Jobs.tag`.
_TAG_BYTES = 4
#: Seconds a finished job's record and result are kept, unless the queue says otherwise
#: (``result_ttl``): a day.
RESULT_TTL = 86_400.0
#: Records one page of a listing reads (:meth:`Jobs.listing`).
LIST_PAGE = 500
#: Finished records one sweep clears at most.
SWEEP_LIMIT = 100
_NOT_KEPT = "result not kept: "
_MICROSECONDS = 1_000_000


def check_job_id(job_id: Any, tag: bytes) -> bytes:
    """The 16 bytes a job id (32 hexadecimal digits, as :attr:`Job.id`) stands for, checked
    to be a job of the queue whose :meth:`Jobs.tag` is ``tag``.

    Raises:
        TypeError: ``job_id`` is not a str.
        ValueError: it is not 32 hexadecimal digits, or it is a job of another queue.
    """
    if not isinstance(job_id, str):
        raise TypeError(f"a job id is a str of 32 hexadecimal digits, not {type(job_id).__name__}")
    try:
        raw = bytes.fromhex(job_id)
    except ValueError:
        raw = b""
    if len(raw) != JOB_ID_BYTES or len(job_id) != 2 * JOB_ID_BYTES:
        shown = job_id if len(job_id) <= 80 else job_id[:77] + "..."
        raise ValueError(f"a job id is 32 hexadecimal digits, not {shown!r}")
    if raw[:_TAG_BYTES] != tag:
        raise ValueError(f"job {job_id} is a job of another queue, not of this one")
    return raw


def parent_ids(after: Any, tag: bytes) -> list[bytes]:
    """The ids (16 bytes each) of ``after``, a non-empty list or tuple of
    :class:`Job` objects or job ids of the queue whose tag is ``tag`` (:func:`check_job_id`).

    Raises:
        TypeError: not such a list (a str alone, say).
        ValueError: an id that is not one, or of another queue.
    """
    if not isinstance(after, (list, tuple)) or not after:
        raise TypeError(f"after must be a non-empty list of jobs or job ids, not {after!r}")
    return [check_job_id(job.id if isinstance(job, Job) else job, tag) for job in after]


def new_job_id(tag: bytes) -> bytes:
    """A new job's id (known before the commit): the queue's ``tag`` (4 bytes) and 12
    random bytes."""
    return tag + os.urandom(JOB_ID_BYTES - _TAG_BYTES)


@dataclass(frozen=True)
class Job:
    """A submitted job (what :meth:`fdbqueue.Queue.submit` returns).

    Attributes:
        id: the job's id, 32 hexadecimal digits, chosen before the transaction commits (a
            transaction that never commits leaves no job with it): give it to
            :meth:`~fdbqueue.Queue.job`, :meth:`~fdbqueue.Queue.result` and
            :meth:`~fdbqueue.Queue.cancel`.
    """

    id: str


@dataclass(frozen=True)
class JobInfo:
    """What :meth:`fdbqueue.Queue.job` tells of a job.

    Attributes:
        id: the job's id.
        state: one of :data:`~fdbqueue._storage.job_records.STATES`: ``"waiting"``,
            ``"delayed"``, ``"running"``, ``"retrying"``, ``"succeeded"``, ``"dead"`` or
            ``"cancelled"``.
        deliveries: how many times it was claimed.
        enqueued_at, started_at, finished_at: wall-clock seconds since the epoch (None:
            not yet): when it was submitted, last claimed, finished.
        due_at: when a delayed or retrying job may be taken (wall-clock seconds), or None.
        error: the last failure, ``(exception type, message, last traceback lines)``, or None.
        result: what the handler returned (decoded; None when none was kept).
        has_result: whether a result is kept (a handler may return None).
        result_error: for a job that succeeded but whose result could not be kept (the
            result codec cannot encode it, or it is larger than a value), why: a str that
            starts ``result not kept:`` (:meth:`~fdbqueue.Queue.result` raises
            :class:`~fdbqueue.ResultNotKeptError`); else None.
        group: its message group, or None.
        priority: its priority (a PriorityQueue's), or None.
        cancel_requested: :meth:`~fdbqueue.Queue.cancel` was called while it ran: it is not
            retried.
        options: its own settings (``submit``'s ``max_deliveries``, ``time_limit``,
            ``backoff``: :class:`~fdbqueue.JobOptions`), or None.
        waiting_for: for a ``deferred`` job (``submit(..., after=...)``), the ids of the jobs
            it still waits for; else empty.
    """

    id: str
    state: str
    deliveries: int
    enqueued_at: float | None
    started_at: float | None
    finished_at: float | None
    due_at: float | None
    error: tuple[str, str, str] | None
    result: Any
    has_result: bool
    result_error: str | None
    group: Any
    priority: int | None
    cancel_requested: bool
    options: JobOptions | None = None
    waiting_for: tuple[str, ...] = ()

    @property
    def finished(self) -> bool:
        """Whether the job ended: succeeded, dead or cancelled."""
        return self.state in FINISHED

    def outcome(self) -> Any:
        """What :meth:`fdbqueue.Queue.result` returns for this finished job: its result.

        Raises:
            ResultNotKeptError: it succeeded, but its result could not be kept.
            JobFailedError: it ended ``dead`` or ``cancelled``.
        """
        if self.state == "succeeded":
            if self.result_error is not None:
                raise ResultNotKeptError(
                    f"job {self.id} succeeded, but {self.result_error}", self, self.result_error
                )
            return self.result
        raise JobFailedError(
            f"job {self.id} ended {self.state}"
            + (f": {self.error[0]}: {self.error[1]}" if self.error else ""),
            self,
            self.error,
        )


def _seconds(microseconds: int) -> float | None:
    return microseconds / _MICROSECONDS if microseconds else None


def _now() -> int:
    return round(_clock.now() * _MICROSECONDS)


@dataclass(frozen=True)
class ResultFormat:
    """How a queue stores its jobs' results and reads them back (see
    :mod:`fdbqueue._storage.job_records`).

    Attributes:
        codec: the result codec (``result_codec=``): encodes what handlers return, and
            decodes the results of records of version 2 and later.
        legacy: decodes the results of version-1 records (kept by an fdbqueue before results
            had a codec of their own): the ``result_codec`` given if it is one an older
            fdbqueue took, else the queue's codec.
    """

    codec: Codec[Any]
    legacy: Codec[Any]

    def stored(self, result: Any) -> tuple[bytes, str | None]:
        """What a job's result key holds for ``result`` (a value the handler returned), and
        None, or, when it cannot be kept, why (``result not kept: ...``; the value holds
        that instead). Cost: the codec's encode, no database access.

        It is not kept when the result codec raises (any exception: it cannot encode it),
        returns no bytes, or returns more than :data:`~fdbqueue.codecs.MAX_VALUE_BYTES` - 1
        bytes (with the first byte, more than a value holds).
        """
        try:
            encoded = self.codec.encode(result)
            if isinstance(encoded, (bytearray, memoryview)):
                encoded = bytes(encoded)
            if not isinstance(encoded, bytes):
                raise TypeError(f"its encode() returned {type(encoded).__name__}, not bytes")
        except Exception as error:  # a codec may raise anything on what a handler returned
            why = f"the result codec raised {_told(error)}"
        else:
            if len(RESULT_KEPT) + len(encoded) <= MAX_VALUE_BYTES:
                return RESULT_KEPT + encoded, None
            why = (
                f"it is {len(encoded):,} bytes encoded, more than the {MAX_VALUE_BYTES - 1:,} "
                f"a result holds (FoundationDB's {MAX_VALUE_BYTES:,}-byte value limit)"
            )
        reason = (_NOT_KEPT + why)[:FAILURE_MESSAGE_CHARACTERS]
        return RESULT_NOT_KEPT + reason.encode("utf-8", "backslashreplace"), reason

    def read(self, version: int, stored: bytes | None) -> tuple[bool, Any, str | None]:
        """``(has_result, result, result_error)`` of a job whose record is of ``version``
        and whose result key holds ``stored`` (None: nothing). A result its codec cannot
        decode is an :class:`~fdbqueue.Undecodable`."""
        if stored is None:
            return False, None, None
        if version < 2:
            return True, decode_or_undecodable(self.legacy, stored), None
        kind, rest = stored[:1], stored[1:]
        if kind == RESULT_KEPT:
            return True, decode_or_undecodable(self.codec, rest), None
        if kind == RESULT_NOT_KEPT:
            return False, None, rest.decode("utf-8", "replace")
        return (
            True,
            Undecodable(stored, f"a result that starts {kind!r}: neither kept nor not"),
            None,
        )


def _told(error: BaseException) -> str:
    """``"TypeName: message"`` of ``error``, as a job's record keeps it."""
    try:
        kind, message, _trace = describe_failure(error)
    except Exception:  # an exception whose str() raises
        kind, message = type(error).__name__, "(its message cannot be shown)"
    return f"{kind}: {message}"


@dataclass(frozen=True)
class Submission:
    """A job being submitted: its records' home, id, group and priority; the write of its
    item records it (:meth:`record`) in the same transaction."""

    jobs: Jobs
    id: bytes
    group: Any
    priority: int | None
    options: JobOptions | None = None

    def record(self, tr: Any, delay: float) -> None:
        """Write its record in ``tr`` (``delay``: seconds before its item falls due)."""
        self.jobs.submitted(tr, self.id, delay, self.group, self.priority, self.options)

    def submit_after(self, tr: Any, stored: bytes, parents: list[bytes]) -> bool:
        """Submit it in ``tr`` to run after ``parents`` (:meth:`Jobs.submitted_after`), its
        ``stored`` item ready. Returns True (it wrote)."""
        jobs = self.jobs
        jobs.submitted_after(tr, self.id, stored, parents, self.group, self.priority, self.options)
        return True


#: Removes a cancelled job's item: ``withdraw(tr, item key, job id)``; whether it did.
Withdraw = Callable[[Any, bytes, bytes], bool]


class Jobs:
    """The job records of one queue (see the module docstring).

    Args:
        metadata: the queue's metadata subspace (a sharded queue's own).
        result_ttl: seconds a finished job's record and result are kept (0: no result is
            kept, and the record is cleared at the first sweep).
    """

    def __init__(self, metadata: Subspace, result_ttl: float) -> None:
        #: the first 4 bytes of this queue's job ids: a CRC-32 of its metadata prefix, so that
        #: an id of another queue's job is refused (:func:`check_job_id`)
        self.tag = zlib.crc32(metadata.key()).to_bytes(_TAG_BYTES, "big")
        self.records = metadata.subspace(("jobs",))
        self.results = metadata.subspace(("job_results",))
        self.finished = metadata.subspace(("jobs_finished",))
        #: ``(expires_at, job)``: the sweep's entry of a finished job with a ``result_ttl``
        #: of its own, by when it expires (microseconds)
        self.expiring = metadata.subspace(("jobs_expiring",))
        self.locations = metadata.subspace(("job_items",))
        #: ``(parent, child)``: the child was submitted ``after=`` the parent, which has not
        #: succeeded yet; and the same edge the other way, ``(child, parent)``
        self.after = metadata.subspace(("job_after",))
        self.before = metadata.subspace(("job_before",))
        #: ``(child,)``: a deferred job's stored item, enqueued when its last parent succeeds
        self.deferred = metadata.subspace(("job_deferred",))
        #: Enqueues a job's stored item in ``tr`` (set by the queue, which knows where its
        #: items go): ``release(tr, job id, stored item, group, priority)``.
        self.release: Callable[[Any, bytes, bytes, Any, int | None], None] | None = None
        self._records_prefix: bytes = self.records.key()
        # the job id key() was last asked for, and its key
        self._last_key: tuple[bytes | None, bytes] = (None, b"")
        self._results_prefix: bytes = self.results.key()
        self._locations_prefix: bytes = self.locations.key()
        self._finished_prefix: bytes = self.finished.key()
        self.result_ttl = result_ttl
        self._next_sweep = 0.0  # _clock.now() of the next sweep a finish makes

    def key(self, job_id: bytes) -> bytes:
        """The key of the record of the job ``job_id`` (its watch wakes ``result``):
        ``records.pack((job_id,))``, packed by the key codec (:mod:`fdbqueue._keycodec`), as
        are the keys below; the last one packed is kept (a claim, an ack ask for one job's
        key two or three times)."""
        last = self._last_key  # a claim reads and writes one job's record, an ack too
        if last[0] == job_id:
            return last[1]
        key = _keycodec.pack_bytes(self._records_prefix, job_id)
        self._last_key = (job_id, key)  # (one tuple: threads replace it whole)
        return key

    def result_key(self, job_id: bytes) -> bytes:
        """The key of the job's result: ``results.pack((job_id,))``."""
        return _keycodec.pack_bytes(self._results_prefix, job_id)

    def location_key(self, job_id: bytes) -> bytes:
        """The key of the note of where the job's item is: ``locations.pack((job_id,))``."""
        return _keycodec.pack_bytes(self._locations_prefix, job_id)

    def finished_key(self, finished_at: int, job_id: bytes) -> bytes:
        """The key of the job's entry for the TTL's sweep: ``finished.pack((finished_at,
        job_id))``."""
        return _keycodec.pack_int_bytes(self._finished_prefix, finished_at, job_id)

    def located(self, tr: Any, job_id: bytes, item_key: bytes) -> None:
        """Note that the job's item was written at ``item_key`` in ``tr`` (an item of the
        queue, of a group, or a delayed record), where :meth:`cancel` finds it. Cost: one
        set, blind (no read, no conflict)."""
        tr[self.location_key(job_id)] = item_key

    # -- reading ---------------------------------------------------------------------------

    def read(self, reader: Any, job_id: bytes) -> Any:
        """Start reading the record of ``job_id`` through ``reader`` (a point read: with a
        read conflict unless ``reader`` is a snapshot view); :meth:`parsed` reads it."""
        return reader.get(self.key(job_id))

    @staticmethod
    def parsed(future: Any) -> JobRecord | None:
        """The record a :meth:`read` found, or None when there is none (an unknown job, or
        one cleared after its TTL)."""
        if not future.present():
            return None
        try:
            return JobRecord.parse(bytes(future))
        except ValueError:
            return None

    def wait_finished(
        self, database: Any, job_id: bytes, results: ResultFormat, seconds: float | None
    ) -> JobInfo | None:
        """Wait until the job ``job_id`` finished, at most ``seconds`` (None: no limit), on a
        watch of its record (:func:`~fdbqueue._transactions.waiting.take_blocking`); its
        :class:`JobInfo` then (its results read by ``results``), or None when the time ran
        out.

        Raises:
            KeyError: no such job (never submitted, or cleared ``result_ttl`` seconds after
                it finished).

        Cost: a snapshot point read per look, in a transaction of its own, and a watch
        between looks."""

        def look(db: Any, _deadline: float | None) -> JobInfo | None:
            info: JobInfo | None = run_in_retry_loop(
                db, lambda tr: self.info(tr.snapshot, job_id, results)
            )
            if info is None:
                raise KeyError(
                    f"no job {job_id.hex()} in this queue: never submitted, or cleared "
                    "result_ttl seconds after it finished"
                )
            return info if info.finished else None

        finished: JobInfo | None = take_blocking(database, look, self.key(job_id), seconds)
        return finished

    def info(self, reader: Any, job_id: bytes, results: ResultFormat) -> JobInfo | None:
        """What :meth:`fdbqueue.Queue.job` returns (``results``: how the queue's results are
        read). Cost: two point reads issued together, through ``reader``."""
        record_read = self.read(reader, job_id)
        result_read = reader.get(self.result_key(job_id))
        record = self.parsed(record_read)
        if record is None:
            return None
        stored = bytes(result_read) if result_read.present() else None
        has_result, result, result_error = results.read(record.version, stored)
        state = record.state
        if state in ("waiting", "retrying") and record.due_at > _now():
            state = "delayed" if state == "waiting" else "retrying"
        error = record.error if any(record.error) else None
        return JobInfo(
            job_id.hex(),
            state,
            record.deliveries,
            _seconds(record.enqueued_at),
            _seconds(record.started_at),
            _seconds(record.finished_at),
            _seconds(record.due_at),
            error,
            result,
            has_result,
            result_error,
            record.group,
            record.priority,
            record.cancel_requested,
            record.options,
            self.waiting_for(reader, job_id) if state == "deferred" else (),
        )

    def listing(
        self,
        reader: Any,
        results: ResultFormat,
        state: str | None,
        limit: int,
        after: bytes | None = None,
    ) -> list[JobInfo]:
        """Up to ``limit`` jobs (in id order, after the id ``after``), those in ``state``
        only when given. Cost: snapshot range reads of the records, :data:`LIST_PAGE` at a
        time, until ``limit`` jobs are found or the records end, and a point read of the
        result of each job listed (issued together)."""
        found: list[JobInfo] = []
        begin = self.records.range().start if after is None else self.key(after) + b"\x00"
        end = self.records.range().stop
        while len(found) < limit:
            page = list(reader.get_range(begin, end, limit=LIST_PAGE))
            ids = [self.records.unpack(bytes(kv.key))[0] for kv in page]
            for job_id in ids:
                info = self.info(reader, job_id, results)
                if info is not None and (state is None or info.state == state):
                    found.append(info)
                    if len(found) == limit:
                        break
            if len(page) < LIST_PAGE:
                break
            begin = bytes(page[-1].key) + b"\x00"
        return found

    # -- state changes (each in the transaction that moves the job's item) ---------------

    def submitted(
        self,
        tr: Any,
        job_id: bytes,
        delay: float,
        group: Any,
        priority: int | None,
        options: JobOptions | None = None,
    ) -> None:
        """A job was submitted in ``tr``: its record, ``waiting`` (``delay`` seconds ahead:
        reported ``delayed`` until then), with its own ``options``. Cost: one set."""
        now = _now()
        due = now + round(delay * _MICROSECONDS) if delay else 0
        record = JobRecord(
            "waiting", enqueued_at=now, due_at=due, group=group, priority=priority, options=options
        )
        tr[self.key(job_id)] = record.pack()

    def _change(self, tr: Any, job_id: bytes, record: JobRecord | None) -> JobRecord | None:
        """``record`` (None: read it now, with a read conflict) for a state change."""
        if record is None:
            record = self.parsed(self.read(tr, job_id))
        return record

    def taken(self, tr: Any, job_id: bytes, record: JobRecord | None = None) -> None:
        """The job's item was taken by a plain take (``dequeue``, ``pop``): handed to the
        caller, it succeeded. Cost: a point read (unless ``record`` is given) and a set, and
        :meth:`finish`'s."""
        self.finish(tr, job_id, "succeeded", self._change(tr, job_id, record))

    def started(
        self, tr: Any, job_id: bytes, deliveries: int, record: JobRecord | None = None
    ) -> None:
        """The job's item was claimed (its ``deliveries``-th delivery): ``running``. Cost: a
        point read (unless ``record`` is given) and a set."""
        record = self._change(tr, job_id, record)
        if record is None:
            return
        record.state = "running"
        record.deliveries = deliveries
        record.started_at = _now()
        record.due_at = 0
        tr[self.key(job_id)] = record.pack()

    def released(
        self,
        tr: Any,
        job_id: bytes,
        delay: float,
        error: BaseException | str | None,
        record: JobRecord | None = None,
    ) -> bool:
        """The job's lease was given back (``delay`` seconds before its next delivery; after
        ``error`` when it failed): ``retrying`` after a failure, else ``waiting``. Returns
        False when the job was cancelled while it ran: it is ``cancelled`` now, and the
        caller drops its item instead. Cost: a point read (unless ``record`` is given) and a
        set."""
        record = self._change(tr, job_id, record)
        if record is None:
            return True
        if record.cancel_requested:
            if error is not None:
                record.error = describe_failure(error)
            self.finish(tr, job_id, "cancelled", record)
            return False
        record.state = "waiting" if error is None else "retrying"
        record.due_at = _now() + round(delay * _MICROSECONDS) if delay else 0
        if error is not None:
            record.error = describe_failure(error)
        tr[self.key(job_id)] = record.pack()
        return True

    def finish(
        self,
        tr: Any,
        job_id: bytes,
        state: str,
        record: JobRecord | None = None,
        *,
        result: bytes | None = None,
        error: BaseException | str | None = None,
    ) -> None:
        """The job ended in ``state`` (succeeded, dead or cancelled), with its ``result``
        (as :meth:`ResultFormat.stored` gives it; kept for ``result_ttl`` seconds) or
        ``error``. Cost: a point read (unless
        ``record`` is given), two sets (the record and its entry for the TTL's sweep), one
        more with a result; at most once a second, the sweep (:meth:`sweep`)."""
        record = self._change(tr, job_id, record)
        if record is None:
            return
        now = _now()
        self._unfinish(tr, job_id, record)
        record.state = state
        record.finished_at = now
        record.due_at = 0
        if error is not None:
            record.error = describe_failure(error)
        tr[self.key(job_id)] = record.pack()
        tr[self._entry_key(record, job_id)] = b""
        del tr[self.location_key(job_id)]
        if result is not None and self.ttl_of(record.options) > 0:
            tr[self.result_key(job_id)] = result
        if record.has_dependents:
            self._parent_ended(tr, job_id, state)
        if now / _MICROSECONDS >= self._next_sweep:
            self._next_sweep = now / _MICROSECONDS + 1.0
            self.sweep(tr, now)

    def requeued(self, tr: Any, job_id: bytes) -> None:
        """The job's dead letter was enqueued again (``requeue_dead_letters``): ``waiting``
        once more, and its earlier finish no longer expires it (the sweep clears a record
        only ``result_ttl`` after its latest finish). Cost: a point read (a read conflict), a
        set and a blind clear."""
        record = self._change(tr, job_id, None)
        if record is None:
            return
        self._unfinish(tr, job_id, record)
        record.state = "waiting"
        record.due_at = 0
        tr[self.key(job_id)] = record.pack()

    def _unfinish(self, tr: Any, job_id: bytes, record: JobRecord) -> None:
        """Clear, in ``tr``, the entry by which the sweep would expire ``record``'s earlier
        finish (none: nothing), before the job waits again or finishes again. Cost: one
        blind clear."""
        if record.finished_at:
            del tr[self._entry_key(record, job_id)]
            record.finished_at = 0

    def ttl_of(self, options: JobOptions | None) -> float:
        """Seconds a finished job's record and result are kept: its own ``result_ttl``, else
        the queue's."""
        own = None if options is None else options.result_ttl
        return self.result_ttl if own is None else own

    def _entry_key(self, record: JobRecord, job_id: bytes) -> bytes:
        """The sweep's entry of the job's latest finish: by its finish time (the queue's
        ``result_ttl``), or, with a ``result_ttl`` of its own, by when it expires."""
        own = None if record.options is None else record.options.result_ttl
        if own is None:
            return self.finished_key(record.finished_at, job_id)
        key: bytes = self.expiring.pack((record.finished_at + round(own * _MICROSECONDS), job_id))
        return key

    def keep_result(self, tr: Any, job_id: bytes, result: bytes) -> None:
        """Keep ``result`` (as :meth:`ResultFormat.stored` gives it) as the result of a job
        that finished in ``tr`` (a ``transactional`` handler's, known once the
        acknowledgement's writes were made). Cost: one set (none when ``result_ttl`` is 0)."""
        if self.result_ttl > 0:
            tr[self.result_key(job_id)] = result

    def cancel(self, tr: Any, job_id: bytes, withdraw: Withdraw) -> bool:
        """Cancel the job: a waiting, delayed or retrying one is ``cancelled``, and its item
        removed in ``tr`` by ``withdraw(tr, item key, job id)`` where :meth:`located` last
        noted it (the queue's, a group's, a delayed record or a released lease); an item
        ``withdraw`` leaves
        (it moved, or it heads a group in flight) is dropped by the take or claim that meets
        it. A running one is not retried once it ends (``cancel_requested``). False for a
        finished or unknown job. Cost: two point reads issued together (the record and where
        its item is, with read conflicts: a claim or take of the job at the same time
        conflicts), ``withdraw``'s, and a set or three (:meth:`finish`)."""
        location = tr.get(self.location_key(job_id))
        record = self._change(tr, job_id, None)
        if record is None or record.state in FINISHED:
            return False
        if record.state == "deferred":
            self._drop_deferred(tr, job_id, record, None)
            return True
        if record.state == "running":
            if record.cancel_requested:
                return False
            record.cancel_requested = True
            tr[self.key(job_id)] = record.pack()
            return True
        if location.present():
            withdraw(tr, bytes(location), job_id)
        self.finish(tr, job_id, "cancelled", record)
        return True

    # -- jobs after jobs (submit(..., after=...)) ----------------------------------------------

    def submitted_after(
        self,
        tr: Any,
        job_id: bytes,
        stored: bytes,
        parents: list[bytes],
        group: Any,
        priority: int | None,
        options: JobOptions | None,
    ) -> tuple[str, bytes | None]:
        """Submit, in ``tr``, the job ``job_id`` (its ``stored`` item) to run once every job
        of ``parents`` succeeded: ``("deferred", None)`` when one has not ended yet (its
        record ``deferred``, its item kept aside, an edge per parent still running, each such
        parent's record flagged); ``("waiting", None)`` when all succeeded already (enqueued
        at once: :attr:`release`, and its record written as ``submit`` writes it);
        ``("cancelled", parent)`` when one ended dead or cancelled (its record ``cancelled``
        at once, naming that parent).

        Raises:
            ValueError: a parent is unknown (never submitted, or its record was cleared
                after its ``result_ttl``), or is the job itself; nothing is written.

        Cost: a point read per parent, issued together (read conflicts: a parent that ends
        meanwhile makes this submit retry); for a deferred job, a set per parent that has
        not succeeded (twice: both edges) and its record's set, the item's set and the
        record's; for a job all of whose parents succeeded, nothing here."""
        reads = [self.read(tr, parent) for parent in parents]
        pending: list[tuple[bytes, JobRecord]] = []
        for parent, read in zip(parents, reads, strict=True):
            record = self.parsed(read)
            if record is None or parent == job_id:
                raise ValueError(f"after: job {parent.hex()} is not a job of this queue")
            if record.state in ("dead", "cancelled"):
                now = _now()
                error = describe_failure(f"job {parent.hex()} it waited for ended {record.state}")
                cancelled = JobRecord(
                    "cancelled",
                    enqueued_at=now,
                    finished_at=now,
                    group=group,
                    priority=priority,
                    error=error,
                    options=options,
                )
                tr[self.key(job_id)] = cancelled.pack()
                tr[self.finished_key(now, job_id)] = b""
                return "cancelled", parent
            if record.state != "succeeded":
                pending.append((parent, record))
        if not pending:
            if self.release is not None:
                self.release(tr, job_id, stored, group, priority)
            self.submitted(tr, job_id, 0.0, group, priority, options)
            return "waiting", None
        for parent, record in pending:
            tr[self.after.pack((parent, job_id))] = b""
            tr[self.before.pack((job_id, parent))] = b""
            if not record.has_dependents:
                record.has_dependents = True
                tr[self.key(parent)] = record.pack()
        deferred = JobRecord(
            "deferred", enqueued_at=_now(), group=group, priority=priority, options=options
        )
        tr[self.key(job_id)] = deferred.pack()
        tr[self.deferred.pack((job_id,))] = stored
        return "deferred", None

    def waiting_for(self, reader: Any, job_id: bytes) -> tuple[str, ...]:
        """The ids of the jobs a deferred job still waits for. Cost: a range read."""
        return tuple(
            self.before.unpack(bytes(kv.key))[1].hex()
            for kv in reader.get_range(*self._before_range(job_id))
        )

    def _before_range(self, job_id: bytes) -> tuple[bytes, bytes]:
        edges = self.before.range((job_id,))
        return edges.start, edges.stop

    def _parent_ended(self, tr: Any, parent: bytes, state: str) -> None:
        """The job ``parent``, which jobs wait for, ended in ``state`` in ``tr``: each job
        waiting for it no longer does; one that waits for nothing more is enqueued
        (``waiting``: :attr:`release`), once, in this transaction; after a ``dead`` or
        ``cancelled`` parent, each is ``cancelled`` (and so are the jobs that wait for it).
        Cost: a range read of its edges (a read conflict), then, for every job waiting for
        it at once (one round trip), a point read of its record and of its kept item and a
        range read of its other edges."""
        edges = self.after.range((parent,))
        children = []
        for edge in list(tr.get_range(edges.start, edges.stop)):
            child = self.after.unpack(bytes(edge.key))[1]
            del tr[edge.key]
            del tr[self.before.pack((child, parent))]
            children.append(child)
        reads = [  # issued together, after the clears (the edge range reads see them)
            (
                child,
                self.read(tr, child),
                tr.get_range(*self._before_range(child), limit=1),
                tr.get(self.deferred.pack((child,))),
            )
            for child in children
        ]
        for child, record_read, others, stored in reads:
            record = self.parsed(record_read)
            if record is None or record.state != "deferred":
                continue
            if state != "succeeded":
                reason = f"job {parent.hex()} it waited for ended {state}"
                self._drop_deferred(tr, child, record, reason)
                continue
            if list(others):
                continue  # another parent has not succeeded yet
            del tr[self.deferred.pack((child,))]
            record.state = "waiting"
            tr[self.key(child)] = record.pack()
            if stored.present() and self.release is not None:
                self.release(tr, child, bytes(stored), record.group, record.priority)

    def _drop_deferred(self, tr: Any, job_id: bytes, record: JobRecord, reason: str | None) -> None:
        """End the deferred job ``job_id`` ``cancelled`` in ``tr`` (``reason``: its error,
        None for a cancel): its edges and its kept item cleared, the jobs waiting for it
        cancelled in turn (:meth:`finish`)."""
        for edge in list(tr.get_range(*self._before_range(job_id))):
            parent = self.before.unpack(bytes(edge.key))[1]
            del tr[edge.key]
            del tr[self.after.pack((parent, job_id))]
        del tr[self.deferred.pack((job_id,))]
        self.finish(tr, job_id, "cancelled", record, error=reason)

    # -- storage bound ---------------------------------------------------------------------

    def sweep(self, tr: Any, now: int, limit: int = SWEEP_LIMIT) -> int:
        """Clear, in ``tr``, up to ``limit`` finished jobs whose ``result_ttl`` passed at
        ``now`` (microseconds) since their latest finish: record, result and TTL entry.
        Returns how many. A read conflict on each entry cleared: a job requeued or finished
        again meanwhile (which clears its old entry, :meth:`_unfinish`) makes one of the two
        transactions retry, so a record is never cleared for a finish it no longer has.
        Cost: a snapshot range read, a conflict key and three blind clears per job."""
        horizon = now - round(self.result_ttl * _MICROSECONDS)
        by_finish = self.finished.range().start, self.finished.pack((horizon,))
        by_expiry = self.expiring.range().start, self.expiring.pack((now,))
        cleared = 0
        for entries, (begin, end) in ((self.finished, by_finish), (self.expiring, by_expiry)):
            expired = list(tr.snapshot.get_range(begin, end, limit=limit - cleared))
            for entry in expired:
                _when, job_id = entries.unpack(bytes(entry.key))
                tr.add_read_conflict_key(entry.key)
                del tr[entry.key]
                del tr[self.key(job_id)]
                del tr[self.result_key(job_id)]
                del tr[self.location_key(job_id)]
            cleared += len(expired)
            if cleared >= limit:
                break
        return cleared

    def clear_expired(self, run: Any) -> int:
        """Clear every finished job whose ``result_ttl`` passed, :data:`SWEEP_LIMIT` at a
        time, each batch in a transaction run by ``run`` (``run(body)``: a retry loop);
        returns how many."""
        cleared = 0
        while True:
            batch: int = run(lambda tr: self.sweep(tr, _now()))
            cleared += batch
            if batch < SWEEP_LIMIT:
                return cleared
