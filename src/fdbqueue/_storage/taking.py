"""Taking items from one end of a queue: key checks, poison items moved aside, byte budgets.

Every take of a queue's items, whatever the queue type and mode, goes through :func:`take`
(the items of expired leases through :meth:`~fdbqueue._delivery.claims.Leases.take_expired`):
it reads the next
items at the chosen end (a :data:`Front`), checks that each key is one of the queue's items (a
foreign key raises ValueError naming it, before anything changes), decodes each value, and
moves an item whose value the codec cannot decode (a *poison* item) to the dead letters with
the reason, logging a warning, then goes on with the next item. It stops within a byte budget
counted as FoundationDB counts a transaction (:mod:`fdbqueue._storage.transaction_bytes`), so the
transactions fdbqueue builds never exceed FoundationDB's limit. :func:`peek` and
:func:`forward` look at the same items without taking them, skipping poison items.

Source followed: FoundationDB's "Queues" and "Priority Queues" recipes (the first items at an
end, by ``limit`` range reads).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from fdbqueue._storage.features import ALL, GROUPS, JOBS
from fdbqueue._storage.job_records import JobRecord, job_of
from fdbqueue._storage.store import ItemStore
from fdbqueue._storage.transaction_bytes import clear_bytes, set_bytes
from fdbqueue._transactions.transactional import AnyContext, require_writable

__all__ = [
    "CANCELLED_PER_TAKE",
    "MOVED_ASIDE",
    "Elsewhere",
    "Front",
    "Taken",
    "TakenItem",
    "forward",
    "peek",
    "peek_first",
    "starting_with",
    "take",
]


class _MovedAside:
    """The type of :data:`MOVED_ASIDE`."""

    def __repr__(self) -> str:
        return "MOVED_ASIDE"


#: What a take returns when it only moved items aside (poison items, or leases out of
#: deliveries, to the dead letters) and ran out of its budget: the caller commits that, then
#: takes again.
MOVED_ASIDE: Any = _MovedAside()

#: The most cancelled jobs' items one take drops before it took anything: each costs a
#: point read of its record, one after the other, so a take that met thousands would outlive
#: FoundationDB's five-second transaction. Past it, the take commits what it dropped (given a
#: Database) and takes again. A cancel removes its job's item itself
#: (:meth:`~fdbqueue._storage.jobs.Jobs.cancel`), so a take meets only the few it could not.
CANCELLED_PER_TAKE = 64

#: Reads up to ``n`` items at one end of a queue, in the order a take removes them, skipping
#: items already cleared in the transaction: a list of KeyValues (non-snapshot reads).
Front = Callable[[Any, int], list[Any]]


class Elsewhere(NamedTuple):
    """An item of the queue kept outside its item range, which a take would take now (a
    delayed item that fell due, which the take promotes first), as :func:`peek` lists it: its
    key is its record's, not an item key, so it is not checked as one."""

    key: bytes
    value: bytes


class TakenItem(NamedTuple):
    """An item a take removed: its key, its stored bytes and its decoded value; for a job's
    item (:mod:`fdbqueue._storage.jobs`), its id and the record read (None: none found).
    (A named tuple: one is made per item taken, on the hot path.)"""

    key: bytes
    encoded: bytes
    value: Any
    job: bytes | None = None
    job_record: JobRecord | None = None


class Taken(NamedTuple):
    """What :func:`take` did (a named tuple, made per take).

    Attributes:
        items: the items taken, in take order (cleared, not yet counted out of the size).
        quarantined: poison items moved to the dead letters, and cancelled jobs' items
            dropped (counted out of the size).
        budget_spent: True when it stopped because the byte budget ran out, so more items
            may wait: a caller that took nothing commits and tries again.
    """

    items: list[TakenItem]
    quarantined: int
    budget_spent: bool

    @property
    def moved_aside(self) -> bool:
        """True when the take wrote (moved poison aside, or spent its budget) though it may
        have taken nothing: a caller that took nothing must still commit (with a receipt,
        as for any write), then take again."""
        return self.budget_spent or self.quarantined > 0

    def followed_by(self, more: Taken) -> Taken:
        """This take and ``more`` (a take right after it, in the same transaction) as one."""
        return Taken(
            self.items + more.items,
            self.quarantined + more.quarantined,
            self.budget_spent or more.budget_spent,
        )


#: ``take(codec_record=CHECKED)``: the caller checked the queue's records already.
CHECKED: Any = object()


