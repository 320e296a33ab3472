"""Dead letters: items taken out of circulation, kept with the reason, until an operator acts.

An item becomes a dead letter when its leases expired ``max_deliveries`` times
(:mod:`fdbqueue._delivery.leases`), or when the queue's codec cannot decode its value (a *poison*
item: it would otherwise stop every consumer at the head of the queue). Nothing is dropped: a dead
letter keeps the stored bytes unchanged, the item's original key and the reason, and
``requeue_dead_letters`` puts it back at the end of the queue.

Key layout, under the queue's metadata prefix ``P + b"\\xff"``::

    pack(("dead", version, id)) -> pack((item key, deliveries, reason))
    pack(("held", id))          -> the encoded value (:mod:`fdbqueue._storage.held`)

``version`` is the read version of the transaction that moved the item, so dead letters list
oldest first; ``id`` is 16 random bytes (a lease's id when a lease ran out of deliveries).
The record holds the item key only as a value, so no key grows with the subspace prefix twice.

Source followed: message queues' dead-letter queues (for example Amazon SQS's redrive policy),
on FoundationDB's "Queues" recipe.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import fdb.tuple
from fdb.subspace_impl import Subspace

from fdbqueue._storage.held import HeldValues
from fdbqueue._storage.job_records import strip_job_header
from fdbqueue._storage.transaction_bytes import clear_bytes, set_bytes
from fdbqueue.codecs import Codec, decode_or_undecodable

__all__ = ["DEAD_LETTER_ID_BYTES", "DeadLetter", "DeadLetters"]

DEAD_LETTER_ID_BYTES = 16


#: The type of a dead letter's value (covariant, as for :class:`~fdbqueue.Lease`).
T_co = TypeVar("T_co", covariant=True)


@dataclass(frozen=True)
class DeadLetter(Generic[T_co]):
    """An item taken out of circulation.

    Attributes:
        value: the item's value, or an :class:`~fdbqueue.Undecodable` holding the stored
            bytes when the codec cannot decode them.
        deliveries: how many times it was claimed (0 for an item that was never delivered,
            such as a poison item found at the head of the queue).
        reason: why it is here: ``"max_deliveries ..."`` or ``"undecodable: <error>"``.
        id: the dead letter's id (hexadecimal).
        item_key: the item's original key in the queue (internal).
        key: where the record is stored (internal).
    """

    value: T_co
    deliveries: int
    reason: str
    id: str
    item_key: bytes = field(repr=False)
    key: bytes = field(repr=False)


@dataclass(frozen=True)
class TakenDeadLetter:
    """A dead letter removed by :meth:`DeadLetters.take`, with its stored bytes."""

    item_key: bytes
    encoded: bytes


class DeadLetters:
    """The dead letters of one queue (see the module docstring).

    Args:
        metadata: the queue's metadata subspace.
        codec: decodes values for :meth:`list`.
        held: where the values are held.
    """

    def __init__(self, metadata: Subspace, codec: Codec[Any], held: HeldValues) -> None:
        self.subspace = metadata["dead"]
        self.codec = codec
        self.held = held
        dead = self.subspace.range()
        self.begin: bytes = dead.start
        self.end: bytes = dead.stop

    def add(
        self,
        tr: Any,
        item_key: bytes,
        deliveries: int,
        reason: str,
        *,
        held_id: bytes | None = None,
        encoded: bytes | None = None,
    ) -> None:
        """Record a dead letter in ``tr``.

        Args:
            item_key: the item's original key.
            deliveries: how many times it was delivered.
            reason: why it is a dead letter.
            held_id: the id its value is already held under (a lease's); None to hold
                ``encoded`` under a new id.
            encoded: the stored bytes, when not held yet.

        Cost: one set (two when the value is not held yet); the read version, which the
        caller's reads have fetched already.
        """
        if held_id is None:
            if encoded is None:
                raise ValueError("a new dead letter needs its encoded value")
            held_id = os.urandom(DEAD_LETTER_ID_BYTES)
            self.held.put(tr, held_id, encoded)
        version: int = tr.get_read_version().wait()
        tr[self.subspace.pack((version, held_id))] = fdb.tuple.pack((item_key, deliveries, reason))

    def read(self, tr: Any, limit: int, after: bytes | None = None) -> list[DeadLetter[Any]]:
        """Up to ``limit`` dead letters, oldest first, starting after the record key ``after``.

        Cost: one range read, then one point read per dead letter (issued together); reads
        through ``tr`` (pass ``tr.snapshot`` for no read conflicts).
        """
        begin = self.begin if after is None else after + b"\x00"
        records = list(tr.get_range(begin, self.end, limit=limit))
        values = [self.held.get(tr, self.subspace.unpack(kv.key)[1]) for kv in records]
        found = []
        for kv, stored in zip(records, values, strict=True):
            _version, held_id = self.subspace.unpack(kv.key)
            item_key, deliveries, reason = fdb.tuple.unpack(bytes(kv.value))
            raw = bytes(stored) if stored.present() else b""
            value = decode_or_undecodable(self.codec, strip_job_header(raw))
            found.append(DeadLetter(value, deliveries, reason, held_id.hex(), item_key, kv.key))
        return found

    def take(self, tr: Any, limit: int, budget: int | None) -> list[TakenDeadLetter]:
        """Remove up to ``limit`` dead letters, oldest first, and return their stored bytes.

        Stops early once the bytes the caller will write for them (an enqueue's set of the
        value) and the clears made here pass ``budget`` (None: no budget), after at least one.
        Cost: one range read, one point read per dead letter, two clears per dead letter.
        """
        taken: list[TakenDeadLetter] = []
        spent = 0
        records = list(tr.get_range(self.begin, self.end, limit=limit))
        values = [self.held.get(tr, self.subspace.unpack(kv.key)[1]) for kv in records]
        for kv, stored in zip(records, values, strict=True):
            _version, held_id = self.subspace.unpack(kv.key)
            (item_key, _deliveries, _reason) = fdb.tuple.unpack(bytes(kv.value))
            encoded = bytes(stored) if stored.present() else b""
            cost = (
                set_bytes(len(item_key) + 64, len(encoded))
                + clear_bytes(len(kv.key))
                + clear_bytes(len(self.held.key(held_id)))
            )
            if budget is not None and taken and spent + cost > budget:
                break
            spent += cost
            del tr[kv.key]
            self.held.drop(tr, held_id)
            taken.append(TakenDeadLetter(item_key, encoded))
        return taken

    def take_one(self, tr: Any, key: bytes) -> TakenDeadLetter | None:
        """Remove the dead letter stored at the record key ``key`` and return its stored
        bytes; None when no dead letter is stored there (requeued or purged already).
        Cost: two point reads (issued together) and two clears."""
        record, stored = self.one(tr, key)
        if record is None:
            return None
        item_key, _deliveries, _reason = fdb.tuple.unpack(record)
        held_id = self.subspace.unpack(key)[1]
        del tr[key]
        self.held.drop(tr, held_id)
        return TakenDeadLetter(item_key, stored)

    def drop_one(self, tr: Any, key: bytes) -> bool:
        """Remove the dead letter stored at the record key ``key`` with its held value;
        whether one was there. Cost: one point read and two clears."""
        record = tr.get(key)
        if not record.present():
            return False
        del tr[key]
        self.held.drop(tr, self.subspace.unpack(key)[1])
        return True

    def one(self, tr: Any, key: bytes) -> tuple[bytes | None, bytes]:
        """The record stored at ``key`` (None: none) and the held value it names."""
        record = tr.get(key)
        stored = self.held.get(tr, self.subspace.unpack(key)[1])
        if not record.present():
            return None, b""
        return bytes(record), bytes(stored) if stored.present() else b""

    def drop(self, tr: Any, limit: int) -> int:
        """Remove up to ``limit`` dead letters, oldest first, with their held values; return
        how many. Cost: one range read of the records (not of the held values) and two
        clears per dead letter."""
        records = list(tr.get_range(self.begin, self.end, limit=limit))
        for kv in records:
            _version, held_id = self.subspace.unpack(kv.key)
            del tr[kv.key]
            self.held.drop(tr, held_id)
        return len(records)
