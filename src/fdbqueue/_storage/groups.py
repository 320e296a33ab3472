"""Message groups: items of one group taken in enqueue order, one at a time under leases, and
the groups served in turn (:class:`Groups`).

Key layout under a queue's (or shard's) metadata subspace ``M``::

    M + pack(("grouped", group, index, random))  -> encoded value   a group's items, FIFO
    M + pack(("group", group))                   -> b""             the group is active
    M + pack(("turns", turn, group))             -> pack((head item key, weight, served))
    M + pack(("groups",))                        -> int64 LE        active groups (atomic add)
    M + pack(("weight", group))                  -> pack((weight,)) a group's weight (absent: 1)
    M + pack(("resume", group))                  -> pack((turn, weight, served))
    M + pack(("turn_of", group))                 -> its turn's key, while it has one

In a PriorityQueue a group's item keys also hold the item's priority, after its index (the
index alone orders the group: its items come out in push order whatever their priorities),
and a turn is ranked by its first item's priority: ``("turns", priority, turn, group)``. The
min end serves the turn of the lowest priority first, the max end the highest (each oldest
turn first within a priority).

A group is *active* from its first item's enqueue until it has no item left and none in a
lease. An active group whose next item may be taken has one *turn*: an entry in the ring of
turns, whose value is the key of the group's first item. A take reads the first turns with one
range read and their first items with point reads issued together; taking a group's item
clears its turn, and, unless the item goes into a lease, gives the group a new turn when it
has more items, numbered by the transaction's read version and, within the transaction, by the
order the turns were given (:func:`new_turn`): after every turn given by a transaction that
committed before it began, and in the order a batch take served the groups (round robin: a
group's backlog delays another group by at most one turn, for single and batch takes alike).
A leased item's group gets its next turn when the lease ends
(acknowledged or dead-lettered); when the lease expires or is released, the same item is
delivered again first, and the group stays without a turn meanwhile: at most one item of a
group is in flight, and claims never see a busy group, so they pass over it at no cost.

Weights: a group of weight ``w`` keeps its turn for up to ``w`` items in a row (its turn
counts them: ``served``). Taken plainly, its next item stays in the same place; taken into a
lease, the place is kept in the group's *resume* record, and the group gets it back when the
lease ends. A weight is read when a group gets a new turn.

What conflicts: turns are written blind (numbered without a read), so takes of different
groups in line never conflict. An enqueue reads the group's active record (a read
conflict on that one key), so it conflicts with the transaction that makes the group
active or inactive at the same time; and it reads the group's last item with a read
conflict (from that item to the group's end), so two overlapping enqueues into one group
conflict and the later one retries behind the first: a group's items come out in commit
order. Enqueues into different groups never conflict.

Items without a group stay where FoundationDB's "Queues" recipe puts them; when both are
waiting, a take serves a group's turn or the ungrouped front with even odds (in a
PriorityQueue, the better priority; even odds between equal ones).

Source followed: SQS FIFO queues' message groups (one group's messages in order, one in
flight) and fair queues; QuiCK (CloudKit's queue on FoundationDB), a queue of queues.
"""

from __future__ import annotations

import itertools
import random
import struct
import threading
import weakref
from collections.abc import Callable
from typing import Any, Protocol

import fdb.tuple
from fdb.subspace_impl import Subspace

from fdbqueue import metrics
from fdbqueue._checks import check_packable_int
from fdbqueue._keys import MAX_KEY_BYTES
from fdbqueue._storage.ages import ItemAges
from fdbqueue._storage.features import ALL
from fdbqueue._transactions.transactional import AnyContext

__all__ = [
    "MAX_GROUP_BYTES",
    "MAX_GROUP_WEIGHT",
    "Group",
    "GroupedItem",
    "Groups",
    "GroupsStore",
    "check_group",
    "check_weight",
    "new_turn",
]

