"""A shard: one key range of a queue, with everything that range holds, and what acts on it.

A queue of one shard (the default) is one :class:`Shard` over the queue's own subspace, the
recipes' layout byte for byte; a queue of N shards is N of them, shard ``k`` over the subspace
``P + pack((k,))`` (:mod:`fdbqueue._queues.router`). Either way a shard holds, under its
subspace (key layout: :mod:`fdbqueue._storage.store`):

* its items (the recipe's keys), its size counter and signal key: :attr:`Shard.store`;
* its leases and their held values (:attr:`Shard.leases`), its dead letters
  (:attr:`Shard.dead_letters`), its delayed items (:attr:`Shard.delays`), its message groups
  (:attr:`Shard.groups`) and its exactly-once receipts (:attr:`Shard.receipts`);
* the ends consumers take from, each with its line of requests (:attr:`Shard.ends`).

The two queue types differ only in where an item goes and how an end is read: a
:class:`FifoShard` appends after the last index (FoundationDB's "Queues" recipe) and has one
end, the front; a :class:`PriorityShard` appends after the last count of a priority (the
"Priority Queues" recipe) and has two ends, ``min`` and ``max``. Each overrides the four
methods that say so (:meth:`Shard.append`, :meth:`Shard.read_end`, :meth:`Shard.where_of`,
:meth:`Shard.peek_candidates`), as FoundationDB's ``DirectoryPartition`` overrides only what
differs from ``DirectoryLayer``.

Every method takes ``tr`` first. Those that write and may be given a Database take effect
exactly once by this shard's receipts (:func:`~fdbqueue._transactions.receipts.exactly_once`).

Source followed: FoundationDB's "Queues" and "Priority Queues" recipes (the appends, the
ends), ``fdb/directory_impl.py`` (``tr`` first, variants as subclasses).
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from fdbqueue import _clock
from fdbqueue._consuming.ends import End, PlainRead, ReadAhead
from fdbqueue._delivery.claims import Leases
from fdbqueue._delivery.deduplication import Deduplication
from fdbqueue._delivery.delays import PROMOTE_RECORDS, DelayedItems
from fdbqueue._delivery.leases import Lease
from fdbqueue._storage import taking
from fdbqueue._storage.dead_letters import DeadLetter, TakenDeadLetter
from fdbqueue._storage.features import DELAYS, GROUPS, JOBS
from fdbqueue._storage.groups import GroupedItem
from fdbqueue._storage.job_records import job_of
from fdbqueue._storage.jobs import Submission
from fdbqueue._storage.priority_ends import max_end_candidates, max_end_items, min_end_items
from fdbqueue._storage.queue_info import QueueInfo
from fdbqueue._storage.store import ItemStore, count_keys
from fdbqueue._storage.taking import Elsewhere
from fdbqueue._storage.transaction_bytes import LIBRARY_TRANSACTION_BUDGET
from fdbqueue._transactions.receipts import exactly_once
from fdbqueue._transactions.transactional import (
    AnyContext,
    require_writable,
    runs_own_transaction,
    transactional,
)

__all__ = ["FifoShard", "PriorityShard", "Shard"]

#: The fewest items :meth:`FifoShard.move_front` moves: fewer are taken where they are (a
#: move costs a transaction, about what taking them there in turn costs).
MIN_MOVE = 64
#: Values written by one enqueue into one shard, with what the dedup ids admitted.
Run = tuple["Shard", list[bytes]]


class Shard:
    """Everything one key range of a queue holds, and what acts on it (see the module
    docstring). Built by :class:`~fdbqueue._queues.router.Router` for its queue; its parts are
    public attributes.

    Args:
        store: the shard's items and metadata (over the queue's own subspace for a queue of
            one shard, else over ``P + pack((k,))``, its ``parent`` the queue's store).
        high_contention: takes and claims given a Database take in line.
        abandon_after: seconds after which a dead consumer's requests leave the line.
        max_deliveries: deliveries after which an expiring item becomes a dead letter.

    Attributes:
        store: the items, counters, type records, held values (:class:`ItemStore`).
        receipts, groups, dead_letters: the store's (exactly-once receipts, message groups,
            dead letters).
        leases: claims and leases (:class:`~fdbqueue._delivery.claims.Leases`).
        delays: delayed items (:class:`~fdbqueue._delivery.delays.DelayedItems`).
        ends: the ends by name (:attr:`END_NAMES`), each an :class:`End`.
    """

    #: How many integers start an item key (the queue type, recorded with it).
    LEADING_INTEGERS: ClassVar[int]
    #: The ends consumers take from.
    END_NAMES: ClassVar[tuple[str, ...]]
    #: The verbs error messages use for a write and for a take.
    WRITE_ACTION: ClassVar[str]
    TAKE_ACTION: ClassVar[str]

    def __init__(
        self,
        store: ItemStore,
        *,
        high_contention: bool,
        abandon_after: float,
        max_deliveries: int | None,
    ) -> None:
        self.store = store
        self.receipts = self.store.receipts
        self.groups = self.store.groups
        self.dead_letters = self.store.dead_letters
        self.leases = Leases(self.store, max_deliveries)
        self.delays = DelayedItems(self.store, self.append_due)
        self.ends = {
            name: End(
                self.store,
                self.leases,
                self.delays,
                functools.partial(self.read_end, name),
                plain_read=self.plain_read(name),
                read_ahead=self.read_ahead(name),
                peek=functools.partial(self.peek, name),
                name=name,
                high_contention=high_contention,
                abandon_after=abandon_after,
                action=self.TAKE_ACTION,
            )
            for name in self.END_NAMES
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.store.subspace!r})"

    # -- what differs between the queue types ---------------------------------------------

    def append(
        self,
        tr: AnyContext,
        encoded: list[bytes],
        where: tuple[Any, ...],
        recorded: Any = None,
        uses: int = 0,
    ) -> None:
        """Write ``encoded`` at the back, in order: of the queue, of a priority, or of a group,
        as ``where`` says (:meth:`where_of`). With ``recorded`` (the feature record's read,
        :meth:`~fdbqueue._storage.store.ItemStore.recorded_type`), the queue's type is checked
        before the first write, and the features ``uses`` recorded
        (:meth:`~fdbqueue._storage.store.ItemStore.check_type`); a foreign key at the back
        raises the type's error first when the record names another type."""
        raise NotImplementedError

    def read_end(
        self, name: str, tr: AnyContext, n: int, snapshot: bool, groups: bool = True
    ) -> list[Any]:
        """The first ``n`` items at the end ``name``, the groups' turns among them unless
        ``groups`` is False (a :data:`~fdbqueue._consuming.ends.ReadEnd`)."""
        raise NotImplementedError

    def plain_read(self, name: str) -> PlainRead:
        """How the end ``name`` reads its first items in a queue that never had a message
        group: :meth:`read_end` with ``groups`` False, as a callable of the store's (or of
        the end's own module) that an :class:`~fdbqueue._consuming.ends.End` calls directly
        (:data:`~fdbqueue._consuming.ends.PlainRead`)."""
        raise NotImplementedError

    def read_ahead(self, name: str) -> ReadAhead | None:
        """:meth:`plain_read` of the end ``name`` with a look at the item behind
        (:data:`~fdbqueue._consuming.ends.ReadAhead`), or None for an end whose take does
        not read its first items in key order from the start (a ``max`` end): the store's
        :meth:`~fdbqueue._storage.store.ItemStore.read_first_ahead` by default."""
        return self.store.read_first_ahead

    def where_of(self, item_key: bytes) -> tuple[Any, ...]:
        """Where an item once at ``item_key`` goes back to (a requeued dead letter): the
        ``where`` of :meth:`append`."""
        raise NotImplementedError

    def peek_candidates(self, tr: AnyContext, name: str) -> Iterator[Any]:
        """The items a take at the end ``name`` would remove, in that order, read lazily with
        read conflict ranges (groups' turns among them)."""
        raise NotImplementedError

    def peek_rank(self, key: bytes) -> Any:
        """Where the item at ``key`` (of this shard) ranks among every shard's in
        ``peek_many``: listings of several shards merge by it (equal ranks: shard by shard)."""
        raise NotImplementedError

    def lease_rank(self, lease: Lease[Any]) -> Any:
        """Where a lease ranks among every shard's in ``leases``: its expiry version (then
        its id), as each shard lists them."""
        return lease.expiry_version, lease.id

    def dead_letter_rank(self, letter: DeadLetter[Any]) -> Any:
        """Where a dead letter ranks among every shard's in ``dead_letters``: the version it
        became one at (then its id), as each shard lists them."""
        return tuple(self.dead_letters.subspace.unpack(letter.key))

    # -- writing --------------------------------------------------------------------------

    def append_due(self, tr: AnyContext, encoded: bytes, where: tuple[Any, ...]) -> None:
        """Append a delayed item that fell due (a :data:`~fdbqueue._delivery.delays.Append`)."""
        self.append(tr, [encoded], where)

    @exactly_once
    def write(
        self,
        tr: AnyContext,
        runs: list[Run],
        where: tuple[Any, ...],
        delay: float,
        dedup: tuple[Deduplication, list[bytes]] | None,
        job: Submission | None = None,
    ) -> list[bool]:
        """Write each run's values into its shard (this one among them), at the back or
        delayed by ``delay`` seconds, in one transaction, exactly once by this shard's
        receipts; with ``dedup``, only the values whose id it admits. The runs into one shard
        are written together, in order (one :meth:`put`). Per value (runs in order), whether
        written. With ``job``, the one value is a job's, and its record is written too when
        the value is (:mod:`fdbqueue._storage.jobs`). Cost: per shard written, :meth:`put`'s;
        with ``dedup``, its reads and writes (:mod:`fdbqueue._delivery.deduplication`); with
        ``job``, one set."""
        require_writable(tr, self.WRITE_ACTION)
        if dedup is None and len(runs) == 1:  # one run, every value written (an enqueue)
            shard, values = runs[0]
            shard.put(tr, values, where, delay, 0 if job is None else JOBS)
            if job is not None:
                job.record(tr, delay)
            return [True] * len(values)
        count = sum(len(values) for _shard, values in runs)
        admitted = [True] * count if dedup is None else dedup[0].admit(tr, dedup[1])
        flags = iter(admitted)
        kept: dict[Shard, list[bytes]] = {}  # each shard's values, in order
        for shard, values in runs:
            kept.setdefault(shard, []).extend(value for value in values if next(flags))
        uses = 0 if job is None or not admitted[0] else JOBS
        for shard, values in kept.items():
            if values:
                shard.put(tr, values, where, delay, uses)
        if job is not None and admitted[0]:
            job.record(tr, delay)
        return admitted

    def write_one(self, tr: AnyContext, encoded: bytes) -> bool:
        """:meth:`write` of one value at the back of this shard, with no delay, id or job (a
        plain enqueue): the same transaction, without their steps. Returns True."""
        if runs_own_transaction(tr, self.WRITE_ACTION):  # (a Transaction is checked there)
            self.receipts.run(tr, functools.partial(self.put_one, encoded=encoded))
            return True
        self.put_one(tr, encoded)
        return True

    def put_one(self, tr: AnyContext, encoded: bytes) -> None:
        """:meth:`put` of one value at the back, inside ``tr``: its plain branch."""
        store = self.store
        self.append(tr, [encoded], (), store.recorded_type(tr))
        store.add_to_enqueued(tr, 1)

    def put(
        self,
        tr: AnyContext,
        encoded: list[bytes],
        where: tuple[Any, ...],
        delay: float,
        uses: int = 0,
    ) -> None:
        """Write ``encoded`` at the back (:meth:`append`), or delayed by ``delay`` seconds,
        after checking the feature record (:mod:`fdbqueue._storage.features`), recording there
        the features it uses first (``uses``, and delays and groups as it uses them), and
        count them in the enqueue counter. Cost: a snapshot point read (the feature record,
        issued first so it overlaps the append's read; an atomic ``bit_or`` on a feature's
        first use), then :meth:`append`'s or
        :meth:`~fdbqueue._delivery.delays.DelayedItems.put`'s, and one atomic add (the
        enqueue counter, :meth:`~fdbqueue._storage.store.ItemStore.add_to_enqueued`)."""
        uses = uses | (GROUPS if len(where) >= self.LEADING_INTEGERS else 0)
        if delay:
            self.store.check_type(tr, self.store.recorded_type(tr), True, uses | DELAYS)
            self.delays.put(tr, encoded, delay, where)
        else:
            self.append(tr, encoded, where, self.store.recorded_type(tr), uses)
        self.store.add_to_enqueued(tr, len(encoded))

    def requeue(self, tr: AnyContext, letters: list[TakenDeadLetter]) -> None:
        """Append dead letters' values again where their items were (:meth:`where_of`), in
        order, and count them in the enqueue counter (as dead letters they had left the
        queue); a job's is ``waiting`` again (:meth:`~fdbqueue._storage.jobs.Jobs.requeued`).
        Cost: an append each (and a job's record change) and one atomic add (none for no
        letter)."""
        for letter in letters:
            self.append(tr, [letter.encoded], self.where_of(letter.item_key))
            job = job_of(letter.encoded)
            if job is not None:
                self.store.jobs.requeued(tr, job)
        if letters:
            self.store.add_to_enqueued(tr, len(letters))

    def withdraw(self, tr: AnyContext, key: bytes, job: bytes) -> bool:
        """Remove the item at ``key`` of the cancelled job ``job`` (a
        :data:`~fdbqueue._storage.jobs.Withdraw`) when it is this shard's and still there: a
        released lease's (a retrying job's: :meth:`~fdbqueue._delivery.claims.Leases.withdraw`),
        a waiting item (counted out of the size), a group's
        (:meth:`~fdbqueue._storage.groups.Groups.withdraw`) or a delayed record
        (:meth:`~fdbqueue._delivery.delays.DelayedItems.withdraw`); whether it did. Cost:
        nothing for another shard's key; else a point read of the item (a read conflict: a
        take of it at the same time conflicts) and a clear and an atomic add, or the
        group's, or the delayed record's."""
        store = self.store
        if self.leases.holds_key(key):  # a retrying job's item, waiting in its lease
            return self.leases.withdraw(tr, key)
        grouped = store.groups.items.contains(key)
        delayed = self.delays.records.contains(key)
        if not (grouped or delayed or store.begin <= key < store.end):
            return False
        found = tr.get(key)
        if not found.present():
            return False  # moved on: the take that meets it drops it
        if delayed:  # a delayed record's value carries its job (DelayedItems.add)
            found_job = job_of(bytes(found))
        else:  # an item's key does (ItemStore.write)
            found_job = store.job_of_item(store.unpack_position(key), bytes(found))
        if found_job != job:
            return False
        if delayed:  # not in the size until it falls due
            self.delays.withdraw(tr, key)
            return True
        if grouped:
            if not store.groups.withdraw(tr, key):
                return False
        else:
            del tr[key]
        store.add_to_size(tr, -1)
        return True

    # -- looking --------------------------------------------------------------------------

    def peek(self, name: str, tr: AnyContext) -> Any:
        """The value a take at the end ``name`` would return, or None (poison skipped): a
        waiting lease's item first (expired, or released and due), as takes take them; then
        the queue's items, the delayed items that fell due among them where the take's
        promotion puts them (:meth:`with_due`). Cost:
        :meth:`~fdbqueue._delivery.claims.Leases.waiting` for one and the due delayed
        records' range read (snapshot reads), then the reads of :meth:`peek_candidates`
        until a decodable value."""
        reader: Any = getattr(tr, "snapshot", tr)
        version: int = tr.get_read_version().wait()
        waiting = iter(self.leases.waiting(reader, version, 1))
        due = self.delays.due(reader, version, PROMOTE_RECORDS)
        candidates = self.with_due(name, self.peek_candidates(tr, name), due)
        return taking.peek_first(self.store, tr, itertools.chain(waiting, candidates))

    def with_due(self, name: str, candidates: Iterator[Any], due: list[Any]) -> Iterator[Any]:
        """``candidates`` (:meth:`peek_candidates` at the end ``name``) with the delayed
        items ``due`` (:meth:`~fdbqueue._delivery.delays.DelayedItems.due`) where a take's
        promotion puts them: a Queue's at the back."""
        return itertools.chain(candidates, due)

    def waiting_values(self, tr: AnyContext, n: int) -> list[Any]:
        """Up to ``n`` ``(item key, value)`` pairs of the leases whose items wait (expired,
        or released and due), soonest expiry first, poison skipped: what takes deliver
        before the queue's items (``peek_many`` lists them first). Cost:
        :meth:`~fdbqueue._delivery.claims.Leases.waiting` through a snapshot view."""
        reader: Any = getattr(tr, "snapshot", tr)
        version: int = reader.get_read_version().wait()
        waiting = self.leases.waiting(reader, version, n)
        return taking.peek(self.store, reader, iter(waiting), n, keyed=True)

    def waiting_elsewhere(self, reader: Any, read_version: int) -> int:
        """How many items wait outside the item range at ``read_version``: leases' items
        (expired, or released and due) and delayed items due but not promoted yet; takes
        take them first. Cost: a range read of the leases expired by their versions and
        one of the due delayed records, through ``reader`` (a snapshot view)."""
        due, _later = self.delays.count_due(reader, read_version)
        return self.leases.count_expired(reader, read_version) + due

    @transactional
    def peek_page(
        self, tr: AnyContext, after: bytes | None, count: int
    ) -> tuple[list[Any], bytes | None, bool]:
        """One page of ``peek_many`` (a :data:`~fdbqueue._queues.base.ReadPage`): on the
        first page the leases' items that wait (expired, or released and due), as takes
        deliver them first (:meth:`waiting_values`); then the items without a group, then
        the delayed items that fell due (which the next take promotes behind them), then
        the groups' items in the order takes serve them
        (:meth:`~fdbqueue._storage.groups.Groups.listed`: a Queue's groups in turn), each a
        ``(key, value)`` pair. Cost: a snapshot range read, more past poison items; where
        the page reaches the groups, :meth:`~fdbqueue._storage.groups.Groups.listed`'s; on
        the first page, :meth:`waiting_values`'s."""
        store = self.store
        waiting = self.waiting_values(tr, count) if after is None and count else []
        wanted = count - len(waiting)
        batch: list[Any] = []
        if wanted and (after is None or after < store.end):
            start = store.begin if after is None or after < store.begin else after + b"\x00"
            batch = store.read(tr, start, store.end, limit=wanted, snapshot=True)
        reader: Any = getattr(tr, "snapshot", tr)  # a snapshot view has no .snapshot
        grouped = after if after is not None and self.groups.items.contains(after) else None
        if len(batch) < wanted and grouped is None:  # the delayed items due, then the groups'
            delayed = after if after is not None and self.delays.records.contains(after) else None
            version: int = reader.get_read_version().wait()
            batch += self.delays.due(reader, version, wanted - len(batch), delayed)
        if len(batch) < wanted:
            batch += self.groups.listed(reader, grouped, wanted - len(batch))
        values = waiting + taking.peek(store, tr, iter(batch), wanted, keyed=True)
        # b"": the items from their beginning (the first page held only leases' items)
        last = bytes(batch[-1].key) if batch else (b"" if wanted == 0 else None)
        return values, last, len(batch) == wanted

    @transactional
    def leases_page(
        self, tr: AnyContext, after: bytes | None, count: int
    ) -> tuple[list[Lease[Any]], bytes | None, bool]:
        """One page of ``leases``. Cost: :meth:`~fdbqueue._delivery.claims.Leases.in_flight`."""
        found = self.leases.in_flight(tr, count, after) if count else []
        return found, found[-1].key if found else None, len(found) == count

    @transactional
    def dead_letters_page(
        self, tr: AnyContext, after: bytes | None, count: int
    ) -> tuple[list[DeadLetter[Any]], bytes | None, bool]:
        """One page of ``dead_letters``. Cost: one range read and a point read per dead
        letter (issued together)."""
        found = self.dead_letters.read(tr, count, after) if count else []
        return found, found[-1].key if found else None, len(found) == count

    def requests_in_line(self, tr: AnyContext, limit: int) -> int:
        """Requests waiting in this shard's lines (at most ``limit``). Cost: one snapshot
        range read of up to ``limit`` keys."""
        lines = self.store.metadata.range(("line",))
        reader: Any = getattr(tr, "snapshot", tr)  # a snapshot view has no .snapshot
        return len(list(reader.get_range(lines.start, lines.stop, limit=limit))) if limit else 0

    def info(self, tr: AnyContext, read_version: int) -> QueueInfo:
        """This shard's figures, read at ``tr``'s read version (``read_version``) with
        snapshot reads; ``oldest`` is the first value in key order (the items without a group
        first), ``oldest_age`` from the ``began`` records (:mod:`fdbqueue._storage.ages`).
        Cost: as :meth:`fdbqueue.Queue.info` for one shard."""
        reader: Any = getattr(tr, "snapshot", tr)
        store = self.store
        # the two counters, issued together before the other reads (one round trip)
        size, enqueued = reader.get(store.size_key), reader.get(store.enqueued_key)
        paused = store.pause.look(reader)  # the queue's key (a shard's is its queue's)
        lines = store.metadata.range(("line",))
        waiting = self.leases.waiting(reader, read_version, 1)
        front = [value for _key, value in self.peek_page(reader, None, 1)[0]]
        active = self.groups.active_count(reader)
        first = taking.peek_first(store, reader, iter(waiting)) if waiting else None
        held, expired, released, since = self.leases.census(reader, read_version)
        due, later = self.delays.count_due(reader, read_version)
        return QueueInfo(
            oldest_age=self.oldest_age(reader, since),
            size=store.counter_value(size) + expired + due,
            enqueued=store.counter_value(enqueued),
            oldest=first if first is not None else (front[0] if front else None),
            requests_in_line=count_keys(reader, lines.start, lines.stop),
            leases_in_flight=held,
            expired_leases=expired,
            dead_letters=count_keys(reader, self.dead_letters.begin, self.dead_letters.end),
            delayed=later + released,
            read_version=read_version,
            groups=active,
            groups_in_flight=active
            - count_keys(reader, self.groups.turns_begin, self.groups.turns_end),
            paused=bool(paused.present()),
        )

    def oldest_age(self, tr: AnyContext, leases_since: Any = ...) -> float | None:
        """Seconds the oldest item of this shard has waited (an upper bound, never below 0),
        or None when none waits (:mod:`fdbqueue._storage.ages`); a lease's item waits from
        when its lease expired or it was released. ``leases_since``: when the
        longest-waiting lease's item began to wait, if the caller read it
        (:meth:`~fdbqueue._delivery.claims.Leases.census`). Cost: snapshot reads: as
        :meth:`~fdbqueue._storage.ages.ItemAges.oldest_began`, for the items and again for
        its groups' ``began_grouped`` records (none while it has no group: an empty range
        read); unless given, a range read of the leases expired by their versions
        (:meth:`~fdbqueue._delivery.claims.Leases.oldest_waiting`)."""
        reader: Any = getattr(tr, "snapshot", tr)
        if leases_since is ...:
            version: int = reader.get_read_version().wait()
            leases_since = self.leases.oldest_waiting(reader, version)
        began = [
            self.store.ages.oldest_began(reader, functools.partial(self._first_key, reader)),
            self.groups.oldest_began(reader),
            None if leases_since is None else leases_since / 1_000_000,
        ]
        known = [seconds for seconds in began if seconds is not None]
        return max(0.0, _clock.now() - min(known)) if known else None

    def _first_key(self, reader: Any, prefix: tuple[Any, ...]) -> bytes | None:
        """The key of the first item under ``prefix`` (outside message groups), or None.
        Cost: one range read of one key through ``reader``."""
        within = self.store.subspace.range(prefix)
        first = (
            self.store.read(reader, within.start, within.stop)
            if prefix
            else self.store.read(reader)
        )
        return bytes(first[0].key) if first else None

    # -- dead letters ---------------------------------------------------------------------

    @exactly_once(wrote=bool)
    def purge_dead_letters(self, tr: AnyContext, limit: int) -> int:
        """Remove up to ``limit`` dead letters (oldest first) with their held values; how
        many. Cost: one range read (a read conflict on what it read), two clears each."""
        require_writable(tr, "purge_dead_letters")
        removed: int = self.dead_letters.drop(tr, limit)
        return removed

    @exactly_once(wrote=bool)
    def requeue_dead_letters(self, tr: AnyContext, limit: int) -> int:
        """Append up to ``limit`` dead letters again (oldest first, within the library's byte
        budget); how many. Cost: one range read, a point read per dead letter, per item two
        clears and an append."""
        if limit == 0:
            return 0
        require_writable(tr, "requeue_dead_letters")
        self.store.check_type(tr, self.store.recorded_type(tr))
        taken = self.dead_letters.take(tr, limit, LIBRARY_TRANSACTION_BUDGET)
        self.requeue(tr, taken)
        return len(taken)

    @exactly_once(wrote=bool)
    def purge_dead_letter(self, tr: AnyContext, key: bytes) -> bool:
        """Remove the dead letter whose record is at ``key``, with its held value; whether it
        was there. Cost: one point read (a read conflict on it) and two clears."""
        require_writable(tr, "purge_dead_letter")
        removed: bool = self.dead_letters.drop_one(tr, key)
        return removed

    @exactly_once(wrote=bool)
    def requeue_dead_letter(self, tr: AnyContext, key: bytes) -> bool:
        """Append the dead letter whose record is at ``key`` again; whether it was there.
        Cost: two point reads, two clears and an append."""
        require_writable(tr, "requeue_dead_letter")
        self.store.check_type(tr, self.store.recorded_type(tr))
        taken = self.dead_letters.take_one(tr, key)
        if taken is None:
            return False
        self.requeue(tr, [taken])
        return True

    # -- leases ---------------------------------------------------------------------------

    def ack(self, tr: AnyContext, lease: Lease[Any], result: bytes | None = None) -> None:
        """Acknowledge ``lease`` (:meth:`fdbqueue.Queue.ack`); a job's ``result``
        (encoded) is kept. Given a Database, exactly once, in a transaction of its own run by
        the receipts (as :func:`~fdbqueue._transactions.receipts.exactly_once` runs it,
        without its wrapper: a hot call); given a Transaction (checked: TypeError for a
        snapshot view), inside it."""
        if runs_own_transaction(tr, "ack"):
            self.receipts.run(
                tr, functools.partial(self.leases.holds.ack, lease=lease, result=result)
            )
        else:
            self.leases.holds.ack(tr, lease, result)

    @exactly_once
    def ack_batches(self, tr: AnyContext, batches: list[tuple[Shard, list[Lease[Any]]]]) -> None:
        """Acknowledge each batch of leases in its shard (this one among them), in one
        transaction, exactly once by this shard's receipts."""
        for shard, leases in batches:
            shard.leases.holds.ack_many(tr, leases)

    @exactly_once
    def release(
        self,
        tr: AnyContext,
        lease: Lease[Any],
        seconds: float,
        error: BaseException | str | None = None,
    ) -> None:
        """Give ``lease``'s item back, claimable after ``seconds``, after ``error``
        (:meth:`fdbqueue.Queue.release`)."""
        self.leases.holds.release(tr, lease, seconds, error)

    @exactly_once
    def dead_letter(
        self, tr: AnyContext, lease: Lease[Any], reason: str, error: BaseException | None = None
    ) -> None:
        """Move ``lease``'s item to the dead letters (:meth:`fdbqueue.Queue.dead_letter`)."""
        self.leases.holds.dead_letter(tr, lease, reason, error)

    @exactly_once
    def extend(self, tr: AnyContext, lease: Lease[Any], seconds: float) -> Lease[Any]:
        """Extend ``lease`` to ``seconds`` from now (:meth:`fdbqueue.Queue.extend`)."""
        extended: Lease[Any] = self.leases.holds.extend(tr, lease, seconds)
        return extended

    def ack_with(
        self,
        database: Any,
        lease: Lease[Any],
        body: Callable[[Any], object],
        encode_result: Callable[[object], bytes | None] | None = None,
    ) -> None:
        """Check that ``lease`` is still held, run ``body(tr)``, then acknowledge ``lease``,
        in one transaction of ``database``, exactly once by this shard's receipts: both
        commit together or not at all. ``body`` is not called for a lease no longer held
        (LeaseNotHeldError, LeaseExpiredError): its item may be another holder's by then.
        With ``encode_result``, a job's result is what ``body`` returned, so encoded."""

        def body_then_ack(tr: Any) -> None:
            self.leases.holds.ack(tr, lease)  # reads (a conflict) and checks the lease first
            returned = body(tr)
            if lease.job_id is not None and encode_result is not None and returned is not None:
                result = encode_result(returned)
                if result is not None:
                    jobs = self.store.jobs
                    if jobs.ttl_of(lease.job_options) > 0:
                        jobs.keep_result(tr, bytes.fromhex(lease.job_id), result)

        self.receipts.run(database, body_then_ack)

    # -- the rest -------------------------------------------------------------------------

    def clear(self, tr: AnyContext) -> None:
        """Remove the shard's items and metadata but its receipts and deduplication records
        (:meth:`~fdbqueue._storage.store.ItemStore.clear`)."""
        self.store.clear(tr)


