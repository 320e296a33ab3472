"""A FIFO queue stored in FoundationDB, following FoundationDB's "Queues" recipe.

Each item is one key-value pair ``subspace[(index, random)] = value``: ``index`` orders the
items, and ``random`` (20 random bytes) keeps keys of concurrently enqueued items distinct.
An enqueue finds the last index with a snapshot range read (``limit=1, reverse=True``), so it
adds no read conflict range and concurrent enqueues never conflict with each other or with
dequeues. A dequeue reads the first item with a ``limit=1`` range read and clears it.

Ordering guarantee
    Items come out in key order. If the transaction that enqueued item A committed before the
    transaction that enqueues item B got its read version, then A comes out before B. Items
    whose enqueue transactions overlap in time may be given the same index, and then come out
    in the order of their random elements, i.e. in either order: the queue is FIFO between
    enqueues that do not overlap, and unordered among those that do. Several enqueues in one
    transaction (or one ``enqueue_many``) keep their order. When a queue becomes empty, indexes
    start again at 1.

Source followed: FoundationDB's "Queues" recipe (documentation ``queues.rst`` and
``queues-java.rst``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeVar, overload

from fdbqueue._checks import check_count
from fdbqueue._consuming.sessions import DEFAULT_ABANDON_AFTER, Consumer
from fdbqueue._delivery.deduplication import DedupId, check_dedup_id
from fdbqueue._delivery.delays import check_delay
from fdbqueue._delivery.leases import Lease, check_lease_seconds
from fdbqueue._queues import tasks
from fdbqueue._queues.base import QueueBase, QueueOptions, T
from fdbqueue._queues.options import check_after, job_options
from fdbqueue._queues.shard import FifoShard, Shard
from fdbqueue._queues.tasks import Task
from fdbqueue._storage.groups import Group
from fdbqueue._storage.job_records import wrap
from fdbqueue._storage.jobs import Job, Submission
from fdbqueue._transactions.transactional import TransactionContext, transactional
from fdbqueue._transactions.waiting import check_blocking_arguments
from fdbqueue.codecs import Codec

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["Queue"]

P = ParamSpec("P")
R = TypeVar("R")


class Queue(QueueBase[T]):
    """A shared FIFO queue in one FoundationDB subspace.

    Every operation takes ``tr``: a Database or Tenant (the operation runs in its own
    transaction, committed and retried on retryable errors, as ``fdb.transactional`` does) or
    a Transaction (the operation runs inside it and commits nothing, so several operations
    and your own reads and writes form one atomic transaction). Both the ``fdb`` binding's
    objects and :mod:`fdbqueue.memory`'s are accepted; anything else raises TypeError.

    Args:
        subspace: a ``Subspace``, ``DirectorySubspace`` or tuple prefix (``("Q",)``) dedicated
            to this queue. Items live in ``subspace.range()``; the size counter lives just
            after it, at ``subspace.key() + b"\\xff"`` (see :doc:`concepts`).
        codec: ``"tuple"`` (default, as the Java recipe stores values), ``"raw"`` (bytes, as
            the Python recipe), ``"json"``, or a :class:`~fdbqueue.Codec` (its value type is
            the queue's ``T``); see :mod:`fdbqueue.codecs`.
        high_contention: dequeues and claims given a Database take in line
            (:doc:`high-contention`, each call a session with ``prefetch=0``): many
            consumers then share the queue without conflicting, FIFO in the order their
            requests committed. Given a Transaction, they stay plain.
        abandon_after: with ``high_contention``, seconds after which the request of a
            consumer that died stops holding the line (default 5).
        max_deliveries: how many times :meth:`claim` delivers an item whose leases keep
            expiring before it becomes a dead letter (default 5; None: no limit).
        exactly_once: operations given a Database write a receipt with their effect, so
            that a retry after a commit with an unknown result (1021) neither applies them
            twice nor loses what they took (:doc:`guarantees`); default True. False gives
            the recipes' behaviour, one set and one range clear cheaper per operation.
        shards: how many key ranges the queue spreads over (1 to 256; default 1, the recipe's
            layout). Each shard is FIFO (bounded across shards: docs "Sharded queues").
            Recorded at the first write: another count raises QueueTypeError.
        dedup_window: seconds an enqueue's ``dedup_id`` is remembered (default 300, as SQS;
            at most a day): :doc:`idempotency`.
        result_ttl: seconds a finished job's record and result are kept (default 86,400; 0:
            no result is kept): :doc:`jobs`.
        result_codec: how job results are stored, whatever ``codec`` is: ``"tagged"``
            (default None: the same, :class:`~fdbqueue.TaggedCodec`: dict, list, tuple, str,
            int, float, bool, None, bytes, nested, come back as they were), or any name or
            codec ``codec`` takes (:doc:`jobs`, "Results").
        time_limit: seconds a handler of :meth:`work` may run on a job before the worker
            takes the job back, when ``work`` is given no ``time_limit`` (a finite number
            > 0, at most 12 hours; default None: no limit). Not stored: each process that
            opens the queue says it.
        rate_limit: ``(jobs, seconds)``: at most ``jobs`` jobs start in any window of
            ``seconds`` (at most 12 hours), counted over every worker loop that opens the
            queue with it, in every process; exact, by the commit versions of the start
            slots the loops take before each claim, and without conflicts (:doc:`jobs`, "A
            rate limit"). Jobs it holds back wait in the queue. Default None: no limit.
            Not stored: give every worker's queue the same.

    Every queue type takes the keywords after ``codec`` (:class:`~fdbqueue.PriorityQueue`
    and the :mod:`fdbqueue.asyncio` twins too): they are documented here, once.

    Raises:
        TypeError, ValueError: an argument is of the wrong type or out of its range (as
            given above); nothing is read or written.

    Recipe compatibility: with ``codec="raw"``, this queue and FoundationDB's Python recipe
    over the same subspace read each other's items in order; with ``codec="tuple"`` the same
    holds for the Java recipe (``MicroQueue``). Items the recipes write are not counted by
    :meth:`size`, which counts what fdbqueue enqueued minus what it dequeued (never below 0).
    """

    _SHARD_CLASS = FifoShard

    @overload
    def __init__(
        self: Queue[bytes], subspace: Any, *, codec: Literal["raw"], **options: Unpack[QueueOptions]
    ) -> None: ...

    @overload
    def __init__(
        self: Queue[T], subspace: Any, *, codec: Codec[T], **options: Unpack[QueueOptions]
    ) -> None: ...

    @overload
    def __init__(
        self: Queue[Any], subspace: Any, *, codec: str = "tuple", **options: Unpack[QueueOptions]
    ) -> None: ...

    def __init__(
        self, subspace: Any, *, codec: str | Codec[Any] = "tuple", **options: Unpack[QueueOptions]
    ) -> None:
        super().__init__(subspace, codec, **options)
        self._front = self._router.end("front")

    # -- writing ----------------------------------------------------------------------------

    def enqueue(
        self,
        tr: TransactionContext,
        value: T,
        *,
        delay: float | None = None,
        dedup_id: DedupId | None = None,
        group: Group | None = None,
    ) -> bool:
        """Add ``value`` at the back of the queue; with ``delay``, once that many seconds passed.

        Args:
            tr: a Database, Tenant or Transaction.
            value: any value the queue's codec encodes, except None.
            delay: seconds (at most 30 days) before consumers may take the item (None or 0: at
                once); it then joins the back of the queue (:doc:`delayed-delivery`).
            dedup_id: a str, bytes or int naming this enqueue: when an enqueue with the same
                id was accepted within ``dedup_window`` seconds, nothing is enqueued
                (:doc:`idempotency`).
            group: a str, bytes, int or tuple naming the item's message group: items of
                one group are taken in enqueue order, at most one at a time under leases, and
                groups are served in turn (:doc:`groups`). None: no group.

        Returns:
            True when the value was enqueued; False when ``dedup_id`` was seen in the window.

        Raises:
            ValueError: ``value`` is None or over 100,000 bytes encoded, a bad ``delay`` or
                ``dedup_id``, or the subspace holds a PriorityQueue
                (:class:`~fdbqueue.QueueTypeError`).
            TypeError: the codec cannot encode ``value``, or a wrong type of ``delay``,
                ``dedup_id``, ``group`` or ``tr``.

        Nothing is written when an error is raised. Cost: one snapshot range read and a
        snapshot point read (no read conflict range), one set and three atomic adds (the size
        and enqueue counters, the signal key; delayed: no range read, and an atomic ``min``
        on the delayed items' hint instead of the add to the size counter): no conflicts
        with enqueues or dequeues. With ``dedup_id``: the read version, a point read with a
        read conflict on the id's record and two sets (an enqueue of the same id may
        conflict, no other), and the clean-up of up to 18 expired records (a snapshot range
        read and two blind clears each: no conflict). With ``group``: a
        point read with a read conflict on the group's active record (an enqueue conflicts
        only with the take that empties the group), and, when it makes the group active, a
        snapshot range read, two sets and an atomic add (:doc:`groups`).
        """
        if dedup_id is None and delay is None and group is None:  # plain: none of their steps
            return self._router.for_write().write_one(tr, self._store.encode(value))
        return self._enqueue(tr, value, delay, dedup_id, group, None)

    def submit(
        self,
        tr: TransactionContext,
        value: T,
        *,
        delay: float | None = None,
        group: Group | None = None,
        dedup_id: DedupId | None = None,
        max_deliveries: int | None = None,
        time_limit: float | None = None,
        backoff: float | None = None,
        result_ttl: float | None = None,
        after: Sequence[Job | str] | None = None,
    ) -> Job | None:
        """Enqueue ``value`` as a *job*: an item with an id, a state, and a result once a
        worker ran it (:doc:`jobs`).

        Args and errors as :meth:`enqueue` (the encoded value must be 31 bytes shorter: the
        job's header shares FoundationDB's 100,000-byte value limit), and the job's own
        settings, kept in its record, which every worker honours instead of the queue's or
        its own (None: theirs; :doc:`jobs`, "Options per job"):

        Args:
            max_deliveries: deliveries after which the job, failing, becomes a dead letter
                (an int >= 1).
            time_limit: seconds its handler may run per delivery (> 0, at most 12 hours).
            backoff: seconds before its first retry (> 0), doubled per delivery up to the
                worker's ``max_backoff``.
            result_ttl: seconds its record and result are kept once it finished (>= 0; 0:
                no result is kept), instead of the queue's ``result_ttl``.
            after: jobs (or their ids) this one waits for (:doc:`jobs`, "Jobs after jobs"):
                it is ``deferred`` (not taken, not counted by :meth:`size`) until every one
                of them succeeded, then waiting, in the transaction of the last one's
                acknowledgement, exactly once; ``cancelled`` if one ends dead or cancelled.
                They may be jobs submitted in the same transaction. Not with ``delay`` or
                ``dedup_id`` (ValueError); an unknown job: ValueError, nothing written.

        Returns:
            The :class:`~fdbqueue.Job`, whose id is chosen before the transaction commits:
            given a Transaction, the job exists once (and only if) it commits. None when
            ``dedup_id`` was seen within the window (nothing was submitted).

        Cost: :meth:`enqueue`'s, and one set (the job's record, in the queue's metadata).
        """
        options = job_options(max_deliveries, time_limit, backoff, result_ttl)
        job = self._submission(group, None, options)
        if after is not None:
            check_after(after, delay, dedup_id)
            if group is not None:
                self._group_shard(group, 0.0)  # a group that cannot be one: before any write
            return self._submit_after(tr, value, job, after)
        written = self._enqueue(tr, value, delay, dedup_id, group, job)
        return Job(job.id.hex()) if written else None

    @overload
    def task(self, function: Callable[P, R], /) -> Task[P, R]: ...

    @overload
    def task(
        self,
        function: None = None,
        /,
        *,
        name: str | None = None,
        max_deliveries: int | None = None,
        time_limit: float | None = None,
        backoff: float | None = None,
        result_ttl: float | None = None,
    ) -> Callable[[Callable[P, R]], Task[P, R]]: ...

    def task(
        self,
        function: Any = None,
        /,
        *,
        name: str | None = None,
        max_deliveries: int | None = None,
        time_limit: float | None = None,
        backoff: float | None = None,
        result_ttl: float | None = None,
    ) -> Any:
        """Register ``function`` as a task of this queue, by ``name`` (its ``__name__`` when
        None), in this process: ``@queue.task`` or ``@queue.task(name="emails.send")``. The
        :class:`~fdbqueue.Task` it returns runs the function when called, and submits a job
        that runs it with ``task.submit(tr, *args, **kwargs)``; a worker given no handler
        (:meth:`work`) runs each job's task by its name (:doc:`jobs`, "Tasks"). The
        options (``max_deliveries``, ``time_limit``, ``backoff``, ``result_ttl``:
        :meth:`submit`'s) are the task's jobs' own.

        Raises:
            TypeError: not a function, a name that is not a str, or a queue whose codec
                holds bytes (``"raw"``): tasks need one that encodes a task call (``"json"``,
                ``"tuple"``).
            ValueError: an empty name, or one another function has on this queue; an option
                out of range.

        Cost: nothing in the database.
        """
        job_options(max_deliveries, time_limit, backoff, result_ttl)  # checked: nothing written
        settings = {
            "max_deliveries": max_deliveries,
            "time_limit": time_limit,
            "backoff": backoff,
            "result_ttl": result_ttl,
        }
        return tasks.decorate(self, function, name, settings)

    def submit_task(
        self,
        tr: TransactionContext,
        name: str,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        delay: float | None = None,
        group: Group | None = None,
        dedup_id: DedupId | None = None,
        max_deliveries: int | None = None,
        time_limit: float | None = None,
        backoff: float | None = None,
        result_ttl: float | None = None,
        after: Sequence[Job | str] | None = None,
    ) -> Job | None:
        """Submit a job that runs the task ``name`` with ``args`` and ``kwargs``, by its name
        alone (a program that cannot import the task): :meth:`submit` of the task call, with
        its options (:doc:`jobs`, "Tasks"; the arguments must be values the codec encodes).

        Returns and raises as :meth:`submit`; TypeError also for a codec that holds bytes, or
        ``args`` and ``kwargs`` that are not a list or tuple and a mapping of str keys.
        Cost: :meth:`submit`'s.
        """
        call = tasks.task_call(self, name, args, kwargs)
        return self.submit(
            tr,
            call,
            delay=delay,
            group=group,
            dedup_id=dedup_id,
            max_deliveries=max_deliveries,
            time_limit=time_limit,
            backoff=backoff,
            result_ttl=result_ttl,
            after=after,
        )

    def _enqueue(
        self,
        tr: TransactionContext,
        value: T,
        delay: float | None,
        dedup_id: DedupId | None,
        group: Group | None,
        job: Submission | None,
    ) -> bool:
        """:meth:`enqueue`, of a job's value with ``job`` (a plain enqueue, with none of
        the options, writes by :meth:`~fdbqueue._queues.shard.Shard.write_one`)."""
        ids = None if dedup_id is None else [check_dedup_id(dedup_id)]
        encoded = [self._stored(value, job)]
        seconds = check_delay(delay)
        if group is None:
            return self._write(tr, self._router.runs(encoded), (), seconds, ids, job)[0]
        shard = self._group_shard(group, seconds)
        return self._write(tr, [(shard, encoded)], (group,), seconds, ids, job)[0]

    def enqueue_many(
        self,
        tr: TransactionContext,
        values: Iterable[T],
        *,
        delay: float | None = None,
        dedup_ids: Iterable[DedupId] | None = None,
        group: Group | None = None,
    ) -> list[bool]:
        """Add every value of ``values`` at the back of the queue, in order, atomically (all
        delayed by ``delay`` seconds, as for :meth:`enqueue`, and kept in order); with
        ``dedup_ids`` (one per value), those whose id was seen are left out; with ``group``,
        all into that group, in order.

        On a queue of N shards, each value goes to the shard a single enqueue in its place
        would (the shards in turn), all written in one transaction: each shard keeps its
        values in order, and the order bound of :doc:`sharding` holds for batches as for
        single enqueues. A group's batch goes to its group's shard, whole.

        Every value is checked before anything is written (a bad one changes nothing). Cost:
        as one :meth:`enqueue` per shard written, plus one set per further value (and per
        id); no conflicts.

        Returns:
            Per value, whether it was enqueued.

        Raises:
            ValueError, TypeError: as :meth:`enqueue`, for any value or id; ``dedup_ids`` of
                another length than ``values``, or a str or bytes (not a sequence of ids:
                TypeError); or the batch exceeds FoundationDB's
                10,000,000-byte transaction limit.
        """
        seconds = check_delay(delay)
        shard = None if group is None else self._group_shard(group, seconds)
        encoded = self._store.encode_many(values)
        if isinstance(dedup_ids, (str, bytes, bytearray)):
            raise TypeError(
                f"dedup_ids must be an iterable of ids, one per value, not a "
                f"{type(dedup_ids).__name__} (use dedup_ids=[...])"
            )
        ids = None if dedup_ids is None else [check_dedup_id(i) for i in dedup_ids]
        if ids is not None and len(ids) != len(encoded):
            raise ValueError(f"{len(ids)} dedup_ids for {len(encoded)} values")
        suffix = None  # a group's item keys are longer than the recipe's
        if shard is not None and group is not None:
            suffix = shard.groups.longest_item_key(group) - len(self._store.subspace.key())
        self._store.check_batch_fits(encoded, suffix)
        if not encoded:
            return []
        if shard is None:
            return self._write(tr, self._router.runs(encoded), (), seconds, ids)
        return self._write(tr, [(shard, encoded)], (group,), seconds, ids)

    def _group_shard(self, group: Group, delay: float) -> Shard:
        """The shard of ``group`` (:meth:`Router.for_group`); raise before anything is
        written when ``group`` cannot name a group of this queue or, delayed, its delayed
        records' keys would be too long."""
        shard = self._router.for_group(group)
        if delay:
            shard.delays.check_key((group,))
        return shard

    # -- periodic jobs ----------------------------------------------------------------------

    def schedule(
        self,
        tr: TransactionContext,
        name: str,
        value: T,
        *,
        every: float | None = None,
        cron: str | None = None,
        group: Group | None = None,
    ) -> float:
        """Enqueue ``value`` periodically: every ``every`` seconds, or at the times of the
        ``cron`` expression; every running worker loop (:meth:`work`) enqueues each run once
        (:doc:`schedules`).

        Args:
            tr: a Database, Tenant or Transaction.
            name: names the schedule: a non-empty str of at most 100 bytes of UTF-8, without
                NUL characters. Scheduling a name again replaces its value, group (and
                priority) and timing; its next due time is kept when ``every`` or ``cron``
                is the same, else computed anew from now.
            value: what each run enqueues: any value the codec encodes, except None;
                encoded now, and stored with the schedule.
            every: seconds between runs (a finite number, at least 0.001); the first run
                falls due ``every`` seconds from now, the next ones ``every`` seconds apart
                (a fixed rate).
            cron: a 5-field cron expression (minute hour day-of-month month day-of-week,
                read by the ``cronsim`` library), in UTC: runs fall due at the minutes it
                matches. Exactly one of ``every`` and ``cron``.
            group: the runs' message group (as :meth:`enqueue`'s ``group``); None: none.

        Returns:
            The schedule's next due time, in wall-clock seconds since the epoch.

        Raises:
            TypeError: both or neither of ``every`` and ``cron``; ``name`` not a str,
                ``every`` not a number, ``cron`` not a str, a bad ``group``, the codec
                cannot encode ``value``, or ``tr`` has the wrong type.
            ValueError: an empty or too long ``name``; ``every`` NaN, infinite or not >= 0.001;
                a ``cron`` that is not 5 fields or that the library refuses (the message
                names it); ``value`` None or over 100,000 bytes encoded (or its record, with
                the schedule's fields).
            QueueTypeError: the queue records another type, number of shards or codec.

        Everything is checked before anything is written: when it raises, nothing changed.
        Given a Database, it takes effect exactly once (:doc:`guarantees`). Cost: one point
        read (a read conflict on the schedule's record), one set, and the type records' two
        snapshot point reads until they were once found right; runs cost what an enqueue
        costs, plus a point read and a set of the record.
        """
        return self._schedule(tr, name, value, every, cron, group, None)

    def _check_run(self, priority: int | None, group: Group | None) -> None:
        if group is not None:
            self._group_shard(group, 0.0)

    def _write_run(
        self, tr: Any, encoded: bytes, priority: int | None, group: Group | None
    ) -> object:
        job = self._submission(group, None, None)  # each run is a job (:meth:`job` follows it)
        shard, where = self._place(group, None)
        return self._write(tr, [(shard, [wrap(job.id, encoded)])], where, 0.0, None, job)

    def _place(self, group: Group | None, priority: int | None) -> tuple[Shard, tuple[Any, ...]]:
        if group is None:
            return self._router.for_write(), ()
        return self._group_shard(group, 0.0), (group,)

    # -- taking -----------------------------------------------------------------------------

    def dequeue(
        self, tr: TransactionContext, *, block: bool = False, timeout: float | None = None
    ) -> T | None:
        """Remove the item at the front of the queue and return its value.

        Args:
            tr: a Database, Tenant or Transaction.
            block: wait until an item is available (needs a Database), on a watch of the
                signal key that every enqueue bumps: no polling (:doc:`high-contention`).
            timeout: with ``block=True``, the most seconds to wait; None (or ``math.inf``)
                waits without limit.

        Returns:
            The oldest item's value, or None when the queue is empty or paused
            (:meth:`pause`; blocking: when the timeout ran out).

        Raises:
            TypeError: ``tr`` is of the wrong type or a snapshot view, ``block`` is not a
                bool, or ``block=True`` with a Transaction.
            ValueError: a NaN or negative ``timeout``, a ``timeout`` without ``block=True``,
                or a key at the front that is not an item of this queue (nothing changes).

        An item whose value the codec cannot decode is moved to the dead letters (a warning
        is logged) and the next item is taken instead, in the same transaction. Delayed items
        that fell due join the back of the queue first (:doc:`delayed-delivery`). Given a
        Database, it takes effect exactly once (:doc:`guarantees`).

        Cost (plain, or any Transaction): one range read (``limit=1``) sent together with a
        snapshot point read of the queue's feature record (no conflict), one clear and one
        atomic add, and once per 64 items a range clear of the ``began`` records behind
        them. A queue that used a feature reads for it too, in the same round trip: the
        paused key (:meth:`pause`), the delayed items' hint, the groups' count, a snapshot
        probe of the first lease, and the expired leases when the probe finds one. Its read
        conflict range runs from the start of the queue to just past the item taken, so
        concurrent dequeues conflict (one retries) and enqueues do not. With
        ``high_contention=True`` and a Database: one transaction while nobody else is in
        line, else two (register, then take the item matched with the request), without
        conflicts between consumers (:doc:`high-contention`).
        """
        if block is False and timeout is None:  # nothing to check: the common call
            taken: T | None = self._front.take(tr, False, None)
            return taken
        seconds = check_blocking_arguments(tr, block, timeout)
        taken = self._front.take(tr, block, seconds)
        return taken

    def dequeue_many(self, tr: TransactionContext, n: int) -> list[T]:
        """Remove up to ``n`` items from the front of the queue and return their values.

        Args:
            n: the most items to take (an int >= 0).

        Returns:
            The values, oldest first; fewer than ``n`` when the queue holds fewer (or when
            delayed items fell due: they join the back, taken up to ``n``).

        Raises:
            TypeError: ``n`` is not an int, or ``tr`` is of the wrong type.
            ValueError: ``n`` is negative, or the key at the front is not one of this
                queue's items (nothing changes).

        Poison items are moved to the dead letters and skipped, as by :meth:`dequeue`.
        Cost: one range read (``limit=n``), ``n`` clears and one atomic add; read conflict
        range: the front up to just past the last item taken.
        """
        check_count(n)
        return self._front.take_many(tr, n) if n else []

    # -- leases -----------------------------------------------------------------------------

    def claim(
        self,
        tr: TransactionContext,
        lease: float,
        *,
        block: bool = False,
        timeout: float | None = None,
    ) -> Lease[T] | None:
        """Claim the next item for processing under a lease of ``lease`` seconds.

        The item leaves the queue into a lease. Acknowledge it with :meth:`ack` once
        processed; if the lease expires first, the next claim delivers it again with its
        delivery count raised, and after ``max_deliveries`` expiries it becomes a dead letter
        (:doc:`guarantees`). An expired or released item is claimed before the front.

        Args:
            tr: a Database, Tenant or Transaction.
            lease: seconds until the lease expires (> 0, at most 12 hours), measured with read
                versions (about 1,000,000 per second, a clock all clients share).
            block: wait until an item can be claimed (needs a Database; long polling as SQS's
                ``WaitTimeSeconds``), on a watch, waking too when a lease expires.
            timeout: with ``block=True``, the most seconds to wait; None (or ``math.inf``)
                waits without limit.

        Returns:
            A :class:`~fdbqueue.Lease` (value, id, deliveries, expiry_version), or None when
            nothing is claimable or the queue is paused (:meth:`pause`; blocking: when the
            timeout ran out).

        Raises:
            TypeError: ``lease`` or ``timeout`` is not a number, ``block`` is not a bool,
                ``block=True`` with a Transaction, or ``tr`` has the wrong type.
            ValueError: ``lease`` is out of range, ``timeout`` is NaN or negative, or a
                ``timeout`` without ``block=True``. Nothing is read or written then.

        Given a Database, it takes effect exactly once (:doc:`guarantees`).
        Cost (plain): three reads sent together (one round trip), a snapshot point read of
        the feature record, a snapshot probe of the first lease and the dequeue's range read
        of the front (``limit=1``, a read conflict up to the item), and the read version; a
        job's item adds a point read of its record (a second round trip; its state change is
        one set). Then the dequeue's clear and add, and two sets (the lease record, the held
        value). A queue that used a feature reads for it in the same round trip (the paused
        key, :meth:`pause`, the delayed items' hint, the groups' count); only when the probe
        finds a lease expired or released are the waiting leases read with their conflict
        range (a second round trip). Claims conflict as plain dequeues do, unless
        ``high_contention`` takes them in line. Blocking, per further attempt a read-only
        transaction creating the watch. Source followed: the "Queues" recipe, "Watches".
        """
        seconds = check_lease_seconds(lease)
        plain = block is False and timeout is None  # nothing more to check: the common call
        wait = None if plain else check_blocking_arguments(tr, block, timeout)
        return self._front.claim(tr, seconds, block, wait)

    def claim_many(self, tr: TransactionContext, n: int, lease: float) -> list[Lease[T]]:
        """Claim up to ``n`` items in one transaction, each under its own lease of ``lease``
        seconds: those ``n`` calls of :meth:`claim` would take, in that order (expired or
        released leases first, soonest expiry first; poison items and items out of
        deliveries go to the dead letters on the way). It never waits, and never in line.

        Returns:
            A list of :class:`~fdbqueue.Lease`, in claim order; fewer than ``n`` (possibly
            none) when fewer are claimable, or when the writes reached
            the library's transaction budget (about 5,000,000
            bytes, values included; claim again for the rest).

        Raises:
            TypeError: ``n`` is not an int, ``lease`` not a number, or ``tr`` the wrong type.
            ValueError: ``n`` is negative or ``lease`` out of range; or the key at the front
                is not one of this queue's items. Nothing changes then.

        Given a Database, it takes effect exactly once (:doc:`guarantees`).
        Cost: one transaction, with the reads and writes of ``n`` claims, their reads issued
        together.
        """
        check_count(n)
        seconds = check_lease_seconds(lease)
        return self._front.claim_many(tr, n, seconds) if n else []

    def consumer(
        self, database: Any, *, prefetch: int = 0, abandon_after: float = DEFAULT_ABANDON_AFTER
    ) -> Consumer:
        """Open a consumer session that dequeues and claims in line, without conflicts, FIFO
        in request order (:doc:`high-contention`); use it in a ``with`` block, whose end
        closes it and returns its reserved places. ``database``: a Database or Tenant (the
        session runs its own transactions); ``prefetch``: places in line kept reserved
        between calls (0-255; 1: an item then costs one transaction); ``abandon_after``:
        seconds after which the places of a session that died go to the next in line.

        Raises:
            TypeError, ValueError: not a Database, ``prefetch`` not in 0-255, ``abandon_after``.
        """
        return self._front.consumer(database, prefetch, abandon_after)

    # -- looking ----------------------------------------------------------------------------

    @transactional
    def peek(self, tr: TransactionContext) -> T | None:
        """Return the value at the front of the queue without removing it, or None if empty:
        the value this thread's next :meth:`dequeue` returns when nothing else changes the
        queue meanwhile. On a queue of several shards, that is the front of the shard this
        thread (or asyncio task) takes from next: its home shard while it holds items, else
        the shard it moves to (peek moves it there, as a take would: :doc:`sharding`).

        Poison items (values the codec cannot decode) are skipped, as :meth:`dequeue` would
        move them aside. Raises ValueError when the key at the front is not one of this
        queue's items, QueueTypeError when the queue records another type, number of shards
        or codec.

        Cost: one range read (``limit=1``), more only past poison items, and the type
        records' reads until they were once found right (:doc:`concepts`); its read conflict
        range covers the front of the queue up to just past the first item (the whole queue
        range when empty). On a queue of several shards, choosing a shard costs what a take's
        choice costs (snapshot point reads of two shards' counters, or of all)."""
        self._router.check_type(tr)
        first: T | None = self._front.peek(tr)
        return first

    def _oldest(self, tr: Any) -> Any:
        return self._front.peek(tr)