#: What names a group: a str, bytes, an int or a tuple of such values (the tuple layer's).
Group = str | bytes | int | tuple[Any, ...]
#: The most bytes a group may take packed by the tuple layer (SQS allows 128 characters).
MAX_GROUP_BYTES = 1_024
_COUNTER = struct.Struct("<q")


#: Turns one transaction may give in order: a turn is numbered ``read version *
#: TURNS_PER_VERSION + n`` for the ``n``-th turn the transaction gives (a transaction takes
#: fewer items than this: 10,000,000 bytes hold fewer keys).
TURNS_PER_VERSION = 2**20
#: The turns given so far by each transaction still alive: (its read version, how many).
_TURNS_GIVEN: weakref.WeakKeyDictionary[Any, tuple[int, int]] = weakref.WeakKeyDictionary()
_TURNS_LOCK = threading.Lock()
#: For a transaction that cannot be weakly referenced: a process-wide count.
_TURNS_COUNTED = itertools.count()


def new_turn(tr: AnyContext) -> int:
    """The number of a turn ``tr`` gives now: its read version times
    :data:`TURNS_PER_VERSION`, plus how many turns ``tr`` gave before at that read version.
    So turns given by one transaction sort in the order they were given (the groups served
    first get their next turn first, as single takes would give them: a batch take keeps the
    fairness bound exactly), and every turn sorts after those of transactions that committed
    before ``tr`` began. No read (the read version is the transaction's)."""
    version: int = tr.get_read_version().wait()
    with _TURNS_LOCK:
        try:
            last_version, given = _TURNS_GIVEN.get(tr, (version, 0))
        except TypeError:  # not weakly referenceable, or unhashable
            return version * TURNS_PER_VERSION + next(_TURNS_COUNTED) % TURNS_PER_VERSION
        if last_version != version:
            given = 0
        _TURNS_GIVEN[tr] = (version, given + 1)
    return version * TURNS_PER_VERSION + min(given, TURNS_PER_VERSION - 1)


#: The largest weight a group may have.
MAX_GROUP_WEIGHT = 1_000


def check_weight(weight: Any) -> int:
    """Return ``weight`` when it is an int from 1 to :data:`MAX_GROUP_WEIGHT`.

    Raises:
        TypeError: not an int (a bool is refused).
        ValueError: out of that range.
    """
    if isinstance(weight, bool) or not isinstance(weight, int):
        raise TypeError(f"weight must be an int, not {type(weight).__name__}")
    if not 1 <= weight <= MAX_GROUP_WEIGHT:
        raise ValueError(f"weight must be from 1 to {MAX_GROUP_WEIGHT:,}, not {weight}")
    return weight


def _check_group_part(part: Any, top: bool) -> None:
    """Raise unless ``part`` is a str, bytes, int (not a bool, packable) or a tuple of such
    parts, at any depth (no database access)."""
    if isinstance(part, tuple):
        for inner in part:
            _check_group_part(inner, False)
        return
    if isinstance(part, bool) or not isinstance(part, (str, bytes, int)):
        where = "group" if top else "a group's tuple"
        raise TypeError(
            f"{where} must hold only str, bytes, int or tuples of those, not {type(part).__name__}"
        )
    if isinstance(part, int):
        check_packable_int(part, "group" if top else "an int in the group")


def check_group(group: Any) -> Group:
    """Return ``group`` when it can name a group, or raise before anything is written: a
    str, bytes, an int, or a tuple of those (nested tuples too), exactly what comes back
    as the lease's ``group``.

    Raises:
        TypeError: anything else (a bool, float, NaN, None inside a tuple, a UUID, a list).
        ValueError: an int the tuple layer cannot pack (``abs(n) >= 2**2040``), or, packed,
            over :data:`MAX_GROUP_BYTES` bytes.
    """
    _check_group_part(group, True)
    packed = fdb.tuple.pack((group,))
    if len(packed) > MAX_GROUP_BYTES:
        raise ValueError(f"group is {len(packed):,} bytes packed, more than {MAX_GROUP_BYTES:,}")
    checked: Group = group
    return checked


