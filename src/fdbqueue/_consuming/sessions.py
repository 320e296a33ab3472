"""Consumer sessions: rank-matched consumption that scales with consumers, with prefetch.

A consumer session (:meth:`Queue.consumer` / :meth:`PriorityQueue.consumer`) takes items in
line: each of its takes is a *request*, a key in the queue's line subspace written with a
versionstamped key (``set_versionstamped_key``), so requests sort in the order their
registering transactions committed and the line only grows at its end, as the items do. The
k-th request in line owns the k-th item. A take is one transaction: it snapshot-reads the line
to find its request's rank ``r`` and the first ``r + 1`` items, adds a read conflict key on item
``r`` only, clears that item and its request. Every completion removes a request and the item
of the same rank, so at every read version consumers are matched with different items: they
do not conflict with each other, and delivery is FIFO in request order. When the matching does
shift (a plain dequeue takes the head, a request is withdrawn or found abandoned), the read
conflict key on the item keeps every item delivered once; the loser retries.

``prefetch`` (as an AMQP consumer's prefetch count) is how many requests the session keeps
registered between its calls. With ``prefetch=0`` (the default) nothing is reserved outside a
call: when nobody is in line, a call takes the head at once (one transaction, as a plain
dequeue); otherwise it registers its request (a first transaction), then takes (a second
one), and withdraws the request when it returns without an item. With
``prefetch=1`` the transaction that takes an item also registers the next request, so an item
costs one transaction (the first too, when nobody is in line: it takes the head at once and
registers in the same transaction); the reserved place in line returns to the queue when the session
closes, and within ``abandon_after`` seconds if its process dies.

Abandoned requests never hold the line for long: a request older than ``abandon_after``
seconds, whose owner has not refreshed it since, is cleared by the first take that finds it
ahead of its own request (with a read conflict on it, so a refresh that commits first wins).
Its age is measured by both clocks, as a lease's (:mod:`fdbqueue._consuming.line`): read
versions and the wall clock, so a cluster recovery (versions jump about 100 s) does not make
a live session's request look abandoned. A session waiting for an item refreshes its requests
every third of ``abandon_after``; a prefetching session idle for longer than
``abandon_after`` between calls loses its reservation (its next call registers again).

While the queue is paused (:mod:`fdbqueue._storage.pause`), an attempt finds nothing and
writes nothing: it reads the paused key with its first reads (the line's) and stops before
any write, so it neither takes nor registers, refreshes or clears a request. A session holds
places in line, never items (the item of a place is taken in the take's transaction), so a
prefetching session hands out nothing while paused either; its places stay in line, not
refreshed (after ``abandon_after`` others may clear them as abandoned, and the session then
registers again).

Exactly once: each take runs through the queue's receipts (:doc:`guarantees`).
The line's keys and how a request is registered, refreshed, found abandoned and withdrawn:
:mod:`fdbqueue._consuming.line`.

Source followed: FoundationDB's "Queues" recipe for the items; versionstamps
(``set_versionstamped_key``, developer guide "Versionstamps") for a line that sorts in commit
order; the design measured in the project's contention research (rank-matched requests).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from typing import Any

from fdbqueue import metrics
from fdbqueue._checks import check_count, check_seconds
from fdbqueue._consuming.line import MAX_PREFETCH, OWNER_BYTES, Line
from fdbqueue._delivery.claims import Leases, leases_unexpired
from fdbqueue._delivery.delays import DelayedItems, soonest
from fdbqueue._delivery.leases import check_lease_seconds
from fdbqueue._storage import taking
from fdbqueue._storage.store import ItemStore
from fdbqueue._storage.taking import MOVED_ASIDE
from fdbqueue._transactions.transactional import is_database
from fdbqueue._transactions.waiting import check_blocking_arguments, take_blocking

__all__ = ["DEFAULT_ABANDON_AFTER", "MAX_ABANDON_AFTER", "Consumer", "check_abandon_after"]

#: The logger, by its documented name (docs/observability.rst), whatever the module.
logger = logging.getLogger("fdbqueue.consumers")

#: Seconds (of versions and of the wall clock) after which a request nobody refreshed
#: counts as abandoned.
DEFAULT_ABANDON_AFTER = 5.0
#: The longest ``abandon_after`` accepted: a day.
MAX_ABANDON_AFTER = 24 * 60 * 60

#: One take at a rank in a transaction: (TAKEN, what), (MOVED_ASIDE, None), or None when there
#: is nothing for that rank.
TakeAt = Callable[[Any, int], "tuple[str, Any] | None"]

#: What an attempt found (the first element of its outcome).
TAKEN, WAITING, REGISTERED, WITHDRAWN = "taken", "waiting", "registered", "withdrawn"
#: What an attempt that found the queue paused returns (it wrote nothing).
PAUSED = "paused"


def check_prefetch(prefetch: Any) -> None:
    """Raise TypeError unless ``prefetch`` is an int, ValueError unless it is in 0-255 (a
    session's requests in line are numbered by one byte:
    :data:`~fdbqueue._consuming.line.MAX_PREFETCH`)."""
    check_count(prefetch, "prefetch")
    if prefetch > MAX_PREFETCH:
        raise ValueError(
            f"prefetch must be <= {MAX_PREFETCH} (a session's requests in line are numbered "
            f"by one byte), not {prefetch}"
        )


def check_abandon_after(abandon_after: Any) -> float:
    """``abandon_after`` as seconds; raises TypeError (not a number) or ValueError (NaN,
    not > 0, or over :data:`MAX_ABANDON_AFTER`)."""
    seconds = check_seconds(abandon_after, "abandon_after")
    if not 0 < seconds <= MAX_ABANDON_AFTER:
        raise ValueError(
            f"abandon_after must be > 0 and at most {MAX_ABANDON_AFTER} seconds, "
            f"not {abandon_after}"
        )
    return seconds


def _needs_receipt(outcome: tuple[str, Any]) -> bool:
    """Whether an attempt's outcome needs a receipt: every outcome that wrote, except a
    withdrawal. A registration or a refresh that timed out (1031) and landed later would
    put a request nobody waits for in line, ahead of the next ones (a receipt fences it off);
    a withdrawal only clears requests this session read, which may be cleared twice. A
    paused attempt wrote nothing."""
    return outcome[0] not in (WITHDRAWN, PAUSED)


class Consumer:
    """A consumer session on one queue: takes items in line (see the module docstring).

    Use it as a context manager; :meth:`close` withdraws its requests. Thread-safe in the
    sense that several threads may each use their own session; one session serves one thread
    at a time.

    Args:
        store: the queue's item store.
        database: a Database (a session runs its own transactions).
        line: the prefix of the line's keys (one line per end of a queue).
        read: reads the first items of the end (:data:`fdbqueue._consuming.ends.ReadEnd`); the
            session reads with ``snapshot=True``.
        leases: the queue's leases, for :meth:`claim`.
        delays: the queue's delayed items: each attempt promotes those due first.
        prefetch: requests kept registered between calls (an int, 0 to
            :data:`~fdbqueue._consuming.line.MAX_PREFETCH`, 255).
        abandon_after: seconds (by read versions and by the wall clock) after which an
            unrefreshed request of a dead session is cleared by others (> 0, at most a day).

    Raises:
        TypeError: ``database`` is not a Database, or an argument has the wrong type.
        ValueError: ``prefetch`` < 0 or > 255, or ``abandon_after`` NaN, <= 0 or over a day.
    """

    def __init__(
        self,
        store: ItemStore,
        database: Any,
        *,
        line: bytes,
        read: Callable[[Any, int, bool], list[Any]],
        leases: Leases | None = None,
        delays: DelayedItems | None = None,
        prefetch: int = 0,
        abandon_after: float = DEFAULT_ABANDON_AFTER,
    ) -> None:
        if not is_database(database):
            raise TypeError("a consumer session needs a Database: it runs its own transactions")
        check_prefetch(prefetch)
        seconds = check_abandon_after(abandon_after)
        self.store = store
        self.leases = leases
        self.delays = delays
        self.database = database
        self.prefetch = int(prefetch)
        self.abandon_after = seconds
        self.line = Line(line, os.urandom(OWNER_BYTES), seconds)
        self.read = read
        self._closed = False
        #: A hint: the last call met other consumers, so the next skips the fast path. A queue
        #: passes it from one one-call session to the next.
        self.contended = False
        self._may_hold = False  # requests of this session may be in line: close withdraws
        self._rank_guess: int | None = None  # its rank when it last took (0: read the head early)
        self._early: tuple[int, list[Any]] | None = None  # (rank guessed, items read early)
        self._others_in_line = False  # the last attempt saw requests of other sessions
        #: Whether this session's last call found the queue paused (it took nothing).
        self.paused = False

    # -- the public calls -----------------------------------------------------------------

    def take(self, *, block: bool = False, timeout: float | None = None) -> Any:
        """Take the item this session's request is matched with, or None.

        Args:
            block: wait (on a watch of the queue's signal key, never polling) until an item
                is there or ``timeout`` seconds pass.
            timeout: seconds to wait at most with ``block=True``; None waits without limit.

        Returns:
            The item's value, or None (no item, the queue is paused, or the timeout ran
            out).

        Raises:
            RuntimeError: the session is closed.
            TypeError, ValueError: bad ``block``/``timeout`` (nothing changes).
            FDBError: a FoundationDB error that is not retryable.

        Cost per item: one transaction with ``prefetch >= 1`` (a snapshot read of the line,
        a snapshot point read of the paused key, a snapshot read of the first ``rank + 1``
        items, one read conflict key, two clears, a versionstamped set, an atomic add); two
        with ``prefetch=0`` (the registration first). Conflicts: none between sessions while
        the matching holds.
        """
        return self._call(self._dequeue_at, block, timeout)

    def claim(self, lease: float, *, block: bool = False, timeout: float | None = None) -> Any:
        """Lease the item this session's request is matched with (an expired lease's item
        first, as :meth:`Queue.claim`), or None.

        Args:
            lease: seconds the lease lasts (measured with read versions).
            block, timeout: as for :meth:`take`; a blocked claim also wakes when a lease
                expires.

        Returns:
            A :class:`~fdbqueue.Lease`, or None.

        Raises:
            TypeError: the queue has no leases; and as for :meth:`take`.

        Cost per item: as :meth:`take`, plus the lease's record and held value (two sets)
        and a range read of expired leases.
        """
        if self.leases is None:
            raise TypeError("this queue has no leases")
        seconds = check_lease_seconds(lease)
        return self._call(functools.partial(self._claim_at, seconds=seconds), block, timeout)

    def _call(self, take_at: TakeAt, block: bool, timeout: float | None) -> Any:
        seconds = check_blocking_arguments(self.database, block, timeout)
        if self._closed:
            raise RuntimeError("this consumer session is closed")
        try:
            if not block:
                return self._attempt_until_done(take_at, wait=False)
            value = take_blocking(
                self.database,
                lambda database, deadline: self._attempt_until_done(take_at, wait=True),
                self.store.signal_key,
                seconds,
                due_in=self._wake_in,
                queue=self.store.metric_name,
            )
        except BaseException:
            self._may_hold = True  # a registration may have committed: close withdraws it
            raise
        if value is None and self.prefetch == 0 and self._may_hold:
            self._withdraw_all()
        return value

    def _wake_in(self) -> float | None:
        """Seconds until a blocked call should look again without a signal: to refresh its
        requests, or when the first lease expires or delayed item falls due; None (a signal
        only) while the queue is paused."""
        if self.paused:  # nothing to refresh or deliver while paused: a signal wakes it
            return None
        expiry = None if self.leases is None else self.leases.seconds_until_expiry()
        due = None if self.delays is None else self.delays.seconds_until_due()
        return soonest(self.abandon_after / 3, expiry, due) or 0.0

    def close(self) -> None:
        """Withdraw this session's requests (its reserved places return to the queue).
        Idempotent. Cost: one transaction reading the line and clearing its requests; none
        when the session holds no request (``prefetch=0`` after a call that returned)."""
        if not self._closed:
            self._closed = True
            if self._may_hold:
                self._withdraw_all()

    dequeue = take  # the name a Queue's users know
    pop = take  # the name a PriorityQueue's users know (its lowest priority first)

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- one attempt ------------------------------------------------------------------------

    def _attempt_until_done(self, take_at: TakeAt, wait: bool) -> Any:
        """Attempts until one takes an item or finds none for this session's rank."""
        attempts = 0
        met_others = False  # a retry, or other consumers' requests seen in line

        def attempt(tr: Any) -> tuple[str, Any]:
            nonlocal attempts
            attempts += 1
            # The head is taken directly only while consumers do not collide: a call that
            # met others sends the next one through the line, until one finds it empty.
            fast = attempts == 1 and not self.contended
            paused = self.store.pause.look(tr)  # checked before the attempt's first write
            # Another type, shard count or codec on record raises before anything changes
            # (two snapshot point reads until the records were once found right).
            self.store.check_codec(self.store.recorded_codec(tr))
            return self._attempt(tr, take_at, wait, fast, paused)

        while True:
            outcome, value = self.store.receipts.run(
                self.database, attempt, wrote=_needs_receipt, still_good=leases_unexpired
            )
            self.paused = outcome == PAUSED
            if self.paused:  # nothing written, nothing learned about the line
                return None
            met_others = met_others or attempts > 1 or self._others_in_line
            if outcome in (REGISTERED, WAITING) or (outcome == TAKEN and self.prefetch):
                self._may_hold = True
            elif outcome in (TAKEN, WITHDRAWN):
                self._may_hold = False
            if outcome in (TAKEN, WAITING, WITHDRAWN):
                self.contended = met_others
                return value if outcome == TAKEN else None
            # REGISTERED (our request is in line now) or MOVED_ASIDE: look again at once.
            attempts = 0

    def _attempt(
        self, tr: Any, take_at: TakeAt, wait: bool, fast: bool, paused: Any
    ) -> tuple[str, Any]:
        """One attempt in ``tr``; ``paused`` is the read of the paused key
        (:meth:`~fdbqueue._storage.pause.Pause.look`), checked before the first write."""
        if not fast and not self._may_hold:
            if self.store.pause.holds(paused):
                return PAUSED, None
            # No request of ours can be in line, and the head is not for us to take: register
            # at once, without reading the line (the next attempt reads it, and who is there).
            self._others_in_line = False
            self.line.register(tr, max(1, self.prefetch))
            return REGISTERED, None
        # The line read is issued first and, when this attempt will likely take the head (the
        # fast path, or this session's request was first in line last time), the read of the
        # first item too, before waiting on either: the two reads' round trips overlap (the
        # line's also fetches the read version). Further back in line, consumers are many
        # and the machine's CPU, not the round trips, is what a guess would cost.
        looked = None if self.delays is None else self.delays.look(tr)
        line = self.line.read(tr)
        self._early = None
        if (fast and not self._may_hold) or (self._may_hold and self._rank_guess == 0):
            self._early = (0, self.read(tr, 1, True))
        requests = list(line)
        read_version: int = tr.get_read_version().wait()
        if self.store.pause.holds(paused):
            return PAUSED, None
        if looked is not None and self.delays is not None and self.delays.promote(tr, looked):
            self._early = None  # read before the promoted items were written: read again
        rank = 0
        own: list[Any] = []
        is_own = self.line.is_own
        self._others_in_line = False
        for request in requests:
            if is_own(request.key):
                own.append(request)
                continue
            self._others_in_line = True
            if own:
                continue
            if self.line.abandoned(request, read_version):
                tr.add_read_conflict_key(request.key)  # a refresh that commits first wins
                del tr[request.key]
                metrics.on_commit(
                    functools.partial(
                        logger.info,
                        "fdbqueue: clearing a request in line of %s abandoned by its consumer "
                        "(not refreshed for %.1fs): the next in line takes its place",
                        self.store.metric_name,
                        self.abandon_after,
                    )
                )
            else:
                rank += 1
        if not own:
            if not requests and fast:
                # Nobody in line: take the head as a plain dequeue would, registering the
                # prefetch in the same transaction (a request registered meanwhile conflicts).
                if (outcome := take_at(tr, 0)) is not None:
                    if outcome[0] == TAKEN and self.prefetch:
                        self.line.register(tr, self.prefetch)
                    return outcome
                if not wait and self.prefetch == 0:
                    return WITHDRAWN, None
            self.line.register(tr, max(1, self.prefetch))
            return REGISTERED, None
        mine = own[0]
        tr.add_read_conflict_key(mine.key)  # withdrawn as abandoned meanwhile: retry
        self._rank_guess = rank
        outcome = take_at(tr, rank)
        if outcome is not None:
            if outcome[0] == TAKEN:
                # Without prefetch every request of ours goes (it keeps none between calls);
                # with it, the one served.
                for request in own if self.prefetch == 0 else [mine]:
                    del tr[request.key]
                if self.prefetch and len(own) <= self.prefetch:
                    self.line.register(tr, self.prefetch - len(own) + 1)
            return outcome
        if not wait and self.prefetch == 0:
            for request in own:
                del tr[request.key]
            return WITHDRAWN, None
        self.line.refresh(tr, own, read_version)
        return WAITING, None

    def _dequeue_at(self, tr: Any, rank: int) -> tuple[str, Any] | None:
        """Take the item at ``rank``: (TAKEN, value), (MOVED_ASIDE, None) when only poison
        moved aside, or None when there is no item for that rank. The item of a lease that
        expired or was released comes first, whatever the rank, as in every take
        (:meth:`~fdbqueue._delivery.claims.Leases.take_expired`)."""
        if self.leases is not None:
            expired, moved = self.leases.take_expired(tr, 1)  # the attempt checked the pause
            if expired:
                return TAKEN, expired[0]
            if moved:
                return MOVED_ASIDE, None
        taken = taking.take(self.store, tr, self._front_at(rank), 1, moving=False)
        if taken.items:
            self.store.dequeued(tr, 1)
            return TAKEN, taken.items[0].value
        if taken.moved_aside:
            return MOVED_ASIDE, None
        if self.leases is not None:
            self.leases.note_next_expiry(tr)  # a blocked take wakes when one expires
        return None

    def _claim_at(self, tr: Any, rank: int, seconds: float) -> tuple[str, Any] | None:
        """Lease an expired lease's item, else the item at ``rank`` (as :meth:`_dequeue_at`)."""
        assert self.leases is not None

        def take_items(tr: Any, n: int, budget: int | None) -> Any:
            return taking.take(self.store, tr, self._front_at(rank), n, budget)

        lease = self.leases.claim(tr, take_items, seconds)
        if lease is MOVED_ASIDE:
            return MOVED_ASIDE, None
        return None if lease is None else (TAKEN, lease)

    def _front_at(self, rank: int) -> Callable[[Any, int], list[Any]]:
        """The take front of one rank: the item at ``rank`` (read with a snapshot read of
        the first ``rank + 1`` items), with a read conflict key on it only."""

        def front(tr: Any, n: int) -> list[Any]:
            early, self._early = self._early, None  # good for the first read only
            if early is not None and (rank <= early[0] or len(early[1]) <= early[0]):
                items = early[1]  # read together with the line (fewer: the queue ends there)
            else:
                items = self.read(tr, rank + 1, True)
            if len(items) <= rank:
                return []
            item = items[rank]
            tr.add_read_conflict_key(item.key)
            return [item]

        return front

    def _withdraw_all(self) -> None:  # see fdbqueue._consuming.line.Line.withdraw
        self.line.withdraw(self.database)
        self._may_hold = False
