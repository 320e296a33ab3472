"""What a lease holder does, whatever the queue type: :class:`LeasedQueue`, the base of
:class:`~fdbqueue.Queue` and :class:`~fdbqueue.PriorityQueue` for ``ack``, ``ack_many``,
``release``, ``dead_letter`` and ``extend``, and ``work``, the worker loop
(:mod:`fdbqueue.worker`) that claims, runs a handler and does the rest. They act on the
queue's leases whatever end the items were claimed from (on a sharded queue, in the shard
that holds the lease). What happens to dead letters is
:mod:`fdbqueue._queues.dead_lettered_queue`'s; listing leases and ``info`` are
:mod:`fdbqueue._queues.stored_queue`'s.

Source followed: FoundationDB's "Queues" recipe; ``fdb/subspace_impl.py`` for the layer's
conventions (``tr`` first, ``@transactional``); message queues' visibility timeouts for the
leases (:doc:`guarantees`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from fdbqueue import worker
from fdbqueue._delivery.leases import Lease, check_lease_seconds
from fdbqueue._queues.dead_lettered_queue import DeadLetteredQueue
from fdbqueue._queues.stored_queue import T
from fdbqueue._transactions.receipts import exactly_once
from fdbqueue._transactions.transactional import (
    TransactionContext,
    is_database,
)

__all__ = ["LeasedQueue"]

#: The value type of a lease given to :meth:`LeasedQueue.extend` (and of the one returned).
V = TypeVar("V")


class LeasedQueue(DeadLetteredQueue[T]):
    """The lease holder's calls and the worker loop, shared by every queue type."""

    @property
    def max_deliveries(self) -> int | None:
        """Deliveries after which an item whose leases keep expiring (or that is released
        each time) becomes a dead letter; None: no limit."""
        max_deliveries: int | None = self._parts[0]._leases.max_deliveries
        return max_deliveries

    def _holder(self, lease: Any, action: str) -> LeasedQueue[Any]:
        """The part (shard) whose keys hold ``lease``: this queue when unsharded.

        Raises:
            TypeError: ``lease`` is not a Lease.
            ValueError: a lease of another queue.
        """
        if not isinstance(lease, Lease):
            raise TypeError(f"{action} needs a Lease from claim(), not {type(lease).__name__}")
        holder: LeasedQueue[Any] = self._parts.holding(lease.key)
        return holder

    # -- held leases ------------------------------------------------------------

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
        holds = self._parts[0]._leases.holds
        batch = holds.check_many(leases, "ack_many", self._parts.holds_key)
        groups: dict[int, tuple[LeasedQueue[Any], list[Lease[Any]]]] = {}
        for lease in batch:  # by the part (shard) that holds each: this queue when unsharded
            part: LeasedQueue[Any] = self._parts.holding(lease.key)
            groups.setdefault(id(part), (part, []))[1].append(lease)
        if groups:
            batches = list(groups.values())
            batches[0][0]._ack_many(tr, batches)

    @exactly_once
    def _ack_many(
        self, tr: TransactionContext, batches: list[tuple[LeasedQueue[Any], list[Lease[Any]]]]
    ) -> None:
        for part, leases in batches:  # one part (shard) each: exactly once in this one's receipts
            part._leases.holds.ack_many(tr, leases)

    def ack(self, tr: TransactionContext, lease: Lease[Any]) -> None:
        """Remove a claimed item for good: its processing is done.

        Args:
            tr: a Database, Tenant or Transaction (then it composes with your own writes,
                for example the results of processing the item).
            lease: what ``claim`` returned.

        Raises:
            TypeError: ``lease`` is not a :class:`Lease`, or ``tr`` has the wrong type.
            ValueError: the lease belongs to another queue.
            LeaseNotHeldError: acknowledged, released or extended already, or expired and
                claimed again.
            LeaseExpiredError: the lease expired (the item will be delivered again).

        Nothing changes when it raises. Given a Database, it takes effect exactly once even
        when a commit's outcome is unknown (:doc:`guarantees`). Cost: one point
        read (a read conflict on the lease) and two clears.
        """
        self._holder(lease, "ack")._ack(tr, lease)

    @exactly_once
    def _ack(self, tr: TransactionContext, lease: Lease[Any]) -> None:
        self._leases.holds.ack(tr, lease)

    def _ack_with(self, database: Any, lease: Lease[Any], body: Callable[[Any], object]) -> None:
        """Run ``body(tr)``, then acknowledge ``lease``, in one transaction of ``database``,
        exactly once by the receipts of the lease's shard (the worker's ``transactional``
        mode): what ``body`` writes and the acknowledgement commit together or not at all.
        Raises what ``body`` raises, or what :meth:`ack` raises; nothing commits then."""
        part = self._holder(lease, "ack")

        def body_then_ack(tr: Any) -> None:
            body(tr)
            part._leases.holds.ack(tr, lease)

        part._store.receipts.run(database, body_then_ack)

    def release(
        self, tr: TransactionContext, lease: Lease[Any], *, delay: float | None = None
    ) -> None:
        """Give a claimed item back unprocessed: the next ``claim`` takes it first; with
        ``delay``, not before that many seconds (a retry with backoff).

        Args:
            delay: seconds (at most 12 hours) before the item can be claimed again; None or
                0: at once. Measured with read versions, as leases are.

        Raises as :meth:`ack` (and TypeError or ValueError for a bad ``delay``); nothing
        changes when it raises. The delivery count is kept, so releasing counts towards
        ``max_deliveries``. Cost: one point read, one clear, one set.
        """
        plain = delay is None or (type(delay) in (int, float) and delay == 0)
        seconds = 0.0 if plain else check_lease_seconds(delay)
        self._holder(lease, "release")._release(tr, lease, seconds)

    @exactly_once
    def _release(self, tr: TransactionContext, lease: Lease[Any], seconds: float) -> None:
        self._leases.holds.release(tr, lease, seconds)

    def dead_letter(self, tr: TransactionContext, lease: Lease[Any], reason: str) -> None:
        """Move a claimed item to the dead letters now, with ``reason`` (for instance the
        error its processing raised), instead of releasing it for another delivery.

        Raises as :meth:`ack`, and TypeError when ``reason`` is not a str; nothing changes
        when it raises. Cost: one point read, a clear and a set (the value stays where it is
        held).
        """
        if not isinstance(reason, str):
            raise TypeError(f"reason must be a str, not {type(reason).__name__}")
        self._holder(lease, "dead_letter")._dead_letter(tr, lease, reason)

    @exactly_once
    def _dead_letter(self, tr: TransactionContext, lease: Lease[Any], reason: str) -> None:
        self._leases.holds.dead_letter(tr, lease, reason)

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
        return self._holder(lease, "extend")._extend(tr, lease, check_lease_seconds(seconds))

    @exactly_once
    def _extend(self, tr: TransactionContext, lease: Lease[V], seconds: float) -> Lease[V]:
        return self._leases.holds.extend(tr, lease, seconds)

    # -- the worker loop --------------------------------------------------------------------

    def work(
        self,
        database: Any,
        handler: Callable[[T], object] | Callable[[Any, T], object],
        *,
        lease: float,
        concurrency: int = 1,
        stop: threading.Event | None = None,
        backoff: float = worker.DEFAULT_BACKOFF,
        max_backoff: float = worker.DEFAULT_MAX_BACKOFF,
        handle_signals: bool = True,
        until_empty: bool = False,
        transactional: bool = False,
    ) -> worker.WorkSummary:
        """Process items with ``handler`` until ``stop`` is set: claim, run, acknowledge; on
        an exception release with a backoff delay, or move to the dead letters on the last
        delivery (:mod:`fdbqueue.worker`).

        Args:
            database: a Database or Tenant.
            handler: called with each item's value, in a worker thread; returning means
                done (the lease is acknowledged), raising means failed.
            lease: seconds each claim's lease lasts (> 0, at most 12 hours); a heartbeat
                extends the lease of a running job every ``lease / 3`` seconds.
            concurrency: worker threads (>= 1), each running one job at a time.
            stop: a ``threading.Event``; once set, no new item is claimed, running jobs
                finish, and ``work`` returns. None: run until SIGINT or SIGTERM.
            backoff: seconds before the first retry of a failed item; doubled per delivery
                (jittered) up to ``max_backoff``, and at most 12 hours.
            handle_signals: in the main thread, SIGINT and SIGTERM set ``stop`` (the first
                one; a second acts as usual).
            until_empty: return once nothing is claimable and each item this run failed
                was retried to an end (waiting at most ``max_backoff`` + 0.25 s for it):
                a batch run, like rq's burst mode.
            transactional: call ``handler(tr, value)`` inside the transaction that
                acknowledges the item, so that its writes and the acknowledgement commit
                together, exactly once (:doc:`worker`, "Exactly-once processing"); the
                handler must finish within FoundationDB's five seconds.

        Returns:
            A :class:`~fdbqueue.worker.WorkSummary`: jobs succeeded, retried, dead-lettered,
            lost, released.

        Raises:
            TypeError, ValueError: a bad argument (nothing is read or written); and
                QueueTypeError at the first claim into another queue type or codec.
            BaseException: what a handler raised that is not an Exception (SystemExit,
                KeyboardInterrupt), once every thread finished; its item was released.

        At least once (make ``handler`` idempotent): a job whose worker dies, or whose
        lease is lost, runs again. Cost per job: the claim, the ack (or
        release), and per heartbeat an extend; an idle worker renews its watch every
        second to look at ``stop``.
        """
        if not is_database(database):
            raise TypeError("work needs a Database: it runs its own transactions")
        return worker.work(
            self,
            database,
            handler,
            lease=lease,
            concurrency=concurrency,
            stop=stop,
            backoff=backoff,
            max_backoff=max_backoff,
            handle_signals=handle_signals,
            until_empty=until_empty,
            transactional=transactional,
        )
