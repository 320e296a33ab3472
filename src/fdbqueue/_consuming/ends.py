"""One end of a queue that consumers take from: plainly, in line, or under leases.

A :class:`~fdbqueue.Queue` has one end (its front); a :class:`~fdbqueue.PriorityQueue` has
two (its lowest and its highest priority). Each is an :class:`End`, composed into the queue:
the queue type says only how to read its first items (a :data:`ReadEnd`), and the end does
the rest, the same way for every queue type:

* plain takes (:meth:`End.take`, :meth:`End.take_many`): FoundationDB's recipe, a ``limit``
  range read of the first items with a read conflict range over them, then a clear;
* takes in line (:mod:`fdbqueue._consuming.sessions`): with ``high_contention=True`` a take given a
  Database runs as a one-call consumer session (``prefetch=0``), so that many consumers take
  without conflicting; :meth:`End.consumer` opens a longer session, with prefetch if asked;
* claims under leases (:mod:`fdbqueue._delivery.leases`), plain or in line in the same way;
* blocking (:mod:`fdbqueue._transactions.waiting`): on a watch of the queue's signal key.

While the queue is paused (:mod:`fdbqueue._storage.pause`) every one of them finds nothing
and writes nothing: a plain take checks in :meth:`End.take_batch_in`, a claim in
:meth:`End.claim_batch`, a session in its attempt (:mod:`fdbqueue._consuming.sessions`),
each with its first reads.

Every take given a Database takes effect exactly once (:mod:`fdbqueue._transactions.receipts`).

Source followed: FoundationDB's "Queues" and "Priority Queues" recipes (plain takes); the
rank-matched line of :mod:`fdbqueue._consuming.sessions` for high contention.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from fdbqueue._consuming.sessions import Consumer
from fdbqueue._delivery.claims import Leases, claimed_something, leases_unexpired
from fdbqueue._delivery.delays import DelayedItems, soonest
from fdbqueue._delivery.leases import Lease
from fdbqueue._storage import taking
from fdbqueue._storage.ages import BUCKET
from fdbqueue._storage.features import DELAYS, GROUPS, JOBS, LEASES, PAUSE
from fdbqueue._storage.job_records import job_hint
from fdbqueue._storage.store import ItemStore
from fdbqueue._storage.taking import MOVED_ASIDE, Taken, TakenItem
from fdbqueue._transactions.receipts import exactly_once
from fdbqueue._transactions.transactional import (
    AnyContext,
    is_database,
    require_writable,
    runs_own_transaction,
)
from fdbqueue._transactions.waiting import take_blocking

__all__ = ["End", "ReadEnd"]


#: :meth:`End._first_item`'s answer when the take needs the full plan.
_REPLAN = object()


def _taken(value: Any) -> bool:
    """Whether a take's attempt wrote: it took a value, or moved poison aside."""
    return value is not None


#: ``read(tr, n, snapshot, groups=True)``: up to ``n`` items at one end, in take order (fewer
#: is allowed: a take reads again for the rest); the groups' turns among them unless
#: ``groups`` is False (a queue that never had a group). Not a snapshot read, it adds the
#: read conflict ranges a plain take needs (the end up to the last item returned, or the
#: whole end when empty); a snapshot read adds none.
ReadEnd = Callable[..., list[Any]]
#: ``plain_read(tr, n, snapshot)``: what a :data:`ReadEnd` reads with ``groups`` False (a
#: queue that never had a message group), called without the shard's call: the store's
#: :meth:`~fdbqueue._storage.store.ItemStore.read_first` at a front or min end.
PlainRead = Callable[[Any, int, bool], list[Any]]
#: ``read_ahead(tr)``: what a :data:`PlainRead` of one item reads (not a snapshot), and the
#: item behind it, looked at without a read conflict (up to two items):
#: :meth:`~fdbqueue._storage.store.ItemStore.read_first_ahead`.
ReadAhead = Callable[[Any], list[Any]]


