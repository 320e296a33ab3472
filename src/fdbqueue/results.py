"""Served results: items handed to high-contention consumers, and given back when nobody
collects them.

A serving transaction (:mod:`fdbqueue.staging`) moves an item out of the queue into the result
slot of a consumer's request. If that consumer dies before it collects the result, the item
must not stay there: once ``abandon_after`` seconds have passed (measured with read versions,
the clock all clients share), **any** operation that takes from the queue gives it back to
its original key, whether it is a high-contention or a plain dequeue, pop or claim, blocking
or not, and whether or not any contention remains:

* each take looks at the oldest results, with one snapshot range read, when the queue looks
  empty, and otherwise at most once per :data:`LOOK_EVERY` seconds of versions per queue
  object (and whenever the oldest result it saw falls due);
* a serving transaction always looks;
* a consumer blocked on an empty queue wakes when the oldest result it saw falls due.

While an item is served but not collected, ``size()`` counts it (the counter drops when it is
collected), and ``empty()``, which looks at the items ready to take, does not.

Key layout, under the queue's metadata prefix ``P + b"\\xff"``::

    pack(("results", registered version, random, end)) -> pack((item key or None, due version))
    pack(("held", random))                              -> the item's encoded value

A result's key is its request's (:mod:`fdbqueue.staging`), reordered so that the results of
both ends of a priority queue sort together by the read version at which their requests were
registered. Requests are served in that order, so results sort by serving time too, and the
oldest results, the first to fall due, are the first keys. The value is held apart
(:mod:`fdbqueue.held`), so any value the queue accepted can be served. A None item key is the
answer "the queue was empty".

Giving a result back and collecting it conflict (both read the result key and clear it), so
exactly one of them wins; a consumer whose result was given back finds its request gone and
asks again.

Source followed: FoundationDB's "Queues" recipe, "High-Contention Dequeue/Pop Operations";
FoundationDB's developer guide on versions as a shared clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import fdb.tuple

from fdbqueue.codecs import describe_error
from fdbqueue.store import ItemStore
from fdbqueue.taking import Taken
from fdbqueue.transaction_bytes import LIBRARY_TRANSACTION_BUDGET

__all__ = ["LOOK_EVERY", "Collected", "ServedResults", "TakeItems"]

VERSIONS_PER_SECOND = 1_000_000
#: Seconds of versions between two looks for abandoned results by one queue object while its
#: takes find items (when a take finds the queue empty, it always looks).
LOOK_EVERY = 1.0
#: Takes up to ``n`` items from one end of a queue inside a transaction, within a byte budget
#: (:func:`fdbqueue.taking.take` bound to that end): ``(tr, n, budget) -> Taken``.
TakeItems = Callable[[Any, int, "int | None"], Taken]
#: Results one transaction examines, and gives back at most, per look.
LOOK_AT = 8


@dataclass(frozen=True)
class Collected:
    """A result collected by its consumer.

    Attributes:
        found: False when the result was not there (not served yet, or given back).
        value: the item's value; None for the answer "the queue was empty", or when the
            value could not be decoded (``poison`` is then True: it went to the dead letters).
        poison: the served value could not be decoded and was moved to the dead letters.
    """

    found: bool
    value: Any = None
    poison: bool = False


class ServedResults:
    """The served results of one queue (see the module docstring).

    Args:
        store: the queue's items and metadata.
    """

    def __init__(self, store: ItemStore) -> None:
        self.store = store
        self.subspace = store.metadata["results"]
        results = self.subspace.range()
        self.begin: bytes = results.start
        self.end: bytes = results.stop
        self._next_look = 0  # read version from which this object looks again (a hint)
        self._wake_at: float | None = None  # monotonic time the oldest result seen falls due

    def key(self, end: str, registered: int, random: bytes) -> bytes:
        """The result key of the request ``(end, registered, random)``."""
        key: bytes = self.subspace.pack((registered, random, end))
        return key

    def serve(
        self,
        tr: Any,
        result_key: bytes,
        item_key: bytes | None,
        encoded: bytes,
        due_version: int,
    ) -> None:
        """Write a result: the item ``item_key`` (with its ``encoded`` value), or None for
        "the queue was empty"; nobody collecting it by ``due_version`` gives it back.
        Cost: one set, plus one set of the held value."""
        if item_key is not None:
            self.store.held.put(tr, self._held_id(result_key), encoded)
        tr[result_key] = fdb.tuple.pack((item_key, due_version))

    def collect(self, tr: Any, result_key: bytes) -> Collected:
        """Collect a result in ``tr``: clear it and count the item out of the size.

        A value the codec cannot decode goes to the dead letters instead (with the reason).
        Cost: one point read (a read conflict on the result: a give-back and a collect never
        both win), and for an item one point read of the held value, two clears and an
        atomic add.
        """
        stored = tr.get(result_key)
        if not stored.present():
            return Collected(found=False)
        del tr[result_key]
        item_key, _due = fdb.tuple.unpack(bytes(stored))
        if item_key is None:
            return Collected(found=True)
        held_id = self._held_id(result_key)
        encoded = bytes(self.store.held.get(tr.snapshot, held_id))
        self.store.add_to_size(tr, -1)
        try:
            value = self.store.codec.decode(encoded)
        except Exception as error:  # a codec may raise anything on bytes it cannot read
            reason = f"undecodable: {describe_error(error)}"
            self.store.dead_letters.add(tr, item_key, 0, reason, held_id=held_id)
            return Collected(found=True, poison=True)
        self.store.held.drop(tr, held_id)
        return Collected(found=True, value=value)

    def give_back_due(self, tr: Any, *, always: bool = False) -> int:
        """Give back, in ``tr``, results nobody collected before they fell due.

        Looks only when ``always``, or when this object's last look is :data:`LOOK_EVERY`
        seconds of versions old or the oldest result it saw has fallen due. Each result given
        back returns to its item's original key (the size counter already counts it) and
        signals blocked consumers.

        Returns:
            How many items it gave back.

        Cost of a look: one snapshot range read of up to :data:`LOOK_AT` results; per result
        given back, a read conflict on it, a point read of the held value, two clears, a set
        and an atomic add.
        """
        read_version: int = tr.get_read_version().wait()
        if not always and read_version < self._next_look:
            return 0
        records = list(tr.snapshot.get_range(self.begin, self.end, limit=LOOK_AT))
        next_look = read_version + int(LOOK_EVERY * VERSIONS_PER_SECOND)
        oldest_pending: int | None = None
        given = 0
        for kv in records:
            item_key, due_version = fdb.tuple.unpack(bytes(kv.value))
            if due_version > read_version:
                if oldest_pending is None or due_version < oldest_pending:
                    oldest_pending = due_version
                continue
            tr.add_read_conflict_key(kv.key)  # the collector and we must not both win
            del tr[kv.key]
            if item_key is None:
                continue
            held_id = self._held_id(kv.key)
            encoded = bytes(self.store.held.get(tr.snapshot, held_id))
            self.store.held.drop(tr, held_id)
            self.store.put_back(tr, item_key, encoded)
            given += 1
        if len(records) == LOOK_AT and given == LOOK_AT:
            next_look = read_version  # more may be due: look again next time
        if oldest_pending is not None:
            next_look = min(next_look, oldest_pending)
            seconds = (oldest_pending - read_version) / VERSIONS_PER_SECOND
            self._wake_at = time.monotonic() + seconds
        else:
            self._wake_at = None
        self._next_look = next_look
        return given

    def take_with_give_back(
        self, tr: Any, take_items: TakeItems, n: int, budget: int | None = None
    ) -> Taken:
        """Take up to ``n`` items with ``take_items``, and give back due results: when the
        take found nothing, always (then take again from what came back), else when this
        object's next look is due (:meth:`give_back_due`).

        Cost: the take; a look at the results when the queue looks empty, else about once per
        :data:`LOOK_EVERY` seconds.
        """
        budget = LIBRARY_TRANSACTION_BUDGET if budget is None else budget
        taken = take_items(tr, n, budget)
        if taken.items or taken.budget_spent:
            self.give_back_due(tr)
            return taken
        if self.give_back_due(tr, always=True):
            again = take_items(tr, n, budget)
            # Results were given back (a write): say so even if nothing came of them.
            return Taken(again.items, taken.quarantined + again.quarantined, True)
        return taken

    def seconds_until_due(self) -> float | None:
        """Seconds until the oldest result this object last saw pending falls due (0 if it
        has), or None when it saw none: how long a blocked consumer may sleep at most."""
        if self._wake_at is None:
            return None
        return max(0.0, self._wake_at - time.monotonic())

    def _held_id(self, result_key: bytes) -> bytes:
        _registered, random, _end = self.subspace.unpack(result_key)
        held_id: bytes = random
        return held_id
