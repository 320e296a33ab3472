"""What every queue type shares: :class:`QueueBase`, the one base of :class:`~fdbqueue.Queue`
and :class:`~fdbqueue.PriorityQueue`.

A queue is a facade over its shards (:class:`~fdbqueue._queues.shard.Shard`, one for the
default layout) and one :class:`~fdbqueue._queues.router.Router` that chooses the shard each
operation acts on. Every method has the same shape: check the arguments, let the router choose,
call the shard (or the end over every shard). What looks at the whole queue (``size``,
``empty``, ``peek_many``, ``leases``, ``dead_letters``, ``info``, ``clear``, ...) gathers over
the shards, a gather of one for a queue of one shard. The queue types add their writes
(``enqueue`` or ``push``) and takes (``dequeue`` or ``pop``), which differ in their arguments.

Source followed: FoundationDB's "Queues" recipe; ``fdb/directory_impl.py`` for the layer's
conventions (``tr`` first, ``@transactional``); Amazon SQS's dead-letter queues and message
queues' visibility timeouts for the leases (:doc:`guarantees`).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from fdb.subspace_impl import Subspace

from fdbqueue import worker
from fdbqueue._checks import check_count, check_error
from fdbqueue._delivery.deduplication import Deduplication
from fdbqueue._delivery.leases import Lease, check_lease_seconds
from fdbqueue._delivery.rate_limit import RateLimit, holding
from fdbqueue._delivery.schedules import (
    ScheduleInfo,
    Schedules,
    check_name,
    check_timing,
)
from fdbqueue._delivery.settling import WorkSummary
from fdbqueue._delivery.workers import WorkerInfo, WorkerRegistry
from fdbqueue._queues.options import (
    PAGE_SIZE,
    QUEUE_DEFAULTS,
    QueueOptions,
    check_limit,
    check_options,
    check_queue_arguments,
    read_pages,
)
from fdbqueue._queues.router import Router, check_shards
from fdbqueue._queues.shard import Shard
from fdbqueue._storage.dead_letters import DeadLetter
from fdbqueue._storage.features import JOBS
from fdbqueue._storage.groups import Group, check_weight
from fdbqueue._storage.job_records import STATES, JobOptions, wrap
from fdbqueue._storage.jobs import (
    Job,
    JobInfo,
    Jobs,
    ResultFormat,
    Submission,
    check_job_id,
    new_job_id,
    parent_ids,
)
from fdbqueue._storage.queue_info import QueueInfo
from fdbqueue._storage.store import ItemStore
from fdbqueue._transactions.transactional import (
    TransactionContext,
    check_context,
    check_writable,
    is_database,
    require_writable,
    run_in_retry_loop,
    transactional,
)
from fdbqueue._transactions.waiting import check_blocking_arguments
from fdbqueue._wording import name_methods_after
from fdbqueue.codecs import Codec, TaggedCodec, Undecodable

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "PAGE_SIZE",
    "QUEUE_DEFAULTS",
    "QueueBase",
    "QueueOptions",
    "check_limit",
    "check_queue_arguments",
]  # (the options and checks live in fdbqueue._queues.options, whose names these are)

T = TypeVar("T")
Opt = JobOptions | None  # a job's own settings (submit's), None: the queue's and the worker's
V = TypeVar("V")  # the value type of a lease given to QueueBase.extend (and of the one returned)
R = TypeVar("R")


#: Seconds between two clearings of finished jobs by a worker loop (:meth:`QueueBase.maintain`).
JOB_CLEARING_SECONDS = 60.0


class QueueBase(Generic[T]):
    """What :class:`~fdbqueue.Queue` and :class:`~fdbqueue.PriorityQueue` share (see the
    module docstring). Its constructor checks the arguments every queue type takes
    (:class:`QueueOptions`; :class:`~fdbqueue.Queue` documents them) and builds the shards."""

    #: The kind of shard the queue type is made of.
    _SHARD_CLASS: ClassVar[type[Shard]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Name the inherited public methods after the queue type (``Queue.ack``), so that
        Python's TypeErrors for a wrong call name the public class
        (:func:`~fdbqueue._wording.name_methods_after`)."""
        super().__init_subclass__(**kwargs)
        name_methods_after(cls)

    def __init__(
        self, subspace: Any, codec: str | Codec[Any], **options: Unpack[QueueOptions]
    ) -> None:
        """Check ``options`` (each left out takes its :data:`QUEUE_DEFAULTS` value) and
        build the shards; raise TypeError or ValueError first, reading and writing nothing."""
        given = check_options(options, f"{type(self).__name__}.__init__")
        self._time_limit, rate_limit = given.time_limit, given.rate_limit
        self._high_contention, self._max_deliveries = given.high_contention, given.max_deliveries
        self._router = Router.build(
            self._SHARD_CLASS,
            subspace,
            codec,
            given.exactly_once,
            check_shards(given.shards),
            high_contention=given.high_contention,
            abandon_after=given.abandon_after,
            max_deliveries=given.max_deliveries,
        )
        self._store: ItemStore = self._router.root
        #: The queue's deduplication records, schedules and job records: one of each for all
        #: its shards, in its own store's metadata (an id is the queue's, whatever its shard).
        self._deduplication = Deduplication(self._store, given.dedup_window)
        self._schedules = Schedules(self._store)
        self._jobs: Jobs = self._store.jobs
        self._jobs.result_ttl = given.result_ttl
        #: How its results are read: by the result codec; those an older fdbqueue kept (record
        #: version 1), by the result codec given (unless tagged: it had none), else the queue's.
        result_codec = given.result_codec
        legacy = self._store.codec if isinstance(result_codec, TaggedCodec) else result_codec
        self._results = ResultFormat(result_codec, legacy)
        self._next_job_clearing = 0.0  # time.monotonic() of maintain's next clearing
        #: The records of the worker loops working on the queue (:meth:`workers`).
        self._worker_registry = WorkerRegistry(metadata := self._store.metadata)
        #: The start slots of its rate limit, which worker loops take (None: no limit).
        self.start_slots = rate_limit and RateLimit(metadata, *rate_limit, self._store.features)
        self._jobs.release = self._put_item

    # -- properties -------------------------------------------------------------------------

    @property
    def high_contention(self) -> bool:
        """Whether takes and claims given a Database take in line (:doc:`high-contention`)."""
        return self._high_contention

    @property
    def subspace(self) -> Subspace:
        """The Subspace whose ``range()`` holds the items (of every shard)."""
        return self._store.subspace

    @property
    def codec(self) -> Codec[T]:
        """The codec that encodes and decodes values."""
        return self._store.codec

    @property
    def result_codec(self) -> Codec[Any]:
        """The codec of job results (``result_codec=``; default: a ``TaggedCodec``)."""
        return self._results.codec

    @property
    def shards(self) -> int:
        """The number of shards the queue was opened with (``shards=``; 1: unsharded)."""
        return len(self._router)

    @property
    def max_deliveries(self) -> int | None:
        """Deliveries after which an item (its leases expired or released) is a dead letter."""
        return self._max_deliveries

    @property
    def rate_limit(self) -> tuple[int, float] | None:
        """``(jobs, seconds)``: at most so many jobs start in such a window (:doc:`jobs`)."""
        slots = self.start_slots
        return None if slots is None else (slots.jobs, slots.seconds)

    @property
    def time_limit(self) -> float | None:
        """Seconds a handler of :meth:`work` may run on a job, unless ``work`` says (None: no
        limit)."""
        return self._time_limit

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._store.subspace!r}, codec={self._store.codec!r})"

    # -- writing (what enqueue, enqueue_many and push share) ---------------------------------

    def _write(
        self,
        tr: TransactionContext,
        runs: list[tuple[Shard, list[bytes]]],
        where: tuple[Any, ...],
        delay: float,
        ids: list[bytes] | None,
        job: Submission | None = None,
    ) -> list[bool]:
        """:meth:`Shard.write` of ``runs`` (encoded values, each run into its shard), by the
        first run's shard, at ``where`` (``()``, a priority, a group), ``delay`` seconds
        ahead; with ``ids``, the values the deduplication records admit; with ``job``, the one
        value's job. Per value (runs in order), whether it was written."""
        dedup = None if ids is None else (self._deduplication, ids)
        admitted: list[bool] = runs[0][0].write(tr, runs, where, delay, dedup, job)
        return admitted

    # -- jobs (fdbqueue._storage.jobs) -------------------------------------------------------

    def _submission(self, group: Group | None, priority: int | None, options: Opt) -> Submission:
        """A new job of this queue (its id chosen now, before any transaction)."""
        return Submission(self._jobs, new_job_id(self._jobs.tag), group, priority, options)

    def _submit_after(self, tr: TransactionContext, value: T, job: Submission, after: Any) -> Job:
        """:meth:`submit` with ``after`` (:meth:`~fdbqueue._storage.jobs.Jobs.submitted_after`)."""
        parents, stored = parent_ids(after, self._jobs.tag), self._stored(value, job)
        self._in_transaction(tr, lambda inner: job.submit_after(inner, stored, parents), bool)
        return Job(job.id.hex())

    def _put_item(self, tr: Any, _job: bytes, stored: bytes, group: Any, priority: Any) -> None:
        """Enqueue a job's ``stored`` item where its group and priority put (``Jobs.release``)."""
        shard, where = self._place(group, priority)
        shard.put(tr, [stored], where, 0.0, JOBS)

    def _place(self, group: Group | None, priority: int | None) -> tuple[Shard, tuple[Any, ...]]:
        """The shard and the ``where`` (:meth:`Shard.append`) of an item of ``group``."""
        raise NotImplementedError

    def _stored(self, value: T, job: Submission | None) -> bytes:
        """``value`` encoded and checked as an item's (:meth:`ItemStore.encode`), with the
        job header of ``job`` when given (:func:`~fdbqueue._storage.job_records.wrap`)."""
        encoded = self._store.encode(value)
        return encoded if job is None else wrap(job.id, encoded)

    def _encode_result(self, result: object, job_id: str | None = None) -> bytes:
        """What the result key of the job ``job_id`` holds for a handler's ``result``
        (:meth:`~fdbqueue._storage.jobs.ResultFormat.stored`): the result codec's bytes, or
        why it cannot be kept (:meth:`result` raises it as ResultNotKeptError; logged)."""
        stored, reason = self._results.stored(result)
        if reason is not None:
            worker.logger.warning("fdbqueue: job %s succeeded, but %s", job_id, reason)
        return stored

    @transactional
    def job(self, tr: TransactionContext, job_id: str) -> JobInfo | None:
        """What is known of the job ``job_id`` (:meth:`submit`'s :attr:`Job.id`): its state,
        deliveries, times, last error and result (:class:`~fdbqueue.JobInfo`); None when
        there is no such job (never submitted, its transaction never committed, or its
        record was cleared ``result_ttl`` seconds after it finished).

        Raises:
            TypeError: ``job_id`` is not a str.
            ValueError: it is not 32 hexadecimal digits, or it is another queue's job.

        Cost: two point reads issued together (snapshot: no conflict).
        """
        raw = check_job_id(job_id, self._jobs.tag)
        reader: Any = getattr(tr, "snapshot", tr)
        return self._jobs.info(reader, raw, self._results)

    @transactional
    def jobs(
        self, tr: TransactionContext, *, state: str | None = None, limit: int = 100
    ) -> list[JobInfo]:
        """Up to ``limit`` jobs of the queue known now (submitted, and not yet cleared
        ``result_ttl`` seconds after they finished), in id order; with ``state``, only those
        in that state (one of :data:`~fdbqueue._storage.job_records.STATES`).

        Raises:
            TypeError, ValueError: a bad ``state`` or ``limit`` (an int >= 0); nothing is read.

        Cost: snapshot range reads of the job records (no conflicts) until ``limit`` jobs
        are found or every record was read (a state few jobs are in reads them all), and a
        point read per job listed.
        """
        if state is not None and state not in STATES:
            raise ValueError(f"state must be one of {', '.join(STATES)}, not {state!r}")
        check_count(limit, "limit")
        reader: Any = getattr(tr, "snapshot", tr)
        return self._jobs.listing(reader, self._results, state, limit)

    def result(self, database: Any, job_id: str, *, timeout: float | None = None) -> Any:
        """Wait until the job ``job_id`` ends and return its result (what the worker's
        handler returned, decoded by the result codec; None when the handler returned None,
        or the job succeeded without a handler: a plain take, an ``ack`` without a result).

        It waits on a FoundationDB watch of the job's record (no polling), so it returns as
        soon as the job's final state commits.

        Args:
            database: a Database or Tenant (waiting needs transactions of its own).
            timeout: seconds to wait at most (None: no limit).

        Raises:
            JobFailedError: the job ended dead (its error attached) or cancelled.
            ResultNotKeptError: the job succeeded, but its result could not be kept (the
                result codec cannot encode it, or it is larger than a value): ``reason``
                says why.
            TimeoutError: ``timeout`` seconds passed first.
            TypeError, ValueError: a bad ``job_id`` (as :meth:`job`) or ``timeout``, or
                ``database`` is a Transaction.
            KeyError: no such job (never submitted, or cleared after ``result_ttl``).

        Cost: per look, a read-only transaction of two point reads; while waiting, one watch.
        """
        raw = check_job_id(job_id, self._jobs.tag)
        seconds = check_blocking_arguments(database, True, timeout, "result()", "the job's end")

        info = self._jobs.wait_finished(database, raw, self._results, seconds)
        if info is None:
            raise TimeoutError(f"job {job_id} did not finish within {timeout} s")
        return info.outcome()

    def cancel(self, tr: TransactionContext, job_id: str) -> bool:
        """Cancel the job ``job_id``: a waiting, delayed or retrying job never reaches a
        handler (True); a running one is not retried once it ends (True); a finished or
        unknown one: False.

        A waiting, delayed or retrying job's item is removed in this transaction, wherever it
        waits (the queue, a message group, the delayed items, the lease a release gave it
        back in): :meth:`size`, :meth:`empty`, :meth:`peek` and :meth:`oldest_age` stop
        counting it at once. The next item of a group whose item is in flight is dropped by
        the take or claim that meets it instead (:doc:`jobs`).

        Raises:
            TypeError, ValueError: a bad ``job_id`` (as :meth:`job`), or ``tr`` has the
                wrong type; nothing changes.

        Given a Database, it takes effect exactly once (:doc:`guarantees`): a commit whose
        outcome was unknown (1021) and that was applied answers what it did, True. Cost: two
        point reads issued together (the record and where its item is: read conflicts, so a
        take or claim of the job at the same time makes one of them retry), a point read of
        the item and its clear and atomic add (a group's first item: its turn's reads and
        writes too), and three sets or clears.
        """
        raw = check_job_id(job_id, self._jobs.tag)
        check_writable(tr, f"{type(self).__name__}.cancel()", "cancel")
        return self._in_transaction(
            tr, lambda inner: self._jobs.cancel(inner, raw, self._router.withdraw), wrote=bool
        )

    def maintain(self, database: Any) -> None:
        """What a worker loop does every second besides its jobs (both loops call it):
        enqueue the runs of schedules that fell due (:meth:`enqueue_due_runs`) and, at most
        once a minute per queue object, clear the jobs finished more than ``result_ttl``
        seconds ago (:meth:`clear_finished_jobs`).

        Raises FDBError for what a retry loop does not absorb (the loops log it, and try again
        a second later). Cost: those two calls'.
        """
        self.enqueue_due_runs(database)
        now = time.monotonic()
        if now >= self._next_job_clearing:
            self._next_job_clearing = now + JOB_CLEARING_SECONDS
            self.clear_finished_jobs(database)

    def clear_finished_jobs(self, database: Any) -> int:
        """Clear the records and results of every job that finished more than ``result_ttl``
        seconds ago, in transactions of their own; return how many (the worker loops call it
        once a minute: :meth:`maintain`; finishing jobs clear up to 100 a second too). Cost:
        per 100 jobs, a transaction with a snapshot range read and three clears each."""
        return self._jobs.clear_expired(lambda body: run_in_retry_loop(database, body))

    # -- looking at the whole queue ---------------------------------------------------------

    @transactional
    def empty(self, tr: TransactionContext) -> bool:
        """Return True when no item waits: the queue's item range is empty, no message
        group has an item to take (a turn), no lease has expired or was released (due), and
        no delayed item is due: exactly when the next take would find nothing (but for the
        few cancelled jobs' items a cancel leaves to the takes, :meth:`cancel`: a take drops
        them and finds nothing).

        Exact, whatever wrote the items. Items away from the queue are not counted: items
        in leases still held, the next items of a group whose item is in flight, delayed
        items not due yet, and dead letters. Raises QueueTypeError when the queue records
        another type, number of shards or codec. Cost: per shard a range read (``limit=1``)
        whose read conflict range covers the start of the shard up to just past its first
        item (the whole item range when empty), and when empty one of the groups' turns
        (``limit=1``, read conflict); when every shard's are empty, per shard the snapshot
        range reads of :meth:`size`'s waiting leases and due delayed items; the type
        records' two snapshot point reads until they were once found right.
        """
        self._router.check_type(tr)
        return self._router.empty(tr)

    @transactional
    def size(self, tr: TransactionContext) -> int:
        """Return the number of items waiting: every item a take may take now.

        An item waits when it is ready in the queue, when its lease expired or it was
        released (its delay, if any, over), or when it was delayed and fell due (the next
        take promotes it); items in leases still held, delayed items not due yet and dead
        letters are not counted (:meth:`info` counts those). The ready items come from a
        counter that enqueue/push and dequeue/pop keep with atomic adds, so keeping it adds
        no conflicts; it is exact for items that fdbqueue wrote and removed; items written
        or removed by other code (such as FoundationDB's recipes) are not counted, and the
        result is never below 0. Use :meth:`empty` for an exact emptiness test. Raises
        QueueTypeError when the queue records another type, number of shards or codec.

        Cost: one point read per shard (issued together; one for the default layout), per
        shard a snapshot range read of the leases expired by their versions and one of the
        delayed records due (usually empty), and the type records' two snapshot point reads
        until they were once found right. Inside your own transaction the counter's read
        adds a read conflict on it, so your transaction conflicts with any enqueue or
        dequeue that commits first; pass ``tr.snapshot`` to read the size without that
        conflict.
        """
        self._router.check_type(tr)
        return self._router.size(tr)

    def peek_many(self, tr: TransactionContext, n: int | None) -> list[T]:
        """Return up to ``n`` values from the front (None: every item), in key order, without
        removing them: a Queue's next ``n`` items, a PriorityQueue's next ``n`` of
        :meth:`pop_min`; then the items of message groups: a Queue's in the order takes
        serve them (the groups in turn, a1 b1 c1 a2 ..., then the groups in flight, whose
        next items wait for a lease's end: :doc:`groups`), a PriorityQueue's group by group,
        in key order. On a queue of several shards, a PriorityQueue's shards merged by
        priority, then count (the next ``n`` of ``pop_min`` over every shard); a Queue's
        shard after shard (shard 0 first), each in its order: its shards number their items
        apart, so no order holds across them (:doc:`sharding`).

        Poison items (values the codec cannot decode) are skipped, as a take would move them
        to the dead letters.

        Given a Database, it reads pages of at most :data:`PAGE_SIZE` items, each in a
        transaction of its own, each going on after the last key the one before read: with
        ``n`` up to :data:`PAGE_SIZE`, one transaction; with more (or None), the pages are read
        at different read versions, so items taken or added meanwhile may be missed or
        listed. Given a Transaction, every page is read in it (one read version; a large
        queue may then pass FoundationDB's five-second transaction limit).

        Raises:
            TypeError, ValueError: ``n`` is not an int >= 0 or None.
            ValueError: a key among them is not one of this queue's items.
            QueueTypeError: the queue records another type, number of shards or codec.

        Cost: one snapshot range read per page (``limit`` the values still wanted, at most
        :data:`PAGE_SIZE`), more only past poison items; no conflicts.
        """
        return [value for _shard, _key, value in self._peeked(tr, n)]

    def _peeked(self, tr: TransactionContext, n: int | None) -> list[tuple[Shard, bytes, T]]:
        """:meth:`peek_many`'s items, each as ``(shard, key, value)``: its shard and key
        (where a PriorityQueue finds its priority). Raises and costs as :meth:`peek_many`."""
        return self._router.peeked(tr, check_limit(n, "n"))

    @transactional
    def requests_in_line(self, tr: TransactionContext, limit: int = 10_000) -> int:
        """Return how many requests of consumer sessions wait in line, at every end of the
        queue (at most ``limit``): places reserved by prefetch and takes waiting for an item
        (:doc:`high-contention`).

        Raises:
            TypeError, ValueError: ``limit`` is not an int >= 0.
            QueueTypeError: the queue records another type, number of shards or codec.

        Cost: one snapshot range read of up to ``limit`` keys per shard; no conflicts.
        """
        check_count(limit, "limit")
        self._router.check_type(tr)
        return self._router.summed(limit, lambda shard, left: shard.requests_in_line(tr, left or 0))

    def leases(
        self, tr: TransactionContext, limit: int | None = 100
    ) -> list[Lease[T | Undecodable]]:
        """Return up to ``limit`` leases in flight (None: all of them), soonest expiry first
        (expired and released leases whose items wait for the next claim included; on a
        queue of several shards, every shard's merged by expiry). A value the codec cannot
        decode shows as an :class:`~fdbqueue.Undecodable`.

        The default, 100, is for a look: more leases may exist (:meth:`info` counts them).
        Given a Database, it reads pages of at most 1,000 leases, each in a transaction of
        its own, each going on after the last lease key the one before read: with ``limit``
        up to that, one transaction; with more (or None), pages are read at different read
        versions, so a lease extended, released or redelivered meanwhile (which moves its
        key) may be listed twice or missed. Given a Transaction, every page is read in it.

        Raises:
            TypeError, ValueError: ``limit`` is not an int >= 0 or None.
            QueueTypeError: the queue records another type, number of shards or codec.

        Cost per page: one snapshot range read and a snapshot point read per lease (issued
        together); no conflicts.
        """
        wanted = check_limit(limit)
        return self._router.merged(
            wanted,
            lambda shard, left: read_pages(tr, left, self._router.checked(shard.leases_page)),
            Shard.lease_rank,
        )

    @transactional
    def info(self, tr: TransactionContext) -> QueueInfo:
        """Return figures about the queue (:class:`~fdbqueue.QueueInfo`): the size
        counter, the front value, the age of the oldest item (``oldest_age``, seconds: an
        upper bound, see :class:`~fdbqueue.QueueInfo`), requests in line, leases in flight
        and expired, dead letters, delayed items and message groups, all read at one read
        version; for a queue of several shards, their sums (``oldest_age``: the largest),
        each shard's own in ``shards``, and as ``oldest`` the value this thread's next take
        returns (what :meth:`peek` shows, read as it reads).

        Given a Database, one transaction; given a Transaction, read in it. Every read is a
        snapshot read (no conflicts), but a queue of several shards' ``oldest``, read as
        :meth:`peek` reads it (a read conflict range on one shard's front).

        Raises:
            ValueError: the front key is not one of this queue's items (the subspace holds
                something else).
            QueueTypeError: the queue records another type, number of shards or codec.

        Cost: a read version, a point read of the paused key, and per shard a point read (the
        size), a range read of the front item, and range reads that count every request in
        line, lease record, dead letter record, delayed record and group's turn (10,000 keys
        each; held values are not read), and for ``oldest_age`` what :meth:`oldest_age` reads
        (the ``began`` and ``began_grouped`` records: one per 5-second slot and bucket of 64
        positions of the waiting items); with a ``rate_limit``, a range read of its last
        start slots. The counts are exact and uncapped, so the cost grows with those records,
        and FoundationDB's five-second transaction limit bounds how many one call can count
        (then it raises error 1007, ``transaction_too_old``).
        """
        context: Any = tr
        self._router.check_type(context)
        read_version: int = context.get_read_version().wait()
        each = [shard.info(context, read_version) for shard in self._router.shards]
        held = holding(self.start_slots, self._store.metadata, self._store.features.known, context)
        if len(each) == 1:  # QueueInfo.shards is empty for a queue of one shard
            return dataclasses.replace(each[0], rate_limited=held)
        return QueueInfo.over_shards(each, self._oldest(context), read_version, held)

    @transactional
    def oldest_age(self, tr: TransactionContext) -> float | None:
        """Return how many seconds the oldest item has waited, or None when no item waits:
        ``info(tr).oldest_age`` without the other figures (see :class:`~fdbqueue.QueueInfo`
        for its accuracy: an upper bound, too large by less than 5 seconds at any rate of
        enqueues, plus clock skew between clients).

        Given a Database, one read-only transaction; given a Transaction, read in it with
        snapshot reads (no conflicts).

        Raises:
            ValueError: a key in the queue's subspace is not one of its items.

        Cost: per shard, for a Queue a range read of its first item and a reverse range read
        of the ``began`` records of its bucket (one per 5-second slot in which the bucket
        received items: at most 64); for a PriorityQueue first a range read of the records
        (one per slot and bucket of waiting items, and per priority in use), then the same
        for the priority whose records began first (more priorities when some emptied); the
        same again for the groups' ``began_grouped`` records; no writes.
        """
        waited = [
            age
            for age in (shard.oldest_age(tr) for shard in self._router.shards)
            if age is not None
        ]
        return max(waited) if waited else None

    def _oldest(self, tr: Any) -> Any:
        """``info().oldest`` of a queue of several shards: the value this thread's next take
        returns (a Queue's ``dequeue``, a PriorityQueue's ``pop_min``), as ``peek`` shows it."""
        raise NotImplementedError

    def clear(self, tr: TransactionContext) -> None:
        """Remove every item, the counters, leases, dead letters and the lines of requests
        of consumer sessions (a session whose requests it removed registers again).

        The receipts stay (:doc:`guarantees`: they expire by themselves), so an
        operation in flight during a clear still takes effect exactly once: it happened before
        the clear, or after it. Prefer this to ``clear_range_startswith(prefix)``, which also
        removes the receipts. Given a Database it takes effect exactly once too, so a clear
        whose commit timed out (1031) cannot land later and remove items enqueued after it.
        Cost: a few range clears per shard; no reads, so it never conflicts, but concurrent
        consumers that read the cleared items do.
        """
        self._router.clear(tr)

    # -- pausing consumers (fdbqueue._storage.pause) ------------------------------------------

    def pause(self, tr: TransactionContext) -> bool:
        """Pause the queue's consumers: until :meth:`resume`, every take and claim finds
        nothing and writes nothing (``dequeue``, ``pop_min``/``pop_max`` and their ``_many``
        forms, ``claim`` and ``claim_many``, consumer sessions, with or without prefetch, the
        worker loop's claims, on every shard), and blocking ones wait. Producers go on
        (``enqueue``, ``push``, schedules); peeks, ``size``, ``info`` and the lease verbs
        (``ack``, ``release``, ``extend``) are not affected: leases held stay held.

        Args:
            tr: a Database, Tenant or Transaction.

        Returns:
            True when it paused the queue; False when it was paused already (nothing is
            written then).

        Raises:
            TypeError: ``tr`` has the wrong type (or is a snapshot view).
            QueueTypeError: the queue records another type, number of shards or codec.

        A take reads the paused key with a snapshot read (no conflict), so the pause holds
        for the takes whose read version is after its commit: a take that read before may
        still commit (one transaction's worth). The pause outlives :meth:`clear`. Given a
        Database, it takes effect exactly once (:doc:`guarantees`). Cost: the type records'
        check (none once found right), one point read of ``("paused",)`` in the queue's
        metadata (a read conflict on it: concurrent pauses and resumes serialize) and one set;
        every take and claim reads that key once more (:doc:`concepts`, "Pausing consumers").
        """
        return self._set_paused(tr, True, "pause")

    def resume(self, tr: TransactionContext) -> bool:
        """Let the consumers of a paused queue (:meth:`pause`) take again, and wake the
        blocked ones (it bumps the queue's signal keys: their watches fire).

        Args:
            tr: a Database, Tenant or Transaction.

        Returns:
            True when it resumed the queue; False when it was not paused (nothing written).

        Raises:
            TypeError: ``tr`` has the wrong type (or is a snapshot view).
            QueueTypeError: the queue records another type, number of shards or codec.

        Given a Database, it takes effect exactly once (:doc:`guarantees`). Cost: one point
        read of the paused key (a read conflict on it), a clear and one atomic add per shard
        (its signal key: no conflict).
        """
        return self._set_paused(tr, False, "resume")

    @transactional
    def is_paused(self, tr: TransactionContext) -> bool:
        """Whether the queue's consumers are paused (:meth:`pause`, until :meth:`resume`):
        every take and claim then finds nothing. :attr:`QueueInfo.paused
        <fdbqueue.QueueInfo>` tells the same, with every other figure.

        Args:
            tr: a Database, Tenant or Transaction.

        Raises:
            TypeError: ``tr`` has the wrong type.
            QueueTypeError: the queue records another type, number of shards or codec.

        Cost: the type records' check (none once found right) and one snapshot point read of
        the paused key (no conflict).
        """
        self._router.check_type(tr)
        pause = self._store.pause
        return pause.holds(pause.look(tr))

    def _set_paused(self, tr: TransactionContext, paused: bool, verb: str) -> bool:
        """:meth:`pause` (``paused``) or :meth:`resume`, named ``verb`` in errors."""
        check_writable(tr, f"{type(self).__name__}.{verb}()", verb)

        def body(inner: Any) -> bool:
            self._router.check_type(inner)
            return self._store.pause.set(inner, paused, self._router.signal)

        return self._in_transaction(tr, body, wrote=bool)

    # -- dead letters -----------------------------------------------------------------------

    def dead_letters(
        self,
        tr: TransactionContext,
        limit: int | None = 100,
        *,
        after: DeadLetter[Any] | None = None,
    ) -> list[DeadLetter[T | Undecodable]]:
        """Return up to ``limit`` dead letters (None: all of them), oldest first (on a queue
        of several shards, every shard's merged by age), those younger than ``after`` only
        when it is given (a dead letter this method listed before, requeued or purged since
        or not: the next page of a listing, read without reading the pages before it): items
        whose leases expired
        ``max_deliveries`` times, and poison items whose values the codec cannot decode
        (their ``value`` is an :class:`~fdbqueue.Undecodable` and ``reason`` says why).

        The default, 100, is for a look: more dead letters may exist (:meth:`info` counts
        them). Given a Database, it reads pages of at most 1,000 dead letters, each in a
        transaction of its own, each going on after the last record key the one before read:
        with ``limit`` up to that, one transaction; with more (or None), pages are read at
        different read versions, so dead letters requeued or purged meanwhile may still be
        listed, and new ones (which sort last) may be listed too. Given a Transaction, every
        page is read in it.

        Raises:
            TypeError, ValueError: ``limit`` is not an int >= 0 or None.
            ValueError: ``after`` is not a dead letter of this queue.
            QueueTypeError: the queue records another type, number of shards or codec.

        Cost per page: one range read and a point read per dead letter (issued together).
        """
        return self._router.dead_letters(tr, check_limit(limit), after)

    def purge_dead_letters(self, tr: TransactionContext, limit: int | None = None) -> int:
        """Remove up to ``limit`` dead letters (None: all of them), oldest first (over every
        shard), with their held values, for good. Returns how many.

        Given a Database, it runs a transaction per 1,000 dead letters, each taking effect
        exactly once (:doc:`guarantees`), until ``limit`` are removed or none is left; dead
        letters added meanwhile (they sort last) may be removed too. Given a Transaction, it
        removes them all in it (a page at a time), and commits nothing.

        Raises:
            TypeError, ValueError: ``limit`` is not an int >= 0 or None.

        Cost per page: one range read of the dead letter records (a read conflict on what it
        read, so a concurrent requeue or purge of the same dead letters makes one of them
        retry) and two clears per dead letter; the held values are not read.
        """
        wanted = check_limit(limit)
        self._router.check_type(tr)
        return self._router.purge_dead_letters(tr, wanted)

    def requeue_dead_letters(self, tr: TransactionContext, limit: int = 1000) -> int:
        """Enqueue up to ``limit`` dead letters again, oldest first (over every shard), as new
        items at the back of the queue (of their priority, for a PriorityQueue; of their
        group, for a group's item), with their stored bytes unchanged; their delivery counts
        start again, and a job's record says ``waiting`` again (its ``result_ttl`` counts
        from its next finish). Returns how many.

        Given a Database, it runs as many transactions as the bytes need (each holds at most
        about 5,000,000 bytes of values, and each takes effect exactly once). Given a
        Transaction, it requeues what fits in that budget (per shard) and returns how many it
        did.

        Raises:
            TypeError, ValueError: ``limit`` is not an int >= 0.

        Cost per transaction: one range read, a point read per dead letter; per item two
        clears and an enqueue's snapshot read, set and two atomic adds (a job's: also a point
        read of its record, a set and a clear); per shard one atomic add (the enqueue
        counter: a requeued item counts as enqueued, :attr:`~fdbqueue.QueueInfo.enqueued`).
        """
        check_count(limit, "limit")
        return self._router.requeue_dead_letters(tr, limit)

    def requeue_dead_letter(self, tr: TransactionContext, letter: DeadLetter[Any]) -> bool:
        """Enqueue one dead letter (as :meth:`dead_letters` listed it) again, as a new item at
        the back of the queue (of its priority; of its group), with its stored bytes
        unchanged, as :meth:`requeue_dead_letters` does for the oldest; a job's is
        ``waiting`` again (:doc:`jobs`).

        Args:
            tr: a Database (its own transaction, taking effect exactly once) or a
                Transaction (runs inside it, commits nothing).
            letter: a dead letter of this queue, from :meth:`dead_letters`.

        Returns:
            True; False when that dead letter is gone already (requeued or purged meanwhile).

        Raises:
            ValueError: ``letter`` is not a dead letter of this queue.
            QueueTypeError: the queue records another type, number of shards or codec.

        Cost: two point reads, two clears and an enqueue's snapshot read, set and two atomic
        adds; for a job, a point read of its record, a set and a clear.
        """
        return self._router.shard_of_letter(letter).requeue_dead_letter(tr, letter.key)

    def purge_dead_letter(self, tr: TransactionContext, letter: DeadLetter[Any]) -> bool:
        """Remove one dead letter (as :meth:`dead_letters` listed it) with its held value, for
        good. Arguments, result and ValueError as :meth:`requeue_dead_letter` (the type
        records are not read). Cost: one point read (a read conflict on it) and two clears.
        """
        return self._router.shard_of_letter(letter).purge_dead_letter(tr, letter.key)

    # -- held leases ------------------------------------------------------------------------

    def ack(self, tr: TransactionContext, lease: Lease[Any], *, result: Any = None) -> None:
        """Remove a claimed item for good: its processing is done.

        Args:
            tr: a Database, Tenant or Transaction (then it composes with your own writes,
                for example the results of processing the item).
            lease: what ``claim`` returned.
            result: for a job's item (:attr:`Lease.job_id`), its result, kept for
                ``result_ttl`` seconds (:meth:`result`), encoded by the result codec; one it
                cannot encode, or larger than a value, is not kept: the job records why
                (:attr:`JobInfo.result_error <fdbqueue.JobInfo>`; :meth:`result` raises
                :class:`~fdbqueue.ResultNotKeptError`), and a warning is logged. None keeps
                none. A plain item keeps no result: one given for it is refused.

        Raises:
            TypeError: ``lease`` is not a :class:`Lease`, or ``tr`` has the wrong type.
            ValueError: the lease belongs to another queue, or ``result`` is given for a
                plain item's lease (no :attr:`Lease.job_id`).
            LeaseNotHeldError: acknowledged, released or extended already, or expired and
                claimed again.
            LeaseExpiredError: the lease expired (the item will be delivered again).

        Nothing changes when it raises. Given a Database, it takes effect exactly once even
        when a commit's outcome is unknown (:doc:`guarantees`). Cost: one point
        read (a read conflict on the lease) and two clears; for a job, a point read and two
        sets (its record), one more with a result.
        """
        shard = self._router.for_lease(lease, "ack")  # a Lease from here on
        if result is None:
            encoded = None
        elif lease.job_id is None:
            raise ValueError(
                f"ack got result= for lease {lease.id}, a plain item's (no job_id): only a job "
                "keeps a result; submit the item as a job (queue.submit) to keep one, or ack "
                "without result= (nothing was changed)"
            )
        else:
            encoded = self._encode_result(result, lease.job_id)
        shard.ack(tr, lease, encoded)

    def ack_many(self, tr: TransactionContext, leases: Iterable[Lease[Any]]) -> None:
        """Remove several claimed items for good, in one transaction: all of them, or none.

        Args:
            tr: a Database, Tenant or Transaction (then it composes with your own writes).
            leases: what ``claim`` or ``claim_many`` returned (an iterable of
                :class:`Lease`; empty does nothing and starts no transaction).

        Raises:
            TypeError: ``leases`` is not an iterable of :class:`Lease`, or ``tr`` has the
                wrong type.
            ValueError: a lease belongs to another queue, the same lease is given twice, or
                the batch is too large for one transaction (more than about 15,000 leases).
            LeaseNotHeldError: a lease was acknowledged, released or extended already, or
                expired and was claimed again; the message names it (its id and its index
                in ``leases``).
            LeaseExpiredError: a lease expired (its item will be delivered again); named
                the same way.

        Nothing changes when it raises: every lease is read and checked before anything is
        written, so inside your transaction too no acknowledgement is left half done. Given
        a Database, it takes effect exactly once even when a commit's outcome is unknown
        (:doc:`guarantees`). Cost: one transaction; one point read per lease,
        issued together (each a read conflict on its lease, so an ack and a claim of the same
        expired lease never both win), and two clears per lease.

        Source followed: FoundationDB's developer guide (one transaction for several
        changes that must happen together; reads issued before waiting on them).
        """
        holds = self._router.shards[0].leases.holds
        batch = holds.check_many(leases, "ack_many", self._router.holds_key)
        if batch:
            self._router.ack_many(tr, batch)

    def ack_with(self, database: Any, lease: Lease[Any], body: Callable[[Any], object]) -> None:
        """Run ``body(tr)``, then acknowledge ``lease``, in one transaction of ``database``,
        exactly once (the worker's ``transactional`` mode, :doc:`worker`): what ``body``
        writes and the acknowledgement commit together or not at all. The lease is read and
        checked in the transaction before ``body`` runs: ``body`` never runs for a lease that
        is no longer held (expired, or its item claimed again).

        Raises:
            TypeError, ValueError: as :meth:`ack` for a bad ``lease``.
            LeaseNotHeldError, LeaseExpiredError: as :meth:`ack`, before ``body`` is called.
            Exception: what ``body`` raises; nothing commits then.

        Cost: ``body``'s reads and writes, and :meth:`ack`'s, in one transaction. For a job's
        item, what ``body`` returns (not None) is kept as its result, as :meth:`ack`'s
        ``result``.
        """
        encode = functools.partial(self._encode_result, job_id=getattr(lease, "job_id", None))
        self._router.for_lease(lease, "ack").ack_with(database, lease, body, encode)

    def release(
        self,
        tr: TransactionContext,
        lease: Lease[Any],
        *,
        delay: float | None = None,
        error: BaseException | None = None,
    ) -> None:
        """Give a claimed item back unprocessed: the next ``claim`` takes it first; with
        ``delay``, not before that many seconds (a retry with backoff).

        Args:
            delay: seconds (at most 12 hours) before the item can be claimed again; None or
                0: at once. Measured with read versions, as leases are.
            error: why (an exception), for a job's item: the job is ``retrying`` and keeps
                it as its last error (None: ``waiting`` again). A job cancelled while it ran
                is not given back: its item is dropped and the job ``cancelled``.

        Raises as :meth:`ack` (and TypeError or ValueError for a bad ``delay``); nothing
        changes when it raises. The delivery count is kept, so releasing counts towards
        ``max_deliveries``. Cost: one point read, one clear, one set.
        """
        plain = delay is None or (type(delay) in (int, float) and delay == 0)
        seconds = 0.0 if plain else check_lease_seconds(delay)
        check_error(error)
        self._router.for_lease(lease, "release").release(tr, lease, seconds, error)

    def dead_letter(
        self,
        tr: TransactionContext,
        lease: Lease[Any],
        reason: str,
        *,
        error: BaseException | None = None,
    ) -> None:
        """Move a claimed item to the dead letters now, with ``reason`` (for instance the
        error its processing raised), instead of releasing it for another delivery. A job's
        item: the job is ``dead``, with ``error`` (else ``reason``) as its last error.

        Raises as :meth:`ack`, and TypeError when ``reason`` is not a str; nothing changes
        when it raises. Cost: one point read, a clear and a set (the value stays where it is
        held).
        """
        if not isinstance(reason, str):
            raise TypeError(f"reason must be a str, not {type(reason).__name__}")
        check_error(error)
        self._router.for_lease(lease, "dead_letter").dead_letter(tr, lease, reason, error)

    def extend(self, tr: TransactionContext, lease: Lease[V], seconds: float) -> Lease[V]:
        """Keep a claimed item longer: its lease now expires ``seconds`` after this call's
        read version (like a visibility-timeout change). Returns the new
        :class:`Lease`; use it from now on (the old one is no longer held, and acking it
        raises LeaseNotHeldError).

        Raises:
            TypeError: ``lease`` is not a :class:`Lease`, ``seconds`` is not a number, or
                ``tr`` has the wrong type.
            ValueError: ``seconds`` out of range, or a lease of another queue.
            LeaseNotHeldError, LeaseExpiredError: as for :meth:`ack`.

        Nothing changes when it raises. Given a Database, it takes effect exactly once.
        Cost: one point read, one clear, one set.
        """
        shard = self._router.for_lease(lease, "extend")
        extended: Lease[V] = shard.extend(tr, lease, check_lease_seconds(seconds))
        return extended

    # -- message groups ---------------------------------------------------------------------

    @transactional
    def set_group_weight(self, tr: TransactionContext, group: Group, weight: int) -> None:
        """Serve ``group`` up to ``weight`` items in a row each turn (1, the default: one),
        from its next turn on; recorded with the queue, it holds for every consumer.

        Args:
            tr: a Database, Tenant or Transaction.
            group: the group (a str, bytes, int or tuple), with items or not yet.
            weight: an int from 1 to :data:`~fdbqueue._storage.groups.MAX_GROUP_WEIGHT`.

        Raises:
            TypeError, ValueError: a bad ``group`` or ``weight``; nothing is written.

        Cost: one set (a clear for 1), no read: no conflicts. Under leases a group still has
        one item in flight; its weight keeps its place in the turns while that item is
        processed, so it is served ``weight`` items in a row all the same.
        """
        checked = check_weight(weight)
        shard = self._router.for_group(group)
        require_writable(tr, "set_group_weight")
        shard.groups.set_weight(tr, group, checked)

    @transactional
    def group_weight(self, tr: TransactionContext, group: Group) -> int:
        """Return ``group``'s weight (1 unless set). Raises TypeError or ValueError for a bad
        ``group``. Cost: a snapshot point read."""
        return int(self._router.for_group(group).groups.weight(tr, group))

    # -- periodic jobs (fdbqueue._delivery.schedules) ----------------------------------------

    def _schedule(
        self,
        tr: TransactionContext,
        name: str,
        value: Any,
        every: float | None,
        cron: str | None,
        group: Group | None,
        priority: int | None,
    ) -> float:
        """``schedule`` for every queue type (its own checks: :meth:`_check_run`); raises and
        costs as :meth:`fdbqueue.Queue.schedule`."""
        checked = check_name(name)
        timing = check_timing(every, cron)
        encoded = self._store.encode(value)
        self._check_run(priority, group)
        packed = self._schedules.record(checked, encoded, timing, priority, group)
        check_writable(tr, f"{type(self).__name__}.schedule()", "schedule")

        def body(inner: Any) -> float:
            self._router.check_type(inner)
            return self._schedules.put(inner, checked, packed)

        return self._in_transaction(tr, body)

    def _check_run(self, priority: int | None, group: Group | None) -> None:
        """Raise TypeError or ValueError when a run with ``priority`` and ``group`` could not
        be written to this queue type (no database access)."""
        raise NotImplementedError

    def _write_run(
        self, tr: Any, encoded: bytes, priority: int | None, group: Group | None
    ) -> object:
        """Enqueue one run of a schedule (``encoded`` by the codec already) in ``tr``, a
        Transaction, as the queue type's :meth:`submit` of it would: each run is a job."""
        raise NotImplementedError

    def _in_transaction(
        self,
        tr: TransactionContext,
        body: Callable[[Any], R],
        wrote: Callable[[R], bool] | None = None,
    ) -> R:
        """``body(tr)`` in ``tr`` (a Transaction), or in a transaction of its own given a
        Database or Tenant, exactly once by the queue's receipts (``wrote``: whether a
        result comes from an attempt that wrote, as for ``Receipts.run``; None: always)."""
        if is_database(tr):
            if wrote is not None:
                return self._store.receipts.run(tr, body, wrote=wrote)
            return self._store.receipts.run(tr, body)
        check_context(tr, f"{type(self).__name__}()")
        return body(tr)

    def unschedule(self, tr: TransactionContext, name: str) -> bool:
        """Remove the schedule ``name``: no more runs of it are enqueued (runs enqueued
        already stay in the queue).

        Args:
            tr: a Database, Tenant or Transaction.
            name: the schedule's name.

        Returns:
            True when it was removed; False when there was no schedule of that name.

        Raises:
            TypeError, ValueError: ``name`` is not a schedule's name (as for
                :meth:`fdbqueue.Queue.schedule`), or ``tr`` has the wrong type.

        Given a Database, it takes effect exactly once (:doc:`guarantees`). Cost: one point
        read (a read conflict on the record: a loop enqueuing a run of it at the same moment
        conflicts, and one of them retries) and one clear.
        """
        checked = check_name(name)
        check_writable(tr, f"{type(self).__name__}.unschedule()", "unschedule")
        return self._in_transaction(tr, lambda inner: self._schedules.remove(inner, checked))

    @transactional
    def schedules(self, tr: TransactionContext) -> list[ScheduleInfo]:
        """Return every schedule of the queue (:class:`~fdbqueue.ScheduleInfo`: name, value,
        ``every`` or ``cron``, group, priority, next due time and last run, in wall-clock
        seconds since the epoch, and runs enqueued), by name.

        Given a Database, one read-only transaction; given a Transaction, read in it. A
        value the codec cannot decode shows as an :class:`~fdbqueue.Undecodable`.

        Raises:
            TypeError: ``tr`` has the wrong type.

        Cost: one snapshot range read of the schedules' records (each holds its value); no
        conflicts.
        """
        return self._schedules.listing(tr)

    def enqueue_due_runs(self, tr: TransactionContext) -> int:
        """Enqueue one run of every schedule that fell due by this client's clock, and move
        each one's next due time on; return how many runs were enqueued. Every worker loop
        (:meth:`work`) calls it about once a second (:doc:`schedules`); call it yourself to
        run schedules without a worker loop (from cron, say).

        Each due time is enqueued once, however many loops or callers run it at the same
        time, and through commits with unknown results (:doc:`schedules`). When several due
        times of a schedule passed since its last run, one run is enqueued, for the latest
        of them.

        Args:
            tr: a Database or Tenant (each due schedule in a transaction of its own, exactly
                once by the queue's receipts; one another caller is running meanwhile is left
                to it), or a Transaction (all of it there, nothing committed).

        Raises:
            TypeError: ``tr`` has the wrong type.
            QueueTypeError: the queue records another type, number of shards or codec.

        Cost: a snapshot range read of the schedules' records (no conflicts); per due
        schedule, a point read with a read conflict on its record, the enqueue's (or push's)
        reads and writes, and one set (two loops firing the same due time conflict: one
        gives way).
        """
        check_context(tr, f"{type(self).__name__}.enqueue_due_runs()")
        return self._schedules.enqueue_due(tr, self._write_run)

    # -- the worker loop --------------------------------------------------------------------

    @worker.spelt_out
    def work(
        self,
        database: Any,
        handler: Callable[[T], object] | Callable[[Any, T], object] | None = None,
        *,
        stop: threading.Event | None = None,
        **options: Unpack[worker.WorkOptions],
    ) -> WorkSummary:
        """Process items with ``handler`` until ``stop`` is set: claim, run, acknowledge; on
        an exception release with a backoff delay, or move to the dead letters on the last
        delivery (:mod:`fdbqueue.worker`).

        Args:
            database: a Database or Tenant.
            handler: called with each item's value, in a worker thread; returning means
                done (the lease is acknowledged), raising means failed (whatever it raises,
                the failure is recorded bounded and the loop goes on: :doc:`worker`, "A
                failing handler"). Not a coroutine function: that is
                :meth:`fdbqueue.asyncio.Queue.work`'s. None: each job's task, by its name
                (:meth:`task`; a job without a known task ends dead at once).
            stop: a ``threading.Event``; once set, no new item is claimed, running jobs
                finish, and ``work`` returns. None: run until SIGINT or SIGTERM.
            lease: (required) seconds each claim's lease lasts (> 0, at most 12 hours); a
                heartbeat extends the lease of a running job every ``lease / 3`` seconds.
            concurrency: worker threads (>= 1; default 1), each running one job at a time.
            backoff: seconds before the first retry of a failed item (default 1); doubled
                per delivery (jittered) up to ``max_backoff``.
            max_backoff: the longest retry delay in seconds (default 300; at most 12 hours
                are used, the longest delay a release takes).
            handle_signals: in the main thread, SIGINT and SIGTERM set ``stop`` (the first
                one; a second acts as usual); default True.
            until_empty: return once nothing is claimable and each item this run failed
                was retried to an end (waiting at most ``max_backoff`` + 0.25 s for it):
                a batch run, like rq's burst mode; default False.
            transactional: call ``handler(tr, value)`` inside the transaction that
                acknowledges the item, so that its writes and the acknowledgement commit
                together, exactly once (:doc:`worker`, "Exactly-once processing"); the
                handler must finish within FoundationDB's five seconds. Default False.
            time_limit: seconds a handler may run on one job, from its start (a finite
                number > 0, at most 12 hours; None: no limit); left out, the queue's
                ``time_limit``. Past it the heartbeat no longer extends the job's lease, and
                the job fails with :class:`~fdbqueue.errors.TimeLimitExceeded` ("time limit
                exceeded"): released with the backoff, or dead-lettered on its last
                delivery, so its message group moves on. A thread cannot be killed: the
                handler's thread is abandoned (logged, listed in :attr:`WorkerInfo.abandoned
                <fdbqueue.WorkerInfo.abandoned>`), its slot taken by a new thread (at most
                ``concurrency`` abandoned ones at once), what it returns later discarded;
                with ``transactional``, nothing of it commits. An asyncio handler is
                cancelled instead; with ``processes``, its child is killed (:doc:`worker`).
            processes: run handlers in this many child processes (1 to 256; one per thread:
                ``concurrency`` is then this), killed at the time limit (:doc:`worker`,
                "Handlers in child processes"); default None: in the threads.

        The keywords after ``stop`` are the same for every queue type and its asyncio twin
        (:class:`~fdbqueue.worker.WorkOptions`): they are documented here, once.

        Returns:
            A :class:`~fdbqueue.worker.WorkSummary`: jobs succeeded, retried, dead-lettered,
            lost, released, timed out.

        Raises:
            TypeError, ValueError: a bad argument (nothing is read or written), a
                coroutine function as ``handler`` included; and QueueTypeError at the first
                claim into another queue type or codec.
            BaseException: what a handler raised that is not an Exception (SystemExit,
                KeyboardInterrupt), once every thread finished; its item was released.

        At least once (make ``handler`` idempotent): a job whose worker dies, or whose
        lease is lost, runs again. While it runs, the loop keeps a record that
        :meth:`workers` lists (written at its start, every 5 seconds, cleared at its end).
        Cost per job: the claim, the ack (or release), and per heartbeat an extend; an idle
        worker renews its watch every second to look at ``stop``; its record's set every 5 s.
        """
        return worker.work(self, database, handler, stop=stop, **options)

    @transactional
    def workers(self, tr: TransactionContext) -> list[WorkerInfo]:
        """Return the worker loops working on the queue now (:class:`~fdbqueue.WorkerInfo`:
        id, host, pid, start, jobs done, jobs running, last beat, handlers abandoned past
        their time limit), oldest start first.

        Every loop of :meth:`work` (and of its asyncio twin, in any process) keeps a record in
        the queue's metadata while it runs: written at its start, rewritten every 5 seconds
        with its jobs done and running (as of that beat), cleared when it stops. A loop that
        died without clearing it is not listed once its last beat is more than 15 seconds old
        (:mod:`fdbqueue._delivery.workers`), and the next loop to start clears its record. A
        :meth:`clear` clears the records too: each live loop's comes back at its next beat.

        Args:
            tr: a Database or Tenant (one read-only transaction), or a Transaction (read in
                it with a snapshot read).

        Raises:
            TypeError: ``tr`` is not a Database, Tenant or Transaction (nothing is read).

        Cost: one snapshot range read of the worker records (one per live loop, and one per
        loop that died since the last loop started); no conflicts, no writes. The type
        records are not read.
        """
        return self._worker_registry.listed(tr)