class GroupedItem:
    """A group's first item, as a take reads it: a KeyValue (``key``, ``value``) that also
    carries the key of the group's turn and the group."""

    __slots__ = ("group", "key", "priority", "served", "turn", "turn_key", "value", "weight")

    def __init__(self, key: bytes, value: bytes, turn_key: bytes, turn: tuple[Any, ...]) -> None:
        self.key = key
        self.value = value
        self.turn_key = turn_key
        #: the turn's number, its group, and its first item's priority (None for a Queue)
        self.turn: int = turn[-2]
        self.group: Group = turn[-1]
        self.priority: int | None = turn[0] if len(turn) == 3 else None
        self.weight = 1
        self.served = 0


class GroupsStore(Protocol):
    """What :class:`Groups` uses of its store (an :class:`~fdbqueue._storage.store.ItemStore`,
    which holds the groups: the store is above them, so they name it by what they use)."""

    metadata: Subspace
    leading_integers: int
    metric_attributes: dict[str, Any]

    def write(
        self,
        tr: AnyContext,
        position: tuple[Any, ...],
        encoded: bytes,
        bits: int = ...,
        subspace: Subspace | None = ...,
    ) -> bytes: ...

    def unpack_position(self, key: bytes) -> tuple[Any, ...]: ...

    def signal(self, tr: AnyContext) -> None: ...


