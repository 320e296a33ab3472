"""A priority queue stored in FoundationDB, following FoundationDB's "Priority Queues" recipe.

Each item is one key-value pair ``subspace[(priority, count, random)] = value``. Keys sort by
priority, then by ``count`` (1 + the last count used for that priority, 0 for a new one, found
with a snapshot reverse range read so that pushes never conflict), then by 20 random bytes
that keep concurrent pushes distinct. The lowest-priority items are at the start of the
subspace and the highest at its end.

Ordering guarantee
    ``pop_min`` takes the oldest item of the lowest priority, ``pop_max`` the oldest item of
    the highest priority: FIFO within a priority at both ends. (FoundationDB's Java recipe
    returns the newest item from the max end; this library does not copy that.) "Oldest"
    has the meaning :mod:`fdbqueue.queue` gives it: if the push of A committed before the
    push of B (same priority) got its read version, A comes out first; pushes that overlap in
    time may share a count and come out in either order.

Source followed: FoundationDB's "Priority Queues" recipe (documentation
``priority-queues-java.rst``, class ``MicroPriority``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeVar, overload

from fdbqueue._checks import check_count, check_flag, check_packable_int
from fdbqueue._consuming.sessions import DEFAULT_ABANDON_AFTER, Consumer
from fdbqueue._delivery.deduplication import DedupId, check_dedup_id
from fdbqueue._delivery.delays import check_delay
from fdbqueue._delivery.leases import Lease, check_lease_seconds
from fdbqueue._queues import tasks
from fdbqueue._queues.base import QueueBase, QueueOptions, T
from fdbqueue._queues.options import check_after, job_options
from fdbqueue._queues.shard import PriorityShard, Shard
from fdbqueue._queues.tasks import Task
from fdbqueue._storage.groups import Group
from fdbqueue._storage.job_records import wrap
from fdbqueue._storage.jobs import Job, Submission
from fdbqueue._transactions.transactional import TransactionContext, transactional
from fdbqueue._transactions.waiting import check_blocking_arguments
from fdbqueue.codecs import Codec

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["PriorityQueue", "check_priority"]

P = ParamSpec("P")
R = TypeVar("R")

#: The end's name by ``max``.
_END = {False: "min", True: "max"}


def check_priority(priority: Any) -> None:
    """Raise TypeError unless ``priority`` is an int (a bool is refused), and ValueError when
    the tuple layer cannot pack it (``abs(priority) >= 2**2040``)."""
    if type(priority) is bool or not isinstance(priority, int):
        raise TypeError(f"priority must be an int, not {type(priority).__name__}")
    check_packable_int(priority, "priority")


class PriorityQueue(QueueBase[T]):
    """A shared priority queue in one FoundationDB subspace, with both ends usable.

    ``tr`` works as for :class:`~fdbqueue.Queue`: a Database or Tenant (own transaction,
    committed and retried) or a Transaction (runs inside it, commits nothing).

    Args:
        subspace: as for :class:`~fdbqueue.Queue` (a tuple prefix such as ``("P",)``).
        codec: as for :class:`~fdbqueue.Queue` (``"tuple"``, the default, is the Java
            recipe's value layout).
        options: ``high_contention``, ``abandon_after``, ``max_deliveries``,
            ``exactly_once``, ``shards``, ``dedup_window``, ``time_limit`` and
            ``rate_limit``, as
            :class:`~fdbqueue.Queue` documents them, with these differences:
            ``high_contention`` keeps one line of requests per end (pops and claims at that
            end take in line); on a queue of several shards, a pop takes from the shard
            whose first item has the best priority at its read version; ``dedup_window``
            remembers a push's ``dedup_id``.

    Raises:
        TypeError, ValueError: an argument is of the wrong type or out of its range (as
            given above); nothing is read or written.

    Recipe compatibility: with ``codec="tuple"``, items pushed by FoundationDB's Java recipe
    (``MicroPriority``) into the same subspace are popped by this queue in priority order and
    the other way round (its ``pop(max=true)`` takes the newest item of the top priority,
    this queue the oldest). Their items are not counted by :meth:`size`.
    """

    _SHARD_CLASS = PriorityShard

    @overload
    def __init__(
        self: PriorityQueue[bytes],
        subspace: Any,
        *,
        codec: Literal["raw"],
        **options: Unpack[QueueOptions],
    ) -> None: ...

    @overload
    def __init__(
        self: PriorityQueue[T], subspace: Any, *, codec: Codec[T], **options: Unpack[QueueOptions]
    ) -> None: ...

    @overload
    def __init__(
        self: PriorityQueue[Any],
        subspace: Any,
        *,
        codec: str = "tuple",
        **options: Unpack[QueueOptions],
    ) -> None: ...

    def __init__(
        self, subspace: Any, *, codec: str | Codec[Any] = "tuple", **options: Unpack[QueueOptions]
    ) -> None:
        super().__init__(subspace, codec, **options)
        self._ends = {name: self._router.end(name, best=name) for name in ("min", "max")}

    # -- writing ----------------------------------------------------------------------------

    def push(
        self,
        tr: TransactionContext,
        value: T,
        priority: int,
        *,
        delay: float | None = None,
        dedup_id: DedupId | None = None,
        group: Group | None = None,
    ) -> bool:
        """Add ``value`` with ``priority``; with ``delay``, once that many seconds passed.

        Args:
            tr: a Database, Tenant or Transaction.
            value: any value the codec encodes, except None.
            priority: an int of any size the tuple layer packs (negative allowed). Lower
                priorities come out of :meth:`pop_min` first, higher ones out of
                :meth:`pop_max`.
            delay: seconds (at most 30 days) before consumers may pop the item; None or 0:
                at once. Once due, it joins the back of its priority (or of its group) when
                the next consumer looks (:doc:`delayed-delivery`).
            dedup_id: a str, bytes or int naming this push: when a push with the same id was
                accepted within ``dedup_window`` seconds, nothing is pushed, whatever the
                priorities (an id is the queue's, not a priority's; :doc:`idempotency`).
            group: a str, bytes, int or tuple naming the item's message group: a group's
                items come out in push order whatever their priorities, one at a time under
                leases, and a group's turn ranks by its first item's priority
                (:doc:`groups`). None: no group.

        Returns:
            True when the value was pushed (always without ``dedup_id``); False when
            ``dedup_id`` was seen in the window.

        Raises:
            TypeError: ``priority`` is not an int (bools are refused too), the codec cannot
                encode ``value``, ``delay`` is not a number, ``dedup_id`` is not a str, bytes
                or int (bools are refused too), ``group`` is not a group, or ``tr`` is of the
                wrong type.
            ValueError: ``value`` is None or encodes to more than 100,000 bytes, the
                priority is beyond the tuple layer's integer range, ``delay`` is out of
                range, ``dedup_id`` is empty, beyond the tuple layer's integer range or over
                1,000 bytes packed, or the group's keys would be too long.

        Nothing is written when an error is raised. Cost: one snapshot range read inside the
        priority (no read conflict range), one set, three atomic adds (the size and enqueue
        counters, the signal key); it never conflicts with other pushes or pops. Delayed: the
        read version, one set, an atomic ``min`` and two atomic adds. With ``dedup_id``: the
        read version, a point read with a read conflict on the id's record and two sets (a
        push of the same id may conflict, no other), and the clean-up of up to 18 expired
        records (a snapshot range read and two blind clears each: no conflict). With
        ``group``: as a Queue's enqueue into a group (:meth:`fdbqueue.Queue.enqueue`).
        """
        return self._push(tr, value, priority, delay, dedup_id, group, None)

    def submit(
        self,
        tr: TransactionContext,
        value: T,
        *,
        priority: int,
        delay: float | None = None,
        group: Group | None = None,
        dedup_id: DedupId | None = None,
        max_deliveries: int | None = None,
        time_limit: float | None = None,
        backoff: float | None = None,
        result_ttl: float | None = None,
        after: Sequence[Job | str] | None = None,
    ) -> Job | None:
        """Push ``value`` at ``priority`` as a *job*: an item with an id, a state, and a
        result once a worker ran it (:doc:`jobs`).

        Args and errors as :meth:`push`; ``max_deliveries``, ``time_limit``, ``backoff``,
        ``result_ttl`` (the job's own settings) and ``after`` (the jobs it waits for) as
        :meth:`fdbqueue.Queue.submit`'s.

        Returns:
            The :class:`~fdbqueue.Job` (its id chosen before the commit), or None when
            ``dedup_id`` was seen within the window.

        Cost: :meth:`push`'s, and one set (the job's record).
        """
        check_priority(priority)
        options = job_options(max_deliveries, time_limit, backoff, result_ttl)
        job = self._submission(group, priority, options)
        if after is not None:
            check_after(after, delay, dedup_id)
            self._store.item_key((priority, 0))  # the priority packs: before any write
            return self._submit_after(tr, value, job, after)
        written = self._push(tr, value, priority, delay, dedup_id, group, job)
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
        priority: int = 0,
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
        priority: int = 0,
        max_deliveries: int | None = None,
        time_limit: float | None = None,
        backoff: float | None = None,
        result_ttl: float | None = None,
    ) -> Any:
        """Register ``function`` as a task of this queue, as :meth:`fdbqueue.Queue.task`;
        ``task.submit(tr, ...)`` submits its jobs at ``priority`` (default 0), with the
        options given here.

        Raises:
            As :meth:`fdbqueue.Queue.task`; TypeError or ValueError for a bad ``priority``.

        Cost: nothing in the database.
        """
        check_priority(priority)
        job_options(max_deliveries, time_limit, backoff, result_ttl)  # checked: nothing written
        settings = {
            "max_deliveries": max_deliveries,
            "time_limit": time_limit,
            "backoff": backoff,
            "result_ttl": result_ttl,
        }
        return tasks.decorate(self, function, name, {"priority": priority, **settings})

    def submit_task(
        self,
        tr: TransactionContext,
        name: str,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        priority: int,
        delay: float | None = None,
        group: Group | None = None,
        dedup_id: DedupId | None = None,
        max_deliveries: int | None = None,
        time_limit: float | None = None,
        backoff: float | None = None,
        result_ttl: float | None = None,
        after: Sequence[Job | str] | None = None,
    ) -> Job | None:
        """Submit a job that runs the task ``name`` with ``args`` and ``kwargs`` at
        ``priority``, by its name alone, as :meth:`fdbqueue.Queue.submit_task`.

        Returns and raises as :meth:`submit` and :meth:`fdbqueue.Queue.submit_task`.
        Cost: :meth:`submit`'s.
        """
        call = tasks.task_call(self, name, args, kwargs)
        return self.submit(
            tr,
            call,
            priority=priority,
            delay=delay,
            group=group,
            dedup_id=dedup_id,
            max_deliveries=max_deliveries,
            time_limit=time_limit,
            backoff=backoff,
            result_ttl=result_ttl,
            after=after,
        )

    def _push(
        self,
        tr: TransactionContext,
        value: T,
        priority: int,
        delay: float | None,
        dedup_id: DedupId | None,
        group: Group | None,
        job: Submission | None,
    ) -> bool:
        """:meth:`push`, of a job's value with ``job``."""
        check_priority(priority)
        seconds = check_delay(delay)
        ids = None if dedup_id is None else [check_dedup_id(dedup_id)]
        encoded = self._stored(value, job)
        self._store.item_key((priority, 0))  # checks the priority packs and the key fits
        where: tuple[Any, ...] = (priority,)
        if group is None:
            shard = self._router.for_write()
        else:
            shard = self._router.for_group(group, priority)
            where = (priority, group)
        if seconds:
            shard.delays.check_key(where)
        return self._write(tr, [(shard, [encoded])], where, seconds, ids, job)[0]

    # -- periodic jobs ----------------------------------------------------------------------

    def schedule(
        self,
        tr: TransactionContext,
        name: str,
        value: T,
        *,
        priority: int,
        every: float | None = None,
        cron: str | None = None,
        group: Group | None = None,
    ) -> float:
        """Push ``value`` with ``priority`` periodically: every ``every`` seconds, or at the
        times of the ``cron`` expression; every running worker loop (:meth:`work`) pushes
        each run once (:doc:`schedules`).

        Arguments, result, errors and cost are :meth:`fdbqueue.Queue.schedule`'s, and
        ``priority`` (required) is :meth:`push`'s: an int the tuple layer packs (TypeError
        for another type, bools included; ValueError beyond the tuple layer's range).
        """
        check_priority(priority)
        return self._schedule(tr, name, value, every, cron, group, priority)

    def _check_run(self, priority: int | None, group: Group | None) -> None:
        check_priority(priority)
        self._store.item_key((priority, 0))  # checks the priority packs and the key fits
        if group is not None:
            self._router.for_group(group, priority)

    def _write_run(
        self, tr: Any, encoded: bytes, priority: int | None, group: Group | None
    ) -> object:
        shard, where = self._place(group, priority)
        job = self._submission(group, priority, None)  # each run is a job (:meth:`job` follows it)
        return self._write(tr, [(shard, [wrap(job.id, encoded)])], where, 0.0, None, job)

    def _place(self, group: Group | None, priority: int | None) -> tuple[Shard, tuple[Any, ...]]:
        if group is None:
            return self._router.for_write(), (priority,)
        return self._router.for_group(group, priority), (priority, group)

    # -- taking and looking -----------------------------------------------------------------

    def pop(
        self,
        tr: TransactionContext,
        max: bool = False,
        *,
        block: bool = False,
        timeout: float | None = None,
    ) -> T | None:
        """Remove and return the oldest item of the lowest (or, with ``max=True``, highest)
        priority, or None when the queue is empty.

        Args:
            tr: a Database, Tenant or Transaction.
            max: take from the highest priority instead of the lowest.
            block: wait until an item is available (needs a Database; a watch, no polling,
                see :doc:`high-contention`).
            timeout: with ``block=True``, the most seconds to wait; None (or ``math.inf``)
                waits without limit.

        Raises:
            TypeError: ``tr`` is of the wrong type or a snapshot view, ``max`` or ``block``
                is not a bool, or ``block=True`` with a Transaction.
            ValueError: a NaN or negative ``timeout``, a ``timeout`` without ``block=True``,
                or a key at that end that is not one of this queue's items (nothing changes).

        Poison items are moved to the dead letters and skipped, as for
        :meth:`fdbqueue.Queue.dequeue`. Cost: :meth:`pop_min` or :meth:`pop_max`; with
        ``high_contention=True`` and a Database, as :meth:`fdbqueue.Queue.dequeue` in
        line (each end has its own line of requests).
        """
        check_flag(max, "max")
        plain = block is False and timeout is None  # nothing to check: the common call
        seconds = None if plain else check_blocking_arguments(tr, block, timeout)
        taken: T | None = self._ends[_END[max]].take(tr, block, seconds)
        return taken

    def pop_min(
        self, tr: TransactionContext, *, block: bool = False, timeout: float | None = None
    ) -> T | None:
        """Remove and return the oldest item of the lowest priority, or None when empty.

        ``block`` and ``timeout`` as for :meth:`pop`. Cost: one range read (``limit=1``), one
        clear, one atomic add, and the hints :meth:`fdbqueue.Queue.dequeue` names (issued
        alongside, at every call). Its read conflict range covers the queue from its start
        to just
        past the item taken: concurrent pops conflict (one retries), pushes of higher
        priorities or newer items do not.
        """
        return self.pop(tr, max=False, block=block, timeout=timeout)

    def pop_max(
        self, tr: TransactionContext, *, block: bool = False, timeout: float | None = None
    ) -> T | None:
        """Remove and return the oldest item of the highest priority, or None when empty.

        ``block`` and ``timeout`` as for :meth:`pop`. Cost: two range reads (a snapshot
        reverse read, then a forward read within the top priority), one clear, one atomic
        add; read conflict ranges as :doc:`concepts` describes: a concurrent
        push of a higher priority makes it retry.
        """
        return self.pop(tr, max=True, block=block, timeout=timeout)

    def pop_many(self, tr: TransactionContext, n: int, *, max: bool = False) -> list[T]:
        """Remove up to ``n`` items from the lowest (or, with ``max=True``, highest) priority
        in one transaction and return their values.

        Args:
            tr: a Database, Tenant or Transaction.
            n: the most items to take (an int >= 0; 0 reads nothing).
            max: take from the highest priority instead of the lowest (keyword only).

        Returns:
            The values; fewer than ``n`` when the queue holds fewer, none when it is empty.
            On a queue of one shard, in the order ``n`` calls of :meth:`pop` with this
            ``max`` would return them (by priority, oldest first within one). On several
            shards, the first value is the one :meth:`pop` would take, and the rest come
            shard after shard (the shard whose first item is best first), each shard's in
            that order: the values are then neither sorted across shards nor surely the
            ``n`` best of the queue (pop one at a time for that).

        Raises:
            TypeError: ``n`` is not an int (bools are refused too), ``max`` is not a bool, or
                ``tr`` is of the wrong type.
            ValueError: ``n`` is negative, or a key at that end is not one of this queue's
                items (nothing changes).

        Never waits, and never in line (also with ``high_contention=True``). Poison items
        are moved to the dead letters and skipped, and delayed items that fell due are
        taken in their place, as by :meth:`pop`. Given a Database, it takes effect exactly
        once (:doc:`guarantees`).

        Cost, one shard: at the min end, one range read (``limit=n``) and two snapshot point
        reads (the delayed items' hint and the codec record, issued with it); at the max end
        those point reads and two range reads per item (a snapshot reverse read, then a
        forward read within the top priority); then ``n`` clears and one atomic add (the
        size), and with exactly-once a receipt's set. Conflicts as :meth:`pop_min` (read
        conflict range from the start of the queue to just past the last item taken: a
        concurrent pop conflicts, a push of a worse priority does not) or :meth:`pop_max`
        (a concurrent push of a higher priority conflicts too). Several shards: first the
        ranking's snapshot range reads of every shard (issued together), then each shard's
        take as above, in one transaction.
        """
        check_count(n)
        check_flag(max, "max")
        return self._ends[_END[max]].take_many(tr, n) if n else []

    def claim(
        self,
        tr: TransactionContext,
        lease: float,
        max: bool = False,
        *,
        block: bool = False,
        timeout: float | None = None,
    ) -> Lease[T] | None:
        """Claim the oldest item of the lowest (or, with ``max=True``, highest) priority under
        a lease of ``lease`` seconds; an expired or released item comes first.

        ``block=True`` waits (needs a Database) on a watch of the signal key, which every
        push and release bumps, until an item can be claimed or ``timeout`` seconds pass
        (None or ``math.inf``: no limit), and also wakes when the first lease in flight
        expires; no polling. Everything else is as for :meth:`fdbqueue.Queue.claim`:
        returns a :class:`~fdbqueue.Lease` or None (blocking: None when the timeout ran
        out), raises TypeError / ValueError for a bad ``lease``, ``max``, ``block`` or
        ``timeout`` (or ``block=True`` with a Transaction) before anything is read or
        written, takes effect exactly once given a Database. Cost: as
        :meth:`fdbqueue.Queue.claim`'s, the pop's read of its end in place of the dequeue's
        (a sharded queue's: of every shard's end); blocking, per further attempt a
        read-only transaction creating the watch.
        """
        check_flag(max, "max")
        seconds = check_lease_seconds(lease)
        plain = block is False and timeout is None  # nothing more to check: the common call
        wait = None if plain else check_blocking_arguments(tr, block, timeout)
        return self._ends[_END[max]].claim(tr, seconds, block, wait)

    def claim_many(
        self, tr: TransactionContext, n: int, lease: float, max: bool = False
    ) -> list[Lease[T]]:
        """Claim up to ``n`` items in one transaction, each under its own lease of ``lease``
        seconds, in the order ``n`` calls of :meth:`claim` with this ``max`` would take
        them (expired or released leases first). Returns a list of
        :class:`~fdbqueue.Lease`, possibly empty; fewer than ``n`` when fewer are claimable
        or the transaction's writes reached the library's budget (about 5,000,000 bytes).

        Raises TypeError / ValueError for a bad ``n``, ``lease`` or ``max`` before anything
        is read or written; exactly once given a Database. Cost: as
        :meth:`fdbqueue.Queue.claim_many`; at the max end the pop reads the top priority
        one item at a time (two range reads per item).
        """
        check_flag(max, "max")
        check_count(n)
        seconds = check_lease_seconds(lease)
        return self._ends[_END[max]].claim_many(tr, n, seconds) if n else []

    def consumer(
        self,
        database: Any,
        *,
        max: bool = False,
        prefetch: int = 0,
        abandon_after: float = DEFAULT_ABANDON_AFTER,
    ) -> Consumer:
        """Open a consumer session at one end (the lowest priority; the highest with
        ``max=True``): it pops and claims in that end's line, without conflicts, in request
        order. Arguments and errors as for :meth:`fdbqueue.Queue.consumer`, plus TypeError
        when ``max`` is not a bool."""
        check_flag(max, "max")
        return self._ends[_END[max]].consumer(database, prefetch, abandon_after)

    @transactional
    def peek(self, tr: TransactionContext, max: bool = False) -> T | None:
        """Return the value :meth:`pop` would take, without removing it, or None when empty.

        Poison items are skipped, as :meth:`pop` would move them aside. Raises TypeError
        when ``max`` is not a bool, ValueError when a key at that end is not one of this
        queue's items, QueueTypeError when the queue records another type, number of shards
        or codec. Cost: as :meth:`pop` without the writes; on a queue of several shards,
        first a snapshot range read (``limit=1``) of each shard's end and first turn, issued
        together, to find the shard whose first item has the best priority.
        """
        check_flag(max, "max")
        self._router.check_type(tr)
        first: T | None = self._ends[_END[max]].peek(tr)
        return first

    def peek_min(self, tr: TransactionContext) -> T | None:
        """Return the oldest value of the lowest priority, or None when empty (one range read)."""
        return self.peek(tr, max=False)

    def peek_max(self, tr: TransactionContext) -> T | None:
        """Return the oldest value of the highest priority, or None when empty (two range reads)."""
        return self.peek(tr, max=True)

    def peek_many_with_priorities(
        self, tr: TransactionContext, n: int | None
    ) -> list[tuple[int, T]]:
        """Return :meth:`peek_many`'s values, each with its priority: up to ``n`` pairs
        ``(priority, value)`` (None: every item), in the same order (the next ``n`` of
        :meth:`pop_min`, then the items of message groups, group by group).

        Raises and costs as :meth:`peek_many` (the priority is read from each item's key:
        nothing more is read).
        """
        return [(shard.where_of(key)[0], value) for shard, key, value in self._peeked(tr, n)]

    def _oldest(self, tr: Any) -> Any:
        return self._ends["min"].peek(tr)