class End:
    """One end of a queue: what takes, claims and consumer sessions share there.

    Args:
        store: the queue's items and metadata.
        leases: the queue's leases (shared by its ends).
        delays: the queue's delayed items (shared by its ends): every take promotes those due.
        read: reads the first items at this end (:data:`ReadEnd`).
        plain_read: what ``read`` reads with ``groups`` False (:data:`PlainRead`).
        read_ahead: the same, with a look at the item behind (:data:`ReadAhead`); None for an
            end whose take does not read its items in order from a key (a ``max`` end).
        peek: returns the value a take here would return without removing it (None: none).
        name: the end's name (``"front"``, ``"min"``, ``"max"``): its line of requests is
            at ``metadata[("line", name)]``.
        high_contention: takes and claims given a Database go through the line.
        abandon_after: seconds after which the line's requests of a dead consumer are
            cleared (:mod:`fdbqueue._consuming.sessions`).
        action: the verb error messages use (``"dequeue"``, ``"pop"``).
    """

    def __init__(
        self,
        store: ItemStore,
        leases: Leases,
        delays: DelayedItems,
        read: ReadEnd,
        *,
        plain_read: PlainRead,
        read_ahead: ReadAhead | None,
        peek: Callable[[Any], Any],
        name: str,
        high_contention: bool,
        abandon_after: float,
        action: str,
    ) -> None:
        self.store = store
        self.receipts = store.receipts
        self.leases = leases
        self.delays = delays
        self.read = read
        self.plain_read = plain_read
        self.read_ahead = read_ahead
        #: The id of the job whose item was behind the last one a plan's take or claim here
        #: took (a hint; None: none, or not a job's): the next one sends the read of that
        #: job's record with its front read (:meth:`_front_ahead`).
        self.next_job: bytes | None = None
        #: ``peek(tr)``: the value a take here would return, or None (nothing is removed)
        self.peek = peek
        self.line = store.metadata.pack(("line", name))
        #: the end's name, ``"front"``, ``"min"`` or ``"max"``
        self.name = name
        self.high_contention = high_contention
        self.abandon_after = abandon_after
        self.action = action
        #: which `began` records its plain takes clear (:meth:`.ItemAges.taken`)
        self.lower = name == "front" or name == "min"
        self.higher = name == "max"
        #: Whether the last one-call session met other consumers (a hint, see
        #: :attr:`fdbqueue._consuming.sessions.Consumer.contended`).
        self.contended = False

    def front(self, tr: AnyContext, n: int) -> list[Any]:
        """The :data:`~fdbqueue._storage.taking.Front` of a plain take: read with conflict
        ranges, the groups' items among them."""
        return self.read(tr, n, False, True)

    def consumer(self, database: Any, prefetch: int, abandon_after: float) -> Consumer:
        """A consumer session in this end's line (arguments checked by :class:`Consumer`)."""
        return Consumer(
            self.store,
            database,
            line=self.line,
            read=self.read,
            leases=self.leases,
            delays=self.delays,
            prefetch=prefetch,
            abandon_after=abandon_after,
        )

    def _in_line(self, tr: AnyContext) -> bool:
        return self.high_contention and is_database(tr)

    def _one_call(self, database: Any, call: Callable[[Consumer], Any]) -> Any:
        """``call`` on a consumer session opened for it alone (``prefetch=0``), which starts
        from the contention the previous one met (a hint shared by this end's callers)."""
        with self.consumer(database, 0, self.abandon_after) as session:
            session.contended = self.contended
            try:
                return call(session)
            finally:
                self.contended = session.contended

    # -- taking -----------------------------------------------------------------------------

    def take(self, tr: AnyContext, block: bool, seconds: float | None) -> Any:
        """Take one value (arguments checked by the caller); None when there is none."""
        if self.high_contention and is_database(tr):  # in line
            return self._one_call(tr, lambda session: session.take(block=block, timeout=seconds))
        if block:
            return take_blocking(
                tr,
                self._take_one,
                self.store.signal_key,
                seconds,
                self.seconds_until_waiting,
                queue=self.store.metric_name,
            )
        return self._take_one(tr)

    def seconds_until_waiting(self) -> float | None:
        """Seconds until an item may wait here without any write (the first lease in flight
        expires, or the first delayed item falls due), as the last take or claim that found
        nothing saw it; None when it saw neither. How long a blocked take or claim may
        sleep at most: expiries and due times change nothing a watch sees. None while the
        last take found the queue paused: only a signal (``resume``'s) wakes it then."""
        if self.store.pause.seen:
            return None
        return soonest(self.leases.seconds_until_expiry(), self.delays.seconds_until_due())

    def _take_one(self, tr: AnyContext, _deadline: float | None = None) -> Any:
        """One take: given a Database, in a transaction of its own run by the shard's
        receipts (exactly once, as :func:`~fdbqueue._transactions.receipts.exactly_once`
        runs it, without its wrapper: the hottest call); given a Transaction, inside it."""
        if runs_own_transaction(tr, self.action):  # (a Transaction given is checked there)
            run = self.receipts.run
            value = run(tr, self.take_in, wrote=_taken)
            while value is MOVED_ASIDE:  # it only moved poison aside (and committed that)
                value = run(tr, self.take_in, wrote=_taken)
            return value
        value = self.take_in(tr)
        while value is MOVED_ASIDE:
            value = self.take_in(tr)
        return value

    def take_in(self, tr: AnyContext) -> Any:
        """One take inside ``tr`` (a writable Transaction): the value taken, None when there is
        none, or :data:`~fdbqueue._storage.taking.MOVED_ASIDE` when it only moved poison
        aside.

        A queue whose feature record showed no feature but jobs
        (:mod:`fdbqueue._storage.features`) takes by the plan without a feature's step: the
        same reads and writes as :meth:`take_batch_in` of one item, without its steps (the
        first item by :meth:`_first_item`, counted out of the size; a job's ``succeeded``,
        :meth:`~fdbqueue._storage.jobs.Jobs.taken`). When that take needs its full plan (the
        record shows a feature now, or the item does not decode, or is a cancelled job's),
        nothing was written, and :meth:`take_batch_in` takes in the same transaction."""
        store = self.store
        known = store.features.known  # (planned(), without its call on the hot path)
        if known is not None and not known & ~JOBS:
            features = store.features
            record = features.read(tr)
            if known & JOBS:  # their records are read, the next one's with the front
                first, ahead = self._front_ahead(tr)
            else:
                first, ahead = self.plain_read(tr, 1, False), None
            bits = features.check(record)
            if bits is not None and not bits & ~JOBS:
                if not first:
                    return None
                taken = self._first_item(tr, first[0], bits, ahead)
                if taken is not _REPLAN:
                    _key, _encoded, value, job, job_record = taken
                    if job is not None:  # handed to the caller: done
                        store.jobs.taken(tr, job, job_record)
                    store.dequeued(tr, 1)
                    return value
        values = self.take_batch_in(tr, 1)
        if values is MOVED_ASIDE:
            return MOVED_ASIDE
        return values[0] if values else None

    def _front_ahead(self, tr: AnyContext) -> tuple[list[Any], Any]:
        """The first item of a queue that used jobs (the plain read's, with its read conflict
        range) and the read of the record of the job expected there, sent together: the
        job :attr:`next_job` names, the item behind the one the last take or claim here
        took (a snapshot read; :meth:`_first_item` adds its read conflict when the item is
        that job's). The item behind the first becomes the next :attr:`next_job`. So in a
        loop of takes or claims a job's costs one round trip, not two; with consumers
        racing, a hint that missed costs a point read that nothing waits on. An end without
        :attr:`read_ahead` reads as :attr:`plain_read`. Returns ``(first, ahead)``:
        ``ahead`` is ``(job id, its record's key, the record's future)`` or None."""
        read_ahead = self.read_ahead
        if read_ahead is None:
            return self.plain_read(tr, 1, False), None
        hint = self.next_job
        ahead = None
        if hint is not None:
            key = self.store.jobs.key(hint)
            ahead = (hint, key, tr.snapshot.get(key))
        found = read_ahead(tr)
        if len(found) < 2:
            self.next_job = None
            return found, ahead
        self.next_job = job_hint(found[1].key, found[1].value)
        return found[:1], ahead

    def _first_item(self, tr: AnyContext, item: Any, bits: int, ahead: Any = None) -> Any:
        """Take ``item``, the first at this end, as :func:`~fdbqueue._storage.taking.take` takes
        an item of a queue that used no feature but (in ``bits``) jobs: check its key
        (:meth:`~fdbqueue._storage.store.ItemStore.unpack_position`; a foreign key raises),
        decode its value, read a job's record (a read conflict: a cancel at the same time
        conflicts), clear it, and clear the ``began`` records behind it when it began a
        bucket (:meth:`~fdbqueue._storage.ages.ItemAges.taken`). The fields of its
        :class:`~fdbqueue._storage.taking.TakenItem` (not counted out of the size), or
        :data:`_REPLAN` for a value that does not decode or a cancelled job's (the full take
        moves it aside, or drops it), nothing written then."""
        store = self.store
        key = item.key
        position = store.unpack_position(key)  # a foreign key raises before any write
        encoded = bytes(item.value)
        if bits:  # a job's item: its id in its key, its header back (held values keep it)
            encoded = store.item_bytes(position, encoded)
        try:
            value = store.decode(encoded, bits)
        except Exception:  # a codec may raise anything on foreign bytes: the full take's
            return _REPLAN
        job = record = None
        if bits:  # a job's item: its record says whether it goes on
            job, record, cancelled = taking.job_of_taken(store, tr, encoded, ahead)
            if cancelled:
                return _REPLAN
        del tr[key]
        ages = store.ages
        if position[ages.prefix_length] % BUCKET == 0:  # it begins a bucket: the one take
            # in BUCKET that clears records (ItemAges.begins_bucket, without its call)
            ages.taken(tr, position, position, lower=self.lower, higher=self.higher)
        return key, encoded, value, job, record

    def _claim_first(self, tr: AnyContext, seconds: float) -> Any:
        """:meth:`claim_batch` of one item, planned for a queue of one shard that used no
        feature but leases and jobs: the feature record, the first lease (a snapshot probe) and the
        front read together; when no lease waits (expired or released), the first item
        (:meth:`_first_item`) leased (:meth:`~fdbqueue._delivery.claims.Leases.lease_taken`).
        The leases; the reads (:data:`Reads`) when a lease waits, for the full claim to go on
        with; or :data:`_REPLAN` when the claim needs its full plan (as a take's, :meth:`take_in`);
        nothing written but for the leases."""
        store = self.store
        features = store.features
        record = features.read(tr)
        probe = self.leases.first_lease(tr.snapshot)
        known = features.known
        if known is not None and known & JOBS:  # their records are read, the next with the front
            first, ahead = self._front_ahead(tr)
        else:
            first, ahead = self.plain_read(tr, 1, False), None
        bits = features.check(record)
        if bits is None or bits & ~(LEASES | JOBS):
            return _REPLAN
        version = tr.get_read_version().wait()
        probed = list(probe)
        if self.leases.note(probed, version, by_versions=True):  # and when it expires
            return bits, None, [probed], None, first, ahead  # a lease waits: the full claim's
        if not first:
            return []
        taken = self._first_item(tr, first[0], bits & JOBS, ahead)
        if taken is _REPLAN:
            return _REPLAN
        return self.leases.lease_taken(tr, [TakenItem(*taken)], version, seconds, bits)

    def take_many(self, tr: AnyContext, n: int) -> list[Any]:
        """Take up to ``n`` values in one transaction (``n`` checked by the caller, > 0)."""
        values = self.take_batch(tr, n)
        while values is MOVED_ASIDE:
            values = self.take_batch(tr, n)
        return values  # type: ignore[no-any-return]

    @exactly_once(wrote=bool)
    def take_batch(self, tr: AnyContext, n: int) -> Any:
        require_writable(tr, f"{self.action}_many")
        return self.take_batch_in(tr, n)

    def take_batch_in(self, tr: AnyContext, n: int) -> Any:
        """Take up to ``n`` waiting items inside ``tr`` in take order: the items of leases
        that expired or were released first (soonest expiry first,
        :meth:`~fdbqueue._delivery.claims.Leases.take_expired`), then the queue's (delayed
        items that fell due promoted first). Returns the values, or
        :data:`~fdbqueue._storage.taking.MOVED_ASIDE` when it only moved items to the dead
        letters. It notes when the first lease in flight expires (:meth:`seconds_until_waiting`:
        a blocked take wakes then). A paused queue (:mod:`fdbqueue._storage.pause`): ``[]``,
        nothing written: the paused key's read is sent with the others and checked before the
        first write. Cost: the take's own reads and the feature record's, and one key read
        per feature the queue used (:meth:`_read_front`)."""
        reads = self._read_front(tr, n)
        _bits, paused, first_lease, _looked, _first, _ahead = reads
        if paused is not None and self.store.pause.holds(paused):
            return []
        expired: list[Any] = []
        moved = False
        if first_lease is not None:
            version = tr.get_read_version().wait()
            first = list(first_lease)
            if self.leases.note(first, version, by_versions=True):  # and when it expires
                expired, moved = self.leases.take_expired(tr, n, first)
            if len(expired) == n:
                return expired
        taken = self._take_items(tr, n - len(expired), None, moving=False, reads=reads)
        if taken.items:
            self.store.dequeued(tr, len(taken.items))
            if not expired:
                return [item.value for item in taken.items]
        values = expired + [item.value for item in taken.items]
        if values:
            return values
        if taken.moved_aside or moved:
            return MOVED_ASIDE
        return []

    # -- claiming ---------------------------------------------------------------------------

    def claim(
        self, tr: AnyContext, seconds: float, block: bool, wait: float | None
    ) -> Lease[Any] | None:
        """Claim one item under a lease of ``seconds`` (arguments checked by the caller)."""
        if self._in_line(tr):
            lease: Lease[Any] | None = self._one_call(
                tr, lambda session: session.claim(seconds, block=block, timeout=wait)
            )
            return lease
        if not block:
            return self._claim_one(tr, seconds)
        lease = take_blocking(
            tr,
            lambda tr, _deadline: self._claim_one(tr, seconds),
            self.store.signal_key,
            wait,
            self.seconds_until_waiting,
            queue=self.store.metric_name,
        )
        return lease

    def _claim_one(self, tr: AnyContext, seconds: float) -> Lease[Any] | None:
        claimed = self.claim_many(tr, 1, seconds)
        return claimed[0] if claimed else None

    def claim_many(self, tr: AnyContext, n: int, seconds: float) -> list[Lease[Any]]:
        """Claim up to ``n`` items in one transaction (arguments checked by the caller); a
        batch that only moved items to the dead letters commits, and the next goes on.
        Given a Database, each batch runs in a transaction of its own run by the receipts,
        as :meth:`claim_batch` runs it, without its wrapper (a hot call, as
        :meth:`_take_one`'s); given a Transaction (checked: TypeError for a snapshot view),
        inside it."""
        if runs_own_transaction(tr, "claim"):
            run = self.receipts.run
            body = functools.partial(self.claim_batch_in, seconds=seconds, n=n)
            claimed = run(tr, body, wrote=claimed_something, still_good=leases_unexpired)
            while claimed is MOVED_ASIDE:
                claimed = run(tr, body, wrote=claimed_something, still_good=leases_unexpired)
        else:
            claimed = self.claim_batch_in(tr, seconds, n)
            while claimed is MOVED_ASIDE:
                claimed = self.claim_batch_in(tr, seconds, n)
        leases: list[Lease[Any]] = claimed
        return leases

    @exactly_once(wrote=claimed_something, still_good=leases_unexpired)
    def claim_batch(self, tr: AnyContext, seconds: float, n: int) -> Any:
        """:meth:`claim_batch_in`, given a Database exactly once (in a transaction of its own,
        :func:`~fdbqueue._transactions.receipts.exactly_once`), given a Transaction inside it
        (a writable one: TypeError for a snapshot view)."""
        require_writable(tr, "claim")
        return self.claim_batch_in(tr, seconds, n)

    def claim_batch_in(self, tr: AnyContext, seconds: float, n: int) -> Any:
        """Claim up to ``n`` items in one transaction (:meth:`Leases.claim_many`); given a
        Database, exactly once, and never returning a lease that expired before the call
        learned its commit's outcome (it claims again then). Its reads are sent together,
        as a take's (:meth:`take_batch_in`): the paused key's, the first leases' (snapshot
        probes, :meth:`Leases.probe`), the delayed items' hint, the codec record, the front;
        the expired leases are read (with their read conflict range) only when a probe
        finds one. A paused queue: ``[]``, nothing written."""
        reads: Any = _REPLAN
        plain = not self.store.features.planned() & ~(LEASES | JOBS)
        if n == 1 and plain and not self.leases.others:
            reads = self._claim_first(tr, seconds)
            if isinstance(reads, list):
                return reads  # the leases
        if reads is _REPLAN:
            reads = self._read_front(tr, n, claiming=True)
        bits, paused, probed, _looked, _first, _ahead = reads
        if paused is not None and self.store.pause.holds(paused):
            return []
        take_items = functools.partial(self._take_items, reads=reads)
        if probed is None:  # the queue never had a lease
            probed = self.leases.unused()
        return self.leases.claim_many(tr, take_items, seconds, n, probed=probed, seen=bits)

    def _read_front(
        self, tr: AnyContext, n: int, claiming: bool = False, plan: int | None = None
    ) -> Reads:
        """Send a take's first reads for ``n`` items, all before any is waited on (one round
        trip): the feature record's and, of the features it planned
        (:meth:`~fdbqueue._storage.features.FeatureRecord.planned`), the paused key's, the
        first lease's (a snapshot probe: whether a lease waits; a claim's probes every
        shard's), the delayed items' hint, the groups' count (with the front); then the
        front. When the record shows a feature the plan lacked (used for the first time
        since), they are sent again by the new plan, before anything is written. Only when
        the probe finds an expired lease are the waiting leases read with their conflict
        range, the probed lease's held value with them (a second round trip)."""
        store = self.store
        if plan is None:
            plan = store.features.planned()
        codec_record = store.recorded_codec(tr)
        paused = store.pause.look(tr) if plan & PAUSE else None
        first_lease = None
        if plan & LEASES:
            first_lease = (
                self.leases.probe(tr.snapshot) if claiming else self.leases.first_lease(tr.snapshot)
            )
        looked = self.delays.look(tr) if plan & DELAYS else None
        ahead = None
        try:
            if plan & GROUPS:
                first = self.read(tr, n, False, True)
            elif n == 1 and plan & JOBS:  # the next job's record read with the front
                first, ahead = self._front_ahead(tr)
            else:
                first = self.plain_read(tr, n, False)
        except ValueError:  # a foreign key: say first if the queue is of another type
            store.check_codec(codec_record)
            raise
        bits = store.check_codec(codec_record)
        if bits & ~plan:  # a feature used for the first time since the plan was made
            return self._read_front(tr, n, claiming, plan | bits)
        return bits, paused, first_lease, looked, first, ahead

    def _take_items(
        self,
        tr: AnyContext,
        n: int,
        budget: int | None,
        *,
        moving: bool = True,
        reads: Reads | None = None,
    ) -> Taken:
        """Take up to ``n`` items at this end (:func:`fdbqueue._storage.taking.take`), after
        promoting the delayed items due (:mod:`fdbqueue._delivery.delays`), so that a due item is
        taken in its place (before the queued items of a worse priority, at a PriorityQueue's ends).
        The reads are :meth:`_read_front`'s (sent now if None); when the hint says nothing is
        due, the take goes on with the items read, else it promotes (within half the budget:
        its bytes and the take's stay within FoundationDB's limit) and reads the end again."""
        bits, _paused, _first_lease, looked, first, ahead = (
            self._read_front(tr, n) if reads is None else reads
        )
        if len(first) > n:
            first = first[:n]
        front: taking.Front
        if looked is not None and self.delays.promote(tr, looked):
            rest = None if budget is None else budget // 2
            front = self.front
            budget = rest
        else:
            front = taking.starting_with(first, self.front)
        return taking.take(
            self.store,
            tr,
            front,
            n,
            budget,
            moving=moving,
            codec_record=taking.CHECKED,
            end=self.name,
            bits=bits,
            ahead=ahead,
        )


#: A take's first reads (:meth:`End._read_front`): the features the queue used (bits of
#: :mod:`fdbqueue._storage.features`); the futures of the paused key's, the first lease's
#: and the delayed items' hint's reads, each None when not read (the queue never used that
#: feature); the first items read; and the record read of the job expected first
#: (:meth:`End._front_ahead`'s ``ahead``, or None). (A plain tuple: one is made per take,
#: on the hot path.)
Reads = tuple[int, Any, Any, Any, list[Any], Any]