class Groups:
    """The message groups of one queue, or of one shard (see the module docstring).

    Args:
        store: the queue's (or shard's) store: its metadata subspace holds the groups, and
            its :meth:`~fdbqueue._storage.store.ItemStore.write` writes their items.
    """

    def __init__(self, store: GroupsStore) -> None:
        metadata = store.metadata
        self.items = metadata.subspace(("grouped",))
        self._items_prefix: bytes = self.items.key()  # (group_of's test, on every claim and ack)
        self.active = metadata.subspace(("group",))
        self.turns = metadata.subspace(("turns",))
        self.turns_begin: bytes = self.turns.range().start
        self.turns_end: bytes = self.turns.range().stop
        self.count_key: bytes = metadata.pack(("groups",))
        self.weights = metadata.subspace(("weight",))
        self.resume = metadata.subspace(("resume",))
        #: each group's turn key, while it has one: where a cancel finds it (:meth:`withdraw`)
        self.turn_of = metadata.subspace(("turn_of",))
        #: a PriorityQueue's groups: item keys and turns hold priorities
        self.prioritized = store.leading_integers == 2
        #: when ranges of each group's positions began (fdbqueue._storage.ages): positions
        #: ``(group, index, ...)``
        self.ages = ItemAges(metadata, self.items, 2, "began_grouped")
        self._store = store

    def check_fits(self, group: Group, priority: int | None = None) -> None:
        """Raise ValueError when a key of ``group``'s items or turns (with ``priority``, a
        PriorityQueue's) could exceed FoundationDB's key size limit (no database access)."""
        ranked = () if priority is None else (priority,)
        turn = self.turns.pack((*ranked, 2**64 * TURNS_PER_VERSION, group))
        longest = max(self.longest_item_key(group, priority), len(turn))
        if longest > MAX_KEY_BYTES:
            raise ValueError(
                f"the group's keys would be up to {longest:,} bytes with this queue's prefix, "
                f"more than FoundationDB's {MAX_KEY_BYTES:,}: use a shorter group"
            )

    def longest_item_key(self, group: Group, priority: int | None = None) -> int:
        """The length of the longest key an item of ``group`` can have, in bytes."""
        ranked = () if priority is None else (priority,)
        return len(self.items.pack((group, 2**64, *ranked, bytes(40))))  # random escaped

    def group_of(self, item_key: bytes) -> Group | None:
        """The group of an item key; None for an item without a group. Cost: a prefix test,
        and the key's unpacking for a group's."""
        if not item_key.startswith(self._items_prefix):  # (Subspace.contains, without its call)
            return None
        group: Group = self.items.unpack(item_key)[0]
        return group

    # -- writing ----------------------------------------------------------------------------

    def append(
        self,
        tr: AnyContext,
        group: Group,
        encoded: list[bytes],
        priority: int | None = None,
        bits: int = ALL,
    ) -> None:
        """Write ``encoded`` values after the group's last item, in order (with ``priority``,
        a PriorityQueue's, each of that priority); make the group active with a turn when it
        was not. ``bits``: the features the queue used, for
        :meth:`~fdbqueue._storage.store.ItemStore.write`.

        Cost: a point read of the active record (a read conflict on that key) and a snapshot
        point read of the group's weight, issued together, a range read of the group's last
        item (``limit=1``, reverse) with a read conflict from that item to the group's end,
        one set per value and two atomic adds (as any item), the ``began_grouped`` record of
        the group's bucket and time slot (a blind atomic ``byte_min`` per bucket the items
        enter; :meth:`~fdbqueue._storage.ages.ItemAges.appended`); for a group made active, two
        sets and an atomic add. The read conflict orders enqueues into one group by commit:
        of two that overlap, the later to commit conflicts and retries after the first's
        items (an index taken from a snapshot read would give both the same index, and
        their random parts would order them). Enqueues into other groups, and takes of
        the group's items but its last, never conflict with it.
        """
        active = tr.get(self.active.pack((group,)))
        weight = tr.snapshot.get(self.weights.pack((group,)))
        members = self.items.range((group,))
        last = list(tr.get_range(members.start, members.stop, limit=1, reverse=True))
        index: int = self.items.unpack(last[0].key)[1] if last else 0
        self.ages.appended(tr, (group,), index + 1, len(encoded), found_empty=not last)
        keys: list[bytes] = []
        for value in encoded:
            index += 1
            position = (group, index) if priority is None else (group, index, priority)
            keys.append(self._store.write(tr, position, value, bits, self.items))
        if not active.present():
            tr[self.active.pack((group,))] = b""
            tr.add(self.count_key, _COUNTER.pack(1))
            metrics.add("groups_active", **self._store.metric_attributes)
            head = keys[0] if not last else self._first(tr, group)
            self._add_turn(tr, group, head, _weight(weight))

    def _first(self, tr: AnyContext, group: Group) -> bytes | None:
        """The key of the group's first item (a range read with a read conflict), or None."""
        members = self.items.range((group,))
        first = list(tr.get_range(members.start, members.stop, limit=1))
        return bytes(first[0].key) if first else None

    def _add_turn(
        self,
        tr: AnyContext,
        group: Group,
        head: bytes | None,
        weight: int,
        served: int = 0,
        turn: int | None = None,
    ) -> None:
        """Give ``group`` a turn, whose first item is ``head``, after every turn given by a
        transaction that committed before ``tr`` began and after every turn ``tr`` gave
        before (:func:`new_turn`: no read); or the turn ``turn`` it had, ``served`` of its
        ``weight`` items served."""
        if head is None:
            return
        if turn is None:
            turn = new_turn(tr)
        ranked = (self.items.unpack(head)[2],) if self.prioritized else ()
        turn_key = self.turns.pack((*ranked, turn, group))
        tr[turn_key] = fdb.tuple.pack((head, weight, served))
        tr[self.turn_of.pack((group,))] = turn_key

    # -- taking -----------------------------------------------------------------------------

    def front(
        self,
        tr: AnyContext,
        n: int,
        snapshot: bool,
        read_items: Callable[[], list[Any]],
        highest: bool = False,
    ) -> list[Any]:
        """Up to ``n`` items in take order: ``read_items()`` (the items without a group, read
        by the caller) and the first items of the first ``n`` groups in turn, interleaved
        (a PriorityQueue's merged by priority: the lowest first, the highest with
        ``highest``, the max end's, whose groups come from the highest priority's turns).

        Cost: a snapshot point read of the active groups' count, issued before
        ``read_items`` (its round trip overlaps); when a group is active, a range read of the
        first ``n`` turns (the max end: first a reverse one of the last) and a point read of
        each turn's item, issued together (with read conflicts unless ``snapshot``).
        """
        count = self.look(tr)
        items = read_items()
        if not self.any_active(count):
            return items
        reader: Any = tr.snapshot if snapshot else tr
        turns = self._first_turns(reader, n, highest)
        values = [reader.get(fdb.tuple.unpack(bytes(turn.value))[0]) for turn in turns]
        heads = [
            self._head(turn, value)
            for turn, value in zip(turns, values, strict=True)
            if value.present()
        ]
        if not heads or not items:
            return heads or items
        if self.prioritized:
            return self._by_priority(heads, items, highest)[:n]
        first, second = (heads, items) if random.random() < 0.5 else (items, heads)
        pairs = itertools.zip_longest(first, second)
        return [item for pair in pairs for item in pair if item is not None][:n]

    def _first_turns(self, reader: Any, n: int, highest: bool) -> list[Any]:
        """The first ``n`` turns in take order: the oldest first (a PriorityQueue's lowest
        priority first; with ``highest``, the highest priority's, oldest first)."""
        if not highest:
            return list(reader.get_range(self.turns_begin, self.turns_end, limit=n))
        last = list(reader.get_range(self.turns_begin, self.turns_end, limit=1, reverse=True))
        if not last:
            return []
        within = self.turns.range(self.turns.unpack(last[0].key)[:1])
        return list(reader.get_range(within.start, within.stop, limit=n))

    def _by_priority(self, heads: list[Any], items: list[Any], highest: bool) -> list[Any]:
        """``heads`` and a PriorityQueue's ``items`` (each in take order) merged by priority,
        even odds between a group's turn and an item of the same priority."""
        sign = -1 if highest else 1
        if highest:  # the turns read are the highest priority's: lower items may wait behind
            # turns not read, so the merge stops at that priority
            items = [item for item in items if self._priority(item) >= heads[0].priority]
        ranked = [
            (sign * head.priority, index, random.random(), head) for index, head in enumerate(heads)
        ]
        ranked += [
            (sign * self._priority(item), index, random.random(), item)
            for index, item in enumerate(items)
        ]
        # within a priority, turns and items each keep their order, interleaved at even odds
        ranked.sort(key=lambda entry: entry[:3])
        return [entry[3] for entry in ranked]

    def _priority(self, item: Any) -> int:
        """A PriorityQueue's ungrouped item's priority (from its key)."""
        priority: int = self._store.unpack_position(item.key)[0]
        return priority

    def _head(self, turn: Any, value: Any) -> GroupedItem:
        """The first item of a turn (a KeyValue of the ring) whose value ``value`` was read."""
        head, weight, served = fdb.tuple.unpack(bytes(turn.value))
        item = GroupedItem(head, bytes(value), bytes(turn.key), self.turns.unpack(turn.key))
        item.weight, item.served = weight, served
        return item

    def taken(self, tr: AnyContext, item: Any, holding: bool) -> None:
        """Note that a take cleared ``item`` (a KeyValue from :meth:`front`): a group's item
        ends the group's turn; unless ``holding`` (it goes into a lease), the group gets
        its next turn now (:meth:`finished`). Nothing for an item without a group."""
        if not isinstance(item, GroupedItem):
            return
        self._end_turn(tr, item.key, item.turn_key, item.group)
        served = item.served + 1
        if holding:
            metrics.add("groups_in_flight", **self._store.metric_attributes)
            if served < item.weight:  # its place waits for the lease's end
                record = fdb.tuple.pack((item.turn, item.weight, served))
                tr[self.resume.pack((item.group,))] = record
            return
        if served < item.weight:  # its turn goes on: the next item, in the same place
            head = self._first(tr, item.group)
            if head is None:
                self._deactivate(tr, item.group)
            self._add_turn(tr, item.group, head, item.weight, served, item.turn)
            return
        self._next_turn(tr, item.group)

    def _end_turn(self, tr: AnyContext, key: bytes, turn_key: bytes, group: Group) -> None:
        """The group's first item ``key`` left (cleared by the caller): its turn ends, and
        its group's ``began_grouped`` record at its position may go."""
        position = self.items.unpack(key)
        self.ages.taken(tr, position, position, lower=False, higher=False)
        del tr[turn_key]
        del tr[self.turn_of.pack((group,))]

    def withdraw(self, tr: AnyContext, key: bytes) -> bool:
        """Remove a group's item at ``key`` (a cancelled job's, found there by the caller)
        without serving it: behind its group's first item, it is cleared; the first, it is
        cleared and its turn passes to the group's next item in the same place (the turn's
        number and its served count kept), or the group becomes inactive. Returns whether it
        was removed: False for a first item whose turn is not noted (its group's item is in
        flight, or the turn predates the note), which the take that meets it drops.

        Cost: a range read of the group's first item (read conflict); for the first item,
        point reads of its noted turn and of the turn, a range read of the next item, and
        the clears and sets of a turn passed on (or of a group made inactive).
        """
        group = self.group_of(key)
        if group is None:
            return False
        if self._first(tr, group) != key:
            del tr[key]  # no turn points at it
            return True
        noted = tr.get(self.turn_of.pack((group,)))
        if not noted.present():
            return False
        turn_key = bytes(noted)
        turn = tr.get(turn_key)
        if not turn.present():
            return False
        head, weight, served = fdb.tuple.unpack(bytes(turn))
        if head != key:
            return False
        del tr[key]
        self._end_turn(tr, key, turn_key, group)
        following = self._first(tr, group)
        if following is None:
            self._deactivate(tr, group)
        else:
            self._add_turn(tr, group, following, weight, served, self.turns.unpack(turn_key)[-2])
        return True

    def finished(self, tr: AnyContext, item_key: bytes) -> None:
        """Note that the lease of the item ``item_key`` ended for good (acknowledged or
        dead-lettered): its group gets its next turn, or becomes inactive when it has no
        item left. Cost: a range read of the group's first item (read conflict), and a set
        and an atomic add to the signal key (blocked consumers wake), or a clear and an atomic
        add."""
        group = self.group_of(item_key)
        if group is None:
            return
        metrics.add("groups_in_flight", -1, **self._store.metric_attributes)
        resume_key = self.resume.pack((group,))
        resumed = tr.snapshot.get(resume_key)  # written by this group's one claim in flight
        if self._next_turn(tr, group, resumed):
            self._store.signal(tr)  # an item is takeable now: wake blocked consumers
        if resumed.present():
            del tr[resume_key]

    def _next_turn(self, tr: AnyContext, group: Group, resumed: Any = None) -> bool:
        """Give ``group`` its next turn (the place ``resumed`` kept, a future of its resume
        record, when present), or make it inactive; whether it got a turn."""
        weight = tr.snapshot.get(self.weights.pack((group,)))
        head = self._first(tr, group)
        if head is None:
            self._deactivate(tr, group)
            return False
        if resumed is not None and resumed.present():
            turn, weight_then, served = fdb.tuple.unpack(bytes(resumed))
            self._add_turn(tr, group, head, weight_then, served, turn)
        else:
            self._add_turn(tr, group, head, _weight(weight))
        return True

    def _deactivate(self, tr: AnyContext, group: Group) -> None:
        """``group`` has no item left and none in a lease: it is inactive (and its
        ``began_grouped`` records go)."""
        del tr[self.active.pack((group,))]
        self.ages.forget(tr, (group,))
        tr.add(self.count_key, _COUNTER.pack(-1))
        metrics.add("groups_active", -1, **self._store.metric_attributes)

    def set_weight(self, tr: AnyContext, group: Group, weight: int) -> None:
        """Record ``group``'s weight (1: the record is cleared); its next turn uses it.
        Cost: a set or a clear; no read."""
        if weight == 1:
            del tr[self.weights.pack((group,))]
        else:
            tr[self.weights.pack((group,))] = fdb.tuple.pack((weight,))

    def weight(self, tr: AnyContext, group: Group) -> int:
        """``group``'s weight (1 unless set). Cost: a snapshot point read."""
        reader: Any = getattr(tr, "snapshot", tr)
        return _weight(reader.get(self.weights.pack((group,))))

    # -- looking ----------------------------------------------------------------------------

    def look(self, tr: AnyContext) -> Any:
        """Start reading the active groups' count (a snapshot point read) for
        :meth:`any_active`."""
        return tr.snapshot.get(self.count_key)

    def any_turn(self, tr: AnyContext) -> bool:
        """Whether a group's item may be taken now: a turn in the ring (a group whose item is
        in flight has none). Cost: a range read of one key, through ``tr`` (with its read
        conflict range unless a snapshot view)."""
        return bool(list(tr.get_range(self.turns_begin, self.turns_end, limit=1)))

    def any_active(self, looked: Any) -> bool:
        """Whether :meth:`look`'s read found a group active."""
        return bool(looked.present()) and _COUNTER.unpack(bytes(looked))[0] > 0

    def oldest_began(self, reader: Any) -> float | None:
        """When the groups' oldest waiting item was enqueued, less than 5 s early (wall-clock
        seconds), or None when no group's item waits. Cost: as
        :meth:`~fdbqueue._storage.ages.ItemAges.oldest_began`, through ``reader`` (a
        snapshot view: no conflicts), with a range read of one key per group looked at."""

        def first_key(prefix: tuple[Any, ...]) -> bytes | None:
            members = self.items.range(prefix)
            first = list(reader.get_range(members.start, members.stop, limit=1))
            return bytes(first[0].key) if first else None

        return self.ages.oldest_began(reader, first_key)

    def listed(self, reader: Any, after: bytes | None, count: int) -> list[Any]:
        """Up to ``count`` of the groups' items (KeyValues) after the item at ``after`` (None:
        from the first), through ``reader``, in the order takes would serve them while
        nothing else changes (``peek_many``). A Queue's: the groups in turn, oldest turn
        first, each for its weight's items in a row (a1 b1 c1 a2 ...), then the items of the
        groups in flight (whose next items wait for a lease's end), group by group. A
        PriorityQueue's: group by group, in key order.

        Cost (a Queue's): a range read of every turn and one of every active record, then
        per group in turn, range reads of its items, a share of ``count`` at a time (those
        of every group issued together); the groups in flight: a range read each, at most.
        A PriorityQueue's: one range read.
        """
        if self.prioritized:
            start = self.items.range().start if after is None else after + b"\x00"
            return list(reader.get_range(start, self.items.range().stop, limit=count))
        ring = [_Turn(self, turn) for turn in reader.get_range(self.turns_begin, self.turns_end)]
        active = [self.active.unpack(kv.key)[0] for kv in reader.get_range(*self._active_range())]
        position = _position_of(self, ring, after)
        found: list[Any] = []
        if position is not None:
            found = self._in_turn(reader, ring, position, count)
        if len(found) == count:
            return found
        in_turn = {turn.group for turn in ring}
        resume = after if position is None else None  # within the groups in flight
        for group in active:
            if group in in_turn or len(found) == count:
                continue
            members = self.items.range((group,))
            if resume is not None and resume >= members.stop:
                continue
            start = members.start if resume is None or resume < members.start else resume
            begin = start if start == members.start else start + b"\x00"
            found += reader.get_range(begin, members.stop, limit=count - len(found))
        return found

    def _active_range(self) -> tuple[bytes, bytes]:
        whole = self.active.range()
        return whole.start, whole.stop

    def _in_turn(
        self, reader: Any, ring: list[_Turn], after: tuple[int, int, int], count: int
    ) -> list[Any]:
        """Up to ``count`` items of the groups in ``ring`` in take order (by round, place in
        the ring, then the group's order), after the place ``after``."""
        share = max(1, -(-count // max(1, len(ring))))
        for place, turn in enumerate(ring):
            turn.start_after(after, place, share)
        found: list[Any] = []
        round_ = max(0, after[0])
        while len(found) < count and any(turn.left for turn in ring):
            for turn in ring:
                if turn.needs(round_):
                    turn.read(reader)  # issued together
            for turn in ring:
                found += turn.serve(reader, round_, count - len(found))
                if len(found) == count:
                    break
            round_ += 1
        return found

    def active_count(self, tr: AnyContext) -> int:
        """How many groups are active (have items, or one in a lease). Cost: a snapshot point
        read."""
        reader: Any = getattr(tr, "snapshot", tr)
        count = reader.get(self.count_key)
        return max(0, _COUNTER.unpack(bytes(count))[0]) if count.present() else 0


def _weight(read: Any) -> int:
    """A group's weight from the read of its weight record (absent: 1)."""
    if not read.present():
        return 1
    weight: int = fdb.tuple.unpack(bytes(read))[0]
    return weight


class _Turn:
    """A group in the ring of turns, as :meth:`Groups.listed` walks it: its items are
    served ``weight`` at a time, round after round (in the first round, what its turn has
    left), read in chunks of a share of the listing."""

    def __init__(self, groups: Groups, turn: Any) -> None:
        head, self.weight, served = fdb.tuple.unpack(bytes(turn.value))
        self.group: Group = groups.turns.unpack(turn.key)[-1]
        self._groups = groups
        self.head: int = groups.items.unpack(head)[1]  # the first item's index
        self.first = self.weight - served  # items its current turn has left
        self.next = 0  # the next item to serve (from the head)
        self._buffer: list[Any] = []  # read, from the next one on
        self._future: Any = None
        self._exhausted = False  # a read found fewer than it asked for
        self._share = self.weight

    @property
    def left(self) -> bool:
        """Whether items may remain."""
        return bool(self._buffer) or not self._exhausted

    def round_of(self, j: int) -> int:
        """The round in which the group's ``j``-th item (from its head) is served."""
        return 0 if j < self.first else 1 + (j - self.first) // self.weight

    def start_after(self, after: tuple[int, int, int], place: int, share: int) -> None:
        """Skip the items served at or before ``after`` (round, place in the ring, j) by
        the group at ``place``; read ``share`` items at a time (at least a turn's)."""
        self._share = max(share, self.weight)
        round_, at, j = after
        if place == at:
            self.next = j + 1
            return
        start = round_ + 1 if place < at else round_
        self.next = 0 if start <= 0 else self.first + (start - 1) * self.weight

    def needs(self, round_: int) -> bool:
        """Whether serving ``round_`` needs a read first."""
        return not self._buffer and not self._exhausted and self.round_of(self.next) <= round_

    def read(self, reader: Any) -> None:
        """Start reading the next chunk of the group's items (from :attr:`next`)."""
        members = self._groups.items.range((self.group,))
        begin = self._groups.items.pack((self.group, self.head + self.next))
        self._future = reader.get_range(begin, members.stop, limit=self._share)

    def serve(self, reader: Any, round_: int, most: int) -> list[Any]:
        """The group's items served in ``round_`` (at most ``most``)."""
        served: list[Any] = []
        while len(served) < most and self.round_of(self.next) == round_:
            if not self._buffer:
                if self._future is None:
                    if self._exhausted:
                        break
                    self.read(reader)
                self._buffer = list(self._future)
                self._exhausted = len(self._buffer) < self._share
                self._future = None
                if not self._buffer:
                    break
            served.append(self._buffer.pop(0))
            self.next += 1
        return served


def _position_of(
    groups: Groups, ring: list[_Turn], after: bytes | None
) -> tuple[int, int, int] | None:
    """Where the item at ``after`` was served in ``ring``: (round, place, j); before every
    place for None; None when its group has no turn (it is in flight, or gone)."""
    if after is None:
        return (-1, -1, -1)
    if not groups.items.contains(after):
        return (-1, -1, -1)
    group, index = groups.items.unpack(after)[:2]
    for place, turn in enumerate(ring):
        if turn.group == group:
            j = index - turn.head
            return (turn.round_of(j), place, j)
    return None