class FifoShard(Shard):
    """A shard of a :class:`~fdbqueue.Queue`: items at ``(index, random)``, one end, the
    front (FoundationDB's "Queues" recipe)."""

    LEADING_INTEGERS = 1
    END_NAMES = ("front",)
    WRITE_ACTION = "enqueue"
    TAKE_ACTION = "dequeue"

    def append(
        self,
        tr: AnyContext,
        encoded: list[bytes],
        where: tuple[Any, ...],
        recorded: Any = None,
        uses: int = 0,
    ) -> None:
        """After the last index (a snapshot reverse range read, ``limit=1``: enqueues never
        conflict), or after the last item of the group ``where[0]`` when given. Cost: that
        read, a set per value and two atomic adds (a group's: :mod:`fdbqueue._storage.groups`)."""
        store = self.store
        if where:
            bits = store.check_type(tr, recorded, True, uses)
            store.groups.append(tr, where[0], encoded, bits=bits)
            return
        try:  # (tr is writable, never a snapshot view: it has one)
            last = list(tr.snapshot.get_range(store.begin, store.end, limit=1, reverse=True))
            index: int = store.unpack_position(last[0].key)[0] if last else 0
        except ValueError:  # a foreign key: say first if a queue of another type is stored here
            store.check_type(tr, recorded, False)
            raise
        bits = store.check_type(tr, recorded, True, uses)
        store.ages.appended(tr, (), index + 1, len(encoded), found_empty=not last)
        for value in encoded:
            index += 1
            store.write(tr, (index,), value, bits)

    def read_end(
        self, name: str, tr: AnyContext, n: int, snapshot: bool, groups: bool = True
    ) -> list[Any]:
        store = self.store
        if not groups:
            return store.read_first(tr, n, snapshot)
        return store.groups.front(tr, n, snapshot, lambda: store.read_first(tr, n, snapshot))

    def plain_read(self, name: str) -> PlainRead:
        return self.store.read_first

    def move_front(self, tr: AnyContext, target: FifoShard, n: int) -> int:
        """Move this shard's first items without a group, up to ``n`` and at most half of
        what it holds by its size counter, to the back of ``target`` (another shard of the
        queue), in order, in ``tr``; return how many (0 when that is under
        :data:`MIN_MOVE`). A consumer whose home shard is empty moves a run of a crowded
        shard's front into its home, so that one process's consumers spread over the shards
        again (:meth:`~fdbqueue._queues.sharded_end.ShardedEnd.take`); halving to the end, so
        that a crowded shard's last items spread too instead of being taken in turn there.

        Raises:
            QueueTypeError: either shard records another type, shard count or codec.
            ValueError: a key among them is not one of this queue's items.

        Cost: a snapshot point read (the size) and the codec records' until verified, one
        range read of the items moved (a read conflict range over them: a take of the same
        items conflicts), the target's snapshot read of its last index, a snapshot reverse
        range read of one key (when the moved items began, recorded in the target with them:
        :mod:`fdbqueue._storage.ages`), and per item a clear and a set; two atomic adds on the
        size counters and one on the target's signal key (not on the enqueue counters: a move
        is neither an enqueue nor a take). Nothing is moved twice and nothing lost:
        the move is one transaction.
        """
        store = self.store
        records = store.recorded_codec(tr)
        n = min(n, store.size(tr.snapshot) // 2)  # it keeps at least as many as it gives
        if n < MIN_MOVE:
            return 0
        items = store.read(tr, limit=n)
        store.check_codec(records)
        if len(items) < n:
            return 0
        # a foreign key raises before any write
        positions = [store.unpack_position(item.key) for item in items]
        into = target.store
        recorded = into.recorded_type(tr)
        last = into.read(tr, limit=1, reverse=True, snapshot=True)
        index: int = into.unpack_position(last[0].key)[0] if last else 0
        into.check_type(tr, recorded)
        began = store.ages.began_of(tr.snapshot, bytes(items[0].key))
        into.ages.appended(tr, (), index + 1, len(items), not last, at=began)
        store.ages.taken(tr, positions[0], positions[-1], lower=False, higher=False)
        for item, position in zip(items, positions, strict=True):
            del tr[item.key]
            index += 1
            # its own last element: a job's item keeps its id in its key
            key = into.item_key((index,), element=position[-1])
            tr[key] = value = bytes(item.value)
            job = store.job_of_item(position, value)
            if job is not None:
                into.jobs.located(tr, job, key)
        store.add_to_size(tr, -len(items))
        into.add_to_size(tr, len(items))
        into.signal(tr)
        return len(items)

    def where_of(self, item_key: bytes) -> tuple[Any, ...]:
        group = self.groups.group_of(item_key)
        return () if group is None else (group,)

    def peek_rank(self, key: bytes) -> Any:
        """0 for every item: shards number their items apart, so no order holds across
        them; listings go shard by shard."""
        return 0

    def peek_candidates(self, tr: AnyContext, name: str) -> Iterator[Any]:
        ungrouped = taking.forward(self.store, tr, 1, snapshot=False)
        front = list(itertools.islice(ungrouped, 1))  # or a group's turn, at even odds
        turns = self.groups.front(tr, 1, False, lambda: front)
        return itertools.chain(turns, front, ungrouped)


class PriorityShard(Shard):
    """A shard of a :class:`~fdbqueue.PriorityQueue`: items at ``(priority, count, random)``,
    two ends, ``min`` and ``max`` (FoundationDB's "Priority Queues" recipe)."""

    LEADING_INTEGERS = 2
    END_NAMES = ("min", "max")
    WRITE_ACTION = "push"
    TAKE_ACTION = "pop"

    def append(
        self,
        tr: AnyContext,
        encoded: list[bytes],
        where: tuple[Any, ...],
        recorded: Any = None,
        uses: int = 0,
    ) -> None:
        """After the last count of the priority ``where[0]`` (a snapshot reverse range read
        inside the priority, ``limit=1``: pushes never conflict), or after the last item of
        the group ``where[1]`` when given. Cost: that read, a set per value, two atomic adds
        each."""
        store = self.store
        priority = where[0]
        if len(where) > 1:
            bits = store.check_type(tr, recorded, True, uses)
            store.groups.append(tr, where[1], encoded, priority, bits)
            return
        within = store.subspace.range((priority,))
        try:
            last = store.read(tr, within.start, within.stop, reverse=True, snapshot=True)
            count: int = store.unpack_position(last[0].key)[1] + 1 if last else 0
        except ValueError:  # a foreign key: say first if a queue of another type is here
            store.check_type(tr, recorded, False)
            raise
        bits = store.check_type(tr, recorded, True, uses)
        store.ages.appended(tr, (priority,), count, len(encoded), found_empty=not last)
        for value in encoded:
            store.write(tr, (priority, count), value, bits)
            count += 1

    def read_end(
        self, name: str, tr: AnyContext, n: int, snapshot: bool, groups: bool = True
    ) -> list[Any]:
        store = self.store
        highest = name == "max"
        read = max_end_items if highest else min_end_items
        if not groups:
            return read(store, tr, n, snapshot)
        return store.groups.front(tr, n, snapshot, lambda: read(store, tr, n, snapshot), highest)

    def plain_read(self, name: str) -> PlainRead:
        if name == "max":
            return functools.partial(max_end_items, self.store)
        return self.store.read_first  # (min_end_items, without its call)

    def read_ahead(self, name: str) -> ReadAhead | None:
        return None if name == "max" else self.store.read_first_ahead

    def where_of(self, item_key: bytes) -> tuple[Any, ...]:
        group = self.groups.group_of(item_key)
        if group is None:
            return self.store.unpack_position(item_key)[:1]
        return (self.store.unpack_position(item_key)[2], group)

    def peek_rank(self, key: bytes) -> Any:
        """An item without a group by its priority, then its count (as
        :meth:`fdbqueue.PriorityQueue.pop_min` ranks the shards' first items; a delayed
        item due, at the back of its priority), before the groups' items, by group (as each
        shard lists them)."""
        if self.groups.items.contains(key):
            return (1, self.groups.items.unpack(key))
        if self.delays.records.contains(key):
            return (0, self.delays.parse(key).where[0], math.inf)
        return (0, *self.store.unpack_position(key)[:2])

    def with_due(self, name: str, candidates: Iterator[Any], due: list[Any]) -> Iterator[Any]:
        """A PriorityQueue's: each due item at the back of its priority, in take order (the
        lowest priority first; at the ``max`` end, the highest)."""
        highest = name == "max"
        ranked = sorted(due, key=self._priority_of, reverse=highest)
        return heapq.merge(candidates, ranked, key=self._priority_of, reverse=highest)

    def _priority_of(self, item: Any) -> int:
        """The priority of a peek's candidate: an item's, a group's first item's, a due
        delayed item's."""
        if isinstance(item, Elsewhere):
            priority: int = self.delays.parse(item.key).where[0]
            return priority
        if isinstance(item, GroupedItem):
            return item.priority if item.priority is not None else 0
        return self._priority(item.key)

    def _priority(self, key: bytes) -> int:
        priority: int = self.store.unpack_position(key)[0]
        return priority

    def peek_candidates(self, tr: AnyContext, name: str) -> Iterator[Any]:
        highest = name == "max"
        ungrouped = (
            max_end_candidates(self.store, tr, snapshot=False)
            if highest
            else taking.forward(self.store, tr, 1, False)
        )
        front = list(itertools.islice(ungrouped, 1))  # and a group's turn, when better
        turns = self.groups.front(tr, 1, False, lambda: front, highest)
        return itertools.chain(turns, front, ungrouped)