def take(
    store: ItemStore,
    tr: AnyContext,
    front: Front,
    n: int,
    budget: int | None = None,
    *,
    moving: bool = True,
    codec_record: Any = None,
    end: str | None = None,
    bits: int = ALL,
    ahead: Any = None,
) -> Taken:
    """Remove up to ``n`` decodable items in take order; move poison items aside.

    The codec recorded with the queue is checked first (a queue opened with another codec
    raises :class:`~fdbqueue.QueueTypeError` before anything is cleared). Each item read is
    checked (:meth:`unpack_position`; a foreign key raises ValueError before it or anything
    after it is cleared, or ends the take if items were taken already), then decoded: a
    value the codec cannot decode is moved to the dead letters with the reason (counted out
    of the size, a warning logged), and the take goes on with the next item. The items
    taken are cleared but not counted out of the size: the caller decides where they go.

    Args:
        front: reads the next items at the end to take from.
        n: the most items to take.
        budget: the most bytes (values, keys, overheads) the items taken and quarantined
            may add to the transaction; None for no budget. At least one item is always
            taken or quarantined.
        moving: the caller writes each taken value into a lease in this transaction, so
            the budget counts the values, and a group's item keeps its group without a turn
            until the lease ends (:mod:`fdbqueue._storage.groups`); False when it only returns
            them (a dequeue: the budget then counts clears and quarantines).
        bits: the features the queue used (:mod:`fdbqueue._storage.features`): without
            :data:`~fdbqueue._storage.features.JOBS` no item is looked at as a job's, without
            :data:`~fdbqueue._storage.features.GROUPS` none as a group's.
        codec_record: the future of :meth:`~fdbqueue._storage.store.ItemStore.recorded_codec`, when
            the caller issued it with its own reads (None: the take issues it;
            :data:`CHECKED`: the caller checked it already).
        end: the end ``front`` reads (``"front"``, ``"min"``, ``"max"``) when its reads add
            read conflict ranges over everything between that end and the items taken (a
            plain take, not one in line): the ``began`` records of the priorities beyond
            them are cleared too (:meth:`~fdbqueue._storage.ages.ItemAges.taken`).
        ahead: a job's record read sent with the front's read (:func:`job_of_taken`'s).

    Cost: the reads ``front`` makes (one range read when no item is poison) and a snapshot
    point read of the codec record issued with the first, one clear per item, a range clear
    of the ``began`` records below them (:mod:`fdbqueue._storage.ages`; no read, no read
    conflict), and per poison item two sets and an atomic add; per job's item a point read
    of its record (a read conflict: a cancel at the same time conflicts), and for a plain
    take (not ``moving``) its state change (:meth:`~fdbqueue._storage.jobs.Jobs.taken`).
    A cancelled job's item is cleared and counted out of the size instead of taken, and its
    group (if any) gets its next turn, as for a poison item: no lease holds either. After
    :data:`CANCELLED_PER_TAKE` of them and nothing taken, the take ends with its budget spent
    (the caller commits, then takes again).
    """
    require_writable(tr, "taking items")
    jobs = bits & JOBS
    grouped = bits & GROUPS
    if codec_record is None:
        codec_record = store.recorded_codec(tr)  # overlaps the first read of the front
    elif codec_record is CHECKED:
        codec_record = None  # nothing left to check
    taken: list[TakenItem] = []
    quarantined = 0
    dropped = 0  # cancelled jobs' items dropped
    spent = 0
    ungrouped: list[tuple[Any, ...]] = []  # the positions of the items taken outside a group
    begin, stop = store.begin, store.end
    while len(taken) < n:
        batch = front(tr, n - len(taken))
        if not batch:
            break
        if codec_record is not None:  # before the first clear: a wrong codec changes nothing
            bits &= store.check_codec(codec_record)  # (what the record shows, when it was read)
            jobs = bits & JOBS
            grouped = bits & GROUPS
        try:
            positions = [store.unpack_position(item.key) for item in batch]
        except ValueError:
            if taken or quarantined:
                break  # return what was taken; the next take raises
            raise
        for item, position in zip(batch, positions, strict=False):  # (as long as each other)
            encoded = bytes(item.value)
            if jobs:  # a job's item: its id in its key, its header back for what follows
                encoded = store.item_bytes(position, encoded)
            moved = 0
            if budget is not None:  # no budget (a plain take): nothing to count
                moved = set_bytes(len(item.key) + 64, len(encoded))
                cost = clear_bytes(len(item.key)) + (moved if moving else 0)
                if spent + cost > budget and (taken or quarantined):
                    _forget_ages(store, tr, ungrouped, end)
                    return Taken(taken, quarantined, budget_spent=True)
                spent += cost
            del tr[item.key]
            try:
                value = store.decode(encoded, bits)
            except Exception as error:  # a codec may raise anything on foreign bytes
                store.check_codec(store.recorded_codec(tr, again=True))  # not a wrong codec?
                store.groups.taken(tr, item, holding=False)  # no lease holds it: turn goes on
                store.quarantine(tr, item.key, encoded, error)
                quarantined += 1
                spent += 0 if moving else moved
                continue
            job, record, cancelled = job_of_taken(store, tr, encoded, ahead) if jobs else _NO_JOB
            if job is not None:  # a job's item: its record says whether it goes on
                if cancelled:
                    store.groups.taken(tr, item, holding=False)  # no lease holds it
                    store.add_to_size(tr, -1)  # dropped: it never reaches a consumer
                    quarantined += 1
                    dropped += 1
                    if dropped == CANCELLED_PER_TAKE and not taken:
                        _forget_ages(store, tr, ungrouped, end)
                        return Taken(taken, quarantined, budget_spent=True)
                    continue
                if not moving:  # handed to the caller: done
                    store.jobs.taken(tr, job, record)
            if grouped:
                store.groups.taken(tr, item, holding=moving)  # a group's item: its turn ends
            taken.append(TakenItem(item.key, encoded, value, job, record))
            if begin <= item.key < stop:
                ungrouped.append(position)
            if len(taken) == n:
                break
    _forget_ages(store, tr, ungrouped, end)
    return Taken(taken, quarantined, budget_spent=False)


#: :func:`job_of_taken`'s answer for an item of a queue that never had a job.
_NO_JOB: tuple[None, None, bool] = (None, None, False)


def job_of_taken(
    store: ItemStore, tr: AnyContext, encoded: bytes, ahead: Any = None
) -> tuple[bytes | None, JobRecord | None, bool]:
    """The job whose item a take took (its stored bytes ``encoded``; None for a plain item),
    the job's record (None: none found) and whether the job was cancelled: a cancelled
    job's item never reaches a consumer. ``ahead``: ``(job id, key, future)``, a snapshot read
    of a job's record sent earlier, with the take's front read (a guess at the job there:
    :meth:`~fdbqueue._consuming.ends.End._front_ahead`); used when the item is that job's,
    with the read conflict the point read would add. Cost: for a job's item, a point read
    of its record unless ``ahead`` read it (a read conflict either way: a cancel at the
    same time conflicts)."""
    job = job_of(encoded)
    if job is None:
        return _NO_JOB
    records = store.jobs
    if ahead is not None and ahead[0] == job:  # read with the front: its conflict added now
        tr.add_read_conflict_key(ahead[1])
        record = records.parsed(ahead[2])
    else:
        record = records.parsed(records.read(tr, job))
    return job, record, record is not None and record.state == "cancelled"


def _forget_ages(
    store: ItemStore, tr: AnyContext, ungrouped: list[tuple[Any, ...]], end: str | None
) -> None:
    """Clear the ``began`` records behind the items taken outside a message group (their
    positions ``ungrouped``, in take order: :mod:`fdbqueue._storage.ages`), and with ``end``
    those of the priorities between them and that end, when the take began a bucket: blind,
    no read and no read conflict."""
    if ungrouped:
        lower = end == "front" or end == "min"
        store.ages.taken(tr, ungrouped[0], ungrouped[-1], lower=lower, higher=end == "max")


def peek(
    store: ItemStore, tr: AnyContext, candidates: Iterator[Any], n: int, *, keyed: bool = False
) -> list[Any]:
    """The first ``n`` decodable values of ``candidates`` (KeyValues in take order, read
    lazily in ``tr``; :class:`Elsewhere` items among them), skipping poison items as a take
    would move them aside; foreign keys raise ValueError and another codec recorded with
    the queue raises
    :class:`~fdbqueue.QueueTypeError`, as in :func:`take`; with ``keyed``, ``(key, value)``
    pairs. Cost: the reads of ``candidates`` and a snapshot point read of the codec record
    issued before them."""
    values: list[Any] = []
    if n == 0:
        return values
    codec_record = store.recorded_codec(tr)
    for item in candidates:
        bits = store.check_codec(codec_record)
        stored = bytes(item.value)
        if not isinstance(item, Elsewhere):
            position = store.unpack_position(item.key)
            if bits & JOBS:  # a job's item: its id in its key (Elsewhere's value holds it)
                stored = store.item_bytes(position, stored)
        try:
            value = store.decode(stored, bits)
        except Exception:  # poison: the next take moves it aside
            continue
        values.append((bytes(item.key), value) if keyed else value)
        if len(values) == n:
            break
    return values


def starting_with(first: list[Any], front: Front) -> Front:
    """A :data:`Front` whose first call returns ``first`` (items already read by ``front``
    for as many as that call asks for) and whose later calls are ``front``'s."""
    pending = [first]

    def read(tr: Any, n: int) -> list[Any]:
        if pending:
            return pending.pop()
        return front(tr, n)

    return read


def peek_first(store: ItemStore, tr: AnyContext, candidates: Iterator[Any] | None = None) -> Any:
    """The first decodable value of ``candidates`` (as :func:`peek`; None: the queue's front,
    :func:`forward`, read with read conflict ranges), or None."""
    if candidates is None:
        candidates = forward(store, tr, 1, snapshot=False)
    values = peek(store, tr, candidates, 1)
    return values[0] if values else None


def forward(store: ItemStore, tr: AnyContext, first: int, snapshot: bool) -> Iterator[Any]:
    """Items from the start of the queue, lazily, in batches (the first of ``first``
    items, then 16 at a time): what a take from the front would remove, in order."""
    begin = store.begin
    limit = max(1, first)
    while True:
        batch = store.read(tr, begin, limit=limit, snapshot=snapshot)
        yield from batch
        if len(batch) < limit:
            return
        begin = batch[-1].key + b"\x00"
        limit = 16
